"""DM102 mixed-device: ``device="mixed"`` becomes ``device="gpu"``.

Before::

    images = fn.decoders.image(jpegs, device="mixed")

After::

    images = ndd.decoders.image(jpegs, device="gpu")

Dynamic mode rejects ``"mixed"`` (``ValueError: Invalid device type: mixed``); ``"gpu"`` selects
the same hybrid CPU/GPU decoding. A device held in a local variable is followed to its
assignments: when every one is a string literal, the ``"mixed"`` literals there are rewritten::

    decoder_device = "cpu" if dali_cpu else "mixed"      ->  ... else "gpu"
    images = fn.decoders.image(jpegs, device=decoder_device)

Any other device expression is reported, since the tool cannot see whether it may be ``"mixed"``.

Safety: safe.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Diagnostic
from dali_migrate.rules import FileState

from ._cst import in_source_order
from ._local import LocalEnv, LocalRule


class MixedDevice(LocalRule):
    """(``after_walk``) ``fn.decoders.image(x, device="mixed")`` runs in neither mode once only
    one of DM101 (``ndd.``) and DM102 (``"gpu"``) is applied: this rule joins the two fixes of
    such a call into one, whichever rules are selected."""

    id = "DM102"
    name = "mixed-device"
    summary = 'device="mixed" becomes device="gpu"'
    node_types = (cst.Arg, cst.SimpleString)

    def after_walk(self, state: FileState, nodes_of: dict[int, cst.CSTNode]) -> None:
        _join(state, nodes_of)

    def rewrite(self, ctx: FileContext, original, updated, env: LocalEnv):
        if isinstance(original, cst.SimpleString):
            return _device_literal(ctx, original, updated)
        if original.keyword is None or original.keyword.value != "device":
            return None
        call = ctx.parents.get(original)
        if not isinstance(call, cst.Call) or not ctx.is_fn_ref(call.func):
            return None
        value = original.value
        if isinstance(value, cst.SimpleString):
            if value.evaluated_value != "mixed":
                return None
            return updated.with_changes(value=_gpu(updated.value))
        if isinstance(value, cst.IfExp) and _literal_branches(value) is not None:
            if not _mixed_branches(value):
                return None  # device="gpu" if cond else "cpu"
            # device="mixed" if cond else "cpu": each branch is a literal, rewritten in place
            return updated.with_changes(value=updated.value.visit(_MixedToGpu()))
        literals = _literal_values(ctx, value) if isinstance(value, cst.Name) else None
        if literals is not None:
            if all(
                lit.evaluated_value != "mixed" or _device_literal(ctx, lit, lit) is not None
                for lit in literals
            ):
                return None  # its "mixed" literals are rewritten where they are assigned
            return ctx.todo(
                self.id,
                original,
                f'device={ctx.text(value)} may be "mixed", and the variable is also used for '
                'something else '
                '(a comparison?), so its "mixed" cannot become "gpu" automatically: dynamic mode '
                'rejects "mixed"',
            )
        if isinstance(value, (cst.Name, cst.Attribute, cst.IfExp)):
            return ctx.todo(
                self.id,
                original,
                f"device={ctx.text(value)} may be \"mixed\", which dynamic mode rejects: use "
                "\"gpu\" there",
            )
        return None

    def edit(self, ctx: FileContext, original, new):
        if isinstance(original, cst.SimpleString):
            return ctx.expr_edit(original, new)
        return ctx.expr_edit(original.value, new.value)


def _gpu(string: cst.SimpleString) -> cst.SimpleString:
    return string.with_changes(value=f"{string.prefix}{string.quote}gpu{string.quote}")


def _literal_branches(value: cst.IfExp) -> list[cst.SimpleString] | None:
    """The string literals ``a if c else b`` (nested in either branch too) evaluates to, or None
    when a branch is something else."""
    literals: list[cst.SimpleString] = []
    stack: list[cst.BaseExpression] = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, cst.IfExp):
            stack += [v.body, v.orelse]
        elif isinstance(v, cst.SimpleString):
            literals.append(v)
        else:
            return None
    return literals


def _mixed_branches(value: cst.IfExp) -> bool:
    """Every branch of ``value`` is a string literal, and one is ``"mixed"``."""
    literals = _literal_branches(value)
    return literals is not None and any(lit.evaluated_value == "mixed" for lit in literals)


class _MixedToGpu(cst.CSTTransformer):
    """The ``"mixed"`` branches of a conditional expression become ``"gpu"`` (its test stays)."""

    def visit_IfExp(self, node: cst.IfExp) -> bool:
        return True

    def leave_IfExp(self, original: cst.IfExp, updated: cst.IfExp) -> cst.IfExp:
        body, orelse = self._leaf(updated.body), self._leaf(updated.orelse)
        return updated.with_changes(test=original.test, body=body, orelse=orelse)

    @staticmethod
    def _leaf(v: cst.BaseExpression) -> cst.BaseExpression:
        if isinstance(v, cst.SimpleString) and v.evaluated_value == "mixed":
            return _gpu(v)
        return v


def _literal_values(ctx: FileContext, name: cst.Name) -> list[cst.SimpleString] | None:
    """The string literals a local variable is assigned (directly or through ``a if c else b``),
    or None when any assignment is something else."""
    scope = ctx.scopes.get(name)
    if scope is None or name.value not in scope.assignments:
        return None
    literals: list[cst.SimpleString] = []
    for a in scope.assignments[name.value]:
        target = a.node
        assign = ctx.parents.get(ctx.parents.get(target))
        if (
            not isinstance(assign, cst.Assign)
            or len(assign.targets) != 1
            or assign.targets[0].target is not target
        ):
            return None
        stack = [assign.value]
        while stack:
            v = stack.pop()
            if isinstance(v, cst.IfExp):
                stack += [v.body, v.orelse]
            elif isinstance(v, cst.SimpleString):
                literals.append(v)
            else:
                return None
    return literals


def _device_literal(ctx: FileContext, original: cst.SimpleString, updated: cst.SimpleString):
    """``"mixed"`` assigned to a variable that is only ever a DALI ``device=`` argument (or
    compared with string literals other than ``"gpu"``), or compared with such a variable."""
    if original.evaluated_value != "mixed":
        return None
    cur = ctx.parents.get(original)
    while isinstance(cur, cst.IfExp):
        cur = ctx.parents.get(cur)
    if isinstance(cur, cst.ComparisonTarget):  # dev == "mixed"
        comparison = ctx.parents.get(cur)
        other = comparison.left if isinstance(comparison, cst.Comparison) else None
        target = _binding(ctx, other) if isinstance(other, cst.Name) else None
    elif (
        isinstance(cur, cst.Assign)
        and len(cur.targets) == 1
        and isinstance(cur.targets[0].target, cst.Name)
    ):
        target = cur.targets[0].target
    else:
        return None
    return _gpu(updated) if target is not None and _device_variable(ctx, target) else None


def _binding(ctx: FileContext, name: cst.Name) -> cst.Name | None:
    """The one assignment target a variable read refers to."""
    scope = ctx.scopes.get(name)
    accesses = (
        [a for a in scope.accesses[name.value] if a.node is name] if scope is not None else []
    )
    referents = [r for a in accesses for r in a.referents]
    node = referents[0].node if len(referents) == 1 else None
    return node if isinstance(node, cst.Name) else None


def _device_variable(ctx: FileContext, target: cst.Name) -> bool:
    """Every read of the variable ``target`` binds is a DALI ``device=`` argument, or a
    comparison with string literals other than ``"gpu"`` (which ``"mixed"`` -> ``"gpu"`` keeps)."""
    scope = ctx.scopes.get(target)
    if scope is None:
        return False
    uses = [
        r.node
        for a in scope.assignments[target.value]
        if a.node is target
        for r in in_source_order(ctx, a.references)
    ]
    return bool(uses) and all(_device_use(ctx, use) for use in uses)


def _device_use(ctx: FileContext, use: cst.CSTNode) -> bool:
    arg = ctx.parents.get(use)
    call = ctx.parents.get(arg)
    if isinstance(arg, cst.Arg) and arg.keyword is not None and arg.keyword.value == "device":
        return isinstance(call, cst.Call) and ctx.is_fn_ref(call.func)
    if isinstance(arg, cst.Comparison) and arg.left is use:
        others = [c.comparator for c in arg.comparisons]
        return all(isinstance(o, cst.SimpleString) and o.evaluated_value != "gpu" for o in others)
    return False


# -- joining DM101 and DM102 on one call ---------------------------------------------------------


def _join(state: FileState, nodes_of: dict[int, cst.CSTNode]) -> None:
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
        mixed = [
            a
            for a in devices
            if isinstance(a.value, cst.SimpleString)
            and a.value.evaluated_value == "mixed"
            or isinstance(a.value, cst.IfExp)
            and _mixed_branches(a.value)
        ]
        if devices and not mixed and _device_unknown(ctx, devices[0]):
            # a device variable that may hold "mixed" and cannot be rewritten: DM102 says so,
            # and the call stays pipeline mode with it
            state.fixes.remove(fix)
            line = ctx.line_of(devices[0])
            if not any(d.rule == "DM102" and d.line == line for d in state.diagnostics):
                state.diagnostics.append(
                    ctx.todo(
                        "DM101", node, "its device may be \"mixed\", which dynamic mode rejects"
                    )
                )
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
                ctx.todo(
                    "DM101",
                    node,
                    'migrate this call with its device="mixed" (rule DM102 is off here): dynamic '
                    'mode rejects "mixed"',
                )
            )
            continue
        state.fixes.remove(device)
        joined.add(id(device))
        state.fixes.append(
            ctx.make_fix(
                "DM101",
                node,
                [*fix.edits, *device.edits],
                f'{fix.message}, device="mixed" -> "gpu"',
                includes=("DM102",),
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
                ctx.todo(
                    "DM102",
                    node,
                    f"migrate {ctx.text(call.func)} to dynamic mode together with its device "
                    "(rule DM101)",
                )
            )


def _device_unknown(ctx: FileContext, arg: cst.Arg) -> bool:
    """DM102 cannot vouch for this ``device=`` value (it reports a TODO for it)."""
    return isinstance(MixedDevice().rewrite(ctx, arg, arg, LocalEnv()), Diagnostic)
