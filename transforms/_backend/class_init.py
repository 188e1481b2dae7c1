"""The ``__init__`` of a ``Pipeline`` subclass whose base classes in the same file have their own
``__init__``: one ``__init__`` with the bases' code inlined where it calls them, so the class
migrates as if it had been written in one piece.

Before::

    class BasePipe(Pipeline):
        def __init__(self, batch_size, num_threads, device_id, data_dir, shuffle=True):
            super().__init__(batch_size, num_threads, device_id, seed=7)
            self.input = ops.readers.File(file_root=data_dir, random_shuffle=shuffle)

    class TrainPipe(BasePipe):
        def __init__(self, data_dir, crop, **kwargs):
            super().__init__(data_dir=data_dir, shuffle=False, **kwargs)
            self.crop = ops.Crop(crop=crop)

After (the ``__init__`` of ``TrainPipe`` as the rule merges it)::

        def __init__(self, data_dir, crop, *, batch_size, num_threads, device_id):
            shuffle = False
            super().__init__(batch_size, num_threads, device_id, seed=7)
            self.input = ops.readers.File(file_root=data_dir, random_shuffle=shuffle)
            self.crop = ops.Crop(crop=crop)

The base's parameters get the values of the call (``name = value`` where they differ from a name
of the same spelling); those that come through the subclass's ``**kwargs`` become keyword-only
parameters (with the base's defaults). What cannot be inlined this way (a call under a condition,
``*args``, ``**kwargs`` used otherwise, a name of the base that the subclass also uses for
something else) is appended to ``reasons``.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from .._cst import block_statements, is_docstring, walk

#: the ``__init__`` that a call in a class runs: an index into the chain, or the Pipeline's
_PIPELINE = -1


def flat_init(chain: Sequence[cst.ClassDef], reasons: list[str]) -> cst.FunctionDef | None:
    """The ``__init__`` that runs for ``chain[0]`` (its bases in this file follow it in
    ``chain``), with the ``__init__`` of every base in this file inlined; None when none of the
    classes defines one or when one cannot be inlined (the reason is in ``reasons``)."""
    first = next((i for i, c in enumerate(chain) if own_init(c) is not None), None)
    return None if first is None else _flatten(chain, first, reasons)


def own_init(cls: cst.ClassDef) -> cst.FunctionDef | None:
    """The ``__init__`` defined in the body of ``cls`` itself."""
    for stmt in cls.body.body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__init__":
            return stmt
    return None


def _flatten(
    chain: Sequence[cst.ClassDef], index: int, reasons: list[str]
) -> cst.FunctionDef | None:
    init = own_init(chain[index])
    assert init is not None
    stmts = block_statements(init.body)
    calls = [(i, c) for i, s in enumerate(stmts) for c in [_init_call(s)] if c is not None]
    nested = sum(1 for n in walk(init.body) if _is_init_call(n))
    if nested != len(calls) or len(calls) > 1:
        reasons.append(
            f"the __init__ of {chain[index].name.value} calls the __init__ of its base under a "
            "condition or more than once: call it once, in the body of __init__"
        )
        return None
    if not calls:
        return init  # no base constructor: refused later for the missing Pipeline constructor
    pos, call = calls[0]
    target = _callee(chain, index, call)
    if target is None:
        reasons.append(
            f"the __init__ that {chain[index].name.value} calls is not of one of its bases in this "
            "file: call super().__init__(...)"
        )
        return None
    if target == _PIPELINE:
        return init
    base = _flatten(chain, target, reasons)
    if base is None:
        return None
    explicit = not _is_super(call.func.value)  # type: ignore[attr-defined]
    args = list(call.args[1:] if explicit else call.args)
    names = (chain[index].name.value, chain[target].name.value)
    bound = _bind(init, base, args, names, reasons)
    if bound is None:
        return None
    assignments, params = bound
    body = _body(base)
    return init.with_changes(
        params=params,
        body=init.body.with_changes(body=stmts[:pos] + assignments + body + stmts[pos + 1 :]),
    )


def _callee(chain: Sequence[cst.ClassDef], index: int, call: cst.Call) -> int | None:
    """The index in ``chain`` of the class whose ``__init__`` ``call`` (in ``chain[index]``) runs,
    ``_PIPELINE`` for the Pipeline's, None when it is another."""
    owner = call.func.value  # type: ignore[attr-defined]
    names = [c.name.value for c in chain]
    start: int | None = None
    if isinstance(owner, cst.Call):  # super() or super(Cls, self)
        args = owner.args
        if not args:
            start = index + 1
        elif (
            len(args) == 2 and isinstance(args[0].value, cst.Name) and args[0].value.value in names
        ):
            start = names.index(args[0].value.value) + 1
    elif isinstance(owner, cst.Name) and owner.value in names:
        start = names.index(owner.value)
    elif owner is not None:
        return _PIPELINE  # Pipeline.__init__(self, ...): the Merger checks it
    if start is None or start <= index:
        return None
    return next((i for i in range(start, len(chain)) if own_init(chain[i]) is not None), _PIPELINE)


