"""A DALI iterator made inside a small wrapper class from a pipeline passed in (the shape of
classification scripts that give ``(images, targets)`` like a torchvision DataLoader): the
pipeline is followed into the wrapper's ``__init__``, and the wrapper keeps working on the loader.

Before::

    class DaliIterator:
        def __init__(self, pipelines, reader_name):
            self._it = DALIClassificationIterator(pipelines=pipelines, reader_name=reader_name)

        def __len__(self):
            return len(self._it)

        def __next__(self):
            try:
                data = next(self._it)
            except StopIteration:
                self._it.reset()
                raise
            return data[0]["data"], data[0]["label"]

    pipe = train_pipe(data_dir)
    train_loader = DaliIterator(pipe, "Reader")

After::

    class DaliIterator:
        def __init__(self, pipelines, reader_name):
            self._loader = pipelines
            self._it = iter(self._loader)

        def __len__(self):
            return len(self._loader)

        def __next__(self):
            try:
                data = next(self._it)
            except StopIteration:
                self._it = iter(self._loader)
                raise
            return data[0]["data"], data[0]["label"]

    train_loader = DaliIterator(TrainLoader(data_dir), "Reader")

The iterator's arguments that are parameters of ``__init__`` must be given literals at the one
call of the wrapper (``"Reader"``), so that the loader's configuration is known.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import walk

#: literal values a wrapper parameter may be bound to, for the iterator's configuration
LITERALS = (cst.SimpleString, cst.Integer, cst.Name, cst.Attribute, cst.List, cst.Tuple)


def wrapped_iterator(
    ctx: FileContext, ref: cst.CSTNode, iterators: tuple[str, ...]
) -> tuple[cst.Call, cst.Call, cst.Call, str, str] | str | None:
    """``Wrapper(pipe, ...)`` where ``Wrapper.__init__`` makes one of ``iterators`` from the
    parameter ``pipe`` binds: (the wrapper's call, the iterator's call, that call with the
    wrapper's literal arguments in place of its parameters, the parameter, the iterator's
    qualified name); a reason when the shape is there but cannot be followed; None otherwise."""
    arg = ctx.parents.get(ref)
    outer = ctx.parents.get(arg)
    if not (
        isinstance(arg, cst.Arg)
        and isinstance(outer, cst.Call)
        and isinstance(outer.func, cst.Name)
    ):
        return None
    cls = _module_class(ctx, outer.func)
    init = _init(cls) if cls is not None else None
    if cls is None or init is None:
        return None
    bound = _bindings(outer, init)
    param = next((p for p, a in bound.items() if a is arg), None)
    calls = [
        n for n in walk(init.body) if isinstance(n, cst.Call) and ctx.qualname(n.func) in iterators
    ]
    inner = [c for c in calls if any(_passes(a.value, param) for a in c.args)]
    if param is None or len(inner) != 1:
        return None
    if _refs(ctx, outer.func) != 1:
        return f"{cls.name.value} is made in more than one place"
    if len(free_names_list(init.body, param)) != 1:
        return f"{cls.name.value}.__init__ uses `{param}` other than to make the iterator"
    resolved = _resolved(inner[0], init, bound, param)
    if isinstance(resolved, str):
        return resolved
    return outer, inner[0], resolved, param, ctx.qualname(inner[0].func) or ""


def free_names_list(node: cst.CSTNode, name: str) -> list[cst.Name]:
    """The reads of ``name`` in ``node`` (not attribute or keyword names)."""
    skip = {id(n.attr) for n in walk(node) if isinstance(n, cst.Attribute)}
    skip |= {id(n.keyword) for n in walk(node) if isinstance(n, cst.Arg) and n.keyword is not None}
    return [
        n for n in walk(node) if isinstance(n, cst.Name) and n.value == name and id(n) not in skip
    ]


def _module_class(ctx: FileContext, name: cst.Name) -> cst.ClassDef | None:
    cls = getattr(binding_of(ctx, name), "node", None)  # builtins have no node
    return (
        cls
        if isinstance(cls, cst.ClassDef) and isinstance(ctx.parents.get(cls), cst.Module)
        else None
    )


def _refs(ctx: FileContext, name: cst.Name) -> int:
    binding = binding_of(ctx, name)
    return len(binding.references) if binding is not None else 0


def binding_of(ctx: FileContext, name: cst.Name):  # -> libcst Assignment | None
    """The one assignment the name ``name`` reads (in its scope or an enclosing one), or None."""
    scope = ctx.scopes.get(name)
    accesses = list(scope.accesses[name]) if scope is not None else []
    referents = {id(r): r for a in accesses for r in a.referents}
    if len(referents) != 1:
        return None
    return next(iter(referents.values()))


def _init(cls: cst.ClassDef) -> cst.FunctionDef | None:
    for s in cls.body.body:
        if isinstance(s, cst.FunctionDef) and s.name.value == "__init__":
            return s
    return None


def _bindings(call: cst.Call, init: cst.FunctionDef) -> dict[str, cst.Arg]:
    """The parameters of ``__init__`` (after self) the arguments of ``call`` bind."""
    params = [p.name.value for p in init.params.params][1:]
    out: dict[str, cst.Arg] = {}
    for i, a in enumerate(call.args):
        if a.star:
            return {}
        if a.keyword is not None:
            out[a.keyword.value] = a
        elif i < len(params):
            out[params[i]] = a
    return out


def _passes(value: cst.BaseExpression, param: str | None) -> bool:
    """``param`` or ``[param]``."""
    if isinstance(value, (cst.List, cst.Tuple)) and len(value.elements) == 1:
        value = value.elements[0].value
    return isinstance(value, cst.Name) and value.value == param


def _resolved(
    inner: cst.Call, init: cst.FunctionDef, bound: dict[str, cst.Arg], param: str
) -> cst.Call | str:
    """``inner`` with the other parameters of ``__init__`` it reads replaced by what the call
    gives them (literals), or by their literal defaults."""
    defaults = {p.name.value: p.default for p in init.params.params if p.default is not None}
    names = {p.name.value for p in [*init.params.params, *init.params.kwonly_params]} - {param}
    args = []
    for a in inner.args:
        value = a.value
        if isinstance(value, cst.Name) and value.value in names:
            given = bound[value.value].value if value.value in bound else defaults.get(value.value)
            if not isinstance(given, LITERALS) or (
                isinstance(given, cst.Name) and given.value in names
            ):
                return f"`{value.value}` is not given a literal where the wrapper is made"
            value = given
        args.append(a.with_changes(value=value))
    return inner.with_changes(args=args)
