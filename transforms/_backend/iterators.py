"""Framework iterators over a migrated pipeline (issue 5 items 1 and 2): the part of DM200 that
turns ``DALIGenericIterator([pipe], ...)`` / ``DALIClassificationIterator`` / ``DALIRaggedIterator``
and the loops over it into loops over the epochs of the dynamic-mode generator.

Before::

    pipe = train_pipe(data_dir)
    loader = DALIGenericIterator([pipe], ["data", "label"], reader_name="Reader",
                                 last_batch_policy=LastBatchPolicy.PARTIAL)
    steps = len(loader) * 2
    for epoch in range(2):
        for data in loader:
            train_step(data[0]["data"], data[0]["label"])
        loader.reset()

After::

    def train_pipe(data_dir, *, batch_size=64):
        \"\"\"The epochs DALIGenericIterator gave: next() gives the next one, a generator of (images, labels) batches.\"\"\"
        reader = ndd.readers.File(file_root=data_dir, max_batch_size=batch_size)

        def batches():
            \"\"\"(images, labels) batches epoch after epoch, without end, as Pipeline.run() gave them.\"\"\"
            while True:
                for jpegs, labels in reader.next_epoch(batch_size=batch_size):
                    ...
                    yield images, labels

        plan = dali_reader_epochs(reader.get_metadata(), batch_size, "PARTIAL")
        return DaliIteratorEpochs(batches(), plan)

    pipe = train_pipe(data_dir)
    steps = len(pipe) * 2
    for epoch in range(2):
        for data in next(pipe):
            train_step(data[0].torch(), data[1].torch())

Why this shape: the generator the back end emits already reproduces the ``pipe.run()`` stream
exactly (dali-semantics section 3); a framework iterator only cuts that stream into epochs (how
many batches, the last one trimmed for PARTIAL, one extra read and dropped for DROP, samples read
ahead credited for FILL without padding: ``plugin/base_iterator.py``). So the pipeline function
returns a ``DaliIteratorEpochs`` (emitted once per module, like the plans): ``next()`` gives an
epoch, ``len()`` what ``len(iterator)`` gave, and an epoch left early (``break``) is resumed by the
next ``next()``, as DALI's iterator ignores ``reset()`` until its epoch is over. The policy
arithmetic is a plan: ``dali_reader_epochs`` (``reader_name=``, from the reader's metadata, built
with ``max_batch_size``, pitfall 4) or ``dali_size_epochs`` (``size=`` without ``reader_name``:
an integer literal, or ``pipe.epoch_size("Reader")``, which is ``epoch_size_padded``, row 12).
FILL over a reader with ``pad_last_batch=True``, with no ``len()`` and no early exit, needs no
helper: one ``next_epoch()`` is one epoch of the iterator (row 35). An iterator without
``reader_name`` and ``size`` never ends an epoch: the loop runs over the endless generator itself.

Loops over the loader become loops over one epoch (``next(pipe)``); ``data[0]["name"]`` becomes
``data[k].torch()`` for output ``k`` of ``output_map`` (a list of per-sample tensors for a
DALIRaggedIterator SPARSE_LIST_TAG output); ``len(loader)`` becomes ``len(pipe)`` (for FILL over
an unpadded reader, whose count changes per epoch, only inside a loop over it or before the first
one); ``loader.reset()`` disappears. What cannot be proved equal gives a reason and the pipeline
stays as it was: several pipelines (one per GPU), iterator subclasses, SPARSE_COO_TAG, other
``size=`` expressions, other frameworks' iterators.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Diagnostic, Edit

from .._cst import fresh_name, in_source_order, walk
from . import runtime
from .docstrings import is_generated_doc
from .edits import removed_stmt
from .model import FollowUp, Graph, Instance, Refused

#: PyTorch iterators this module migrates -> their positional parameters after ``pipelines``
TORCH_ITERATORS = {
    "nvidia.dali.plugin.pytorch.DALIGenericIterator": (
        "output_map", "size", "reader_name", "auto_reset", "fill_last_batch", "dynamic_shape",
        "last_batch_padded", "last_batch_policy", "prepare_first_batch",
    ),
    "nvidia.dali.plugin.pytorch.DALIClassificationIterator": (
        "size", "reader_name", "auto_reset", "fill_last_batch", "dynamic_shape",
        "last_batch_padded", "last_batch_policy", "prepare_first_batch",
    ),
    "nvidia.dali.plugin.pytorch.DALIRaggedIterator": (
        "output_map", "size", "reader_name", "output_types", "auto_reset", "fill_last_batch", "dynamic_shape",
        "last_batch_padded", "last_batch_policy", "prepare_first_batch",
    ),
}
RAGGED = "nvidia.dali.plugin.pytorch.DALIRaggedIterator"
POLICY_CLASSES = ("nvidia.dali.plugin.base_iterator.LastBatchPolicy", "nvidia.dali.plugin.pytorch.LastBatchPolicy")

#: iterators of other frameworks: what to do by hand
BY_HAND = {
    "nvidia.dali.plugin.jax": (
        "JAX iterators are not migrated yet",
        "iterate the migrated generator and convert each ndd.Batch with "
        "jax.dlpack.from_dlpack(ndd.as_tensor(batch))",
    ),
    "nvidia.dali.plugin.tf": (
        "DALIDataset (TensorFlow) is not migrated yet",
        "wrap the migrated generator in tf.data.Dataset.from_generator, converting each ndd.Batch "
        "with np.asarray(ndd.as_tensor(batch))",
    ),
    "nvidia.dali.plugin.paddle": (
        "Paddle iterators are not migrated yet",
        "iterate the migrated generator and convert each ndd.Batch with "
        "paddle.utils.dlpack.from_dlpack(ndd.as_tensor(batch))",
    ),
    "nvidia.dali.plugin.mxnet": (
        "MXNet iterators are not migrated",
        "iterate the migrated generator and convert each ndd.Batch with mx.nd.from_dlpack(ndd.as_tensor(batch))",
    ),
}

#: what to write instead of a PyTorch iterator the tool cannot migrate
BY_HAND_TORCH = (
    "loop over the epochs of the migrated generator (one reader.next_epoch() per epoch), converting each "
    "ndd.Batch with .torch()"
)

EPOCHS_CLASS = "DaliIteratorEpochs"
READER_PLAN = "dali_reader_epochs"
SIZE_PLAN = "dali_size_epochs"



def helper_source(name: str) -> str:
    """The text of the runtime definition ``name``, as it is copied into the output."""
    return inspect.getsource(getattr(runtime, name))


@dataclass
class IteratorUse:
    """``loader = DALIGenericIterator([pipe], ...)`` and what is done with ``loader``."""

    stmt: cst.SimpleStatementLine
    call: cst.Call
    name: str
    output_map: list[str]
    reader_name: str | None
    policy: str
    loops: list[cst.CSTNode] = field(default_factory=list)  # the reference to replace in each loop
    resets: list[cst.SimpleStatementLine] = field(default_factory=list)
    reads: list[tuple[cst.Subscript, str, int]] = field(default_factory=list)  # data[0]["x"], data, k
    mode: str = ""  # set when the generator is emitted: "plain", "helper" or "stream"
    #: size= without reader_name: the literal, or the reader name of ``pipe.epoch_size("name")``
    size: cst.BaseExpression | None = None
    size_reader: str | None = None
    last_batch_padded: bool = False
    claimed: list[cst.CSTNode] = field(default_factory=list)  # pipeline references this iterator owns
    lens: list[tuple[cst.Name, str]] = field(default_factory=list)  # len(loader): the name, "loop"/"first"/"other"
    early_exit: bool = False  # a loop over the iterator can leave an epoch before its end
    sparse_lists: set[int] = field(default_factory=set)  # DALIRaggedIterator SPARSE_LIST_TAG outputs


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
    if call is None or not q or not q.startswith("nvidia.dali.plugin."):
        return iterator_hint(ctx, ref)
    if q not in TORCH_ITERATORS:
        return iterator_hint(ctx, ref)
    reasons: list[str] = []
    use = _analyse(ctx, inst, call, q, reasons)
    if reasons:
        return FollowUp(call, f"{_call_name(call)} is not migrated: {'; '.join(reasons)}", BY_HAND_TORCH)
    inst.iterators.append(use)
    return ""


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
    for prefix, (what, advice) in BY_HAND.items():
        if q == prefix or q.startswith(prefix + "."):
            return FollowUp(call, what, advice)
    if q not in TORCH_ITERATORS:
        return FollowUp(call, f"{q.rsplit('.', 1)[-1]} is not migrated", BY_HAND_TORCH)
    return FollowUp(call, f"{_call_name(call)} over a pipeline kept here is not migrated", BY_HAND_TORCH)


def _call_name(call: cst.Call) -> str:
    func = call.func
    return func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else "the iterator"


def _subclass_reason(ctx: FileContext, call: cst.Call) -> tuple[str, str] | None:
    """``MyIterator([pipe], ...)`` where ``class MyIterator(DALIGenericIterator)`` is defined in
    this module: what to do by hand (its methods may change anything about the batches)."""
    if not isinstance(call.func, cst.Name):
        return None
    for stmt in ctx.module.body:
        if isinstance(stmt, cst.ClassDef) and stmt.name.value == call.func.value:
            bases = [ctx.qualname(b.value) or "" for b in stmt.bases]
            base = next((b for b in bases if b.startswith("nvidia.dali.plugin.")), None)
            if base is None:
                return None
            name, parent = stmt.name.value, base.rsplit(".", 1)[-1]
            return (
                f"{name} subclasses {parent} and is not migrated",
                f"by hand, loop over the epochs of the migrated generator as for {parent} (each batch a tuple "
                f"of ndd.Batch whose .torch() is the tensor {parent} put in data[0][name]) and move what {name} "
                "adds (its __next__ and other overrides) into that loop",
            )
    return None


def _analyse(ctx: FileContext, inst, call: cst.Call, q: str, reasons: list[str]) -> IteratorUse | None:
    params = TORCH_ITERATORS[q]
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
    # arguments left at their defaults change nothing
    for key, default in (("size", "-1"), ("last_batch_padded", "False"), ("fill_last_batch", "None"), ("output_types", "None")):
        if key in args and _code(args[key]) == default:
            del args[key]
    pipes = args.get("pipelines")
    if isinstance(pipes, (cst.List, cst.Tuple)) and len(pipes.elements) != 1:
        reasons.append(
            "a list of several pipelines (one per GPU) is not migrated: by hand, run one process per GPU "
            "(e.g. torchrun) that builds one pipeline with shard_id=<rank>, num_shards=<world size> and "
            "device_id=<local rank> and wraps it alone (DALIGenericIterator([pipe], ...)), which dali-migrate "
            "then migrates; each process's batch is what data[rank] was"
        )
    output_map = ["data", "label"] if q.endswith("DALIClassificationIterator") else None
    if "output_map" in args:
        om = args["output_map"]
        items = om.elements if isinstance(om, (cst.List, cst.Tuple)) else None
        if items is None or not all(isinstance(e.value, cst.SimpleString) for e in items):
            reasons.append("output_map is not a list of string literals")
        else:
            output_map = [e.value.evaluated_value for e in items]
            if any(isinstance(n, str) is False for n in output_map) or len(set(output_map)) != len(output_map):
                reasons.append("output_map is not a list of distinct names")
    elif output_map is None:
        reasons.append("no output_map")
    sparse_lists = _output_types(ctx, args.get("output_types"), reasons) if q == RAGGED else set()
    reader_name = None
    if "reader_name" in args:
        rn = args["reader_name"]
        if isinstance(rn, cst.SimpleString):
            reader_name = rn.evaluated_value
        elif not (isinstance(rn, cst.Name) and rn.value == "None"):
            reasons.append("reader_name is not a string literal")
    size, size_reader, claimed = None, None, []
    if "size" in args:
        size, size_reader, claimed = _size(ctx, inst, args["size"], reasons)
        if reader_name is not None:
            reasons.append("size= and reader_name= are given together (DALI's iterator refuses that)")
    last_batch_padded = False
    if "last_batch_padded" in args:
        lbp = args["last_batch_padded"]
        if reader_name is not None:
            reasons.append("last_batch_padded= is given with reader_name= (DALI's iterator refuses that)")
        elif not (isinstance(lbp, cst.Name) and lbp.value in ("True", "False")):
            reasons.append("last_batch_padded is not True or False")
        else:
            last_batch_padded = lbp.value == "True"
    policy = "FILL"
    if "last_batch_policy" in args:
        p = args["last_batch_policy"]
        pq = ctx.qualname(p) if isinstance(p, cst.Attribute) else None
        match = [pq[len(c) + 1 :] for c in POLICY_CLASSES if pq and pq.startswith(c + ".")]
        if not match or match[0] not in ("FILL", "PARTIAL", "DROP"):
            reasons.append("last_batch_policy is not LastBatchPolicy.FILL/PARTIAL/DROP")
        else:
            policy = match[0]
    if "fill_last_batch" in args:
        f = args["fill_last_batch"]
        if isinstance(f, cst.Name) and f.value in ("True", "False"):
            policy = "FILL" if f.value == "True" else "PARTIAL"
        elif not (isinstance(f, cst.Name) and f.value == "None"):
            reasons.append("fill_last_batch is not True, False or None")
    if q == RAGGED and "size" in args and policy == "PARTIAL":
        reasons.append("DALIRaggedIterator with size= and PARTIAL fails in DALI 2.4 (no _output_categories): use reader_name=")
    if reader_name is None and "size" not in args:
        # without reader_name and size the iterator forces FILL (and no padding): it never ends an epoch
        policy, last_batch_padded = "FILL", False
    assign = ctx.parents.get(call)
    stmt = ctx.parents.get(assign)
    if not (
        isinstance(assign, cst.Assign)
        and len(assign.targets) == 1
        and isinstance(assign.targets[0].target, cst.Name)
        and isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
    ):
        reasons.append("the iterator is not assigned to one name (`loader = DALIGenericIterator(...)`)")
        return None
    if reasons:
        return None
    use = IteratorUse(stmt, call, assign.targets[0].target.value, output_map, reader_name, policy)
    use.size, use.size_reader, use.claimed = size, size_reader, claimed
    use.last_batch_padded, use.sparse_lists = last_batch_padded, sparse_lists
    _follow(ctx, inst, assign, use, reasons)
    return use


def _size(ctx: FileContext, inst, expr: cst.BaseExpression, reasons: list[str]):
    """``size=``: an integer literal, or ``pipe.epoch_size("Reader")`` of this pipeline (which
    becomes the reader's ``get_metadata()["epoch_size_padded"]``, dali-semantics row 12):
    (literal or None, reader name or None, the pipeline reference the iterator claims)."""
    if isinstance(expr, cst.Integer) and int(expr.value, 0) > 0:
        return expr, None, []
    pipe = inst.assign.targets[0].target.value
    if (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and isinstance(expr.func.value, cst.Name)
        and expr.func.value.value == pipe
        and expr.func.attr.value == "epoch_size"
        and len(expr.args) == 1
        and not expr.args[0].star
        and (expr.args[0].keyword is None or expr.args[0].keyword.value == "name")
        and isinstance(expr.args[0].value, cst.SimpleString)
    ):
        return None, expr.args[0].value.evaluated_value, [expr.func.value]
    reasons.append(
        f"size={_code(expr)} is not migrated (only an integer literal or {pipe}.epoch_size(\"<reader name>\")): "
        "give the reader a name and pass reader_name= instead, or compute the size by hand from "
        "reader.get_metadata()[\"epoch_size_padded\"]"
    )
    return None, None, []


RAGGED_TAGS = {"DENSE_TAG": "dense", "SPARSE_LIST_TAG": "sparse_list", "SPARSE_COO_TAG": "sparse_coo"}


def _output_types(ctx: FileContext, expr: cst.BaseExpression | None, reasons: list[str]) -> set[int]:
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
        elif isinstance(v, cst.Attribute) and (ctx.qualname(v) or "").startswith(RAGGED + ".") and v.attr.value in RAGGED_TAGS:
            tags.append(RAGGED_TAGS[v.attr.value])
        else:
            tags.append(None)
    if items is None or not all(t in ("dense", "sparse_list", "sparse_coo") for t in tags):
        reasons.append("output_types is not a list of DALIRaggedIterator tags")
    elif "sparse_coo" in tags:
        reasons.append(
            "DALIRaggedIterator's SPARSE_COO_TAG output is not migrated: by hand, build the torch sparse "
            "COO tensor from the samples of the ndd.Batch ([t.torch() for t in batch.tensors])"
        )
    return {k for k, t in enumerate(tags) if t == "sparse_list"}


def _follow(ctx: FileContext, inst, assign: cst.Assign, use: IteratorUse, reasons: list[str]) -> None:
    """Every use of ``loader``: ``for x in loader`` / ``enumerate(loader)`` loops and
    ``loader.reset()``; anything else is a reason."""
    scope = ctx.scopes.get(assign)
    if scope is None or scope is not ctx.scopes.get(inst.assign):
        reasons.append("the iterator is made in another scope than the pipeline")
        return
    assignments = list(scope.assignments[use.name])
    if len(assignments) != 1:
        reasons.append(f"`{use.name}` is assigned more than once")
        return
    for ref in in_source_order(ctx, assignments[0].references):
        node = ref.node
        parent = ctx.parents.get(node)
        line = ctx.line_of(node)
        if isinstance(parent, cst.Attribute) and parent.attr.value == "reset":
            call = ctx.parents.get(parent)
            expr = ctx.parents.get(call)
            stmt = ctx.parents.get(expr)
            if isinstance(call, cst.Call) and not call.args and isinstance(expr, cst.Expr) and isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
                use.resets.append(stmt)
                continue
        loop, target = _loop_of(ctx, node)
        if loop is not None:
            if ctx.scopes.get(loop) is not scope:
                reasons.append(f"the loop over `{use.name}` at line {line} is in another scope")
            elif _loop_reasons(ctx, loop, target, use, reasons):
                use.loops.append(node)
            continue
        if isinstance(parent, cst.Arg) and isinstance(ctx.parents.get(parent), cst.Call):
            func = ctx.parents.get(parent).func
            if isinstance(func, cst.Name) and func.value == "len" and len(ctx.parents.get(parent).args) == 1:
                if ctx.scopes.get(node) is not scope:
                    reasons.append(f"len({use.name}) at line {line} is in another scope")
                elif use.reader_name is None and use.size is None and use.size_reader is None:
                    reasons.append(
                        f"len({use.name}) at line {line} is not migrated: an iterator without reader_name or size "
                        "has no length (DALI's len() gives 0); the migrated generator never ends an epoch"
                    )
                else:
                    use.lens.append((node, ""))
                continue
        reasons.append(f"`{use.name}` is used at line {line} in a way the tool cannot follow (only loops over it, len() and reset())")
    # where each len(loader) is: inside a loop over it (the current epoch), before any loop
    # over it could have run (the first epoch), or elsewhere
    loops = [_loop_of(ctx, r)[0] for r in use.loops]
    first = min((ctx.line_of(lp) for lp in loops), default=None)
    for r in use.resets:
        if any(a is lp for a in _loops_around(ctx, r) for lp in loops):
            # after the last batch DALI's reset() starts the next epoch inside the same loop
            reasons.append(f"{use.name}.reset() at line {ctx.line_of(r)} is inside a loop over {use.name}")
    placed = []
    for node, _ in use.lens:
        where = "other"
        ancestors = _loops_around(ctx, node)
        if any(a is lp for a in ancestors for lp in loops):
            where = "loop"
        elif not ancestors and (first is None or ctx.line_of(node) < first):
            where = "first"
        placed.append((node, where))
    use.lens = placed


def _loops_around(ctx: FileContext, node: cst.CSTNode) -> list[cst.CSTNode]:
    """The for/while loops around ``node`` in its function (or module)."""
    out = []
    node = ctx.parents.get(node)
    while node is not None and not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Module)):
        if isinstance(node, (cst.For, cst.While)):
            out.append(node)
        node = ctx.parents.get(node)
    return out


def _loop_of(ctx: FileContext, node: cst.CSTNode) -> tuple[cst.For | None, cst.Name | None]:
    """``for data in loader`` / ``for i, data in enumerate(loader)``: the loop and ``data``."""
    parent = ctx.parents.get(node)
    if isinstance(parent, cst.For) and parent.iter is node:
        return parent, parent.target if isinstance(parent.target, cst.Name) else None
    if isinstance(parent, cst.Arg) and parent.keyword is None:
        call = ctx.parents.get(parent)
        loop = ctx.parents.get(call)
        if (
            isinstance(call, cst.Call)
            and isinstance(call.func, cst.Name)
            and call.func.value == "enumerate"
            and call.args[0] is parent
            and isinstance(loop, cst.For)
            and loop.iter is call
        ):
            t = loop.target
            if isinstance(t, cst.Tuple) and len(t.elements) == 2 and isinstance(t.elements[1].value, cst.Name):
                return loop, t.elements[1].value
            return loop, None
    return None, None


def _loop_reasons(ctx: FileContext, loop: cst.For, target: cst.Name | None, use: IteratorUse, reasons: list[str]) -> bool:
    line = ctx.line_of(loop)
    before = len(reasons)
    if target is None:
        reasons.append(f"the loop at line {line} does not bind each batch to one name")
        return False
    if loop.orelse is not None:
        reasons.append(f"the loop at line {line} has an else clause")
    for n in _walk_loop(loop.body):
        # DALI's iterator resumes an epoch left early (it ignores reset() until the epoch is over):
        # DaliIteratorEpochs does too; without reader_name or size there are no epochs to resume
        if isinstance(n, (cst.Break, cst.Return, cst.Raise)):
            use.early_exit = True
            break
    reads = []
    for n in walk(loop.body):
        if isinstance(n, cst.Name) and n.value == target.value and not _is_attr_name(ctx, n):
            read = _batch_read(ctx, n, use)
            if read is None:
                reasons.append(
                    f"`{target.value}` at line {ctx.line_of(n)} is used other than as "
                    f'{target.value}[0]["<name from output_map>"]'
                )
                break
            reads.append(read)
    # the batch name must not live on after the loop
    scope = ctx.scopes.get(loop)
    for a in scope.assignments[target.value] if scope else ():
        for ref in in_source_order(ctx, a.references):
            if not _inside(ctx, ref.node, loop.body):
                reasons.append(f"`{target.value}` of the loop at line {line} is used after the loop")
                break
    if len(reasons) > before:
        return False
    use.reads += reads
    return True


def _batch_read(ctx: FileContext, name: cst.Name, use: IteratorUse):
    """``data[0]["label"]`` -> (outer subscript, "data", index of "label")."""
    inner = ctx.parents.get(name)
    if not (isinstance(inner, cst.Subscript) and inner.value is name and _index(inner) == 0):
        return None
    outer = ctx.parents.get(inner)
    if not (isinstance(outer, cst.Subscript) and outer.value is inner):
        return None
    key = outer.slice[0].slice.value if len(outer.slice) == 1 and isinstance(outer.slice[0].slice, cst.Index) else None
    if not isinstance(key, cst.SimpleString) or key.evaluated_value not in use.output_map:
        return None
    return outer, name.value, use.output_map.index(key.evaluated_value)


def _index(sub: cst.Subscript):
    if len(sub.slice) == 1 and isinstance(sub.slice[0].slice, cst.Index) and isinstance(sub.slice[0].slice.value, cst.Integer):
        return int(sub.slice[0].slice.value.value)
    return None


def _is_attr_name(ctx: FileContext, n: cst.Name) -> bool:
    p = ctx.parents.get(n)
    return (isinstance(p, cst.Attribute) and p.attr is n) or (isinstance(p, cst.Arg) and p.keyword is n)


def _walk_loop(node: cst.CSTNode):
    """Like _walk, but not into nested loops (their break is theirs) or functions."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            continue
        if isinstance(n, (cst.For, cst.While)) and n is not node:
            # a return inside a nested loop still leaves the epoch
            stack.extend(x for x in walk(n.body) if isinstance(x, (cst.Return, cst.Yield, cst.Raise)))
            continue
        stack.extend(reversed(n.children))


def _inside(ctx: FileContext, node: cst.CSTNode, container: cst.CSTNode) -> bool:
    while node is not None:
        if node is container:
            return True
        node = ctx.parents.get(node)
    return False


# -- emitting ------------------------------------------------------------------------------------


def iterator_reasons(ctx: FileContext, graph: Graph, instances: list[Instance]) -> list[str]:
    """Why the framework iterators recorded on ``instances`` cannot be migrated (empty: they can)."""
    uses = [u for inst in instances for u in inst.iterators]
    if not uses:
        return []
    if len(instances) != 1 or len(uses) != 1:
        return ["a pipeline iterated through framework iterators must be instantiated once and wrapped once"]
    if instances[0].runs:
        return ["the pipeline is both run (pipe.run()) and iterated through a framework iterator"]
    if len(graph.readers) != 1 or graph.sources:
        return ["a framework iterator over a pipeline with several readers or an external source is not migrated"]
    name = next((a.value for a in graph.readers[0].call.args if a.keyword and a.keyword.value == "name"), None)
    use = uses[0]
    for wanted, what in ((use.reader_name, "reader_name={!r}"), (use.size_reader, "size=pipe.epoch_size({!r})")):
        if wanted is not None and not (isinstance(name, cst.SimpleString) and name.evaluated_value == wanted):
            return [f"{what.format(wanted)} does not name the reader of the pipeline"]
    padded = next((a.value for a in graph.readers[0].call.args if a.keyword and a.keyword.value == "pad_last_batch"), None)
    padded = isinstance(padded, cst.Name) and padded.value == "True"
    if use.reader_name is not None and use.policy == "FILL" and not padded:
        # FILL without padding: the batch count, and so len(), changes from epoch to epoch, and
        # DALI's value between two epochs depends on when reset() ran
        for node, where in use.lens:
            if where == "other":
                return [
                    f"len({use.name}) at line {ctx.line_of(node)} is not migrated: with FILL over a reader without "
                    "pad_last_batch=True the batch count changes from epoch to epoch, and between two loops DALI's "
                    f"value depends on when reset() ran; take len({use.name}) inside the loop over it (or before the "
                    "first one), or give the reader pad_last_batch=True"
                ]
    return []


def abandon_iterators(inst: Instance, why: str, followups: list[FollowUp]) -> None:
    """The framework iterators over ``inst`` cannot be migrated (``why``): each keeps its code,
    with a TODO, and the pipeline function stays a plain generator of batches."""
    for use in inst.iterators:
        followups.append(FollowUp(use.call, f"{_iterator_name(use)} is not migrated ({why})", BY_HAND_TORCH))
    inst.iterators = []


def epoch_body(
    ctx: FileContext, graph: Graph, body: list[cst.BaseStatement], instances: list[Instance]
) -> tuple[list[cst.BaseStatement], list[cst.BaseStatement]]:
    """The generator body from :func:`emit_generator_body`, made the epochs of the framework
    iterator when the pipeline is consumed through one; also the helpers to put before it (each
    once per module). Raises Refused where a configuration cannot be carried over."""
    uses = [u for inst in instances for u in inst.iterators]
    if not uses:
        return body, []
    why = iterator_reasons(ctx, graph, instances)
    if why:
        raise Refused(why[0])  # the front end abandons such iterators first (abandon_iterators)
    use = uses[0]
    reader_args = {a.keyword.value: a.value for a in graph.readers[0].call.args if a.keyword is not None}
    loop = body[-1]
    if not (isinstance(loop, cst.While) and len(loop.body.body) == 1 and isinstance(loop.body.body[0], cst.For)):
        raise Refused("the generated epoch loop has an unexpected shape")
    if use.reader_name is None and use.size is None and use.size_reader is None:
        use.mode = "stream"  # the iterator never ends an epoch: loop over the endless generator
        return body, []
    padded = reader_args.get("pad_last_batch")
    padded = isinstance(padded, cst.Name) and padded.value == "True"
    epoch_for = loop.body.body[0]
    next_epoch = epoch_for.iter
    bs = next((a.value for a in next_epoch.args if a.keyword and a.keyword.value == "batch_size"), None)
    reader_var = next_epoch.func.value.value
    outputs = _docstring_outputs(body[0])
    taken = {n.value for s in body for n in walk(s) if isinstance(n, cst.Name)}
    doc = body[0]
    if use.reader_name is not None and use.policy == "FILL" and padded and not use.lens and not use.early_exit:
        # one next_epoch() is one epoch of the iterator (row 35)
        use.mode = "plain"
        epoch_name = fresh_name("epoch", taken)
        inner = _nested_def(
            epoch_name, f"One epoch of ({outputs}) batches: one pass over the old iterator.", [epoch_for], loop.leading_lines
        )
        tail = [cst.While(test=cst.Name("True"), body=cst.IndentedBlock([_stmt(cst.Expr(cst.Yield(cst.Call(cst.Name(epoch_name)))))]),
                          leading_lines=[cst.EmptyLine(indent=False)])]
        if is_generated_doc(doc):
            text = f'"""Yields the epochs {_iterator_name(use)} gave, each a generator of ({outputs}) batches."""'
            doc = doc.with_changes(body=[cst.Expr(cst.SimpleString(text))])
        return [doc, *body[1:-1], inner, *tail], []
    use.mode = "helper"
    batches_name = fresh_name("batches", taken)
    plan_name = fresh_name("plan", taken)
    inner = _nested_def(
        batches_name, f"({outputs}) batches epoch after epoch, without end, as Pipeline.run() gave them.", [loop.with_changes(leading_lines=[])],
        loop.leading_lines,
    )
    metadata = cst.Call(cst.Attribute(cst.Name(reader_var), cst.Name("get_metadata")))
    policy = cst.SimpleString(f'"{use.policy}"')
    if use.reader_name is not None:
        plan_fn, plan_args = READER_PLAN, [metadata, bs, policy]
    else:
        if use.size is not None:
            size = use.size
        else:  # pipe.epoch_size("Reader")
            size = cst.Subscript(metadata, slice=[cst.SubscriptElement(cst.Index(cst.SimpleString('"epoch_size_padded"')))])
        plan_fn, plan_args = SIZE_PLAN, [size, bs, policy, cst.Name(str(use.last_batch_padded))]
    if use.reader_name is not None or use.size is None:
        body = [_with_max_batch_size(s, reader_var, bs) for s in body]  # get_metadata() before next_epoch()
    tail = [
        _stmt(cst.Assign([cst.AssignTarget(cst.Name(plan_name))], cst.Call(cst.Name(plan_fn), args=[cst.Arg(a) for a in plan_args]))).with_changes(
            leading_lines=[cst.EmptyLine(indent=False)]
        ),
        _stmt(cst.Return(cst.Call(cst.Name(EPOCHS_CLASS), args=[cst.Arg(cst.Call(cst.Name(batches_name))), cst.Arg(cst.Name(plan_name))]))),
    ]
    helpers = _helpers(ctx, [EPOCHS_CLASS, plan_fn])
    if is_generated_doc(doc):
        text = f'"""The epochs {_iterator_name(use)} gave: next() gives the next one, a generator of ({outputs}) batches."""'
        doc = doc.with_changes(body=[cst.Expr(cst.SimpleString(text))])
    return [doc, *body[1:-1], inner, *tail], helpers


def _helpers(ctx: FileContext, names: list[str]) -> list[cst.BaseStatement]:
    """The helpers ``names`` not yet emitted in this module (each once, before the first
    pipeline that needs it)."""
    done = getattr(ctx, "_dali_iterator_helpers", None)
    if done is None:
        done = ctx._dali_iterator_helpers = set()
    out = []
    for name in names:
        if name in done:
            continue
        if _defines(ctx, name):
            raise Refused(f"the module already defines {name}, the name of a helper this migration needs")
        done.add(name)
        node = cst.parse_module(helper_source(name).replace("ndd.", f"{ctx.ndd}.")).body[0]
        out.append(node.with_changes(leading_lines=[cst.EmptyLine(indent=False)] * 2))
    return out


def _iterator_name(use: IteratorUse) -> str:
    func = use.call.func
    return func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else "the iterator"


def _code(expr: cst.BaseExpression) -> str:
    return cst.Module([]).code_for_node(expr)


def _stmt(small: cst.BaseSmallStatement) -> cst.SimpleStatementLine:
    return cst.SimpleStatementLine([small])


def _nested_def(name: str, doc: str, body: list[cst.BaseStatement], leading) -> cst.FunctionDef:
    docline = _stmt(cst.Expr(cst.SimpleString(f'"""{doc}"""')))
    first = body[0].with_changes(leading_lines=list(leading))
    return cst.FunctionDef(
        name=cst.Name(name),
        params=cst.Parameters(),
        body=cst.IndentedBlock([docline, first, *body[1:]]),
        leading_lines=[cst.EmptyLine(indent=False)],
    )


def _docstring_outputs(doc: cst.BaseStatement) -> str:
    if is_generated_doc(doc):
        text = doc.body[0].value.evaluated_value
        return text[text.index("(") + 1 : text.index(")")]
    return "output"


def _with_max_batch_size(stmt: cst.BaseStatement, reader_var: str, bs: cst.BaseExpression) -> cst.BaseStatement:
    """``reader = ndd.readers.X(...)`` gets ``max_batch_size=``: get_metadata() before the first
    next_epoch() would otherwise fix the batch size to 1 (pitfall 4)."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Assign)):
        return stmt
    assign = stmt.body[0]
    t = assign.targets[0].target
    if not (isinstance(t, cst.Name) and t.value == reader_var and isinstance(assign.value, cst.Call)):
        return stmt
    call = assign.value
    if any(a.keyword and a.keyword.value == "max_batch_size" for a in call.args):
        return stmt
    args = list(call.args)
    if args:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    args.append(cst.Arg(bs, keyword=cst.Name("max_batch_size"), equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))))
    return stmt.with_changes(body=[assign.with_changes(value=call.with_changes(args=args))])


def _defines(ctx: FileContext, name: str) -> bool:
    return name in ctx.skipped_names or any(
        isinstance(s, (cst.FunctionDef, cst.ClassDef)) and s.name.value == name for s in ctx.module.body
    )


def site_edits(ctx: FileContext, inst: Instance, notes: list[Diagnostic]) -> list[Edit]:
    """The code around the iterator: its construction and reset() calls removed, loops over it
    made loops over one epoch of the generator, ``len(loader)`` -> ``len(pipe)``,
    ``data[0]["name"]`` -> ``data[k].torch()`` (a list of per-sample tensors for the sparse-list
    outputs of DALIRaggedIterator)."""
    edits: list[Edit] = []
    if not inst.iterators:
        return edits
    pipe = inst.name
    for use in inst.iterators:
        if not use.mode:
            raise Refused("a framework iterator over this kind of pipeline is not migrated yet")
        edits.append(removed_stmt(ctx, use.stmt))
        edits += [removed_stmt(ctx, r) for r in use.resets]
        for ref in use.loops:
            new = cst.Name(pipe) if use.mode == "stream" else cst.Call(cst.Name("next"), args=[cst.Arg(cst.Name(pipe))])
            edits.append(ctx.expr_edit(ref, new))
        for ref, _ in use.lens:
            edits.append(ctx.expr_edit(ref, cst.Name(pipe)))
        for outer, name, k in use.reads:
            pick = cst.Subscript(cst.Name(name), slice=[cst.SubscriptElement(cst.Index(cst.Integer(str(k))))])
            if k in use.sparse_lists:
                sample = cst.Name("sample")
                new = cst.ListComp(
                    cst.Call(cst.Attribute(sample, cst.Name("torch"))),
                    cst.CompFor(target=sample, iter=cst.Attribute(pick, cst.Name("tensors"))),
                )
            else:
                new = cst.Call(cst.Attribute(pick, cst.Name("torch")))
            edits.append(ctx.expr_edit(outer, new))
    return edits
