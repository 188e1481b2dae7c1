"""Following a framework iterator through the code that uses it: names, ``self`` attributes,
returns to the callers of a factory, Lightning hooks, functions and classes of the module it is
passed to, down to the loops, ``len()``, ``reset()`` and ``next()`` that consume it."""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from typing import Any, TypeVar

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import in_source_order, scope_label, use_text, walk
from .iterator_use import IteratorUse
from .wrappers import binding_of

_Node = TypeVar("_Node", bound=cst.CSTNode)

DATALOADER_HOOKS = ("train_dataloader", "val_dataloader", "test_dataloader", "predict_dataloader")


class Follower:
    """Every use of the iterator object: through names, ``self`` attributes, returns to the
    callers of a factory and Lightning hooks, to the loops, ``len()``, ``reset()`` and ``next()``
    that consume it. Anything else is a reason."""

    def __init__(self, ctx: FileContext, use: IteratorUse, reasons: list[str]) -> None:
        self.ctx, self.use, self.reasons = ctx, use, reasons
        #: functions, classes and methods the iterator is passed to (``_Callee``), by name
        self.callees: dict[str, _Callee] = {}
        #: the callees being followed now (a reset found there belongs to each of them)
        self.within: list[str] = []
        #: id of each reset statement -> the callees it was found in
        self.reset_callees: dict[int, tuple[str, ...]] = {}
        #: the name that holds the iterator holds other values too (each a plain assignment):
        #: the code that uses it stays as written, resets included
        self.rebound = False

    def finish(self) -> None:
        """A reset in code that also gets other values (a function or class called elsewhere
        with something else) stays: the loader gets a ``reset()`` that does nothing. The others
        are deleted (each pass over the loader is an epoch)."""
        shared = {k for k, c in self.callees.items() if c.references != len(c.calls)}
        kept = [
            r
            for r in self.use.resets
            if self.rebound or shared & set(self.reset_callees.get(id(r), ()))
        ]
        self.use.resets = [r for r in self.use.resets if not any(r is k for k in kept)]
        self.use.kept_resets = kept
        if self.rebound and self.use.pulls:  # (``it = iter(loader)`` would rebind it too)
            drop_in(self.use, self.use.pulls[0])

    def value(self, expr: cst.CSTNode, depth: int) -> None:
        """``expr`` evaluates to the iterator."""
        ctx = self.ctx
        parent = ctx.parents.get(expr)
        if isinstance(parent, cst.Assign) and parent.value is expr and len(parent.targets) == 1:
            self._bound(parent.targets[0].target, depth)
        elif isinstance(parent, cst.Return):
            self._returned(parent, depth=depth)
        else:
            self._terminal(expr, depth)

    def _bound(self, target: cst.BaseExpression, depth: int) -> None:
        ctx = self.ctx
        if isinstance(target, cst.Name):
            scope = ctx.scopes.get(target)
            bindings = list(scope.assignments[target.value]) if scope is not None else []
            if len(bindings) != 1 and not all(_plain_binding(ctx, b.node) for b in bindings):
                self.reasons.append(f"`{target.value}` is assigned more than once")
                return
            if len(bindings) != 1:  # (train, then validation): its uses also get other values
                self.rebound = True
            self._holder(target)
            refs = {id(r): r for b in bindings for r in b.references}.values()
            for ref in in_source_order(ctx, refs):
                if ctx.scopes.get(ref.node) is not scope:
                    self.reasons.append(
                        f"`{target.value}` is used in another scope, {scope_label(ctx, ref.node)}"
                    )
                else:
                    self._terminal(ref.node, depth)
        elif isinstance(target, cst.Attribute) and _self_attr(ctx, target) is not None:
            self._holder(target)
            for read in self._attribute_reads(target):
                self._terminal(read, depth)
        else:
            self.reasons.append(f"the iterator is stored in `{ctx.text(target)}`")

    def _holder(self, target: cst.BaseExpression) -> None:
        self.use.holder = target if self.use.holder is None else self.use.holder

    def _attribute_reads(self, target: cst.Attribute) -> list[cst.Attribute]:
        """``self.x`` read in the methods of the class that sets it; ``.x`` anywhere else, or set
        anywhere else, is a reason."""
        ctx, attr = self.ctx, target.attr.value
        cls = enclosing(ctx, target, cst.ClassDef)
        related = _related_classes(ctx, cls)
        reads = []
        for node in ctx.nodes_of(cst.Attribute):
            if node.attr.value != attr or node is target or _in_import(ctx, node):
                continue
            if (
                _self_attr(ctx, node) is not None
                and id(enclosing(ctx, node, cst.ClassDef)) not in related
            ):
                continue  # ``self.x`` of another class's objects
            stored = isinstance(ctx.parents.get(node), cst.AssignTarget)
            if stored and reset_rebind(ctx, node) is not None:
                continue  # ``self.x = self.x.reset()``: its read is the use (``_terminal``)
            if (
                not stored
                and _self_attr(ctx, node) is not None
                and enclosing(ctx, node, cst.ClassDef) is cls
            ):
                reads.append(node)
            else:
                self.reasons.append(
                    f"`{ctx.text(node)}` {scope_label(ctx, node)} may be the iterator too"
                )
        return reads

    def _returned(self, ret: cst.Return, index: int | None = None, *, depth: int) -> None:
        """``return it`` (``index`` None) or ``return it, n`` (``index`` 0): followed to the
        callers (``loader, steps = make(...)``)."""
        ctx = self.ctx
        fn = enclosing(ctx, ret, cst.FunctionDef)
        owner = ctx.parents.get(fn) if fn is not None else None
        if isinstance(owner, cst.IndentedBlock):
            owner = ctx.parents.get(owner)
        if index is None and (
            fn is not None and isinstance(owner, cst.ClassDef) and fn.name.value in DATALOADER_HOOKS
        ):
            self.use.hooked = True  # the Trainer iterates it once per epoch
            return
        if fn is not None and isinstance(owner, cst.ClassDef) and depth < 3:
            refs = self._method_calls(fn)
        elif fn is None or not isinstance(owner, cst.Module) or depth >= 3:
            refs = None
        else:
            scope = ctx.scopes.get(fn)
            refs = (
                [r.node for a in scope.assignments[fn.name.value] for r in a.references]
                if scope
                else []
            )
        if fn is not None:
            self._annotated_return(fn, index)
        if fn is None or refs is None:  # (refs is None where fn is)
            self._opaque(ret)  # to code the tool cannot follow
            return
        if not refs:  # (alone or in a tuple)
            self._opaque(ret)  # callers elsewhere
            return
        calls = [r for r in refs if isinstance(ctx.parents.get(r), cst.Call)]
        self.use.copies *= max(len(calls), 1)  # each call makes an iterator
        for ref in refs:
            call = ctx.parents.get(ref)
            if isinstance(call, cst.Call) and call.func is ref:
                if loops_around(ctx, call):
                    self.use.copies *= 2
                self._called(call, depth + 1, index)
            else:
                self.reasons.append(
                    f"`{fn.name.value}` (which returns the iterator) is used other than by "
                    f"calling it, {scope_label(ctx, ref)}"
                )

    def _annotated_return(self, fn: cst.FunctionDef, index: int | None) -> None:
        """``def make(...) -> DALIGenericIterator:`` returning the iterator (or ``->
        Tuple[DALIGenericIterator, ...]`` returning it at ``index`` of a tuple): the annotation
        names the loader where the iterator becomes one."""
        ann = fn.returns.annotation if fn.returns is not None else None
        if index is not None:  # Tuple[A, B]: its entry at index
            entries = ann.slice if isinstance(ann, cst.Subscript) else ()
            entry = entries[index].slice if index < len(entries) else None
            ann = entry.value if isinstance(entry, cst.Index) else None
        q = self.ctx.qualname(self.use.call.func) if self.use.subclass is None else None
        if isinstance(ann, (cst.Name, cst.Attribute)) and q and self.ctx.qualname(ann) == q:
            self.use.annotations.append(ann)

    def _called(self, call: cst.Call, depth: int, index: int | None) -> None:
        """A call of a function that returns the iterator (at ``index`` of a tuple)."""
        if index is None:
            self.value(call, depth)
            return
        parent = self.ctx.parents.get(call)
        target = (
            parent.targets[0].target
            if isinstance(parent, cst.Assign) and len(parent.targets) == 1
            else None
        )
        count = len(_tuple_of(self.ctx, call) or ())
        elements = target.elements if isinstance(target, (cst.Tuple, cst.List)) else ()
        if len(elements) != count or any(isinstance(e, cst.StarredElement) for e in elements):
            self.reasons.append(
                f"the tuple {scope_label(self.ctx, call)} that holds the iterator is not "
                "unpacked into names"
            )
            return
        self._bound(elements[index].value, depth)

    def _method_calls(self, fn: cst.FunctionDef) -> list[cst.CSTNode] | None:
        """The ``<obj>.<method>`` references in the module when ``fn`` is the one function of
        that name in it (a method called on anything else would not be seen); else None."""
        ctx, name = self.ctx, fn.name.value
        if sum(f.name.value == name for f in ctx.nodes_of(cst.FunctionDef)) != 1:
            return None
        return [a for a in ctx.nodes_of(cst.Attribute) if a.attr.value == name]

    def _terminal(self, node: cst.CSTNode, depth: int) -> None:
        """A read of the iterator: a loop over it, len(), reset(), next(), or returned on."""
        ctx, use = self.ctx, self.use
        parent = ctx.parents.get(node)
        loop = _loop_of(ctx, node)
        if loop is not None:
            use.loops.append(loop)
        elif isinstance(parent, cst.Return) and parent.value is node:
            self._returned(parent, depth=depth)
        elif (element := _returned_element(ctx, node)) is not None:
            self._returned(*element, depth=depth)
        elif _builtin_arg(ctx, node, "len"):
            use.lens.append((node, ""))
        elif _builtin_arg(ctx, node, "next"):
            use.pulls.append(ctx.parents.get(parent))
        elif (rebind := reset_rebind(ctx, node)) is not None:
            # ``it = it.reset()``: DALI's reset() returns None, so ``it`` holds None after it;
            # the statement stays as written over a drop-in loader, whose reset() does the same
            use.rebinds.append(rebind)
            drop_in(use, node)
        elif (reset := _reset_stmt(ctx, node)) is not None:
            use.resets.append(reset)
            self.reset_callees[id(use.resets[-1])] = tuple(self.within)
        elif (
            isinstance(parent, cst.Attribute)
            and parent.value is node
            and parent.attr.value == "_size"
            and not isinstance(ctx.parents.get(parent), (cst.AssignTarget, cst.AugAssign))
        ):
            use.size_reads.append(parent)
        elif self._passed(node, depth):
            pass
        elif _unseen(ctx, node):
            self._opaque(node)
        else:
            self.reasons.append(
                f"`{use_text(ctx, node)}` {scope_label(ctx, node)} uses `{ctx.text(node)}` in a "
                "way the tool cannot follow (only loops over it, len(), next() and reset())"
            )

    def _opaque(self, node: cst.CSTNode) -> None:
        """Code the tool cannot read takes the iterator at ``node``: the loader is a drop-in
        iterator, made by each call maybe (no capture loop)."""
        if not self.use.opaque:
            self.use.copies *= 2
        drop_in(self.use, node)

    def _passed(self, node: cst.CSTNode, depth: int) -> bool:
        """``train(model, loader)``, ``Wrapper(loader)``, ``self.show(loader)``: a function, a
        class (its ``__init__``) or a method of this module; the parameter that takes the
        iterator is followed."""
        ctx = self.ctx
        arg = ctx.parents.get(node)
        call = ctx.parents.get(arg)
        if not (isinstance(arg, cst.Arg) and not arg.star and isinstance(call, cst.Call)):
            return False
        found = _callee(ctx, call) if depth < 3 else None
        if found is None:
            return False
        key, fn, skip, references = found
        followed = key in self.callees
        self.callees.setdefault(key, _Callee(references)).calls.add(id(call))
        if followed:
            return True  # its parameter's uses are recorded already
        param = _parameter(fn, call, arg, skip)
        scope = ctx.scopes.get(fn.body) if param is not None else None
        bindings = (
            list(scope.assignments[param.name.value])
            if scope is not None and param is not None
            else []
        )
        if param is None or len(bindings) != 1 or bindings[0].node is not param:
            self.reasons.append(
                f"the parameter of {fn.name.value}() that takes the iterator is rebound"
            )
            return True
        self.within.append(key)
        for ref in in_source_order(ctx, bindings[0].references):
            self.value(ref.node, depth + 1)
        self.within.pop()
        return True


