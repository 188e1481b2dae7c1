"""DM100 imports: keep the imports right after the other fixes.

Before (``fixtures/DM100/keeps_types.in.py``)::

    #!/usr/bin/env python
    \"\"\"Module docstring.\"\"\"
    from __future__ import annotations

    import os

    # DALI imports
    from nvidia.dali import fn, types
    from nvidia.dali.types import DALIDataType  # unused before the migration: left alone


    def to_float(images):
        return fn.cast(images, dtype=types.FLOAT)


    print(os.getcwd())

After (``fixtures/DM100/keeps_types.out.py``)::

    #!/usr/bin/env python
    \"\"\"Module docstring.\"\"\"
    from __future__ import annotations

    import os

    # DALI imports
    from nvidia.dali import types
    from nvidia.dali.types import DALIDataType  # unused before the migration: left alone
    import nvidia.dali.experimental.dynamic as ndd


    def to_float(images):
        return ndd.cast(images, dtype=types.FLOAT)


    print(os.getcwd())

Adds ``import nvidia.dali.experimental.dynamic as ndd`` (and ``import numpy as np`` where a
rewrite needs it) when the migrated code uses them, and removes the pipeline-mode names that the
migration left unused, wherever the import stands (the first import block, after other code, in
a function; not in a class body, under ``if TYPE_CHECKING:``, nor the last statement left in a
block). A name still read anywhere in the module keeps its imports. Names that were already
unused before are not touched, and comments around the imports are kept. This fix is derived:
it is recomputed for whatever subset of the other fixes is applied, so it never adds or removes
more than that subset needs.

Safety: safe.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

import libcst as cst

from dali_migrate.context import NDD_MODULE, FileContext, dotted
from dali_migrate.fixes import Edit
from dali_migrate.rules import FileState, Rule

from ._optional_imports import bound_name as _bound_name
from ._optional_imports import enclosing, optional_ndd_edits
from ._optional_imports import from_with as _from_with


class Imports(Rule):
    id = "DM100"
    name = "imports"
    summary = "add the ndd import and drop pipeline-mode imports the migration left unused"
    finalize_message = "update imports: add ndd, drop pipeline-mode names left unused"

    def run(self, state: FileState) -> None:
        """Derived rule: its fix is made by :meth:`finalize` once the other fixes are chosen."""

    def finalize(self, ctx: FileContext, new_code: str, taken: Sequence[Edit] = ()) -> list[Edit]:
        return import_edits(ctx, new_code, taken)


def _used_names(code: str) -> Counter:
    """How often each name is read or written outside import statements."""
    counts: Counter = Counter()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Name):
            counts[node.id] += 1
    return counts


def _is_dali(module_name: str) -> bool:
    return (
        module_name == "nvidia.dali" or module_name.startswith("nvidia.dali.")
    ) and not module_name.startswith(NDD_MODULE)


def import_edits(ctx: FileContext, new_code: str, taken: Sequence[Edit] = ()) -> list[Edit]:
    """Edits on the original source that make its imports fit ``new_code``: the migrated text
    of the statements analysed (``ctx.analysed_source`` with the chosen edits, ``taken``).
    Where DALI is an optional dependency, ndd is imported the same way
    (:mod:`._optional_imports`)."""
    need = _needed(ctx, new_code, taken)
    if need is None:
        return []
    edits: list[Edit] = []
    anchor: cst.SimpleStatementLine | None = None  # where new imports go
    replaced_anchor = False
    last_import: cst.SimpleStatementLine | None = None
    for stmt in ctx.module.body:
        if not isinstance(stmt, cst.SimpleStatementLine) or not all(
            isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
        ):
            if last_import is not None or not _is_prologue(stmt):
                if last_import is not None:
                    break
            continue
        last_import = stmt
        new_smalls, touched, dali_stmt = _kept_aliases(stmt, need)
        if dali_stmt:
            anchor = stmt
        if not touched:
            continue
        text = _pruned_text(ctx, stmt, new_smalls)
        if not new_smalls and anchor is stmt and not replaced_anchor and need.adding:
            text += _new_imports(ctx, need.ndd, need.np, need.stdlib)
            replaced_anchor = True
        edits.append(Edit(*ctx.stmt_span(stmt), text))
    first_end = ctx.stmt_span(last_import)[1] if last_import is not None else 0

    if need.adding and not replaced_anchor:
        _add_new_imports(ctx, edits, anchor or last_import, need)
    optional = need.optional or []
    edits += _later_imports(ctx, need, first_end, [*taken, *optional])
    return edits + optional


def _pruned_text(
    ctx: FileContext, stmt: cst.SimpleStatementLine, new_smalls: list[cst.BaseSmallStatement]
) -> str:
    """``stmt`` with only ``new_smalls``; its comment lines only when none is left."""
    if not new_smalls:
        return ctx.leading_comments(stmt)  # removed whole: keep the comments above it
    last = len(new_smalls) - 1
    new_smalls = [
        s.with_changes(semicolon=cst.MaybeSentinel.DEFAULT) if i == last else s
        for i, s in enumerate(new_smalls)
    ]
    return ctx.render(stmt.with_changes(body=new_smalls), ctx.indents(stmt))


def _later_imports(
    ctx: FileContext,
    need: _Needed,
    first_end: int,
    written: Sequence[Edit],
) -> list[Edit]:
    """The DALI imports outside the module's first import block (after other code, in
    functions) without the names the migration left unused: ``before`` and ``after`` count the
    names of the whole module, so a name read anywhere keeps every import of it. Left alone:
    statements in class bodies and under ``if TYPE_CHECKING:``, those other edits (``written``)
    touch, and a block's imports when nothing else would be left in the block."""
    later = replace(need, dali_modules=[])  # the first block has the DALI modules to add
    by_block: dict[cst.CSTNode, list[tuple[cst.SimpleStatementLine, list]]] = {}
    imports = ctx.nodes_of(cst.Import, cst.ImportFrom)
    for line in dict.fromkeys(ctx.parents.get(n) for n in imports):
        if not isinstance(line, cst.SimpleStatementLine) or enclosing(ctx, line) is False:
            continue
        start, end = ctx.stmt_span(line)
        if start < first_end and isinstance(ctx.parents.get(line), cst.Module):
            continue  # the first import block, done above
        if any(e.start < end and start < e.end for e in written):
            continue
        new_smalls, touched, _ = _kept_aliases(line, later)
        if touched:
            by_block.setdefault(ctx.parents.get(line), []).append((line, new_smalls))
    edits = []
    for block, lines in by_block.items():
        body = getattr(block, "body", ())
        emptied = sum(1 for _, smalls in lines if not smalls)
        if not isinstance(block, cst.Module) and emptied == len(body):
            continue  # the block would be left empty
        for line, smalls in lines:
            start, end = ctx.stmt_span(line)
            if not smalls and body and body[0] is line and not isinstance(block, cst.Module):
                end = _blank_lines_after(ctx, end, written)  # no blank line opens the block
            edits.append(Edit(start, end, _pruned_text(ctx, line, smalls)))
    return edits


