"""The outputs of ``pipe.run()`` after the migration: ndd Batches where they were TensorLists.

Uses of the names bound to them are rewritten to the Batch API (``as_array()`` ->
``np.asarray(ndd.as_tensor(b))``, ``at(i)`` -> ``np.asarray(b.tensors[i])``, ``len()`` ->
``b.batch_size``...); a use the tool cannot follow gets a TODO next to it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import libcst as cst

from dali_migrate.context import FileContext, attr_chain
from dali_migrate.fixes import Diagnostic, Edit

from .._cst import in_source_order, int_index, walk, within
from .reaching import reaching
from .tensor_uses import tensor_edits

#: the TensorList methods that have a Batch-API counterpart
OUTPUT_METHODS = {"as_array", "as_tensor", "as_cpu", "at", "layout", "shape", "is_dense_tensor"}


def output_edits(
    ctx: FileContext,
    run: cst.Call,
    notes: list[Diagnostic],
    moved: cst.CSTNode | None,
    peers: tuple[cst.Call, ...] = (),
) -> list[Edit]:
    """Rewrite TensorList API uses of the names bound by ``a, b = pipe.run()`` /
    ``out = pipe.run()`` in the same scope, following ``a, b = out``, ``x = a`` and
    ``a = a.as_cpu()``. A TensorList handed to other code (``train_step(images)``) cannot be
    followed: it gets a TODO. ``moved``: graph code of the same scope that moves into the
    generator (names it assigns are not the run site's); ``peers``: the ``run()`` calls of the
    other instances migrated in the same fix.

    Scope analysis is not flow-sensitive: a use is rewritten only when every assignment it may
    refer to holds a TensorList, so the set of such assignments is grown to a fixed point first.
    """
    assign = ctx.parents.get(run)
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
        return _unnamed_output_edits(ctx, run, notes)
    scope = ctx.scopes.get(assign)
    if scope is None:
        return []
    tracker = _Tracker(ctx, scope, moved)
    tracker.bind(assign.targets[0].target, True)
    for peer in peers:
        holder = ctx.parents.get(peer)
        if (
            isinstance(holder, cst.Assign)
            and len(holder.targets) == 1
            and ctx.scopes.get(holder) is scope
        ):
            tracker.bind(holder.targets[0].target, True)
    while True:
        before = tracker.size()
        edits, todos, binds = tracker.plan()
        for target, whole in binds:
            tracker.bind(target, whole)
        if tracker.size() == before:
            break
    todos += _unsure_todos(ctx, tracker, run)
    edits += tensor_edits(ctx, scope, list(tracker.tensors.values()), todos)
    # a use reachable from several tracked assignments is found once per assignment
    notes.extend({(d.line, d.col, d.message): d for d in todos}.values())
    return list({(e.start, e.end): e for e in edits}.values())


_Bind = tuple[cst.BaseAssignTargetExpression, bool]


@dataclasses.dataclass(frozen=True)
class HandedBatch(Diagnostic):
    """The TODO at a Batch handed to a call (``show(images.as_cpu())``), with the call and
    its argument: ``batch_params`` rewrites the function instead where it can."""

    call: cst.Call | None = dataclasses.field(default=None, compare=False, repr=False)
    arg: cst.Arg | None = dataclasses.field(default=None, compare=False, repr=False)


def _unsure_todos(ctx: FileContext, tracker: _Tracker, run: cst.Call) -> list[Diagnostic]:
    """TODOs at TensorList calls on a name that may hold this run's outputs or other values:
    the tool rewrites neither, and a TensorList call on a Batch fails."""
    todos = []
    for name in tracker.unsure():
        expr, parent = name, ctx.parents.get(name)
        if isinstance(parent, cst.Subscript) and parent.value is expr:
            expr, parent = parent, ctx.parents.get(parent)
        call = ctx.parents.get(parent)
        if (
            isinstance(parent, cst.Attribute)
            and parent.attr.value in OUTPUT_METHODS
            and isinstance(call, cst.Call)
            and call.func is parent
        ):
            what = ctx.text(run.func)
            todos.append(
                ctx.todo(
                    "DM200",
                    parent,
                    f"`{ctx.text(parent)}()`: `{ctx.text(name)}` may hold the outputs of `{what}()` "
                    "(ndd Batches now) or other values: use the Batch API where it holds a "
                    "Batch (as_array() -> np.asarray(ndd.as_tensor(b)), at(i) -> "
                    "np.asarray(b.tensors[i]))",
                )
            )
    return todos


class _Tracker:
    """The names known to hold the outputs of a run: the whole tuple, or one TensorList."""

    def __init__(self, ctx: FileContext, scope: object, moved: cst.CSTNode | None) -> None:
        self.ctx, self.scope, self.moved = ctx, scope, moved
        self.tuples: dict[int, cst.Name] = {}  # names bound to the whole output tuple
        self.lists: dict[int, cst.Name] = {}  # names bound to one TensorList
        self.tensors: dict[int, cst.Name] = {}  # names bound to a TensorList's as_tensor()

    def size(self) -> int:
        return len(self.tuples) + len(self.lists)

    def bind(self, target: cst.BaseExpression, whole_tuple: bool) -> None:
        if isinstance(target, (cst.Tuple, cst.List)) and whole_tuple:
            for e in target.elements:
                self.bind(e.value, False)
        elif isinstance(target, cst.Name):
            (self.tuples if whole_tuple else self.lists)[id(target)] = target

    def uses(self) -> Iterator[tuple[cst.CSTNode, cst.Name, bool]]:
        """(reference node, its name, is_tuple) for references that surely hold our values."""
        for ref, name, is_tuple in self._references():
            holders = reaching(self.ctx, ref)
            if any(self._tracked(r) for r in holders) and all(self._ours(r) for r in holders):
                yield ref.node, name, is_tuple

    def unsure(self) -> Iterator[cst.CSTNode]:
        """References that may hold our values or something else (a name also bound to other
        values in the scope)."""
        for ref, _name, _is_tuple in self._references():
            holders = reaching(self.ctx, ref)
            if any(self._tracked(r) for r in holders) and not all(self._ours(r) for r in holders):
                yield ref.node

    def _references(self) -> Iterator[tuple[Any, cst.Name, bool]]:
        for table, is_tuple in ((self.tuples, True), (self.lists, False)):
            for name in list(table.values()):
                for a in self.scope.assignments[name.value]:  # type: ignore[attr-defined]
                    if a.node is not name:
                        continue
                    for ref in in_source_order(self.ctx, a.references):
                        yield ref, name, is_tuple

    def _tracked(self, referent: object) -> bool:
        """``referent`` binds a name to the outputs (libcst lists, among the references of a
        binding, reads that name a binding of a nested scope)."""
        node = getattr(referent, "node", None)
        return id(node) in self.tuples or id(node) in self.lists

    def _ours(self, referent: object) -> bool:
        node = getattr(referent, "node", None)
        return (
            id(node) in self.tuples or id(node) in self.lists or within(self.ctx, node, self.moved)
        )

    def plan(self) -> tuple[list[Edit], list[Diagnostic], list[_Bind]]:
        """One pass: the edits, the TODOs, and new names to bind."""
        edits: list[Edit] = []
        todos: list[Diagnostic] = []
        binds: list[_Bind] = []
        for expr, name, is_tuple in self.uses():
            self._use(expr, name, is_tuple, edits, todos, binds)
        return edits, todos, binds

    def _use(
        self,
        expr: cst.CSTNode,
        name: cst.Name,
        is_tuple: bool,
        edits: list[Edit],
        todos: list[Diagnostic],
        binds: list[_Bind],
    ) -> None:
        ctx = self.ctx
        parent = ctx.parents.get(expr)
        base: cst.BaseExpression = cst.Name(name.value)
        if is_tuple:
            if isinstance(parent, cst.Assign) and parent.value is expr and len(parent.targets) == 1:
                binds.append((parent.targets[0].target, True))
                return
            if isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is expr:
                todos.append(
                    ctx.todo(
                        "DM200",
                        expr,
                        f"`{ctx.text(expr)}` is iterated here: each of its items is an ndd Batch "
                        "now (it was a TensorList): rewrite their TensorList calls with the Batch "
                        "API (as_array() -> np.asarray(ndd.as_tensor(b)), at(i) -> "
                        "np.asarray(b.tensors[i]))",
                    )
                )
                return
            if not (
                isinstance(parent, cst.Subscript)
                and parent.value is expr
                and int_index(parent) is not None
            ):
                return
            expr = parent
            base = cst.Subscript(value=cst.Name(name.value), slice=parent.slice)
        outer, new = tensorlist_use(ctx, expr, base)
        if outer is not None and new is not None:
            edits.append(ctx.expr_edit(outer, new))
        result = (
            outer if outer is not None and new is not None and not _ends_conversion(new) else expr
        )
        holder = ctx.parents.get(result)
        if isinstance(holder, cst.Assign) and holder.value is result and len(holder.targets) == 1:
            binds.append((holder.targets[0].target, False))
        elif outer is not None and _as_tensor(new):
            stored = ctx.parents.get(outer)
            if isinstance(stored, cst.Assign) and len(stored.targets) == 1:
                target = stored.targets[0].target
                if isinstance(target, cst.Name):
                    self.tensors[id(target)] = target
        elif outer is None and _unknown_attribute(ctx, expr):
            attr = cst.ensure_type(ctx.parents.get(expr), cst.Attribute).attr.value
            todos.append(
                ctx.todo(
                    "DM200",
                    expr,
                    f"`{ctx.text(expr)}` is an ndd Batch now (it was a TensorList): "
                    f"TensorList.{attr} has no "
                    "Batch counterpart the tool knows; rewrite it with the Batch API by hand",
                )
            )
        elif (returned := _returned_to(ctx, result)) is not None:
            fn, calls = returned
            todos += [
                ctx.todo(
                    "DM200",
                    method,
                    f"`{ctx.text(method)}()`: `{fn}()` returns an ndd Batch now (it was a "
                    "TensorList): use the Batch API (as_cpu() -> .cpu(), as_array() -> "
                    "np.asarray(ndd.as_tensor(b)), at(i) -> np.asarray(b.tensors[i]))",
                )
                for method in calls
            ]
        elif (item := _iterated_item(ctx, result)) is not None:
            todos.append(
                ctx.todo(
                    "DM200",
                    result,
                    f"`{ctx.text(result)}` is an ndd Batch now: each `{item}` is an ndd Tensor "
                    "(it was a DALI Tensor): its Tensor calls need the ndd Tensor API "
                    "(as_cpu() -> .cpu())",
                )
            )
        elif _handed_over(ctx, result):  # the Batch itself, or still one (``x.as_cpu()``)
            arg = cst.ensure_type(ctx.parents.get(result), cst.Arg)
            call = cst.ensure_type(ctx.parents.get(arg), cst.Call)
            callee = ctx.text(call.func)
            todo = ctx.todo(
                "DM200",
                result,
                f"`{ctx.text(result)}` is an ndd Batch now (it was a TensorList): check that "
                f"`{callee}` uses the Batch API",
            )
            fields = {f.name: getattr(todo, f.name) for f in dataclasses.fields(todo)}
            todos.append(HandedBatch(**fields, call=call, arg=arg))


def _returned_to(ctx: FileContext, expr: cst.CSTNode) -> tuple[str, list[cst.Attribute]] | None:
    """``return expr`` (or ``return expr, ...``) from a function of the module: its name and the
    TensorList calls made on what its callers in the module bind from it (``out = f(...)``,
    ``a, b = f(...)``, then ``out.as_cpu()``), which fail on a Batch; None elsewhere."""
    parent = ctx.parents.get(expr)
    if isinstance(parent, cst.Element):
        parent = ctx.parents.get(ctx.parents.get(parent))
    fn = ctx.parents.get(ctx.parents.get(parent)) if isinstance(parent, cst.Return) else None
    while fn is not None and not isinstance(fn, cst.FunctionDef):
        fn = ctx.parents.get(fn)
    scope = ctx.scopes.get(fn) if isinstance(fn, cst.FunctionDef) else None
    if not isinstance(fn, cst.FunctionDef) or scope is None:
        return None
    calls: list[cst.Attribute] = []
    for a in scope.assignments[fn.name.value]:
        for ref in a.references if a.node is fn else ():
            call = ctx.parents.get(ref.node)
            if isinstance(call, cst.Call) and call.func is ref.node:
                calls += _tensorlist_calls(ctx, call)
    return fn.name.value, calls


def _tensorlist_calls(ctx: FileContext, value: cst.Call) -> list[cst.Attribute]:
    """TensorList method calls on ``value`` or on the names an assignment binds from it."""
    parent = ctx.parents.get(value)
    holders: list[cst.CSTNode] = [value]
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
        target = parent.targets[0].target
        names = [e.value for e in target.elements] if isinstance(target, cst.Tuple) else [target]
        scope = ctx.scopes.get(parent)
        for name in (n for n in names if isinstance(n, cst.Name) and scope is not None):
            holders += [
                r.node
                for a in scope.assignments[name.value]
                if a.node is name
                for r in a.references
            ]
    found = []
    for node in holders:
        attr = ctx.parents.get(node)
        call = ctx.parents.get(attr)
        if (
            isinstance(attr, cst.Attribute)
            and attr.value is node
            and attr.attr.value in OUTPUT_METHODS
            and isinstance(call, cst.Call)
            and call.func is attr
        ):
            found.append(attr)
    return found


def _iterated_item(ctx: FileContext, expr: cst.CSTNode) -> str | None:
    """``for img in expr`` (or a comprehension's) where a method is called on ``img``: the loop
    target's name (the items are ndd Tensors now, whose methods differ)."""
    loop = ctx.parents.get(expr)
    if not isinstance(loop, (cst.For, cst.CompFor)) or loop.iter is not expr:
        return None
    if not isinstance(loop.target, cst.Name):
        return None
    item = loop.target.value
    body = loop.body if isinstance(loop, cst.For) else ctx.parents.get(loop)
    for node in walk(body) if body is not None else ():
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and isinstance(node.func.value, cst.Name)
            and node.func.value.value == item
        ):
            return item
    return None


def _unnamed_output_edits(ctx: FileContext, run: cst.Call, notes: list[Diagnostic]) -> list[Edit]:
    """Outputs of a ``pipe.run()`` that is not assigned: ``pipe.run()[0].as_array()`` is
    rewritten whole; any other use of the outputs (iterated, returned, handed to a function,
    bound by ``x = pipe.run()[0]``) gets a TODO, since they are ndd Batches now."""
    parent = ctx.parents.get(run)
    if isinstance(parent, cst.Expr):
        return []  # the batch is dropped
    pipe = cst.ensure_type(run.func, cst.Attribute).value  # pipe.run()
    batch = cst.Call(func=cst.Name("next"), args=[cst.Arg(pipe)])
    if isinstance(parent, cst.Subscript) and parent.value is run and int_index(parent) is not None:
        outer, new = tensorlist_use(ctx, parent, cst.Subscript(value=batch, slice=parent.slice))
        if outer is not None and new is not None and _ends_conversion(new):
            return [ctx.expr_edit(outer, new)]
    if _unread_list(ctx, run):
        return []  # `warmup = [pipe.run() for _ in range(3)]` and never read
    what = ctx.text(pipe)
    notes.append(
        ctx.todo(
            "DM200",
            run,
            f"the outputs of {what}.run() are ndd Batches now (they were TensorLists), used here "
            "in a way the tool "
            "cannot follow: rewrite their TensorList calls with the Batch API (as_array() -> "
            "np.asarray(ndd.as_tensor(b)), at(i) -> np.asarray(b.tensors[i]), len() -> "
            "b.batch_size)",
        )
    )
    return []


def _unread_list(ctx: FileContext, run: cst.Call) -> bool:
    """``name = [pipe.run() for ...]`` where ``name`` is never read."""
    comp = ctx.parents.get(run)
    assign = ctx.parents.get(comp)
    if not (
        isinstance(comp, (cst.ListComp, cst.GeneratorExp))
        and comp.elt is run
        and isinstance(assign, cst.Assign)
    ):
        return False
    targets = [t.target for t in assign.targets if isinstance(t.target, cst.Name)]
    scope = ctx.scopes.get(assign)
    if scope is None or len(targets) != len(assign.targets):
        return False
    return all(not a.references for t in targets for a in scope.assignments[t.value] if a.node is t)


def _as_tensor(new: cst.BaseExpression | None) -> bool:
    """``new`` is ``ndd.as_tensor(...)`` (what ``out.as_tensor()`` became)."""
    return (
        isinstance(new, cst.Call)
        and isinstance(new.func, cst.Attribute)
        and new.func.attr.value == "as_tensor"
    )


def _ends_conversion(new: cst.BaseExpression) -> bool:
    """True when a rewritten TensorList use yields something else (an array, a tensor, a
    property), False when it is still a Batch (``x.cpu()``)."""
    return not (
        isinstance(new, cst.Call)
        and isinstance(new.func, cst.Attribute)
        and new.func.attr.value == "cpu"
    )


def _unknown_attribute(ctx: FileContext, expr: cst.CSTNode) -> bool:
    parent = ctx.parents.get(expr)
    return isinstance(parent, cst.Attribute) and parent.value is expr


def _handed_over(ctx: FileContext, expr: cst.CSTNode) -> bool:
    """``expr`` is passed to a call the tool cannot see into (not print/len/str/repr)."""
    arg = ctx.parents.get(expr)
    call = ctx.parents.get(arg)
    if not (isinstance(arg, cst.Arg) and isinstance(call, cst.Call) and arg.value is expr):
        return False
    return not (
        isinstance(call.func, cst.Name)
        and call.func.value in ("print", "len", "str", "repr", "type", "id")
    )


def tensorlist_use(
    ctx: FileContext, expr: cst.CSTNode, base: cst.BaseExpression
) -> tuple[cst.CSTNode | None, cst.BaseExpression | None]:
    """Climb from a TensorList expression through TensorList methods; returns the outermost
    expression to replace and its Batch-API replacement (or (None, None): nothing to do)."""
    current: cst.CSTNode = expr
    new: cst.BaseExpression = base
    changed = False
    while True:
        parent = ctx.parents.get(current)
        if isinstance(parent, cst.Attribute) and parent.value is current:
            call = ctx.parents.get(parent)
            method = parent.attr.value
            if isinstance(call, cst.Call) and call.func is parent and method in OUTPUT_METHODS:
                args = call.args
                if method == "as_cpu" and not args:
                    new = cst.Call(func=cst.Attribute(new, cst.Name("cpu")))
                    current, changed = call, True
                    continue
                done = _method_result(ctx, call, method, new)
                if done is not None:
                    return done
            elif method == "dtype" and not isinstance(call, cst.Call):
                # TensorList.dtype is a DALIDataType; Batch.dtype an ndd DType whose type_id is one
                return parent, cst.Attribute(
                    cst.Attribute(new, cst.Name("dtype")), cst.Name("type_id")
                )
            break
        if (
            isinstance(parent, cst.Subscript)
            and parent.value is current
            and int_index(parent) is not None
        ):
            return parent, cst.Subscript(
                value=cst.Attribute(new, cst.Name("tensors")), slice=parent.slice
            )
        if isinstance(parent, cst.Arg):
            call = ctx.parents.get(parent)
            if (
                isinstance(call, cst.Call)
                and isinstance(call.func, cst.Name)
                and call.func.value == "len"
                and len(call.args) == 1
            ):
                return call, cst.Attribute(new, cst.Name("batch_size"))
        break
    return (current, new) if changed else (None, None)


def _method_result(
    ctx: FileContext, call: cst.Call, method: str, new: cst.BaseExpression
) -> tuple[cst.CSTNode, cst.BaseExpression] | None:
    """``<TensorList>.<method>(...)``, the TensorList being ``new`` in the Batch API: the node to
    replace and its replacement (None: a method or arguments without a counterpart here)."""
    np = ctx.np
    ndd = ctx.ndd
    args = call.args
    if method == "as_tensor" and not args:
        tensor = cst.Call(func=attr_chain(f"{ndd}.as_tensor"), args=[cst.Arg(new)])
        # Tensor.shape()/.layout() are properties of an ndd Tensor
        attr = ctx.parents.get(call)
        outer = ctx.parents.get(attr)
        if (
            isinstance(attr, cst.Attribute)
            and attr.value is call
            and attr.attr.value in ("shape", "layout")
            and isinstance(outer, cst.Call)
            and outer.func is attr
            and not outer.args
        ):
            return outer, cst.Attribute(tensor, cst.Name(attr.attr.value))
        return call, tensor
    if method == "as_array" and not args:
        inner = cst.Call(func=attr_chain(f"{ndd}.as_tensor"), args=[cst.Arg(new)])
        return call, cst.Call(func=attr_chain(f"{np}.asarray"), args=[cst.Arg(inner)])
    if method == "at" and len(args) == 1 and args[0].keyword is None:
        pick = cst.Subscript(
            value=cst.Attribute(new, cst.Name("tensors")),
            slice=[cst.SubscriptElement(cst.Index(args[0].value))],
        )
        return call, cst.Call(func=attr_chain(f"{np}.asarray"), args=[cst.Arg(pick)])
    if method in ("layout", "shape") and not args:
        return call, cst.Attribute(new, cst.Name(method))
    if method == "is_dense_tensor" and not args:
        # no public counterpart: a batch is dense when all its samples have one shape
        shapes = cst.Call(cst.Name("set"), [cst.Arg(cst.Attribute(new, cst.Name("shape")))])
        length = cst.Call(cst.Name("len"), [cst.Arg(shapes)])
        return call, cst.Comparison(
            length, [cst.ComparisonTarget(cst.LessThanEqual(), cst.Integer("1"))]
        )
    return None
