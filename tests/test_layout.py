"""The back end's line layout: statements moved into deeper blocks are split as black would."""

from __future__ import annotations

import libcst as cst

from dali_migrate.transforms._backend.layout import fit, one_line_params

HUGGED = """\
images = ndd.crop_mirror_normalize(
    images, dtype=types.FLOAT, output_layout="CHW", crop=(self.crop, self.crop), mean=[128.0] * 3
)
"""


def _fit(code: str, depth: int) -> str:
    stmt = cst.parse_statement(code)
    return cst.Module([]).code_for_node(fit(stmt, "    ", depth))


def test_a_hugged_call_too_long_at_its_new_depth_gets_one_argument_per_line() -> None:
    out = _fit(HUGGED, 4)
    assert out.splitlines()[1:6] == [
        "    images,",
        "    dtype=types.FLOAT,",
        '    output_layout="CHW",',
        "    crop=(self.crop, self.crop),",
        "    mean=[128.0] * 3,",
    ]
    assert cst.parse_statement(out)  # still one valid statement


def test_a_call_over_several_lines_that_fits_keeps_its_layout() -> None:
    assert _fit(HUGGED, 0) == HUGGED


def test_a_display_over_several_lines_keeps_its_layout() -> None:
    code = "sizes = [\n    " + ", ".join(["12345678"] * 12) + "\n]\n"
    assert _fit(code, 3) == code


def _params_of(code: str) -> cst.Parameters:
    fn = cst.parse_statement(code)
    assert isinstance(fn, cst.FunctionDef)
    return fn.params


def _header(params: cst.Parameters) -> str:
    fn = cst.parse_statement("def f():\n    pass\n")
    assert isinstance(fn, cst.FunctionDef)
    return cst.Module([]).code_for_node(fn.with_changes(params=params)).splitlines()[0]


def test_one_line_params_joins_parameters_spread_over_lines():
    params = _params_of("def f(\n    a,\n    b=1,\n    *args,\n    c,\n    **kw,\n):\n    pass\n")
    assert _header(one_line_params(params)) == "def f(a, b=1, *args, c, **kw):"
    bare_star = _params_of("def f(a,\n      *,\n      c):\n    pass\n")
    assert _header(one_line_params(bare_star)) == "def f(a, *, c):"


def test_one_line_params_keeps_one_line_and_commented_lists_as_they_are():
    same = _params_of("def f(a,  b=2):\n    pass\n")
    assert one_line_params(same) is same
    commented = _params_of("def f(\n    a,  # the first\n    b,\n):\n    pass\n")
    assert one_line_params(commented) is commented