def _blank_lines_after(ctx: FileContext, end: int, written: Sequence[Edit]) -> int:
    """``end`` moved past the blank lines that follow it, unless another edit starts there."""
    for line in ctx.source[end:].splitlines(keepends=True):
        if line.strip() or any(end <= e.start < end + len(line) for e in written):
            break
        end += len(line)
    return end


@dataclass
class _Needed:
    """What the migrated code needs of the imports: the names read before and after, and the
    imports to add (ndd, numpy, standard modules, DALI modules) or made as DALI's own
    optional import is (``optional``)."""

    before: Counter
    after: Counter
    ndd: bool
    np: bool
    stdlib: list[str]
    dali_modules: list[str]
    optional: list[Edit] | None

    @property
    def adding(self) -> bool:
        return self.ndd or self.np or bool(self.stdlib)


def _needed(ctx: FileContext, new_code: str, taken: Sequence[Edit]) -> _Needed | None:
    """What ``new_code`` needs of the imports (None: one of the texts does not parse)."""
    try:
        before = _used_names(ctx.analysed_source)
        after = _used_names(new_code)
    except (SyntaxError, ValueError):
        return None
    # the statements left out of the analysis are the same before and after
    dali_names = {
        _bound_name(a)
        for s in ctx.module.body
        if isinstance(s, cst.SimpleStatementLine)
        for small in s.body
        for a in (_aliases(small)[0] or ())
    }
    for name in ctx.skipped_variables({ctx.ndd, ctx.np} | dali_names):
        before[name] += 1
        after[name] += 1
    need_ndd = after[ctx.ndd] > 0 and before[ctx.ndd] == 0 and not _binds(ctx.module, ctx.ndd)
    optional = None
    if need_ndd:
        optional = optional_ndd_edits(
            ctx, new_code, taken, lambda n: before[n] > 0 and after[n] == 0
        )
    if optional is not None:
        need_ndd = False
    need_np = after[ctx.np] > 0 and (
        before[ctx.np] == 0
        and not _binds(ctx.module, ctx.np)
        or _read_above_import(ctx, ctx.np, taken)
    )
    # the standard modules generated code may use (inspect: an external source of unknown kind)
    stdlib = [m for m in STDLIB if after[m] > 0 and before[m] == 0 and not _binds(ctx.module, m)]
    # DALI modules the generated code names where the file never did (types.SampleInfo): added
    # to a `from nvidia.dali import ...` the file has, else on a line of their own
    dali_modules = [
        m for m in DALI_MODULES if after[m] > 0 and before[m] == 0 and not _binds(ctx.module, m)
    ]
    if not _from_dali(ctx.module):
        stdlib += [f"from nvidia.dali import {m}" for m in dali_modules]
        dali_modules = []
    return _Needed(before, after, need_ndd, need_np, stdlib, dali_modules, optional)


