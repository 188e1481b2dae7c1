"""The pipeline's ``seed=`` as the seed of the generator's ``ndd.random.RNG``.

DALI's ``Pipeline`` (and ``@pipeline_def``) takes a negative seed (the default, -1) or None as
no seed: a random one, drawn anew in every run. ``ndd.random.RNG(seed=-1)`` is not that: it
seeds Philox with ``-1 & 0xFFFFFFFFFFFFFFFF``, the same stream in every run; ``RNG()`` (or
``RNG(seed=None)``) draws a random seed as the pipeline did. So:

- an unset literal (``None``, ``-1``, any negative integer) gives no seed: ``RNG()``;
- a name whose value may be unset (a parameter of the generator whose default is unset, or one
  some call gives an unset literal) gives the pipeline's own test::

      rng = ndd.random.RNG(seed=None if seed is None or seed < 0 else seed)

- anything else is the seed as written.

A reader's own ``seed=-1`` needs nothing: DALI readers and ndd readers both take it as their
fixed default seed (checked on DALI 2.4: the same order in both, in every run).
"""

from __future__ import annotations

import libcst as cst

from .._cst import is_literal


def unset_seed(expr: cst.BaseExpression) -> bool:
    """``None`` or a negative integer literal: the pipeline's "no seed"."""
    if is_literal(expr, (None,)):
        return True
    return (
        isinstance(expr, cst.UnaryOperation)
        and isinstance(expr.operator, cst.Minus)
        and isinstance(expr.expression, cst.Integer)
        and expr.expression.evaluated_value > 0
    )


def param_unset(params: cst.Parameters | None, name: str) -> bool:
    """A parameter ``name`` in ``params`` whose default is an unset seed."""
    if params is None:
        return False
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    return any(
        p.name.value == name and p.default is not None and unset_seed(p.default) for p in every
    )


def rng_seed(
    expr: cst.BaseExpression | None,
    params: cst.Parameters | None = None,
    *,
    may_be_unset: bool = False,
) -> cst.BaseExpression | None:
    """The seed for ``ndd.random.RNG`` (None: no seed) from the pipeline's ``seed=`` ``expr``;
    ``params``: the generator's parameters, ``may_be_unset``: a call gives ``expr`` an unset
    literal."""
    if expr is None or unset_seed(expr):
        return None
    if isinstance(expr, cst.Name) and (may_be_unset or param_unset(params, expr.value)):
        return unset_guarded(expr)
    return expr


def unset_guarded(name: cst.Name) -> cst.IfExp:
    """``None if seed is None or seed < 0 else seed``."""
    test = cst.BooleanOperation(
        left=cst.Comparison(name, [cst.ComparisonTarget(cst.Is(), cst.Name("None"))]),
        operator=cst.Or(),
        right=cst.Comparison(name, [cst.ComparisonTarget(cst.LessThan(), cst.Integer("0"))]),
    )
    return cst.IfExp(test=test, body=cst.Name("None"), orelse=name)


def reader_seed(expr: cst.BaseExpression) -> cst.BaseExpression:
    """The seed a shuffling reader gets from the pipeline's: the name itself where the RNG's is
    guarded (an ndd reader takes None and -1 alike, as its fixed default seed)."""
    return expr.orelse if isinstance(expr, cst.IfExp) else expr


def guarded(expr: cst.BaseExpression | None) -> bool:
    """The RNG's seed is guarded: the pipeline's may be unset when the code runs."""
    return isinstance(expr, cst.IfExp)
