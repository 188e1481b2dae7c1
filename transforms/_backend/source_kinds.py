"""What kind of source an ``fn.external_source`` is given, as far as the file shows it (the
kinds of ``SourceUse.kind``, before ``batch=False`` turns them per sample):

- ``call0``/``call1``: a function (or an object whose class defines ``__call__``) that pipeline
  mode calls with no argument, or with the iteration number when it takes one (DALI counts every
  parameter, defaults included, and rejects ``*args``, ``**kwargs`` and keyword-only ones);
  also ``make()`` where every ``return`` of ``make`` gives a function defined in it;
- ``iterable``: a list or tuple, ``gen()`` of a generator function, an object whose class
  defines ``__iter__``, ``iter(x)``;
- a parameter's annotation (``Iterable[...]``, ``Callable[[], T]``, ``Callable[[int], T]``, a
  class of the file) declares one of those;
- None: not visible (the caller decides what to do with it).

Names are followed to their single binding: a module-level ``def``, ``class`` or assignment, or
a local one in the function that builds the pipeline (``x = iter(x)`` over a parameter too).
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.cst_walk import children, walk

from .flow_sites import enclosing_class, self_attribute


def is_generator_function(ctx: FileContext, name: cst.Name) -> bool:
    """``name`` binds a function of the file that yields (pipeline mode calls it for its
    generator)."""
    definition = _definition(ctx, name)
    return isinstance(definition, cst.FunctionDef) and _yields(definition)


def source_kind(ctx: FileContext, expr: cst.BaseExpression) -> tuple[str | None, bool]:
    """The kind of source ``expr`` is (``call0``, ``call1``, ``iterable``; None where the file
    does not show it), and whether it may end the data with StopIteration."""
    if isinstance(expr, (cst.List, cst.Tuple)):
        return "iterable", False
    stored = _stored_in_self(ctx, expr)
    if stored is not None:  # self.dataset, set once in the class: what it is set to
        return source_kind(ctx, stored)
    made = isinstance(expr, cst.Call)
    name = expr.func if isinstance(expr, cst.Call) else expr
    if not isinstance(name, cst.Name):
        return None, False
    definition = _definition(ctx, name)
    if isinstance(definition, cst.FunctionDef):
        if _yields(definition):
            return (
                ("iterable", False) if made else (None, False)
            )  # gen() is iterable; gen itself too, not handled
        if made:
            return _made_function(ctx, definition)
        return _arity(definition.params, 0, "StopIteration" in ctx.text(definition))
    if isinstance(definition, cst.ClassDef) and not made and definition.name.value != name.value:
        made = True  # eii = Batches(...) then source=eii: an object of the class
    if isinstance(definition, cst.ClassDef) and made:
        methods = {m.name.value: m for m in definition.body.body if isinstance(m, cst.FunctionDef)}
        if "__iter__" in methods:
            return "iterable", False
        call = methods.get("__call__")
        if call is not None:
            return _arity(call.params, 1, "StopIteration" in ctx.text(call))
        return None, False
    if isinstance(definition, cst.Assign) and not made:
        return source_kind(ctx, definition.value)
    if isinstance(definition, cst.Param) and not made and definition.annotation is not None:
        return _annotated(ctx, definition.annotation.annotation)
    if made and name.value == "iter" and definition is None:
        return "iterable", False  # iter(x): an iterator, which DALI iterates
    return None, False


def _stored_in_self(ctx: FileContext, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``self.<attr>`` where the methods of the class around it set ``self.<attr> = value``
    once, and nothing else binds it: the value."""
    attr = self_attribute(ctx, expr)
    cls = enclosing_class(ctx, expr) if attr is not None else None
    if cls is None:
        return None
    values = []
    for node in walk(cls):
        targets: list[cst.BaseExpression] = []
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets]
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):
            targets = [node.target]
        for t in targets:
            for n in walk(t):
                if isinstance(n, cst.Attribute) and self_attribute(ctx, n) == attr:
                    values.append(node.value if isinstance(node, cst.Assign) and t is n else None)
    return values[0] if len(values) == 1 else None


def _made_function(ctx: FileContext, factory: cst.FunctionDef) -> tuple[str | None, bool]:
    """``make_reader(...)`` whose every ``return`` gives a function defined in it: that
    function's kind."""
    nested = {s.name.value: s for s in factory.body.body if isinstance(s, cst.FunctionDef)}
    returns = [n for n in _walk_own(factory) if isinstance(n, cst.Return)]
    names = {r.value.value if isinstance(r.value, cst.Name) else "" for r in returns}
    name = names.pop() if len(names) == 1 else ""
    if name not in nested:
        return None, False
    fn = nested[name]
    if _yields(fn):
        return None, False
    return _arity(fn.params, 0, "StopIteration" in ctx.text(fn))


def _walk_own(fn: cst.FunctionDef) -> list[cst.CSTNode]:
    """The nodes of ``fn``'s body outside the functions and classes it defines."""
    out, stack = [], list(children(fn.body))
    while stack:
        n = stack.pop()
        out.append(n)
        if not isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            stack.extend(children(n))
    return out


#: annotations of objects DALI iterates (it tries iter() first)
_ITERABLES = {"Iterable", "Iterator", "Generator", "Sequence", "list", "List", "tuple", "Tuple"}


