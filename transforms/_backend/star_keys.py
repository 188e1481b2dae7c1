"""The keywords a ``**name`` (and the values a ``*[...]``) hands a call that makes a pipeline,
where the code lets the tool read them all (:func:`unpacked`), and the call as if they were
written out (:func:`written_out`), for the rules that read a creation's arguments.

The keys of ``**name`` can be read when ``name`` is a local name of one function bound once, to
a dict literal with string keys or a ``dict(k=v, ...)`` call, and every other use of it adds
only literal keys (``name.update({...})``, ``name.update(k=v)``, ``name["k"] = v``,
``name.setdefault("k", v)``) or only reads it (``name["k"]``, ``name.get(...)``, ``**name``,
``"k" in name``, ``len(name)``, ``.keys()``/``.values()``/``.items()``/``.copy()``). Keys the
literal binds, or a statement of the function's own body adds before the call, are always there;
the others may be. A constant that only the literal sets reads as written there.

Before::

    kw = {"batch_size": size, "num_threads": 2}
    if fast:
        kw["seed"] = 1
    pipe = TrainPipe(root, **kw)

reads as ``TrainPipe(root, batch_size=kw["batch_size"], num_threads=2, seed=kw.get("seed",
<its default>))``; the rewrite of the call passes the dict on, less the keys it takes out.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import libcst as cst
from libcst.metadata.scope_provider import BuiltinAssignment

from dali_migrate.context import FileContext

from .flow_sites import enclosing_function

#: methods of a dict that read it (or copy it) without adding keys
_READING = frozenset({"get", "keys", "values", "items", "copy"})
#: methods that add the keys they are given
_ADDING = frozenset({"update", "setdefault"})


@dataclass
class Unpacked:
    """What the star arguments of one call hand it: keyword -> always there (else it may be),
    the expressions that give each keyword's value, and the values of ``*[...]`` in order."""

    keys: dict[str, bool] = field(default_factory=dict)
    values: dict[str, cst.BaseExpression] = field(default_factory=dict)
    #: ``**name``: the name, for ``name["k"]``/``name.get("k", ...)`` (None: a literal)
    holders: dict[str, cst.Name] = field(default_factory=dict)


def unpacked(ctx: FileContext, call: cst.Call) -> Unpacked | str:
    """The keywords of the call's ``**`` arguments and the values of its ``*`` ones; else why
    the tool cannot read them (for the TODO)."""
    out = Unpacked()
    written = {a.keyword.value for a in call.args if a.keyword is not None}
    for i, arg in enumerate(call.args):
        if arg.star == "*":
            if not _plain_sequence(arg.value):
                return f"`*{ctx.text(arg.value)}` is not a list or tuple written out here"
            if any(a.keyword is None and a.star != "**" for a in call.args[i + 1 :]):
                # (the rules read positional arguments by their place in the call)
                return f"positional arguments follow `*{ctx.text(arg.value)}`"
        elif arg.star == "**":
            why = _read_dict(ctx, arg.value, out, call)
            if why:
                return why
    twice = sorted(written & set(out.keys))
    if twice:
        return f"`{twice[0]}` is given twice"
    return out


def written_out(
    call: cst.Call, found: Unpacked, default_of: Callable[[str], cst.BaseExpression | None]
) -> cst.Call:
    """``call`` as if its star arguments were written out (never rendered as a whole): a key
    always there reads ``name["k"]``; one that may be missing ``name.get("k", <default>)``
    where the parameter it binds has one (``default_of``)."""
    args: list[cst.Arg] = []
    for arg in call.args:
        if arg.star == "*":
            seq = arg.value
            assert isinstance(seq, (cst.List, cst.Tuple))  # (unpacked() read it)
            args += [cst.Arg(e.value) for e in seq.elements]
        elif arg.star == "**":
            keys = _keys_of(arg.value, found)
            args += [cst.Arg(key_value(k, found, default_of), keyword=cst.Name(k)) for k in keys]
        else:
            args.append(arg)
    return call.with_changes(args=args)