def _kept_aliases(
    stmt: cst.SimpleStatementLine, need: _Needed
) -> tuple[list[cst.BaseSmallStatement], bool, bool]:
    """The import statements of ``stmt`` without the DALI names the migration left unused
    (a ``from nvidia.dali import`` gains the DALI modules to add, once); whether any changed,
    and whether ``stmt`` imports from DALI."""
    before, after = need.before, need.after
    new_smalls = []
    touched = False
    dali_stmt = False
    for small in stmt.body:
        aliases, module_name = _aliases(small)
        if module_name is None or not _is_dali(module_name) or aliases is None:
            new_smalls.append(small)
            continue
        dali_stmt = True
        assert isinstance(small, (cst.Import, cst.ImportFrom))  # (it has aliases)
        keep = [
            a for a in aliases if not (before[_bound_name(a)] > 0 and after[_bound_name(a)] == 0)
        ]
        if len(keep) != len(aliases):
            touched = True
        if need.dali_modules and _is_from_dali(small):
            keep += [cst.ImportAlias(cst.Name(m)) for m in need.dali_modules]
            need.dali_modules, touched = [], True
        if keep:
            keep = [
                a.with_changes(comma=cst.MaybeSentinel.DEFAULT) if i == len(keep) - 1 else a
                for i, a in enumerate(keep)
            ]
            new_smalls.append(
                small.with_changes(names=keep)
                if isinstance(small, cst.Import)
                else _from_with(small, keep)
            )
    return new_smalls, touched, dali_stmt


def _add_new_imports(
    ctx: FileContext,
    edits: list[Edit],
    where: cst.SimpleStatementLine | None,
    need: _Needed,
) -> None:
    """The new import lines after ``where`` (the last DALI import, else the last import, else
    the module's docstring and ``__future__`` imports), added to ``edits``."""
    if where is not None:
        off = ctx.stmt_span(where)[1]
    else:
        off = _prologue_end(ctx)
    text = _new_imports(ctx, need.ndd, need.np, need.stdlib)
    # an edit already replacing the anchor statement absorbs the insertion after it
    for i, e in enumerate(edits):
        if e.end == off:
            edits[i] = Edit(e.start, e.end, e.text + text)
            break
    else:
        edits.append(Edit(off, off, text))


