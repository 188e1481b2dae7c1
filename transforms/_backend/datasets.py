"""TensorFlow's ``DALIDataset`` over a migrated pipeline (a component of DM200): the pipeline
becomes a generator of numpy batches, and the dataset ``tf.data.Dataset.from_generator`` over it,
with the signature ``output_shapes``/``output_dtypes`` gave.

Before::

    pipe = data_pipeline(data_dir, batch_size=BATCH_SIZE, device_id=0)
    shapes = ((BATCH_SIZE, 224, 224, 3), (BATCH_SIZE, 1))
    dtypes = (tf.float32, tf.int32)
    dataset = dali_tf.DALIDataset(pipeline=pipe, batch_size=BATCH_SIZE, output_shapes=shapes,
                                  output_dtypes=dtypes, device_id=0)

After::

    def data_pipeline(data_dir, *, batch_size):
        \"\"\"(images, labels) batches as numpy arrays, without end, as DALIDataset ran them.\"\"\"
        reader = ndd.readers.File(file_root=data_dir, max_batch_size=batch_size)
        # reader(...) gives the next batch, across epochs; tf.data resumes this generator on its own
        # threads, which a next_epoch() loop does not allow
        while True:
            jpegs, labels = reader(batch_size=batch_size)
            images = ndd.decoders.image(jpegs, device="gpu")
            yield np.asarray(ndd.as_tensor(images.cpu())), np.asarray(ndd.as_tensor(labels.cpu()))

    shapes = ((BATCH_SIZE, 224, 224, 3), (BATCH_SIZE, 1))
    dtypes = (tf.float32, tf.int32)
    # from_generator calls data_pipeline anew for each iterator, as DALIDataset started a fresh
    # pipeline; it takes host arrays
    dataset = tf.data.Dataset.from_generator(
        lambda: data_pipeline(data_dir, batch_size=BATCH_SIZE),
        output_signature=tuple(tf.TensorSpec(s, d) for s, d in zip(shapes, dtypes)),
    )

Why: ``DALIDataset`` runs the pipeline without end (no epochs), and each iterator over it starts
a fresh pipeline; ``from_generator`` calls its function anew for each iterator. It resumes the
generator on TensorFlow's own threads, which an ndd ``next_epoch()`` loop cannot cross (it holds
a thread-bound evaluation context across its yields): the reader is called once per step instead,
which gives the same endless stream. ``from_generator`` takes host arrays, so GPU outputs are
copied to the host (``.cpu()``) and back by TensorFlow: a cost DALIDataset did not have.

DALI deserializes the pipeline with the dataset's ``batch_size`` (default 1) as its
``max_batch_size``, whatever the pipeline was made with, while the generator reads the
pipeline's: the dataset migrates only where the two are provably the same value, or where each
branch of an ``if`` made the name a different pipeline (``branch_peers``): there the generator is
called with the dataset's batch size, unless the pipeline's own code reads the one it was made
with.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import kwargs_of, source_of, walk
from .dataset_ops import in_loop, op_reasons
from .iterator_use import IteratorUse
from .model import FollowUp, Graph, Instance

DATASET = "nvidia.dali.plugin.tf.DALIDataset"
#: the names of a pipeline's batch size (its parameter, ``self.batch_size``)
BATCH_NAMES = ("batch_size", "max_batch_size")
#: DALIDataset's positional parameters after ``pipeline``
PARAMS = ("output_dtypes", "output_shapes", "fail_on_device_mismatch")
#: arguments that change nothing about the batches the dataset gives
IGNORED = {
    "batch_size",
    "device_id",
    "fail_on_device_mismatch",
    "num_threads",
    "exec_separated",
    "exec_dynamic",
    "prefetch_queue_depth",
    "cpu_prefetch_queue_depth",
    "gpu_prefetch_queue_depth",
}
ADVICE = (
    "return tf.data.Dataset.from_generator(lambda: batches(...), "
    "output_signature=(tf.TensorSpec(shape, dtype), ...)) from output_shapes/output_dtypes, where "
    "batches() builds the reader and calls reader(batch_size=...) for each step (not a "
    "next_epoch() loop: tf.data resumes the generator on other threads, which an epoch loop does "
    "not allow) and yields np.asarray(ndd.as_tensor(out.cpu())) per output (.reshape(-1) where "
    "its shape has one dimension, as DALIDataset squeezed (batch, 1) to it), and as each "
    "DALIDataset and each DALIIterator op call ran a pipeline of its own, not batches of one "
    "shared pipeline, a pipeline kept for several becomes a function that makes the generator "
    "(self.pipe = lambda: batches(...)), given to each one's from_generator"
)

#: what a ``DALIIterator()`` op's call gives, over such a dataset
OP_TENSORS = "tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()"


def dataset_use(
    ctx: FileContext,
    inst: Instance,
    call: cst.Call,
    use_type: type[IteratorUse],
    op: cst.SimpleStatementLine | None = None,
) -> IteratorUse | FollowUp:
    """``DALIDataset(pipeline=pipe, ...)``, or the call of a ``DALIIterator()`` op (``op``: the
    statement that made it): the use to record (``use_type``, the iterators' ``IteratorUse``,
    framework "tf"), or the follow-up that says why it stays."""
    reasons: list[str] = []
    args = _arguments(call, PARAMS if op is None else (), reasons)
    what = "DALIDataset" if op is None else "the DALIIterator op"
    for key in set(args) - IGNORED - {"pipeline", "output_dtypes", "output_shapes"}:
        reasons.append(f"{key}= is not migrated")
    if "output_dtypes" not in args:
        reasons.append("no output_dtypes (from_generator needs the signature)")
    if in_loop(ctx, call):
        reasons.append(
            "the dataset is made in a loop (the generator's arguments would be read late)"
        )
    if op is not None:
        reasons += op_reasons(ctx, call)
    if op is not None and "output_dtypes" in args and not _listed(ctx, args["output_dtypes"]):
        reasons.append("dtypes is not a list of dtypes the tool can read")
    if reasons:
        advice = ADVICE if op is None else f"{ADVICE}; the op's tensors are {OP_TENSORS}"
        return FollowUp(call, f"{what} is not migrated: {'; '.join(reasons)}", advice)
    use = use_type(call, "tf", [], None, "FILL")
    use.signature = (args.get("output_shapes"), args["output_dtypes"])
    use.op = op
    return use


def _arguments(
    call: cst.Call, params: tuple[str, ...], reasons: list[str]
) -> dict[str, cst.BaseExpression]:
    """The call's arguments by parameter (``shapes``/``dtypes`` as ``output_shapes``/
    ``output_dtypes``); ``params``: the positional parameters after ``pipeline``."""
    args: dict[str, cst.BaseExpression] = {}
    for i, a in enumerate(call.args):
        if a.star:
            reasons.append("*args/**kwargs")
        elif a.keyword is not None:
            key = a.keyword.value
            args[{"shapes": "output_shapes", "dtypes": "output_dtypes"}.get(key, key)] = a.value
        elif i == 0:
            args["pipeline"] = a.value
        elif i - 1 < len(params):
            args[params[i - 1]] = a.value
        else:
            reasons.append("a positional argument after the pipeline")
    return args


def signature_reasons(ctx: FileContext, use: IteratorUse, outputs: int) -> list[str]:
    """The dtypes (and shapes) must say how many outputs there are: tuples (or names every
    assignment of which is such a tuple, as ``if``/``else`` branches give) with one entry per
    output, or a single dtype for a single output."""
    shapes, dtypes = _signature(use)
    d = _values(ctx, dtypes)
    s = _values(ctx, shapes) if shapes is not None else None
    if d and all(isinstance(v, (cst.Tuple, cst.List)) for v in d):
        if any(_length(v) != outputs for v in d) or (
            shapes is not None and (not s or any(_length(v) != outputs for v in s))
        ):
            return [
                "output_dtypes/output_shapes do not give one entry per output of the pipeline "
                f"({outputs})"
            ]
        return []
    if outputs == 1 and isinstance(dtypes, cst.Attribute):
        return []
    return [
        "output_dtypes is not a tuple of dtypes (or one dtype for one output) the tool can read"
    ]


def batch_reasons(ctx: FileContext, inst: Instance, use: IteratorUse) -> list[str]:
    """DALI ran the pipeline with the dataset's ``batch_size`` (default 1; the op's, else the
    first entry of its first shape) as its max_batch_size, whatever the pipeline was made with;
    the generator reads the pipeline's. They must be the same value."""
    args = _arguments(use.call, PARAMS if use.op is None else (), [])
    given = args.get("batch_size")
    if use.op is not None and (given is None or source_of(given) == "-1"):
        given = _first_dim(ctx, args.get("output_shapes"))
    elif given is None:
        given = cst.Integer("1")
    made = _made_batch_size(ctx, inst)
    if given is not None and made is not None and _same(ctx, given, made, use.call):
        return []
    what = "DALIDataset's" if use.op is None else "the op's"
    told = f"`{source_of(given)}`" if given is not None else "one the tool cannot read"
    return [
        f"DALI ran the pipeline with {what} batch size ({told}) as its max_batch_size, which the "
        "tool cannot prove is the batch size the pipeline was made with: give both the same"
    ]


