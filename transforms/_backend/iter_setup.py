"""``iter_setup`` + ``feed_input`` of a ``Pipeline`` subclass: the data it feeds before each run
is computed in the loop of the migrated generator, where the external sources were read.

Before::

    def define_graph(self):
        self.jpegs = self.input()            # self.input = ops.ExternalSource()
        self.labels = self.input_label()
        return self.decode(self.jpegs), self.labels

    def iter_setup(self):
        images, labels = next(self.iterator)
        self.feed_input(self.jpegs, images, layout="HWC")
        self.feed_input(self.labels, labels)

After (inside the generator's loop)::

    try:
        images, labels = next(iterator)
        jpegs = ndd.as_batch(images, layout="HWC")
        labels = ndd.as_batch(labels)
    except StopIteration:  # pipe.run() ended the run here
        return
    ... = ndd.decoders.image(jpegs), labels

``raise StopIteration`` in ``iter_setup`` (the data ended) ends the generator, as it ended the
pipeline's runs; ``self.x`` are local names, as everywhere in the merged code.
"""

from __future__ import annotations

from typing import TypeGuard

import libcst as cst

from .._cst import block_statements, statement, walk

#: the operator of an external source object (``ops.ExternalSource()``)
EXTERNAL_SOURCE = "external_source"


def fed_nodes(iter_setup: cst.FunctionDef) -> list[str] | None:
    """The attributes ``iter_setup`` feeds (``self.feed_input(self.jpegs, ...)``), in order, or
    None when it feeds something else (a name, an output of another operator)."""
    names: list[str] = []
    for node in walk(iter_setup.body):
        if isinstance(node, cst.Call) and _is_feed(node):
            target = node.args[0].value if node.args else None
            if not (_self_attr(target) and len(node.args) >= 2):
                return None
            names.append(target.attr.value)
    return names or None


def inline_block(
    iter_setup: cst.FunctionDef, ndd: str
) -> cst.BaseStatement | list[cst.BaseStatement]:
    """The body of ``iter_setup`` as loop code: each ``self.feed_input(self.x, data, ...)`` made
    ``self.x = ndd.as_batch(data, ...)``, ``raise StopIteration`` made ``return``, the whole in a
    ``try`` that ends the generator where the data ends (a ``StopIteration`` out of a generator
    would be a RuntimeError)."""
    body = [_fed(s, ndd) for s in _strip_doc(block_statements(iter_setup.body))]
    if len(body) == 1 and _ends_on_stop(body[0]):
        return body[0]  # its own `except StopIteration:` already ends the data (now with return)
    if not any(_may_stop(n) for s in body for n in walk(s)):
        return body  # nothing in it can end the data
    handler = cst.ExceptHandler(
        body=cst.IndentedBlock([statement(cst.Return())]),
        type=cst.Name("StopIteration"),
        whitespace_after_except=cst.SimpleWhitespace(" "),
    )
    return cst.Try(body=cst.IndentedBlock(body), handlers=[handler])


def _fed(stmt: cst.BaseStatement, ndd: str) -> cst.BaseStatement:
    new = stmt.visit(_Feeds(ndd))
    assert isinstance(new, cst.BaseStatement)  # _Feeds rewrites lines into lines
    return new


class _Feeds(cst.CSTTransformer):
    def __init__(self, ndd: str) -> None:
        super().__init__()
        self.ndd = ndd

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.BaseStatement:
        small = updated.body[0] if len(updated.body) == 1 else None
        call = small.value if isinstance(small, cst.Expr) else None
        if isinstance(call, cst.Call) and _is_feed(call):
            # fed_nodes vouched for each feed: ``self.feed_input(self.<name>, data, ...)``
            target = cst.ensure_type(call.args[0].value, cst.Attribute)
            data = call.args[1].value
            kwargs = [
                a.with_changes(comma=cst.MaybeSentinel.DEFAULT)
                for a in call.args[2:]
                if a.keyword is not None
            ]
            args = [cst.Arg(data), *kwargs]
            sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            batch = cst.Call(
                cst.parse_expression(f"{self.ndd}.as_batch"),
                [a.with_changes(comma=sep) for a in args[:-1]] + args[-1:],
            )
            return updated.with_changes(body=[cst.Assign([cst.AssignTarget(target)], batch)])
        if isinstance(small, cst.Raise) and _is_stop_iteration(small.exc):
            return updated.with_changes(body=[cst.Return()])
        return updated


#: calls that cannot raise StopIteration (the code that makes a batch of arrays)
_SAFE_CALLS = {
    "len",
    "range",
    "list",
    "tuple",
    "int",
    "float",
    "min",
    "max",
    "zip",
    "enumerate",
    "as_batch",
}


def _may_stop(node: cst.CSTNode) -> bool:
    """``node`` may raise StopIteration: a raise, or a call other than of a few builtins and numpy."""
    if isinstance(node, cst.Raise):
        return True
    if not isinstance(node, cst.Call):
        return False
    func = node.func
    if isinstance(func, cst.Name):
        return func.value not in _SAFE_CALLS
    root = func
    while isinstance(root, cst.Attribute):
        root = root.value
    name = func.attr.value if isinstance(func, cst.Attribute) else ""
    return (
        not (isinstance(root, cst.Name) and root.value in ("np", "numpy"))
        and name not in _SAFE_CALLS
    )


def _ends_on_stop(stmt: cst.BaseStatement) -> bool:
    """``try: ... except StopIteration: ...; return``: a StopIteration of its body ends the data."""
    if not isinstance(stmt, cst.Try) or stmt.orelse is not None or stmt.finalbody is not None:
        return False
    for handler in stmt.handlers:
        last = handler.body.body[-1] if handler.body.body else None
        ends = isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], cst.Return)
        if isinstance(handler.type, cst.Name) and handler.type.value == "StopIteration" and ends:
            return True
    return False


def _is_feed(call: cst.Call) -> bool:
    func = call.func
    return _self_attr(func) and func.attr.value == "feed_input"


def _self_attr(node: cst.CSTNode | None) -> TypeGuard[cst.Attribute]:
    return (
        isinstance(node, cst.Attribute)
        and isinstance(node.value, cst.Name)
        and node.value.value == "self"
    )


def _is_stop_iteration(exc: cst.BaseExpression | None) -> bool:
    if isinstance(exc, cst.Call):
        exc = exc.func
    return isinstance(exc, cst.Name) and exc.value == "StopIteration"


def _strip_doc(stmts: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    first = stmts[0] if stmts else None
    if isinstance(first, cst.SimpleStatementLine) and isinstance(first.body[0], cst.Expr):
        if isinstance(first.body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
            return stmts[1:]
    return stmts
