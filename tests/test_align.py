"""Continuation lines aligned with a call's bracket move with it (transforms/_align.py)."""

from __future__ import annotations

import libcst as cst

from dali_migrate.transforms._align import aligned_after, shift_continuation, visual_indent


def _call(code: str) -> cst.Call:
    expr = cst.parse_expression(code)
    assert isinstance(expr, cst.Call)
    return expr


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def test_aligned_lines_move_with_the_bracket():
    call = _call("fn.resize(images,\n          # why\n          size=4,\n          mode='x')")
    renamed = shift_continuation(call.with_changes(func=cst.parse_expression("ndd.resize")), 1)
    assert _code(renamed) == (
        "ndd.resize(images,\n           # why\n           size=4,\n           mode='x')"
    )
    back = shift_continuation(call, -3)
    assert _code(back) == "fn.resize(images,\n       # why\n       size=4,\n       mode='x')"


def test_a_closing_bracket_alone_on_its_line_keeps_its_column():
    call = _call("f(a,\n  b,\n)")
    assert _code(shift_continuation(call, 2)) == "f(a,\n    b,\n)"


def test_hanging_and_one_line_calls_are_left_alone():
    hanging = _call("f(\n    a,\n    b,\n)")
    one_line = _call("f(a, b)")
    assert not visual_indent(hanging) and not visual_indent(one_line)
    assert shift_continuation(hanging, 3) is hanging
    assert shift_continuation(one_line, 3) is one_line


def test_nested_calls_move_with_the_outer_one():
    call = _call("f(g(a,\n    b),\n  c)")
    assert _code(shift_continuation(call, 1)) == "f(g(a,\n     b),\n   c)"


def test_aligned_after_reads_the_columns_from_the_call():
    call = _call("f(a,\n      b,\n      c)")  # as written after `x = ` (4 columns)
    assert aligned_after(call, 4)
    assert aligned_after(call, 3) and aligned_after(call, 5)  # one column off still counts
    assert not aligned_after(call, 8)
    assert not aligned_after(_call("f(\n    a,\n    b)"), 0)
