"""Which data-dependent code of an ``enable_conditionals`` pipeline body the lowering of
``conditionals.py`` cannot take: each reason found keeps the pipeline with its TODO."""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import walk
from .._local import produces_node
from .cond_tree import (
    SAFE_CALLS,
    assigned,
    atoms,
    bound_before,
    branches,
    data_names,
    is_data_if,
    is_data_test,
    is_logical,
    is_node,
    names,
    owner_nodes,
)


def has_data_branches(ctx: FileContext, body: cst.CSTNode, nodes: set[str]) -> bool:
    nodes = data_names(ctx, body, nodes)
    return any(
        isinstance(n, (cst.If, cst.While, cst.IfExp)) and is_data_test(ctx, n.test, nodes)
        for n in walk(body)
    )


def branch_reasons(ctx: FileContext, body: list[cst.BaseStatement], nodes: set[str]) -> list[str]:
    """Why the data-dependent branches of a pipeline body cannot be migrated (empty: they can)."""
    reasons: list[str] = []
    if body:
        nodes = owner_nodes(ctx, body[0], nodes)
    # the data `if`s lowered (nested and elif included) and the logic of their tests
    handled: set[int] = set()
    for stmt in body:
        if is_data_if(ctx, stmt, nodes):
            reasons += if_reasons(ctx, stmt, nodes)
            handled |= handled_ids(ctx, stmt, nodes)
    for stmt in body:
        for n in walk(stmt):
            if isinstance(n, cst.While) and is_data_test(ctx, n.test, nodes):
                # DALI 2.4 itself rejects it: the loop test calls DataNode.__bool__ (TypeError)
                reasons.append(
                    "a `while` loop on data: DALI conditionals reject it too (TypeError when the "
                    "pipeline is defined)"
                )
            elif isinstance(n, cst.IfExp) and is_data_test(ctx, n.test, nodes):
                reasons.append(
                    "a conditional expression (`a if c else b`) on data is not migrated yet"
                )
            elif (
                isinstance(n, cst.If) and id(n) not in handled and is_data_test(ctx, n.test, nodes)
            ):
                reasons.append(
                    "an `if` on data inside a loop, a `with` or a Python `if` is not migrated yet"
                )
            elif is_logical(n) and id(n) not in handled and is_data_test(ctx, n, nodes):
                reasons.append(
                    f"`{ctx.text(n)}`: `and`/`or`/`not` on data outside an `if` test is not "
                    "migrated yet"
                )
    return list(dict.fromkeys(reasons))


def handled_ids(ctx: FileContext, stmt: cst.If, nodes: set[str]) -> set[int]:
    """``stmt``, the data ``if``s nested in it and the and/or/not trees of their tests."""
    ids = {id(stmt)}
    test = stmt.test
    stack = [test]
    while stack:  # the and/or/not tree at the top of the test
        t = stack.pop()
        if is_logical(t):
            ids.add(id(t))
            stack += [t.left, t.right] if isinstance(t, cst.BooleanOperation) else [t.expression]
    for branch in branches(stmt):
        for s in branch:
            if is_data_if(ctx, s, nodes):
                ids |= handled_ids(ctx, s, nodes)
    return ids


def pred_reasons(ctx: FileContext, test: cst.BaseExpression, nodes: set[str]) -> list[str]:
    """Why the and/or/not tree ``test`` on data cannot be lowered sample by sample."""
    reasons: list[str] = []
    operands = atoms(test)
    for atom in operands:
        data = produces_node(ctx, atom, nodes) or (
            len(operands) > 1
            and is_data_test(ctx, atom, nodes)
            and not call_reasons(ctx, atom, nodes)
        )  # `x.shape()[0] > 10` too
        if not data:
            if len(operands) == 1:
                reasons.append(f"the data predicate `{ctx.text(test)}` is not one node")
            else:
                reasons.append(
                    f"`{ctx.text(atom)}` in the data predicate `{ctx.text(test)}` is not a data "
                    "node"
                    " (DALI chooses between Python and per-sample logic by its value when the "
                    "pipeline is defined)"
                )
        elif any(is_logical(n) for n in walk(atom)):
            reasons.append(
                f"`and`/`or`/`not` inside the operand `{ctx.text(atom)}` of a data predicate is "
                "not migrated yet"
            )
    for atom in operands[1:]:  # short-circuited operands run on sub-batches, like branch code
        reasons += call_reasons(ctx, atom, nodes)
    return reasons


def call_reasons(ctx: FileContext, node: cst.CSTNode, nodes: set[str]) -> list[str]:
    """Calls in ``node`` that run on a sub-batch but whose random draws cannot be counted."""
    reasons = []
    for n in walk(node):
        if isinstance(n, cst.Call) and ctx.fn_op(n.func) is None:
            q = ctx.qualname(n.func) or ""
            plain = (
                isinstance(n.func, cst.Name)
                and n.func.value in SAFE_CALLS
                and not q.startswith("__main__")
            )
            method = (
                isinstance(n.func, cst.Attribute)
                and names(n.func.value) <= nodes
                and bool(names(n.func.value))
            )
            if not (plain or method or q.startswith("nvidia.dali")):
                reasons.append(
                    f"{ctx.text(n.func)}(...) is called inside an `if` on data: its random draws "
                    "cannot be counted"
                )
    return reasons


def if_reasons(ctx: FileContext, stmt: cst.If, nodes: set[str]) -> list[str]:
    """Why the ``if`` on data ``stmt`` (and those nested in it) cannot be lowered."""
    reasons = pred_reasons(ctx, stmt.test, nodes)
    both: list[list[str]] = []
    for branch in branches(stmt):
        names_: list[str] = []
        for s in branch:
            if is_data_if(ctx, s, nodes):
                # nested (or elif): its test and branches run on this branch's sub-batch
                reasons += if_reasons(ctx, s, nodes)
                reasons += call_reasons(ctx, s.test, nodes)
                names_ += assigned([s])
                continue
            if not isinstance(s, cst.SimpleStatementLine):
                reasons.append(
                    "a compound statement other than an `if` on data inside an `if` on data is "
                    "not migrated yet"
                )
                continue
            reasons += _simple_reasons(ctx, s, nodes, names_)
            reasons += call_reasons(ctx, s, nodes)
        both.append(names_)
    for name in dict.fromkeys(both[0] + both[1]):
        if (name in both[0]) != (name in both[1]) and not bound_before(ctx, stmt, name):
            reasons.append(f"`{name}` is assigned in only one branch of the `if` on data")
    return reasons


def _simple_reasons(
    ctx: FileContext, s: cst.SimpleStatementLine, nodes: set[str], assigned_names: list[str]
) -> list[str]:
    """Why a simple statement of a branch cannot run on the branch's sub-batch; the names it
    assigns are added to ``assigned_names``."""
    reasons = []
    for small in s.body:
        if isinstance(small, cst.Assign):
            for t in small.targets:
                if not isinstance(t.target, cst.Name) or not is_node(ctx, small.value, nodes):
                    reasons.append(
                        f"`{ctx.text(t.target)} = ...` inside an `if` on data does not "
                        "assign one data node"
                    )
                if isinstance(t.target, cst.Name):
                    assigned_names.append(t.target.value)
        elif isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name):
            assigned_names.append(small.target.value)
        elif not isinstance(small, (cst.Expr, cst.Pass)):
            reasons.append(f"`{ctx.text(small)}` inside an `if` on data is not migrated yet")
    return reasons
