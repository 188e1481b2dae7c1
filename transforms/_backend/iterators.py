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

from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import free_names, in_source_order, scope_label, use_text, walk
from .arguments import check_pipeline_args
from .datasets import ADVICE as DATASET_ADVICE
from .datasets import DATASET, dataset_use, signature_reasons
from .model import FollowUp, Graph, Instance
from .subclasses import iterator_subclass
from .wrappers import binding_of, wrapped_iterator

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
DATALOADER_HOOKS = ("train_dataloader", "val_dataloader", "test_dataloader", "predict_dataloader")

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


@dataclass
class IteratorUse:
    """``DALIGenericIterator([pipe], ...)``: its configuration and everything done with it."""

    call: cst.Call
    framework: str  # "torch", "paddle" or "jax"
    output_map: list[str]
    reader_name: str | None
    policy: str  # "FILL", "PARTIAL" or "DROP"
    #: size= without reader_name: the expression, or the reader name of ``pipe.epoch_size("name")``
    size: cst.BaseExpression | None = None
    size_reader: str | None = None
    last_batch_padded: bool = False
    auto_reset: bool = False
    sparse_lists: set[int] = field(
        default_factory=set
    )  # DALIRaggedIterator SPARSE_LIST_TAG outputs
    claimed: list[cst.CSTNode] = field(
        default_factory=list
    )  # pipeline references the iterator owns
    loops: list[cst.For] = field(default_factory=list)
    early_exit: bool = False  # a loop over the iterator can leave an epoch before its end
    lens: list[tuple[cst.CSTNode, str]] = field(
        default_factory=list
    )  # len(it): node, "loop"/"first"/"other"
    resets: list[cst.SimpleStatementLine] = field(default_factory=list)
    #: how many iterators the code that makes this one makes (a factory called twice: 2); each
    #: becomes a loader, and only one of them may run a capture loop
    copies: int = 1
    #: ``it._size`` reads (the samples of an epoch, as DALI's iterator counts them)
    size_reads: list[cst.Attribute] = field(default_factory=list)
    #: ``next(it)`` calls (code that pulls batches), and the name or ``self.x`` holding the iterator
    pulls: list[cst.Call] = field(default_factory=list)
    holder: cst.BaseExpression | None = None
    #: returned by a Lightning ``*_dataloader()`` hook: iterated once per epoch, sized with len()
    hooked: bool = False
    #: a subclass defined here whose ``__next__`` converts each batch (``subclasses``)
    subclass: cst.ClassDef | None = None
    #: DALIDataset: its (output_shapes or None, output_dtypes) (``datasets``)
    signature: tuple | None = None
    #: made in a wrapper class (``wrappers``): the wrapper's call, the pipeline passed to it and
    #: the ``__init__`` parameter that takes it
    wrapper: tuple | None = None
    #: the pipeline is kept in ``self.<attr>`` and the iterator made over it in another method:
    #: the reference (``self.pipe``) the iterator reads; the loader is made where the pipeline
    #: was, and the iterator's call becomes that reference
    kept_in: cst.Attribute | None = None

    @property
    def site(self) -> cst.Call:
        """The call that makes the iterator where the pipeline is (the wrapper's, if any)."""
        return self.wrapper[0] if self.wrapper is not None else self.call

    @property
    def name(self) -> str:
        if self.subclass is not None:
            return self.subclass.name.value
        func = self.call.func
        return (
            func.attr.value
            if isinstance(func, cst.Attribute)
            else getattr(func, "value", "the iterator")
        )

    @property
    def sized(self) -> bool:
        """The iterator has epochs (reader_name= or size=)."""
        return self.reader_name is not None or self.size is not None or self.size_reader is not None


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
        follower = _Follower(ctx, use, reasons)
        follower.value(call, 0)
        follower.finish()
        if use.kept_in is None:  # (a kept pipeline's one loader serves every such call)
            inst.copies *= use.copies
        _check_uses(ctx, use, reasons)
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
    return {k: v for k, v in args.items() if _code(v) != DEFAULTS.get(k) and k not in HARMLESS}


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


