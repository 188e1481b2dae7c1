"""Following a framework iterator through the code that uses it: names, ``self`` attributes,
returns to the callers of a factory, Lightning hooks, functions and classes of the module it is
passed to, down to the loops, ``len()``, ``reset()`` and ``next()`` that consume it."""

from __future__ import annotations

from typing import Any

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import in_source_order, scope_label, use_text, walk
from .iterator_use import IteratorUse
from .wrappers import binding_of

DATALOADER_HOOKS = ("train_dataloader", "val_dataloader", "test_dataloader", "predict_dataloader")


class Follower:
    """Every use of the iterator object: through names, ``self`` attributes, returns to the
    callers of a factory and Lightning hooks, to the loops, ``len()``, ``reset()`` and ``next()``
    that consume it. Anything else is a reason."""

    def __init__(self, ctx: FileContext, use: IteratorUse, reasons: list[str]) -> None:
        self.ctx, self.use, self.reasons = ctx, use, reasons
        #: functions the iterator is passed to, and the calls of each that pass it
        self.callees: dict[str, tuple[cst.FunctionDef, Any, set[int]]] = {}

    def finish(self) -> None:
        """A function the iterator is passed to must get it (or another iterator of this
        configuration, made by the same code) at every call: its resets are rewritten."""
        for fn, binding, calls in self.callees.values():
            if len(binding.references) != len(calls):
                self.reasons.append(
                    f"{fn.name.value}() takes the iterator and is called in several places, "
                    "with other values too"
                )

    def value(self, expr: cst.CSTNode, depth: int) -> None:
        """``expr`` evaluates to the iterator."""
        ctx = self.ctx
        parent = ctx.parents.get(expr)
        if isinstance(parent, cst.Assign) and parent.value is expr and len(parent.targets) == 1:
            self._bound(parent.targets[0].target, depth)
        elif isinstance(parent, cst.Return):
            self._returned(parent, depth)
        else:
            self._terminal(expr, depth)

    def _bound(self, target: cst.BaseAssignTargetExpression, depth: int) -> None:
        ctx = self.ctx
        if isinstance(target, cst.Name):
            scope = ctx.scopes.get(target)
            bindings = list(scope.assignments[target.value]) if scope is not None else []
            if len(bindings) != 1:
                self.reasons.append(f"`{target.value}` is assigned more than once")
                return
            self._holder(target)
            for ref in in_source_order(ctx, bindings[0].references):
                if ctx.scopes.get(ref.node) is not scope:
                    self.reasons.append(
                        f"`{target.value}` is used in another scope, {scope_label(ctx, ref.node)}"
                    )
                else:
                    self._terminal(ref.node, depth)
        elif _self_attr(ctx, target) is not None:
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
        reads = []
        for node in ctx.nodes_of(cst.Attribute):
            if node.attr.value != attr or node is target:
                continue
            stored = isinstance(ctx.parents.get(node), cst.AssignTarget)
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

    def _returned(self, ret: cst.Return, depth: int) -> None:
        ctx = self.ctx
        fn = enclosing(ctx, ret, cst.FunctionDef)
        owner = ctx.parents.get(fn) if fn is not None else None
        if isinstance(owner, cst.IndentedBlock):
            owner = ctx.parents.get(owner)
        if fn is not None and isinstance(owner, cst.ClassDef) and fn.name.value in DATALOADER_HOOKS:
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
        if refs is None:
            self.reasons.append(
                f"the iterator is returned {scope_label(ctx, ret)} to code the tool cannot follow"
            )
            return
        if not refs:
            self.reasons.append(
                f"{fn.name.value}() returns the iterator, and is not called in this module"
            )
        calls = [r for r in refs if isinstance(ctx.parents.get(r), cst.Call)]
        self.use.copies *= max(len(calls), 1)  # each call makes an iterator
        for ref in refs:
            call = ctx.parents.get(ref)
            if isinstance(call, cst.Call) and call.func is ref:
                if loops_around(ctx, call):
                    self.use.copies *= 2
                self.value(call, depth + 1)
            else:
                self.reasons.append(
                    f"`{fn.name.value}` (which returns the iterator) is used other than by "
                    f"calling it, {scope_label(ctx, ref)}"
                )

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
            self._returned(parent, depth)
        elif _builtin_arg(ctx, node, "len"):
            use.lens.append((node, ""))
        elif _builtin_arg(ctx, node, "next"):
            use.pulls.append(ctx.parents.get(parent))
        elif _reset_stmt(ctx, node) is not None:
            use.resets.append(_reset_stmt(ctx, node))
        elif (
            isinstance(parent, cst.Attribute)
            and parent.value is node
            and parent.attr.value == "_size"
            and not isinstance(ctx.parents.get(parent), (cst.AssignTarget, cst.AugAssign))
        ):
            use.size_reads.append(parent)
        elif not self._passed(node, depth):
            self.reasons.append(
                f"`{use_text(ctx, node)}` {scope_label(ctx, node)} uses `{ctx.text(node)}` in a "
                "way the tool cannot follow (only loops over it, len(), next() and reset())"
            )

    def _passed(self, node: cst.CSTNode, depth: int) -> bool:
        """``train(model, loader)`` where ``train`` is a function of this module called only
        there: its parameter is followed (the tool rewrites the resets it finds there)."""
        ctx = self.ctx
        arg = ctx.parents.get(node)
        call = ctx.parents.get(arg)
        if not (isinstance(arg, cst.Arg) and not arg.star and isinstance(call, cst.Call)):
            return False
        if not isinstance(call.func, cst.Name) or depth >= 3:
            return False
        binding = binding_of(ctx, call.func)
        fn = getattr(binding, "node", None)  # builtins have no node
        if not (isinstance(fn, cst.FunctionDef) and isinstance(ctx.parents.get(fn), cst.Module)):
            return False
        followed = fn.name.value in self.callees
        self.callees.setdefault(fn.name.value, (fn, binding, set()))[2].add(id(call))
        if followed:
            return True  # its parameter's uses are recorded already
        param = _parameter(fn, call, arg)
        scope = ctx.scopes.get(fn.body) if param is not None else None
        bindings = list(scope.assignments[param.name.value]) if scope is not None else []
        if param is None or len(bindings) != 1 or bindings[0].node is not param:
            self.reasons.append(
                f"the parameter of {fn.name.value}() that takes the iterator is rebound"
            )
            return True
        for ref in in_source_order(ctx, bindings[0].references):
            self._terminal(ref.node, depth + 1)
        return True


