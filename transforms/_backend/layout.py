"""Line layout for code the back end writes: statements that code moved into a deeper block (or
that the back end builds) and that end up longer than a line should be are split the way black
splits them, at their outermost call or display.

Before: ``images = ndd.crop_mirror_normalize(images, dtype=types.FLOAT, mean=[127.5] * 3,
std=[127.5] * 3)`` moved from a function body into a method, where it reaches column 110.
After::

            images = ndd.crop_mirror_normalize(
                images, dtype=types.FLOAT, mean=[127.5] * 3, std=[127.5] * 3
            )

The contents go on one line of their own when they fit, else one element per line with a
trailing comma; ``[{...}]`` (a list of one dict) keeps its brackets together. A call already
written over several lines gets one argument per line where a line of it no longer fits;
statements with a comment are left as they are.
"""

from __future__ import annotations

from typing import TypeVar

import libcst as cst
from libcst._nodes.internal import CodegenState

from .._cst import visited

_Node = TypeVar("_Node", bound=cst.CSTNode)

#: the longest line the back end writes where it can
LIMIT = 100


def fit(node: _Node, indent: str, depth: int) -> _Node:
    """``node`` (a statement) with its lines longer than :data:`LIMIT` split; ``depth`` is the
    number of blocks around it and ``indent`` one level of indentation."""
    return visited(node, _Fit(indent, depth))


def render(node: cst.CSTNode, indent: str, depth: int) -> str:
    state = CodegenState(default_indent=indent, default_newline="\n")
    state.indent_tokens = [indent] * depth
    node._codegen(state)
    return "".join(state.tokens)


def fits(node: cst.CSTNode, indent: str, depth: int) -> bool:
    return all(len(line) <= LIMIT for line in render(node, indent, depth).splitlines())


class _Fit(cst.CSTTransformer):
    def __init__(self, indent: str, depth: int) -> None:
        super().__init__()
        self.indent, self.depth = indent, depth

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> bool:
        self.depth += 1
        return True

    def leave_IndentedBlock(
        self, original: cst.IndentedBlock, updated: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        self.depth -= 1
        return updated

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        text = render(updated.with_changes(leading_lines=[]), self.indent, self.depth)
        if self._fits(updated) or "#" in text:
            return updated
        if text.count("\n") > 1:  # written over several lines: one argument per line if that fits
            candidate = _split_statement(updated, self.indent, _explode_call)
            return candidate if candidate is not None and self._fits(candidate) else updated
        for split in (_hug, _explode):
            candidate = _split_statement(updated, self.indent, split)
            if candidate is not None and self._fits(candidate):
                return candidate
        candidate = _split_statement(updated, self.indent, _explode)
        return candidate if candidate is not None else updated

    def _fits(self, stmt: cst.SimpleStatementLine) -> bool:
        """The statement's own lines fit (the comment lines above it are not split)."""
        return fits(stmt.with_changes(leading_lines=[]), self.indent, self.depth)


def _split_statement(
    stmt: cst.SimpleStatementLine, indent: str, split
) -> cst.SimpleStatementLine | None:
    if len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    value = getattr(small, "value", None)
    holder: cst.BaseSmallStatement | cst.Yield = small
    if isinstance(value, cst.Yield):
        holder, value = value, value.value
    if value is None:
        return None
    new = split(value, indent)
    if new is None:
        return None
    if holder is small:
        return stmt.with_changes(body=[small.with_changes(value=new)])
    return stmt.with_changes(body=[small.with_changes(value=holder.with_changes(value=new))])


def _newline(extra: str) -> cst.ParenthesizedWhitespace:
    return cst.ParenthesizedWhitespace(indent=True, last_line=cst.SimpleWhitespace(extra))


def _hug(expr: cst.BaseExpression, indent: str) -> cst.BaseExpression | None:
    """``f(\\n    a, b\\n)``: the contents on one line of their own."""
    if isinstance(expr, cst.Call) and expr.args:
        args = list(expr.args)
        args[-1] = args[-1].with_changes(
            comma=cst.MaybeSentinel.DEFAULT, whitespace_after_arg=_newline("")
        )
        return expr.with_changes(whitespace_before_args=_newline(indent), args=args)
    if isinstance(expr, cst.IfExp):
        return _conditional(expr, indent, one_per_line=False)
    return _display(expr, indent, one_per_line=False)


def _explode(expr: cst.BaseExpression, indent: str) -> cst.BaseExpression | None:
    """One element per line, with a trailing comma."""
    if isinstance(expr, cst.Call) and expr.args:
        args = [
            a.with_changes(
                comma=cst.Comma(whitespace_after=_newline(indent)), whitespace_after_arg=_NONE
            )
            for a in expr.args
        ]
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=_newline("")))
        return expr.with_changes(whitespace_before_args=_newline(indent), args=args)
    if isinstance(expr, cst.IfExp):
        return _conditional(expr, indent, one_per_line=True)
    return _display(expr, indent, one_per_line=True)


