"""Where code hands an object on, for ``Flow``: the functions and methods a call reaches, what
each of their calls passes to a parameter, the call a name was bound to, the name an unpacking
assignment binds.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import children, sole_assignment, within
from .model import Relay


def enclosing_function(ctx: FileContext, node: cst.CSTNode) -> cst.FunctionDef | None:
    cur = ctx.parents.get(node)
    while cur is not None and not isinstance(cur, cst.FunctionDef):
        if isinstance(cur, (cst.ClassDef, cst.Lambda)):
            return None
        cur = ctx.parents.get(cur)
    return cur


def enclosing_class(ctx: FileContext, node: cst.CSTNode) -> cst.ClassDef | None:
    cur = ctx.parents.get(node)
    while cur is not None and not isinstance(cur, cst.ClassDef):
        cur = ctx.parents.get(cur)
    return cur


def self_attribute(ctx: FileContext, node: cst.CSTNode) -> str | None:
    """``self.x`` where ``self`` is the first parameter of the enclosing method: ``x``."""
    if not (isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name)):
        return None
    fn = enclosing_function(ctx, node)
    while fn is not None and not isinstance(ctx.parents.get(ctx.parents.get(fn)), cst.ClassDef):
        fn = enclosing_function(ctx, fn)
    if fn is None or not fn.params.params or fn.params.params[0].name.value != node.value.value:
        return None
    return node.attr.value


def parameter(fn: cst.FunctionDef, call: cst.Call, arg: cst.Arg, skip: int = 0) -> cst.Param | None:
    """The parameter of ``fn`` that ``arg`` of ``call`` binds (plain parameters only; the first
    ``skip`` of them are not the call's: ``self`` of ``__init__``)."""
    params = list(fn.params.params)[skip:]
    if arg.keyword is not None:
        return next(
            (p for p in [*params, *fn.params.kwonly_params] if p.name.value == arg.keyword.value),
            None,
        )
    if arg.star:
        return None
    index = [a for a in call.args if a.keyword is None].index(arg)
    return params[index] if index < len(params) else None


def references(ctx: FileContext, fn: cst.FunctionDef | cst.ClassDef) -> list[cst.CSTNode]:
    """References to a function of the module (its name) or a method (``self.name`` in its
    class, and ``.name`` anywhere else)."""
    cls = enclosing_class(ctx, fn)
    if cls is not None and ctx.parents.get(ctx.parents.get(fn)) is cls:
        refs = [n for n in ctx.nodes_of(cst.Attribute) if n.attr.value == fn.name.value]
        return [n for n in refs if not within(ctx, n, cls) or self_attribute(ctx, n) is not None]
    scope = ctx.scopes.get(fn)
    if scope is None:
        return []
    return [r.node for a in scope.assignments[fn.name.value] if a.node is fn for r in a.references]


def called_function(ctx: FileContext, name: cst.Name) -> cst.FunctionDef | None:
    """The function ``name`` calls, where it is a ``def`` of the module or of an enclosing
    function bound once."""
    scope = ctx.scopes.get(name)
    if scope is None:
        return None
    bindings = [
        a for access in scope.accesses[name.value] if access.node is name for a in access.referents
    ]
    node = getattr(bindings[0], "node", None) if len(bindings) == 1 else None
    return node if isinstance(node, cst.FunctionDef) else None


def called_code(
    ctx: FileContext, name: cst.Name
) -> tuple[cst.FunctionDef | cst.ClassDef, cst.FunctionDef] | None:
    """What ``name(...)`` runs with its arguments: a function of the module (or of an enclosing
    function) bound once, twice in the result; or a class of the module and its ``__init__``."""
    fn = called_function(ctx, name)
    if fn is not None:
        return fn, fn
    scope = ctx.scopes.get(name)
    bindings = (
        [
            a
            for access in scope.accesses[name.value]
            if access.node is name
            for a in access.referents
        ]
        if scope is not None
        else []
    )
    cls = getattr(bindings[0], "node", None) if len(bindings) == 1 else None
    if not isinstance(cls, cst.ClassDef) or enclosing_class(ctx, cls) is not None:
        return None
    init = [
        s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"
    ]
    return (cls, init[0]) if len(init) == 1 and not init[0].decorators else None


def arguments_for(
    ctx: FileContext, owner: cst.FunctionDef | cst.ClassDef, fn: cst.FunctionDef, param: cst.Param
) -> list[cst.CSTNode | None]:
    """What each reference of ``owner`` (a function ``fn``, or the class whose ``__init__`` is
    ``fn``) passes to ``param``: None for a reference that is not a plain call, or a call that
    passes nothing there (it is then used in ways not seen)."""
    skip = 1 if owner is not fn else 0
    passed: list[cst.CSTNode | None] = []
    for ref in references(ctx, owner):
        call = ctx.parents.get(ref)
        if not isinstance(call, cst.Call) or call.func is not ref or within(ctx, ref, owner):
            passed.append(None)
            continue
        args = [a for a in call.args if parameter(fn, call, a, skip) is param]
        passed.append(args[0].value if len(args) == 1 and not args[0].star else None)
    return passed


def made_by(ctx: FileContext, expr: cst.CSTNode) -> cst.CSTNode | None:
    """The call that made the value of ``expr``: ``expr`` itself, or for a name bound once by
    ``name = <call>``, that call."""
    if isinstance(expr, cst.Call):
        return expr
    if not isinstance(expr, cst.Name):
        return None
    scope = ctx.scopes.get(expr)
    if scope is None:
        return None
    bindings = [
        a for access in scope.accesses[expr.value] if access.node is expr for a in access.referents
    ]
    if len(bindings) != 1:
        return None
    target = ctx.parents.get(getattr(bindings[0], "node", None))
    assign = ctx.parents.get(target) if isinstance(target, cst.AssignTarget) else None
    if isinstance(assign, cst.Assign) and len(assign.targets) == 1:
        return assign.value if isinstance(assign.value, cst.Call) else None
    return None


def unpacked_target(ctx: FileContext, value: cst.CSTNode, size: int, index: int) -> cst.Name | None:
    """In ``a, b = <value>`` (``size`` names, no starred one), the name at ``index``."""
    assign = ctx.parents.get(value)
    if not (isinstance(assign, cst.Assign) and assign.value is value and len(assign.targets) == 1):
        return None
    target = assign.targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) != size:
        return None
    if any(isinstance(e, cst.StarredElement) for e in target.elements):
        return None
    name = target.elements[index].value
    return name if isinstance(name, cst.Name) else None