def _plain_binding(ctx: FileContext, node: cst.CSTNode) -> bool:
    """``node`` (a name bound) is the one target of an assignment: ``name = value``."""
    target = ctx.parents.get(node)
    assign = ctx.parents.get(target)
    return (
        isinstance(node, cst.Name)
        and isinstance(target, cst.AssignTarget)
        and isinstance(assign, cst.Assign)
        and len(assign.targets) == 1
    )


def drop_in(use: IteratorUse, node: cst.CSTNode) -> None:
    """The loader is to be a drop-in iterator (for the use at ``node``), sized with len()."""
    use.opaque.append(node)
    use.hooked = True


def _unseen(ctx: FileContext, node: cst.CSTNode) -> bool:
    """``iter(it)``, ``it.__next__()``, or ``it`` passed to a call of code the tool does not see
    (imported, a method of another object): what is done with the iterator there can only be
    what is done with an iterator."""
    parent = ctx.parents.get(node)
    if _builtin_arg(ctx, node, "iter"):
        return True
    if isinstance(parent, cst.Attribute) and parent.value is node:
        call = ctx.parents.get(parent)
        return (
            parent.attr.value in ("__next__", "__iter__")
            and isinstance(call, cst.Call)
            and call.func is parent
        )
    call = ctx.parents.get(parent)
    if not (isinstance(parent, cst.Arg) and not parent.star and isinstance(call, cst.Call)):
        return False
    func = call.func
    if isinstance(func, cst.Name) and _builtin(ctx, func):
        return func.value in ITERATING_BUILTINS
    return _callee(ctx, call) is None and not _defined_here(ctx, func)


