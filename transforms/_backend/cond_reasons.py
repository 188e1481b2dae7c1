"""Which data-dependent code of an ``enable_conditionals`` pipeline body the lowering of
``conditionals.py`` cannot take: each reason found keeps the pipeline with its TODO."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

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
    logic_values,
    names,
    owner_nodes,
)

#: what ``pred_reasons`` calls an and/or/not tree that is a value (not the test of an ``if``)
VALUE = "logical expression on data"

#: the statements of a block: lines, or the small statements of a one-line suite
#: (``def f(): a = b; return a``)
Statements: TypeAlias = "Sequence[cst.BaseStatement] | Sequence[cst.BaseSmallStatement]"


def enclosed_logic_reason(text: str) -> str:
    """Why the ``and``/``or``/``not`` on data ``text`` inside a block is refused, and what to do."""
    return (
        f"`{text}`: `and`/`or`/`not` on data inside a loop, a `with`, a Python `if` or a function "
        "is not migrated yet: write it in a statement of the pipeline function itself (unroll a "
        "loop), where it is migrated"
    )


def has_data_branches(ctx: FileContext, body: cst.CSTNode, nodes: set[str]) -> bool:
    """Whether ``body`` branches on data: an ``if`` (``while``, ``a if c else b``) on data, or
    an ``and``/``or`` on data (its right operand runs only on some samples)."""
    nodes = data_names(ctx, body, nodes)
    return any(
        (
            isinstance(n, (cst.If, cst.While, cst.IfExp))
            and is_data_test(ctx, n.test, nodes)
            or isinstance(n, cst.BooleanOperation)
            and is_data_test(ctx, n, nodes)
        )
        for n in walk(body)
    )


def branch_reasons(ctx: FileContext, body: Statements, nodes: set[str]) -> list[str]:
    """Why the data-dependent branches of a pipeline body cannot be migrated (empty: they can)."""
    reasons: list[str] = []
    if body:
        nodes = owner_nodes(ctx, body[0], nodes)
    # the data `if`s lowered (nested and elif included), the logic of their tests, and the
    # and/or/not values computed before the simple statement they are in
    handled: set[int] = set()
    for stmt in body:
        if isinstance(stmt, cst.If) and is_data_if(ctx, stmt, nodes):
            reasons += if_reasons(ctx, stmt, nodes)
            handled |= handled_ids(ctx, stmt, nodes)
        for simple in _value_statements(ctx, stmt, nodes):
            for value in logic_values(ctx, simple, nodes):
                reasons += pred_reasons(ctx, value, nodes, VALUE)
                handled |= {id(n) for n in walk(value) if is_logical(n)}
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
                reasons.append(enclosed_logic_reason(ctx.text(n)))
    reasons += helper_reasons(ctx, body, nodes)
    return list(dict.fromkeys(reasons))


def helper_reasons(ctx: FileContext, body: Statements, nodes: set[str]) -> list[str]:
    """Functions of this file that the body calls with data and that branch on it (``if``,
    ``and``/``or``/``not``...): DALI converted them too and ran that logic per sample, where the
    migrated code would call them with whole batches (a batch is always true)."""
    defs: dict[str, cst.FunctionDef | cst.Lambda] = {
        s.name.value: s for s in ctx.module.body if isinstance(s, cst.FunctionDef)
    }
    for stmt in body:
        for n in walk(stmt):
            if isinstance(n, cst.FunctionDef):
                defs[n.name.value] = n
            elif isinstance(n, cst.Assign) and isinstance(n.value, cst.Lambda):
                defs.update(
                    {t.target.value: n.value for t in n.targets if isinstance(t.target, cst.Name)}
                )
    reasons = []
    for stmt in body:
        for n in walk(stmt):
            if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value in defs:
                fn = defs[n.func.value]
                logic = _branches_on(ctx, fn, _data_params(ctx, fn, n, nodes))
                if logic is not None:
                    reasons.append(
                        f"{n.func.value}(...) is called with data and applies `{ctx.text(logic)}` "
                        "to it, which DALI ran per sample: write that logic in the pipeline "
                        "function itself (where it is migrated)"
                    )
    return reasons


def _data_params(
    ctx: FileContext, fn: cst.FunctionDef | cst.Lambda, call: cst.Call, nodes: set[str]
) -> set[str]:
    """The parameters of ``fn`` that ``call`` passes data to."""
    params = [*fn.params.posonly_params, *fn.params.params]
    found = set()
    for i, arg in enumerate(call.args):
        if arg.star or not is_data_test(ctx, arg.value, nodes):
            continue
        if arg.keyword is not None:
            found.add(arg.keyword.value)
        elif i < len(params):
            found.add(params[i].name.value)
    return found


def _branches_on(
    ctx: FileContext, fn: cst.FunctionDef | cst.Lambda, params: set[str]
) -> cst.CSTNode | None:
    """The first test or ``and``/``or``/``not`` in ``fn`` that reads data of ``params``."""
    inside = data_names(ctx, fn, params)
    for n in walk(fn.body):
        if isinstance(n, (cst.If, cst.While, cst.IfExp)) and is_data_test(ctx, n.test, inside):
            return n.test
        if is_logical(n) and is_data_test(ctx, n, inside):
            return n
    return None


def _value_statements(
    ctx: FileContext, stmt: cst.BaseStatement | cst.BaseSmallStatement, nodes: set[str]
) -> list[cst.SimpleStatementLine]:
    """The simple statements whose ``and``/``or``/``not`` values on data are lowered: ``stmt``
    itself, or those in the branches of ``stmt``, an ``if`` on data, and of the ``if``s on data
    nested in them."""
    if isinstance(stmt, cst.SimpleStatementLine):
        return [stmt]
    if not is_data_if(ctx, stmt, nodes):
        return []
    assert isinstance(stmt, cst.If)
    return [
        s for branch in branches(stmt) for b in branch for s in _value_statements(ctx, b, nodes)
    ]


def handled_ids(ctx: FileContext, stmt: cst.If, nodes: set[str]) -> set[int]:
    """``stmt``, the data ``if``s nested in it and the and/or/not in their tests."""
    ids = {id(stmt)} | {id(n) for n in walk(stmt.test) if is_logical(n)}
    for branch in branches(stmt):
        for s in branch:
            if isinstance(s, cst.If) and is_data_if(ctx, s, nodes):
                ids |= handled_ids(ctx, s, nodes)
    return ids


def pred_reasons(
    ctx: FileContext, test: cst.BaseExpression, nodes: set[str], what: str = "data predicate"
) -> list[str]:
    """Why the and/or/not tree ``test`` on data (``what`` it is) cannot be lowered sample by
    sample."""
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
                reasons.append(f"the {what} `{ctx.text(test)}` is not one node")
            else:
                reasons.append(
                    f"`{ctx.text(atom)}` in the {what} `{ctx.text(test)}` is not a data "
                    "node (DALI chooses between Python and per-sample logic by its value when "
                    f"the pipeline is defined): test `{ctx.text(atom)}` in a Python `if` of its "
                    "own and keep only data in the `and`/`or`"
                )
        else:  # `fn.cast(a and b, ...)`: computed first, as in a statement
            for inner in logic_values(ctx, atom, nodes):
                reasons += pred_reasons(ctx, inner, nodes, VALUE)
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
            if isinstance(s, cst.If) and is_data_if(ctx, s, nodes):
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