def without_keys(mapping: cst.BaseExpression, keys: Collection[str]) -> cst.BaseExpression:
    """``**<mapping>`` handing on every key but ``keys``: a dict written out loses them, any
    other becomes ``{k: v for k, v in <mapping>.items() if k not in {"a", "b"}}``."""
    if not keys:
        return mapping
    items = _literal_items(mapping)
    if isinstance(mapping, cst.Dict) and items is not None:
        kept = [e for e in mapping.elements if _key_text(e) not in keys]
        return mapping.with_changes(elements=_closed(kept, mapping.elements))
    if isinstance(mapping, cst.Call) and items is not None:
        args = [a for a in mapping.args if a.keyword is None or a.keyword.value not in keys]
        return mapping.with_changes(args=_closed(args, mapping.args))
    names = [cst.Element(cst.SimpleString(f'"{k}"')) for k in sorted(keys)]
    comp = cst.ensure_type(cst.parse_expression("{k: v for k, v in _.items()}"), cst.DictComp)
    items_call = cst.Call(cst.Attribute(mapping, cst.Name("items")))
    test = cst.Comparison(cst.Name("k"), [cst.ComparisonTarget(cst.NotIn(), cst.Set(names))])
    return comp.with_changes(
        for_in=comp.for_in.with_changes(iter=items_call, ifs=[cst.CompIf(test)])
    )


def passed_on(args: Sequence[cst.Arg], gone: Collection[str]) -> list[cst.Arg]:
    """``args`` with each ``**`` argument handing on every key but ``gone`` (:func:`without_keys`);
    a dict written out that is left empty goes."""
    out: list[cst.Arg] = []
    for a in args:
        if a.star != "**" or not gone:
            out.append(a)
            continue
        value = without_keys(a.value, gone)
        if not (isinstance(value, cst.Dict) and not value.elements):
            out.append(a.with_changes(value=value))
    return _closed(out, args)


def _key_text(element: cst.BaseDictElement) -> object:
    key = cst.ensure_type(element, cst.DictElement).key
    return key.evaluated_value if isinstance(key, cst.SimpleString) else None


_Item = TypeVar("_Item", cst.BaseDictElement, cst.Arg)


def _closed(kept: list[_Item], before: Sequence[_Item]) -> list[_Item]:
    """``kept`` with the last one closing as the last of ``before`` did."""
    if kept and before and kept[-1] is not before[-1]:
        kept[-1] = kept[-1].with_changes(comma=before[-1].comma)
    return kept


def _keys_of(expr: cst.BaseExpression, found: Unpacked) -> list[str]:
    """The keys the ``**`` argument ``expr`` contributes."""
    if isinstance(expr, cst.Name):
        return [k for k, n in found.holders.items() if n.value == expr.value]
    return [k for k in found.keys if k not in found.holders and id(found.values[k]) in _ids(expr)]


def _ids(expr: cst.BaseExpression) -> set[int]:
    if isinstance(expr, cst.Dict):
        return {id(e.value) for e in expr.elements}
    if isinstance(expr, cst.Call):
        return {id(a.value) for a in expr.args}
    return set()


def key_value(
    key: str, found: Unpacked, default_of: Callable[[str], cst.BaseExpression | None]
) -> cst.BaseExpression:
    """What the keyword ``key`` of the star arguments is at the call (see :func:`written_out`)."""
    holder = found.holders.get(key)
    if holder is None or key in found.values:
        return found.values[key]
    text = cst.SimpleString(f'"{key}"')
    default = None if found.keys[key] else default_of(key)
    if default is None:
        return cst.Subscript(holder, [cst.SubscriptElement(cst.Index(text))])
    getter = cst.Attribute(holder, cst.Name("get"))
    return cst.Call(getter, [cst.Arg(text), cst.Arg(default)])


def _plain_sequence(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, (cst.List, cst.Tuple)) and all(
        isinstance(e, cst.Element) for e in expr.elements
    )


