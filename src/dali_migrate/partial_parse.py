"""The part of a module that can involve DALI: the codemod parses only that part with libcst
(:func:`dali_part`), so its cost follows the DALI part of a file, not its length; and the names
a module binds to DALI through a call rather than an import (:func:`wrapped_dali_imports`)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from typing import NamedTuple

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)")


class DaliPart(NamedTuple):
    source: str
    #: the statements replaced (:mod:`ast` nodes), and their text
    skipped: tuple = ()
    skipped_text: str = ""
    #: ``source`` with placeholders that also keep every character offset (``0``, or ``(`` ...
    #: ``)`` padded with spaces): edits of the original apply to it
    aligned: str = ""


#: a call that may import DALI under another name: ``try_import_dali()``, ``import_dali()``,
#: ``importlib.import_module("nvidia.dali")``, ``pytest.importorskip("nvidia.dali")``
WRAPPER_CALL = re.compile(
    r"(?i)\w*(?:import\w*dali|dali\w*import)\w*\s*\(|\b(?:import_module|importorskip)\s*\("
)


def wrapped_dali_imports(source: str, tree: ast.Module | None = None) -> dict[str, tuple[str, str]]:
    """Module-level names bound to DALI by a call rather than an import (``dali =
    try_import_dali()``; ``dali_fn = importlib.import_module("nvidia.dali.fn")``) -> (the
    call's text, the module it stands for). The rules do not follow them as imports (the call
    may stand for an optional dependency)."""
    if not WRAPPER_CALL.search(source):
        return {}
    try:
        tree = tree or ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return {}
    found = {}
    for stmt in tree.body:
        if not (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.value, ast.Call)
        ):
            continue
        target, call = stmt.targets[0], stmt.value
        func = (
            call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
        )
        first = call.args[0] if call.args else None
        literal = str(first.value) if isinstance(first, ast.Constant) else ""
        named = literal.startswith("nvidia.dali")
        wrapper = re.search(r"(?i)import\w*dali|dali\w*import", func) is not None
        module = literal if named else "nvidia.dali"
        if isinstance(target, ast.Name) and (
            wrapper or (func in ("import_module", "importorskip") and named)
        ):
            found[target.id] = (f"{ast.unparse(call.func)}(...)", module)
    return found


def dali_part(source: str, words: Iterable[str] = (), tree: ast.Module | None = None) -> DaliPart:
    """``source`` with every top-level statement that cannot involve DALI replaced by a
    placeholder expression over the same lines (``0``, or one ``f\"\"\"`` string: a single node,
    never a docstring), and the statements replaced.

    Kept: imports, the module docstring, statements that mention a name bound by an import of
    ``nvidia`` (anywhere in the file) or one of ``words``, and transitively statements that
    mention a name bound by a kept statement, or bind a name a kept statement uses. Lines,
    columns, comments and the text of every kept statement are unchanged, so positions in the
    reduced module are positions in ``source``; edits of ``source`` also apply to ``aligned``.

    The libcst parse and every walk of the rules then cost in proportion to the DALI part of a
    file, not to its length. Found with :mod:`ast` (the CPython parser), many times faster than
    a libcst parse (``tree``: ``source`` already parsed by it). A source that :mod:`ast` cannot
    parse is returned whole."""
    try:
        tree = tree or ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return DaliPart(source)
    units = _units(tree)
    if len(units) < 2:
        return DaliPart(source)
    lines = _LINE.findall(source)  # only \n, \r\n and \r end a line, as for ast and libcst
    if len(source) > sum(map(len, lines)):
        lines.append(source[sum(map(len, lines)) :])
    texts = ["".join(lines[a - 1 : b]) for a, b, _ in units]
    found = _dali_imports(units, texts)
    if found is None:
        return DaliPart(source)  # names DALI binds cannot be listed: keep all
    seeds, relevant, needed = found
    first_stmt = units[0][2][0]
    if isinstance(first_stmt, ast.Expr) and isinstance(first_stmt.value, ast.Constant):
        needed[0] = True  # the module docstring
    _follow(units, texts, seeds | set(words), relevant, needed)
    keep = [r or n for r, n in zip(relevant, needed)]
    if all(keep):
        return DaliPart(source)
    return _placeholders(lines, units, texts, keep)


def _units(tree: ast.Module) -> list[list]:
    """The top-level statements as ``[first line, last line, statements]``: statements that
    share a line (``a = 1; b = 2``) are one unit."""
    units: list[list] = []
    for stmt in tree.body:
        first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", ())])
        last = stmt.end_lineno or stmt.lineno
        if units and first <= units[-1][1]:
            units[-1][1] = max(units[-1][1], last)
            units[-1][2].append(stmt)
        else:
            units.append([first, last, [stmt]])
    return units


def _dali_imports(
    units: list[list], texts: list[str]
) -> tuple[set[str], list[bool], list[bool]] | None:
    """(the names imports of ``nvidia`` bind, the units holding such imports, the units that
    import anything); None for ``from nvidia... import *``."""
    seeds: set[str] = set()
    relevant = [False] * len(units)  # may hold DALI objects: what they bind is followed
    needed = [False] * len(units)  # define something a relevant statement uses
    for i, (_, _, stmts) in enumerate(units):
        for stmt in stmts:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                needed[i] = True
            if "nvidia" not in texts[i]:
                continue
            for node in ast.walk(stmt):
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        if alias.name.startswith("nvidia"):
                            seeds.add(alias.asname or alias.name.split(".")[0])
                            relevant[i] = True
                elif isinstance(node, ast.ImportFrom):
                    if (node.module or "").startswith("nvidia"):
                        if any(a.name == "*" for a in node.names):
                            return None
                        seeds.update(a.asname or a.name for a in node.names)
                        relevant[i] = True
    return seeds, relevant, needed


def _follow(
    units: list[list],
    texts: list[str],
    seeds: set[str],
    relevant: list[bool],
    needed: list[bool],
) -> None:
    """Mark, until nothing changes, the units that mention a name of ``seeds`` or one bound by
    a relevant unit (relevant), and those that bind a name a kept unit uses (needed)."""
    bound = [_bound_names(stmts, text) for (_, _, stmts), text in zip(units, texts)]
    seen_words: set[str] = set()
    pending = seeds
    uses: set[str] = set()
    visited = [False] * len(units)
    while True:
        if pending:
            seen_words |= pending
            pattern = re.compile(
                r"\b(?:" + "|".join(map(re.escape, sorted(pending, key=len, reverse=True))) + r")\b"
            )
            for i in range(len(units)):
                if not relevant[i] and pattern.search(texts[i]):
                    relevant[i] = True
            pending = set()
        grew = False
        for i in range(len(units)):
            if visited[i] or not (relevant[i] or needed[i]):
                continue
            visited[i] = True
            if relevant[i]:
                pending |= bound[i] - seen_words
            new_uses = {
                n.id for s in units[i][2] for n in ast.walk(s) if isinstance(n, ast.Name)
            } - uses
            if new_uses:
                uses |= new_uses
                grew = True
        if grew:
            for i in range(len(units)):
                if not relevant[i] and not needed[i] and bound[i] & uses:
                    needed[i] = True
        if not pending and not any(
            not visited[i] and (relevant[i] or needed[i]) for i in range(len(units))
        ):
            break


def _placeholders(
    lines: list[str], units: list[list], texts: list[str], keep: list[bool]
) -> DaliPart:
    """The source with each unit not kept replaced by a placeholder over the same lines."""
    out, aligned = list(lines), list(lines)
    skipped: list = []
    skipped_text: list[str] = []
    for (a, b, stmts), text, k in zip(units, texts, keep):
        if k:
            continue
        skipped += stmts
        skipped_text.append(text)
        for n in range(a - 1, b):
            body = out[n].rstrip("\r\n")
            end = out[n][len(body) :]
            mark = "0" if a == b else "(" if n == a - 1 else ")" if n == b - 1 else ""
            aligned[n] = mark.ljust(len(body)) + end
            out[n] = (
                "0" if a == b else 'f"""' if n == a - 1 else '"""' if n == b - 1 else ""
            ) + end
    return DaliPart("".join(out), tuple(skipped), "".join(skipped_text), "".join(aligned))


def names_of(stmts: Iterable[ast.AST]) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """The identifiers of the statements that libcst would give Name nodes (not strings,
    comments or keywords), those that are variables (``ast.Name``), and those read."""
    names: set[str] = set()
    variables: set[str] = set()
    reads: set[str] = set()
    for node in (n for stmt in stmts for n in ast.walk(stmt)):
        if isinstance(node, ast.Name):
            variables.add(node.id)
            if isinstance(node.ctx, ast.Load):
                reads.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, (ast.arg, ast.keyword)) and node.arg:
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.update(node.name.split("."))
            if node.asname:
                names.add(node.asname)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.update(node.module.split("."))
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
    return frozenset(names | variables), frozenset(variables), frozenset(reads)


def _bound_names(stmts: list, text: str) -> set[str]:
    """Module-level names the statements bind: targets, definitions, imports (also nested ones),
    ``global`` names."""
    names: set[str] = set()
    for stmt in stmts:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        if "global" in text or "import" in text:
            for node in ast.walk(stmt):
                if isinstance(node, ast.Global):
                    names.update(node.names)
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    names.update(
                        (a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"
                    )
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for node in _outside_scopes(stmt):
                if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                    names.add(node.id)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(node.name)
    return names


def _outside_scopes(stmt: ast.AST):
    """The nodes of a statement outside nested function and class bodies (and lambdas)."""
    stack = [stmt]
    while stack:
        node = stack.pop()
        yield node
        if (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda))
            and node is not stmt
        ):
            continue
        stack.extend(ast.iter_child_nodes(node))
