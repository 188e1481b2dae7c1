"""The code a pipeline that is not migrated still runs in pipeline mode (a component of the
structural rules' refusals).

A refused pipeline keeps its graph code as written; the code of the module that this graph code
reaches builds graph nodes too, so it keeps its pipeline-mode API (``fn.*``, ``ops.*``) and the
local rules leave it alone: the functions and classes the graph code names (called, instantiated,
handed on), those the call that makes the pipeline hands it (``P(root, Gray())``: a callable
class whose ``__call__`` the graph code calls through ``self.transform``), and, transitively,
those that this code names in turn. What code running in dynamic mode also uses of it gets a
TODO (:func:`shared_uses`): it cannot be both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import walk, within

Def = cst.FunctionDef | cst.ClassDef
NodeT = TypeVar("NodeT", bound=cst.CSTNode)


def reached_code(
    ctx: FileContext, keep: cst.CSTNode, owned: list[cst.CSTNode]
) -> tuple[list[cst.CSTNode], list[Def]]:
    """The code kept with the graph code ``keep`` (the arguments of the calls that make the
    pipeline, the assignments of the names this code reads) and the definitions it reaches,
    outside ``keep`` and the structural rules' ``owned`` code (other pipelines, their bases)."""
    roots: list[cst.CSTNode] = [keep, *creation_args(ctx, keep)]
    defs: dict[int, Def] = {}
    extra: dict[int, cst.CSTNode] = {id(r): r for r in roots[1:]}
    todo = list(roots)
    while todo:
        stmts: list[cst.CSTNode] = []
        for d in _named_defs(ctx, todo.pop(), stmts):
            if id(d) in defs or any(within(ctx, d, o) for o in [keep, *owned]):
                continue
            defs[id(d)] = d
            todo.append(d)
        extra |= {id(v): v for v in stmts if not any(within(ctx, v, o) for o in [keep, *owned])}
    return list(extra.values()), list(defs.values())


def creation_args(ctx: FileContext, keep: cst.CSTNode) -> list[cst.CSTNode]:
    """What the calls of the pipeline's definition (``P(root, Gray())``, ``pipe(aug)``) hand
    it: its graph code calls it in pipeline mode."""
    if not isinstance(keep, (cst.FunctionDef, cst.ClassDef)):
        return []
    name = keep.name.value
    return [
        arg.value
        for call in ctx.nodes_of(cst.Call)
        if isinstance(call.func, cst.Name)
        and call.func.value == name
        and not within(ctx, call, keep)
        and keep in _bound(ctx, call.func)
        for arg in call.args
    ]


def _named_defs(
    ctx: FileContext, root: cst.CSTNode, stmts: list[cst.CSTNode] | None = None
) -> list[Def]:
    """The functions and classes defined outside ``root`` that its code names (reads), also
    through the values of the names it reads (``ops = [flip, blur]``, ``AUGMENTATIONS = [...]``:
    the statements that assign them are appended to ``stmts``)."""
    found: dict[int, Def] = {}
    seen: set[int] = set()
    todo = [root]
    while todo:
        for n in walk(todo.pop()):
            if not (isinstance(n, cst.Name) and _read(ctx, n)):
                continue
            for d in _bound(ctx, n):
                if within(ctx, d, root) or id(d) in seen:
                    continue
                seen.add(id(d))
                if isinstance(d, (cst.FunctionDef, cst.ClassDef)):
                    found[id(d)] = d
                elif (stmt := _assignment(ctx, d)) is not None:
                    todo.append(stmt)
                    if stmts is not None:
                        stmts.append(stmt)
    return list(found.values())


def _assignment(ctx: FileContext, target: cst.CSTNode) -> cst.SimpleStatementLine | None:
    """The line of the plain assignment (``x = ...``, ``a, b = ...``, ``x: T = ...``) that binds
    the name ``target``."""
    node = ctx.parents.get(target)
    while isinstance(node, (cst.Element, cst.StarredElement, cst.Tuple, cst.List)):
        node = ctx.parents.get(node)
    if isinstance(node, cst.AssignTarget):
        node = ctx.parents.get(node)
    elif not (isinstance(node, cst.AnnAssign) and node.value is not None):
        return None
    stmt = ctx.parents.get(node)
    return (
        stmt
        if isinstance(node, (cst.Assign, cst.AnnAssign))
        and isinstance(stmt, cst.SimpleStatementLine)
        else None
    )


