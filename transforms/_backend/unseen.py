"""Calls in graph code of callables whose code the tool does not see, on what the graph code
computes: a name imported from a module that is not DALI's (``aug(img)`` after ``from mylib import
aug``), an attribute of an object from outside the graph (the enclosing method's
``self.transforms``, a module-level object), an element of such an iterable (``for t in
self.transforms: img = t(img)``), or a parameter or variable of an enclosing function.

Pipeline mode called such code once, on graph nodes, to build the graph (it probably calls
``fn.*``); the generator calls it once per batch on ``ndd.Batch``. The tool keeps the call as
written, with a TODO above the statement saying what the callee must take and return now, and
the loop gets no capture mode (what the callee runs is not known)::

    from mylib import aug                        from mylib import aug
    @pipeline_def(batch_size=4, ...)             def p(*, batch_size=4):
    def p():                                         ...
        jpegs, labels = fn.readers.file(...)  ->         # TODO(dali-migrate): DM200: `aug` ...
        img = aug(fn.decoders.image(jpegs))              img = aug(ndd.decoders.image(jpegs))

Not flagged: DALI's API, functions and classes defined in the file (followed), builtins,
callables handed to the pipeline (``handed.py`` says those), and calls none of whose arguments
reads a name the graph code binds.
"""

from __future__ import annotations

from pathlib import PurePath

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.cst_walk import children

from .._cst import assigned_names, free_names, param_names, walk
from .model import Graph


def unseen_todos(
    ctx: FileContext, graph: Graph, stmt: cst.CSTNode, nodes: set[str], rule: str
) -> list[str]:
    """What the TODOs above ``stmt`` (a statement of the graph code) say: one per call in it of a
    callable whose code the tool does not see, an argument of which reads data (``nodes``: the
    names holding data, with those computed from them, :func:`data_names`)."""
    scopes = ctx.memo(("unseen-scopes", graph.container), lambda: _scopes(ctx, graph))
    data = ctx.memo(("unseen-data", graph.container), lambda: data_names(ctx, graph, nodes))
    seen = _Seen(ctx, graph, scopes, rule)
    elements = seen.elements(stmt)
    out: list[str] = []
    for call in (n for n in walk(stmt) if isinstance(n, cst.Call)):
        if not any(free_names(a.value) & data for a in call.args):
            continue
        if isinstance(call.func, cst.Name) and call.func.value in elements:
            text = _elements_called(elements[call.func.value])
        else:
            what = seen.unseen(call.func)
            if what is None:
                continue
            text = _called(what)
        if text not in out:
            out.append(text)
    return out


class _Seen:
    """What the graph code of ``graph`` can tell of the callees it calls."""

    def __init__(
        self, ctx: FileContext, graph: Graph, scopes: list[tuple[cst.CSTNode, _Scope]], rule: str
    ) -> None:
        self.ctx, self.scopes = ctx, scopes
        self.local = set().union(*(assigned_names(s) for s in graph.body))
        self.skip = set(graph.handed.names) if graph.handed is not None else set()
        if rule == "DM202":
            self.skip.add("self")  # the pipeline's own attributes: DM202 merges or refuses them
        if isinstance(graph.container, cst.With):  # ``with pipe:``: the pipeline's own methods
            self.skip |= {r for i in graph.container.items if (r := _root(i.item)) is not None}
        self.bound = _bound_once(graph.body)

    def unseen(self, expr: cst.BaseExpression) -> str | None:
        """How the TODO names ``expr`` (a callee, or an iterable of callees) and where it comes
        from, when the tool does not see its code; None when it does, or cannot tell."""
        wrapped = _partial_of(expr)
        if wrapped is not None:  # partial(fn.resize, size=...): what it wraps
            return self.unseen(wrapped)
        root = _root(expr)
        if root is None or root in self.skip:
            return None
        if root not in self.local:
            origin = _origin(self.ctx, root, _callee(expr), self.scopes)
            return f"`{_code(expr)}` ({origin})" if origin is not None else None
        value = self.bound.get(root)  # ``aug = make_aug(cfg)`` in the graph code, then ``aug(x)``
        inner = _root(value) if value is not None else None
        if value is not None and _partial_of(value) is not None:
            return self.unseen(value)
        if value is None or inner is None or inner in self.local | self.skip:
            return None
        origin = _origin(self.ctx, inner, _callee(value), self.scopes)
        if origin is None:
            return None
        return (
            f"`{_code(expr)}` (what `{_code(value)}` gives: `{_code(_callee(value))}` is {origin})"
        )

    def elements(self, stmt: cst.CSTNode) -> dict[str, str]:
        """``for t in <iterable>`` in ``stmt`` over an iterable of unseen origin: ``t`` -> how
        the TODO names the iterable."""
        out: dict[str, str] = {}
        for n in walk(stmt):
            if isinstance(n, cst.For) and isinstance(n.target, cst.Name):
                what = self.unseen(n.iter)
                if what is not None:
                    out[n.target.value] = what
        return out


