"""Pipeline definitions passed as values: ``run(pipe_fn)`` ... ``pipe = pipe_fn(...)``.

A reference to a ``@pipeline_def`` function that is not a call of it is followed to the calls
that run it (:class:`DefinitionValues`): through parameters of functions of the module (given
it as an argument, or as their default), loops over a list of definitions (``for f in [a, b]``,
``for f, n in itertools.product([a, b], ns)``), names bound once (``f = a``) and functions that
return one (``make = choose(...)``, where ``choose`` ends with ``return a``). Those calls make
pipelines as a direct call does and are rewritten the same way, when every value that can reach
them is a definition migrated with this one (its *peers*: they become generators called alike)
and each of those definitions takes the call's arguments. Reading ``f.__name__`` is fine.
Anything else done with the value (stored in a container, handed to code of another module)
cannot be followed: the reference keeps its TODO.

Before::

    def bench(pipe_fn, n):
        pipe = pipe_fn(batch_size=8, num_threads=2)
        for _ in range(n):
            pipe.run()

    for make in [pipe_a, pipe_b]:
        print(make.__name__)
        bench(make, 10)

After: ``ndd.set_num_threads(2)``, ``pipe = pipe_fn(batch_size=8)`` and ``next(pipe)`` in
``bench``; the loop is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import libcst as cst

from dali_migrate.context import FileContext

from .arguments import PIPELINE_ARGS
from .flow_sites import arguments_for, called_function, enclosing_function, parameter, references
from .model import FollowUp

#: attributes of a function that code may read without running it
FUNCTION_ATTRS = frozenset({"__name__", "__qualname__", "__doc__", "__module__"})

#: a binding that holds a definition: a parameter, or a name bound once
Holder = cst.Param | cst.Name

#: the ``@pipeline_def`` function (migrated with this one) that a name refers to, else None
DefinitionOf = Callable[[cst.CSTNode], "cst.CSTNode | None"]


@dataclass
class ValueCall:
    """A call that runs a definition passed as a value; ``defs``: every definition that may
    reach it (the one followed among them)."""

    call: cst.Call
    defs: list[cst.FunctionDef]


@dataclass
class Reach:
    """What following one reference found: the calls that run it, and the calls the tool
    cannot rewrite (a definition that may reach them does not take their arguments)."""

    calls: list[ValueCall] = field(default_factory=list)
    followups: list[FollowUp] = field(default_factory=list)


class DefinitionValues:
    """Follows references to the pipeline definitions ``definition_of`` names."""

    def __init__(self, ctx: FileContext, definition_of: DefinitionOf) -> None:
        self.ctx = ctx
        self.definition_of = definition_of

    def follow(self, ref: cst.CSTNode) -> Reach | None:
        """The calls the definition ``ref`` refers to reaches as a value; None where it goes
        somewhere the tool cannot follow."""
        calls: dict[int, cst.Call] = {}
        if not self._uses(ref, calls, set()):
            return None
        reach = Reach()
        for call in calls.values():
            assert isinstance(call.func, cst.Name)
            defs = self._resolved(call.func, set())
            if not defs:
                return None
            refusing = [d for d in defs if not _accepts(d, call)]
            if refusing:
                func = self.ctx.text(call.func)
                what = (
                    f"`{func}` may be `{refusing[0].name.value}` here, which does not take these "
                    f"arguments (pass only arguments that every definition given as `{func}` takes)"
                )
                advice = (
                    f"each of {', '.join(f'`{d.name.value}`' for d in defs)} returns a generator of "
                    "batches now, not a Pipeline: take each batch with next(...), and drop build()"
                )
                reach.followups.append(FollowUp(call, what, advice))
            else:
                reach.calls.append(ValueCall(call, defs))
        return reach

    # -- forward: where the value goes --------------------------------------------------------

    def _uses(self, expr: cst.CSTNode, calls: dict[int, cst.Call], seen: set[int]) -> bool:
        """Every use of the value ``expr`` holds is followed (its calls added to ``calls``)."""
        parent = self.ctx.parents.get(expr)
        if isinstance(parent, cst.Attribute) and parent.value is expr:
            return parent.attr.value in FUNCTION_ATTRS
        if isinstance(parent, cst.Call) and parent.func is expr and isinstance(expr, cst.Name):
            calls.setdefault(id(parent), parent)
            return True
        holders = self._holders(expr)
        if holders is None:
            return False
        for holder in holders:
            if id(holder) in seen:
                continue
            seen.add(id(holder))
            refs = _holder_refs(self.ctx, holder)
            if refs is None or not all(self._uses(r, calls, seen) for r in refs):
                return False
        return True

    def _holders(self, expr: cst.CSTNode) -> list[Holder] | None:
        """The bindings the value of ``expr`` goes to; None where it goes elsewhere."""
        ctx = self.ctx
        parent = ctx.parents.get(expr)
        if isinstance(parent, cst.Param) and parent.default is expr:
            return [parent] if _plain_function(ctx, parent) is not None else None
        if isinstance(parent, cst.Arg) and parent.value is expr:
            call = ctx.parents.get(parent)
            fn = _called(ctx, call)
            assert fn is None or isinstance(call, cst.Call)
            param = parameter(fn, call, parent) if fn is not None else None
            return [param] if param is not None else None
        if isinstance(parent, cst.Assign) and parent.value is expr and len(parent.targets) == 1:
            bound = parent.targets[0].target
            return [bound] if isinstance(bound, cst.Name) else None
        if isinstance(parent, cst.Element):
            target = _loop_target(ctx, parent)
            return [target] if target is not None else None
        if isinstance(parent, cst.Return) and parent.value is expr:
            return self._returned_to(parent)
        return None

    def _returned_to(self, ret: cst.Return) -> list[Holder] | None:
        """``return a`` in ``choose``: the names bound by ``f = choose(...)``, each call."""
        fn = enclosing_function(self.ctx, ret)
        if fn is None or fn.decorators:
            return None
        holders: list[Holder] = []
        for ref in references(self.ctx, fn):
            call = self.ctx.parents.get(ref)
            assign = self.ctx.parents.get(call)
            if not (
                isinstance(call, cst.Call)
                and call.func is ref
                and isinstance(assign, cst.Assign)
                and assign.value is call
                and len(assign.targets) == 1
                and isinstance(assign.targets[0].target, cst.Name)
            ):
                return None
            holders.append(assign.targets[0].target)
        return holders

    # -- backward: what may reach a call ------------------------------------------------------

    def _resolved(self, expr: cst.CSTNode, seen: set[int]) -> list[cst.FunctionDef] | None:
        """The definitions ``expr`` may evaluate to; None where it may be something else."""
        ctx = self.ctx
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name):
            fn = called_function(ctx, expr.func)
            if fn is None or fn.decorators:
                return None
            returns = list(_returns(ctx, fn))
            if not returns or any(r.value is None for r in returns):
                return None
            return self._all([r.value for r in returns if r.value is not None], seen)
        if not isinstance(expr, cst.Name):
            return None
        definition = self.definition_of(expr)
        if isinstance(definition, cst.FunctionDef):
            return [definition]
        binding = _binding(ctx, expr)
        if binding is None or id(binding) in seen:
            return [] if binding is not None else None
        seen.add(id(binding))
        return self._all(self._reaching(binding), seen)

    def _all(self, exprs: list[cst.CSTNode] | None, seen: set[int]) -> list[cst.FunctionDef] | None:
        if exprs is None:
            return None
        out: dict[int, cst.FunctionDef] = {}
        for e in exprs:
            defs = self._resolved(e, seen)
            if defs is None:
                return None
            out.update((id(d), d) for d in defs)
        return list(out.values())

    def _reaching(self, holder: cst.CSTNode) -> list[cst.CSTNode] | None:
        """The expressions whose values the binding ``holder`` may take."""
        ctx = self.ctx
        if isinstance(holder, cst.Param):
            fn = _plain_function(ctx, holder)
            if fn is None:
                return None
            passed = arguments_for(ctx, fn, fn, holder)
            if any(
                p is None and not _omits(ctx, r, fn, holder) for p, r in _paired(ctx, fn, passed)
            ):
                return None
            values: list[cst.CSTNode] = [p for p in passed if p is not None]
            if holder.default is not None:  # callers that pass nothing, or outside the module
                values.append(holder.default)
            return values
        if not isinstance(holder, cst.Name):
            return None
        parent = ctx.parents.get(holder)
        if isinstance(parent, cst.AssignTarget):
            assign = ctx.parents.get(parent)
            return [assign.value] if isinstance(assign, cst.Assign) else None
        return _loop_values(ctx, holder)


# -- helpers --------------------------------------------------------------------------------------


def _accepts(fn: cst.FunctionDef, call: cst.Call) -> bool:
    """``fn`` (a pipeline definition) takes the arguments of ``call``: no more positional ones
    than its parameters, and keywords that name one of them or a pipeline argument."""
    p = fn.params
    if any(a.star for a in call.args):
        return False
    names = {x.name.value for x in [*p.posonly_params, *p.params, *p.kwonly_params]}
    positional = sum(a.keyword is None for a in call.args)
    if positional > len(p.posonly_params) + len(p.params) and not isinstance(p.star_arg, cst.Param):
        return False
    return isinstance(p.star_kwarg, cst.Param) or all(
        a.keyword.value in names | PIPELINE_ARGS for a in call.args if a.keyword is not None
    )


def _called(ctx: FileContext, call: cst.CSTNode | None) -> cst.FunctionDef | None:
    """The undecorated function of the module ``call`` calls (its parameters are followed)."""
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Name)):
        return None
    fn = called_function(ctx, call.func)
    return fn if fn is not None and not fn.decorators else None


def _plain_function(ctx: FileContext, param: cst.Param) -> cst.FunctionDef | None:
    """The undecorated function (not a method) whose plain parameter ``param`` is."""
    params = ctx.parents.get(param)
    fn = ctx.parents.get(params)
    if (
        not isinstance(fn, cst.FunctionDef)
        or fn.decorators
        or not isinstance(params, cst.Parameters)
        or isinstance(ctx.parents.get(ctx.parents.get(fn)), cst.ClassDef)
    ):
        return None
    return fn if any(param is x for x in [*params.params, *params.kwonly_params]) else None


def _paired(
    ctx: FileContext, fn: cst.FunctionDef, passed: list[cst.CSTNode | None]
) -> Iterator[tuple[cst.CSTNode | None, cst.CSTNode]]:
    """Each reference of ``fn`` with what it passes (``arguments_for`` keeps their order)."""
    return zip(passed, references(ctx, fn))


def _omits(ctx: FileContext, ref: cst.CSTNode, fn: cst.FunctionDef, param: cst.Param) -> bool:
    """``ref`` is a plain call of ``fn`` that leaves ``param`` to its default."""
    call = ctx.parents.get(ref)
    return (
        isinstance(call, cst.Call)
        and call.func is ref
        and param.default is not None
        and not any(a.star for a in call.args)
    )


def _binding(ctx: FileContext, name: cst.Name) -> cst.CSTNode | None:
    """The one binding (a parameter or a name) that the read ``name`` refers to."""
    scope = ctx.scopes.get(name)
    if scope is None:
        return None
    referents = [
        a for access in scope.accesses[name.value] if access.node is name for a in access.referents
    ]
    node = getattr(referents[0], "node", None) if len(referents) == 1 else None
    return node if isinstance(node, (cst.Param, cst.Name)) else None


def _holder_refs(ctx: FileContext, holder: Holder) -> list[cst.CSTNode] | None:
    """The reads of the binding ``holder``; None where its name is bound more than once."""
    name = holder.name if isinstance(holder, cst.Param) else holder
    scope = ctx.scopes.get(name)
    if scope is None:
        return None
    bindings = list(scope.assignments[name.value])
    if len(bindings) != 1 or bindings[0].node is not holder:
        return None
    return [r.node for r in bindings[0].references]


def _returns(ctx: FileContext, fn: cst.FunctionDef) -> Iterator[cst.Return]:
    """The ``return`` statements of ``fn`` itself (not of functions nested in it)."""
    for ret in ctx.nodes_of(cst.Return):
        if enclosing_function(ctx, ret) is fn:
            yield ret


def _is_product(ctx: FileContext, func: cst.BaseExpression) -> bool:
    """``func`` is ``itertools.product`` (or ``product`` imported from it)."""
    if isinstance(func, cst.Attribute):
        return (
            isinstance(func.value, cst.Name)
            and func.value.value == "itertools"
            and func.attr.value == "product"
        )
    if not isinstance(func, cst.Name) or func.value != "product":
        return False
    scope = ctx.scopes.get(func)
    referents = (
        [a for access in scope.accesses["product"] if access.node is func for a in access.referents]
        if scope is not None
        else []
    )
    node = getattr(referents[0], "node", None) if len(referents) == 1 else None
    return (
        isinstance(node, cst.ImportFrom)
        and isinstance(node.module, cst.Name)
        and node.module.value == "itertools"
        and isinstance(node.names, (list, tuple))
        and any(a.name.value == "product" and a.asname is None for a in node.names)
    )


def _loop(ctx: FileContext, element: cst.Element) -> tuple[cst.CSTNode, int | None] | None:
    """For an element of a list (or tuple) literal that a ``for`` iterates directly, or as
    argument ``k`` of ``itertools.product(...)``: the loop and ``k`` (None when direct)."""
    seq = ctx.parents.get(element)
    if not isinstance(seq, (cst.List, cst.Tuple)):
        return None
    holder = ctx.parents.get(seq)
    if isinstance(holder, (cst.For, cst.CompFor)) and holder.iter is seq:
        return holder, None
    call = ctx.parents.get(holder)
    loop = ctx.parents.get(call)
    if (
        isinstance(holder, cst.Arg)
        and holder.keyword is None
        and not holder.star
        and isinstance(call, cst.Call)
        and _is_product(ctx, call.func)
        and not any(a.keyword is not None or a.star for a in call.args)
        and isinstance(loop, (cst.For, cst.CompFor))
        and loop.iter is call
    ):
        return loop, [a is holder for a in call.args].index(True)
    return None


def _loop_target(ctx: FileContext, element: cst.Element) -> cst.Name | None:
    """The name the loop over ``element``'s list binds to it."""
    found = _loop(ctx, element)
    if found is None:
        return None
    loop, k = found
    assert isinstance(loop, (cst.For, cst.CompFor))
    target = loop.target
    if k is None:
        return target if isinstance(target, cst.Name) else None
    call = loop.iter
    assert isinstance(call, cst.Call)
    if not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) != len(call.args):
        return None
    name = target.elements[k].value
    return name if isinstance(name, cst.Name) else None


def _loop_values(ctx: FileContext, name: cst.Name) -> list[cst.CSTNode] | None:
    """What the ``for`` target ``name`` takes: the elements of the list it iterates (directly,
    or the ``k``-th list given to ``itertools.product``)."""
    parent = ctx.parents.get(name)
    if isinstance(parent, cst.Element):
        parent = ctx.parents.get(ctx.parents.get(parent))  # for a, b in product(...)
        call = parent.iter if isinstance(parent, (cst.For, cst.CompFor)) else None
        if not isinstance(call, cst.Call) or not _is_product(ctx, call.func):
            return None
        target = parent.target
        assert isinstance(target, (cst.Tuple, cst.List))
        k = [e.value is name for e in target.elements].index(True)
        seq = call.args[k].value if k < len(call.args) else None
    elif isinstance(parent, (cst.For, cst.CompFor)) and parent.target is name:
        seq = parent.iter
    else:
        return None
    if not isinstance(seq, (cst.List, cst.Tuple)) or any(
        isinstance(e, cst.StarredElement) for e in seq.elements
    ):
        return None
    return [e.value for e in seq.elements]