#: reader_name= given as a variable: the name of the pipeline's one reader
ANY_READER = "<the pipeline's reader>"


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
            f"size={_code(expr)} is not migrated (only an expression with at most one "
            f'{pipe}.epoch_size("<reader '
            'name>")): give the reader a name and pass reader_name= instead'
        )
        return None, None, []
    if calls:
        return expr, calls[0].args[0].value.evaluated_value, [calls[0].func.value]
    if isinstance(expr, cst.Integer) and int(expr.value, 0) <= 0:
        reasons.append(f"size={_code(expr)} is not a positive size")
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


class _Follower:
    """Every use of the iterator object: through names, ``self`` attributes, returns to the
    callers of a factory and Lightning hooks, to the loops, ``len()``, ``reset()`` and ``next()``
    that consume it. Anything else is a reason."""

    def __init__(self, ctx: FileContext, use: IteratorUse, reasons: list[str]) -> None:
        self.ctx, self.use, self.reasons = ctx, use, reasons
        #: functions the iterator is passed to, and the calls of each that pass it
        self.callees: dict[str, tuple[cst.FunctionDef, Any, set[int]]] = {}

    def finish(self) -> None:
        """A function the iterator is passed to must get it (or another iterator of this
        configuration, made by the same code) at every call: its resets are rewritten."""
        for fn, binding, calls in self.callees.values():
            if len(binding.references) != len(calls):
                self.reasons.append(
                    f"{fn.name.value}() takes the iterator and is called in several places, "
                    "with other values too"
                )

    def value(self, expr: cst.CSTNode, depth: int) -> None:
        """``expr`` evaluates to the iterator."""
        ctx = self.ctx
        parent = ctx.parents.get(expr)
        if isinstance(parent, cst.Assign) and parent.value is expr and len(parent.targets) == 1:
            self._bound(parent.targets[0].target, depth)
        elif isinstance(parent, cst.Return):
            self._returned(parent, depth)
        else:
            self._terminal(expr, depth)

    def _bound(self, target: cst.BaseAssignTargetExpression, depth: int) -> None:
        ctx = self.ctx
        if isinstance(target, cst.Name):
            scope = ctx.scopes.get(target)
            bindings = list(scope.assignments[target.value]) if scope is not None else []
            if len(bindings) != 1:
                self.reasons.append(f"`{target.value}` is assigned more than once")
                return
            self._holder(target)
            for ref in in_source_order(ctx, bindings[0].references):
                if ctx.scopes.get(ref.node) is not scope:
                    self.reasons.append(
                        f"`{target.value}` is used in another scope, {scope_label(ctx, ref.node)}"
                    )
                else:
                    self._terminal(ref.node, depth)
        elif _self_attr(ctx, target) is not None:
            self._holder(target)
            for read in self._attribute_reads(target):
                self._terminal(read, depth)
        else:
            self.reasons.append(f"the iterator is stored in `{ctx.text(target)}`")

    def _holder(self, target: cst.BaseExpression) -> None:
        self.use.holder = target if self.use.holder is None else self.use.holder

    def _attribute_reads(self, target: cst.Attribute) -> list[cst.Attribute]:
        """``self.x`` read in the methods of the class that sets it; ``.x`` anywhere else, or set
        anywhere else, is a reason."""
        ctx, attr = self.ctx, target.attr.value
        cls = _enclosing(ctx, target, cst.ClassDef)
        reads = []
        for node in ctx.nodes_of(cst.Attribute):
            if node.attr.value != attr or node is target:
                continue
            stored = isinstance(ctx.parents.get(node), cst.AssignTarget)
            if (
                not stored
                and _self_attr(ctx, node) is not None
                and _enclosing(ctx, node, cst.ClassDef) is cls
            ):
                reads.append(node)
            else:
                self.reasons.append(
                    f"`{ctx.text(node)}` {scope_label(ctx, node)} may be the iterator too"
                )
        return reads

    def _returned(self, ret: cst.Return, depth: int) -> None:
        ctx = self.ctx
        fn = _enclosing(ctx, ret, cst.FunctionDef)
        owner = ctx.parents.get(fn) if fn is not None else None
        if isinstance(owner, cst.IndentedBlock):
            owner = ctx.parents.get(owner)
        if fn is not None and isinstance(owner, cst.ClassDef) and fn.name.value in DATALOADER_HOOKS:
            self.use.hooked = True  # the Trainer iterates it once per epoch
            return
        if fn is not None and isinstance(owner, cst.ClassDef) and depth < 3:
            refs = self._method_calls(fn)
        elif fn is None or not isinstance(owner, cst.Module) or depth >= 3:
            refs = None
        else:
            scope = ctx.scopes.get(fn)
            refs = (
                [r.node for a in scope.assignments[fn.name.value] for r in a.references]
                if scope
                else []
            )
        if refs is None:
            self.reasons.append(
                f"the iterator is returned {scope_label(ctx, ret)} to code the tool cannot follow"
            )
            return
        if not refs:
            self.reasons.append(
                f"{fn.name.value}() returns the iterator, and is not called in this module"
            )
        calls = [r for r in refs if isinstance(ctx.parents.get(r), cst.Call)]
        self.use.copies *= max(len(calls), 1)  # each call makes an iterator
        for ref in refs:
            call = ctx.parents.get(ref)
            if isinstance(call, cst.Call) and call.func is ref:
                if _loops_around(ctx, call):
                    self.use.copies *= 2
                self.value(call, depth + 1)
            else:
                self.reasons.append(
                    f"`{fn.name.value}` (which returns the iterator) is used other than by "
                    f"calling it, {scope_label(ctx, ref)}"
                )

    def _method_calls(self, fn: cst.FunctionDef) -> list[cst.CSTNode] | None:
        """The ``<obj>.<method>`` references in the module when ``fn`` is the one function of
        that name in it (a method called on anything else would not be seen); else None."""
        ctx, name = self.ctx, fn.name.value
        if sum(f.name.value == name for f in ctx.nodes_of(cst.FunctionDef)) != 1:
            return None
        return [a for a in ctx.nodes_of(cst.Attribute) if a.attr.value == name]

    def _terminal(self, node: cst.CSTNode, depth: int) -> None:
        """A read of the iterator: a loop over it, len(), reset(), next(), or returned on."""
        ctx, use = self.ctx, self.use
        parent = ctx.parents.get(node)
        loop = _loop_of(ctx, node)
        if loop is not None:
            use.loops.append(loop)
        elif isinstance(parent, cst.Return) and parent.value is node:
            self._returned(parent, depth)
        elif _builtin_arg(ctx, node, "len"):
            use.lens.append((node, ""))
        elif _builtin_arg(ctx, node, "next"):
            use.pulls.append(ctx.parents.get(parent))
        elif _reset_stmt(ctx, node) is not None:
            use.resets.append(_reset_stmt(ctx, node))
        elif (
            isinstance(parent, cst.Attribute)
            and parent.value is node
            and parent.attr.value == "_size"
            and not isinstance(ctx.parents.get(parent), (cst.AssignTarget, cst.AugAssign))
        ):
            use.size_reads.append(parent)
        elif not self._passed(node, depth):
            self.reasons.append(
                f"`{use_text(ctx, node)}` {scope_label(ctx, node)} uses `{ctx.text(node)}` in a "
                "way the tool cannot follow (only loops over it, len(), next() and reset())"
            )

    def _passed(self, node: cst.CSTNode, depth: int) -> bool:
        """``train(model, loader)`` where ``train`` is a function of this module called only
        there: its parameter is followed (the tool rewrites the resets it finds there)."""
        ctx = self.ctx
        arg = ctx.parents.get(node)
        call = ctx.parents.get(arg)
        if not (isinstance(arg, cst.Arg) and not arg.star and isinstance(call, cst.Call)):
            return False
        if not isinstance(call.func, cst.Name) or depth >= 3:
            return False
        binding = binding_of(ctx, call.func)
        fn = getattr(binding, "node", None)  # builtins have no node
        if not (isinstance(fn, cst.FunctionDef) and isinstance(ctx.parents.get(fn), cst.Module)):
            return False
        followed = fn.name.value in self.callees
        self.callees.setdefault(fn.name.value, (fn, binding, set()))[2].add(id(call))
        if followed:
            return True  # its parameter's uses are recorded already
        param = _parameter(fn, call, arg)
        scope = ctx.scopes.get(fn.body) if param is not None else None
        bindings = list(scope.assignments[param.name.value]) if scope is not None else []
        if param is None or len(bindings) != 1 or bindings[0].node is not param:
            self.reasons.append(
                f"the parameter of {fn.name.value}() that takes the iterator is rebound"
            )
            return True
        for ref in in_source_order(ctx, bindings[0].references):
            self._terminal(ref.node, depth + 1)
        return True


