"""Names bound to DALI by a call rather than an import (``dali = try_import_dali()``), in libcst
terms: which assignments bind such a name, and the module each stands for. Which calls count is
:func:`.partial_parse.wrapper_module` (shared with the text-level filter there)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple, cast

import libcst as cst

from .partial_parse import _marks_dali, wrapper_module


def dotted(node: cst.BaseExpression | cst.Name | cst.Attribute) -> str:
    """``a.b.c`` as text; "" for anything but names and attributes."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{dotted(node.value)}.{node.attr.value}"
    return ""


class Wrapper(NamedTuple):
    """A name bound by a call that imports DALI (:func:`wrapper_module`)."""

    #: the callee's text and ``(...)``: ``try_import_dali(...)``
    call: str
    #: the module it stands for (``nvidia.dali`` when only the callee's name says DALI)
    module: str
    #: whether the tool follows the name as that module (else DM206 marks its uses)
    followed: bool
    #: the assignment (``cst.Assign`` or ``cst.AnnAssign``)
    statement: cst.CSTNode


def call_module(call: cst.Call) -> str | None:
    """The DALI module a call imports, when the tool follows it (:func:`wrapper_module`)."""
    func = call.func
    callee = func.attr.value if isinstance(func, cst.Attribute) else dotted(func)
    return wrapper_module(callee, _cst_first(call))


def wrapper_targets(assignments: Iterable[cst.CSTNode]) -> dict[cst.Name, Wrapper]:
    """The target of each of ``assignments`` (``Assign``/``AnnAssign`` nodes) that binds a
    name to a call importing DALI, with what it stands for."""
    found = {}
    for node in assignments:
        target: cst.BaseExpression
        if isinstance(node, cst.Assign):
            if len(node.targets) != 1:
                continue
            target = node.targets[0].target
        else:
            target = cast("cst.AnnAssign", node).target
        value = cast("cst.Assign | cst.AnnAssign", node).value
        if not (isinstance(target, cst.Name) and isinstance(value, cst.Call)):
            continue
        func = value.func
        callee = func.attr.value if isinstance(func, cst.Attribute) else dotted(func)
        first = _cst_first(value)
        module = wrapper_module(callee, first)
        followed = module is not None
        if module is None and _marks_dali(callee) and first is None:
            module = "nvidia.dali"
        if module is not None:
            found[target] = Wrapper(f"{dotted(func) or callee}(...)", module, followed, node)
    return found


def _cst_first(call: cst.Call) -> str | None:
    """The first positional argument of ``call`` when it is a string literal."""
    first = call.args[0] if call.args else None
    if first is None or first.keyword is not None or first.star:
        return None
    if isinstance(first.value, (cst.SimpleString, cst.ConcatenatedString)):
        value = first.value.evaluated_value
        return value if isinstance(value, str) else None
    return None
