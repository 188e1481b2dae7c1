"""A class that takes pipelines as a parameter and wraps a PyTorch framework iterator over them
(``self.it = DALIClassificationIterator(pipelines=pipelines, size=size)``), in a module whose
pipeline definitions all migrate: its callers hand it what a migrated definition returns (a
generator of batches; a list of them, one per GPU) with no ``build()``, and the iterator it wraps
becomes a drop-in loader over those generators that behaves as DALI's iterator with ``size=`` did
(``plugin/base_iterator.py``, ``plugin/pytorch``): the first batch is taken in ``__init__``,
``batch_size`` is the pipelines' batch size (the first batch's), ``_size``/``size`` is ``size``,
each ``next()`` hands out one dict of torch tensors per pipeline (``output_map``; ``["data",
"label"]`` for DALIClassificationIterator) and counts ``len(pipelines) * batch_size`` samples; an
epoch ends when the count reaches ``size`` (FILL without padding: the batch that reaches it is
handed out whole), ``reset()`` after that keeps what that batch read past ``size`` in the next
epoch's count (mid-epoch it does nothing, as DALI's did), ``__iter__`` resets an epoch that was
consumed and ended, ``__len__`` is DALI's count.

Before::

    class Wrapper:
        def __init__(self, pipelines, size):
            self._it = DALIClassificationIterator(pipelines=pipelines, size=size)

After::

    class ClassificationLoader:
        ...  # the drop-in loader

    class Wrapper:
        def __init__(self, pipelines, size):
            self._it = ClassificationLoader(pipelines=pipelines, size=size)

Only where the class hands the parameter to the iterator as is (no other use of it), gives the
iterator no argument but ``pipelines``, ``size`` (and ``output_map``), and uses nothing of the
iterator but what the loader has (``_size``, ``size``, ``batch_size``, ``reset()``, ``next()``,
the object itself handed on); anything else keeps its DM205 TODO.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import param_names, walk

#: the framework iterators this migrates -> the output_map it fixes (None: the call's)
WRAPPED = {
    "nvidia.dali.plugin.pytorch.DALIClassificationIterator": ("data", "label"),
    "nvidia.dali.plugin.pytorch.DALIGenericIterator": None,
}
#: what code may read of the wrapped iterator (the loader has these)
PROVIDED = frozenset(["_size", "size", "batch_size", "reset", "next"])


@dataclass
class WrapSite:
    """A wrapped iterator: the call, its kind's fixed output_map and the attribute holding it."""

    call: cst.Call
    fixed: tuple[str, ...] | None
    holder: str


def wrap_site(ctx: FileContext, call: cst.Call) -> WrapSite | None:
    """``call`` as a wrapped iterator the loader replaces; None where it is not one."""
    q = ctx.qualname(call.func) or ""
    if q not in WRAPPED:
        return None
    fixed = WRAPPED[q]
    pipes = _handed_parameter(call, fixed)
    fn = _enclosing_function(ctx, call)
    if pipes is None or fn is None or pipes.value not in param_names(fn):
        return None
    if _reads(fn, pipes.value) != 1:
        return None  # the parameter is used beside the iterator
    holder = _holder(ctx, call)
    if holder is None or not _uses_provided(ctx, holder):
        return None
    return WrapSite(call, fixed, holder)


def takes_generators(ctx: FileContext, use: cst.CSTNode) -> bool:
    """``use`` (a pipeline object) is handed, alone or in a list, to a class of this module
    whose ``__init__`` (its own or a base's of the module) hands that parameter to a wrapped
    iterator: after the migration it hands the generator, which is what the loader takes."""
    parent = ctx.parents.get(use)
    if isinstance(parent, cst.Element):
        listed = ctx.parents.get(parent)
        parent = ctx.parents.get(listed) if isinstance(listed, (cst.List, cst.Tuple)) else None
    call = ctx.parents.get(parent) if isinstance(parent, cst.Arg) else None
    if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Name):
        return False
    init = _init_of(ctx, call.func.value, set())
    if init is None or not isinstance(parent, cst.Arg):
        return False
    name = _parameter_of(init, call, parent)
    for _ in range(len(ctx.module.body)):  # a keyword that **kwargs hands on to a base
        if name is None or name in param_names(init):
            break
        init = _passed_up(ctx, init, call.func.value)
        if init is None:
            return False
    for site in (wrap_site(ctx, c) for c in walk(init.body) if isinstance(c, cst.Call)):
        handed = _handed_parameter(site.call, site.fixed) if site is not None else None
        if handed is not None and handed.value == name:
            return True
    return False


# -- helpers -------------------------------------------------------------------------------------


def _reads(fn: cst.FunctionDef, name: str) -> int:
    """How often the body of ``fn`` names ``name`` (not as a keyword or an attribute)."""
    skipped = {
        id(n.keyword) if isinstance(n, cst.Arg) else id(n.attr)
        for n in walk(fn.body)
        if isinstance(n, (cst.Arg, cst.Attribute))
    }
    return sum(
        isinstance(n, cst.Name) and n.value == name and id(n) not in skipped for n in walk(fn.body)
    )


