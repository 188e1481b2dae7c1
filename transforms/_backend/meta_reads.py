"""Reads of ``pipe.epoch_size()`` / ``pipe.reader_meta()`` without a name that do not depend on
the dictionary's key. A component of DM200's handles (``handles.py``), not a rule.

Without ``name=``, ``Pipeline.epoch_size()`` returns ``{reader name: epoch_size_padded}`` and
``Pipeline.reader_meta()`` ``{reader name: metadata}``, one entry per reader of the pipeline. A
reader made without ``name=`` is keyed by the name DALI made up for it: ``"__<Schema>_<id>"``,
the id counting the pipeline's operators (``"__Webdataset_0"``, ``"__Numpy_3"``;
``ops._OperatorInstance._process_instance_name``), a key no code can spell reliably. So code
that reads such a dictionary takes its one value whatever the key is, which is what these
reads are; with one reader in the pipeline, each is the reader's own value, and becomes it.

Before::

    sizes = pipe.epoch_size()
    total = sizes[next(iter(sizes.keys()))]

After::

    total = reader.get_metadata()["epoch_size_padded"]

The forms read (``d`` the dictionary, or the call itself): ``d[next(iter(d))]``,
``d[next(iter(d.keys()))]``, ``d[list(d)[0]]``, ``d[list(d.keys())[0]]``,
``next(iter(d.values()))``, ``list(d.values())[0]``, ``tuple(d.values())[0]`` and
``sum``/``max``/``min(d.values())``. A dictionary bound to a name migrates this way only when
every read of that binding is one of them (its binding statement goes); any other use (printed,
indexed by a name, iterated) keeps the TODO, since the key it would see is not DALI's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata.scope_provider import BuiltinAssignment

from dali_migrate.context import FileContext
from dali_migrate.fixes import Edit

from .._cst import in_source_order, sole_assignment
from .edits import removed_stmt
from .reaching import reaching

#: ``f(d.values())`` with one entry: the entry
_AGGREGATES = ("sum", "max", "min")
#: whether an expression is the dictionary read (its binding's reads, or the call itself)
_Same = Callable[[cst.CSTNode], bool]


@dataclass
class KeyFreeReads:
    """Where a metadata dictionary is read without its key: the statement that binds it to a
    name (None: the call is read in place), and each read, outermost expressions."""

    binding: cst.SimpleStatementLine | None = None
    reads: list[cst.BaseExpression] = field(default_factory=list)


def key_free_reads(ctx: FileContext, call: cst.Call) -> KeyFreeReads | None:
    """The reads of what ``call`` (``pipe.epoch_size()``, ``pipe.reader_meta()``) returns, when
    every one of them is key-agnostic; None when one is not, or when that is not certain."""
    read = _read_of(ctx, call, lambda n: n is call)
    if read is not None:
        return KeyFreeReads(None, [read])
    assign = sole_assignment(ctx, call)
    if assign is None:
        return None
    stmt = cst.ensure_type(ctx.parents.get(assign), cst.SimpleStatementLine)
    if (
        len(getattr(ctx.parents.get(stmt), "body", ())) <= 1
    ):  # (the binding goes: not a block's only statement)
        return None
    refs = _references(ctx, cst.ensure_type(assign.targets[0].target, cst.Name))
    if not refs:
        return None
    ids = {id(r) for r in refs}
    reads: dict[int, cst.BaseExpression] = {}
    covered: set[int] = set()
    for ref in refs:
        if id(ref) in covered:
            continue
        found = _read_of(ctx, ref, lambda n: id(n) in ids)
        if found is None:
            return None
        reads[id(found)] = found
        covered |= {id(n) for n in _names_in(found) if id(n) in ids}
    return KeyFreeReads(stmt, list(reads.values()))


def key_free_edits(ctx: FileContext, found: KeyFreeReads, value: cst.BaseExpression) -> list[Edit]:
    """Each read becomes ``value`` (the reader's own entry); the binding statement goes."""
    edits = [ctx.expr_edit(read, value) for read in found.reads]
    if found.binding is not None:
        removed = removed_stmt(ctx, found.binding)
        comment = found.binding.trailing_whitespace.comment
        if comment is not None:  # it said something of the dictionary: it stays where it was
            line = "".join(ctx.indents(found.binding)) + comment.value + "\n"
            removed = Edit(removed.start, removed.end, removed.text + line)
        edits.append(removed)
    return edits


def _references(ctx: FileContext, target: cst.Name) -> list[cst.Name] | None:
    """The reads of the binding ``target`` (all of them in its scope, reached by it for
    certain); None when one may read another binding, or reads it from another scope."""
    scope = ctx.scopes.get(target)
    if scope is None:
        return None
    out: list[cst.Name] = []
    for assignment in scope.assignments[target.value]:
        if assignment.node is not target:
            continue
        for ref in in_source_order(ctx, assignment.references):
            holders = reaching(ctx, ref)
            if all(h is not assignment for h in holders):
                continue  # a later binding of the name is read there
            if len(holders) > 1 or ctx.scopes.get(ref.node) is not scope:
                return None
            if not isinstance(ref.node, cst.Name):
                return None
            out.append(ref.node)
    return out


def _read_of(ctx: FileContext, node: cst.CSTNode, same: _Same) -> cst.BaseExpression | None:
    """The key-agnostic read ``node`` (the dictionary) takes part in, or None."""
    parent = ctx.parents.get(node)
    if isinstance(parent, cst.Attribute) and parent.value is node:
        call = ctx.parents.get(parent)
        if not (isinstance(call, cst.Call) and call.func is parent and not call.args):
            return None
        if parent.attr.value == "values":
            return _values_read(ctx, call)
        return _key_read(ctx, call, same) if parent.attr.value == "keys" else None
    if isinstance(parent, cst.Subscript) and parent.value is node:
        key = _single_index(parent)
        source = _key_source(ctx, key) if key is not None else None
        return parent if source is not None and same(source) else None
    if isinstance(parent, cst.Arg):
        return _key_read(ctx, node, same)  # next(iter(d)), list(d)[0]
    return None


def _values_read(ctx: FileContext, values: cst.Call) -> cst.BaseExpression | None:
    """``next(iter(d.values()))``, ``list(d.values())[0]``, ``sum(d.values())``..."""
    outer = _call_taking(ctx, values, ("iter", "list", "tuple", *_AGGREGATES))
    if outer is None:
        return None
    if cst.ensure_type(outer.func, cst.Name).value in _AGGREGATES:
        return outer
    return _first_of(ctx, outer)


def _key_read(ctx: FileContext, keys: cst.CSTNode, same: _Same) -> cst.BaseExpression | None:
    """``keys`` (``d`` or ``d.keys()``) gives the key of ``d[<key>]``: that subscript."""
    outer = _call_taking(ctx, keys, ("iter", "list"))
    key = _first_of(ctx, outer) if outer is not None else None
    index = ctx.parents.get(key) if key is not None else None
    sub = ctx.parents.get(ctx.parents.get(index))
    if isinstance(index, cst.Index) and isinstance(sub, cst.Subscript) and len(sub.slice) == 1:
        return sub if same(sub.value) else None
    return None


def _first_of(ctx: FileContext, seq: cst.Call) -> cst.BaseExpression | None:
    """``next(iter(x))`` for ``iter(x)``, ``list(x)[0]`` / ``tuple(x)[0]`` for ``list(x)``."""
    if cst.ensure_type(seq.func, cst.Name).value == "iter":
        return _call_taking(ctx, seq, ("next",))
    sub = ctx.parents.get(seq)
    if isinstance(sub, cst.Subscript) and sub.value is seq:
        index = _single_index(sub)
        if isinstance(index, cst.Integer) and index.evaluated_value == 0:
            return sub
    return None


def _key_source(ctx: FileContext, key: cst.BaseExpression) -> cst.CSTNode | None:
    """The dictionary ``key`` takes its first key from: ``d`` in ``next(iter(d))``,
    ``next(iter(d.keys()))``, ``list(d)[0]`` or ``list(d.keys())[0]``; else None."""
    seq: cst.BaseExpression | None = None
    if isinstance(key, cst.Call) and _is_call(ctx, key, "next"):
        inner = key.args[0].value
        if isinstance(inner, cst.Call) and _is_call(ctx, inner, "iter"):
            seq = inner.args[0].value
    elif isinstance(key, cst.Subscript) and isinstance(key.value, cst.Call):
        index = _single_index(key)
        if _is_call(ctx, key.value, "list") and isinstance(index, cst.Integer):
            seq = key.value.args[0].value if index.evaluated_value == 0 else None
    if (
        isinstance(seq, cst.Call)
        and not seq.args
        and isinstance(seq.func, cst.Attribute)
        and seq.func.attr.value == "keys"
    ):
        return seq.func.value
    return seq


def _is_call(ctx: FileContext, node: cst.CSTNode, name: str) -> bool:
    """``node`` is ``<name>(x)``, ``name`` Python's builtin."""
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Name)
        and node.func.value == name
        and len(node.args) == 1
        and not node.args[0].star
        and node.args[0].keyword is None
        and _builtin(ctx, node.func)
    )