def _annotated(ctx: FileContext, annotation: cst.BaseExpression) -> tuple[str | None, bool]:
    """The kind of source a parameter's annotation declares: an iterable (``Iterable[...]``,
    ``Iterator``, ``list``...), a callable of 0 or 1 parameters (``Callable[[], T]``,
    ``Callable[[int], T]``, T not an iterator: a generator function is iterated), or an
    object of a class defined in the file."""
    head = annotation.value if isinstance(annotation, cst.Subscript) else annotation
    last = None
    if isinstance(head, (cst.Attribute, cst.Name)):
        last = head.attr.value if isinstance(head, cst.Attribute) else head.value
    if last in _ITERABLES:
        return "iterable", False
    if last == "Callable" and isinstance(annotation, cst.Subscript) and len(annotation.slice) == 2:
        params, result = (e.slice for e in annotation.slice)
        if not isinstance(params, cst.Index) or not isinstance(params.value, cst.List):
            return None, False
        returned = ctx.text(result) if isinstance(result, cst.Index) else ""
        if any(word in returned for word in ("Iter", "Generator")):
            return None, False
        # its body is not visible: it may end the data with StopIteration, as DALI lets it
        arity = len(params.value.elements)
        return {0: ("call0", True), 1: ("call1", True)}.get(arity, (None, False))
    if isinstance(head, cst.Name) and head is annotation:
        definition = _definition(ctx, head)
        if isinstance(definition, cst.ClassDef):
            return source_kind(ctx, cst.Call(head))
    return None, False


def _arity(params: cst.Parameters, implicit: int, stops: bool) -> tuple[str | None, bool]:
    """Pipeline mode calls a source with no argument, or with the iteration number (the sample
    info with batch=False) when it has one parameter, defaults included (DALI 2.4 counts every
    parameter, ``accepted_arg_count``, and rejects ``*args``, ``**kwargs`` and keyword-only ones)."""
    if (
        isinstance(params.star_arg, (cst.Param, cst.ParamStar))
        or params.star_kwarg is not None
        or params.kwonly_params
    ):
        return None, False
    count = len(params.posonly_params) + len(params.params) - implicit
    return {0: ("call0", stops), 1: ("call1", stops)}.get(count, (None, False))


def _definition(ctx: FileContext, name: cst.Name) -> cst.CSTNode | None:
    """The module-level ``def``/``class`` or single assignment that binds ``name`` (top-level
    definitions only: scope metadata covers only the DALI-related part of the module)."""
    found: list[cst.CSTNode] = []
    for stmt in ctx.module.body:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) and stmt.name.value == name.value:
            found.append(stmt)
        elif isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Assign) and any(
                    isinstance(t.target, cst.Name) and t.target.value == name.value
                    for t in small.targets
                ):
                    found.append(small)
    if not found:
        found = _local_binding(ctx, name)
    if len(found) != 1:
        return None
    node = found[0]
    if (
        isinstance(node, cst.Assign)
        and isinstance(node.value, cst.Call)
        and isinstance(node.value.func, cst.Name)
    ):
        cls = _definition(ctx, node.value.func)
        return cls if isinstance(cls, cst.ClassDef) else node
    return node


def _local_binding(ctx: FileContext, name: cst.Name) -> list[cst.CSTNode]:
    """The single assignment of a local ``name`` in its scope (``eii = Batches(files)`` in the
    function that builds the pipeline), as :func:`_definition` finds module-level ones."""
    scope = ctx.scopes.get(name)
    if scope is None:
        return []
    bindings = list(scope[name.value])  # bindings of enclosing functions too
    if not all(hasattr(b, "node") for b in bindings):
        return []  # a builtin
    if len(bindings) == 2:
        bindings = _rebound_parameter(ctx, name, bindings)
    defined = (cst.FunctionDef, cst.ClassDef, cst.Param)
    if len(bindings) == 1 and isinstance(bindings[0].node, defined):
        return [bindings[0].node]  # a def, class or parameter of an enclosing function
    target = ctx.parents.get(bindings[0].node) if len(bindings) == 1 else None
    assign = ctx.parents.get(target) if isinstance(target, cst.AssignTarget) else None
    return [assign] if isinstance(assign, cst.Assign) and len(assign.targets) == 1 else []


def _rebound_parameter(ctx: FileContext, use: cst.Name, bindings: list) -> list:
    """``x = iter(x)`` at the top of the function whose parameter ``x`` is: the one binding the
    source sees when that statement comes before the statement that uses it."""
    param, other = sorted(bindings, key=lambda b: not isinstance(b.node, cst.Param))
    if not isinstance(param.node, cst.Param) or isinstance(other.node, cst.Param):
        return bindings
    fn = ctx.parents.get(ctx.parents.get(param.node))
    target = ctx.parents.get(other.node)
    assign = ctx.parents.get(target) if isinstance(target, cst.AssignTarget) else None
    line = ctx.parents.get(assign) if isinstance(assign, cst.Assign) else None
    if not isinstance(fn, cst.FunctionDef) or not isinstance(line, cst.SimpleStatementLine):
        return bindings
    body = list(fn.body.body)
    stmt = use
    while stmt is not None and stmt not in body:
        stmt = ctx.parents.get(stmt)
    if line in body and stmt is not None and body.index(line) < body.index(stmt):
        return [other]
    return bindings


def _yields(fn: cst.FunctionDef) -> bool:
    stack = list(children(fn.body))
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Yield):
            return True
        if not isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            stack.extend(children(n))
    return False
