"""Shared machinery of the local rewrites (DM1xx).

Each local rule rewrites one kind of node (a call, an argument, a subscript). Structural rules
compose all of them over the code they generate (:func:`lower`); on their own, outside any
pipeline a structural rule migrated, each local rule proposes small fixes (:class:`LocalRule`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Generic, TypeVar, cast

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.cst_walk import children
from dali_migrate.fixes import Diagnostic, Edit
from dali_migrate.rules import FileState, Rule

from ._align import aligned_to_bracket, shift_continuation


class LocalEnv:
    """What a local rewrite may rely on where it rewrites.

    ``batch_size`` and ``rng`` are the expressions random operators get (None: unknown here);
    ``nodes`` are the local names known to hold a single DALI data node (a Batch after migration),
    computed on first use when given as a callable; ``computed``: original expressions (by id)
    whose values code before the statement computed, and the expression that holds each (it
    replaces them whole when lowered).
    """

    def __init__(
        self,
        batch_size: cst.BaseExpression | None = None,
        rng: cst.BaseExpression | None = None,
        nodes: set[str] | Callable[[], set[str]] | None = None,
        computed: dict[int, cst.BaseExpression] | None = None,
    ) -> None:
        self.batch_size = batch_size
        self.rng = rng
        self._nodes = nodes if nodes is not None else set()
        self.computed = computed if computed is not None else {}

    def with_computed(self, computed: dict[int, cst.BaseExpression]) -> LocalEnv:
        """This environment where the expressions ``computed`` names are computed already."""
        return LocalEnv(self.batch_size, self.rng, self._nodes, {**self.computed, **computed})

    @property
    def nodes(self) -> set[str]:
        if callable(self._nodes):
            self._nodes = self._nodes()
        return self._nodes


#: the kind of node a local rule rewrites (``LocalRule[cst.Call]``), one of its ``node_types``
NodeT = TypeVar("NodeT", bound=cst.CSTNode)


class LocalRule(Rule, Generic[NodeT]):
    """A rule that rewrites single nodes of the types in ``node_types``.

    Subclasses implement :meth:`rewrite`, returning the new node, a Diagnostic, or None (no
    change). :meth:`edit` narrows the text edit a standalone fix makes (so fixes of different
    local rules on the same call never overlap); its ``new`` is what :meth:`rewrite` returned,
    a node of the same kind for the rules that narrow it.
    """

    node_types: ClassVar[tuple[type[cst.CSTNode], ...]]
    composable = True

    def rewrite(
        self, ctx: FileContext, original: NodeT, updated: NodeT, env: LocalEnv
    ) -> cst.CSTNode | Diagnostic | None:  # pragma: no cover - interface
        raise NotImplementedError

    def edit(self, ctx: FileContext, original: NodeT, new: NodeT) -> Edit:
        return ctx.expr_edit(original, new)

    def message(self, ctx: FileContext, original: cst.CSTNode, new: cst.CSTNode) -> str:
        return self.summary

    def run(self, state: FileState) -> None:
        run_local_rules(state, [self])

    def after_walk(self, state: FileState, nodes_of: dict[int, cst.CSTNode]) -> None:
        """Called once the module was walked, whichever local rules are selected, with the node
        each standalone fix rewrites: a rule whose fixes only make sense together with another
        rule's joins them here."""

    @staticmethod
    def run_all(state: FileState, rules: list[LocalRule]) -> None:
        run_local_rules(state, rules)

    def _propose(self, state: FileState, node: cst.CSTNode, env: LocalEnv) -> None:
        ctx = state.ctx
        # the walk hands each rule the nodes of its node_types only
        result = self.rewrite(ctx, cast(NodeT, node), cast(NodeT, node), env)
        if result is None:
            return
        if isinstance(result, Diagnostic):
            state.diagnostics.append(result)
            return
        edit = self.edit(ctx, cast(NodeT, node), cast(NodeT, result))
        state.fixes.append(
            ctx.make_fix(self.id, node, [edit], self.message(ctx, node, result), safety=self.safety)
        )