def _literal_items(expr: cst.BaseExpression) -> dict[str, cst.BaseExpression] | None:
    """``{"k": v, ...}`` or ``dict(k=v, ...)``: key -> value; None for anything else."""
    if isinstance(expr, cst.Dict):
        out = {}
        for e in expr.elements:
            if not isinstance(e, cst.DictElement) or not isinstance(e.key, cst.SimpleString):
                return None
            key = e.key.evaluated_value
            if not isinstance(key, str) or not key.isidentifier():
                return None
            out[key] = e.value
        return out
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "dict":
        if any(a.keyword is None for a in expr.args):
            return None
        return {cst.ensure_type(a.keyword, cst.Name).value: a.value for a in expr.args}
    return None


def _read_dict(
    ctx: FileContext, expr: cst.BaseExpression, out: Unpacked, call: cst.Call
) -> str | None:
    """Adds the keys of ``**expr`` (at ``call``) to ``out``; else says why they cannot be read."""
    items = _literal_items(expr)
    if items is not None:
        if isinstance(expr, cst.Call) and _shadowed(ctx, expr.func):
            return "`dict` is not the builtin here"
        out.keys.update(dict.fromkeys(items, True))
        out.values.update(items)
        return None
    what = f"the keys of `**{ctx.text(expr)}` cannot be read"
    if not isinstance(expr, cst.Name):
        return f"{what}: they are set in code the tool does not follow"
    binding = _sole_binding(ctx, expr)
    if binding is None:
        return f"{what}: it is not bound once, in this function, to a dict written out"
    assign, items = binding
    keys = dict.fromkeys(items, True)
    written: set[str] = set()
    fn = enclosing_function(ctx, assign)
    for ref in _references(ctx, assign, expr.value):
        sure = fn is not None and _runs_before(ctx, ref, fn, call)
        why = _use(ctx, ref, (keys, written, sure), fn)
        if why:
            return f"{what}: {why}"
    out.keys.update(keys)
    out.holders.update(dict.fromkeys(keys, expr))
    # a constant only the literal sets is what the call gets: read as written there
    out.values.update((k, v) for k, v in items.items() if k not in written and _constant(v))
    return None


def _shadowed(ctx: FileContext, name: cst.BaseExpression) -> bool:
    """``dict`` names something other than the builtin here."""
    scope = ctx.scopes.get(name)
    if not isinstance(name, cst.Name) or scope is None:
        return True
    return any(not isinstance(a, BuiltinAssignment) for a in scope[name.value])


def _sole_binding(
    ctx: FileContext, name: cst.Name
) -> tuple[cst.Assign, dict[str, cst.BaseExpression]] | None:
    """``name = {...}`` (or ``dict(...)``): the one binding of ``name``, in a function."""
    scope = ctx.scopes.get(name)
    fn = enclosing_function(ctx, name)
    if scope is None or fn is None:
        return None
    bindings = list(scope[name.value])  # (also from a comprehension of the function)
    node = getattr(bindings[0], "node", None) if len(bindings) == 1 else None
    assign = ctx.parents.get(node) if isinstance(node, cst.Name) else None
    target = ctx.parents.get(assign) if isinstance(assign, cst.AssignTarget) else None
    if not isinstance(target, cst.Assign) or len(target.targets) != 1:
        return None
    if enclosing_function(ctx, target) is not fn or ctx.scopes.get(target) is not ctx.scopes.get(
        fn.body.body[0]
    ):
        return None
    items = _literal_items(target.value)
    if items is None or (isinstance(target.value, cst.Call) and _shadowed(ctx, target.value.func)):
        return None
    return target, items


def _references(ctx: FileContext, assign: cst.Assign, name: str) -> list[cst.CSTNode]:
    scope = ctx.scopes.get(assign)
    if scope is None:
        return []
    return [r.node for a in scope.assignments[name] for r in a.references]


#: the keys a dict may hold (True: always), those code other than its literal sets, and
#: whether the use at hand always runs before the call
_Keys = tuple[dict[str, bool], set[str], bool]


