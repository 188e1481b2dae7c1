"""Walking a libcst tree without libcst's visitors: a visitor (even one that changes nothing)
rebuilds every node it passes, which costs about as much as parsing the code again.

Nothing here knows about DALI; :mod:`dali_migrate.context` and the rules build on it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import libcst as cst


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under ``node`` (itself included), in source order."""
    stack = [node]
    pop, push = stack.pop, stack.extend
    while stack:
        n = pop()
        yield n
        push(reversed(children(n)))


class _FieldOrder(cst.CSTVisitor):
    """Records the fields a node visits its children through, in order, without descending."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: list[str] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        return False

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        if attribute not in self.fields:
            self.fields.append(attribute)


#: node type -> (the fields visited, in order; the fields not seen visited yet)
_FIELDS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _field_order(node: cst.CSTNode) -> tuple[tuple[str, ...], tuple[str, ...]]:
    order = _FieldOrder()
    node._visit_and_replace_children(order)
    # a field of text or a flag (it has one now) never holds a node: libcst types none as both
    rest = tuple(
        f.name
        for f in dataclasses.fields(node)
        if f.name not in order.fields and not isinstance(getattr(node, f.name), (str, bool))
    )
    _FIELDS[type(node)] = (tuple(order.fields), rest)
    return _FIELDS[type(node)]


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """``node.children`` without rebuilding the node (libcst's property visits it, which makes a
    new node each time): the fields are read in the order libcst visits them, learnt per node
    type (again from a node that has a value in a field not seen visited: some are visited only
    when set)."""
    known = _FIELDS.get(type(node))
    if known is None or known[1] and _more_fields(node, known[1]):
        known = _field_order(node)
    out: list[cst.CSTNode] = []
    for name in known[0]:
        value = getattr(node, name)
        kind = type(value)
        if kind is list or kind is tuple:
            if value:
                out.extend([v for v in value if _NODE_TYPES.get(type(v)) or _is_node_type(type(v))])
        elif _NODE_TYPES.get(kind) or _is_node_type(kind):
            out.append(value)
        elif isinstance(value, (list, tuple)):  # (a subclass of one)
            out.extend(_nodes_in(value))
    return out


def _more_fields(node: cst.CSTNode, rest: tuple[str, ...]) -> bool:
    """Whether a field of ``rest`` (not seen visited) holds a node (a string never does)."""
    for name in rest:
        value = getattr(node, name)
        if value is not None and type(value) is not str and _nodes_in(value):
            return True
    return False


#: type -> whether it is a node type (a dictionary look-up, where ``isinstance`` of libcst's
#: abstract node class goes through ``ABCMeta``)
_NODE_TYPES: dict[type, bool] = {}


def _is_node_type(kind: type) -> bool:
    _NODE_TYPES[kind] = is_node = issubclass(kind, cst.CSTNode)
    return is_node


def _nodes_in(value: object) -> list[cst.CSTNode]:
    if isinstance(value, cst.CSTNode):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, cst.CSTNode)]
    return []


def index(module: cst.CSTNode) -> tuple[list[cst.CSTNode], dict[cst.CSTNode, cst.CSTNode]]:
    """Every node under ``module`` in pre-order (the order of :func:`walk`), and the parent of
    each (what libcst's ParentNodeProvider gives: the node that visits it)."""
    nodes: list[cst.CSTNode] = []
    parents: dict[cst.CSTNode, cst.CSTNode] = {}
    stack: list[tuple[cst.CSTNode, cst.CSTNode | None]] = [(module, None)]
    while stack:
        node, parent = stack.pop()
        nodes.append(node)
        if parent is not None:
            parents[node] = parent
        stack.extend((child, node) for child in reversed(children(node)))
    return nodes, parents