def run_local_rules(state: FileState, rules: list[LocalRule]) -> None:
    """One walk over the module proposes the standalone fixes of all ``rules``."""
    ctx = state.ctx
    by_type: dict[type, list[LocalRule]] = {}
    for rule in rules:
        for t in rule.node_types:
            by_type.setdefault(t, []).append(rule)

    claimed = {id(c) for c in state.claimed}
    nodes_of: dict[int, cst.CSTNode] = {}  # id(fix) -> the node it rewrites

    class Walker(cst.CSTVisitor):
        def __init__(self) -> None:
            self.envs: list[LocalEnv] = [LocalEnv(nodes=lambda: collect_nodes(ctx, ctx.module))]

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            self.envs.append(LocalEnv(nodes=lambda: collect_nodes(ctx, node)))
            return True

        def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
            self.envs.pop()

        def on_visit(self, node: cst.CSTNode) -> bool:
            if id(node) in claimed:
                if isinstance(node, cst.FunctionDef):
                    self.envs.append(LocalEnv())  # leave_FunctionDef still runs and pops it
                return False  # owned by a structural rule, migrated or refused
            for rule in by_type.get(type(node), ()):
                before = len(state.fixes)
                rule._propose(state, node, self.envs[-1])
                for fix in state.fixes[before:]:
                    nodes_of[id(fix)] = node
            return super().on_visit(node)

    ctx.module.visit(Walker())
    for rule in cast("list[LocalRule]", state.lowering):  # (the registry's local rules)
        rule.after_walk(state, nodes_of)


# -- which names hold DALI data nodes -----------------------------------------------------------


def produces_node(ctx: FileContext, expr: cst.BaseExpression, nodes: set[str]) -> bool:
    """True if ``expr`` evaluates to a single DALI data node (given the known ``nodes``)."""
    if isinstance(expr, cst.Name):
        return expr.value in nodes
    if isinstance(expr, cst.Call):
        op = ctx.fn_op(expr.func)
        if op is not None:
            return op.target.num_outputs == 1
        if _shape_of_node(ctx, expr, nodes):  # ``x.shape()``: a 1-D tensor per sample
            return True
        q = ctx.qualname(expr.func)
        if q and q.startswith("nvidia.dali.math."):
            return True
        return q == "nvidia.dali.types.Constant"  # a batch of copies where a batch is expected
    if isinstance(expr, cst.BinaryOperation):
        return produces_node(ctx, expr.left, nodes) or produces_node(ctx, expr.right, nodes)
    if isinstance(expr, cst.UnaryOperation):
        return produces_node(ctx, expr.expression, nodes)
    if isinstance(expr, cst.BooleanOperation):  # enable_conditionals: one boolean per sample
        return produces_node(ctx, expr.left, nodes) or produces_node(ctx, expr.right, nodes)
    if isinstance(expr, cst.Comparison):
        return produces_node(ctx, expr.left, nodes) or any(
            produces_node(ctx, c.comparator, nodes) for c in expr.comparisons
        )
    if isinstance(expr, cst.Subscript):
        return produces_node(ctx, expr.value, nodes)
    return False


def _shape_of_node(ctx: FileContext, call: cst.Call, nodes: set[str]) -> bool:
    """``x.shape()`` (keywords only) on a data node ``x``."""
    func = call.func
    return (
        isinstance(func, cst.Attribute)
        and func.attr.value == "shape"
        and all(a.keyword is not None for a in call.args)
        and produces_node(ctx, func.value, nodes)
    )


def _bind(
    target: cst.BaseAssignTargetExpression,
    value: cst.BaseExpression,
    ctx: FileContext,
    nodes: set[str],
) -> None:
    if isinstance(target, cst.Name):
        if produces_node(ctx, value, nodes):
            nodes.add(target.value)
        else:
            nodes.discard(target.value)
    elif isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, cst.Call):
        op = ctx.fn_op(value.func)
        # (an operator whose number of outputs its arguments decide, fn.readers.webdataset's
        # ext=, gives a list of nodes where it is unpacked: a single node cannot be)
        multi = op is not None and (op.target.num_outputs is None or op.target.num_outputs > 1)
        for el in target.elements:
            if isinstance(el.value, cst.Name):
                if multi:
                    nodes.add(el.value.value)
                else:
                    nodes.discard(el.value.value)


