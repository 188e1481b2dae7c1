"""The back end's line layout: statements moved into deeper blocks are split as black would."""

from __future__ import annotations

import libcst as cst

from dali_migrate.transforms._backend.layout import fit

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