def _call_taking(
    ctx: FileContext, arg_value: cst.CSTNode, names: tuple[str, ...]
) -> cst.Call | None:
    """The call of a builtin of ``names`` whose one argument is ``arg_value``."""
    arg = ctx.parents.get(arg_value)
    call = ctx.parents.get(arg)
    if isinstance(arg, cst.Arg) and arg.value is arg_value and isinstance(call, cst.Call):
        if any(_is_call(ctx, call, n) for n in names):
            return call
    return None


def _builtin(ctx: FileContext, name: cst.Name) -> bool:
    """``name`` reads Python's builtin of that name (not a name the module binds)."""
    scope = ctx.scopes.get(name)
    if scope is None:
        return False
    referents = [
        a for access in scope.accesses[name.value] if access.node is name for a in access.referents
    ]
    return bool(referents) and all(isinstance(a, BuiltinAssignment) for a in referents)


def _single_index(sub: cst.Subscript) -> cst.BaseExpression | None:
    if len(sub.slice) == 1 and isinstance(sub.slice[0].slice, cst.Index):
        return sub.slice[0].slice.value
    return None


def _names_in(node: cst.CSTNode) -> list[cst.CSTNode]:
    out: list[cst.CSTNode] = []
    stack = [node]
    while stack:
        cur = stack.pop()
        out.append(cur)
        stack.extend(cur.children)
    return out
