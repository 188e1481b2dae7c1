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

from .._cst import int_index
from .arguments import PIPELINE_ARGS
from .flow_sites import arguments_for, called_function, enclosing_function, parameter, references
from .model import FollowUp

#: attributes of a function that code may read without running it
FUNCTION_ATTRS = frozenset({"__name__", "__qualname__", "__doc__", "__module__"})

#: a binding that holds a definition: a parameter, or a name bound once
Holder = cst.Param | cst.Name

#: where a definition lies in a value: the indices into nested lists (``()``: the value is it)
Path = tuple[int, ...]
#: in a path, an element a loop takes (any index)
ANY = -1

#: the ``@pipeline_def`` function (migrated with this one) that a name refers to, else None
DefinitionOf = Callable[[cst.CSTNode], "cst.CSTNode | None"]


@dataclass
class ValueCall:
    """A call that runs a definition passed as a value; ``defs``: every definition that may
    reach it (the one followed among them)."""

    call: cst.Call
    defs: list[cst.FunctionDef]
    #: the definitions reach it through a parameter of a function (which code of another module
    #: may call with something else)
    via_param: bool = False


@dataclass
class Reach:
    """What following one reference found: the calls that run it, and the calls the tool
    cannot rewrite (a definition that may reach them does not take their arguments)."""

    calls: list[ValueCall] = field(default_factory=list)
    followups: list[FollowUp] = field(default_factory=list)


