"""One argument given both to a legacy operator object and to its call (DALI 2.4 probed: both
not None fails to build, None means not given), and attributes holding an object or None."""

from __future__ import annotations

import libcst as cst
import pytest

from dali_migrate.transforms._backend.op_arguments import data_names, merged_value
from dali_migrate.transforms._backend.op_flags import value_reads


def _merged(made: str, called: str, nodes: frozenset[str] = frozenset()) -> str | None:
    value = merged_value(cst.parse_expression(made), cst.parse_expression(called), nodes)
    return None if value is None else cst.Module([]).code_for_node(value)


@pytest.mark.parametrize(
    ("made", "called", "nodes", "expected"),
    [
        ("16000", "None", (), "16000"),  # None in the call: not given there
        ("None", "rates", (), "rates"),  # None in the object: not given there
        ("rate if fixed else None", "12", (), "12"),  # a literal is never None
        ("rate if fixed else None", "rates", ("rates",), "rates"),  # nor is a data node
        ("fill", "self_fill", (), "self_fill if self_fill is not None else fill"),
        ("a if b else None", "c.d", (), "c.d if c.d is not None else (a if b else None)"),
        ("fill", "options.get('fill')", (), None),  # read twice: refused
        ("fill", "rate * 2", ("rate",), None),  # an expression, even of data
    ],
)
def test_merged_value(made: str, called: str, nodes: tuple, expected: str | None) -> None:
    assert _merged(made, called, frozenset(nodes)) == expected


def test_data_names_are_those_every_assignment_makes_data() -> None:
    graph = cst.parse_module(
        "def define_graph(self):\n"
        "    jpegs, labels = self.input()\n"
        "    rates = self.uniform() * 2.0\n"
        "    scale = rates if labels else None\n"  # may be None
        "    images = self.decode(jpegs).gpu()\n"
        "    images = 3\n"  # assigned a plain value too
        "    first = labels[0]\n"
        "    head, *rest = self.input()\n"
    )
    makes = lambda call: isinstance(call.func, cst.Attribute)  # noqa: E731
    assert data_names([graph], makes) == {"jpegs", "labels", "rates", "first", "head"}


def test_only_tests_of_an_operator_attribute_are_carried_over() -> None:
    init = cst.parse_module(
        "def define_graph(self):\n"
        "    if self.blur is not None and not self.blur:\n"
        "        x = self.blur(x)\n"
        "    y = x if None is self.blur else 1\n"
        "    self.blur = None\n"
        "    z = self.blur or x\n"  # its value is used: not carried over
        "    w = apply(self.crop)\n"
    )
    assert value_reads([init], {"blur", "crop", "other"}) == {"blur": False, "crop": False}
    tested = cst.parse_module(
        "def f(self):\n    if self.blur is None or not self.blur:\n        pass\n"
    )
    assert value_reads([tested], {"blur"}) == {"blur": True}
