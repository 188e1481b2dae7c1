"""The library API: pure functions over source text. Nothing here prints, exits or touches files
unless asked to. Files are the engine's (:func:`dali_migrate.engine.migrate_paths`)."""

from __future__ import annotations

import ast
import bisect
import itertools
import os
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import libcst as cst

from .comments import keep_comments
from .context import FileContext, nesting, python_tree
from .fixes import (
    Diagnostic,
    Edit,
    Fix,
    MissingDependencyError,
    Result,
    SourceParseError,
    UnknownFixError,
    apply_edits_checked,
    drop_nested,
    parses,
    select_consistent,
    splice,
    uniquify,
)
from .project import ModuleInfo
from .registry import all_rules, derived_rule_of, derived_rules, is_derived_fix, rules_for
from .rules import FileState, Rule
from .wrap import DEFAULT_LINE_LENGTH, wrap_new_lines


@dataclass
class _Analysis:
    ctx: FileContext
    fixes: list[Fix]
    diagnostics: list[Diagnostic]
    #: the derived rules that are on (their fixes are made for the fixes applied)
    derived: list[type[Rule]]
    structural: list[str] = field(default_factory=list)


def _analyse(
    code: str, path: str | None, select, ignore, project=None, tree: ast.Module | None = None
) -> _Analysis:
    try:
        ctx = FileContext(code, path, project=project, tree=tree)
    except cst.ParserSyntaxError as e:
        reason = f"not valid Python: {e.message}"
        raise SourceParseError(
            f"{path or '<string>'}:{e.raw_line}:{e.raw_column}: {reason}",
            line=e.raw_line,
            column=e.raw_column,
            reason=reason,
        ) from None
    state = FileState(ctx, lowering=[r() for r in all_rules() if r.composable])
    active = rules_for(select, ignore)
    for rule in all_rules():
        if not rule.structural:
            continue
        rule().run(state)
        if rule not in active:
            # still claimed, so local rules leave those pipelines alone; nothing of it applies
            if any(f.rule == rule.id for f in state.fixes):
                state.refused_pipeline = True
            state.fixes = [f for f in state.fixes if f.rule != rule.id]
            state.diagnostics = [d for d in state.diagnostics if d.rule != rule.id]
    for check in state.deferred:
        check(state)
    local = [r for r in active if not r.structural and not r.last and not r.is_derived()]
    if state.refused_pipeline:
        # reported under the rule that updates the file as a whole after the others (imports)
        owner = next(iter(derived_rules()), None)
        if local and owner is not None:
            state.diagnostics.append(
                Diagnostic(
                    owner.id,
                    "a pipeline of this file could not be migrated: local rewrites are withheld "
                    "so the file is not left half pipeline mode, half dynamic mode",
                    1,
                    0,
                    "info",
                )
            )
    elif local:
        # local rules share one walk of the module
        batch = getattr(local[0], "run_all", None)
        if batch is not None and all(getattr(r, "run_all", None) is batch for r in local):
            batch(state, [r() for r in local])
        else:
            for rule in local:
                rule().run(state)
    for rule in active:
        if rule.last:
            rule().run(state)
    fixes = [
        f for f in uniquify(state.fixes) if not ctx.suppressed(f.rule, f.line or f.span.start_line)
    ]
    diagnostics = [d for d in state.diagnostics if not ctx.suppressed(d.rule, d.line)]
    fixes = [keep_comments(ctx.source, f) for f in drop_nested(fixes)]
    derived = [r for r in active if r.is_derived()]
    return _Analysis(ctx, fixes, diagnostics, derived, state.structural)


