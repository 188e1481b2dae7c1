"""The family of a ``Pipeline`` subclass (DM202): the chain of its bases defined in the same file,
its methods through that chain, and the classes and operator factories that go with it."""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.dali_api import PIPELINE_CLASSES
from dali_migrate.fixes import Edit

from .._cst import in_source_order, within


def pipeline_chain(ctx: FileContext, cls: cst.ClassDef, classes: dict) -> list[cst.ClassDef] | None:
    """``cls`` and its bases in this file up to the one deriving from ``Pipeline``, or None."""
    chain = [cls]
    seen = {cls.name.value}
    while True:
        cur = chain[-1]
        if len(cur.bases) != 1:
            if any(ctx.qualname(b.value) in PIPELINE_CLASSES for b in cur.bases):
                return chain  # multiple inheritance: refused later with a reason
            return None
        base = cur.bases[0].value
        if ctx.qualname(base) in PIPELINE_CLASSES:
            return chain
        if isinstance(base, cst.Name) and base.value in classes and base.value not in seen:
            seen.add(base.value)
            chain.append(classes[base.value])
            continue
        return None


def bases_of_refused(refused: list[tuple[cst.ClassDef, list[cst.ClassDef], str]]) -> dict[int, str]:
    """The bases in this file of the refused classes (each with its chain and reason), by id,
    each with the reason it stays a class too: a refused class would derive from the function
    it became, and fail at import."""
    out: dict[int, str] = {}
    for cls, chain, why in refused:
        for base in chain[1:]:
            out.setdefault(
                id(base),
                f"class {cls.name.value} derives from it and is not migrated ({why}): make "
                f"{cls.name.value} migrate (or derive from Pipeline itself), then both migrate",
            )
    return out


def dead_factories(
    ctx: FileContext, names: set[str], members: list[cst.ClassDef]
) -> list[cst.FunctionDef]:
    """The functions of the module that made operator objects for the classes only (they go
    with them)."""
    out = []
    for fn in ctx.module.body:
        if isinstance(fn, cst.FunctionDef) and fn.name.value in names:
            refs = references_outside(ctx, fn, members)
            if not refs and _referenced(ctx, fn):
                out.append(fn)
    return out


def removed_def(ctx: FileContext, fn: cst.FunctionDef) -> Edit:
    """Delete a function of the module, keeping the comments above it (not the blank lines)."""
    lines = ctx.leading_comments(fn).splitlines(keepends=True)
    kept = "".join(line for line in lines if line.strip())
    return Edit(*ctx.stmt_span(fn), kept)


def _referenced(ctx: FileContext, node: cst.FunctionDef | cst.ClassDef) -> bool:
    scope = ctx.scopes.get(node)
    if scope is None:
        return False
    return any(a.references for a in scope.assignments[node.name.value] if a.node is node)


def defines_graph(chain: list[cst.ClassDef]) -> bool:
    return "define_graph" in class_methods(chain)


def references_outside(
    ctx: FileContext, cls: cst.ClassDef | cst.FunctionDef, members: list[cst.ClassDef]
) -> list[cst.CSTNode]:
    """The uses of the name of ``cls`` outside the classes of its family."""
    scope = ctx.scopes.get(cls)
    if scope is None:
        return []
    refs = [r for a in scope.assignments[cls.name.value] if a.node is cls for r in a.references]
    nodes = [r.node for r in in_source_order(ctx, refs)]
    return [n for n in nodes if not any(within(ctx, n, m) for m in members)]


def used_outside(ctx: FileContext, cls: cst.ClassDef, members: list[cst.ClassDef]) -> bool:
    return bool(references_outside(ctx, cls, members))


def base_names(cls: cst.ClassDef) -> set[str]:
    return {b.value.value for b in cls.bases if isinstance(b.value, cst.Name)}


def class_methods(chain: list[cst.ClassDef]) -> dict[str, cst.FunctionDef]:
    """Methods by name, the most derived definition first (the others are shadowed)."""
    out: dict[str, cst.FunctionDef] = {}
    for c in chain:
        for stmt in c.body.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value not in out:
                out[stmt.name.value] = stmt
    return out