#: builtins that only iterate over what they are given (``print``, ``isinstance``, ``type``
#: would see that the loader is another object)
ITERATING_BUILTINS = frozenset(
    ("list", "tuple", "zip", "map", "filter", "sorted", "enumerate", "sum", "any", "all")
)


def _builtin(ctx: FileContext, name: cst.Name) -> bool:
    """``name`` is one of Python's builtins, not shadowed in the module."""
    scope = ctx.scopes.get(name)
    return name.value in dir(builtins) and (scope is None or not scope.assignments[name.value])


def _defined_here(ctx: FileContext, func: cst.BaseExpression) -> bool:
    """``func`` names a function or class this module defines (code the tool could read, so a
    call it did not follow into is not taken as unseen)."""
    if isinstance(func, cst.Attribute):
        func = func.value
        if isinstance(func, cst.Name) and func.value == "self":
            return True
    if not isinstance(func, cst.Name):
        return False
    scope = ctx.scopes.get(func)
    if scope is None or func.value not in scope:
        return False
    return any(isinstance(a.node, (cst.FunctionDef, cst.ClassDef)) for a in scope[func.value])


@dataclass
class _Callee:
    """Code the iterator is passed to: how often the module names it, and the calls of it that
    pass the iterator (fewer: it also gets other values)."""

    references: int
    calls: set[int] = field(default_factory=set)