def _handed_parameter(call: cst.Call, fixed: tuple[str, ...] | None) -> cst.Name | None:
    """The name handed as ``pipelines`` where the call's arguments are all ones the loader
    takes (``pipelines``, ``size``, ``output_map`` as a literal list of strings)."""
    positional = ["pipelines"] + (["output_map"] if fixed is None else [])
    args: dict[str, cst.Arg] = {}
    for i, arg in enumerate(call.args):
        if arg.star:
            return None
        key = arg.keyword.value if arg.keyword else (positional[i] if i < len(positional) else "")
        if key not in ("pipelines", "size", "output_map") or key in args:
            return None
        args[key] = arg
    if "size" not in args or "pipelines" not in args:
        return None
    if fixed is not None and "output_map" in args:
        return None
    if fixed is None and not _string_list(args.get("output_map")):
        return None
    value = args["pipelines"].value
    return value if isinstance(value, cst.Name) else None


def _string_list(arg: cst.Arg | None) -> bool:
    value = arg.value if arg is not None else None
    return isinstance(value, (cst.List, cst.Tuple)) and all(
        isinstance(e.value, cst.SimpleString) for e in value.elements
    )


def _enclosing_function(ctx: FileContext, node: cst.CSTNode) -> cst.FunctionDef | None:
    cur = ctx.parents.get(node)
    while cur is not None and not isinstance(cur, cst.FunctionDef):
        cur = ctx.parents.get(cur)
    return cur


def _holder(ctx: FileContext, call: cst.Call) -> str | None:
    """``X`` of ``self.X = call`` (the statement, alone on its line)."""
    assign = ctx.parents.get(call)
    if not isinstance(assign, cst.Assign) or assign.value is not call or len(assign.targets) != 1:
        return None
    target = assign.targets[0].target
    if not (
        isinstance(target, cst.Attribute)
        and isinstance(target.value, cst.Name)
        and target.value.value == "self"
    ):
        return None
    return target.attr.value


def _uses_provided(ctx: FileContext, holder: str) -> bool:
    """Every ``self.<holder>`` of the module is assigned once (the wrapped call), read for
    what the loader has, passed to ``next()`` or handed on as a whole."""
    assigned = 0
    for attr in ctx.nodes_of(cst.Attribute):
        if attr.attr.value != holder:
            continue
        if not (isinstance(attr.value, cst.Name) and attr.value.value == "self"):
            return False
        parent = ctx.parents.get(attr)
        if isinstance(parent, cst.AssignTarget):
            assigned += 1
        elif isinstance(parent, cst.Attribute) and parent.value is attr:
            if parent.attr.value not in PROVIDED:
                return False
        elif not isinstance(parent, (cst.Arg, cst.DictElement, cst.Element)):
            return False
    return assigned == 1


def _init_of(ctx: FileContext, name: str, seen: set[str]) -> cst.FunctionDef | None:
    """The ``__init__`` a call of the module's class ``name`` runs: its own, or that of its
    one base of the module where it has none (a base's that calls ``super().__init__(**kw)``
    is not followed)."""
    classes = [c for c in ctx.module.body if isinstance(c, cst.ClassDef) and c.name.value == name]
    if len(classes) != 1 or name in seen:
        return None
    seen.add(name)
    cls = classes[0]
    for stmt in cls.body.body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__init__":
            return stmt
    bases = [b.value for b in cls.bases]
    if len(bases) != 1 or not isinstance(bases[0], cst.Name):
        return None
    return _init_of(ctx, bases[0].value, seen)


def _passed_up(ctx: FileContext, init: cst.FunctionDef, name: str) -> cst.FunctionDef | None:
    """The ``__init__`` of the module's base class that ``init`` (of class ``name`` or a
    base of it) hands its ``**kwargs`` to, whole (``super().__init__(**kwargs)``)."""
    star = init.params.star_kwarg
    if star is None or not isinstance(star, cst.Param):
        return None
    up = [
        c
        for c in walk(init.body)
        if isinstance(c, cst.Call)
        and ctx.text(c.func) in ("super().__init__",)
        and [(a.star, ctx.text(a.value)) for a in c.args] == [("**", star.name.value)]
    ]
    cls = ctx.parents.get(ctx.parents.get(init) or init)
    if len(up) != 1 or not isinstance(cls, cst.ClassDef) or len(cls.bases) != 1:
        return None
    base = cls.bases[0].value
    return _init_of(ctx, base.value, {name}) if isinstance(base, cst.Name) else None


def _parameter_of(init: cst.FunctionDef, call: cst.Call, arg: cst.Arg) -> str | None:
    """The parameter of ``init`` that ``arg`` of ``call`` binds."""
    if arg.keyword is not None:
        return arg.keyword.value
    params = [p.name.value for p in [*init.params.posonly_params, *init.params.params]][1:]
    index = [a for a in call.args if a.keyword is None and not a.star].index(arg)
    return params[index] if index < len(params) else None