def _parameter(fn: cst.FunctionDef, call: cst.Call, arg: cst.Arg) -> cst.Param | None:
    """The plain parameter of ``fn`` that ``arg`` of ``call`` binds."""
    params = list(fn.params.params)
    if arg.keyword is not None:
        return next((p for p in params if p.name.value == arg.keyword.value), None)
    index = [a for a in call.args if a.keyword is None].index(arg)
    return params[index] if index < len(params) else None


def _self_attr(ctx: FileContext, node: cst.CSTNode) -> str | None:
    """``self.x`` in a method whose first parameter is ``self``: ``x``."""
    if not (isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name)):
        return None
    fn = _enclosing(ctx, node, cst.FunctionDef)
    while fn is not None and not isinstance(ctx.parents.get(ctx.parents.get(fn)), cst.ClassDef):
        fn = _enclosing(ctx, fn, cst.FunctionDef)
    if fn is None or not fn.params.params or fn.params.params[0].name.value != node.value.value:
        return None
    return node.attr.value


def _enclosing(ctx: FileContext, node: cst.CSTNode, kind: type) -> cst.CSTNode | None:
    cur = ctx.parents.get(node)
    while cur is not None and not isinstance(cur, kind):
        cur = ctx.parents.get(cur)
    return cur


def _builtin_arg(ctx: FileContext, node: cst.CSTNode, name: str) -> bool:
    arg = ctx.parents.get(node)
    call = ctx.parents.get(arg)
    return (
        isinstance(arg, cst.Arg)
        and arg.keyword is None
        and not arg.star
        and isinstance(call, cst.Call)
        and isinstance(call.func, cst.Name)
        and call.func.value == name
        and len(call.args) == 1
    )