class DefinitionValues:
    """Follows references to the pipeline definitions ``definition_of`` names.

    A value is followed with a *path*: where the definition lies inside it (``()``: the value
    is the definition; ``(0,)``: it is element 0 of a list; ``ANY``: an element a loop takes,
    any of them), so that ``kinds = [[a, (0, 1)]]``, ``for kind in kinds: make, span = kind``
    is followed to ``make``."""

    def __init__(self, ctx: FileContext, definition_of: DefinitionOf) -> None:
        self.ctx = ctx
        self.definition_of = definition_of
        #: the value resolved last went through a function's parameter
        self.via_param = False

    def follow(self, ref: cst.CSTNode) -> Reach | None:
        """The calls the definition ``ref`` refers to reaches as a value; None where it goes
        somewhere the tool cannot follow."""
        calls: dict[int, cst.Call] = {}
        if not self._uses(ref, (), calls, set()):
            return None
        reach = Reach()
        for call in calls.values():
            self.via_param = False
            defs = self._resolved(call.func, (), set())
            if not defs:
                return None
            refusing = [d for d in defs if not _accepts(d, call)]
            if refusing:
                func = self.ctx.text(call.func)
                what = (
                    f"`{func}` may be `{refusing[0].name.value}` here, which does not take "
                    f"{_refused(refusing[0], call)} (pass only arguments that every definition "
                    f"given as `{func}` takes)"
                )
                advice = (
                    f"each of {', '.join(f'`{d.name.value}`' for d in defs)} returns a generator of "
                    "batches now, not a Pipeline: take each batch with next(...), and drop build()"
                )
                reach.followups.append(FollowUp(call, what, advice))
            else:
                reach.calls.append(ValueCall(call, defs, self.via_param))
        return reach

    # -- forward: where the value goes --------------------------------------------------------

    def _uses(
        self, expr: cst.CSTNode, path: Path, calls: dict[int, cst.Call], seen: set[object]
    ) -> bool:
        """Every use of the value of ``expr`` (the definition at ``path`` in it) is followed;
        the calls of the definition are added to ``calls``."""
        ctx = self.ctx
        parent = ctx.parents.get(expr)
        if not path and isinstance(parent, cst.Attribute) and parent.value is expr:
            return parent.attr.value in FUNCTION_ATTRS
        if not path and isinstance(parent, cst.Call) and parent.func is expr:
            if isinstance(expr, cst.Name):
                calls.setdefault(id(parent), parent)
            return isinstance(expr, cst.Name)
        if isinstance(parent, cst.Element):  # [a, b]: the list holds it at that index
            seq = ctx.parents.get(parent)
            index = _index(seq, parent)
            return index is not None and self._uses(seq, (index, *path), calls, seen)
        if path and isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is expr:
            return self._bound(parent.target, path[1:], calls, seen)
        if path and isinstance(parent, cst.Subscript) and parent.value is expr:
            key = int_index(parent)
            if not isinstance(key, cst.Integer):
                return False
            number = int(key.value, 0)
            return number != path[0] != ANY or self._uses(parent, path[1:], calls, seen)
        if path and isinstance(parent, cst.Arg):
            call = ctx.parents.get(parent)
            k = _product_arg(ctx, call, parent)
            if k is not None:  # product([a, b], ...): tuples whose element k is one of them
                return self._uses(call, (ANY, k, *path[1:]), calls, seen)
            if _is_len(ctx, call):
                return True
        if isinstance(parent, cst.Assign) and parent.value is expr and len(parent.targets) == 1:
            return self._bound(parent.targets[0].target, path, calls, seen)
        holders = self._holders(expr)
        return holders is not None and all(self._held(h, path, calls, seen) for h in holders)

    def _bound(
        self, target: cst.CSTNode, path: Path, calls: dict[int, cst.Call], seen: set[object]
    ) -> bool:
        """``target = <value>`` (or a ``for`` target): a name, or names unpacked from it."""
        if isinstance(target, cst.Name):
            return self._held(target, path, calls, seen)
        if not path or not isinstance(target, (cst.Tuple, cst.List)):
            return False
        if any(isinstance(e, cst.StarredElement) for e in target.elements):
            return False
        taken = target.elements if path[0] == ANY else target.elements[path[0] : path[0] + 1]
        if not taken:
            return False
        return all(self._bound(e.value, path[1:], calls, seen) for e in taken)

    def _held(
        self, holder: Holder, path: Path, calls: dict[int, cst.Call], seen: set[object]
    ) -> bool:
        """Every read of the binding ``holder`` (holding the definition at ``path``) is followed."""
        if (id(holder), path) in seen:
            return True
        seen.add((id(holder), path))
        refs = _holder_refs(self.ctx, holder)
        return refs is not None and all(self._uses(r, path, calls, seen) for r in refs)

    def _holders(self, expr: cst.CSTNode) -> list[Holder] | None:
        """The parameters (or names) the value of ``expr`` goes to; None where it goes
        elsewhere."""
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

    def _resolved(
        self, expr: cst.CSTNode, path: Path, seen: set[object]
    ) -> list[cst.FunctionDef] | None:
        """The definitions that may lie at ``path`` in the value of ``expr``; None where
        something else may."""
        ctx = self.ctx
        if isinstance(expr, (cst.List, cst.Tuple)) and path:
            if any(isinstance(e, cst.StarredElement) for e in expr.elements):
                return None
            taken = expr.elements if path[0] == ANY else expr.elements[path[0] : path[0] + 1]
            return self._all([(e.value, path[1:]) for e in taken], seen) if taken else None
        if isinstance(expr, cst.Call):
            return self._returned(expr, path, seen)
        key = int_index(expr) if isinstance(expr, cst.Subscript) else None
        if isinstance(expr, cst.Subscript) and isinstance(key, cst.Integer):
            return self._resolved(expr.value, (int(key.value, 0), *path), seen)
        if not isinstance(expr, cst.Name):
            return None
        definition = self.definition_of(expr) if not path else None
        if isinstance(definition, cst.FunctionDef):
            return [definition]
        binding = _binding(ctx, expr)
        if binding is None:
            return None
        if (id(binding), path) in seen:
            return []
        seen.add((id(binding), path))
        return self._all(self._reaching(binding, path), seen)

    def _returned(
        self, call: cst.Call, path: Path, seen: set[object]
    ) -> list[cst.FunctionDef] | None:
        """What lies at ``path`` in what ``call`` returns: a function of the module, or
        ``itertools.product`` over lists."""
        ctx = self.ctx
        if _is_product(ctx, call.func):
            if len(path) < 2 or path[0] != ANY or path[1] == ANY or path[1] >= len(call.args):
                return None
            if any(a.keyword is not None or a.star for a in call.args):
                return None
            return self._resolved(call.args[path[1]].value, (ANY, *path[2:]), seen)
        fn = _called(ctx, call)
        if fn is None:
            return None
        returns = list(_returns(ctx, fn))
        if not returns or any(r.value is None for r in returns):
            return None
        return self._all([(r.value, path) for r in returns if r.value is not None], seen)

    def _all(
        self, values: list[tuple[cst.CSTNode, Path]] | None, seen: set[object]
    ) -> list[cst.FunctionDef] | None:
        if values is None:
            return None
        out: dict[int, cst.FunctionDef] = {}
        for expr, path in values:
            defs = self._resolved(expr, path, seen)
            if defs is None:
                return None
            out.update((id(d), d) for d in defs)
        return list(out.values())

    def _reaching(self, holder: cst.CSTNode, path: Path) -> list[tuple[cst.CSTNode, Path]] | None:
        """The expressions whose values the binding ``holder`` may take, each with where the
        definition lies in it."""
        ctx = self.ctx
        if isinstance(holder, cst.Param):
            self.via_param = True
            fn = _plain_function(ctx, holder)
            if fn is None:
                return None
            passed = arguments_for(ctx, fn, fn, holder)
            if any(
                p is None and not _omits(ctx, r, fn, holder) for p, r in _paired(ctx, fn, passed)
            ):
                return None
            values = [p for p in passed if p is not None]
            if holder.default is not None:  # callers that pass nothing, or outside the module
                values.append(holder.default)
            return [(v, path) for v in values]
        parent = ctx.parents.get(holder)
        if isinstance(parent, cst.Element):  # a, b = ... or for a, b in ...
            target = ctx.parents.get(parent)
            index = _index(target, parent)
            if index is None:
                return None
            holder, parent, path = target, ctx.parents.get(target), (index, *path)
        if isinstance(parent, cst.AssignTarget):
            assign = ctx.parents.get(parent)
            return [(assign.value, path)] if isinstance(assign, cst.Assign) else None
        if isinstance(parent, (cst.For, cst.CompFor)) and parent.target is holder:
            return [(parent.iter, (ANY, *path))]
        return None


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


