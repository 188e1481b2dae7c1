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


#: a call that may import DALI under another name (a cheap filter of the source text):
#: ``try_import_dali()``, ``importlib.import_module("nvidia.dali")``, ``OptionalImport(...)``
WRAPPER_CALL = re.compile(
    r"(?i)\w*(?:import\w*dali|dali\w*import)\w*\s*\(|import\w*\s*\(\s*[rbu]*[\"']nvidia\.dali\b"
)
_DALI_LITERAL = re.compile(r"nvidia\.dali(?:\.\w+)*")


def wrapper_module(func: str, first: str | None) -> str | None:
    """The DALI module that a call of the function named ``func`` (the callee's last name)
    with ``first`` as its first positional argument (a string literal, else None) returns, when the
    tool follows such a call as an import:

    * a string literal naming ``nvidia.dali`` or a module under it, given to a function whose
      name holds ``import`` (``importlib.import_module``, ``pytest.importorskip``,
      ``OptionalImport``, ``optional_import``, ``lazy_import``): that module;
    * no such string, and the name, lowercased without underscores, ends in ``importdali`` or
      ``importnvidiadali`` (``try_import_dali``, ``import_dali``, ``tryImportDALI``): the
      ``nvidia.dali`` package itself.

    ``__import__`` (which returns the top package) is not followed."""
    low = func.lower().replace("_", "")
    if "import" not in low or func == "__import__":
        return None
    if isinstance(first, str):
        return first if _DALI_LITERAL.fullmatch(first) else None
    if low.endswith(("importdali", "importnvidiadali")):
        return "nvidia.dali"
    return None


def _marks_dali(func: str) -> bool:
    """A callee name that says it imports DALI, followed or not (``import_dali_tf``)."""
    return re.search(r"(?i)import\w*dali|dali\w*import", func) is not None


def _ast_callee(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")


def _ast_first(call: ast.Call) -> str | None:
    """The first positional argument when it is a string literal."""
    first = call.args[0] if call.args else None
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return None


def wrapped_dali_imports(source: str, tree: ast.Module | None = None) -> dict[str, tuple[str, str]]:
    """Names bound to DALI by a call rather than an import, in any scope (``dali =
    try_import_dali()``; ``dali_fn = importlib.import_module("nvidia.dali.fn")``) -> (the
    call's text, the module it stands for: see :func:`wrapper_module`; ``nvidia.dali`` for a
    call whose name only says it imports DALI, which is not followed)."""
    if not WRAPPER_CALL.search(source):
        return {}
    try:
        tree = tree or ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return {}
    found: dict[str, tuple[str, str]] = {}
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        else:
            continue
        if not (isinstance(target, ast.Name) and isinstance(value, ast.Call)):
            continue
        func, first = _ast_callee(value), _ast_first(value)
        module = wrapper_module(func, first)
        if module is None and _marks_dali(func) and first is None:
            module = "nvidia.dali"
        if module is not None:
            found.setdefault(target.id, (f"{ast.unparse(value.func)}(...)", module))
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
    spread = [False] * len(units)  # a relevant unit's names were followed (once it is relevant:
    # a unit first kept because it binds a name others use may become relevant later)
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
            if relevant[i] and not spread[i]:
                spread[i] = True
                pending |= bound[i] - seen_words
            if visited[i] or not (relevant[i] or needed[i]):
                continue
            visited[i] = True
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
            (not visited[i] and (relevant[i] or needed[i])) or (relevant[i] and not spread[i])
            for i in range(len(units))
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
