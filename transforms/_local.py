"""Shared machinery of the local rewrites (DM1xx).

Each local rule rewrites one kind of node (a call, an argument, a subscript). Structural rules
compose all of them over the code they generate (:func:`lower`); on their own, outside any
pipeline a structural rule migrated, each local rule proposes small fixes (:class:`LocalRule`).
"""

from __future__ import annotations

from typing import Callable, ClassVar

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Diagnostic, Edit
from dali_migrate.rules import FileState, Rule


class LocalEnv:
    """What a local rewrite may rely on where it rewrites.

    ``batch_size`` and ``rng`` are the expressions random operators get (None: unknown here);
    ``nodes`` are the local names known to hold a single DALI data node (a Batch after migration),
    computed on first use when given as a callable.
    """

    def __init__(
        self,
        batch_size: cst.BaseExpression | None = None,
        rng: cst.BaseExpression | None = None,
        nodes: set[str] | Callable[[], set[str]] | None = None,
    ) -> None:
        self.batch_size = batch_size
        self.rng = rng
        self._nodes = nodes if nodes is not None else set()

    @property
    def nodes(self) -> set[str]:
        if callable(self._nodes):
            self._nodes = self._nodes()
        return self._nodes


class LocalRule(Rule):
    """A rule that rewrites single nodes of the types in ``node_types``.

    Subclasses implement :meth:`rewrite`, returning the new node, a Diagnostic, or None (no
    change). :meth:`edit` narrows the text edit a standalone fix makes (so fixes of different
    local rules on the same call never overlap).
    """

    node_types: ClassVar[tuple[type[cst.CSTNode], ...]]

    def rewrite(
        self, ctx: FileContext, original: cst.CSTNode, updated: cst.CSTNode, env: LocalEnv
    ) -> cst.CSTNode | Diagnostic | None:  # pragma: no cover - interface
        raise NotImplementedError

    def edit(self, ctx: FileContext, original: cst.CSTNode, new: cst.CSTNode) -> Edit:
        return ctx.expr_edit(original, new)

    def message(self, ctx: FileContext, original: cst.CSTNode, new: cst.CSTNode) -> str:
        return self.summary

    def run(self, state: FileState) -> None:
        run_local_rules(state, [self])

    @staticmethod
    def run_all(state: FileState, rules: list[LocalRule]) -> None:
        run_local_rules(state, rules)

    def _propose(self, state: FileState, node: cst.CSTNode, env: LocalEnv) -> None:
        ctx = state.ctx
        result = self.rewrite(ctx, node, node, env)
        if result is None:
            return
        if isinstance(result, Diagnostic):
            state.diagnostics.append(result)
            return
        edit = self.edit(ctx, node, result)
        state.fixes.append(ctx.make_fix(self.id, node, [edit], self.message(ctx, node, result), safety=self.safety))


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
    _join_mixed_device(state, nodes_of)


def _join_mixed_device(state: FileState, nodes_of: dict[int, cst.CSTNode]) -> None:
    """``fn.decoders.image(x, device="mixed")`` runs in neither mode once only one of DM101
    (``ndd.``) and DM102 (``"gpu"``) is applied: the two fixes become one. When DM102 is off
    there (ignored or suppressed), DM101 leaves the call alone with a TODO."""
    ctx = state.ctx
    joined: set[int] = set()
    device_fixes = {}
    for fix in state.fixes:
        node = nodes_of.get(id(fix))
        if fix.rule == "DM102" and isinstance(node, cst.Arg):
            device_fixes[id(node)] = fix
    for fix in list(state.fixes):
        node = nodes_of.get(id(fix))
        call = ctx.parents.get(node) if fix.rule == "DM101" and node is not None else None
        if not (isinstance(call, cst.Call) and call.func is node):
            continue
        devices = [a for a in call.args if a.keyword is not None and a.keyword.value == "device"]
        mixed = [a for a in devices if isinstance(a.value, cst.SimpleString) and a.value.evaluated_value == "mixed"]
        if devices and not mixed and _device_unknown(ctx, devices[0]):
            # a device variable that may hold "mixed" and cannot be rewritten: DM102 says so,
            # and the call stays pipeline mode with it
            state.fixes.remove(fix)
            line = ctx.line_of(devices[0])
            if not any(d.rule == "DM102" and d.line == line for d in state.diagnostics):
                state.diagnostics.append(ctx.todo("DM101", node, "its device may be \"mixed\", which dynamic mode rejects"))
            continue
        if not mixed:
            continue
        state.fixes.remove(fix)
        device = device_fixes.get(id(mixed[0]))
        if device is not None and ctx.suppressed("DM102", device.line or device.span.start_line):
            state.fixes.remove(device)
            joined.add(id(device))
            device = None
        if device is None:
            state.diagnostics.append(
                ctx.todo("DM101", node, 'migrate this call with its device="mixed" (rule DM102 is off here): dynamic mode rejects "mixed"')
            )
            continue
        state.fixes.remove(device)
        joined.add(id(device))
        state.fixes.append(
            ctx.make_fix(
                "DM101", node, [*fix.edits, *device.edits], f'{fix.message}, device="mixed" -> "gpu"', includes=("DM102",)
            )
        )
    for fix in [f for f in state.fixes if f.rule == "DM102" and id(f) not in joined]:
        if ctx.suppressed("DM102", fix.line or fix.span.start_line):
            continue  # dropped later anyway
        node = nodes_of.get(id(fix))
        call = ctx.parents.get(node) if isinstance(node, cst.Arg) else None
        if isinstance(call, cst.Call) and ctx.is_fn_ref(call.func):
            # device="gpu" on a pipeline-mode decoder is as wrong as "mixed" on an ndd one
            state.fixes.remove(fix)
            state.diagnostics.append(
                ctx.todo("DM102", node, f"migrate {ctx.text(call.func)} to dynamic mode together with its device (rule DM101)")
            )