def _refused(fn: cst.FunctionDef, call: cst.Call) -> str:
    """What of ``call``'s arguments ``fn`` does not take (:func:`_accepts` said it does not)."""
    p = fn.params
    names = {x.name.value for x in [*p.posonly_params, *p.params, *p.kwonly_params]}
    unknown = [
        a.keyword.value
        for a in call.args
        if a.keyword is not None and a.keyword.value not in names | PIPELINE_ARGS
    ]
    if unknown and not isinstance(p.star_kwarg, cst.Param):
        return ", ".join(f"{k}=" for k in unknown)
    return "these arguments"


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


def _product_arg(ctx: FileContext, call: cst.CSTNode | None, arg: cst.Arg) -> int | None:
    """``arg`` is positional argument ``k`` of ``itertools.product(...)`` (plain arguments)."""
    if not (isinstance(call, cst.Call) and _is_product(ctx, call.func)):
        return None
    if any(a.keyword is not None or a.star for a in call.args):
        return None
    return [a is arg for a in call.args].index(True)


def _is_len(ctx: FileContext, call: cst.CSTNode | None) -> bool:
    """``len(...)`` (the builtin: no binding of ``len`` in the module)."""
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Name)):
        return False
    return (
        call.func.value == "len"
        and _binding(ctx, call.func) is None
        and (called_function(ctx, call.func) is None)
    )


def _index(seq: cst.CSTNode | None, element: cst.CSTNode) -> int | None:
    """The index of ``element`` in the list or tuple ``seq`` (None after a starred one)."""
    if not isinstance(seq, (cst.List, cst.Tuple)):
        return None
    elements = list(seq.elements)
    at = [e is element for e in elements].index(True)
    if any(isinstance(e, cst.StarredElement) for e in elements[: at + 1]):
        return None
    return at