def _reset_stmt(ctx: FileContext, node: cst.CSTNode) -> cst.SimpleStatementLine | None:
    """``<node>.reset()`` as a statement of its own."""
    attr = ctx.parents.get(node)
    call = ctx.parents.get(attr)
    expr = ctx.parents.get(call)
    stmt = ctx.parents.get(expr)
    if (
        isinstance(attr, cst.Attribute)
        and attr.attr.value == "reset"
        and isinstance(call, cst.Call)
        and not call.args
        and call.func is attr
        and isinstance(expr, cst.Expr)
        and isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
    ):
        return stmt
    return None


def _loop_of(ctx: FileContext, node: cst.CSTNode) -> cst.For | None:
    """``for x in <node>`` / ``for i, x in enumerate(<node>)``: the loop."""
    parent = ctx.parents.get(node)
    if isinstance(parent, cst.For) and parent.iter is node:
        return parent
    if _builtin_arg(ctx, node, "enumerate"):
        call = ctx.parents.get(parent)
        loop = ctx.parents.get(call)
        if isinstance(loop, cst.For) and loop.iter is call:
            return loop
    return None


def _check_uses(ctx: FileContext, use: IteratorUse, reasons: list[str]) -> None:
    """What the loops, len(), reset() and next() found say about the loader: early exits,
    where each len() is, resets inside loops, code that pulls."""
    for loop in use.loops:
        if loop.orelse is not None:
            header = f"for {ctx.text(loop.target)} in {ctx.text(loop.iter)}"
            reasons.append(f"the loop `{header}` {scope_label(ctx, loop)} has an else clause")
        # DALI's iterator resumes an epoch left early (it ignores reset() until the epoch is over)
        if any(isinstance(n, (cst.Break, cst.Return, cst.Raise)) for n in _walk_loop(loop.body)):
            use.early_exit = True
    for r in use.resets:
        if any(a is lp for a in _loops_around(ctx, r) for lp in use.loops):
            # after the last batch DALI's reset() starts the next epoch inside the same loop
            reasons.append(
                f"{use.name}.reset() {scope_label(ctx, r)} is inside a loop over the iterator"
            )
    if use.pulls:
        _check_pulls(ctx, use, reasons)
    if use.lens and not use.sized:
        reasons.append(
            f"len({ctx.text(use.lens[0][0])}) {scope_label(ctx, use.lens[0][0])} of an iterator "
            "without reader_name or "
            "size (DALI's len() gives 0 there; the loader has no epochs to count)"
        )
    first = min(use.loops, key=ctx.line_of, default=None)
    placed = []
    for node, _ in use.lens:
        ancestors = _loops_around(ctx, node)
        where = "other"
        same = first is None or _enclosing(ctx, node, cst.FunctionDef) is _enclosing(
            ctx, first, cst.FunctionDef
        )
        if any(a is lp for a in ancestors for lp in use.loops):
            where = "loop"
        elif not ancestors and same and (first is None or ctx.line_of(node) < ctx.line_of(first)):
            where = "first"
        placed.append((node, where))
    use.lens = placed