def _conditional(expr: cst.IfExp, indent: str, one_per_line: bool) -> cst.IfExp:
    """A statement's value ``a if t else b`` as ``(\\n    a if t else b\\n)``; one per line:
    ``a``, ``if t`` and ``else b`` on lines of their own."""
    out = expr.with_changes(
        lpar=[cst.LeftParen(whitespace_after=_newline(indent))],
        rpar=[cst.RightParen(whitespace_before=_newline(""))],
    )
    if one_per_line:
        out = out.with_changes(
            whitespace_before_if=_newline(indent), whitespace_before_else=_newline(indent)
        )
    return out


def _explode_call(expr: cst.BaseExpression, indent: str) -> cst.BaseExpression | None:
    """A call (only: its parentheses hold the new lines) with one argument per line."""
    return _explode(expr, indent) if isinstance(expr, cst.Call) else None


def _display(
    expr: cst.BaseExpression, indent: str, one_per_line: bool
) -> cst.BaseExpression | None:
    """A list, tuple or dict display split after its opening bracket; ``[{...}]`` splits the
    dict inside."""
    if (
        isinstance(expr, cst.List)
        and len(expr.elements) == 1
        and isinstance(expr.elements[0].value, cst.Dict)
    ):
        inner = _display(expr.elements[0].value, indent, True)
        if inner is None:
            return None
        only = expr.elements[0].with_changes(value=inner, comma=cst.MaybeSentinel.DEFAULT)
        return expr.with_changes(elements=[only])
    if isinstance(expr, cst.Dict) and expr.elements:
        elements, closing = _spread(list(expr.elements), indent, one_per_line)
        return expr.with_changes(
            lbrace=cst.LeftCurlyBrace(whitespace_after=_newline(indent)),
            rbrace=cst.RightCurlyBrace(whitespace_before=closing),
            elements=elements,
        )
    if isinstance(expr, cst.List) and expr.elements:
        elements, closing = _spread(list(expr.elements), indent, one_per_line)
        return expr.with_changes(
            lbracket=cst.LeftSquareBracket(whitespace_after=_newline(indent)),
            rbracket=cst.RightSquareBracket(whitespace_before=closing),
            elements=elements,
        )
    return None


_NONE = cst.SimpleWhitespace("")


def _spread(elements: list, indent: str, one_per_line: bool):
    """The elements of a display over lines, and the whitespace before its closing bracket."""
    if one_per_line:
        out = [e.with_changes(comma=cst.Comma(whitespace_after=_newline(indent))) for e in elements]
        out[-1] = out[-1].with_changes(comma=cst.Comma(whitespace_after=_newline("")))
        return out, _NONE
    out = [
        e.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        for e in elements
    ]
    out[-1] = out[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return out, _newline("")


def one_line_params(params: cst.Parameters) -> cst.Parameters:
    """``params`` written on one line, where they were spread over several lines without
    comments: a parameter list made of the pipeline's parameters and new ones (``self``) would
    otherwise mix the two layouts. A line that is then too long is wrapped with the others."""
    code = cst.Module([]).code_for_node(params)
    if "\n" not in code or "#" in code:
        return params

    def tight(p: cst.Param) -> cst.Param:
        return p.with_changes(
            comma=cst.MaybeSentinel.DEFAULT,
            whitespace_after_star=cst.SimpleWhitespace(""),
            whitespace_after_param=cst.SimpleWhitespace(""),
        )

    star = params.star_arg
    if isinstance(star, cst.Param):
        star = tight(star)
    elif isinstance(star, cst.ParamStar):
        star = cst.ParamStar()
    return params.with_changes(
        posonly_params=[tight(p) for p in params.posonly_params],
        posonly_ind=cst.MaybeSentinel.DEFAULT
        if isinstance(params.posonly_ind, cst.MaybeSentinel)
        else cst.ParamSlash(),
        params=[tight(p) for p in params.params],
        star_arg=star,
        kwonly_params=[tight(p) for p in params.kwonly_params],
        star_kwarg=tight(params.star_kwarg) if params.star_kwarg is not None else None,
    )
