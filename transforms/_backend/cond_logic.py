"""``and``/``or``/``not`` on data used as values (not as the test of an ``if``): each is computed
sample by sample before the statement it is in, which then reads the batch of booleans (what
pipeline mode gave and why is in ``conditionals.py``)."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import leading_lines
from .._local import LocalEnv
from .cond_reasons import VALUE, enclosed_logic_reason, pred_reasons
from .cond_sample import LowerNode, SampleCode
from .cond_tree import is_data_test, logic_values, owner_nodes
from .model import Refused


@dataclass
class LogicValues:
    """What :func:`lower_logic` made of one statement."""

    #: the code that computes the values, to run before the statement
    before: list[cst.BaseStatement]
    #: the environment to lower the statement in: it reads the values computed
    env: LocalEnv
    #: the statement was ``name = <and/or/not>``: ``before`` assigns the name, nothing is left
    whole: bool = False


class ValueCode(SampleCode):
    """The per-sample code of the ``and``/``or``/``not`` values of one statement."""

    def statement(self, stmt: cst.SimpleStatementLine, env: LocalEnv) -> LogicValues:
        values = logic_values(self.ctx, stmt, self.nodes)
        if not values:
            return LogicValues([], env)
        reasons = [r for v in values for r in pred_reasons(self.ctx, v, self.nodes, VALUE)]
        if reasons:
            raise Refused("; ".join(dict.fromkeys(reasons)))
        before: list[cst.BaseStatement] = []
        target = _assigned_name(stmt)
        first = stmt.body[0]  # `target = <value>` when there is a target
        if target is not None and isinstance(first, cst.Assign) and values[0] is first.value:
            self.value(values[0], target, env, before)
            last = before[-1]
            assert isinstance(last, cst.SimpleStatementLine)
            before[-1] = last.with_changes(trailing_whitespace=stmt.trailing_whitespace)
            _lead(before, stmt)
            return LogicValues(before, env, whole=True)
        computed: dict[int, cst.BaseExpression] = {}
        for v in values:
            name = self.fresh("truth")
            self.value(v, name, env, before)
            computed[id(v)] = cst.Name(name)
        return LogicValues(before, env.with_computed(computed))


def _assigned_name(stmt: cst.SimpleStatementLine) -> str | None:
    """``name`` when ``stmt`` is ``name = <value>`` alone."""
    if len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Assign):
        return None
    targets = stmt.body[0].targets
    if len(targets) == 1 and isinstance(targets[0].target, cst.Name):
        return targets[0].target.value
    return None


def _lead(before: list[cst.BaseStatement], stmt: cst.SimpleStatementLine) -> None:
    """The comments above ``stmt`` go above the code that replaces it."""
    if stmt.leading_lines:
        first = before[0]
        before[0] = first.with_changes(leading_lines=[*stmt.leading_lines, *leading_lines(first)])


def lower_logic(
    ctx: FileContext,
    stmt: cst.BaseStatement,
    env: LocalEnv,
    lower_node: LowerNode,
    taken: set[str],
) -> LogicValues:
    """The ``and``/``or``/``not`` values on data of a simple statement of the graph code,
    computed before it (``lower_node`` and ``taken`` as for ``lower_branches``). An ``if`` on
    data lowers its own; any other compound statement holding such a value raises ``Refused``
    (so does a value that cannot be lowered)."""
    nodes = owner_nodes(ctx, stmt, env.nodes)
    if isinstance(stmt, cst.SimpleStatementLine):
        return ValueCode(ctx, lower_node, taken, nodes).statement(stmt, env)
    if isinstance(stmt, cst.If) and is_data_test(ctx, stmt.test, nodes):
        return LogicValues([], env)
    inner = logic_values(ctx, stmt, nodes)
    if inner:
        raise Refused(enclosed_logic_reason(ctx.text(inner[0])))
    return LogicValues([], env)