def _assemble(
    a: _Analysis, chosen: Sequence[Fix], todo_markers: bool = True, line_length: int = 0
) -> Result:
    """Apply ``chosen`` (and the TODO markers, unless told not to), then the derived import fix;
    wrap the long lines written at ``line_length`` (0: none)."""
    ctx = a.ctx
    chosen, conflicting = select_consistent(list(chosen))
    diagnostics = list(a.diagnostics)
    for f in conflicting:
        diagnostics.append(
            Diagnostic(
                f.rule,
                f"internal error: fix {f.id} overlaps another fix and was not applied",
                f.span.start_line,
                0,
                "error",
            )
        )
    code, applied, broken = apply_edits_checked(ctx.source, chosen)
    for f in broken:
        diagnostics.append(
            Diagnostic(
                f.rule,
                f"internal error: fix {f.id} would not parse and was not applied",
                f.span.start_line,
                0,
                "error",
            )
        )
    taken_edits = [e for f in applied for e in f.edits]
    applied_ids = {f.id for f in applied}
    # a TODO that an applied fix settles is neither written nor reported
    diagnostics = [d for d in diagnostics if d.resolved_by not in applied_ids]
    marker_fixes = []
    if todo_markers:
        marker_fixes = _markers(ctx.source, taken_edits, diagnostics, applied_ids)
    code = splice(ctx.source, taken_edits + marker_fixes)
    fixes = list(a.fixes)
    if applied:
        made = _derived_fixes(a, applied, taken_edits, marker_fixes, diagnostics)
        if made:
            code = splice(
                ctx.source, taken_edits + [e for f in made for e in f.edits] + marker_fixes
            )
            fixes += made
            applied = applied + made
    if line_length and applied:
        code = wrap_new_lines(ctx.source, code, line_length)
    return Result(
        source=ctx.source,
        code=code,
        fixes=fixes,
        diagnostics=diagnostics,
        applied=[f.id for f in applied],
    )


def _derived_fixes(
    a: _Analysis,
    applied: list[Fix],
    taken: list[Edit],
    markers: list[Edit],
    diagnostics: list[Diagnostic],
) -> list[Fix]:
    """The fixes of the derived rules (:meth:`Rule.finalize`) for the ``applied`` fixes, whose
    edits are ``taken``; one that would break the code is left out, as an internal error."""
    ctx = a.ctx
    new_code = splice(ctx.analysed_source, taken + markers)
    made: list[Fix] = []
    for rule in a.derived:
        edits = rule().finalize(ctx, new_code, taken + markers)
        if not edits:
            continue
        written = taken + [e for f in made for e in f.edits]
        if _overlap(edits, written + markers):  # only the text that changes, then
            edits = [_trimmed(ctx.source, e) for e in edits]
        fix = ctx.make_fix(
            rule.id,
            ctx.module,
            edits,
            rule.finalize_message,
            depends_on=[f.id for f in applied],
            key="".join(ctx.source[e.start : e.end] + e.text for e in edits),
        )
        # a marker last at its place: right above its statement, below an import inserted there
        trial = splice(ctx.source, written + list(fix.edits) + markers)
        if parses(trial) and not _overlap(fix.edits, written + markers):
            made.append(fix)
        else:
            message = f"internal error: the {rule.name} fix was not applied"
            diagnostics.append(Diagnostic(fix.rule, message, 1, 0, "error"))
    return made


@dataclass(frozen=True)
class _Marker:
    edits: tuple[Edit, ...]
    rule: str
    line: int


def _markers(
    source: str, taken: list[Edit], diagnostics: list[Diagnostic], applied: set[str]
) -> list[Edit]:
    """The TODO markers to write: one per place, none inside code a fix replaced, none whose
    fix (``requires``) is not applied, and none that would break the parse (each such one is
    reported as an internal error of its rule)."""
    order = sorted(taken, key=lambda e: e.start)
    starts = [e.start for e in order]
    reach = list(itertools.accumulate((e.end for e in order), max))  # furthest end so far
    wanted: dict[Edit, _Marker] = {}
    for d in diagnostics:
        m = d.marker
        if m is None or m in wanted or (d.requires is not None and d.requires not in applied):
            continue
        k = bisect.bisect_right(starts, m.start) - 1  # edits starting at or before the marker
        if k >= 0 and m.start < reach[k]:
            continue
        wanted[m] = _Marker((m,), d.rule, d.line)
    _, kept, broken = apply_edits_checked(source, list(wanted.values()), base=taken)
    for b in broken:
        message = "internal error: a TODO marker would not parse and was not written"
        diagnostics.append(Diagnostic(b.rule, message, b.line, 0, "error"))
    return [m.edits[0] for m in kept]