def _callee(ctx: FileContext, call: cst.Call) -> tuple[str, cst.FunctionDef, int, int] | None:
    """What ``call`` runs, when it is code of this module: (a key, the function, the parameters
    before the arguments, how many times the module names it). ``f(...)`` of a module-level
    function, ``C(...)`` of a module-level class (its ``__init__``), ``C.m(...)`` and
    ``self.m(...)`` of the one function named ``m`` in a class of the module."""
    func = call.func
    if isinstance(func, cst.Name):
        binding = binding_of(ctx, func)
        node = getattr(binding, "node", None)  # builtins have no node
        if binding is None or not isinstance(ctx.parents.get(node), cst.Module):
            return None
        if isinstance(node, cst.ClassDef):
            init = next(
                (
                    s
                    for s in node.body.body
                    if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"
                ),
                None,
            )
            return None if init is None else (node.name.value, init, 1, len(binding.references))
        if isinstance(node, cst.FunctionDef):
            return node.name.value, node, 0, len(binding.references)
        return None
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
        return None
    name = func.attr.value
    fns = [f for f in ctx.nodes_of(cst.FunctionDef) if f.name.value == name]
    cls = enclosing(ctx, fns[0], cst.ClassDef) if len(fns) == 1 else None
    if cls is None or ctx.parents.get(ctx.parents.get(fns[0])) is not cls:
        return None
    decorators = {getattr(d.decorator, "value", None) for d in fns[0].decorators}
    if func.value.value == cls.name.value:
        skip = 1 if "classmethod" in decorators else 0
    elif _self_attr(ctx, func) is not None and enclosing(ctx, func, cst.ClassDef) is cls:
        skip = 0 if "staticmethod" in decorators else 1
    else:
        return None
    references = sum(a.attr.value == name for a in ctx.nodes_of(cst.Attribute))
    return f"{cls.name.value}.{name}", fns[0], skip, references


