"""Subclasses of a DALI framework iterator that only override ``__next__`` to convert each batch
(the shape Lightning examples and classification scripts use): the conversion moves into the
loader, where the batch is made, and the subclass goes.

Before::

    class LabelledIterator(DALIGenericIterator):
        def __next__(self):
            batch = super().__next__()[0]
            return batch["data"], batch["label"].squeeze(-1).long()

    loader = LabelledIterator([pipe], ["data", "label"], reader_name="Reader")

After (in the loader's ``__iter__``)::

            yield images.torch(), labels.torch().squeeze(-1).long()

``super().__next__()`` is the batch the iterator gave (``[{"data": ..., "label": ...}]``),
``self.output_map`` its names; indexing a literal list or dict is done in place, and a dict bound
to a name that is only indexed by literal keys (each once) is inlined. Anything else in the
subclass (other methods, other uses of ``self``, names of the enclosing function) keeps it, with a
TODO; an ``__iter__`` that only rewinds an ended epoch (``if self._counter >= self._size:
self.reset()``, then ``return self``) goes with it, as each pass over the loader is one epoch.
"""

from __future__ import annotations

from typing import NamedTuple

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import assigned_names, free_names, walk
from .base_internals import rewinding_iter
from .subclass_init import init_reasons, method, own_init, resolved_call
from .wrappers import binding_of

#: names the body of ``__next__`` may read from ``self``
SELF_ATTRIBUTES = ("output_map",)


class SubclassUse(NamedTuple):
    """A subclass of a DALI iterator made at a call (``iterator_subclass``)."""

    cls: cst.ClassDef
    base: str  # the iterator's qualified name
    reasons: list[str]  # why it cannot move into a loader
    #: where it defines ``__init__``: the iterator call that stands for it (``subclass_init``)
    resolved: cst.Call | None
    #: the type annotations that name it (``-> MyIterator``): they name the loader instead
    annotations: list[cst.CSTNode]


def iterator_subclass(
    ctx: FileContext, call: cst.Call, iterators: tuple[str, ...], ref: cst.CSTNode | None = None
) -> SubclassUse | None:
    """``call`` makes an object of a class defined here that subclasses one of ``iterators``
    (``ref``: the pipeline the call is given)."""
    if not isinstance(call.func, cst.Name):
        return None
    binding = binding_of(ctx, call.func)
    if not isinstance(getattr(binding, "node", None), cst.ClassDef):  # builtins have no node
        return None
    cls = binding.node
    bases = [ctx.qualname(b.value) for b in cls.bases]
    base = next((b for b in bases if b in iterators), None)
    if base is None:
        return None
    refs = [r.node for r in binding.references]
    notes = [r for r in refs if _annotates(ctx, r)]
    reasons = _class_reasons(ctx, cls, len(bases), [r for r in refs if r not in notes])
    resolved = None
    if not reasons and own_init(cls) is not None:
        made = (
            resolved_call(cls, call, ref, cls.bases[0].value)
            if ref is not None
            else "the pipeline it is given is not followed"
        )
        if isinstance(made, str):
            reasons.append(made)
        else:
            resolved = made
    if not reasons and rewinding_iter(cls) is not None:
        reasons += _unsized(cls, resolved if resolved is not None else call)
    return SubclassUse(cls, base, reasons, resolved, notes)


def _unsized(cls: cst.ClassDef, call: cst.Call) -> list[str]:
    """An ``__iter__`` that rewinds an ended epoch where the iterator has neither reader_name nor
    a positive literal size=: DALI may reset it at every pass (``_size < 0``), even a fresh one."""
    for a in call.args:
        key = a.keyword.value if a.keyword is not None else None
        if key == "reader_name" or (
            key == "size" and isinstance(a.value, cst.Integer) and int(a.value.value, 0) > 0
        ):
            return []
    return [f"{cls.name.value}.__iter__ resets an iterator without reader_name or a size= > 0"]


def _annotates(ctx: FileContext, node: cst.CSTNode) -> bool:
    """``node`` is a name that makes up a type annotation (``-> MyIterator``) alone."""
    return isinstance(node, cst.Name) and isinstance(ctx.parents.get(node), cst.Annotation)


def _class_reasons(
    ctx: FileContext, cls: cst.ClassDef, bases: int, refs: list[cst.CSTNode]
) -> list[str]:
    name = cls.name.value
    if bases != 1 or cls.keywords or cls.decorators:
        return [f"{name} has other bases, keywords or decorators"]
    if len(refs) != 1:
        return [f"{name} is used in more than one place"]
    body = [s for s in cls.body.body if not _is_doc_or_pass(s)]
    # an __iter__ that rewinds an ended epoch where a pass starts: each pass over the loader is
    # one epoch (``base_internals``)
    rewinds = rewinding_iter(cls)
    body = [s for s in body if s is not rewinds]
    names = [s.name.value if isinstance(s, cst.FunctionDef) else "" for s in body]
    if not names or len(set(names)) != len(names) or not set(names) <= {"__init__", "__next__"}:
        return [f"{name} defines more than __init__ and __next__"]
    reasons = init_reasons(cls)
    nxt = method(cls, "__next__")
    if reasons or nxt is None:
        return reasons
    params = nxt.params
    if (
        len(params.params) != 1
        or params.star_arg is not cst.MaybeSentinel.DEFAULT
        or params.kwonly_params
    ):
        return [f"{name}.__next__ takes other parameters than self"]
    return _next_reasons(ctx, cls, nxt)