T = TypeVar("T")
#: how deep (:func:`~dali_migrate.context.nesting`) a module may nest and still be analysed on the
#: caller's thread, under its recursion limit; deeper ones get a thread of their own
INLINE_NESTING = 40
#: deeper than this a module is refused (libcst's parser, native code, can overflow its stack)
MAX_NESTING = 1000
_DEEP_STACK = 512 * 1024 * 1024
_deep = threading.Lock()  # one deep analysis at a time: the recursion limit is per process


def _guarded(code: str, path: str | None, run: Callable[[ast.Module], T]) -> T:
    """``run(tree)`` over ``code`` parsed by CPython, with the stack and recursion limit its
    nesting needs. Invalid Python, and nesting past what can be analysed, raise
    :class:`SourceParseError` (a ``RecursionError`` never escapes)."""
    tree = python_tree(code, path)
    depth, deepest = nesting(tree)
    name = path or "<string>"
    if depth > MAX_NESTING:
        line, col = getattr(deepest, "lineno", 1), getattr(deepest, "col_offset", 0)
        reason = f"too deeply nested to analyse ({depth} levels; at most {MAX_NESTING} are)"
        message = f"{name}:{line}:{col}: {reason}"
        raise SourceParseError(message, line=line, column=col, reason=reason)
    try:
        return run(tree) if depth <= INLINE_NESTING else _on_deep_stack(lambda: run(tree), depth)
    except RecursionError:
        reason = f"too deeply nested to analyse ({depth} levels)"
        raise SourceParseError(f"{name}:1:0: {reason}", line=1, column=0, reason=reason) from None


def _on_deep_stack(work: Callable[[], T], depth: int) -> T:
    """``work()`` on a thread with a large stack, under a recursion limit raised for ``depth``."""
    outcome: list = []

    def target() -> None:
        try:
            outcome.append((True, work()))
        except BaseException as e:  # handed to the caller's thread
            outcome.append((False, e))

    with _deep:
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 60 * depth + 10_000))
        try:
            size = threading.stack_size(_DEEP_STACK)
            try:
                thread = threading.Thread(target=target, name="dali-migrate-deep", daemon=True)
                thread.start()
            finally:
                threading.stack_size(size)
            thread.join()
        finally:
            sys.setrecursionlimit(limit)
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def _trimmed(source: str, e: Edit) -> Edit:
    """``e`` less the text at its two ends that it writes back unchanged (an import statement
    rewritten with the blank line above it: another fix may insert an import right there)."""
    old = source[e.start : e.end]
    head = len(os.path.commonprefix([old, e.text]))
    tail = len(os.path.commonprefix([old[head:][::-1], e.text[head:][::-1]]))
    return Edit(e.start + head, e.end - tail, e.text[head : len(e.text) - tail])


def _overlap(a: Iterable[Edit], b: Iterable[Edit]) -> bool:
    b = list(b)
    return any(x.start < y.end and y.start < x.end for x in a for y in b)


def migrate_source(
    code: str,
    *,
    path: str | None = None,
    select: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
    unsafe: bool = False,
    project: ModuleInfo | None = None,
    line_length: int = DEFAULT_LINE_LENGTH,
) -> Result:
    """Migrate one module's source text.

    Returns a :class:`Result`: ``.fixes`` lists every fix found (safe and unsafe), ``.code`` is
    the source with every safe fix applied (and unsafe ones too when ``unsafe=True``), TODO
    markers included, ``.diagnostics`` what was left unmigrated and why, ``.changed`` whether
    ``.code`` differs. ``select``/``ignore`` take rule ids or prefixes (``"DM1"``).
    ``project`` is what the other modules of the project say about this one (see
    :mod:`dali_migrate.project`; :func:`migrate_paths` and the CLI find it themselves).
    Calls on lines the migration wrote that are longer than ``line_length`` are wrapped, as a
    formatter would (0: never); the user's own lines are left as they are.
    Raises :class:`SourceParseError` when ``code`` is not valid Python.
    """

    def run(tree: ast.Module) -> Result:
        a = _analyse(code, path, select, ignore, project, tree)
        chosen = [f for f in a.fixes if unsafe or f.safety == "safe"]
        return _assemble(a, chosen, line_length=line_length)

    return _guarded(code, path, run)