def _parameter(
    fn: cst.FunctionDef, call: cst.Call, arg: cst.Arg, skip: int = 0
) -> cst.Param | None:
    """The plain parameter of ``fn`` that ``arg`` of ``call`` binds (the first ``skip``
    parameters bound otherwise: ``self``)."""
    params = list(fn.params.params)[skip:]
    if arg.keyword is not None:
        return next((p for p in params if p.name.value == arg.keyword.value), None)
    index = [a for a in call.args if a.keyword is None].index(arg)
    return params[index] if index < len(params) else None


def _related_classes(ctx: FileContext, cls: cst.CSTNode | None) -> set[int]:
    """The ids of ``cls`` and of the classes of the module it derives from or that derive from
    it, at any depth (their objects may be ``cls`` objects). A base named other than by a plain
    name (``torch.utils.data.DataLoader``) is not a class of the module."""
    classes = list(ctx.nodes_of(cst.ClassDef))
    if not isinstance(cls, cst.ClassDef):
        return {id(c) for c in classes} | {id(None)}
    bases = {
        id(c): {b.value.value for b in c.bases if isinstance(b.value, cst.Name)} for c in classes
    }
    related, grew = {id(cls)}, True
    while grew:
        names = {c.name.value for c in classes if id(c) in related}
        more = {
            id(c)
            for c in classes
            if id(c) not in related
            and (bases[id(c)] & names or any(c.name.value in bases[r] for r in related))
        }
        related |= more
        grew = bool(more)
    return related


def _self_attr(ctx: FileContext, node: cst.CSTNode) -> str | None:
    """``self.x`` in a method whose first parameter is ``self``: ``x``."""
    if not (isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name)):
        return None
    fn = enclosing(ctx, node, cst.FunctionDef)
    while fn is not None and not isinstance(ctx.parents.get(ctx.parents.get(fn)), cst.ClassDef):
        fn = enclosing(ctx, fn, cst.FunctionDef)
    if fn is None or not fn.params.params or fn.params.params[0].name.value != node.value.value:
        return None
    return node.attr.value


def adopt_meta_call(ctx: FileContext, inst: Any, call: cst.Call) -> bool:
    """``pipe.epoch_size(...)`` / ``pipe.reader_meta(...)`` after the one framework iterator over
    ``pipe`` is made, in the function that made it and keeps it in a name or a ``self``
    attribute: the loader that replaces the iterator has the reader (its metadata) then."""
    if len(inst.iterators) != 1:
        return False
    use = inst.iterators[0]
    holder = use.holder
    if not (isinstance(holder, cst.Name) or _self_attr(ctx, holder) is not None):
        return False
    scope = ctx.scopes.get(holder) if isinstance(holder, cst.Name) else None
    if scope is not None and len(scope.assignments[holder.value]) != 1:
        return False  # (the name may hold another loader there)
    made = ctx.enclosing_statement(use.call)
    fn = enclosing(ctx, made, cst.FunctionDef)
    if enclosing(ctx, call, cst.FunctionDef) is not fn or ctx.line_of(call) <= ctx.line_of(made):
        return False
    use.meta_calls.append(call)
    return True


def _returned_element(ctx: FileContext, expr: cst.CSTNode) -> tuple[cst.Return, int] | None:
    """``return it, steps``: the return and the index of ``expr`` in its tuple."""
    element = ctx.parents.get(expr)
    tup = ctx.parents.get(element)
    ret = ctx.parents.get(tup)
    if not (
        isinstance(element, cst.Element)
        and isinstance(tup, cst.Tuple)
        and isinstance(ret, cst.Return)
        and not any(isinstance(e, cst.StarredElement) for e in tup.elements)
    ):
        return None
    return ret, [e is element for e in tup.elements].index(True)