#: standard modules the generated code may use, imported where it does
STDLIB = ("inspect",)
#: modules of nvidia.dali the generated code may use, imported (``from nvidia.dali import m``)
#: where it does and the file never named them
DALI_MODULES = ("types",)


def _new_imports(ctx: FileContext, need_ndd: bool, need_np: bool, stdlib: list[str]) -> str:
    """The import lines to add; ``stdlib``: module names, or whole ``from ... import`` lines."""
    nl = ctx.module.default_newline
    text = "".join(f"{m}{nl}" if " " in m else f"import {m}{nl}" for m in stdlib)
    if need_np:
        text += f"import numpy as {ctx.np}{nl}" if ctx.np != "numpy" else f"import numpy{nl}"
    if need_ndd:
        text += f"import {NDD_MODULE} as {ctx.ndd}{nl}"
    return text


def _aliases(small: cst.BaseSmallStatement):
    if isinstance(small, cst.Import):
        names = list(small.names)
        mods = {dotted(a.name) for a in names}
        dali = [m for m in mods if _is_dali(m)]
        return (names, dali[0]) if dali else (None, None)
    if isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative:
        if isinstance(small.names, cst.ImportStar):
            return None, dotted(small.module)
        return list(small.names), dotted(small.module)
    return None, None


def _is_from_dali(small: cst.BaseSmallStatement) -> bool:
    """``from nvidia.dali import a, b`` (names, not ``*``)."""
    return (
        isinstance(small, cst.ImportFrom)
        and small.module is not None
        and not small.relative
        and not isinstance(small.names, cst.ImportStar)
        and dotted(small.module) == "nvidia.dali"
    )


def _from_dali(module: cst.Module) -> bool:
    """The module's first import block (the statements :func:`import_edits` goes through) has
    a ``from nvidia.dali import ...`` statement."""
    started = False
    for stmt in module.body:
        imports = isinstance(stmt, cst.SimpleStatementLine) and all(
            isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
        )
        if not imports:
            if started:
                return False
            continue
        started = True
        assert isinstance(stmt, cst.SimpleStatementLine)  # (imports)
        if any(_is_from_dali(s) for s in stmt.body):
            return True
    return False


def _read_above_import(ctx: FileContext, name: str, taken: Sequence[Edit]) -> bool:
    """Code the migration wrote reads ``name.`` above the file's first import of ``name``: a
    notebook that imports numpy halfway down, below a function now calling ``np.asarray`` that
    runs before it. Imported again with the new imports (the same module, bound once more)."""
    starts = [
        ctx.stmt_span(stmt)[0]
        for stmt in ctx.module.body
        if isinstance(stmt, cst.SimpleStatementLine) and _binds(cst.Module(body=[stmt]), name)
    ]
    if not starts:
        return False
    read = re.compile(rf"(?<![\w.]){re.escape(name)}\.")
    return any(
        e.start < starts[0] and read.search(line)
        for e in taken
        for line in e.text.splitlines()
        if not line.lstrip().startswith("#")
    )


def _binds(module: cst.Module, name: str) -> bool:
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(
                    small.names, cst.ImportStar
                ):
                    if any(_bound_name(a) == name for a in small.names):
                        return True
    return False


def _is_prologue(stmt: cst.CSTNode) -> bool:
    """Module docstring and ``from __future__`` lines come before any import we add."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        s = stmt.body[0]
        if isinstance(s, cst.Expr) and isinstance(
            s.value, (cst.SimpleString, cst.ConcatenatedString)
        ):
            return True
    return False


def _prologue_end(ctx: FileContext) -> int:
    off = 0
    for stmt in ctx.module.body:
        if _is_prologue(stmt) or (
            isinstance(stmt, cst.SimpleStatementLine)
            and any(
                isinstance(s, cst.ImportFrom)
                and s.module is not None
                and dotted(s.module) == "__future__"
                for s in stmt.body
            )
        ):
            off = ctx.stmt_span(stmt)[1]
        else:
            break
    return off
