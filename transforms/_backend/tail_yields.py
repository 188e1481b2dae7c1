"""The yields of a loop body that end the branches of an ``if``: each bound to one name instead,
so that one ``yield`` of that name can follow the block that computed it (emit_loop: the block
runs in the context of the pipeline's GPU, and no context stays entered across a yield).

Before (every branch ends in a yield, ``elif`` and nested ``if`` too)::

    if n_view == 2:
        yield a.evaluate(), b.evaluate(), labels
    else:
        yield a.evaluate(), labels

After (:func:`bound_yields`, the ``yield outputs`` written after the block by the caller)::

    if n_view == 2:
        outputs = a.evaluate(), b.evaluate(), labels
    else:
        outputs = a.evaluate(), labels
"""

from __future__ import annotations

import libcst as cst

from .emit_state import walk_outside_defs


def yielded(stmt: cst.CSTNode) -> cst.BaseExpression | None:
    """What ``yield <value>`` (a statement of its own) yields."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        small = stmt.body[0]
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Yield):
            value = small.value.value
            return value if isinstance(value, cst.BaseExpression) else None
    return None


def has_yield(node: cst.CSTNode) -> bool:
    """Whether ``node`` yields (outside the functions and lambdas it defines)."""
    return any(isinstance(n, cst.Yield) for n in walk_outside_defs(node))


def bound_yields(
    stmt: cst.CSTNode, target: cst.Name
) -> tuple[cst.If, list[cst.BaseStatement]] | None:
    """``stmt``, an ``if`` each of whose branches (``elif`` and ``else`` included, none missing)
    yields once, in a statement of its own or in an ``if`` of this form, with each such yield
    made ``<target> = <value>``, and the statements every branch runs after its yield (the same
    in each, ``iteration += 1``), taken out of the branches: they follow ``yield <target>``.
    None for any other shape. Every way through the ``if`` that does not leave the loop
    (``continue``, ``break``, ``return`` before the yield stay as they were) binds ``target``
    where it yielded, and nothing else changes."""
    if not isinstance(stmt, cst.If) or stmt.orelse is None:
        return None
    body = _bound_tail(stmt.body, target)
    orelse: tuple[cst.If | cst.Else, list[cst.BaseStatement]] | None
    if isinstance(stmt.orelse, cst.If):  # elif
        orelse = bound_yields(stmt.orelse, target)
    else:
        tail = _bound_tail(stmt.orelse.body, target)
        orelse = None if tail is None else (stmt.orelse.with_changes(body=tail[0]), tail[1])
    if body is None or orelse is None or _code(body[1]) != _code(orelse[1]):
        return None
    return stmt.with_changes(body=body[0], orelse=orelse[0]), body[1]


def _bound_tail(
    block: cst.BaseSuite, target: cst.Name
) -> tuple[cst.IndentedBlock, list[cst.BaseStatement]] | None:
    """The block up to its one yield, that yield bound to ``target`` (see :func:`bound_yields`),
    and the statements after it; None where it yields more than once or not at all."""
    if not isinstance(block, cst.IndentedBlock):
        return None
    stmts = list(block.body)
    at = next((i for i, s in enumerate(stmts) if has_yield(s)), None)
    if at is None or any(has_yield(s) for s in stmts[at + 1 :]):
        return None
    last, after = stmts[at], stmts[at + 1 :]
    value = yielded(last)
    new: cst.BaseStatement
    if value is not None:
        assert isinstance(last, cst.SimpleStatementLine)
        new = last.with_changes(body=[cst.Assign([cst.AssignTarget(target)], value)])
    else:
        inner = bound_yields(last, target)
        if inner is None:
            return None
        new, after = inner[0], [*inner[1], *after]
    return block.with_changes(body=[*stmts[:at], new]), after


def _code(stmts: list[cst.BaseStatement]) -> str:
    module = cst.Module(body=[])
    return "".join(module.code_for_node(s) for s in stmts)
