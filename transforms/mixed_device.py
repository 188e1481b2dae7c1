"""DM102 mixed-device: ``device="mixed"`` becomes ``device="gpu"``.

Before (``fixtures/DM102/decode_helpers.in.py``)::

    from nvidia.dali import fn


    def decode_gpu(jpegs):
        return fn.decoders.image(jpegs, device='mixed', hw_decoder_load=0.65)


    def decode_on(jpegs, device):
        return fn.decoders.image(jpegs, device=device)


    def not_dali(model):
        return model.to(device="mixed")  # dali is not involved here

After (``fixtures/DM102/decode_helpers.out.py``)::

    import nvidia.dali.experimental.dynamic as ndd


    def decode_gpu(jpegs):
        return ndd.decoders.image(jpegs, device='gpu', hw_decoder_load=0.65)


    def decode_on(jpegs, device):
        return ndd.decoders.image(jpegs, device="gpu" if device == "mixed" else device)


    def not_dali(model):
        return model.to(device="mixed")  # dali is not involved here

Dynamic mode rejects ``"mixed"`` (``ValueError: Invalid device type: mixed``); ``"gpu"`` selects
the same hybrid CPU/GPU decoding. A device held in a local variable is followed to its
assignments: when every one is a string literal, the ``"mixed"`` literals there are rewritten::

    decoder_device = "cpu" if dali_cpu else "mixed"      ->  ... else "gpu"
    images = fn.decoders.image(jpegs, device=decoder_device)

Only operators with a mixed backend (the decoders) accept ``"mixed"``, in pipeline mode too
(DALI registers no mixed implementation of any other operator, and building such a pipeline
fails): the ``device=`` of any other operator is never ``"mixed"`` where the old code runs, and
stays as it is whatever its expression. A decoder's device that the tool cannot resolve stays
as it is where an ``if`` around the call rules ``"mixed"`` out (``if dev == "cpu":``, the
``else`` of ``if dev == "mixed":``, ``if dev != "mixed":``, ``if dev in ("cpu", "gpu"):``,
in statements and conditional expressions, when the branch does not assign it); a name or
attribute is otherwise mapped where it is used, so its callers keep passing ``"mixed"``::

    images = fn.decoders.image(jpegs, device=self.device)
    images = ndd.decoders.image(jpegs, device="gpu" if self.device == "mixed" else self.device)

Any other decoder device expression (a call...) is reported, since the tool cannot see whether
it may be ``"mixed"``.

Safety: safe.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Diagnostic, Edit
from dali_migrate.rules import FileState

from ._cst import in_source_order, walk
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

    def rewrite(
        self,
        ctx: FileContext,
        original: cst.Arg | cst.SimpleString,
        updated: cst.Arg | cst.SimpleString,
        env: LocalEnv,
    ) -> cst.CSTNode | Diagnostic | None:
        if isinstance(original, cst.SimpleString):
            return _device_literal(ctx, original, cst.ensure_type(updated, cst.SimpleString))
        updated = cst.ensure_type(updated, cst.Arg)
        if original.keyword is None or original.keyword.value != "device":
            return None
        call = ctx.parents.get(original)
        if not isinstance(call, cst.Call) or not ctx.is_fn_ref(call.func):
            return None
        value = original.value
        if isinstance(value, cst.SimpleString):
            if value.evaluated_value != "mixed":
                return None
            return updated.with_changes(
                value=_gpu(cst.ensure_type(updated.value, cst.SimpleString))
            )
        if not _may_be_mixed(ctx, call):
            return None  # pipeline mode rejects "mixed" for it: the value is never "mixed"
        literals = _literal_values(ctx, value) if isinstance(value, cst.Name) else None
        if literals is not None:
            if all(
                lit.evaluated_value != "mixed" or _device_literal(ctx, lit, lit) is not None
                for lit in literals
            ):
                return None  # its "mixed" literals are rewritten where they are assigned
            # also used for something else (a comparison with "gpu"?): mapped where it is used
            return updated.with_changes(value=_mapped(value))
        resolved = _resolve(ctx, value)
        if resolved is _UNKNOWN:
            return ctx.todo(
                self.id,
                original,
                f"device={ctx.text(value)} may be \"mixed\", which dynamic mode rejects: use "
                "\"gpu\" there",
            )
        if resolved is None:
            return None
        return updated.with_changes(value=resolved)

    def edit(
        self,
        ctx: FileContext,
        original: cst.Arg | cst.SimpleString,
        new: cst.Arg | cst.SimpleString,
    ) -> Edit:
        if isinstance(original, cst.SimpleString):
            return ctx.expr_edit(original, new)
        return ctx.expr_edit(original.value, cst.ensure_type(new, cst.Arg).value)


def _gpu(string: cst.SimpleString) -> cst.SimpleString:
    return string.with_changes(value=f"{string.prefix}{string.quote}gpu{string.quote}")


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
        targets = _bindings(ctx, other) if isinstance(other, cst.Name) else []
    elif (
        isinstance(cur, cst.Assign)
        and len(cur.targets) == 1
        and isinstance(cur.targets[0].target, cst.Name)
    ):
        targets = [cur.targets[0].target]
    else:
        return None
    # every assignment the read may see has its "mixed" rewritten (``dev = "cpu"`` on one branch,
    # ``dev = "mixed"`` on the other): the comparison must follow, or it is never true again
    if targets and all(_device_variable(ctx, t) for t in targets):
        return _gpu(updated)
    return None


def _bindings(ctx: FileContext, name: cst.Name) -> list[cst.Name]:
    """The assignment targets a variable read may refer to ([] when any is not a plain name:
    a parameter, an import, a loop variable...)."""
    scope = ctx.scopes.get(name)
    accesses = (
        [a for a in scope.accesses[name.value] if a.node is name] if scope is not None else []
    )
    nodes = [r.node for a in accesses for r in a.referents]
    if not all(isinstance(n, cst.Name) for n in nodes):
        return []
    return [cst.ensure_type(n, cst.Name) for n in nodes]


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


# -- device expressions the tool cannot resolve ---------------------------------------------------


def _may_be_mixed(ctx: FileContext, call: cst.Call) -> bool:
    """The operator ``call`` makes accepts ``device="mixed"`` in pipeline mode: only operators
    with a mixed backend (the decoders) do; for any other, pipeline mode already rejects
    ``"mixed"`` (no mixed implementation is registered), so its device is never ``"mixed"``."""
    op = ctx.fn_op(call.func)
    return op is None or "mixed" in op.backends


#: a device expression the tool cannot see the values of
_UNKNOWN = cst.Name("_")


def _resolve(ctx: FileContext, value: cst.BaseExpression) -> cst.BaseExpression | None:
    """The device expression ``value`` becomes: None when it cannot be ``"mixed"`` (a literal
    other than ``"mixed"``, a reference an ``if`` around it narrows), ``"mixed"`` made
    ``"gpu"``, a name or attribute mapped (``"gpu" if d == "mixed" else d``), each branch of a
    conditional expression on its own; :data:`_UNKNOWN` for anything else (a call...)."""
    if isinstance(value, cst.SimpleString):
        return _gpu(value) if value.evaluated_value == "mixed" else None
    if isinstance(value, cst.IfExp):
        body, orelse = _resolve(ctx, value.body), _resolve(ctx, value.orelse)
        if body is _UNKNOWN or orelse is _UNKNOWN:
            return _UNKNOWN
        if body is None and orelse is None:
            return None
        return value.with_changes(
            body=value.body if body is None else _parenthesized(body),
            orelse=value.orelse if orelse is None else _parenthesized(orelse),
        )
    if _plain_reference(value):
        return None if _narrowed(ctx, value) else _mapped(value)
    return _UNKNOWN


def _parenthesized(expr: cst.BaseExpression) -> cst.BaseExpression:
    """A mapped branch inside a conditional expression, in parentheses to read as one."""
    if isinstance(expr, cst.IfExp) and not expr.lpar:
        return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return expr


def _plain_reference(value: cst.BaseExpression) -> bool:
    """A name or a chain of attributes of one (``dev``, ``self.device``, ``cfg.dali.device``):
    reading it twice gives the same value."""
    while isinstance(value, cst.Attribute):
        value = value.value
    return isinstance(value, cst.Name)


def _mapped(value: cst.BaseExpression) -> cst.IfExp:
    """``"gpu" if <value> == "mixed" else <value>``: the device an ndd operator takes for a
    pipeline-mode device that may be ``"mixed"``."""
    test = cst.Comparison(value, [cst.ComparisonTarget(cst.Equal(), cst.SimpleString('"mixed"'))])
    return cst.IfExp(test=test, body=cst.SimpleString('"gpu"'), orelse=value)


def _narrowed(ctx: FileContext, value: cst.BaseExpression) -> bool:
    """An ``if`` statement or conditional expression around ``value`` tests it against string
    literals so that it cannot be ``"mixed"`` there (``if dev == "cpu":``, the ``else`` of
    ``if dev == "mixed":``, ``if dev != "mixed":``...), and the branch does not assign it."""
    child: cst.CSTNode = value
    parent = ctx.parents.get(child)
    while parent is not None:
        if isinstance(parent, (cst.If, cst.IfExp)) and child is not parent.test:
            holds = child is parent.body
            if _excludes_mixed(parent.test, value, holds) and not _assigned_in(child, value):
                return True
        if isinstance(parent, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        child, parent = parent, ctx.parents.get(parent)
    return False


def _excludes_mixed(test: cst.BaseExpression, value: cst.BaseExpression, holds: bool) -> bool:
    """``test`` being ``holds`` (True or False) means ``value`` is not ``"mixed"``."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _excludes_mixed(test.expression, value, not holds)
    if isinstance(test, cst.BooleanOperation):
        # a and b true: both are; a or b false: both are
        if isinstance(test.operator, cst.And) == holds:
            return any(_excludes_mixed(t, value, holds) for t in (test.left, test.right))
        return False
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    if test.left.deep_equals(value):
        other = target.comparator
    elif target.comparator.deep_equals(value) and isinstance(
        target.operator, (cst.Equal, cst.NotEqual)
    ):
        other = test.left
    else:
        return False
    literals = _string_set(other, isinstance(target.operator, (cst.In, cst.NotIn)))
    if literals is None:
        return False
    if isinstance(target.operator, (cst.NotEqual, cst.NotIn)):
        holds = not holds
    elif not isinstance(target.operator, (cst.Equal, cst.In)):
        return False
    # holds: value is one of the literals; otherwise: it is none of them
    return "mixed" not in literals if holds else "mixed" in literals


