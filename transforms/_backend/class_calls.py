"""Calls of a ``Pipeline`` subclass's operator objects (DM202): ``self.decode(jpegs)``, made in
``__init__`` by ``self.decode = ops.ImageDecoder(device="mixed")``, becomes
``fn.decoders.image(jpegs, device="mixed")``, the object's arguments and the call's together; an
object made under an ``if`` is called under the same condition (:class:`OpCalls`, the part of the
merger that rewrites code; ``class_merge.Merger`` reads the class)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeGuard, TypeVar

import libcst as cst

from dali_migrate.catalog import OpInfo
from dali_migrate.context import OPS_PREFIX, FileContext

from .._cst import visited, walk
from .class_helpers import undefined_root
from .op_arguments import merge_arguments

#: attributes of a Pipeline -> the constructor argument they hold
_PIPELINE_ATTRS = {
    "batch_size": "batch_size",
    "max_batch_size": "batch_size",
    "num_threads": "num_threads",
    "device_id": "device_id",
    "seed": "seed",
}

#: the if statements around an assignment, True: in its body
IfPath = tuple[tuple[cst.If, bool], ...]


_Kind = TypeVar("_Kind", bound=cst.CSTNode)


@dataclass
class Variant:
    """``self.<name> = ops.X(...)`` under the conditions ``path``."""

    path: IfPath
    op: OpInfo
    ctor: cst.Call


class OpCalls:
    """Rewrites code of the class: calls of operator objects, ``self.x`` and helper methods.
    The state is the merger's (``class_merge.Merger``), which reads the class to fill it."""

    ctx: FileContext
    reasons: list[str]
    ops: dict[str, list[Variant]]  # self.<name> = ops.X(...)
    attrs: set[str]  # self.<name> = <plain value>
    renamed: dict[str, str]  # attributes whose local name is another (``class_attrs.py``)
    helpers: dict[str, cst.FunctionDef]
    made_by: dict[str, cst.BaseExpression]
    kwargs: dict[str, cst.Arg]
    data: set[str]  # names that hold data nodes in the graph's code
    handed: dict[str, str]  # self.<name> = <a parameter of __init__>: the parameter

    def _ops_class(self, func: cst.BaseExpression, quiet: bool = False) -> OpInfo | None:
        q = self.ctx.qualname(func)
        if q and q.startswith(OPS_PREFIX):
            op = self.ctx.catalog.ops_class(q[len(OPS_PREFIX) :])
            if op is None and not quiet:
                self.reasons.append(f"{q} is not a known DALI operator class")
            return op
        return None

    def not_an_operator(self, name: str) -> list[str]:
        """Why ``self.<name>(...)`` cannot be carried over: what it calls is not known (nothing
        when an unknown ops.* class already says so), and what to do."""
        func = self.made_by.get(name)
        q = self.ctx.qualname(func) if func is not None else None
        if q is not None and q.startswith(OPS_PREFIX):
            return []
        code = cst.Module([]).code_for_node(func) if func is not None else ""
        what = f"self.{name} = {code}(...)" if func is not None else f"self.{name}"
        missing = undefined_root(self.ctx, func) if func is not None else None
        if missing is not None:
            return [  # one reason for all the objects made with it
                f"nothing in this file defines `{missing}`, which objects called in the graph are "
                f"made with (building the pipeline raised NameError): import it (`from "
                f"nvidia.dali import {missing}` if it is DALI's) and migrate again"
            ]
        return [f"{what} is called in the graph but is not an operator object the tool knows"] + [
            _MAKE_OPERATORS
        ]

    def _rewrite(self, node: cst.CSTNode) -> cst.CSTNode:
        """``self.op(x)`` calls inlined, ``self.x`` made ``x``, ``self.helper(...)`` made ``helper(...)``."""
        new = visited(node, _Rewriter(self))
        if any(isinstance(n, cst.Name) and n.value == "self" for n in walk(new)) and not isinstance(
            new, cst.FunctionDef
        ):
            self.reasons.append(
                "self is used other than to reach operators, attributes and helper methods"
            )
        return new

    def _rewrite_as(self, node: cst.CSTNode, kind: type[_Kind]) -> _Kind:
        """``_rewrite`` of a node that stays of its ``kind``: an argument, a function, or a
        call whose function is no ``self.<op>``."""
        return cst.ensure_type(self._rewrite(node), kind)

    def _rewrite_stmt(self, stmt: cst.BaseStatement) -> cst.BaseStatement:
        new = self._rewrite(stmt)
        assert isinstance(new, cst.BaseStatement)  # the rewriter changes expressions only
        return new

    def _rewrite_expr(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        new = self._rewrite(expr)
        assert isinstance(new, cst.BaseExpression)  # expressions become expressions
        return new

    def _op_call(self, op: OpInfo, ctor: cst.Call, call: cst.Call) -> cst.Call:
        """``fn.<op>(<inputs>, <the object's arguments>, <the call's arguments>)``."""
        if any(a.keyword is None and a.star != "**" for a in ctor.args):
            self.reasons.append(f"positional arguments to the {op.fn_path} operator object")
        # **options pass on as they are
        ctor_kw = [a for a in ctor.args if a.keyword is not None or a.star == "**"]
        inputs = [a for a in call.args if a.keyword is None]
        ctor_kw, rest, clash = merge_arguments(
            ctor_kw, [a for a in call.args if a.keyword], self.data
        )
        if clash:
            self.reasons.append(
                f"{', '.join(clash)} given both when creating and when calling an operator, and "
                "the call's value is an expression: assign it to a variable first"
            )
        func = cst.parse_expression(f"nvidia.dali.fn.{op.fn_path}")
        if not _has_comment(ctor):
            # one line: the line breaks before the closing parentheses go with the commas
            args = [
                a.with_changes(comma=cst.MaybeSentinel.DEFAULT, whitespace_after_arg=_NO_SPACE)
                for a in inputs + ctor_kw + rest
            ]
            return cst.Call(func=func, args=_commas(args))
        # comments between the object's arguments stay there: its layout is kept
        args = _commas(inputs) + _commas_kept(ctor_kw) + _commas(rest)
        return cst.Call(
            func=func, args=_commas_kept(args), whitespace_before_args=ctor.whitespace_before_args
        )

    def _conditional_call(self, variants: list[Variant], call: cst.Call) -> cst.BaseExpression:
        """``a(x) if cond else b(x)`` for an operator object made under conditions, called
        inside an expression."""
        calls = [(v, self._op_call(v.op, v.ctor, call)) for v in variants]
        expr: cst.BaseExpression = calls[-1][1]
        if len(calls) == 1:  # made under a condition only: without it, the graph could not be built
            return expr
        for v, c in reversed(calls[:-1]):
            expr = cst.IfExp(test=_condition(v.path), body=c, orelse=expr)
        return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


class _Rewriter(cst.CSTTransformer):
    def __init__(self, merger: OpCalls) -> None:
        super().__init__()
        self.m = merger

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        m = self.m
        if is_self_attr(original.func):
            name = original.func.attr.value
            variants = m.ops.get(name)
            if variants and len(variants) == 1 and not variants[0].path:
                v = variants[0]
                return m._op_call(v.op, self._ctor(v), updated)
            if variants:
                return m._conditional_call(
                    [Variant(v.path, v.op, self._ctor(v)) for v in variants], updated
                )
            if name in m.attrs and name not in m.helpers and name not in m.handed:
                m.reasons += m.not_an_operator(name)
        if isinstance(original.func, cst.Call):  # ops.Resize(...)(x) made and called in one go
            op = m._ops_class(original.func.func)
            if op is not None:
                # the constructor call, left a call: its function is `ops.<X>`, not `self.<x>`
                return m._op_call(op, cst.ensure_type(updated.func, cst.Call), updated)
        return updated

    def _ctor(self, v: Variant) -> cst.Call:
        """The constructor call of ``v`` rewritten: ``ops.<X>(...)`` stays a call."""
        return cst.ensure_type(v.ctor.visit(_Rewriter(self.m)), cst.Call)

    def leave_Attribute(
        self, original: cst.Attribute, updated: cst.Attribute
    ) -> cst.BaseExpression:
        if not is_self_attr(original):
            return updated
        name = original.attr.value
        if name in self.m.attrs or name in self.m.helpers:
            return cst.Name(self.m.renamed.get(name, name))
        arg = self.m.kwargs.get(_PIPELINE_ATTRS.get(name, ""))
        if arg is not None:  # self.batch_size: what the Pipeline constructor was given
            return arg.value
        if name not in self.m.ops:
            self.m.reasons.append(f"self.{name} is not set in __init__")
        return updated


#: what to write where the graph calls objects the tool does not know as operators
_MAKE_OPERATORS = (
    "make each an ops.* object (of an nvidia.dali.ops imported in this file, or made by a "
    "function of this file that returns one), or call the operators it stands for"
)


def _condition(path: IfPath) -> cst.BaseExpression:
    """The conjunction of the tests of ``path`` (negated where the code is in an ``else``)."""
    terms: list[cst.BaseExpression] = []
    for node, in_body in path:
        test = node.test
        if not isinstance(test, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
            test = test.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        terms.append(test if in_body else cst.UnaryOperation(cst.Not(), test))
    expr = terms[0]
    for t in terms[1:]:
        expr = cst.BooleanOperation(expr, cst.And(), t)
    return expr


def is_self_attr(node: cst.CSTNode) -> TypeGuard[cst.Attribute]:
    return (
        isinstance(node, cst.Attribute)
        and isinstance(node.value, cst.Name)
        and node.value.value == "self"
    )


_NO_SPACE = cst.SimpleWhitespace("")


def _commas(args: list[cst.Arg]) -> list[cst.Arg]:
    sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return [a.with_changes(comma=sep) for a in args[:-1]] + args[-1:]


def _commas_kept(args: list[cst.Arg]) -> list[cst.Arg]:
    """``args`` separated by their own commas (with the comments after them), ``, `` where one
    has none; the last keeps its comma only when a comment follows it."""
    sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    out = [a if isinstance(a.comma, cst.Comma) else a.with_changes(comma=sep) for a in args[:-1]]
    last = args[-1:]
    if last and not _has_comment(last[0].comma):
        last = [last[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)]
    return out + last


def _has_comment(node: cst.CSTNode | cst.MaybeSentinel) -> bool:
    return isinstance(node, cst.CSTNode) and any(isinstance(n, cst.Comment) for n in walk(node))
