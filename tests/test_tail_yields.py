"""The yields that end the branches of an ``if``, bound to one name so that one yield can follow
the GPU's context (transforms/_backend/tail_yields.py)."""

from __future__ import annotations

import textwrap

import libcst as cst

from dali_migrate.transforms._backend.tail_yields import bound_yields


def _bound(code: str) -> tuple[str, str] | None:
    """The ``if`` with its yields bound to ``outputs``, and the statements moved after the
    yield; None where the shape is refused."""
    got = bound_yields(cst.parse_statement(textwrap.dedent(code).lstrip()), cst.Name("outputs"))
    if got is None:
        return None
    module = cst.Module([])
    return module.code_for_node(got[0]), "".join(module.code_for_node(s) for s in got[1])


def test_every_branch_of_an_elif_chain_binds_the_name() -> None:
    got = _bound(
        """
        if mode == 1:
            a = f(x)
            yield a.evaluate(), y
        elif mode == 2:  # two
            yield (x,)
        else:
            yield x, y
        """
    )
    assert got == (
        textwrap.dedent(
            """\
            if mode == 1:
                a = f(x)
                outputs = a.evaluate(), y
            elif mode == 2:  # two
                outputs = (x,)
            else:
                outputs = x, y
            """
        ),
        "",
    )


def test_a_nested_if_and_the_statements_every_branch_runs_after_its_yield() -> None:
    got = _bound(
        """
        if a:
            if b:
                yield x
                step += 1
            else:
                yield y
                step += 1
        else:
            yield z
            step += 1
        """
    )
    assert got is not None
    assert "yield" not in got[0] and got[0].count("outputs = ") == 3
    assert "step" not in got[0] and got[1] == "step += 1\n"


def test_shapes_where_a_way_through_would_not_bind_the_name_are_refused() -> None:
    assert _bound("if a:\n    yield x\n") is None  # no else
    assert _bound("if a:\n    yield x\nelse:\n    y = 1\n") is None  # a branch without a yield
    assert _bound("if a:\n    yield x\n    yield y\nelse:\n    yield z\n") is None  # two yields
    assert _bound("if a:\n    yield\nelse:\n    yield z\n") is None  # a yield without a value
    assert _bound("if a: yield x\nelse:\n    yield z\n") is None  # a one-line branch


def test_different_statements_after_the_yields_are_refused() -> None:
    assert _bound("if a:\n    yield x\n    i += 1\nelse:\n    yield z\n") is None
    assert _bound("if a:\n    yield x\n    i += 1\nelse:\n    yield z\n    i += 2\n") is None


def test_a_yield_inside_an_expression_before_the_yield_statement_is_refused() -> None:
    assert _bound("if a:\n    v = yield x\n    yield v\nelse:\n    yield z\n") is None
