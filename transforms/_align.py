"""Continuation lines kept aligned with their opening bracket when the text before it changes.

Code written in the "visual indent" style puts a call's first argument on the bracket's line and
aligns the lines after it with that argument::

    images = fn.decoders.image(jpegs, device="mixed",
                               output_type=types.RGB)

Renaming the function (``fn.`` -> ``ndd.``) or the target before it moves the bracket, and the
lines after it have to move with it, as a person editing the line would move them. Calls written
in the hanging style (nothing after the bracket) are left as they are: their lines do not depend
on the bracket's column.
"""

from __future__ import annotations

from collections.abc import Mapping

import libcst as cst
from libcst.metadata import CodeRange

from ._cst import visited


def visual_indent(call: cst.Call) -> bool:
    """``call`` spreads its arguments over several lines, the first on the bracket's line."""
    if not call.args or _newline_in(call.whitespace_before_args):
        return False
    return any(_newline_in(a) for a in call.args)


def aligned_to_bracket(call: cst.Call, positions: Mapping[cst.CSTNode, CodeRange]) -> bool:
    """``call`` (a node ``positions`` knows) is written in the visual-indent style and each line
    of its arguments starts where its first argument does (or one column off)."""
    span = positions.get(call)
    if span is None or span.start.line == span.end.line or not visual_indent(call):
        return False  # (a call on one line, most of them, is told by its span alone)
    first = positions[call.args[0]].start
    starts = [positions[a].start for a in call.args[1:]]
    return all(abs(p.column - first.column) <= 1 for p in starts if p.line != first.line)


def aligned_after(call: cst.Call, head: int) -> bool:
    """``call``, written ``head`` columns after the start of its statement, has the lines of
    its arguments aligned with its first argument (or one column off)."""
    if not visual_indent(call):
        return False
    code = cst.Module([]).code_for_node
    first = head + len(code(call.func)) + len(code(call.whitespace_after_func)) + 1
    first += len(code(call.whitespace_before_args))
    starts = [
        len(a.comma.whitespace_after.last_line.value)
        for a in call.args[:-1]
        if isinstance(a.comma, cst.Comma)
        and isinstance(a.comma.whitespace_after, cst.ParenthesizedWhitespace)
    ]
    return all(abs(col - first) <= 1 for col in starts)


def shift_continuation(call: cst.Call, delta: int) -> cst.Call:
    """``call`` with the lines its arguments continue on moved ``delta`` columns where it is
    written in the visual-indent style. The space before the closing bracket stays (a bracket
    alone on its line keeps its column)."""
    if delta == 0 or not visual_indent(call):
        return call
    shift = _Shift(delta)
    *init, last = call.args
    args = [visited(a, shift) for a in init]
    tail = {"comma": last.comma, "whitespace_after_arg": last.whitespace_after_arg}
    if isinstance(last.comma, cst.Comma):
        before = visited(last.comma.whitespace_before, shift)
        tail["comma"] = last.comma.with_changes(whitespace_before=before)
    moved = visited(last.with_changes(comma=cst.MaybeSentinel.DEFAULT), shift)
    return call.with_changes(args=[*args, moved.with_changes(**tail)])


class _Shift(cst.CSTTransformer):
    def __init__(self, delta: int) -> None:
        super().__init__()
        self.delta = delta

    def leave_ParenthesizedWhitespace(
        self, original: cst.ParenthesizedWhitespace, updated: cst.ParenthesizedWhitespace
    ) -> cst.ParenthesizedWhitespace:
        lines = [self._line(e) for e in updated.empty_lines]
        return updated.with_changes(empty_lines=lines, last_line=self._moved(updated.last_line))

    def _line(self, line: cst.EmptyLine) -> cst.EmptyLine:
        if line.comment is None:
            return line
        return line.with_changes(whitespace=self._moved(line.whitespace))

    def _moved(self, ws: cst.SimpleWhitespace) -> cst.SimpleWhitespace:
        text = ws.value
        if not text or text.strip(" "):  # empty, or tabs / a line continuation: left alone
            return ws
        return cst.SimpleWhitespace(" " * max(1, len(text) + self.delta))


def _newline_in(node: cst.CSTNode) -> bool:
    return "\n" in cst.Module([]).code_for_node(node)