def _device_unknown(ctx, arg: cst.Arg) -> bool:
    """DM102 cannot vouch for this ``device=`` value (it reports a TODO for it)."""
    from .mixed_device import MixedDevice  # the rule's own judgement, not a copy of it

    return isinstance(MixedDevice().rewrite(ctx, arg, arg, LocalEnv()), Diagnostic)


# -- walking the tree ------------------------------------------------------------------------------


def walk(node: cst.CSTNode):
    """Every node under ``node`` (itself included), in source order."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def in_source_order(ctx: FileContext, refs) -> list:
    """Scope references (libcst keeps them in sets) sorted by where they are, so that what is
    derived from them (reasons, edits, TODOs) comes out the same on every run."""
    return sorted(refs, key=lambda r: (ctx.positions[r.node].start.line, ctx.positions[r.node].start.column))


def within(ctx: FileContext, node: cst.CSTNode | None, container: cst.CSTNode | None) -> bool:
    """Whether ``node`` is ``container`` or lies inside it (nodes of ``ctx.module``)."""
    while node is not None and container is not None:
        if node is container:
            return True
        node = ctx.parents.get(node)
    return False


# -- which names hold DALI data nodes -----------------------------------------------------------


def produces_node(ctx: FileContext, expr: cst.BaseExpression, nodes: set[str]) -> bool:
    """True if ``expr`` evaluates to a single DALI data node (given the known ``nodes``)."""
    if isinstance(expr, cst.Name):
        return expr.value in nodes
    if isinstance(expr, cst.Call):
        op = ctx.fn_op(expr.func)
        if op is not None:
            return op.target.num_outputs == 1
        q = ctx.qualname(expr.func)
        if q and q.startswith("nvidia.dali.math."):
            return True
        return False
    if isinstance(expr, cst.BinaryOperation):
        return produces_node(ctx, expr.left, nodes) or produces_node(ctx, expr.right, nodes)
    if isinstance(expr, cst.UnaryOperation):
        return produces_node(ctx, expr.expression, nodes)
    if isinstance(expr, cst.Comparison):
        return produces_node(ctx, expr.left, nodes) or any(
            produces_node(ctx, c.comparator, nodes) for c in expr.comparisons
        )
    if isinstance(expr, cst.Subscript):
        return produces_node(ctx, expr.value, nodes)
    return False


def _bind(target: cst.BaseAssignTargetExpression, value: cst.BaseExpression, ctx: FileContext, nodes: set[str]) -> None:
    if isinstance(target, cst.Name):
        if produces_node(ctx, value, nodes):
            nodes.add(target.value)
        else:
            nodes.discard(target.value)
    elif isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, cst.Call):
        op = ctx.fn_op(value.func)
        multi = op is not None and (op.target.num_outputs or 0) > 1
        for el in target.elements:
            if isinstance(el.value, cst.Name):
                if multi:
                    nodes.add(el.value.value)
                else:
                    nodes.discard(el.value.value)


def collect_nodes(ctx: FileContext, body: cst.CSTNode, nodes: set[str] | None = None) -> set[str]:
    """Names assigned DALI data nodes anywhere in ``body`` (flow-insensitive, in source order)."""
    nodes = set() if nodes is None else nodes

    class Collector(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is body

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_Assign(self, node: cst.Assign) -> None:
            for t in node.targets:
                _bind(t.target, node.value, ctx, nodes)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if isinstance(node.target, cst.Name) and produces_node(ctx, node.value, nodes):
                nodes.add(node.target.value)

    body.visit(Collector())
    return nodes


# -- composing every local rule over generated code -----------------------------------------


class _Lowering(cst.CSTTransformer):
    def __init__(self, ctx: FileContext, env: LocalEnv, rules: list[LocalRule]) -> None:
        super().__init__()
        self.ctx = ctx
        self.env = env
        self.rules = rules
        self.diagnostics: list[Diagnostic] = []
        self.fired: set[str] = set()

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):  # type: ignore[override]
        for rule in self.rules:
            if isinstance(original, rule.node_types):
                out = rule.rewrite(self.ctx, original, updated, self.env)
                if isinstance(out, Diagnostic):
                    self.diagnostics.append(out)
                elif out is not None:
                    updated = out
                    self.fired.add(rule.id)
        return updated


def lower(
    ctx: FileContext, node: cst.CSTNode, env: LocalEnv, rules: list[LocalRule], fired: set[str] | None = None
) -> tuple[cst.CSTNode, list[Diagnostic]]:
    """Apply every local rule to ``node`` (an original node of ``ctx.module``); the ids of the
    rules that changed something are added to ``fired``."""
    t = _Lowering(ctx, env, rules)
    new = node.visit(t)
    if fired is not None:
        fired |= t.fired
    return new, t.diagnostics


# -- editing argument lists without breaking their layout ---------------------------------------


def _separator(args: list[cst.Arg]) -> cst.Comma:
    """The comma style between arguments already used by this call (one line or one per line)."""
    for a in args[:-1]:
        if isinstance(a.comma, cst.Comma):
            return a.comma
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def append_arg(args: list[cst.Arg], new: cst.Arg) -> list[cst.Arg]:
    """Add ``new`` after the last argument, keeping a trailing comma and the closing layout."""
    if not args:
        return [new]
    last = args[-1]
    sep = _separator(args)
    if isinstance(last.comma, cst.Comma):
        moved = new.with_changes(comma=last.comma, whitespace_after_arg=last.whitespace_after_arg)
    else:
        moved = new.with_changes(whitespace_after_arg=last.whitespace_after_arg)
    return args[:-1] + [last.with_changes(comma=sep, whitespace_after_arg=cst.SimpleWhitespace("")), moved]


def insert_arg(args: list[cst.Arg], index: int, new: cst.Arg) -> list[cst.Arg]:
    """Insert ``new`` before ``args[index]`` (or append when ``index`` is past the end)."""
    if index >= len(args):
        return append_arg(args, new)
    return args[:index] + [new.with_changes(comma=_separator(args))] + args[index:]


def remove_args(args: list[cst.Arg], names: set[str]) -> list[cst.Arg]:
    """Drop keyword arguments by name; the new last argument takes over the closing layout."""
    out: list[cst.Arg] = []
    for a in args:
        if a.keyword is not None and a.keyword.value in names:
            if a is args[-1] and out:
                out[-1] = out[-1].with_changes(comma=a.comma, whitespace_after_arg=a.whitespace_after_arg)
            continue
        out.append(a)
    if out and out[-1] is not args[-1] and isinstance(out[-1].comma, cst.Comma) and not isinstance(
        args[-1].comma, cst.Comma
    ):
        out[-1] = out[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return out


def kwarg(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(
        keyword=cst.Name(name),
        value=value,
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )


def fresh_name(base: str, taken: set[str]) -> str:
    """``base``, or ``base_``, ``base__``... the first not in ``taken`` (which gets it)."""
    name = base
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def truthy(arg: cst.Arg | None) -> bool:
    """A keyword argument that is given and not literally False, None or 0."""
    if arg is None:
        return False
    v = arg.value
    return not (isinstance(v, cst.Name) and v.value in ("False", "None")) and not (
        isinstance(v, cst.Integer) and v.value == "0"
    )


def is_generated_doc(doc: cst.BaseStatement) -> bool:
    """The docstring the structural rules give a migrated pipeline ("Yields (...) ... as Pipeline.run() did")."""
    return (
        isinstance(doc, cst.SimpleStatementLine)
        and isinstance(doc.body[0], cst.Expr)
        and isinstance(doc.body[0].value, cst.SimpleString)
        and doc.body[0].value.evaluated_value.startswith("Yields (")
        and "as Pipeline.run() did" in doc.body[0].value.evaluated_value
    )
