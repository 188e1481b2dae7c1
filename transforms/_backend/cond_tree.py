"""What the conditionals code reads off the syntax of a pipeline body: which names hold data,
which tests and ``and``/``or``/``not`` are on data, the branches of an ``if`` and what they
assign and read (no code is generated here; see ``conditionals.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeGuard

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import children, walk
from .._local import produces_node

#: builtins a branch may call: they neither draw random numbers nor hide graph code
SAFE_CALLS = {
    "int",
    "float",
    "bool",
    "str",
    "len",
    "abs",
    "min",
    "max",
    "round",
    "tuple",
    "list",
    "range",
}


def names(node: cst.CSTNode) -> set[str]:
    """The plain names ``node`` reads or binds (not attribute names, not keywords)."""
    attrs = {id(n.attr) for n in walk(node) if isinstance(n, cst.Attribute)}
    keywords = {
        id(n.keyword) for n in walk(node) if isinstance(n, cst.Arg) and n.keyword is not None
    }
    return {
        n.value for n in walk(node) if isinstance(n, cst.Name) and id(n) not in attrs | keywords
    }


def ordered_names(node: cst.CSTNode) -> list[str]:
    """``names`` in source order (generated code reads its sub-batches in this order)."""
    found = names(node)
    return list(
        dict.fromkeys(n.value for n in walk(node) if isinstance(n, cst.Name) and n.value in found)
    )


def data_names(ctx: FileContext, container: cst.CSTNode, nodes: set[str]) -> set[str]:
    """``nodes`` and every name assigned from a DALI operator call or from other data names
    anywhere in ``container`` (flow-insensitive; ops whose output count the catalog leaves open,
    like resize, still give data)."""
    given = frozenset(nodes)
    key = ("data_names", container, given)
    return set(ctx.memo(key, lambda: frozenset(_data_names(ctx, container, given))))


def _data_names(ctx: FileContext, container: cst.CSTNode, nodes: frozenset[str]) -> set[str]:
    found = set(nodes)
    assigns = [
        (t.target.value, n.value)
        for n in walk(container)
        if isinstance(n, cst.Assign)
        for t in n.targets
        if isinstance(t.target, cst.Name)
    ]
    assigns += [
        (n.target.value, n.value)
        for n in walk(container)
        if isinstance(n, cst.AugAssign) and isinstance(n.target, cst.Name)
    ]
    changed = True
    while changed:
        changed = False
        for name, value in assigns:
            if name not in found and (
                names(value) & found
                or any(
                    isinstance(c, cst.Call) and ctx.fn_op(c.func) is not None for c in walk(value)
                )
            ):
                found.add(name)
                changed = True
    return found


def owner_nodes(ctx: FileContext, stmt: cst.CSTNode, nodes: set[str]) -> set[str]:
    """``data_names`` of the code that holds ``stmt`` (its function, ``with`` block...)."""
    block = ctx.parents.get(stmt)
    owner = ctx.parents.get(block) if block is not None else None
    return data_names(ctx, owner, nodes) if owner is not None else set(nodes)


def is_data_test(ctx: FileContext, test: cst.BaseExpression, nodes: set[str]) -> bool:
    """True when ``test`` reads a data node (a name holding one, or a DALI operator call)."""
    if names(test) & nodes:
        return True
    return any(isinstance(n, cst.Call) and ctx.fn_op(n.func) is not None for n in walk(test))


def is_data_if(ctx: FileContext, node: cst.CSTNode, nodes: set[str]) -> bool:
    return isinstance(node, cst.If) and is_data_test(ctx, node.test, nodes)


def is_logical(node: cst.CSTNode) -> TypeGuard[cst.BooleanOperation | cst.UnaryOperation]:
    """``a and b``, ``a or b`` or ``not a``."""
    return isinstance(node, cst.BooleanOperation) or (
        isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not)
    )


def strip_not(test: cst.BaseExpression) -> tuple[cst.BaseExpression, bool]:
    """``test`` without the ``not``s in front of it, and whether their number is odd."""
    negated = False
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, negated = test.expression, not negated
    return test, negated


def atoms(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of the and/or/not tree of a test, left to right (evaluation order)."""
    test, _ = strip_not(test)
    if isinstance(test, cst.BooleanOperation):
        return atoms(test.left) + atoms(test.right)
    return [test]


# The statements of a branch: those of its block, or the small statements of a one-line
# ``if c: a = 1; b = 2`` (the reasons refuse those where a statement line is needed)
Branch = list[cst.BaseStatement | cst.BaseSmallStatement]


def branches(stmt: cst.If) -> tuple[Branch, Branch]:
    """The statements of both branches; an ``elif`` is an ``else`` holding one nested ``if``."""
    orelse = stmt.orelse
    then: Branch = list(stmt.body.body)
    if isinstance(orelse, cst.If):
        return then, [orelse]
    return then, list(orelse.body.body) if isinstance(orelse, cst.Else) else []


