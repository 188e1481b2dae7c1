"""Framework iterators over a migrated pipeline: the part of DM200 that recognises
``DALIGenericIterator([pipe], ...)`` (PyTorch, Paddle, JAX), ``DALIClassificationIterator`` and
``DALIRaggedIterator``, follows the iterator wherever the code keeps it, and rewrites the few
places that change. The loader class that replaces the pipeline is written by ``loaders``.

Before::

    pipe = train_pipe(data_dir)
    pipe.build()
    loader = DALIGenericIterator([pipe], ["data", "label"], reader_name="Reader",
                                 last_batch_policy=LastBatchPolicy.PARTIAL)
    for epoch in range(2):
        for data in loader:
            train_step(data[0]["data"], data[0]["label"])
        loader.reset()

After::

    ndd.set_num_threads(4)
    loader = TrainLoader(data_dir)
    for epoch in range(2):
        for data in loader:
            train_step(data[0]["data"], data[0]["label"])

The loader class yields what the iterator yielded (a list of one dict of torch tensors, a dict
of ``jax.Array``s, ...) one epoch per pass, so the code that consumes it stays as it was: loops,
``enumerate``, indexing, ``len(loader)``, a ``return`` from Lightning's ``train_dataloader()``.
What changes: the pipeline's creation (gone; ``num_threads`` becomes ``ndd.set_num_threads``),
the iterator's construction (the loader, with the pipeline's arguments), ``loader.reset()``
(deleted: each pass is an epoch) and, for code that pulls batches with ``next()`` and resets on
``StopIteration``, the reset (``it = iter(loader)`` again).

The iterator is followed through a local name, an attribute of ``self`` (set in one method,
read in the others), ``return`` from a function of the module (to its callers) and ``return``
from a Lightning ``*_dataloader()`` hook. Whatever cannot be followed, or a configuration the
loader does not reproduce exactly, leaves the code as it was with a TODO at the iterator that
says what to write.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import source_of, walk
from .arguments import check_pipeline_args
from .datasets import ADVICE as DATASET_ADVICE
from .datasets import DATASET, dataset_use
from .iterator_follow import Follower, check_uses
from .iterator_use import ANY_READER, IteratorUse
from .model import FollowUp, Instance
from .subclasses import iterator_subclass
from .wrappers import wrapped_iterator

#: framework of each plug-in module
FRAMEWORKS = {
    "nvidia.dali.plugin.pytorch": "torch",
    "nvidia.dali.plugin.paddle": "paddle",
    "nvidia.dali.plugin.jax": "jax",
}
_TORCH = (
    "output_map",
    "size",
    "reader_name",
    "auto_reset",
    "fill_last_batch",
    "dynamic_shape",
    "last_batch_padded",
    "last_batch_policy",
    "prepare_first_batch",
)
#: iterators migrated -> their positional parameters after ``pipelines``
ITERATORS = {
    "nvidia.dali.plugin.pytorch.DALIGenericIterator": _TORCH,
    "nvidia.dali.plugin.pytorch.DALIClassificationIterator": _TORCH[1:],
    "nvidia.dali.plugin.pytorch.DALIRaggedIterator": (*_TORCH[:3], "output_types", *_TORCH[3:]),
    "nvidia.dali.plugin.paddle.DALIGenericIterator": _TORCH,
    "nvidia.dali.plugin.paddle.DALIClassificationIterator": _TORCH[1:],
    "nvidia.dali.plugin.jax.DALIGenericIterator": (
        "output_map",
        "size",
        "reader_name",
        "auto_reset",
        "last_batch_padded",
        "last_batch_policy",
        "prepare_first_batch",
        "sharding",
        "pmap_compatible",
    ),
}
RAGGED = "nvidia.dali.plugin.pytorch.DALIRaggedIterator"
POLICY_CLASSES = tuple(
    f"nvidia.dali.plugin.{m}.LastBatchPolicy" for m in ("base_iterator", "pytorch", "paddle", "jax")
)
#: arguments left at these values change nothing
DEFAULTS = {
    "size": "-1",
    "last_batch_padded": "False",
    "fill_last_batch": "None",
    "output_types": "None",
    "sharding": "None",
    "pmap_compatible": "None",
}
#: arguments that change nothing about the batches
HARMLESS = {"prepare_first_batch", "dynamic_shape"}
#: Lightning hooks whose return value the Trainer iterates once per epoch (and sizes with len())

#: what to write instead of a PyTorch iterator the tool cannot migrate
BY_HAND_TORCH = (
    "write a loader class instead: build the reader once in __init__ (with max_batch_size= if you "
    "read its get_metadata()), and in __iter__ run one epoch (for ... in "
    "reader.next_epoch(batch_size=...)), yielding [{name: output.torch(), ...}] as the iterator "
    "did; delete reset()"
)
#: iterators of other frameworks, or shapes of them, that stay: what they are, what to write
BY_HAND = {
    "nvidia.dali.plugin.tf": ("DALIDataset (TensorFlow) is not migrated", DATASET_ADVICE),
    "nvidia.dali.plugin.jax": (
        "this JAX iterator is not migrated",
        "write a loader class whose __iter__ runs one epoch of "
        "reader.next_epoch(batch_size=...) and yields "
        "{name: jax.dlpack.from_dlpack(ndd.as_tensor(output)), ...}",
    ),
    "nvidia.dali.plugin.paddle": (
        "this Paddle iterator is not migrated",
        "write a loader class whose __iter__ runs one epoch of "
        "reader.next_epoch(batch_size=...) and yields "
        "[{name: paddle.from_dlpack(ndd.as_tensor(output)), ...}]",
    ),
    "nvidia.dali.plugin.mxnet": (
        "MXNet iterators are not migrated",
        "iterate the epochs of the reader (reader.next_epoch()) and convert each output with "
        "mx.nd.from_dlpack(ndd.as_tensor(output))",
    ),
}


# -- recognising the iterator ---------------------------------------------------------------------


def _enclosing_call(ctx: FileContext, ref: cst.CSTNode) -> cst.Call | None:
    """The call ``ref`` is passed to, directly or as an element of a list/tuple argument."""
    node = ctx.parents.get(ref)
    if isinstance(node, cst.Element):
        node = ctx.parents.get(ctx.parents.get(node))
    if isinstance(node, cst.Arg):
        call = ctx.parents.get(node)
        if isinstance(call, cst.Call):
            return call
    return None


def iterator_use(ctx: FileContext, inst: Instance, ref: cst.CSTNode) -> FollowUp | str | None:
    """Called for a reference to the pipeline object that is not ``pipe.build()`` /
    ``pipe.run()``. Returns None when it is no framework iterator, "" when the iterator is
    recorded on ``inst.iterators``, or the follow-up for an iterator that cannot migrate."""
    call = _enclosing_call(ctx, ref)
    q = ctx.qualname(call.func) if call is not None else None
    if call is not None and q == DATASET:  # TensorFlow: a tf.data.Dataset from a generator
        found = dataset_use(ctx, inst, call, IteratorUse)
        if isinstance(found, FollowUp):
            return found
        inst.iterators.append(found)
        return ""
    sub = (
        iterator_subclass(ctx, call, tuple(ITERATORS))
        if call is not None and q not in ITERATORS
        else None
    )
    if sub is not None and not sub[2]:
        q = sub[1]
    wrapped = (
        wrapped_iterator(ctx, ref, tuple(ITERATORS)) if q not in ITERATORS and not sub else None
    )
    if isinstance(wrapped, str):
        return FollowUp(call, f"the iterator made in {_call_name(call)} is not migrated: {wrapped}")
    if wrapped is not None:  # made in a wrapper class's __init__ from the pipeline passed in
        call, q = wrapped[2], wrapped[4]
    if call is None or q not in ITERATORS:
        return iterator_hint(ctx, ref)
    reasons: list[str] = []
    use = _analyse(ctx, inst, call, q, reasons)
    if use is not None and sub is not None:
        use.subclass = sub[0]
    if use is not None and wrapped is not None:
        use.call, use.wrapper = wrapped[1], (wrapped[0], ref, wrapped[3])
        call = use.call
    if use is not None and not inst.local:
        if wrapped is not None or not isinstance(ref, cst.Attribute):
            return iterator_hint(ctx, ref)
        use.kept_in = ref
    if use is not None:
        follower = Follower(ctx, use, reasons)
        follower.value(call, 0)
        follower.finish()
        if use.kept_in is None:  # (a kept pipeline's one loader serves every such call)
            inst.copies *= use.copies
        check_uses(ctx, use, reasons)
    if reasons or use is None:
        return FollowUp(
            call,
            f"{_call_name(call)} is not migrated: {'; '.join(dict.fromkeys(reasons))}",
            _advice(q),
        )
    inst.iterators.append(use)
    return ""


def _advice(q: str | None) -> str:
    for prefix, (_, advice) in BY_HAND.items():
        if q and q.startswith(prefix + "."):
            return advice
    return BY_HAND_TORCH


def iterator_hint(ctx: FileContext, ref: cst.CSTNode) -> FollowUp | None:
    """The follow-up for a framework iterator over ``ref`` that is not migrated (a pipeline kept
    other than in one local name, another framework's iterator, a subclass), or None when
    ``ref`` is not handed to a framework iterator."""
    call = _enclosing_call(ctx, ref)
    q = ctx.qualname(call.func) if call is not None else None
    if call is None:
        return None
    if not q or not q.startswith("nvidia.dali.plugin."):
        why = _subclass_reason(ctx, call)
        return FollowUp(call, why[0], why[1]) if why is not None else None
    if q not in ITERATORS:
        for prefix, (what, advice) in BY_HAND.items():
            if q == prefix or q.startswith(prefix + "."):
                return FollowUp(call, what, advice)
        return FollowUp(call, f"{q.rsplit('.', 1)[-1]} is not migrated", BY_HAND_TORCH)
    if _per_device_list(ctx, ref) and q.startswith("nvidia.dali.plugin.pytorch"):
        return FollowUp(
            call,
            f"{_call_name(call)} over a list of pipelines (one per GPU) is not migrated",
            PER_DEVICE_ADVICE,
        )
    return FollowUp(
        call, f"{_call_name(call)} over a pipeline kept here is not migrated", _advice(q)
    )


#: what to write for an iterator over several pipelines, one per GPU of the process
PER_DEVICE_ADVICE = (
    "write a loader class instead: in __init__ build one reader per pipeline (its shard_id=, "
    "num_shards=), and in __iter__ zip their epochs (reader.next_epoch(batch_size=...)), run "
    "pipeline i's operators under `with ndd.Device(\"gpu\", i):` and yield a list of one dict "
    "per pipeline ([{name: output.torch(), ...}, ...]) as the iterator did; delete reset()"
)


def _per_device_list(ctx: FileContext, ref: cst.CSTNode) -> bool:
    """``ref`` is a name handed to the iterator that a list display or comprehension of more
    than one pipeline bound (``pipes = [make(device_id=i) for i in range(n)]``)."""
    if not isinstance(ref, cst.Name) or not isinstance(ctx.parents.get(ref), cst.Arg):
        return False
    scope = ctx.scopes.get(ref)
    if scope is None or ref.value not in scope:
        return False
    for binding in scope[ref.value]:
        target = ctx.parents.get(getattr(binding, "node", None))
        assign = ctx.parents.get(target) if isinstance(target, cst.AssignTarget) else None
        value = assign.value if isinstance(assign, cst.Assign) else None
        if isinstance(value, cst.ListComp) or (
            isinstance(value, cst.List) and len(value.elements) > 1
        ):
            return True
    return False


def _call_name(call: cst.Call) -> str:
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else "the iterator"


def _subclass_reason(ctx: FileContext, call: cst.Call) -> tuple[str, str] | None:
    """``MyIterator([pipe], ...)`` where ``class MyIterator(DALIGenericIterator)`` is defined in
    this module: what to do by hand (its methods may change anything about the batches)."""
    if not isinstance(call.func, cst.Name):
        return None
    for stmt in ctx.nodes_of(cst.ClassDef):
        if stmt.name.value == call.func.value:
            bases = [ctx.qualname(b.value) or "" for b in stmt.bases]
            base = next((b for b in bases if b.startswith("nvidia.dali.plugin.")), None)
            if base is None:
                return None
            name, parent = stmt.name.value, base.rsplit(".", 1)[-1]
            sub = iterator_subclass(ctx, call, tuple(ITERATORS))
            why = f" ({'; '.join(sub[2])})" if sub is not None and sub[2] else ""
            return (
                f"{name} subclasses {parent} and is not migrated{why}",
                "write a loader class whose __iter__ runs one epoch of "
                f"reader.next_epoch(batch_size=...) and yields what {name}.__next__ returned, "
                f"built from the outputs as {parent} gave them (output.torch() for data[0][name])",
            )
    return None


def _arguments(
    call: cst.Call, params: tuple[str, ...], reasons: list[str]
) -> dict[str, cst.BaseExpression]:
    """The iterator's arguments by parameter name, without those left at their defaults."""
    args: dict[str, cst.BaseExpression] = {}
    for i, a in enumerate(call.args):
        if a.star:
            reasons.append("*args/**kwargs")
        elif a.keyword is not None:
            args[a.keyword.value] = a.value
        elif i == 0:
            args["pipelines"] = a.value
        elif i - 1 < len(params):
            args[params[i - 1]] = a.value
    return {k: v for k, v in args.items() if source_of(v) != DEFAULTS.get(k) and k not in HARMLESS}


def _analyse(
    ctx: FileContext, inst, call: cst.Call, q: str, reasons: list[str]
) -> IteratorUse | None:
    args = _arguments(call, ITERATORS[q], reasons)
    framework = FRAMEWORKS[q.rsplit(".", 1)[0]]
    pipes = args.pop("pipelines", None)
    if isinstance(pipes, (cst.List, cst.Tuple)) and len(pipes.elements) != 1:
        reasons.append(
            "a list of several pipelines (one per GPU) is not migrated: by hand, run one process "
            "per GPU (e.g. torchrun) that builds one pipeline with shard_id=<rank>, "
            "num_shards=<world size> and device_id=<local rank> and wraps it alone "
            "(DALIGenericIterator([pipe], ...)), which dali-migrate then migrates; each process's "
            "batch is what data[rank] was"
        )
    for key in ("sharding", "pmap_compatible"):
        if key in args:
            reasons.append(f"{key}= (batches assembled over several devices) is not migrated")
    output_map = _output_map(args.pop("output_map", None), q, reasons)
    sparse_lists = (
        _output_types(ctx, args.pop("output_types", None), reasons) if q == RAGGED else set()
    )
    reader_name = _reader_name(args.pop("reader_name", None), reasons)
    size, size_reader, claimed = None, None, []
    if "size" in args:
        size, size_reader, claimed = _size(ctx, inst, args.pop("size"), reasons)
        if reader_name is not None:
            reasons.append(
                "size= and reader_name= are given together (DALI's iterator refuses that)"
            )
    padded = _flag(args.pop("last_batch_padded", None), "last_batch_padded", reasons)
    if padded and reader_name is not None:
        reasons.append(
            "last_batch_padded= is given with reader_name= (DALI's iterator refuses that)"
        )
    policy = _policy(
        ctx, args.pop("last_batch_policy", None), args.pop("fill_last_batch", None), reasons
    )
    if framework == "jax" and policy == "PARTIAL":
        reasons.append("JAX's iterator has no PARTIAL policy (DALI refuses it)")
    if q == RAGGED and size is not None and policy == "PARTIAL":
        reasons.append(
            "DALIRaggedIterator with size= and PARTIAL fails in DALI 2.4 (no _output_categories)"
        )
    auto_reset = args.pop("auto_reset", None)
    for key in args:
        reasons.append(f"{key}= is not migrated")
    if reader_name is None and size is None and size_reader is None:
        # without reader_name and size the iterator forces FILL, unpadded: it never ends an epoch
        policy, padded = "FILL", False
    if output_map is None:
        return None
    use = IteratorUse(call, framework, output_map, reader_name, policy, size, size_reader, padded)
    use.auto_reset = auto_reset is not None and not (
        isinstance(auto_reset, cst.Name) and auto_reset.value in ("False", "None")
    )
    use.claimed, use.sparse_lists = claimed, sparse_lists
    return use


def _output_map(om: cst.BaseExpression | None, q: str, reasons: list[str]) -> list[str] | None:
    if om is None:
        if q.endswith("DALIClassificationIterator"):
            return ["data", "label"]
        reasons.append("no output_map")
        return None
    items = om.elements if isinstance(om, (cst.List, cst.Tuple)) else None
    if items is None or not all(isinstance(e.value, cst.SimpleString) for e in items):
        reasons.append("output_map is not a list of string literals")
        return None
    names = [e.value.evaluated_value for e in items]  # type: ignore[union-attr]
    if not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
        reasons.append("output_map is not a list of distinct names")
        return None
    return names


def _reader_name(rn: cst.BaseExpression | None, reasons: list[str]) -> str | None:
    if rn is None or (isinstance(rn, cst.Name) and rn.value == "None"):
        return None
    if isinstance(rn, cst.SimpleString):
        return rn.evaluated_value  # type: ignore[return-value]
    if isinstance(rn, (cst.Name, cst.Attribute)):
        # DALI's iterator fails unless reader_name names a reader of the pipeline: a variable
        # there names the pipeline's one reader (checked where the reader is known)
        return ANY_READER
    reasons.append("reader_name is not a string literal or a variable")
    return None


def _flag(value: cst.BaseExpression | None, name: str, reasons: list[str]) -> bool:
    if value is None:
        return False
    if isinstance(value, cst.Name) and value.value in ("True", "False"):
        return value.value == "True"
    reasons.append(f"{name} is not True or False")
    return False


def _policy(
    ctx: FileContext,
    p: cst.BaseExpression | None,
    fill: cst.BaseExpression | None,
    reasons: list[str],
) -> str:
    policy = "FILL"
    if p is not None:
        pq = ctx.qualname(p) if isinstance(p, cst.Attribute) else None
        match = [pq[len(c) + 1 :] for c in POLICY_CLASSES if pq and pq.startswith(c + ".")]
        if not match or match[0] not in ("FILL", "PARTIAL", "DROP"):
            reasons.append("last_batch_policy is not LastBatchPolicy.FILL/PARTIAL/DROP")
        else:
            policy = match[0]
    if fill is not None:
        if isinstance(fill, cst.Name) and fill.value in ("True", "False"):
            policy = "FILL" if fill.value == "True" else "PARTIAL"
        else:
            reasons.append("fill_last_batch is not True, False or None")
    return policy


def _size(ctx: FileContext, inst, expr: cst.BaseExpression, reasons: list[str]):
    """``size=``: an expression of names the loader's caller has, in which ``pipe.epoch_size("R")``
    (of this pipeline) may appear once and becomes the reader's ``epoch_size_padded``:
    (the expression, the reader name or None, the pipeline references the iterator claims)."""
    pipe = inst.variable
    calls = [n for n in walk(expr) if isinstance(n, cst.Call) and _is_epoch_size(n, pipe)]
    names = [n for n in walk(expr) if isinstance(n, cst.Name) and n.value == pipe]
    if len(calls) > 1 or len(names) != len(calls):
        reasons.append(
            f"size={source_of(expr)} is not migrated (only an expression with at most one "
            f'{pipe}.epoch_size("<reader '
            'name>")): give the reader a name and pass reader_name= instead'
        )
        return None, None, []
    if calls:
        return expr, calls[0].args[0].value.evaluated_value, [calls[0].func.value]
    if isinstance(expr, cst.Integer) and int(expr.value, 0) <= 0:
        reasons.append(f"size={source_of(expr)} is not a positive size")
    return expr, None, []


def _is_epoch_size(call: cst.Call, pipe: str | None) -> bool:
    return (
        isinstance(call.func, cst.Attribute)
        and isinstance(call.func.value, cst.Name)
        and call.func.value.value == pipe
        and call.func.attr.value == "epoch_size"
        and len(call.args) == 1
        and not call.args[0].star
        and (call.args[0].keyword is None or call.args[0].keyword.value == "name")
        and isinstance(call.args[0].value, cst.SimpleString)
    )


RAGGED_TAGS = {
    "DENSE_TAG": "dense",
    "SPARSE_LIST_TAG": "sparse_list",
    "SPARSE_COO_TAG": "sparse_coo",
}


def _output_types(
    ctx: FileContext, expr: cst.BaseExpression | None, reasons: list[str]
) -> set[int]:
    """DALIRaggedIterator's ``output_types``: the indices of the SPARSE_LIST_TAG outputs; dense
    outputs read like DALIGenericIterator's, SPARSE_COO_TAG is a reason."""
    if expr is None:
        return set()
    items = expr.elements if isinstance(expr, (cst.List, cst.Tuple)) else None
    tags = []
    for e in items or ():
        v = e.value
        if isinstance(v, cst.SimpleString):
            tags.append(v.evaluated_value)
        elif (
            isinstance(v, cst.Attribute)
            and (ctx.qualname(v) or "").startswith(RAGGED + ".")
            and (v.attr.value in RAGGED_TAGS)
        ):
            tags.append(RAGGED_TAGS[v.attr.value])
        else:
            tags.append(None)
    if items is None or not all(t in ("dense", "sparse_list", "sparse_coo") for t in tags):
        reasons.append("output_types is not a list of DALIRaggedIterator tags")
    elif "sparse_coo" in tags:
        reasons.append(
            "DALIRaggedIterator's SPARSE_COO_TAG output is not migrated: by hand, build the torch "
            "sparse COO tensor from the samples of the ndd.Batch ([t.torch() for t in "
            "batch.tensors])"
        )
    return {k for k, t in enumerate(tags) if t == "sparse_list"}


# -- following the iterator ------------------------------------------------------------------------


DATA_ITERATOR = "nvidia.dali.plugin.jax.data_iterator"
#: @data_iterator forwards these to the pipeline when the call does not give them
DATA_ITERATOR_DEFAULTS = {"num_threads": "4"}


def data_iterator_decorator(ctx: FileContext, fn: cst.FunctionDef) -> cst.Decorator | None:
    """The ``@data_iterator(...)`` decorator of ``fn`` (JAX), if it has one."""
    for d in fn.decorators:
        expr = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
        if ctx.qualname(expr) == DATA_ITERATOR:
            return d
    return None


def data_iterator_instances(
    ctx: FileContext, fn: cst.FunctionDef, config: dict[str, cst.Arg], followups: list[FollowUp]
) -> list[Instance]:
    """Each call of a ``@data_iterator`` function makes a pipeline and the JAX iterator over it
    (configured by the decorator's ``config``): an instance whose iterator is followed from the
    call. What cannot be followed is a follow-up (the caller refuses the definition then)."""
    scope = ctx.scopes.get(fn)
    refs = (
        [r.node for a in scope.assignments[fn.name.value] if a.node is fn for r in a.references]
        if scope
        else []
    )
    instances = []
    for ref in in_source_order_nodes(ctx, refs):
        inst = _call_instance(ctx, fn, ref, followups)
        if inst is None:
            continue
        reasons: list[str] = []
        fake = cst.Call(
            cst.Name("data_iterator"),
            [cst.Arg(cst.Name("pipe"))]
            + [cst.Arg(a.value, keyword=cst.Name(k)) for k, a in config.items()],
        )
        use = _analyse(ctx, inst, fake, "nvidia.dali.plugin.jax.DALIGenericIterator", reasons)
        if "devices" in config:
            reasons.append("devices= (one pipeline per device) is not migrated")
        if use is not None:
            use.call = inst.call
            Follower(ctx, use, reasons).value(inst.call, 0)
            check_uses(ctx, use, reasons)
        if reasons or use is None:
            followups.append(
                FollowUp(
                    inst.call,
                    f"{fn.name.value}(...) is not migrated: {'; '.join(reasons)}",
                    BY_HAND["nvidia.dali.plugin.jax"][1],
                )
            )
            continue
        for key, value in DATA_ITERATOR_DEFAULTS.items():
            inst.kwargs.setdefault(key, cst.Arg(cst.parse_expression(value), keyword=cst.Name(key)))
        inst.iterators.append(use)
        instances.append(inst)
    return instances


def _call_instance(
    ctx: FileContext, fn: cst.FunctionDef, ref: cst.CSTNode, followups: list[FollowUp]
) -> Instance | None:
    """``fn(...)`` as an instance: its keyword arguments that are no parameter of ``fn`` are the
    pipeline's (``batch_size``, ``num_threads``, ``device_id``)."""
    call = ctx.parents.get(ref)
    name = fn.name.value
    if not (isinstance(call, cst.Call) and call.func is ref) or any(a.star for a in call.args):
        followups.append(
            FollowUp(ref, f"`{name}` is used here other than by calling it with plain arguments")
        )
        return None
    stmt = ctx.enclosing_statement(call)
    params = {p.name.value for p in [*fn.params.params, *fn.params.kwonly_params]}
    kwargs = {
        a.keyword.value: a
        for a in call.args
        if a.keyword is not None and a.keyword.value not in params
    }
    unsupported = check_pipeline_args(kwargs, f"at `{name}(...)`", checkpoints=False)
    if unsupported or not isinstance(stmt, cst.SimpleStatementLine):
        followups.append(
            FollowUp(
                call, "; ".join(unsupported) or f"`{name}(...)` is part of a compound statement"
            )
        )
        return None
    return Instance(stmt, None, call, kwargs, label=f"{name}(...)")


def in_source_order_nodes(ctx: FileContext, nodes: list[cst.CSTNode]) -> list[cst.CSTNode]:
    return sorted(nodes, key=lambda n: (ctx.positions[n].start.line, ctx.positions[n].start.column))
