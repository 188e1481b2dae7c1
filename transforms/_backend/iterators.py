"""Framework iterators over a migrated pipeline: the part of DM200 that recognises
``DALIGenericIterator([pipe], ...)`` (PyTorch, Paddle, JAX), ``DALIClassificationIterator`` and
``DALIRaggedIterator``, follows the iterator wherever the code keeps it, and rewrites the few
places that change. The loader class that replaces the pipeline is written by ``loaders``; the
iterator's arguments are read by ``iterator_args``, JAX's ``@data_iterator`` by
``data_iterators``.

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

from .._cst import source_of
from .built_subclass import built_subclass
from .dataset_ops import holds_op, op_statement
from .datasets import ADVICE as DATASET_ADVICE
from .datasets import DATASET, OP_TENSORS, dataset_use
from .iterator_args import ITERATORS, analyse_iterator
from .iterator_consumers import check_uses
from .iterator_follow import Follower
from .iterator_use import IteratorUse
from .model import FollowUp, Instance
from .per_device import ADVICE as PER_DEVICE_ADVICE
from .per_device import device_reasons, listed_pipelines, per_device_list
from .subclass_init import base_advice, handed_to_base
from .subclasses import iterator_subclass
from .wrappers import wrapped_iterator

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
    op = op_statement(ctx, call) if call is not None else None
    if call is not None and (q == DATASET or op is not None):  # TensorFlow: from a generator
        found = dataset_use(ctx, inst, call, IteratorUse, op)
        if isinstance(found, FollowUp):
            return found
        inst.iterators.append(found)
        return ""
    if call is not None and holds_op(ctx, call):
        return FollowUp(
            call,
            f"the DALIIterator op `{source_of(call.func)}` is not migrated: the tool takes an op "
            "bound to one local name, once, and called once",
            f"{DATASET_ADVICE}; the op's tensors are {OP_TENSORS}",
        )
    sub = (
        iterator_subclass(ctx, call, tuple(ITERATORS), ref)
        if call is not None and q not in ITERATORS
        else None
    )
    if sub is not None and not sub.reasons:
        q = sub.base
    wrapped = (
        wrapped_iterator(ctx, ref, tuple(ITERATORS)) if q not in ITERATORS and not sub else None
    )
    if isinstance(wrapped, str):
        assert call is not None  # (a wrapper's reason: ``ref`` is an argument of its call)
        return FollowUp(
            call, f"the iterator made in `{_call_name(call)}` is not migrated: {wrapped}"
        )
    if wrapped is not None:  # made in a wrapper class's __init__ from the pipeline passed in
        call, q = wrapped[2], wrapped[4]
    built = (
        built_subclass(ctx, call, tuple(ITERATORS))
        if call is not None and q not in ITERATORS and wrapped is None
        else None
    )
    if built is not None:  # the class builds the pipeline itself and hands it to its base
        q = ctx.qualname(built.bases[0].value)
    if call is None or q not in ITERATORS:
        return iterator_hint(ctx, ref)
    reasons: list[str] = []
    # a subclass's __init__ hands the pipeline on: its super().__init__ call, resolved, says what
    # the iterator is (``subclass_init``)
    read = sub.resolved if sub is not None and sub.resolved is not None else call
    use = analyse_iterator(ctx, inst, read, q, reasons)
    if use is not None and sub is not None:
        use.subclass, use.call, use.annotations = sub.cls, call, sub.annotations
    if use is not None and wrapped is not None:
        use.call, use.wrapper = wrapped[1], (wrapped[0], ref, wrapped[3])
        call = use.call
    if use is not None and not inst.local:
        if isinstance(ref, cst.Name) and listed_pipelines(ctx, inst, ref):
            use.devices = ref  # one loader per pipeline, their batches side by side
        elif wrapped is not None or not isinstance(ref, cst.Attribute):
            return iterator_hint(ctx, ref)
        else:
            use.kept_in = ref
    if use is not None and built is not None:  # its methods take the batches (drop-in loader)
        use.built_in, use.opaque = built, [call]
        inst.copies = max(inst.copies, 2)  # one loader per instance of the class: no capture
        if not use.sized:  # (DALI's len() and epochs count samples: the loader has none to count)
            reasons.append(f"{built.name.value} hands the iterator neither reader_name= nor size=")
    elif use is not None:
        follower = Follower(ctx, use, reasons)
        follower.value(call, 0)
        follower.finish()
        if use.kept_in is None:  # (a kept pipeline's one loader serves every such call)
            inst.copies *= use.copies
        check_uses(ctx, use, reasons)
        if use.devices is not None:
            reasons += device_reasons(use)
    if reasons and built is not None:  # the class keeps its base: what it uses of it
        base = handed_to_base(ctx, call)
        assert base is not None  # (built_subclass)
        what, advice = base_advice(*base)
        return FollowUp(call, f"{what}: {'; '.join(dict.fromkeys(reasons))}", advice)
    if reasons or use is None:
        return FollowUp(
            call,
            f"{_call_name(call)} is not migrated: {'; '.join(dict.fromkeys(reasons))}",
            PER_DEVICE_ADVICE if use is not None and use.devices is not None else _advice(q),
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
        base = handed_to_base(ctx, call)
        if base is not None:  # a subclass that builds its pipeline itself
            return FollowUp(call, *base_advice(*base))
        why = _subclass_reason(ctx, call, ref)
        return FollowUp(call, why[0], why[1]) if why is not None else None
    if q not in ITERATORS:
        for prefix, (what, advice) in BY_HAND.items():
            if q == prefix or q.startswith(prefix + "."):
                return FollowUp(call, what, advice)
        return FollowUp(call, f"{q.rsplit('.', 1)[-1]} is not migrated", BY_HAND_TORCH)
    if per_device_list(ctx, ref) and q.startswith("nvidia.dali.plugin.pytorch"):
        return FollowUp(
            call,
            f"{_call_name(call)} over a list of pipelines (one per GPU) is not migrated",
            PER_DEVICE_ADVICE,
        )
    return FollowUp(
        call, f"{_call_name(call)} over a pipeline kept here is not migrated", _advice(q)
    )


def _call_name(call: cst.Call) -> str:
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else "the iterator"


def _subclass_reason(ctx: FileContext, call: cst.Call, ref: cst.CSTNode) -> tuple[str, str] | None:
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
            sub = iterator_subclass(ctx, call, tuple(ITERATORS), ref)
            why = f" ({'; '.join(sub.reasons)})" if sub is not None and sub.reasons else ""
            return (
                f"{name} subclasses {parent} and is not migrated{why}",
                "write a loader class whose __iter__ runs one epoch of "
                f"reader.next_epoch(batch_size=...) and yields what {name}.__next__ returned, "
                f"built from the outputs as {parent} gave them (output.torch() for data[0][name])",
            )
    return None