def _check_pulls(ctx: FileContext, use: IteratorUse, reasons: list[str]) -> None:
    """Code that takes batches with ``next(it)`` and starts the next epoch with ``it.reset()``
    on StopIteration: ``it`` becomes ``iter(loader)``, again at each reset."""
    if use.loops or use.hooked:
        reasons.append("the iterator is both looped over and taken from with next()")
    if use.holder is None:
        reasons.append("next() on an iterator that is not kept in a name or a self attribute")
    if use.auto_reset:
        reasons.append(
            "next() on an iterator with auto_reset (the loader needs the reset() to start an epoch)"
        )
    for r in use.resets:
        handler = _enclosing(ctx, r, cst.ExceptHandler)
        if handler is None or not (
            isinstance(handler.type, cst.Name) and handler.type.value == "StopIteration"
        ):
            reasons.append(
                f"{use.name}.reset() {scope_label(ctx, r)} is not in an `except StopIteration:`"
            )


def _loops_around(ctx: FileContext, node: cst.CSTNode) -> list[cst.CSTNode]:
    """The for/while loops around ``node`` in its function (or module)."""
    out = []
    node = ctx.parents.get(node)
    while node is not None and not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Module)):
        if isinstance(node, (cst.For, cst.While)):
            out.append(node)
        node = ctx.parents.get(node)
    return out