def _runs_before(ctx: FileContext, ref: cst.CSTNode, fn: cst.FunctionDef, call: cst.Call) -> bool:
    """``ref`` is in a statement of ``fn``'s own body (not under an ``if``, a loop, a ``try``)
    that comes before the statement of ``call``: it has run whenever the call runs."""
    stmt = ctx.enclosing_statement(ref)
    body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else ()
    if not any(s is stmt for s in body):
        return False
    end, start = ctx.positions[stmt].end, ctx.positions[ctx.enclosing_statement(call)].start
    return (end.line, end.column) <= (start.line, start.column)


def _constant(expr: cst.BaseExpression) -> bool:
    """A number, a string, True, False or None."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        expr = expr.expression
    if isinstance(expr, cst.Name):
        return expr.value in ("True", "False", "None")
    return isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString))


def _use(ctx: FileContext, ref: cst.CSTNode, keys: _Keys, fn: cst.FunctionDef | None) -> str | None:
    """One use of the dict: the keys it may add go to ``keys``; else why it is not read."""
    where = ctx.text(ctx.enclosing_statement(ref)).splitlines()[0].strip()
    if enclosing_function(ctx, ref) is not fn:
        return f"`{where}` uses it in another function"
    parent = ctx.parents.get(ref)
    if isinstance(parent, cst.Arg) and parent.value is ref:
        return None if parent.star == "**" or _is_len(ctx, parent) else f"`{where}` hands it on"
    if isinstance(parent, cst.Subscript) and parent.value is ref:
        return _subscript_use(ctx, parent, keys, where)
    if isinstance(parent, cst.Attribute) and parent.value is ref:
        return _method_use(ctx, parent, keys, where)
    if isinstance(parent, cst.ComparisonTarget) and parent.comparator is ref:
        return None  # "k" in name
    return f"`{where}` may add or remove keys"


def _is_len(ctx: FileContext, arg: cst.Arg) -> bool:
    call = ctx.parents.get(arg)
    return (
        isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "len"
    )


def _subscript_use(ctx: FileContext, sub: cst.Subscript, keys: _Keys, where: str) -> str | None:
    """``name["k"]``: read, or set (a key it may hold now)."""
    key = _string_key(sub)
    parent = ctx.parents.get(sub)
    if isinstance(parent, cst.Del):
        return f"`{where}` removes a key"
    if key is None:
        return f"`{where}` uses a key that is not a string written out"
    if isinstance(parent, (cst.AssignTarget, cst.AugAssign)):
        keys[0][key] = keys[0].get(key, False) or keys[2]
        keys[1].add(key)
    return None


def _string_key(sub: cst.Subscript) -> str | None:
    if len(sub.slice) != 1 or not isinstance(sub.slice[0].slice, cst.Index):
        return None
    value = sub.slice[0].slice.value
    key = value.evaluated_value if isinstance(value, cst.SimpleString) else None
    return key if isinstance(key, str) and key.isidentifier() else None


def _method_use(ctx: FileContext, attr: cst.Attribute, keys: _Keys, where: str) -> str | None:
    """``name.update({...})``/``name.setdefault("k", v)`` add keys; readers add none."""
    call = ctx.parents.get(attr)
    method = attr.attr.value
    if not isinstance(call, cst.Call) or call.func is not attr:
        return f"`{where}` may add or remove keys"
    if method in _READING:
        return None
    added = _added_keys(method, call) if method in _ADDING else None
    if added is None:
        return f"`{where}` may add or remove keys"
    for key in added:
        keys[0][key] = keys[0].get(key, False) or keys[2]
        keys[1].add(key)
    return None


def _added_keys(method: str, call: cst.Call) -> list[str] | None:
    """The keys ``name.update(...)``/``name.setdefault(...)`` may add, if they are written out."""
    if method == "setdefault":
        first = call.args[0] if call.args else None
        if first is None or first.keyword or first.star:
            return None
        key = first.value.evaluated_value if isinstance(first.value, cst.SimpleString) else None
        return [key] if isinstance(key, str) and key.isidentifier() else None
    if any(a.star for a in call.args):
        return None
    given = [a for a in call.args if a.keyword is None]
    items = _literal_items(given[0].value) if len(given) == 1 else ({} if not given else None)
    if items is None:
        return None
    return [*items, *(a.keyword.value for a in call.args if a.keyword is not None)]