def _bound_once(body: list[cst.BaseStatement]) -> dict[str, cst.BaseExpression]:
    """``name = <value>`` in ``body``, for the names bound there once, by that statement."""
    counts: dict[str, int] = {}
    values: dict[str, cst.BaseExpression] = {}
    for s in body:
        for n in walk(s):
            if isinstance(n, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For)):
                for name in free_names(n.target):
                    counts[name] = counts.get(name, 0) + 1
            if isinstance(n, cst.Assign) and len(n.targets) == 1:
                target = n.targets[0].target
                if isinstance(target, cst.Name):
                    values[target.value] = n.value
    return {k: v for k, v in values.items() if counts.get(k) == 1}


def _partial_of(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """The callable ``partial(<callable>, ...)`` / ``functools.partial(...)`` wraps, or None."""
    if not (isinstance(expr, cst.Call) and expr.args and expr.args[0].keyword is None):
        return None
    if _code(expr.func) not in ("partial", "functools.partial"):
        return None
    return expr.args[0].value


def _callee(expr: cst.BaseExpression) -> cst.BaseExpression:
    """What ``expr`` calls to get its value (``make_aug`` of ``make_aug(cfg)``), or ``expr``."""
    while isinstance(expr, cst.Call):
        expr = expr.func
    return expr


def data_names(ctx: FileContext, graph: Graph, nodes: set[str]) -> frozenset[str]:
    """The names the graph code binds to data: ``nodes``, the readers' and sources' outputs,
    what a DALI call gives (``img = fn.decoders.image(raw)``), and what is computed from them,
    whatever computes it (``img = aug(img)``, ``for t in steps: out = t(out)``)."""
    data = set(nodes)
    for use in [*graph.readers, *graph.sources]:
        data |= free_names(use.target)
    bindings: list[tuple[set[str], cst.CSTNode]] = []
    for s in graph.body:
        for n in walk(s):
            if isinstance(n, cst.Assign):
                bindings.append(({x for t in n.targets for x in free_names(t.target)}, n.value))
            elif isinstance(n, (cst.AugAssign, cst.AnnAssign)) and n.value is not None:
                bindings.append((free_names(n.target), n.value))
            elif isinstance(n, cst.For):
                bindings.append((free_names(n.target), n.iter))
    dali = {*ctx.dali_names, ctx.ndd}
    for names, value in bindings:
        if any(isinstance(c, cst.Call) and _root(c.func) in dali for c in walk(value)):
            data |= names
    changed = True
    while changed:
        changed = False
        for names, value in bindings:
            if not names <= data and free_names(value) & data:
                data |= names
                changed = True
    return frozenset(data)


#: a scope's bindings: name -> ("def" | "import" | "param" | "var", the module / function name)
_Scope = dict[str, tuple[str, str]]


def _scopes(ctx: FileContext, graph: Graph) -> list[tuple[cst.CSTNode, _Scope]]:
    """The scopes around the graph code, innermost first: the functions that enclose it (their
    classes are no scope for their methods' code), then the module."""
    out: list[tuple[cst.CSTNode, _Scope]] = []
    node = ctx.parents.get(graph.container)
    while node is not None:
        if isinstance(node, cst.FunctionDef):
            scope = _bindings(node.body, graph.container)
            scope.update(dict.fromkeys(param_names(node), ("param", node.name.value)))
            out.append((node, scope))
        node = ctx.parents.get(node)
    out.append((ctx.module, _bindings(ctx.module, graph.container)))
    return out


def _bindings(block: cst.CSTNode, graph: cst.CSTNode) -> _Scope:
    """The names ``block`` binds, not looking into the functions, classes and lambdas it defines
    (whose own names it binds), nor into the graph code."""
    out: _Scope = {}
    stack = [block]
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.ClassDef)) and n is not block:
            out[n.name.value] = ("def", "")
            continue
        if n is graph or isinstance(n, cst.Lambda):
            continue
        if isinstance(n, cst.Import):
            for a in n.names:
                name = _code(a.asname.name) if a.asname else _code(a.name).split(".")[0]
                out.setdefault(name, ("import", _code(a.name)))
        elif isinstance(n, cst.ImportFrom) and not isinstance(n.names, cst.ImportStar):
            module = "." * len(n.relative) + (_code(n.module) if n.module else "")
            for a in n.names:
                bound = _code(a.asname.name if a.asname else a.name)
                out.setdefault(bound, ("import", f"{module}:{_code(a.name)}"))
        elif isinstance(n, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For, cst.With)):
            targets = (
                [i.asname.name for i in n.items if i.asname]
                if isinstance(n, cst.With)
                else [n.target]
            )
            for t in targets:
                for name in free_names(t):
                    out.setdefault(name, ("var", ""))
        stack.extend(reversed(children(n)))
    return out