def is_node(ctx: FileContext, expr: cst.BaseExpression, nodes: set[str]) -> bool:
    """``produces_node``, and ``a if flag else b`` on a plain Python ``flag``."""
    if isinstance(expr, cst.IfExp):
        return (
            not is_data_test(ctx, expr.test, nodes)
            and is_node(ctx, expr.body, nodes)
            and is_node(ctx, expr.orelse, nodes)
        )
    if isinstance(expr, cst.Call) and (op := ctx.fn_op(expr.func)) is not None:
        return op.target.num_outputs in (
            1,
            None,
        )  # None: resize and the like, one output unless asked
    return produces_node(ctx, expr, nodes)


def bound_before(ctx: FileContext, stmt: cst.If, name: str) -> bool:
    """Whether ``name`` is assigned above ``stmt``, outside it, in its scope."""
    scope = ctx.scopes.get(stmt)
    if scope is None:
        return False
    line = ctx.line_of(stmt)
    for a in scope.assignments[name]:
        node = a.node
        inside = False
        p = node
        while p is not None:
            if p is stmt:
                inside = True
                break
            p = ctx.parents.get(p)
        if not inside and ctx.line_of(node) < line:
            return True
    return False


def random_calls(ctx: FileContext, body: Sequence[cst.CSTNode]) -> int:
    """How many random operator calls ``body`` holds (each draws one RNG state)."""
    return sum(
        1
        for s in body
        for n in walk(s)
        if isinstance(n, cst.Call) and (op := ctx.fn_op(n.func)) is not None and op.target.is_random
    )


def assigned(branch: Branch) -> list[str]:
    """Names a branch assigns, those of the ``if``s nested in it included."""
    found: list[str] = []
    for s in branch:
        if isinstance(s, cst.If):
            for sub in branches(s):
                found += assigned(sub)
            continue
        body = getattr(s, "body", ())
        if isinstance(body, cst.IndentedBlock):  # a for/while/with/try: what its block assigns
            found += assigned(list(body.body))
            continue
        if isinstance(s, cst.BaseSmallStatement):  # the body of a one-line `if c: a = 1; b = 2`
            smalls: Sequence = (s,)
        else:
            smalls = body.body if isinstance(body, cst.SimpleStatementSuite) else body
        for small in smalls:
            if isinstance(small, cst.Assign):
                found += [t.target.value for t in small.targets if isinstance(t.target, cst.Name)]
            elif isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name):
                found.append(small.target.value)
    return list(dict.fromkeys(found))


def outer_reads(branch: Branch, nodes: set[str], bound: set[str] | None = None) -> list[str]:
    """Data nodes a branch reads before assigning them: they need the branch's sub-batch. A
    nested ``if`` reads its test, what its branches read, and the names only one of its
    branches assigns (their other samples are kept)."""
    reads: list[str] = []
    bound = set() if bound is None else set(bound)
    for s in branch:
        if isinstance(s, cst.If):
            used = [n for n in ordered_names(s.test) if n in nodes]
            then, orelse = branches(s)
            used += outer_reads(then, nodes, bound) + outer_reads(orelse, nodes, bound)
            a, b = assigned(then), assigned(orelse)
            used += [n for n in dict.fromkeys(a + b) if (n in a) != (n in b) and n in nodes]
            reads += [n for n in dict.fromkeys(used) if n not in bound and n not in reads]
            bound |= set(a + b)
            continue
        for small in getattr(s, "body", ()):
            if isinstance(small, cst.Assign):
                used_set, targets = names(small.value), [t.target for t in small.targets]
            elif isinstance(small, cst.AugAssign):
                used_set, targets = names(small.value) | names(small.target), [small.target]
            else:
                used_set, targets = names(small), []
            reads += sorted(
                (used_set & nodes) - bound - set(reads), key=lambda n: _first_pos(small, n)
            )
            for t in targets:
                bound |= names(t)
    return reads


def _first_pos(node: cst.CSTNode, name: str) -> int:
    for i, n in enumerate(walk(node)):
        if isinstance(n, cst.Name) and n.value == name:
            return i
    return 0


def logic_values(ctx: FileContext, stmt: cst.CSTNode, nodes: set[str]) -> list[cst.BaseExpression]:
    """The outermost ``and``/``or``/``not`` expressions on data in ``stmt``, in source order
    (those inside a ``lambda`` left out: they are not evaluated where they are written)."""
    found: list[cst.BaseExpression] = []
    stack: list[cst.CSTNode] = [stmt]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Lambda):
            continue
        if is_logical(n) and is_data_test(ctx, n, nodes):
            found.append(n)
            continue
        stack.extend(reversed(children(n)))
    return found