def _tuple_of(ctx: FileContext, call: cst.Call) -> list[cst.BaseElement] | None:
    """The elements of the tuple the function ``call`` calls returns (all its returns give
    tuples of one length: the first one's)."""
    func = call.func
    binding = binding_of(ctx, func) if isinstance(func, cst.Name) else None
    fn = getattr(binding, "node", None)
    if not isinstance(fn, cst.FunctionDef):
        return None
    returns = [n for n in walk(fn.body) if isinstance(n, cst.Return)]
    tuples = [r.value for r in returns if isinstance(r.value, cst.Tuple)]
    if len(tuples) != len(returns) or len({len(t.elements) for t in tuples}) != 1:
        return None
    return list(tuples[0].elements)


def _in_import(ctx: FileContext, node: cst.CSTNode) -> bool:
    """``node`` is part of a module name in an import statement."""
    while isinstance(node, (cst.Attribute, cst.Name)):
        node = ctx.parents.get(node)
    return isinstance(node, (cst.ImportFrom, cst.ImportAlias))


def enclosing(ctx: FileContext, node: cst.CSTNode, kind: type[_Node]) -> _Node | None:
    """The nearest ancestor of ``node`` of type ``kind``."""
    cur = ctx.parents.get(node)
    while cur is not None and not isinstance(cur, kind):
        cur = ctx.parents.get(cur)
    return cur


def _builtin_arg(ctx: FileContext, node: cst.CSTNode, name: str) -> bool:
    arg = ctx.parents.get(node)
    call = ctx.parents.get(arg)
    return (
        isinstance(arg, cst.Arg)
        and arg.keyword is None
        and not arg.star
        and isinstance(call, cst.Call)
        and isinstance(call.func, cst.Name)
        and call.func.value == name
        and len(call.args) == 1
    )


def _reset_stmt(ctx: FileContext, node: cst.CSTNode) -> cst.SimpleStatementLine | None:
    """``<node>.reset()`` as a statement of its own."""
    attr = ctx.parents.get(node)
    call = ctx.parents.get(attr)
    expr = ctx.parents.get(call)
    stmt = ctx.parents.get(expr)
    if (
        isinstance(attr, cst.Attribute)
        and attr.attr.value == "reset"
        and isinstance(call, cst.Call)
        and not call.args
        and call.func is attr
        and isinstance(expr, cst.Expr)
        and isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
    ):
        return stmt
    return None


def reset_rebind(ctx: FileContext, node: cst.CSTNode) -> cst.SimpleStatementLine | None:
    """``it = it.reset()`` (``self.it = self.it.reset()``), alone on its line, where ``node`` is
    either ``it``: the statement. The name or attribute then holds what reset() returned."""
    stmt = ctx.enclosing_statement(node)
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1):
        return None
    assign = stmt.body[0]
    if not (
        isinstance(assign, cst.Assign)
        and len(assign.targets) == 1
        and isinstance(call := assign.value, cst.Call)
        and not call.args
        and isinstance(attr := call.func, cst.Attribute)
        and attr.attr.value == "reset"
        and isinstance(attr.value, (cst.Name, cst.Attribute))
    ):
        return None
    target, read = assign.targets[0].target, attr.value
    if node is not target and node is not read:
        return None
    if not (target.deep_equals(read) and _same_holder(ctx, target, read)):
        return None
    return stmt


def _same_holder(ctx: FileContext, target: cst.BaseExpression, read: cst.BaseExpression) -> bool:
    """A plain name, or ``self.<attr>`` of the method's own object."""
    if isinstance(target, cst.Name):
        return True
    return _self_attr(ctx, target) is not None and _self_attr(ctx, read) is not None


def _loop_of(ctx: FileContext, node: cst.CSTNode) -> cst.For | None:
    """``for x in <node>`` / ``for i, x in enumerate(<node>)``: the loop."""
    parent = ctx.parents.get(node)
    if isinstance(parent, cst.For) and parent.iter is node:
        return parent
    if _builtin_arg(ctx, node, "enumerate"):
        call = ctx.parents.get(parent)
        loop = ctx.parents.get(call)
        if isinstance(loop, cst.For) and loop.iter is call:
            return loop
    return None


def loops_around(ctx: FileContext, node: cst.CSTNode) -> list[cst.For | cst.While]:
    """The for/while loops around ``node`` in its function (or module)."""
    out: list[cst.For | cst.While] = []
    node = ctx.parents.get(node)
    while node is not None and not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Module)):
        if isinstance(node, (cst.For, cst.While)):
            out.append(node)
        node = ctx.parents.get(node)
    return out