def _root(expr: cst.BaseExpression) -> str | None:
    """The name an attribute chain, subscript or call starts from (``self`` of
    ``self.augs[0]``, ``make`` of ``make(cfg).apply``)."""
    while isinstance(expr, (cst.Attribute, cst.Subscript, cst.Call)):
        expr = expr.func if isinstance(expr, cst.Call) else expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def _origin(
    ctx: FileContext, root: str, expr: cst.BaseExpression, scopes: list[tuple[cst.CSTNode, _Scope]]
) -> str | None:
    """Where ``expr`` (starting from the name ``root``, not bound by the graph code) comes from,
    as the TODO says it, when the tool does not see its code; None for DALI's API, what the
    file defines and builtins."""
    if root in ctx.dali_names or root == ctx.ndd:
        return None
    for node, scope in scopes:
        if root not in scope:
            continue
        kind, info = scope[root]
        if kind == "def":
            return None
        if kind == "import":
            module = info.split(":")[0]
            if module == "nvidia" or module.startswith("nvidia.") or _given(ctx, info):
                return None
            if ":" not in info:  # import mod: mod.func(...)
                return f"from the module `{module}`, whose code the tool does not see"
            what = "imported" if isinstance(expr, cst.Name) else f"of `{root}`, imported"
            return f"{what} from `{module}`, whose code the tool does not see"
        if not isinstance(node, cst.FunctionDef):
            what = "a module-level object" if isinstance(expr, cst.Name) else "an attribute of "
            what += "" if isinstance(expr, cst.Name) else f"`{root}`, a module-level object"
            return f"{what}, whose code the tool does not see"
        if _own_method(ctx, node, root, expr):
            return None
        role = "a parameter" if kind == "param" else "a variable"
        what = f"{role} of the enclosing `{node.name.value}`"
        if not isinstance(expr, cst.Name):
            what = f"an attribute of `{root}`, {what}"
        return f"{what}, whose code the tool does not see"
    return None  # a builtin, or a name bound where the tool does not look (import *)


def _given(ctx: FileContext, imported: str) -> bool:
    """The module ``imported`` names (``module`` or ``module:name``, relative or not), or the
    submodule it imports, is a file of the run (``ModuleInfo.given``): migrated with it."""
    info = ctx.project
    if info is None or not getattr(info, "given", None):
        return False
    module, _, name = imported.partition(":")
    rest = module.lstrip(".")
    level = len(module) - len(rest)
    wanted = [rest] if level == 0 else []
    # relative: to each name this module has (a package's __init__ names the package itself)
    drop = level - (ctx.path is not None and PurePath(ctx.path).name == "__init__.py")
    for own in info.names if level else ():
        parts = own.split(".")
        if drop <= len(parts):
            wanted.append(".".join([*parts[: len(parts) - drop], *([rest] if rest else [])]))
    return any(m in info.given or f"{m}.{name}" in info.given for m in wanted if m)


def _own_method(ctx: FileContext, fn: cst.FunctionDef, root: str, expr: cst.BaseExpression) -> bool:
    """``expr`` is ``self.<name>`` (``root`` the first parameter of the method ``fn``) and
    ``<name>`` a method of ``fn``'s class: code the file defines."""
    params = fn.params.params
    if not (params and params[0].name.value == root and isinstance(expr, cst.Attribute)):
        return False
    if not isinstance(expr.value, cst.Name):
        return False
    cls = ctx.parents.get(ctx.parents.get(fn))  # the IndentedBlock's parent
    if not isinstance(cls, cst.ClassDef):
        return False
    return any(
        isinstance(s, cst.FunctionDef) and s.name.value == expr.attr.value for s in cls.body.body
    )


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _called(what: str) -> str:
    return (
        f"{what} is called here on ndd.Batch, once per batch (pipeline mode called it once, on "
        "graph nodes, to build the graph): make it take and return ndd.Batch, its operators "
        "migrated to ndd"
    )


def _elements_called(what: str) -> str:
    return (
        f"the elements of {what} are called here on ndd.Batch, once per batch (pipeline mode "
        "called them once, on graph nodes, to build the graph): make them take and return "
        "ndd.Batch, their operators migrated to ndd"
    )
