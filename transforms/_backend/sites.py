"""Emit, for the use sites: what ``pipe = f(...)``, ``pipe.build()``, ``pipe.run()`` and the
code around them become once the definition is a dynamic-mode generator; and how a structural
rule reports a migrated or refused pipeline."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import TODO_PREFIX, Diagnostic, Edit
from dali_migrate.rules import FileState

from .._cst import (
    comment_line,
    leading_lines,
    remove_args,
    scope_label,
    walk,
)
from . import batch_params, handles, kept
from .arguments import PIPELINE_ARGS, set_threads_stmt
from .edits import removed_stmt
from .model import FollowUp, Instance, Refused
from .outputs import output_edits
from .star_keys import passed_on


def pipeline_def_instance_edits(
    ctx: FileContext,
    inst: Instance,
    rule_id: str,
    threads_default: cst.Arg | None,
    params: set[str],
    notes: list[Diagnostic],
    comments: list[cst.EmptyLine] | tuple[()] = (),
    peers: tuple[cst.Call, ...] = (),
    threads_set: set[int] | None = None,
    shared: SharedStatements | None = None,
) -> list[Edit]:
    """``pipe = f(..., num_threads=4)`` of a ``@pipeline_def`` function: pipeline arguments
    dynamic mode has no use for are dropped, ``num_threads`` becomes ``ndd.set_num_threads``
    before it (the call's, else the decorator's), then the build and run sites. When the function
    now returns handles before the batches (``inst.handle_names``), the call site unpacks them.
    ``threads_set``: the blocks where this fix already writes ``set_num_threads`` (the thread
    pool is one for the whole program: the first pipeline made in a block sets it, for the
    blocks inside it too, not for the other branch of an ``if``);
    ``shared``: where the rewrites of statements that make several pipelines are built up."""
    threads = inst.kwargs.get("num_threads", threads_default)
    threads_raw = threads
    if threads is not None and threads_set is not None:
        blocks = enclosing_blocks(ctx, inst.stmt)
        threads = None if any(b in threads_set for b in blocks) else threads
        threads_set.add(blocks[0])
    keep = batch_size_named(kept_args(inst, params))
    new_call = inst.call.with_changes(args=keep)
    joint = _Joint(inst.stmt) if shared is None else shared.part(ctx, inst)
    if inst.handle_names and inst.assign is not None:
        names = [*inst.handle_names.values(), inst.name]
        target = cst.Tuple([cst.Element(cst.Name(n)) for n in names], lpar=[], rpar=[])
        assign = inst.assign.with_changes(
            targets=[inst.assign.targets[0].with_changes(target=target)], value=new_call
        )
        joint.whole = inst.stmt.with_changes(body=[assign])
    else:  # the calls of other pipelines made in this statement stay as their fixes made them
        _check_alike(ctx, joint, inst, new_call, threads_raw)
        joint.calls[id(inst.call)] = new_call
    lines = list(comments) + inst.todo_lines
    if inst.device_todo:
        lines.append(device_todo_line(ctx, inst, rule_id, notes))
    joint.lines += [n for n in lines if not any(n.deep_equals(o) for o in joint.lines)]
    if threads is not None and joint.threads is None:
        joint.threads = set_threads_stmt(ctx, threads)
    joint.edit = ctx.stmt_edit(inst.stmt, joint.statements())
    return [joint.edit] + run_site_edits(ctx, inst, notes, peers=peers)


def _check_alike(
    ctx: FileContext, joint: _Joint, inst: Instance, new_call: cst.Call, threads: cst.Arg | None
) -> None:
    """A call that several definitions may reach (``pipe_fn(...)``, given either as a value) is
    rewritten alike for each of them, or not at all (Refused)."""
    if not inst.through_value:
        return
    text = cst.Module([]).code_for_node(threads.value) if threads is not None else ""
    before = joint.calls.get(id(inst.call))
    if before is not None and (
        not before.deep_equals(new_call) or joint.threads_of.get(id(inst.call)) != text
    ):
        code = " ".join(ctx.text(inst.call).split())
        code = code if len(code) <= 60 else code[:57] + "..."
        raise Refused(
            f"`{code}` may make the pipelines of several definitions, which would each rewrite "
            "it differently (their num_threads or parameters differ)"
        )
    joint.threads_of[id(inst.call)] = text


@dataclasses.dataclass
class _Joint:
    """The rewrite of a statement that makes pipelines, built up by each pipeline made in it:
    the new calls (by the original call's id), or the ``whole`` new statement; the TODO lines
    and ``ndd.set_num_threads`` above it."""

    stmt: cst.BaseStatement
    calls: dict[int, cst.Call] = dataclasses.field(default_factory=dict)
    whole: cst.BaseStatement | None = None
    lines: list[cst.EmptyLine] = dataclasses.field(default_factory=list)
    threads: cst.BaseStatement | None = None
    edit: Edit | None = None
    makers: set[str] = dataclasses.field(default_factory=set)
    #: the thread count each call's pipeline asked for (the text of its expression, or "")
    threads_of: dict[int, str] = dataclasses.field(default_factory=dict)

    def statements(self) -> list[cst.BaseStatement]:
        """``ndd.set_num_threads`` (with the comments above the statement), the TODO lines,
        the statement."""
        new = self.whole or self.stmt.visit(_NewCalls(self.calls))
        assert isinstance(new, cst.BaseStatement)
        if self.threads is None:
            return [new.with_changes(leading_lines=[*leading_lines(self.stmt), *self.lines])]
        return [
            self.threads.with_changes(leading_lines=leading_lines(self.stmt)),
            new.with_changes(leading_lines=self.lines),
        ]


class _NewCalls(cst.CSTTransformer):
    def __init__(self, calls: dict[int, cst.Call]) -> None:
        super().__init__()
        self.calls = calls

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        return self.calls.get(id(original), updated)


class SharedStatements:
    """The statements that make several pipelines of a module (``pipes = [a(), b()]``): the
    fix of each would rewrite the whole statement for its own call, so the rewrite is built up
    across them, and :meth:`joined` gives each fix the whole one (the same edit: the pipelines
    are migrated by one fix)."""

    def __init__(self) -> None:
        self._parts: dict[int, _Joint] = {}

    def part(self, ctx: FileContext, inst: Instance) -> _Joint:
        """Where ``inst`` adds its part to the rewrite of its statement (a statement of its own
        for a second object of the same pipeline there: the fix sees the two rewrites collide
        and keeps the pipeline's TODO)."""
        maker = ctx.text(inst.call.func)
        joint = self._parts.setdefault(id(inst.stmt), _Joint(inst.stmt))
        if maker in joint.makers:  # the same call, reached by a definition passed as a value
            return (
                joint if inst.through_value and id(inst.call) in joint.calls else _Joint(inst.stmt)
            )
        joint.makers.add(maker)
        return joint

    def joined(self, edits: list[Edit]) -> list[Edit]:
        """``edits`` with each rewrite of such a statement replaced by the whole rewrite."""
        final = {(j.edit.start, j.edit.end): j.edit for j in self._parts.values() if j.edit}
        return [final.get((e.start, e.end), e) for e in edits]


def device_todo_line(
    ctx: FileContext,
    inst: Instance,
    rule_id: str,
    notes: list[Diagnostic],
    at: cst.CSTNode | None = None,
) -> cst.EmptyLine:
    """The TODO about a dropped ``device_id`` above the pipeline's creation, and its diagnostic
    (reported at ``at``, by default the creation)."""
    assert inst.device_todo is not None
    notes.append(
        Diagnostic(
            rule_id, inst.device_todo, ctx.line_of(at if at is not None else inst.stmt), 0, "todo"
        )
    )
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
    edits = [removed_stmt(ctx, b) for b in [*inst.builds, *inst.feed_stmts]]
    edits += handles.site_edits(ctx, inst)
    for run in inst.runs:
        assert isinstance(run.func, cst.Attribute)
        new = inst.run_calls.get(id(run))
        if new is None:
            new = cst.Call(func=cst.Name("next"), args=[cst.Arg(run.func.value)])
        call = ctx.expr_edit(run, new)
        # the other run() calls of this instance (a factory's pipeline run at two call sites
        # whose outputs one name holds in turn) are peers too
        own = tuple(r for r in inst.runs if r is not run)
        outputs = output_edits(ctx, run, notes, moved, (*peers, *own))
        # `pipe.run()[0].as_array()` is rewritten whole, its next(pipe) included
        if not any(e.start <= call.start and call.end <= e.end for e in outputs):
            edits.append(call)
        edits += outputs
    return edits


# -- what a structural rule reports ---------------------------------------------------------------


def refuse_pipeline(
    state: FileState,
    rule_id: str,
    node: cst.CSTNode,
    why: object,
    which: str = "",
    keep: cst.CSTNode | None = None,
) -> None:
    """The pipeline stays as it was, with one TODO listing every reason. The code that builds
    its graph (``keep``, by default ``node``) and the code of the module it reaches (functions
    and classes it names or is handed, the values of the names it reads: ``kept.reached_code``)
    keep their pipeline-mode API: local rules leave them alone, so the pipeline still runs. When
    that code is not one definition (module-level graph code), no local rewrite of the file
    applies."""
    text = " ".join(
        f"pipeline not migrated{which}: {why}".split()
    )  # one line, whatever the code quoted
    state.diagnostics.append(state.ctx.todo(rule_id, node, text))
    keep = node if keep is None else keep
    if isinstance(keep, cst.Module):
        state.refused_pipeline = True
        return
    extra, defs = kept.reached_code(state.ctx, keep, state.claimed)
    state.claimed += [keep, *extra, *defs]
    state.kept += [keep, *extra, *defs]
    label = (
        f"`{keep.name.value}`"
        if isinstance(keep, (cst.FunctionDef, cst.ClassDef))
        else f"the pipeline {scope_label(state.ctx, node)}"
    )
    if defs or extra:
        state.deferred.append(functools.partial(_kept_todos, rule_id, label, defs, extra))


def _kept_todos(
    rule_id: str,
    label: str,
    defs: list[kept.Def],
    extra: list[cst.CSTNode],
    state: FileState,
) -> None:
    """A TODO on the code kept in pipeline mode for the pipeline ``label`` names (outside its
    graph code): on each function or class that code running in dynamic mode uses too (a
    migrated generator, plain code), since it cannot be both; on the others, and on the values
    it reads, that still hold pipeline-mode API, saying whose graph they build."""
    ctx = state.ctx
    done: set[int] = set()
    for helper, use in kept.shared_uses(ctx, defs, state.kept):
        # on the helper: the use may stand in code a fix rewrites (a migrated generator)
        name = helper.name.value
        call = isinstance(parent := ctx.parents.get(use), cst.Call) and parent.func is use
        text = (
            f"`{name}` keeps its pipeline-mode API for {label}, which is not migrated; it is "
            f"also {'called' if call else 'used'} {scope_label(ctx, use)}: where that code "
            f"runs in dynamic mode, {'call' if call else 'use'} a copy of it written with ndd"
        )
        _add_todo(state, ctx.todo(rule_id, helper, text))
        done.add(id(helper))
    for item in kept.building(ctx, [*defs, *extra], through=False):
        if id(item) not in done:
            text = (
                f"pipeline-mode API kept for {label}, which is not migrated (see its TODO): "
                "this code builds its graph; write it with ndd when that pipeline is migrated"
            )
            _add_todo(state, ctx.todo(rule_id, kept.first_building(ctx, item), text))


def _add_todo(state: FileState, todo: Diagnostic) -> None:
    """``todo``, unless a TODO of its rule stands on its line already."""
    if not any(d.line == todo.line and d.rule == todo.rule for d in state.diagnostics):
        state.diagnostics.append(todo)


def propose_pipeline_fix(
    state: FileState,
    rule_id: str,
    node: cst.CSTNode,
    edits: list[Edit],
    message: str,
    includes: list[str],
    notes: list[Diagnostic],
    followups: Sequence[FollowUp] = (),
    advice: str = "",
    key: str | None = None,
    written: Sequence[Diagnostic] = (),
) -> None:
    """The one fix that migrates a pipeline (definition and use sites) and its notes. Each
    follow-up becomes a TODO the fix writes above the code it is about (``advice`` says what the
    pipeline object is now, for follow-ups that give no advice of their own); ``written``: the
    follow-ups the edits already write (:func:`creation_todos`)."""
    edits = list({(e.start, e.end, e.text): e for e in edits}.values())  # a use reached twice
    todos = follow_up_todos(state.ctx, rule_id, followups, advice)
    inside = [d for d in todos if d.marker is not None and _within_edits(d.marker, edits)]
    edits = with_markers(edits, [d.marker for d in inside if d.marker is not None])
    follow_ups = [d.message for d in [*written, *todos]]
    fix = state.ctx.make_fix(
        rule_id, node, edits, message, includes=includes, key=key, follow_ups=follow_ups
    )
    state.fixes.append(fix)
    state.structural.append(fix.id)
    state.diagnostics.extend(notes)
    batch_params.register(state, fix.id, notes)
    # a TODO outside the code the fix rewrites is written with the fix only (other fixes may
    # put theirs on the same statement)
    state.diagnostics.extend(
        dataclasses.replace(d, marker=None if d in inside else d.marker, requires=fix.id)
        for d in todos
    )
    state.diagnostics.extend(written)


def _within_edits(marker: Edit, edits: list[Edit]) -> bool:
    return any(e.start <= marker.start < e.end for e in edits)


def creation_todos(
    ctx: FileContext,
    rule_id: str,
    instances: list[Instance],
    followups: list[FollowUp],
    advice: str,
) -> list[Diagnostic]:
    """The follow-ups about the statements that create the pipelines (which the fix rewrites):
    taken out of ``followups`` and put on the instances (``todo_lines``), to be written with the
    new statement; returned as their diagnostics."""
    written: list[Diagnostic] = []
    for inst in instances:
        mine = [f for f in followups if ctx.enclosing_statement(f.node) is inst.stmt]
        if not mine:
            continue
        followups[:] = [f for f in followups if f not in mine]
        for d in follow_up_todos(ctx, rule_id, mine, advice):
            inst.todo_lines.append(comment_line(f"{TODO_PREFIX} {rule_id}: {d.message}"))
            written.append(dataclasses.replace(d, marker=None))
    return written


def follow_up_todos(
    ctx: FileContext, rule_id: str, followups: Sequence[FollowUp], advice: str
) -> list[Diagnostic]:
    """One TODO per statement that holds follow-ups, saying what to write there now."""
    by_stmt: dict[int, list[FollowUp]] = {}
    for f in followups:
        by_stmt.setdefault(id(ctx.enclosing_statement(f.node)), []).append(f)
    todos = []
    for group in by_stmt.values():
        texts = [
            f"{f.what}: {f.advice or advice}" if (f.advice or advice) else f.what for f in group
        ]
        text = " ".join(
            "; ".join(dict.fromkeys(texts)).split()
        )  # one line, whatever the code quoted
        todos.append(_at_line(ctx, ctx.todo(rule_id, group[0].node, text), group[0].node))
    return sorted(todos, key=lambda d: (d.line, d.col))


def _at_line(ctx: FileContext, todo: Diagnostic, node: cst.CSTNode) -> Diagnostic:
    """The TODO right above the line of ``node`` when that line continues a statement inside
    brackets (a comment line is valid there), so that it stands next to the code it is about."""
    line = ctx.positions[node].start.line
    stmt = ctx.enclosing_statement(node)
    if (
        todo.marker is None
        or line == ctx.positions[stmt].start.line
        or not _bracketed_line(ctx, stmt, line)
    ):
        return todo
    start = ctx.lines.offset(line, 0)
    indent = ctx.source[start : start + ctx.positions[node].start.column]
    indent = indent[: len(indent) - len(indent.lstrip())] if indent.strip() else indent
    marker = Edit(
        start,
        start,
        f"{indent}{TODO_PREFIX} {todo.rule}: {todo.message}{ctx.module.default_newline}",
    )
    return dataclasses.replace(todo, marker=marker, line=line)


def _bracketed_line(ctx: FileContext, stmt: cst.CSTNode, line: int) -> bool:
    """``line`` of the simple statement ``stmt`` starts inside its brackets, not in a string or
    after a backslash."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for n in walk(stmt):
        if isinstance(n, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            pos = ctx.positions[n]
            if pos.start.line < line <= pos.end.line:
                return False
    start = ctx.lines.offset(line, 0)
    previous = ctx.source[:start].rstrip("\r\n")
    return not previous.endswith("\\")


def with_markers(edits: list[Edit], markers: list[Edit]) -> list[Edit]:
    """``edits`` with the TODO lines ``markers`` inserts inside statements they rewrite: each
    goes on top of the rewritten statement."""
    edits = list(edits)
    for m in markers:
        inside = next(i for i, e in enumerate(edits) if e.start <= m.start < e.end)
        e = edits[inside]
        edits[inside] = Edit(e.start, e.end, m.text + e.text)
    return edits


def generator_advice(name: str, outputs: str) -> str:
    """What a migrated pipeline function returns now, for the TODOs at uses the tool cannot
    rewrite (``outputs``: what each batch is, ``docstrings.outputs_text``)."""
    return (
        f"{name}(...) returns a generator of {outputs} batches now, not a Pipeline: "
        "take each batch with next(...), and drop build()"
    )


def enclosing_blocks(ctx: FileContext, stmt: cst.CSTNode) -> list[int]:
    """The ids of the blocks around ``stmt``, innermost first, up to its function's body (or
    the module): code written in any of them before ``stmt`` runs before it."""
    out: list[int] = []
    node = ctx.parents.get(stmt)
    while node is not None:
        if isinstance(node, (cst.IndentedBlock, cst.Module, cst.SimpleStatementSuite)):
            out.append(id(node))
        if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef, cst.Module)):
            break
        node = ctx.parents.get(node)
    return out or [id(ctx.module)]


def kept_args(inst: Instance, params: set[str]) -> list[cst.Arg]:
    """The arguments of the call that made the pipeline that the generator (or loader) takes:
    not those of the Pipeline that dynamic mode has no use for (``params``: the function's own
    parameters of those names are kept)."""
    dropped = PIPELINE_ARGS - {"batch_size", "seed"} - params - inst.keep_args
    gone = dropped & set(inst.unpacked.keys) if inst.unpacked is not None else set()
    args = [inst.lowered.get(id(a), a) for a in inst.call.args]
    return remove_args(passed_on(args, gone), dropped)


def batch_size_named(args: list[cst.Arg]) -> list[cst.Arg]:
    """``max_batch_size=`` becomes ``batch_size=`` (the parameter the generator takes)."""
    return [
        a.with_changes(keyword=cst.Name("batch_size"))
        if a.keyword and a.keyword.value == "max_batch_size"
        else a
        for a in args
    ]