def _next_reasons(ctx: FileContext, cls: cst.ClassDef, nxt: cst.FunctionDef) -> list[str]:
    name = cls.name.value
    stmts = list(nxt.body.body)
    last = stmts[-1]
    ret = (
        last.body[0] if isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1 else None
    )
    if not (isinstance(ret, cst.Return) and ret.value is not None):
        return [f"{name}.__next__ does not end with `return <batch>`"]
    supers = [n for n in walk(nxt) if _is_super_next(n)]
    if len(supers) != 1:
        return [f"{name}.__next__ does not call super().__next__() exactly once"]
    for n in walk(nxt.body):
        if (
            isinstance(
                n, (cst.Return, cst.Yield, cst.Raise, cst.Try, cst.Global, cst.Nonlocal, cst.Await)
            )
            and n is not ret
        ):
            return [f"{name}.__next__ returns, raises or catches in the middle"]
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return [f"{name}.__next__ defines functions"]
        if isinstance(n, cst.Name) and n.value == "self" and not _allowed_self(ctx, n):
            return [f"{name}.__next__ uses self other than as self.output_map"]
    outer = ctx.scopes.get(cls)
    if outer is not None and not isinstance(ctx.parents.get(cls), cst.Module):
        local = {a.name for a in outer.assignments}
        closed = free_names(nxt.body) & local - {"self"}
        if closed:
            return [f"{name}.__next__ reads `{sorted(closed)[0]}` of the function it is defined in"]
    return []


def _is_doc_or_pass(s: cst.CSTNode) -> bool:
    if not isinstance(s, cst.SimpleStatementLine) or len(s.body) != 1:
        return False
    small = s.body[0]
    return isinstance(small, cst.Pass) or (
        isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString)
    )


def _is_super_next(n: cst.CSTNode) -> bool:
    return (
        isinstance(n, cst.Call)
        and not n.args
        and isinstance(n.func, cst.Attribute)
        and n.func.attr.value == "__next__"
        and isinstance(n.func.value, cst.Call)
        and isinstance(n.func.value.func, cst.Name)
        and n.func.value.func.value == "super"
        and not n.func.value.args
    )


def _allowed_self(ctx: FileContext, name: cst.Name) -> bool:
    parent = ctx.parents.get(name)
    if isinstance(parent, cst.Param):
        return True
    return bool(
        isinstance(parent, cst.Attribute)
        and parent.value is name
        and parent.attr.value in SELF_ATTRIBUTES
    )


# -- folding __next__ into the loader ------------------------------------------------------------


def folded_next(
    cls: cst.ClassDef, batch: cst.BaseExpression, output_map: list[str]
) -> list[cst.BaseStatement]:
    """The statements of ``cls.__next__`` with ``super().__next__()`` the loader's ``batch`` and
    ``self.output_map`` the names, ending in ``yield`` where it returned."""
    nxt = method(cls, "__next__")
    assert nxt is not None  # (the loader yields the batch itself where there is none)
    names = cst.List([cst.Element(cst.SimpleString(f'"{n}"')) for n in output_map])
    # an indented block that ends with `return <batch>` (``_next_reasons``)
    block = cst.ensure_type(nxt.body, cst.IndentedBlock)
    stmts = [_visited(s, _Fold(batch, names)) for s in block.body if not _is_doc_or_pass(s)]
    stmts = _inline_dicts(_picked_again(stmts))
    last = cst.ensure_type(stmts[-1], cst.SimpleStatementLine)
    ret = cst.ensure_type(last.body[0], cst.Return)
    stmts[-1] = last.with_changes(body=[cst.Expr(cst.Yield(ret.value))])
    return [s.with_changes(leading_lines=[]) if i == 0 else s for i, s in enumerate(stmts)]


def body_names(cls: cst.ClassDef) -> tuple[set[str], set[str]]:
    """The names ``__next__`` binds and those it reads from outside."""
    nxt = method(cls, "__next__")
    if nxt is None:
        return set(), set()
    bound = set().union(*(assigned_names(s) for s in nxt.body.body))
    return bound, free_names(nxt.body) - bound - {"self", "super"}


def _visited(stmt: cst.BaseStatement, visitor: cst.CSTTransformer) -> cst.BaseStatement:
    new = stmt.visit(visitor)
    assert isinstance(new, cst.BaseStatement)  # _Fold and _Inline rewrite expressions only
    return new


