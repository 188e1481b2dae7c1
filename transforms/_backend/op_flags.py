"""An attribute that holds an operator object in some branches of ``__init__`` and a plain value
(None) in others, and that the code tests: once the object's calls are inlined, the attribute
only says whether it was made::

    if resample_range is not None:                      if resample_range is not None:
        self.speed = ops.Uniform(range=resample_range)      # ops.Uniform(...) was made here ...
    else:                                        ->         speed = True
        self.speed = None                               else:
    ...                                                     speed = None
    if self.speed is None:                              ...
                                                        if speed is None:

An operator object is never None and always true, so ``True`` answers the tests the old code could
make of it: ``is None``, ``is not None``, ``not``, and a test of ``if``, ``while`` or a
conditional expression (``and``/``or`` inside one). Any other read (passed on, compared otherwise,
an ``and``/``or`` whose value is used) is not carried over (:func:`value_reads` tells them
apart). An attribute only called keeps no statement where the object was made.
"""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from .._cst import children, walk


def value_reads(fns: Iterable[cst.CSTNode], names: set[str]) -> dict[str, bool]:
    """The ``self.<name>`` (of ``names``) that ``fns`` read other than by calling or assigning
    them: name -> whether every such read is a test."""
    found: dict[str, bool] = {}
    for fn in fns:
        parents = {c: n for n in walk(fn) for c in children(n)}
        for node in walk(fn):
            if not (_is_self_attr(node) and node.attr.value in names):  # type: ignore[attr-defined]
                continue
            parent = parents.get(node)
            if isinstance(parent, cst.Call) and parent.func is node:
                continue
            if isinstance(parent, cst.AssignTarget):
                continue
            name = node.attr.value  # type: ignore[attr-defined]
            found[name] = found.get(name, True) and _tested(node, parents)
    return found


def flag_statement(stmt: cst.SimpleStatementLine, name: str, made: str) -> cst.SimpleStatementLine:
    """``name = True`` in place of ``stmt`` (``self.<name> = <made>(...)``), its comments kept."""
    note = cst.EmptyLine(
        comment=cst.Comment(
            f"# {made}(...) was made here: its calls are inlined where they were; {name} only "
            "says that it was made"
        )
    )
    assign = cst.Assign([cst.AssignTarget(cst.Name(name))], cst.Name("True"))
    return stmt.with_changes(body=[assign], leading_lines=[*stmt.leading_lines, note])


def _tested(node: cst.CSTNode, parents: dict[cst.CSTNode, cst.CSTNode]) -> bool:
    """``node``'s value is only tested: against None, negated, or as a test of a branch."""
    parent = parents.get(node)
    if isinstance(parent, (cst.If, cst.While, cst.IfExp)):
        return parent.test is node
    if isinstance(parent, cst.UnaryOperation):
        return isinstance(parent.operator, cst.Not)
    if isinstance(parent, cst.BooleanOperation):
        return _tested(parent, parents)
    if isinstance(parent, cst.ComparisonTarget):  # None is self.x
        parent = parents.get(parent)
    if isinstance(parent, cst.Comparison) and len(parent.comparisons) == 1:
        target = parent.comparisons[0]
        other = target.comparator if parent.left is node else parent.left
        return isinstance(target.operator, (cst.Is, cst.IsNot)) and _is_none(other)
    return False


def _is_none(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _is_self_attr(node: cst.CSTNode) -> bool:
    return (
        isinstance(node, cst.Attribute)
        and isinstance(node.value, cst.Name)
        and node.value.value == "self"
    )
