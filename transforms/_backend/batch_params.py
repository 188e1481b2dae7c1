"""Functions of the file that every call hands an ndd Batch: their TensorList calls rewritten.

A run's outputs handed to a function (``show(images.as_cpu())``) are ndd Batches now; the
function still calls the TensorList API on its parameter. Where every call of the function in
the file passes a Batch there (the outputs of migrated runs, converted or not), the parameter is
never rebound, and each of its uses is one the tool maps (``at(i)``, ``as_array()``,
``shape()``, ``len()``, ...: :func:`outputs.tensorlist_use`), those uses are rewritten in the
function, as one fix that depends on the fixes of all those calls; applied, the TODOs at the
calls are settled (``Diagnostic.resolved_by``). Before::

    def show(batch):
        for j in range(4):
            plt.imshow(batch.at(j))

    show(images.as_cpu())   # images from pipe.run()

After::

    def show(batch):
        for j in range(4):
            plt.imshow(np.asarray(batch.tensors[j]))

    show(images.cpu())      # images from next(pipe)

Any other case (a call that passes something else, the function referenced without being
called, a use with no Batch counterpart, the Batch handed on again) keeps the TODO at each call.
"""

from __future__ import annotations

import dataclasses

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Diagnostic, Edit
from dali_migrate.rules import FileState

from .._cst import in_source_order
from .flow_sites import arguments_for, called_function, parameter
from .outputs import HandedBatch, tensorlist_use

#: a Batch handed to a call: the fix of the run whose output it is, and its TODO
_Record = tuple[str, HandedBatch]


class _Collector:
    """The Batches handed to calls by the fixes of one file, settled once every structural rule
    ran (``FileState.deferred``)."""

    def __init__(self) -> None:
        self.records: list[_Record] = []

    def __call__(self, state: FileState) -> None:
        ctx = state.ctx
        fix_ids = {f.id for f in state.fixes}
        groups: dict[tuple[int, int], list[_Record]] = {}
        owners: dict[tuple[int, int], tuple[cst.FunctionDef, cst.Param]] = {}
        for fix_id, todo in self.records:
            target = _target(ctx, todo)
            if fix_id not in fix_ids or todo not in state.diagnostics or target is None:
                continue
            key = (id(target[0]), id(target[1]))
            groups.setdefault(key, []).append((fix_id, todo))
            owners[key] = target
        for key, records in groups.items():
            fn, param = owners[key]
            _settle(state, fn, param, records)


def register(state: FileState, fix_id: str, notes: list[Diagnostic]) -> None:
    """Note the Batches that the fix ``fix_id`` hands to calls (its ``notes``)."""
    handed = [d for d in notes if isinstance(d, HandedBatch)]
    if not handed:
        return
    collector = next((c for c in state.deferred if isinstance(c, _Collector)), None)
    if collector is None:
        collector = _Collector()
        state.deferred.append(collector)
    collector.records += [(fix_id, d) for d in handed]


def _target(ctx: FileContext, todo: HandedBatch) -> tuple[cst.FunctionDef, cst.Param] | None:
    """The function of the file the call runs and the parameter the Batch binds."""
    call, arg = todo.call, todo.arg
    if call is None or arg is None or not isinstance(call.func, cst.Name):
        return None
    fn = called_function(ctx, call.func)
    if fn is None or fn.decorators:
        return None
    param = parameter(fn, call, arg)
    return (fn, param) if param is not None else None


def _settle(
    state: FileState, fn: cst.FunctionDef, param: cst.Param, records: list[_Record]
) -> None:
    """One fix rewriting ``param``'s uses in ``fn``, when every call of ``fn`` passes a Batch
    there and every use maps; the TODOs of ``records`` are then settled by it."""
    ctx = state.ctx
    if fn.name.value in ctx.skipped_reads:
        return  # also named in code the tool did not parse (``callbacks = [show]``)
    handed = {id(todo.arg.value) for _, todo in records if todo.arg is not None}
    passed = arguments_for(ctx, fn, fn, param)
    if not passed or any(p is None or id(p) not in handed for p in passed):
        return
    rewrites = _param_rewrites(ctx, param)
    if not rewrites:
        return
    edits = [ctx.expr_edit(old, new) for old, new in rewrites]
    taken = [e for f in state.fixes for e in f.edits]
    if any(_overlaps(e, t) for e in edits for t in taken):
        return
    depends = sorted({fix_id for fix_id, _ in records})
    rule = next(f.rule for f in state.fixes if f.id == depends[0])
    fix = ctx.make_fix(
        rule,
        fn,
        edits,
        f"`{fn.name.value}` takes ndd Batches now: its TensorList calls on "
        f"`{param.name.value}` become Batch API",
        depends_on=depends,
        key=f"batch parameter {param.name.value} of {ctx.text(fn)}",
    )
    state.fixes.append(fix)
    state.claimed += [old for old, _ in rewrites]
    settled = {id(todo) for _, todo in records}
    state.diagnostics[:] = [
        dataclasses.replace(d, resolved_by=fix.id) if id(d) in settled else d
        for d in state.diagnostics
    ]


def _param_rewrites(
    ctx: FileContext, param: cst.Param
) -> list[tuple[cst.CSTNode, cst.BaseExpression]] | None:
    """The Batch-API form of every use of ``param`` (bound once: the parameter itself), or
    None when one has none (or there is no use)."""
    scope = ctx.scopes.get(param.name)
    if scope is None:
        return None
    bindings = list(scope.assignments[param.name.value])
    if len(bindings) != 1 or bindings[0].node is not param:
        return None
    rewrites: list[tuple[cst.CSTNode, cst.BaseExpression]] = []
    for ref in in_source_order(ctx, bindings[0].references):
        outer, new = tensorlist_use(ctx, ref.node, cst.Name(param.name.value))
        if outer is None or new is None or not _converted(new):
            return None
        rewrites.append((outer, new))
    return rewrites or None


def _converted(new: cst.BaseExpression) -> bool:
    """``new`` leaves the Batch: an array, a sample, a property (not ``b.cpu()``, still a Batch
    the function would use further, nor ``ndd.as_tensor(b)``, whose TensorCPU calls the tool does
    not follow here)."""
    if isinstance(new, cst.Call) and isinstance(new.func, cst.Attribute):
        return new.func.attr.value not in ("cpu", "as_tensor")
    return True


def _overlaps(a: Edit, b: Edit) -> bool:
    return a.start < b.end and b.start < a.end or a.start == b.start
