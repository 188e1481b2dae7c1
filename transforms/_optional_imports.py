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
from collections.abc import Sequence
from typing import NamedTuple

import libcst as cst

from dali_migrate.context import NDD_MODULE, FileContext, Wrapper, dotted
from dali_migrate.fixes import Edit


class _Site(NamedTuple):
    """A statement that binds DALI: an import, or an assignment of a wrapper call."""

    statement: cst.SimpleStatementLine
    #: the innermost function around it (None: module level)
    function: cst.FunctionDef | None
    wrapper: Wrapper | None


def optional_ndd_edits(ctx: FileContext, new_code: str, taken: Sequence[Edit]) -> list[Edit] | None:
    """The edits that import ndd as DALI is imported (see the module's docstring), or None when
    the ndd import belongs among the top-level imports."""
    sites = _sites(ctx)
    if sites is None or not sites:
        return None
    module_level = [s for s in sites if s.function is None]
    if module_level:
        return _after_block(ctx, module_level, taken)
    return _in_functions(ctx, sites, new_code, taken)


def _imports_dali(small: cst.BaseSmallStatement) -> bool:
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
        where = _where(ctx, line)
        if where is not False:
            sites.append(_Site(line, where, wrapper))
    return sorted(sites, key=lambda s: ctx.positions[s.statement].start.line)


def _where(ctx: FileContext, line: cst.CSTNode) -> cst.FunctionDef | None | bool:
    """The innermost function around ``line``; None at module level; False in a class body or
    under ``if TYPE_CHECKING:``."""
    cur = ctx.parents.get(line)
    while cur is not None and not isinstance(cur, cst.Module):
        if isinstance(cur, cst.FunctionDef):
            return cur
        if isinstance(cur, cst.ClassDef):
            return False
        if isinstance(cur, cst.If) and dotted(cur.test).split(".")[-1] == "TYPE_CHECKING":
            return False
        cur = ctx.parents.get(cur)
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


def _after_block(ctx: FileContext, sites: list[_Site], taken: Sequence[Edit]) -> list[Edit] | None:
    """The import after the last site of the block of the first one."""
    block = ctx.parents.get(sites[0].statement)
    last = [s for s in sites if ctx.parents.get(s.statement) is block][-1]
    off = ctx.stmt_span(last.statement)[1]
    if _inside(off, taken):
        return None
    indent = "".join(ctx.indents(last.statement))
    return [Edit(off, off, _import_text(ctx, last, indent))]


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


def _ndd_uses(code: str, ndd: str) -> list[int]:
    """Offsets in ``code`` of every name ``ndd``."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    starts = [0]
    for line in code.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    lines = code.splitlines(keepends=True)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == ndd:
            text = lines[node.lineno - 1].encode()[: node.col_offset].decode(errors="ignore")
            out.append(starts[node.lineno - 1] + len(text))
    return sorted(out)


def _in_functions(
    ctx: FileContext, sites: list[_Site], new_code: str, taken: Sequence[Edit]
) -> list[Edit] | None:
    """One import per function that imports DALI and uses ndd once migrated; one at the start
    of each other outermost function that uses ndd; None if a use is left out."""
    shift = _Shift(taken)
    uses = _ndd_uses(new_code, ctx.ndd)
    covered: set[int] = set()
    edits: list[Edit] = []
    for function in dict.fromkeys(s.function for s in sites):
        inside = _uses_within(ctx, function, uses, shift)
        first = next((s for s in sites if s.function is function), None)
        if not inside or first is None:
            continue
        off = ctx.stmt_span(first.statement)[1]
        if _inside(off, taken):
            continue
        edits.append(
            Edit(off, off, _import_text(ctx, first, "".join(ctx.indents(first.statement))))
        )
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