def _walk_loop(node: cst.CSTNode):
    """Like walk, but not into nested loops (their break is theirs) or functions."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            continue
        if isinstance(n, (cst.For, cst.While)) and n is not node:
            # a return inside a nested loop still leaves the epoch
            stack.extend(
                x for x in walk(n.body) if isinstance(x, (cst.Return, cst.Yield, cst.Raise))
            )
            continue
        stack.extend(reversed(n.children))


# -- whether the loader can replace them -----------------------------------------------------------


def iterator_reasons(ctx: FileContext, graph: Graph, instances: list[Instance]) -> list[str]:
    """Why the framework iterators on ``instances`` cannot be migrated (empty: they can)."""
    uses = [u for inst in instances for u in inst.iterators]
    if not uses:
        return []
    if len(uses) != 1 or len(instances) != 1:
        why = _shared_class_reason(ctx, instances)
        if why:
            return [why]
        return list(
            dict.fromkeys(r for i in instances for r in _one_iterator_reasons(ctx, graph, i))
        )
    return _one_iterator_reasons(ctx, graph, next(i for i in instances if i.iterators))


def _shape(use: IteratorUse) -> tuple:
    """What the loader class is made from, besides the pipeline: iterators of one shape can
    share one class."""
    return (
        use.framework,
        use.output_map,
        use.reader_name,
        use.policy,
        use.last_batch_padded,
        use.auto_reset,
        sorted(use.sparse_lists),
        use.early_exit,
        use.hooked,
    )


def _shared_class_reason(ctx: FileContext, instances: list[Instance]) -> str:
    """Several pipelines of one definition, each wrapped once, share its loader class when
    their iterators have the same configuration, sized by reader_name (or not at all), and
    nothing folds into the class (a subclass, a wrapper, next() calls)."""
    uses = [u for inst in instances for u in inst.iterators]
    alike = all(len(i.iterators) == 1 for i in instances)
    alike = alike and len({repr(_shape(u)) for u in uses}) == 1
    plain = all(
        u.size is None
        and u.size_reader is None
        and u.subclass is None
        and u.wrapper is None
        and u.signature is None
        and not u.pulls
        and u.framework != "tf"
        for u in uses
    )
    if alike and plain:
        return ""
    bare = next((i for i in instances if not i.iterators), None)
    if bare is not None:
        return (
            f"the pipeline is also made at line {ctx.line_of(bare.call)}, where no framework "
            "iterator the tool migrates wraps it"
        )
    if any(len(i.iterators) > 1 for i in instances):
        return "a pipeline object is wrapped in several framework iterators"
    return (
        "its pipelines are wrapped in iterators that differ in reader_name=, policy or "
        "output_map, or are sized with size=, subclassed or wrapped: one loader class cannot "
        "serve them all"
    )


def _one_iterator_reasons(ctx: FileContext, graph: Graph, inst: Instance) -> list[str]:
    """Why the one framework iterator over ``inst`` cannot be migrated (empty: it can)."""
    use = inst.iterators[0]
    if inst.runs:
        return ["the pipeline is both run (pipe.run()) and iterated through a framework iterator"]
    if use.framework == "tf":
        if graph.sources:
            return [
                "DALIDataset over a pipeline with an external source (DALIDatasetWithInputs) is "
                "not migrated"
            ]
        return signature_reasons(ctx, use, len(graph.outputs)) + _placement_reasons(ctx, inst, use)
    if graph.branch_outputs and len({len(v) for v in graph.branch_outputs.values()}) > 1:
        return ["the pipeline's number of outputs depends on the `if` that ends it"]
    if len(graph.readers) != 1 or graph.sources or graph.readers[0].guards:
        return [
            "a framework iterator over a pipeline with several readers or an external source is "
            "not migrated"
        ]
    reader = {a.keyword.value: a.value for a in graph.readers[0].call.args if a.keyword is not None}
    name = reader.get("name")
    for wanted, what in (
        (use.reader_name, "reader_name={!r}"),
        (use.size_reader, "size=pipe.epoch_size({!r})"),
    ):
        if wanted is not None and wanted is not ANY_READER and not (
            isinstance(name, cst.SimpleString) and name.evaluated_value == wanted
        ):
            return [f"{what.format(wanted)} does not name the reader of the pipeline"]
    if use.size is not None and isinstance(graph.container, cst.FunctionDef):
        _, missing = size_parameters(use, inst, graph.container)
        if missing:
            return [
                f"size={_code(use.size)} reads `{missing[0]}`, which the loader cannot have: give "
                "the reader a name and pass reader_name= instead, or pass it to the pipeline"
            ]
    reasons = (
        _reader_reasons(reader, use)
        + _placement_reasons(ctx, inst, use)
        + _len_reasons(ctx, reader, use)
    )
    if use.early_exit and epochs_kind(reader, use) not in RESUMABLE:
        reasons.append(
            f"a loop over {use.name} can leave an epoch early (break, return): DALI's iterator "
            "resumed that epoch in the next loop, which the loader does only with the FILL policy "
            f"({use.policy} here)"
        )
    return reasons


def _reader_reasons(reader: dict[str, cst.BaseExpression], use: IteratorUse) -> list[str]:
    """Reader arguments the loader's epoch arithmetic needs as literals."""
    out = []
    for key in ("pad_last_batch", "stick_to_shard"):
        v = reader.get(key)
        if v is not None and not (isinstance(v, cst.Name) and v.value in ("True", "False")):
            out.append(
                f"the reader's {key}= is not True or False (the epochs of {use.name} depend on it)"
            )
    return out