def sized_by_dataset_reasons(graph: Graph) -> list[str]:
    """The generator is called with the dataset's batch size (as DALI ran the pipeline): the
    pipeline's own code must not read the batch size it was made with (its parameter, or
    ``self.batch_size``; the keyword that passes it on is no read)."""
    nodes = [*walk(graph.container), *(n for s in graph.body for n in walk(s))]
    carriers = {id(n.name) for n in nodes if isinstance(n, cst.Param)}
    carriers |= {id(n.keyword) for n in nodes if isinstance(n, cst.Arg) and n.keyword is not None}
    for node in nodes:
        if isinstance(node, cst.Name) and node.value in BATCH_NAMES and id(node) not in carriers:
            return [
                f"the pipeline's code reads `{node.value}`, the batch size it was made with, "
                "while DALI ran it with the DALIDataset's"
            ]
    return []


def _first_dim(ctx: FileContext, shapes: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """The first entry of the first shape of a literal list of shapes."""
    known = _values(ctx, shapes)
    if len(known) != 1 or not isinstance(known[0], (cst.Tuple, cst.List)) or not known[0].elements:
        return None
    first = known[0].elements[0].value
    if isinstance(first, (cst.Tuple, cst.List)) and first.elements:
        return first.elements[0].value
    return None


def _made_batch_size(ctx: FileContext, inst: Instance) -> cst.BaseExpression | None:
    """The batch size the pipeline was made with: the call's ``batch_size=`` (or
    ``max_batch_size=``), else its ``@pipeline_def(batch_size=...)`` in this module."""
    for key in ("batch_size", "max_batch_size"):
        if key in inst.kwargs:
            return inst.kwargs[key].value
    func = inst.call.func
    fn = _module_function(ctx, func.value) if isinstance(func, cst.Name) else None
    for dec in fn.decorators if fn is not None else []:
        if isinstance(dec.decorator, cst.Call):
            found = kwargs_of(dec.decorator).get("batch_size")
            if found is not None:
                return found.value
    return None


def _same(
    ctx: FileContext, given: cst.BaseExpression, made: cst.BaseExpression, site: cst.CSTNode
) -> bool:
    """Equal integers, or the same expression whose names mean the same at the dataset as where
    the pipeline was made: the same scope (the placement checks see that they do not change in
    between), or names that ``site``'s scope does not bind (a decorator's module-level ones)."""
    if isinstance(given, cst.Integer) and isinstance(made, cst.Integer):
        return int(given.value, 0) == int(made.value, 0)
    scope = ctx.scopes.get(site)
    if scope is None or source_of(given) != source_of(made):
        return False
    if ctx.scopes.get(made) is scope:
        return True
    local = {a.name for a in scope.assignments}
    return not any(isinstance(n, cst.Name) and n.value in local for n in walk(given))


def tupled(ctx: FileContext, use: IteratorUse) -> bool:
    """The dataset gives tuples: ``output_dtypes`` is a tuple/list (or a name only ever assigned
    one), not a single dtype."""
    return _listed(ctx, _signature(use)[1])


def _listed(ctx: FileContext, dtypes: cst.BaseExpression) -> bool:
    """``dtypes`` is a tuple/list display, or a name only ever assigned one."""
    known = _values(ctx, dtypes)
    return bool(known) and all(isinstance(v, (cst.Tuple, cst.List)) for v in known)


def _length(value: cst.BaseExpression) -> int | None:
    """How many entries a tuple/list display has (None where one is starred)."""
    assert isinstance(value, (cst.Tuple, cst.List))
    elements = value.elements
    return None if any(isinstance(e, cst.StarredElement) for e in elements) else len(elements)


def _signature(use: IteratorUse) -> tuple[cst.BaseExpression | None, cst.BaseExpression]:
    """``(output_shapes, output_dtypes)`` as :func:`dataset_use` recorded them (a ``tf`` use)."""
    assert use.signature is not None, "a DALIDataset use has its signature"
    return use.signature


def _values(
    ctx: FileContext, expr: cst.BaseExpression | None, depth: int = 0
) -> list[cst.BaseExpression]:
    """What ``expr`` may be: itself, or for a name of this scope every value it is assigned
    (``name = value`` statements, one per branch, or ``a, name = f(...)`` where every ``return``
    of the module's function ``f`` is such a tuple); empty when another binding (a parameter, a
    loop target, an augmented assignment) may give it a value the tool cannot read."""
    if expr is None or depth > 3:
        return []
    if not isinstance(expr, cst.Name):
        return [expr]
    scope = ctx.scopes.get(expr)
    bindings = list(scope.assignments[expr.value]) if scope is not None else []
    values: list[cst.BaseExpression] = []
    for binding in bindings:
        target = ctx.parents.get(binding.node)
        assign = ctx.parents.get(target) if isinstance(target, cst.AssignTarget) else None
        if (
            isinstance(assign, cst.Assign)
            and len(assign.targets) == 1
            and assign.targets[0].target is binding.node
        ):
            values.append(assign.value)
            continue
        returned = _unpacked(ctx, binding.node, depth)
        if not returned:
            return []
        values += returned
    return values


def _unpacked(ctx: FileContext, name: cst.CSTNode, depth: int) -> list[cst.BaseExpression]:
    """``a, name = f(...)``, ``f`` a function of the module whose every ``return`` gives a
    tuple of as many entries: what each return gives ``name`` (empty otherwise)."""
    element = ctx.parents.get(name)
    targets = ctx.parents.get(element)
    target = ctx.parents.get(targets)
    assign = ctx.parents.get(target)
    if not (
        isinstance(element, cst.Element)
        and isinstance(targets, cst.Tuple)
        and isinstance(target, cst.AssignTarget)
        and isinstance(assign, cst.Assign)
        and len(assign.targets) == 1
        and isinstance(assign.value, cst.Call)
        and isinstance(assign.value.func, cst.Name)
    ):
        return []
    index = list(targets.elements).index(element)
    fn = _module_function(ctx, assign.value.func.value)
    returns = (
        [r for r in walk(fn) if isinstance(r, cst.Return) and _owner(ctx, r) is fn]
        if fn is not None
        else []
    )
    out: list[cst.BaseExpression] = []
    for r in returns:
        value = r.value
        if not (
            isinstance(value, cst.Tuple)
            and len(value.elements) == len(targets.elements)
            and not any(isinstance(e, cst.StarredElement) for e in value.elements)
        ):
            return []
        given = _values(ctx, value.elements[index].value, depth + 1)
        if not given:
            return []
        out += given
    return out


def _module_function(ctx: FileContext, name: str) -> cst.FunctionDef | None:
    """The function ``def name`` of the module's top level, where nothing else binds ``name``."""
    found = [s for s in ctx.module.body if isinstance(s, cst.FunctionDef) and s.name.value == name]
    scope = ctx.scopes.get(ctx.module)
    bound = list(scope.assignments[name]) if scope is not None else []
    return found[0] if len(found) == 1 and len(bound) == 1 else None


def _owner(ctx: FileContext, node: cst.CSTNode) -> cst.CSTNode | None:
    """The function (or lambda) ``node`` belongs to."""
    cur = ctx.parents.get(node)
    while cur is not None and not isinstance(cur, (cst.FunctionDef, cst.Lambda)):
        cur = ctx.parents.get(cur)
    return cur


def output_signature(ctx: FileContext, use: IteratorUse, tf: str) -> cst.BaseExpression:
    """``(tf.TensorSpec(shape, dtype), ...)`` for literal tuples, ``tuple(tf.TensorSpec(s, d) for s,
    d in zip(shapes, dtypes))`` for names, ``tf.TensorSpec(shape, dtype)`` for one output."""
    shapes, dtypes = _signature(use)
    none = cst.Name("None")
    if isinstance(dtypes, (cst.Tuple, cst.List)) and (
        shapes is None or isinstance(shapes, (cst.Tuple, cst.List))
    ):
        specs = [
            _spec(
                tf, _shape(use, shapes.elements[i].value) if shapes is not None else none, e.value
            )
            for i, e in enumerate(dtypes.elements)
        ]
        return cst.Tuple([cst.Element(s) for s in specs])
    if isinstance(dtypes, cst.Name) and tupled(ctx, use):
        if shapes is None:
            return cst.parse_expression(f"tuple({tf}.TensorSpec(None, d) for d in {dtypes.value})")
        code = cst.Module([]).code_for_node(shapes)
        return cst.parse_expression(
            f"tuple({tf}.TensorSpec(s, d) for s, d in zip({code}, {dtypes.value}))"
        )
    return _spec(tf, shapes if shapes is not None else none, dtypes)


def _shape(use: IteratorUse, shape: cst.BaseExpression) -> cst.BaseExpression:
    """The op's empty shape is ``None``: the op neither checks nor sets it (``dataset_shapes``)."""
    if use.op is not None and isinstance(shape, (cst.Tuple, cst.List)) and not shape.elements:
        return cst.Name("None")
    return shape


def _spec(tf: str, shape: cst.BaseExpression, dtype: cst.BaseExpression) -> cst.Call:
    func = cst.Attribute(cst.Name(tf), cst.Name("TensorSpec"))
    return cst.Call(func, [cst.Arg(shape), cst.Arg(dtype)])