def apply_fixes(
    code: str,
    fixes: Iterable[Fix | str],
    *,
    path: str | None = None,
    todo_markers: bool = True,
    select: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
    project: ModuleInfo | None = None,
    line_length: int = DEFAULT_LINE_LENGTH,
) -> str:
    """Apply a chosen subset of the fixes of ``code`` (Fix objects or their ids).

    The ``# TODO(dali-migrate)`` markers of what could not be migrated are added too, as in
    ``migrate_source(code).code``, unless ``todo_markers=False``.
    Dependencies must be chosen too (:class:`MissingDependencyError`); an id that names no fix
    of this source raises :class:`UnknownFixError`. The import fix (DM100) is recomputed for the
    subset; chosen without any of the fixes it depends on, it raises MissingDependencyError.
    Pass the ``select``, ``ignore`` and ``project`` the fixes were found with, if any: they
    decide which fixes (and so which ids) the source has (``FileResult.project`` for a file of
    :func:`migrate_paths`). Raises :class:`SourceParseError` for invalid Python.
    """
    wanted = list(fixes)

    def run(tree: ast.Module) -> str:
        a = _analyse(code, path, select, ignore, project, tree)
        chosen = _chosen(a, wanted)
        _check_derived_fixes(a, wanted, {f.id for f in chosen})
        return _assemble(a, chosen, todo_markers, line_length).code

    return _guarded(code, path, run)


def _chosen(a: _Analysis, fixes: Sequence[Fix | str]) -> list[Fix]:
    """The fixes of ``a`` that ``fixes`` names (the import fix is derived, not chosen)."""
    by_id = {f.id: f for f in a.fixes}
    chosen: list[Fix] = []
    for f in fixes:
        fid = f if isinstance(f, str) else f.id
        if is_derived_fix(fid):
            continue  # derived: recomputed for what is chosen (_check_derived_fixes)
        if fid not in by_id:
            raise UnknownFixError(fid)
        chosen.append(by_id[fid])
    ids = {f.id for f in chosen}
    for f in chosen:
        missing = [d for d in f.depends_on if d not in ids and not is_derived_fix(d)]
        if missing:
            raise MissingDependencyError(f"fix {f.id} needs {', '.join(missing)}")
    return chosen


def _check_derived_fixes(a: _Analysis, fixes: Sequence[Fix | str], chosen: set[str]) -> None:
    """A derived fix (the import fix) updates the file for the fixes it depends on: chosen
    without any of them it would change nothing, so it is refused
    (:class:`MissingDependencyError`), as any fix chosen without what it needs; an id that is no
    derived fix of this source is unknown."""
    known: dict[str, tuple[str, ...]] | None = None
    for f in fixes:
        fid = f if isinstance(f, str) else f.id
        rule = derived_rule_of(fid)
        if rule is None:
            continue
        if isinstance(f, str):
            if known is None:  # the derived fixes of this source: of its safe fixes, of all of them
                known = {}
                for subset in ([g for g in a.fixes if g.safety == "safe"], a.fixes):
                    made = _assemble(a, subset).fixes
                    known.update((g.id, g.depends_on) for g in made if is_derived_fix(g.id))
            if fid not in known:
                raise UnknownFixError(fid)
            needs = known[fid]
        else:
            needs = f.depends_on
        if needs and not chosen.intersection(needs):
            more = f" (and {len(needs) - 3} more)" if len(needs) > 3 else ""
            raise MissingDependencyError(
                f"fix {fid} updates the {rule.name} for the fixes it depends on, and none of them "
                f"is chosen: choose {', '.join(needs[:3])}{more}"
            )