def _len_reasons(
    ctx: FileContext, reader: dict[str, cst.BaseExpression], use: IteratorUse
) -> list[str]:
    padded = _is_true(reader.get("pad_last_batch"))
    if use.reader_name is None or use.policy != "FILL" or padded:
        return []
    # FILL without padding: the batch count, and so len(), changes from epoch to epoch, and
    # DALI's value between two epochs depends on when reset() ran
    for node, where in use.lens:
        if where == "other":
            return [
                f"len({ctx.text(node)}) {scope_label(ctx, node)} is not migrated: with FILL "
                "over a reader without pad_last_batch=True the batch count changes from epoch to "
                "epoch, and between two loops DALI's value depends on when reset() ran; take "
                "len() inside the loop over it (or before the first one), or give the reader "
                "pad_last_batch=True"
            ]
    return []


def _placement_reasons(ctx: FileContext, inst: Instance, use: IteratorUse) -> list[str]:
    """The loader is made where the iterator was, from the pipeline's arguments: the pipeline
    must be made before it in the same scope and loops, and those arguments' names must mean
    the same there."""
    made = ctx.enclosing_statement(use.site)
    if made is inst.stmt:  # @data_iterator: one call makes both
        return []
    if made_elsewhere(ctx, inst, use):
        return _kept_placement_reasons(ctx, inst, use)
    if ctx.scopes.get(made) is not ctx.scopes.get(inst.stmt):
        return ["the iterator is made in another function than the pipeline"]
    loops = [id(n) for n in _loops_around(ctx, made)]
    if loops != [id(n) for n in _loops_around(ctx, inst.stmt)]:
        return ["the iterator is made in another loop than the pipeline"]
    start, end = ctx.positions[inst.stmt].end, ctx.positions[made].start
    if (start.line, start.column) > (end.line, end.column):
        return ["the iterator is made before the pipeline"]
    names = {n.value for a in inst.call.args for n in walk(a.value) if isinstance(n, cst.Name)}
    container = _enclosing(ctx, made, cst.FunctionDef) or ctx.module
    for node in walk(container):
        if isinstance(
            node, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr)
        ):
            target = node.target
            pos = (
                ctx.positions.get(target)
                if hasattr(ctx.positions, "get")
                else ctx.positions[target]
            )
            if pos is None:
                continue
            inside = (
                (start.line, start.column)
                <= (pos.start.line, pos.start.column)
                < (end.line, end.column)
            )
            hit = {n.value for n in walk(target) if isinstance(n, cst.Name)} & names
            if inside and hit:
                return [f"`{sorted(hit)[0]}` changes between the pipeline and the iterator"]
    return []


def made_elsewhere(ctx: FileContext, inst: Instance, use: IteratorUse) -> bool:
    """The pipeline is kept in ``self.<attr>`` and its iterator made in another function: the
    loader is made where the pipeline was (else where the iterator was)."""
    made = ctx.enclosing_statement(use.site)
    return use.kept_in is not None and ctx.scopes.get(made) is not ctx.scopes.get(inst.stmt)


def _kept_placement_reasons(ctx: FileContext, inst: Instance, use: IteratorUse) -> list[str]:
    """``self.pipe = make(...)`` in one method, ``DALIGenericIterator([self.pipe], ...)`` in
    another: the loader is made in place of the pipeline, so the iterator's arguments must mean
    the same there (literals and module-level names), and it must be the pipeline's one use."""
    assign = inst.assign
    if (
        assign is None
        or len(assign.targets) != 1
        or not isinstance(assign.targets[0].target, cst.Attribute)
        or inst.copies != 1
        or len(inst.iterators) > 1
        or use.pulls
    ):
        return ["the pipeline is kept in a way the loader cannot replace"]
    scope = ctx.scopes.get(use.call)
    skip = {id(n) for n in walk(use.kept_in)} if use.kept_in is not None else set()
    skip |= {id(n.attr) for n in walk(use.call) if isinstance(n, cst.Attribute)}
    for node in walk(use.call):
        if (
            isinstance(node, cst.Name)
            and id(node) not in skip
            and scope is not None
            and node.value in scope.assignments
        ):
            return [
                f"the iterator's arguments read `{node.value}`, which the place where the "
                "pipeline is made does not see"
            ]
    return []