def collect_nodes(ctx: FileContext, body: cst.CSTNode, nodes: set[str] | None = None) -> set[str]:
    """Names assigned DALI data nodes anywhere in ``body`` (flow-insensitive, in source order)."""
    if nodes is None:  # (asked of the same code again and again: once per file)
        return set(ctx.memo(("collect_nodes", body), lambda: frozenset(_collect(ctx, body, set()))))
    return _collect(ctx, body, nodes)


def _collect(ctx: FileContext, body: cst.CSTNode, found: set[str]) -> set[str]:
    """``found`` with the names ``body`` assigns data nodes to added (and rebound ones dropped)."""
    stack: list[cst.CSTNode] = [body]  # pre-order, as a visitor would go (without its cost)
    while stack:
        node = stack.pop()
        if isinstance(node, cst.ClassDef) or isinstance(node, cst.FunctionDef) and node is not body:
            continue  # (code that runs later, or in a class of its own)
        if isinstance(node, cst.Assign):
            for t in node.targets:
                _bind(t.target, node.value, ctx, found)
        elif isinstance(node, cst.AugAssign):
            if isinstance(node.target, cst.Name) and produces_node(ctx, node.value, found):
                found.add(node.target.value)
        stack.extend(reversed(children(node)))
    return found


# -- composing every local rule over generated code -----------------------------------------


class _Lowering(cst.CSTTransformer):
    def __init__(self, ctx: FileContext, env: LocalEnv, rules: list[LocalRule]) -> None:
        super().__init__()
        self.ctx = ctx
        self.env = env
        self.rules = rules
        self.diagnostics: list[Diagnostic] = []
        self.fired: set[str] = set()

    def on_visit(self, node: cst.CSTNode) -> bool:
        if id(node) in self.env.computed:
            return False
        # a rule that replaces a node whole (``replaces``) leaves nothing inside it to rewrite
        return not any(
            (replaces := getattr(rule, "replaces", None)) and replaces(node) for rule in self.rules
        )

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):
        if id(original) in self.env.computed:
            return self.env.computed[id(original)]
        for rule in self.rules:
            if isinstance(original, rule.node_types):
                out = rule.rewrite(self.ctx, original, updated, self.env)
                if isinstance(out, Diagnostic):
                    self.diagnostics.append(out)
                elif out is not None:
                    updated = out
                    self.fired.add(rule.id)
                    if not isinstance(out, type(original)):
                        break  # another kind of node now: the other rules are not about it
        if isinstance(original, cst.Call) and isinstance(updated, cst.Call):
            updated = self._aligned(original, updated)
        return updated

    def _aligned(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        """``updated`` with its continuation lines moved as far as its bracket moved when a
        rule renamed the function (``fn.x(a,`` -> ``ndd.x(a,``); a call the tool made (not in
        the module) has no layout of its own to keep."""
        if updated.func is original.func or not aligned_to_bracket(original, self.ctx.positions):
            return updated
        code = cst.Module([]).code_for_node
        return shift_continuation(updated, len(code(updated.func)) - len(code(original.func)))


def lower(
    ctx: FileContext,
    node: cst.CSTNode,
    env: LocalEnv,
    rules: list[LocalRule],
    fired: set[str] | None = None,
) -> tuple[cst.CSTNode, list[Diagnostic]]:
    """Apply every local rule to ``node`` (an original node of ``ctx.module``); the ids of the
    rules that changed something are added to ``fired``."""
    t = _Lowering(ctx, env, rules)
    new = node.visit(t)
    assert isinstance(new, cst.CSTNode)  # (the rules replace nodes, never remove them)
    if fired is not None:
        fired |= t.fired
    return new, t.diagnostics