def _parameter(fn: cst.FunctionDef, call: cst.Call, arg: cst.Arg) -> cst.Param | None:
    """The plain parameter of ``fn`` that ``arg`` of ``call`` binds."""
    params = list(fn.params.params)
    if arg.keyword is not None:
        return next((p for p in params if p.name.value == arg.keyword.value), None)
    index = [a for a in call.args if a.keyword is None].index(arg)
    return params[index] if index < len(params) else None


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


def enclosing(ctx: FileContext, node: cst.CSTNode, kind: type) -> cst.CSTNode | None:
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


def check_uses(ctx: FileContext, use: IteratorUse, reasons: list[str]) -> None:
    """What the loops, len(), reset() and next() found say about the loader: early exits,
    where each len() is, resets inside loops, code that pulls."""
    for loop in use.loops:
        if loop.orelse is not None:
            header = f"for {ctx.text(loop.target)} in {ctx.text(loop.iter)}"
            reasons.append(f"the loop `{header}` {scope_label(ctx, loop)} has an else clause")
        # DALI's iterator resumes an epoch left early (it ignores reset() until the epoch is over)
        if any(isinstance(n, (cst.Break, cst.Return, cst.Raise)) for n in _walk_loop(loop.body)):
            use.early_exit = True
    for r in use.resets:
        if any(a is lp for a in loops_around(ctx, r) for lp in use.loops):
            # after the last batch DALI's reset() starts the next epoch inside the same loop
            reasons.append(
                f"{use.name}.reset() {scope_label(ctx, r)} is inside a loop over the iterator"
            )
    if use.pulls:
        _check_pulls(ctx, use, reasons)
    if use.lens and not use.sized:
        reasons.append(
            f"len({ctx.text(use.lens[0][0])}) {scope_label(ctx, use.lens[0][0])} of an iterator "
            "without reader_name or "
            "size (DALI's len() gives 0 there; the loader has no epochs to count)"
        )
    first = min(use.loops, key=ctx.line_of, default=None)
    placed = []
    for node, _ in use.lens:
        ancestors = loops_around(ctx, node)
        where = "other"
        same = first is None or enclosing(ctx, node, cst.FunctionDef) is enclosing(
            ctx, first, cst.FunctionDef
        )
        if any(a is lp for a in ancestors for lp in use.loops):
            where = "loop"
        elif not ancestors and same and (first is None or ctx.line_of(node) < ctx.line_of(first)):
            where = "first"
        placed.append((node, where))
    use.lens = placed


def _check_pulls(ctx: FileContext, use: IteratorUse, reasons: list[str]) -> None:
    """Code that takes batches with ``next(it)`` and starts the next epoch with ``it.reset()``
    on StopIteration: ``it`` becomes ``iter(loader)``, again at each reset."""
    if use.loops or use.hooked:
        reasons.append("the iterator is both looped over and taken from with next()")
    if use.holder is None:
        reasons.append("next() on an iterator that is not kept in a name or a self attribute")
    if use.auto_reset:
        reasons.append(
            "next() on an iterator with auto_reset (the loader needs the reset() to start an epoch)"
        )
    for r in use.resets:
        handler = enclosing(ctx, r, cst.ExceptHandler)
        if handler is None or not (
            isinstance(handler.type, cst.Name) and handler.type.value == "StopIteration"
        ):
            reasons.append(
                f"{use.name}.reset() {scope_label(ctx, r)} is not in an `except StopIteration:`"
            )


def loops_around(ctx: FileContext, node: cst.CSTNode) -> list[cst.CSTNode]:
    """The for/while loops around ``node`` in its function (or module)."""
    out = []
    node = ctx.parents.get(node)
    while node is not None and not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Module)):
        if isinstance(node, (cst.For, cst.While)):
            out.append(node)
        node = ctx.parents.get(node)
    return out


def _walk_loop(node: cst.CSTNode):
    """Like walk, but not into nested loops (their break is theirs) or functions."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            continue
        if isinstance(n, (cst.For, cst.While)) and n is not node:
            # a return inside a nested loop still leaves the epoch
            stack.extend(
                x for x in walk(n.body) if isinstance(x, (cst.Return, cst.Yield, cst.Raise))
            )
            continue
        stack.extend(reversed(n.children))