def _is_true(v: cst.BaseExpression | None) -> bool:
    return isinstance(v, cst.Name) and v.value == "True"


def abandon_iterators(inst: Instance, why: str, followups: list[FollowUp]) -> None:
    """The framework iterators over ``inst`` cannot be migrated (``why``): each keeps its code,
    with a TODO, and the pipeline function stays a plain generator of batches."""
    for use in inst.iterators:
        advice = (
            BY_HAND_TORCH
            if use.framework == "torch"
            else BY_HAND[f"nvidia.dali.plugin.{use.framework}"][1]
        )
        if use.framework == "tf":
            advice = BY_HAND["nvidia.dali.plugin.tf"][1]
        followups.append(FollowUp(use.call, f"{use.name} is not migrated ({why})", advice))
    inst.iterators = []


def _code(expr: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(expr)


#: calls allowed in a size= expression besides the pipeline's epoch_size()
SIZE_BUILTINS = {"int", "round", "len", "min", "max", "abs"}


def size_parameters(
    use: IteratorUse, inst: Instance, fn: cst.FunctionDef
) -> tuple[dict[str, str], list[str]]:
    """For ``size=``: the names the caller also gave to the pipeline -> the parameter it gave
    them to (``num_shards=world_size``: ``world_size`` -> ``num_shards``), and the other names
    the expression reads (the loader does not have them)."""
    given: dict[str, str] = {}
    positional = [p.name.value for p in fn.params.params]
    for i, a in enumerate(inst.call.args):
        if isinstance(a.value, cst.Name) and not a.star:
            param = a.keyword.value if a.keyword is not None else None
            if param is None and i < len(positional):
                param = positional[i]
            if param is not None:
                given.setdefault(a.value.value, param)
    pipe = inst.variable
    names = free_names(use.size) if use.size is not None else set()
    return given, sorted(names - set(given) - SIZE_BUILTINS - {pipe})


def is_sharded(reader: dict[str, cst.BaseExpression]) -> bool:
    """The reader reads one of several shards (``num_shards=`` other than a literal 1)."""
    n = reader.get("num_shards")
    return n is not None and not (isinstance(n, cst.Integer) and int(n.value, 0) == 1)


def epochs_kind(reader: dict[str, cst.BaseExpression], use: IteratorUse) -> str:
    """How the loader cuts epochs for the iterator's configuration: over the reader's own epochs
    ("plain", "partial", "drop") where DALI's line up with them, else over the endless stream
    ("resume", "ahead", "fill_shards", "partial_stream", "drop_stream", "counted",
    "partial_counted", "drop_counted", "endless")."""
    padded, sharded = _is_true(reader.get("pad_last_batch")), is_sharded(reader)
    if not use.sized:
        return "endless"
    if use.reader_name is None:  # size=
        if use.policy == "FILL":
            return "counted" if use.last_batch_padded else "ahead"
        return "partial_counted" if use.policy == "PARTIAL" else "drop_counted"
    if use.policy == "FILL":
        if padded:
            return "resume" if use.early_exit else "plain"
        return "fill_shards" if sharded else "ahead"
    if use.policy == "PARTIAL":
        return "partial" if padded or not sharded else "partial_stream"
    return "drop_stream" if sharded else "drop"


#: configurations whose loader resumes an epoch a loop left early
RESUMABLE = ("resume", "ahead", "fill_shards", "endless")


# -- JAX's @data_iterator: the decorated function makes the pipeline and its iterator --------------

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
            _Follower(ctx, use, reasons).value(inst.call, 0)
            _check_uses(ctx, use, reasons)
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