def _bound(ctx: FileContext, name: cst.Name) -> list[cst.CSTNode]:
    """The nodes that bind ``name`` where it stands (its definitions, assignments)."""
    scope = ctx.scopes.get(name)
    if scope is None:
        return []
    return [n for a in scope[name.value] if (n := getattr(a, "node", None)) is not None]


def _read(ctx: FileContext, name: cst.Name) -> bool:
    """``name`` is read where it stands (not an attribute, keyword, parameter or target)."""
    parent = ctx.parents.get(name)
    if isinstance(parent, cst.Attribute):
        return parent.value is name
    if isinstance(parent, (cst.Arg, cst.Param, cst.FunctionDef, cst.ClassDef, cst.ImportAlias)):
        return not (
            parent.name is name if not isinstance(parent, cst.Arg) else parent.keyword is name
        )
    return not isinstance(parent, (cst.AssignTarget, cst.AsName))


def shared_uses(
    ctx: FileContext, defs: list[Def], kept: list[cst.CSTNode]
) -> list[tuple[Def, cst.Name]]:
    """The first use of each of ``defs`` that builds graph nodes outside the ``kept`` code (code
    that runs in dynamic mode after the migration, a migrated generator or plain code)."""
    inside = {id(n) for root in kept for n in walk(root)}
    by_name = {d.name.value: d for d in building(ctx, defs)}
    found: dict[int, tuple[Def, cst.Name]] = {}
    for n in walk(ctx.module):
        d = by_name.get(n.value) if isinstance(n, cst.Name) else None
        if (
            d is None
            or id(d) in found
            or id(n) in inside
            or not isinstance(n, cst.Name)
            or not _read(ctx, n)
            or d not in _bound(ctx, n)
        ):
            continue
        found[id(d)] = (d, n)
    return list(found.values())


def building(ctx: FileContext, code: Sequence[NodeT], through: bool = True) -> list[NodeT]:
    """Those of ``code`` (definitions, values) that use pipeline-mode API (``fn.*``, ``ops.*``,
    ``math.*``, ``auto_aug``), or (``through``) name one of ``code`` that does: what
    dynamic-mode code cannot run as it is."""
    found = {id(d) for d in code if any(_graph_api(ctx, n) for n in walk(d))}
    more = through
    while more:
        new = {
            id(d)
            for d in code
            if id(d) not in found and any(id(r) in found for r in _named_defs(ctx, d))
        }
        found |= new
        more = bool(new)
    return [d for d in code if id(d) in found]


_GRAPH_API = ("nvidia.dali.fn.", "nvidia.dali.ops.", "nvidia.dali.math.", "nvidia.dali.auto_aug.")


def _graph_api(ctx: FileContext, node: cst.CSTNode) -> bool:
    if not isinstance(node, (cst.Name, cst.Attribute)) or isinstance(
        ctx.parents.get(node), cst.Attribute
    ):
        return False  # (the whole dotted name is asked once)
    q = ctx.qualname(node)
    return q is not None and q.startswith(_GRAPH_API)


def first_building(ctx: FileContext, item: cst.CSTNode) -> cst.CSTNode:
    """The statement of the function or class ``item`` that first uses pipeline-mode API, where
    a TODO about it stands next to that use (``item`` itself where none does, or for other code)."""
    if not isinstance(item, (cst.FunctionDef, cst.ClassDef)):
        return item
    uses = [n for n in walk(item.body) if _graph_api(ctx, n)]
    if not uses:
        return item
    first = min(uses, key=lambda n: (ctx.positions[n].start.line, ctx.positions[n].start.column))
    stmt = ctx.enclosing_statement(first)
    return stmt if stmt is not None else item


def reached_defs(ctx: FileContext, root: cst.CSTNode) -> list[Def]:
    """The functions and classes outside ``root`` that its code reaches, transitively."""
    found: dict[int, Def] = {}
    todo = [root]
    while todo:
        for d in _named_defs(ctx, todo.pop()):
            if id(d) not in found and not within(ctx, d, root):
                found[id(d)] = d
                todo.append(d)
    return list(found.values())