def _string_set(node: cst.BaseExpression, container: bool) -> set[str] | None:
    """The strings a literal (``container``: a tuple, list or set of literals) stands for."""
    if not container:
        if isinstance(node, cst.SimpleString) and isinstance(node.evaluated_value, str):
            return {node.evaluated_value}
        return None
    if not isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        return None
    out: set[str] = set()
    for e in node.elements:
        one = _string_set(e.value, False) if isinstance(e, cst.Element) else None
        if one is None:
            return None
        out |= one
    return out


def _assigned_in(branch: cst.CSTNode, value: cst.BaseExpression) -> bool:
    """Something in ``branch`` may rebind ``value`` or what it is an attribute of (an assignment,
    a ``for``, ``with`` or walrus target, ``global``/``nonlocal``)."""
    prefixes = [value]
    while isinstance(prefixes[-1], cst.Attribute):
        prefixes.append(prefixes[-1].value)
    for node in walk(branch):
        if isinstance(node, (cst.Global, cst.Nonlocal)):
            return True
        if isinstance(node, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For)):
            target: cst.BaseExpression = node.target
        elif isinstance(node, cst.NamedExpr):
            target = node.target
        elif isinstance(node, cst.AsName):
            target = node.name
        else:
            continue
        if any(t.deep_equals(p) for t in _stored(target) for p in prefixes):
            return True
    return False


def _stored(target: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The names and attributes an assignment target binds (unpacking followed)."""
    if isinstance(target, (cst.Tuple, cst.List)):
        return [t for e in target.elements for t in _stored(e.value)]
    if isinstance(target, cst.StarredElement):
        return _stored(target.value)
    return [target]


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
        mixed = [a for a in devices if _device_rewritten(ctx, a)]
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
        if not isinstance(node, cst.Arg):
            continue
        call = ctx.parents.get(node)
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


def _device_rewritten(ctx: FileContext, arg: cst.Arg) -> bool:
    """DM102 rewrites this ``device=`` value (``"mixed"``, or a value that may be ``"mixed"``
    mapped to ``"gpu"``): the call runs in dynamic mode only with that rewrite."""
    return isinstance(MixedDevice().rewrite(ctx, arg, arg, LocalEnv()), cst.Arg)
