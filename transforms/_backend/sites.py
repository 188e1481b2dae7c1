"""Emit, for the use sites: what ``pipe = f(...)``, ``pipe.build()``, ``pipe.run()`` and the
code around them become once the definition is a dynamic-mode generator; and how a structural
rule reports a migrated or refused pipeline."""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import TODO_PREFIX, Diagnostic, Edit
from dali_migrate.rules import FileState

from .._cst import comment_line, remove_args
from . import handles, iterators
from .arguments import PIPELINE_ARGS, set_threads_stmt
from .edits import removed_stmt
from .model import Instance
from .outputs import output_edits


def pipeline_def_instance_edits(
    ctx: FileContext,
    inst: Instance,
    rule_id: str,
    threads_default: cst.Arg | None,
    params: set[str],
    notes: list[Diagnostic],
    comments: list[cst.EmptyLine] | tuple[()] = (),
    peers: tuple[cst.Call, ...] = (),
) -> list[Edit]:
    """``pipe = f(..., num_threads=4)`` of a ``@pipeline_def`` function: pipeline arguments
    dynamic mode has no use for are dropped, ``num_threads`` becomes ``ndd.set_num_threads``
    before it (the call's, else the decorator's), then the build and run sites. When the function
    now returns handles before the batches (``inst.handle_names``), the call site unpacks them."""
    threads = inst.kwargs.get("num_threads", threads_default)
    keep = remove_args(list(inst.call.args), PIPELINE_ARGS - {"batch_size", "seed"} - params)
    keep = [
        a.with_changes(keyword=cst.Name("batch_size")) if a.keyword and a.keyword.value == "max_batch_size" else a
        for a in keep
    ]
    assign = inst.assign.with_changes(value=inst.call.with_changes(args=keep))
    if inst.handle_names:
        names = [*inst.handle_names.values(), inst.name]
        target = cst.Tuple([cst.Element(cst.Name(n)) for n in names], lpar=[], rpar=[])
        assign = assign.with_changes(targets=[assign.targets[0].with_changes(target=target)])
    new_stmt = inst.stmt.with_changes(body=[assign])
    stmts: list[cst.BaseStatement] = []
    todo_lines = list(comments)
    if inst.device_todo:
        todo_lines.append(device_todo_line(ctx, inst, rule_id, notes))
    if threads is not None:
        stmts.append(set_threads_stmt(ctx, threads).with_changes(leading_lines=inst.stmt.leading_lines))
        new_stmt = new_stmt.with_changes(leading_lines=todo_lines)
    else:
        new_stmt = new_stmt.with_changes(leading_lines=list(inst.stmt.leading_lines) + todo_lines)
    stmts.append(new_stmt)
    return [ctx.stmt_edit(inst.stmt, stmts)] + run_site_edits(ctx, inst, notes, peers=peers)


def device_todo_line(
    ctx: FileContext, inst: Instance, rule_id: str, notes: list[Diagnostic], at: cst.CSTNode | None = None
) -> cst.EmptyLine:
    """The TODO about a dropped ``device_id`` above the pipeline's creation, and its diagnostic
    (reported at ``at``, by default the creation)."""
    assert inst.device_todo is not None
    notes.append(Diagnostic(rule_id, inst.device_todo, ctx.line_of(at if at is not None else inst.stmt), 0, "todo"))
    return comment_line(f"{TODO_PREFIX} {rule_id}: {inst.device_todo}")


def run_site_edits(
    ctx: FileContext,
    inst: Instance,
    notes: list[Diagnostic],
    moved: cst.CSTNode | None = None,
    peers: tuple[cst.Call, ...] = (),
) -> list[Edit]:
    """``pipe.build()`` removed, ``pipe.run()`` -> ``next(pipe)`` and its outputs' API.
    ``moved`` is graph code of the same scope that moves into the generator: names it assigns
    are no longer the run site's. ``peers``: the ``run()`` calls of the other instances migrated
    in the same fix (``data = pipe.run()`` then ``data = restored.run()`` in one scope: a use
    after both may hold either; the caller drops the edits found twice)."""
    edits = [removed_stmt(ctx, b) for b in inst.builds]
    edits += iterators.site_edits(ctx, inst, notes)
    edits += handles.site_edits(ctx, inst)
    for run in inst.runs:
        assert isinstance(run.func, cst.Attribute)
        call = ctx.expr_edit(run, cst.Call(func=cst.Name("next"), args=[cst.Arg(run.func.value)]))
        outputs = output_edits(ctx, run, notes, moved, peers)
        # `pipe.run()[0].as_array()` is rewritten whole, its next(pipe) included
        if not any(e.start <= call.start and call.end <= e.end for e in outputs):
            edits.append(call)
        edits += outputs
    return edits


# -- what a structural rule reports ---------------------------------------------------------------


def refuse_pipeline(state: FileState, rule_id: str, node: cst.CSTNode, why: object, which: str = "") -> None:
    """The pipeline stays as it was, with one TODO listing every reason; no local rewrite of
    the file is applied either (``refused_pipeline``)."""
    state.refused_pipeline = True
    state.diagnostics.append(state.ctx.todo(rule_id, node, f"pipeline not migrated{which}: {why}"))


def propose_pipeline_fix(
    state: FileState,
    rule_id: str,
    node: cst.CSTNode,
    edits: list[Edit],
    message: str,
    includes: list[str],
    notes: list[Diagnostic],
) -> None:
    """The one fix that migrates a pipeline (definition and use sites) and its notes."""
    fix = state.ctx.make_fix(rule_id, node, edits, message, includes=includes)
    state.fixes.append(fix)
    state.structural.append(fix.id)
    state.diagnostics.extend(notes)