def _bind(
    init: cst.FunctionDef,
    base: cst.FunctionDef,
    args: list[cst.Arg],
    names: tuple[str, str],
    reasons: list[str],
) -> tuple[list[cst.BaseStatement], cst.Parameters] | None:
    """The assignments that give the base's parameters the call's values, and the parameters of
    ``init`` with the base's that come through its ``**kwargs`` (``names``: the class and its
    base)."""
    base_name = names[1]
    why = f"the call of the __init__ of {base_name}"
    bp = base.params
    if bp.posonly_params or not bp.params or isinstance(bp.star_arg, cst.Param) or bp.star_kwarg:
        reasons.append(
            f"the __init__ of {base_name} takes *args, **kwargs or positional-only parameters: "
            "name its parameters"
        )
        return None
    positional = list(bp.params[1:])
    named = {p.name.value: p for p in [*positional, *bp.kwonly_params]}
    values: dict[str, cst.BaseExpression] = {}
    forwarded = False
    kwargs = init.params.star_kwarg
    kwargs_name = kwargs.name.value if isinstance(kwargs, cst.Param) else None
    for i, arg in enumerate(args):
        if arg.star == "**" and isinstance(arg.value, cst.Name) and arg.value.value == kwargs_name:
            forwarded = True
            continue
        if arg.star:
            reasons.append(f"{why} passes *args or a **dict: pass its parameters by name")
            return None
        name = (
            arg.keyword.value
            if arg.keyword is not None
            else (positional[i].name.value if i < len(positional) else None)
        )
        if name is None or name not in named or name in values:
            reasons.append(f"{why} does not match its parameters")
            return None
        values[name] = arg.value
    rest = [p for p in named.values() if p.name.value not in values]
    if not forwarded:
        if any(p.default is None for p in rest):
            reasons.append(f"{why} misses arguments")
            return None
        values.update({p.name.value: p.default for p in rest})  # type: ignore[misc]
        rest = []
    if _clashes(init, base, values, rest, kwargs_name if forwarded else None, names, reasons):
        return None
    assignments: list[cst.BaseStatement] = [
        cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], value)])
        for name, value in values.items()
        if not (isinstance(value, cst.Name) and value.value == name)
    ]
    return assignments, _params(init.params, rest if forwarded else None)


