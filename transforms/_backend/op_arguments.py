"""One argument given both to a legacy operator object and to its call, as one call's argument.

DALI 2.4's ``ops`` API (probed): an argument given when the object is made and again when it is
called fails whenever both values are not None (a scalar twice: ``ValueError: The argument ... was
already specified in __init__``; a data node in one place and a scalar in the other: the graph
fails to build), and None in either place means the argument is not given (``ops`` drops None
values, as dynamic mode does). So in every graph that was built at least one of the two values was
None, and the argument's value is the call's when that is not None, else the object's::

    self.decode = ops.AudioDecoder(sample_rate=rate if fixed else None)
    audio, sr = self.decode(encoded, sample_rate=speed)
->
    audio, sr = fn.audio_decoder(
        encoded, sample_rate=speed if speed is not None else (rate if fixed else None)
    )

A data node given to the call is never None: the call's value is the argument's
(``sample_rate=rates`` for ``rates = self.uniform() * rate``), which also keeps the graph free of
a test on data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Set

import libcst as cst

from .._cst import walk

#: literals that are never None
_LITERALS = (
    cst.Integer,
    cst.Float,
    cst.Imaginary,
    cst.SimpleString,
    cst.ConcatenatedString,
    cst.FormattedString,
    cst.List,
    cst.Tuple,
    cst.Dict,
    cst.Set,
)


def merged_value(
    made: cst.BaseExpression, called: cst.BaseExpression, nodes: Set[str] = frozenset()
) -> cst.BaseExpression | None:
    """The value of an argument the object was made with (``made``) and its call was given
    (``called``; ``nodes``: the names that hold data nodes); None when the call's value is an
    expression that cannot be read twice."""
    if _is_none(called):
        return made
    if _is_none(made) or isinstance(called, _LITERALS):
        return called
    if isinstance(called, cst.Name) and called.value in nodes:
        return called
    if not _plain_reference(called):
        return None
    fallback = made
    if isinstance(made, (cst.IfExp, cst.Lambda)) and not made.lpar:
        fallback = made.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    test = cst.Comparison(called, [cst.ComparisonTarget(cst.IsNot(), cst.Name("None"))])
    return cst.IfExp(test=test, body=called, orelse=fallback)


def merge_arguments(
    made: list[cst.Arg], called: list[cst.Arg], nodes: Set[str] = frozenset()
) -> tuple[list[cst.Arg], list[cst.Arg], list[str]]:
    """``made`` (the object's keyword arguments) with each argument ``called`` (the call's
    keyword arguments) gives again holding the one value of both, ``called`` without those, and
    the names whose call value cannot be merged (they stay in both lists)."""
    given = {a.keyword.value: a for a in called if a.keyword is not None}
    merged: set[str] = set()
    refused: list[str] = []
    out: list[cst.Arg] = []
    for arg in made:
        name = arg.keyword.value if arg.keyword is not None else None
        if name is None or name not in given:
            out.append(arg)
            continue
        value = merged_value(arg.value, given[name].value, nodes)
        if value is None:
            refused.append(name)
            out.append(arg)
            continue
        merged.add(name)
        out.append(arg.with_changes(value=value))
    rest = [a for a in called if a.keyword is None or a.keyword.value not in merged]
    return out, rest, refused


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _plain_reference(node: cst.BaseExpression) -> bool:
    """A name or a chain of attributes of one: reading it twice gives the same value."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name)


def data_names(bodies: Iterable[cst.CSTNode], makes_node: Callable[[cst.Call], bool]) -> set[str]:
    """The names (and ``self.`` attributes, by name) that every assignment in ``bodies`` gives a
    data node: the result of a call ``makes_node`` accepts (each target of an unpacked one),
    arithmetic on or a subscript of such a value, ``.gpu()`` of one, another such name."""
    assigned: list[tuple[str, cst.BaseExpression, bool]] = []
    for body in bodies:
        for node in walk(body):
            if isinstance(node, cst.Assign):
                for t in node.targets:
                    assigned += _targets(t.target, node.value)
            elif isinstance(node, cst.AugAssign):
                assigned += _targets(node.target, node.value)
    nodes = {name for name, _, _ in assigned}
    changed = True
    while changed:  # drop the names some assignment may give another value (a fixpoint)
        changed = False
        for name, value, unpacked in assigned:
            if name in nodes and not _gives_node(value, nodes, makes_node, unpacked):
                nodes.discard(name)
                changed = True
    return nodes


def _targets(
    target: cst.BaseExpression, value: cst.BaseExpression
) -> list[tuple[str, cst.BaseExpression, bool]]:
    """(name, value, unpacked) for each name or ``self.`` attribute ``target`` binds."""
    if isinstance(target, (cst.Tuple, cst.List)):
        out: list[tuple[str, cst.BaseExpression, bool]] = []
        for e in target.elements:
            if isinstance(e, cst.StarredElement):  # a list of the outputs: never a data node
                out += [(n, cst.Tuple([]), False) for n, _, _ in _targets(e.value, value)]
            else:
                out += [(n, v, True) for n, v, _ in _targets(e.value, value)]
        return out
    if isinstance(target, cst.Name):
        return [(target.value, value, False)]
    if isinstance(target, cst.Attribute) and _is_self(target.value):
        return [(target.attr.value, value, False)]
    return []  # a subscript or another object's attribute binds no name


def _gives_node(
    value: cst.BaseExpression, nodes: set[str], makes_node: Callable[[cst.Call], bool], many: bool
) -> bool:
    if isinstance(value, cst.Call):
        if makes_node(value):
            return True
        func = value.func
        return (
            not many
            and isinstance(func, cst.Attribute)
            and func.attr.value in ("gpu", "cpu")
            and _gives_node(func.value, nodes, makes_node, False)
        )
    if many:
        return False
    if isinstance(value, cst.Name):
        return value.value in nodes
    if isinstance(value, cst.Attribute) and _is_self(value.value):
        return value.attr.value in nodes
    if isinstance(value, cst.BinaryOperation):
        return any(_gives_node(v, nodes, makes_node, False) for v in (value.left, value.right))
    if isinstance(value, cst.UnaryOperation):
        return _gives_node(value.expression, nodes, makes_node, False)
    if isinstance(value, cst.Subscript):
        return _gives_node(value.value, nodes, makes_node, False)
    return False


def _is_self(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "self"