class _Fold(cst.CSTTransformer):
    def __init__(self, batch: cst.BaseExpression, names: cst.List) -> None:
        super().__init__()
        self.batch, self.names = batch, names

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        return self.batch.deep_clone() if _is_super_next(original) else updated

    def leave_Attribute(
        self, original: cst.Attribute, updated: cst.Attribute
    ) -> cst.BaseExpression:
        if (
            isinstance(updated.value, cst.Name)
            and updated.value.value == "self"
            and updated.attr.value == "output_map"
        ):
            return self.names.deep_clone()
        return updated

    def leave_Subscript(
        self, original: cst.Subscript, updated: cst.Subscript
    ) -> cst.BaseExpression:
        return _picked(updated) or updated


def _picked(sub: cst.Subscript) -> cst.BaseExpression | None:
    """``[x][0]`` -> ``x``; ``{"k": v}["k"]`` -> ``v``."""
    if len(sub.slice) != 1 or not isinstance(sub.slice[0].slice, cst.Index):
        return None
    key = sub.slice[0].slice.value
    if isinstance(sub.value, cst.List) and isinstance(key, cst.Integer):
        i = int(key.value)
        return sub.value.elements[i].value if 0 <= i < len(sub.value.elements) else None
    if isinstance(sub.value, cst.Dict) and isinstance(key, cst.SimpleString):
        for e in sub.value.elements:
            if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString):
                if e.key.evaluated_value == key.evaluated_value:
                    return e.value
    return None


def _inline_dicts(stmts: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """``batch = {...}`` whose later uses are all ``batch["key"]``, each key once: the values
    take the place of those uses and the assignment goes."""
    for i, s in enumerate(stmts):
        small = s.body[0] if isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1 else None
        if not (
            isinstance(small, cst.Assign)
            and len(small.targets) == 1
            and isinstance(small.value, cst.Dict)
            and isinstance(small.targets[0].target, cst.Name)
        ):
            continue
        name = small.targets[0].target.value
        rest = stmts[i + 1 :]
        uses = [n for r in rest for n in walk(r) if isinstance(n, cst.Name) and n.value == name]
        keys = [
            _key_of(r, n)
            for r in rest
            for n in walk(r)
            if isinstance(n, cst.Subscript)
            and isinstance(n.value, cst.Name)
            and n.value.value == name
        ]
        have = {
            e.key.evaluated_value
            for e in small.value.elements
            if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)
        }
        if (
            None in keys
            or len(keys) != len(uses)
            or len(set(keys)) != len(keys)
            or not set(keys) <= have
        ):
            continue
        if any(name in assigned_names(r) for r in rest):
            continue
        folded = [_visited(r, _Inline(name, small.value)) for r in rest]
        return _inline_dicts(stmts[:i] + folded)
    return stmts


def _picked_again(stmts: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """``out = [x]`` then ``out = out[0]`` (the batch of the one pipeline taken in two steps):
    ``out = x``."""
    out: list[cst.BaseStatement] = []
    for s in stmts:
        prev = _assign(out[-1]) if out else None
        cur = _assign(s)
        if prev is not None and cur is not None and prev[0] == cur[0]:
            value = cur[1]
            if (
                isinstance(value, cst.Subscript)
                and isinstance(value.value, cst.Name)
                and value.value.value == cur[0]
            ):
                picked = _picked(value.with_changes(value=prev[1]))
                if picked is not None:
                    last = cst.ensure_type(out[-1], cst.SimpleStatementLine)
                    small = cst.ensure_type(last.body[0], cst.Assign)
                    out[-1] = last.with_changes(body=[small.with_changes(value=picked)])
                    continue
        out.append(s)
    return out


def _assign(s: cst.BaseStatement) -> tuple[str, cst.BaseExpression] | None:
    """``name = value``: (name, value)."""
    small = s.body[0] if isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1 else None
    if (
        isinstance(small, cst.Assign)
        and len(small.targets) == 1
        and isinstance(small.targets[0].target, cst.Name)
    ):
        return small.targets[0].target.value, small.value
    return None


def _key_of(stmt: cst.CSTNode, sub: cst.Subscript) -> str | None:
    if len(sub.slice) == 1 and isinstance(sub.slice[0].slice, cst.Index):
        key = sub.slice[0].slice.value
        if isinstance(key, cst.SimpleString) and isinstance(key.evaluated_value, str):
            return key.evaluated_value
    return None


class _Inline(cst.CSTTransformer):
    def __init__(self, name: str, value: cst.Dict) -> None:
        super().__init__()
        self.name, self.value = name, value

    def leave_Subscript(
        self, original: cst.Subscript, updated: cst.Subscript
    ) -> cst.BaseExpression:
        if isinstance(updated.value, cst.Name) and updated.value.value == self.name:
            picked = _picked(updated.with_changes(value=self.value))
            if picked is not None:
                return picked
        return updated