def _clashes(
    init: cst.FunctionDef,
    base: cst.FunctionDef,
    values: dict[str, cst.BaseExpression],
    forwarded: list[cst.Param],
    kwargs_name: str | None,
    names: tuple[str, str],
    reasons: list[str],
) -> bool:
    """A name of the base's ``__init__`` that holds something else in the subclass's (both
    become one function), or ``**kwargs`` used besides being passed on."""
    own = plain_names(init.params) | plain_names(init.body)
    if kwargs_name is not None:
        uses = sum(1 for n in walk(init.body) if isinstance(n, cst.Name) and n.value == kwargs_name)
        if uses != 1:
            reasons.append(
                f"**{kwargs_name} is used in the __init__ of {names[0]} besides being passed to "
                f"the __init__ of {names[1]}: name the parameters {names[0]} reads"
            )
            return True
        own.discard(kwargs_name)
    rebound = {n for n, v in values.items() if not (isinstance(v, cst.Name) and v.value == n)}
    theirs = rebound | bound_names(base.body) | {p.name.value for p in forwarded}
    common = sorted(theirs & own)
    if common:
        which = ", ".join(f"`{n}`" for n in common)
        reasons.append(
            f"{which} holds one value in the __init__ of {names[1]} and another in that of "
            f"{names[0]}: rename it in one of them"
        )
        return True
    return False


def _params(params: cst.Parameters, forwarded: list[cst.Param] | None) -> cst.Parameters:
    """``params`` with ``**kwargs`` replaced by the keyword-only parameters it forwarded (the
    ``*`` where ``**kwargs`` was)."""
    if forwarded is None:
        return params
    old = params.star_kwarg
    assert isinstance(old, cst.Param)
    space = cst.SimpleWhitespace("")
    extra = [p.with_changes(whitespace_after_param=space) for p in forwarded]
    kwonly = _commas([*params.kwonly_params, *extra], old.comma)
    star = params.star_arg
    if kwonly and isinstance(star, cst.MaybeSentinel):
        star = cst.ParamStar()
    return params.with_changes(star_arg=star, kwonly_params=kwonly, star_kwarg=None)


def _commas(params: list[cst.Param], last: cst.Comma | cst.MaybeSentinel) -> list[cst.Param]:
    """``params`` separated by ``, ``, the last one ending as ``**kwargs`` did."""
    sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return [p.with_changes(comma=sep) for p in params[:-1]] + [
        p.with_changes(comma=last) for p in params[-1:]
    ]


def _init_call(stmt: cst.BaseStatement) -> cst.Call | None:
    """``super().__init__(...)`` or ``Base.__init__(self, ...)`` as a statement."""
    if (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
    ):
        value = stmt.body[0].value
        return value if _is_init_call(value) else None  # type: ignore[return-value]
    return None


def _is_init_call(node: cst.CSTNode) -> bool:
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
        return False
    if node.func.attr.value != "__init__":
        return False
    owner = node.func.value
    if _is_super(owner):
        return True
    first = node.args[0].value if node.args else None
    return isinstance(first, cst.Name) and first.value == "self"


def _is_super(node: cst.BaseExpression) -> bool:
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Name)
        and node.func.value == "super"
    )


def _body(fn: cst.FunctionDef) -> list[cst.BaseStatement]:
    body = block_statements(fn.body)
    return body[1:] if body and is_docstring(body[0]) else body


def plain_names(node: cst.CSTNode) -> set[str]:
    """Names read or bound in ``node`` (not attribute names, not keywords)."""
    skip = {id(n.attr) for n in walk(node) if isinstance(n, cst.Attribute)}
    skip |= {id(n.keyword) for n in walk(node) if isinstance(n, cst.Arg) and n.keyword is not None}
    return {n.value for n in walk(node) if isinstance(n, cst.Name) and id(n) not in skip}


def bound_names(node: cst.CSTNode) -> set[str]:
    """Plain names bound in ``node`` (assignments, ``for`` and ``with`` targets, ``def``s)."""
    out: set[str] = set()
    for n in walk(node):
        targets: list[cst.CSTNode] = []
        if isinstance(n, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr)):
            targets = [n.target]
        elif isinstance(n, cst.AsName):
            targets = [n.name]
        elif isinstance(n, (cst.FunctionDef, cst.ClassDef)):
            out.add(n.name.value)
        for t in targets:
            out |= {e.value for e in _unpacked(t)}
    return out


def _unpacked(target: cst.CSTNode) -> list[cst.Name]:
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _unpacked(e.value)]
    if isinstance(target, cst.StarredElement):
        return _unpacked(target.value)
    return []
