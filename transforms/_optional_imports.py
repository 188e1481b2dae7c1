"""Where DALI is an optional dependency, the ndd import the migration needs is added the same
way DALI was imported, never as a top-level import that would break importing the module
without DALI (used by DM100).

* DALI imported at the top of the module (``import nvidia.dali.fn as fn``): the ndd import goes
  among the module's imports (not handled here).
* Otherwise, DALI imported at module level inside a block (``try: ... except ImportError:``,
  ``if HAVE_DALI:``): ``import nvidia.dali.experimental.dynamic as ndd`` right after the last
  DALI import of that block.
* Otherwise, a module-level name bound by a wrapper call (``dali = try_import_dali()``,
  ``dali = importlib.import_module("nvidia.dali")``): right after it, the same call for ndd
  (``ndd = importlib.import_module("nvidia.dali.experimental.dynamic")``), or, for a call that
  names no module, ``try: import ... as ndd`` / ``except ImportError: ndd = None``.
* Otherwise, DALI imported inside functions only: in each function whose migrated code uses
  ndd, right after its DALI import; a function that uses ndd and imports no DALI (a use site of
  a pipeline imported from another module) imports ndd at the start of its body.

When the import cannot be placed so (the place lies in code another fix replaced, or ndd is
used at module level), the caller falls back to the top-level import.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Literal, NamedTuple, cast

import libcst as cst

from dali_migrate.context import NDD_MODULE, FileContext
from dali_migrate.dali_wrappers import Wrapper, dotted
from dali_migrate.fixes import Edit


class _Site(NamedTuple):
    """A statement that binds DALI: an import, or an assignment of a wrapper call."""

    statement: cst.SimpleStatementLine
    #: the innermost function around it (None: module level)
    function: cst.FunctionDef | None
    wrapper: Wrapper | None


def optional_ndd_edits(
    ctx: FileContext, new_code: str, taken: Sequence[Edit], unused: Callable[[str], bool]
) -> list[Edit] | None:
    """The edits that import ndd as DALI is imported (see the module's docstring), or None when
    the ndd import belongs among the top-level imports. ``unused``: whether the migration left
    a module-level name unused (the DALI names imported next to the new import are dropped
    then; in a function, those it left unused in that function)."""
    sites = _sites(ctx)
    if sites is None or not sites:
        return None
    module_level = [s for s in sites if s.function is None]
    if module_level:
        return _after_block(ctx, module_level, taken, unused)
    return _in_functions(ctx, sites, new_code, taken)


def _imports_dali(small: cst.CSTNode) -> bool:
    if isinstance(small, cst.Import):
        return any(_is_dali(dotted(a.name)) for a in small.names)
    if isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative:
        module = dotted(small.module)
        if module == "nvidia":
            return not isinstance(small.names, cst.ImportStar) and any(
                isinstance(a.name, cst.Name) and a.name.value == "dali" for a in small.names
            )
        return _is_dali(module)
    return False


def _is_dali(module: str) -> bool:
    return (module == "nvidia.dali" or module.startswith("nvidia.dali.")) and not (
        module.startswith(NDD_MODULE)
    )


def _sites(ctx: FileContext) -> list[_Site] | None:
    """Every statement that binds DALI outside class bodies and ``if TYPE_CHECKING:``, in
    source order; None when one is a top-level import (the module needs DALI to import)."""
    smalls: list[tuple[cst.CSTNode, Wrapper | None]] = [
        (n, None) for n in ctx.nodes_of(cst.Import, cst.ImportFrom) if _imports_dali(n)
    ]
    smalls += [(w.statement, w) for w in ctx.wrappers.values() if w.followed]
    sites = []
    for small, wrapper in smalls:
        line = ctx.parents.get(small)
        if not isinstance(line, cst.SimpleStatementLine):
            continue
        if isinstance(ctx.parents.get(line), cst.Module):
            if wrapper is None:
                return None
            sites.append(_Site(line, None, wrapper))
            continue
        where = enclosing(ctx, line)
        if where is not False:
            sites.append(_Site(line, where, wrapper))
    return sorted(sites, key=lambda s: ctx.positions[s.statement].start.line)


def enclosing(ctx: FileContext, line: cst.CSTNode) -> cst.FunctionDef | None | Literal[False]:
    """The innermost function around ``line``; None at module level; False in a class body or
    under ``if TYPE_CHECKING:``."""
    child, cur = line, ctx.parents.get(line)
    while cur is not None and not isinstance(cur, cst.Module):
        if isinstance(cur, cst.FunctionDef):
            return cur
        if isinstance(cur, cst.ClassDef):
            return False
        if isinstance(cur, cst.If) and child is cur.body:
            if dotted(cur.test).split(".")[-1] == "TYPE_CHECKING":
                return False
        child, cur = cur, ctx.parents.get(cur)
    return None


def _inside(offset: int, taken: Sequence[Edit]) -> bool:
    return any(e.start < offset < e.end for e in taken)


def _import_text(ctx: FileContext, site: _Site, indent: str) -> str:
    nl, ndd = ctx.module.default_newline, ctx.ndd
    plain = f"import {NDD_MODULE} as {ndd}"
    w = site.wrapper
    if w is None:
        return f"{indent}{plain}{nl}"
    call = w.statement.value if isinstance(w.statement, (cst.Assign, cst.AnnAssign)) else None
    if isinstance(call, cst.Call) and _names_module(call):
        quote = "'" if ctx.text(call.args[0].value).lstrip("rRbBuU").startswith("'") else '"'
        return f"{indent}{ndd} = {ctx.text(call.func)}({quote}{NDD_MODULE}{quote}){nl}"
    inner = indent + ctx.module.default_indent
    return (
        f"{indent}try:{nl}{inner}{plain}{nl}{indent}except ImportError:{nl}{inner}{ndd} = None{nl}"
    )


def _names_module(call: cst.Call) -> bool:
    """The wrapper call names its module in a string (else only its name says DALI)."""
    if not call.args:
        return False
    first = call.args[0]
    return first.keyword is None and isinstance(first.value, cst.SimpleString)


def _after_block(
    ctx: FileContext, sites: list[_Site], taken: Sequence[Edit], unused: Callable[[str], bool]
) -> list[Edit] | None:
    """The import after the last site of the block of the first one; the DALI names that
    block imports and the migration left ``unused`` are dropped."""
    block = ctx.parents.get(sites[0].statement)
    here = [s for s in sites if ctx.parents.get(s.statement) is block]
    last = here[-1]
    off = ctx.stmt_span(last.statement)[1]
    if _inside(off, taken):
        return None
    indent = "".join(ctx.indents(last.statement))
    text = _import_text(ctx, last, indent)
    edits: list[Edit] = []
    for site in dict.fromkeys(s.statement for s in here):
        start, end = ctx.stmt_span(site)
        pruned = None
        if not any(e.start < end and start < e.end for e in taken):
            pruned = _pruned(ctx, site, unused)
        if site is last.statement:
            if pruned is None:
                return [*edits, Edit(off, off, text)]
            return [*edits, Edit(start, end, pruned + text)]
        if pruned is not None:
            edits.append(Edit(start, end, pruned))
    return [*edits, Edit(off, off, text)]


def _pruned(
    ctx: FileContext, line: cst.SimpleStatementLine, unused: Callable[[str], bool]
) -> str | None:
    """``line`` without the DALI names ``unused`` says (its comment lines only when none is
    left), or None when it keeps them all."""
    smalls: list[cst.BaseSmallStatement] = []
    touched = False
    for small in line.body:
        if not isinstance(small, (cst.Import, cst.ImportFrom)) or isinstance(
            small.names, cst.ImportStar
        ):
            smalls.append(small)
            continue
        dali_from = isinstance(small, cst.ImportFrom) and _imports_dali(small)
        keep = [
            a
            for a in small.names
            if not ((dali_from or _is_dali(dotted(a.name))) and unused(bound_name(a)))
        ]
        if len(keep) == len(small.names):
            smalls.append(small)
            continue
        touched = True
        if keep:
            keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            smalls.append(
                small.with_changes(names=keep)
                if isinstance(small, cst.Import)
                else from_with(small, keep)
            )
    if not touched:
        return None
    if not smalls:
        return ctx.leading_comments(line)
    smalls[-1] = smalls[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
    return ctx.render(line.with_changes(body=smalls), ctx.indents(line))


def bound_name(alias: cst.ImportAlias) -> str:
    """The name an import alias binds."""
    if alias.asname is not None:
        return cast("cst.Name", alias.asname.name).value
    return dotted(alias.name).split(".")[0]


def from_with(small: cst.ImportFrom, keep: list[cst.ImportAlias]) -> cst.ImportFrom:
    """``small`` importing only ``keep`` (without parentheses left around one name)."""
    if small.lpar is None or len(keep) > 1:
        return small.with_changes(names=keep)
    return small.with_changes(names=keep, lpar=None, rpar=None)


class _Shift:
    """Offsets of the original source in the migrated one (``taken``: the edits applied)."""

    def __init__(self, taken: Sequence[Edit]) -> None:
        self.edits = sorted(taken, key=lambda e: (e.start, e.end))

    def __call__(self, offset: int) -> int | None:
        delta = 0
        for e in self.edits:
            if e.start < offset < e.end:
                return None
            if e.end <= offset:
                delta += len(e.text) - (e.end - e.start)
        return offset + delta


def _names(code: str) -> list[tuple[int, str]]:
    """(offset, name) of every name (``ast.Name``) of ``code``, in order."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    lines = code.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            text = lines[node.lineno - 1].encode()[: node.col_offset].decode(errors="ignore")
            out.append((starts[node.lineno - 1] + len(text), node.id))
    return sorted(out)


def _in_functions(
    ctx: FileContext, sites: list[_Site], new_code: str, taken: Sequence[Edit]
) -> list[Edit] | None:
    """One import per function that imports DALI and uses ndd once migrated; one at the start
    of each other outermost function that uses ndd; None if a use is left out."""
    shift = _Shift(taken)
    names_before, names_after = _names(ctx.analysed_source), _names(new_code)
    uses = [o for o, n in names_after if n == ctx.ndd]
    covered: set[int] = set()
    edits: list[Edit] = []
    for function in dict.fromkeys(s.function for s in sites):
        inside = _uses_within(ctx, function, uses, shift)
        if not inside or function is None:
            continue
        unused = _unused_in(ctx, function, names_before, names_after, shift)
        placed = _after_block(ctx, [s for s in sites if s.function is function], taken, unused)
        if placed is None:
            continue
        edits += placed
        covered |= inside
    for use in uses:
        if use in covered:
            continue
        edit, within = _at_body_start(ctx, use, uses, shift, taken)
        if edit is None:
            return None
        edits.append(edit)
        covered |= within
    return edits


def _unused_in(
    ctx: FileContext,
    function: cst.FunctionDef,
    names_before: list[tuple[int, str]],
    names_after: list[tuple[int, str]],
    shift: _Shift,
) -> Callable[[str], bool]:
    """Whether the migration left a name of ``function`` unused there."""
    start, end = ctx.stmt_span(function)
    new_start, new_end = shift(start), shift(end)
    if new_start is None or new_end is None:
        return lambda name: False
    before = Counter(n for o, n in names_before if start <= o < end)
    after = Counter(n for o, n in names_after if new_start <= o < new_end)
    return lambda name: before[name] > 0 and after[name] == 0


def _uses_within(
    ctx: FileContext, node: cst.CSTNode | None, uses: list[int], shift: _Shift
) -> set[int]:
    if node is None:
        return set()
    start, end = (shift(o) for o in ctx.stmt_span(node))
    if start is None or end is None:
        return set()
    return {u for u in uses if start <= u < end}


def _at_body_start(
    ctx: FileContext, use: int, uses: list[int], shift: _Shift, taken: Sequence[Edit]
) -> tuple[Edit | None, set[int]]:
    """The ndd import at the start of the outermost function around ``use``, and the uses it
    covers."""
    for function in ctx.nodes_of(cst.FunctionDef):
        if _enclosing_function(ctx, function) is not None:
            continue
        within = _uses_within(ctx, function, uses, shift)
        if use not in within or not isinstance(function.body, cst.IndentedBlock):
            continue
        body = function.body.body
        off = ctx.stmt_span(body[0])[1 if _is_docstring(body[0]) else 0]
        if _inside(off, taken):
            return None, set()
        indent = "".join(ctx.indents(body[0]))
        text = f"{indent}import {NDD_MODULE} as {ctx.ndd}{ctx.module.default_newline}"
        return Edit(off, off, text), within
    return None, set()


def _enclosing_function(ctx: FileContext, node: cst.CSTNode) -> cst.FunctionDef | None:
    cur = ctx.parents.get(node)
    while cur is not None:
        if isinstance(cur, cst.FunctionDef):
            return cur
        cur = ctx.parents.get(cur)
    return None


def _is_docstring(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )
