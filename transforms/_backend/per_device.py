"""Framework iterators over a list of pipelines, one per GPU (a component of DM200, used by
``iterators``, ``iterator_checks``, ``loaders`` and ``loader_sites``): recognising the list,
what the loader needs to replace the iterator, and the iterator's new call.

Before::

    pipes = [train_pipe(root, shard=i, shards=n, batch_size=64, num_threads=4, device_id=i)
             for i in range(n)]
    for pipe in pipes:
        pipe.build()
    loader = DALIGenericIterator(pipes, ["data", "label"], reader_name="Reader")
    for data in loader:
        step([d["data"] for d in data])

After::

    ndd.set_num_threads(4)
    pipes = [TrainLoader(root, shard=i, shards=n, batch_size=64, device_id=i) for i in range(n)]
    loader = PerDeviceBatches(pipes)
    for data in loader:
        step([d["data"] for d in data])

Why it is exact: with ``reader_name=`` DALI's iterator counts every shard of the reader at
once whatever the number of pipelines it wraps, so each pipeline's batches (``data[i]``) are
what an iterator over that pipeline alone gave, epoch after epoch, cut (PARTIAL) as there: the
loader of one pipeline (its reader, its shard, its operators on its GPU) gives them, and
``PerDeviceBatches`` (``runtime``) gives the loaders' batches side by side, one epoch per pass.
Each loader enters its GPU's context around its operators only (``PipelinePlan.device_turns``),
so loaders of several GPUs take turns in one thread. ``size=`` (which counts the samples of all
pipelines together), loops left early, ``next()``, and the other shapes the single-pipeline
loader takes keep the TODO.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext

from .iterator_args import ITERATORS
from .iterator_follow import loops_around
from .iterator_use import IteratorUse
from .model import Instance

#: the runtime helper that gives the loaders' batches side by side (``runtime.PerDeviceBatches``)
HELPER = "PerDeviceBatches"

#: what to write for an iterator over several pipelines, one per GPU of the process
ADVICE = (
    "write a loader class per pipeline instead: in __init__ build its reader once (its shard_id=, "
    "num_shards=) and take its GPU's context (`with ndd.Device(\"gpu\", i): self.ctx = "
    "ndd.EvalContext.default()`); in __iter__ run one epoch of reader.next_epoch(batch_size=...) "
    "(no ctx=: loops holding different contexts cannot take turns), the operators in `with "
    "self.ctx:`, yielding {name: output.torch(), ...}; then go over the loaders side by side, "
    "a list of their dicts per step, as the iterator gave; delete reset()"
)


def listed_pipelines(ctx: FileContext, inst: Instance, ref: cst.CSTNode) -> bool:
    """``ref`` is the name of a list of ``inst``'s pipelines, one per GPU, handed as the
    pipelines of a PyTorch iterator: ``pipes = [make(device_id=i) for i in range(n)]`` (the
    list's one binding in its scope, ``inst``'s call its element), then
    ``DALIGenericIterator(pipes, ...)``."""
    arg = ctx.parents.get(ref)
    call = ctx.parents.get(arg)
    if not (
        isinstance(ref, cst.Name)
        and isinstance(arg, cst.Arg)
        and isinstance(call, cst.Call)
        and (arg.keyword.value == "pipelines" if arg.keyword else call.args[0] is arg)
    ):
        return False
    q = ctx.qualname(call.func) or ""
    if q not in ITERATORS or not q.startswith("nvidia.dali.plugin.pytorch."):
        return False
    scope = ctx.scopes.get(ref)
    if scope is None or ref.value not in scope.assignments:
        return False
    bindings = list(scope.assignments[ref.value])
    if len(bindings) != 1:
        return False
    target = ctx.parents.get(getattr(bindings[0], "node", None))
    assign = ctx.parents.get(target) if isinstance(target, cst.AssignTarget) else None
    return (
        isinstance(assign, cst.Assign)
        and len(assign.targets) == 1
        and isinstance(assign.value, cst.ListComp)
        and assign.value.elt is inst.call
        and ctx.enclosing_statement(assign) is inst.stmt
    )


def per_device_list(ctx: FileContext, ref: cst.CSTNode) -> bool:
    """``ref`` is a name handed to the iterator that a list display or comprehension of more
    than one pipeline bound (``pipes = [make(device_id=i) for i in range(n)]``): the TODO of an
    iterator over it that is not migrated says to write a loader per GPU."""
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


def device_reasons(use: IteratorUse) -> list[str]:
    """Why the loaders side by side cannot replace the iterator over the list (empty: they
    can)."""
    if use.reader_name is None:
        return [
            "size= over several pipelines counts the samples of all of them together (the "
            "loaders count their shards, as reader_name= does)"
        ]
    shapes = [
        (use.early_exit, "a loop over it can leave an epoch early"),
        (bool(use.pulls), "next() takes batches from it"),
        (bool(use.rebinds), "it is rebound to what its reset() returns"),
        (use.dropin and not use.rebinds, "code the tool cannot read takes it"),
        (use.subclass is not None or use.wrapper is not None, "it is subclassed or wrapped"),
        (bool(use.meta_calls or use.size_reads), "its epoch size is read"),
        (bool(use.kept_resets), "its reset() is called where other values are taken"),
        (use.hooked, "a Lightning hook returns it"),
    ]
    return [f"{what} (not migrated over one pipeline per GPU)" for bad, what in shapes if bad]


def placement_reasons(ctx: FileContext, inst: Instance, use: IteratorUse) -> list[str]:
    """The loaders are made where the pipelines were; the iterator, made after them in the same
    function and loops, becomes the loaders side by side."""
    made = ctx.enclosing_statement(use.call)
    if ctx.scopes.get(made) is not ctx.scopes.get(inst.stmt):
        return ["the iterator is made in another function than the pipelines"]
    if [id(n) for n in loops_around(ctx, made)] != [id(n) for n in loops_around(ctx, inst.stmt)]:
        return ["the iterator is made in another loop than the pipelines"]
    if ctx.line_of(made) <= ctx.line_of(inst.stmt):
        return ["the iterator is made before the pipelines"]
    return []


def devices_call(use: IteratorUse) -> cst.Call:
    """What the iterator's call becomes: ``PerDeviceBatches(pipes)``."""
    assert use.devices is not None
    return cst.Call(cst.Name(HELPER), [cst.Arg(use.devices.deep_clone())])
