"""Which assignments of a name may give one of its reads its value.

libcst's scope analysis is not flow-sensitive: a read's ``referents`` are every binding of the
name in the scope that comes before it, so a name bound to a run's outputs, then to something
else, then again to a run's outputs looks, at each read, as if it could hold either::

    images, labels = pipe.run()        # A1
    images, labels = loader_next()     # A2
    images, labels = pipe.run()        # A3
    show(images.as_cpu())              # libcst: A1, A2 or A3; here: A3 only

:func:`reaching` narrows the referents to the one assignment that surely gives the value: the
statement that binds it stands in the same block as the statement of the read, before it, and no
other binding of the name lies between the two, nor in the read's statement where it may run
before the read (the target of ``image = image.as_tensor()`` binds after it; one in an ``if``'s
body below its test too, unless a loop of that statement runs both). Every path to the read then
passes that statement last: a loop around both goes through it again before the read.

Anything else (a read in a nested function, lambda or generator expression, which may run later;
a name also bound through ``global`` in a function) keeps libcst's referents, to which the
bindings below the read in a loop around it are added: libcst leaves them out, but the next turn
of the loop reads what they bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import within

#: code that runs when it is reached (a comprehension) against code that may run later
_LATER = (cst.FunctionDef, cst.Lambda, cst.ClassDef, cst.GeneratorExp)


def reaching(ctx: FileContext, ref: Any) -> list[Any]:
    """The assignments that may give the read ``ref`` (a libcst ``Access``) its value."""
    referents = list(ref.referents)
    last = _dominating(ctx, ref.node, referents)
    return [last] if last is not None else referents + _looped_back(ctx, ref.node, referents)


def _looped_back(ctx: FileContext, node: cst.CSTNode, referents: list[Any]) -> list[Any]:
    """Bindings of the name below the read, in a loop around both, that libcst leaves out of the
    referents (it keeps those above the read only): the next turn of the loop reads them."""
    scope = ctx.scopes.get(node)
    if not isinstance(node, cst.Name) or scope is None:
        return []
    loops = []
    cur = ctx.parents.get(node)
    while cur is not None and not isinstance(cur, (*_LATER, cst.Module)):
        if isinstance(cur, (cst.For, cst.While)):
            loops.append(cur)
        cur = ctx.parents.get(cur)
    if not loops:
        return []
    known = {id(r) for r in referents}
    return [
        b
        for b in scope.assignments[node.value]
        if id(b) not in known
        and isinstance(getattr(b, "node", None), cst.CSTNode)
        and any(within(ctx, b.node, loop) for loop in loops)
    ]


def _dominating(ctx: FileContext, node: cst.CSTNode, referents: list[Any]) -> Any | None:
    if not isinstance(node, cst.Name) or not referents:
        return None
    scopes = {id(getattr(r, "scope", None)) for r in referents}
    scope = getattr(referents[0], "scope", None)
    if len(scopes) != 1 or scope is None:
        return None
    bindings = list(scope.assignments[node.value])
    if any(not _own(ctx, b, scope) for b in bindings):
        return None  # bound through `global`/`nonlocal`, a builtin, or with no node to place
    found = [r for r in referents if _reaches_alone(ctx, r, node, bindings)]
    return found[0] if len(found) == 1 else None


def _own(ctx: FileContext, binding: Any, scope: object) -> bool:
    """``binding`` is made by a node of ``scope``'s own code."""
    target = getattr(binding, "node", None)
    return isinstance(target, cst.CSTNode) and ctx.scopes.get(target) is scope


def _reaches_alone(ctx: FileContext, binding: Any, read: cst.Name, bindings: list[Any]) -> bool:
    """``binding``'s statement is a plain statement of the block that holds the read's
    statement, before it, with no other binding of the name from it to the end of the read's
    statement that may run before the read (:func:`_after_read`)."""
    line = ctx.enclosing_statement(binding.node)
    block = ctx.parents.get(line)
    if not isinstance(line, cst.SimpleStatementLine) or not isinstance(
        block, (cst.Module, cst.IndentedBlock)
    ):
        return False
    stmt = _statement_in(ctx, read, block)
    if stmt is None:
        return False
    body = list(block.body)
    if _index(body, line) >= _index(body, stmt):
        return False
    start, end = ctx.positions[line].start, ctx.positions[stmt].end
    for other in bindings:
        if other is binding or _after_read(ctx, other.node, read, stmt):
            continue
        where = ctx.positions[other.node].start
        if (start.line, start.column) <= (where.line, where.column) <= (end.line, end.column):
            return False
    return True


def _after_read(ctx: FileContext, target: cst.CSTNode, read: cst.Name, stmt: cst.CSTNode) -> bool:
    """``target``, in the read's statement ``stmt``, binds only after the read on each pass of
    ``stmt``: it stands below the read (not as ``:=``, which an expression may evaluate first) or
    is what the read's own assignment binds, and no loop of ``stmt`` runs both."""
    if not within(ctx, target, stmt) or isinstance(ctx.parents.get(target), cst.NamedExpr):
        return False
    at, end = ctx.positions[target].start, ctx.positions[read].end
    below = (at.line, at.column) >= (end.line, end.column)
    if not below and not _assigned_last(ctx, target, ctx.enclosing_statement(read)):
        return False
    cur: cst.CSTNode | None = read
    while cur is not None and cur is not ctx.parents.get(stmt):
        if isinstance(cur, (cst.For, cst.While)) and within(ctx, target, cur):
            return False
        cur = ctx.parents.get(cur)
    return True


def _assigned_last(ctx: FileContext, target: cst.CSTNode, stmt: cst.CSTNode) -> bool:
    """``target`` is a target of the assignment that ``stmt`` (the read's statement line) is:
    bound after the read's value was computed (``image = image.as_tensor()``)."""
    cur = ctx.parents.get(target)
    while isinstance(cur, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
        cur = ctx.parents.get(cur)
    assign = ctx.parents.get(cur) if isinstance(cur, cst.AssignTarget) else None
    return (
        isinstance(assign, cst.Assign)
        and isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and stmt.body[0] is assign
    )


def _statement_in(ctx: FileContext, read: cst.CSTNode, block: cst.CSTNode) -> cst.CSTNode | None:
    """The statement of ``block`` that holds ``read``, when nothing between them defers it."""
    cur: cst.CSTNode | None = read
    while cur is not None:
        parent = ctx.parents.get(cur)
        if parent is block:
            return cur
        if isinstance(parent, _LATER):
            return None
        cur = parent
    return None


def _index(body: Sequence[cst.CSTNode], stmt: cst.CSTNode) -> int:
    return next(i for i, s in enumerate(body) if s is stmt)