def stored_only(ctx: FileContext, init: cst.FunctionDef, param: cst.Param) -> bool:
    """Every read of ``param`` in ``init`` (an ``__init__``) is ``self.<attr> = param``."""
    scope = ctx.scopes.get(param.name)
    if scope is None:
        return False
    refs = [
        r.node for a in scope.assignments[param.name.value] if a.node is param for r in a.references
    ]
    for ref in refs:
        assign = ctx.parents.get(ref)
        if not (
            isinstance(assign, cst.Assign)
            and assign.value is ref
            and len(assign.targets) == 1
            and self_attribute(ctx, assign.targets[0].target) is not None
        ):
            return False
    return bool(refs)


def relay_of(ctx: FileContext, ret: cst.Return) -> Relay | None:
    """``return pipe``, the last statement of a function that returns nothing else and yields
    nothing, whose every reference is a call ``name = make(...)``, a statement of its own,
    outside it: a :class:`~.model.Relay` (the caller checks that the function made ``pipe``
    rather than was handed it); else None."""
    fn = enclosing_function(ctx, ret)
    line = ctx.parents.get(ret)
    if (
        fn is None
        or not isinstance(fn.body, cst.IndentedBlock)
        or fn.body.body[-1] is not line
        or len(cst.ensure_type(line, cst.SimpleStatementLine).body) > 1
        or _exits(fn) != [ret]
    ):
        return None
    callers: list[cst.Assign] = []
    for ref in references(ctx, fn):
        call = ctx.parents.get(ref)
        assign = sole_assignment(ctx, call) if isinstance(call, cst.Call) else None
        if assign is None or call.func is not ref or within(ctx, ref, fn):
            return None
        callers.append(assign)
    return Relay(ret, callers) if callers else None


def _exits(fn: cst.FunctionDef) -> list[cst.CSTNode]:
    """The ``return`` and ``yield`` nodes of ``fn`` (not of the functions inside it)."""
    found: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = list(children(fn.body))
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.Return, cst.Yield)):
            found.append(node)
        if not isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            stack.extend(children(node))
    return found
