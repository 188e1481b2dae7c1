"""How many outputs a graph's final statement gives: one per element of a tuple, the elements of
what a helper of the module returns, or a number known only when the code runs (refused)."""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import fresh_name, names_in, nested, walk
from .external_source import SourceUse
from .model import ReaderUse


def returns_several(ctx: FileContext, output: cst.BaseExpression) -> list[cst.Return] | None:
    """``output`` calls a function of the module that returns a tuple or list (the pipeline
    had one output per element: the generator would yield the tuple as one): its returns."""
    if not (isinstance(output, cst.Call) and isinstance(output.func, cst.Name)):
        return None
    name = output.func.value
    scope = ctx.scopes.get(output.func)
    bindings = list(scope.assignments[name]) if scope is not None else []
    if scope is not None and not bindings:  # a function of the module
        bindings = list(scope.globals.assignments[name])
    defs = [b.node for b in bindings if isinstance(b.node, cst.FunctionDef)]
    returns = [
        n
        for fn in defs
        for n in walk(fn.body)
        if isinstance(n, cst.Return) and not nested(ctx, n, fn)
    ]
    if any(isinstance(r.value, (cst.Tuple, cst.List)) for r in returns):
        return returns
    return None


def unpacked_outputs(
    ctx: FileContext,
    container: cst.CSTNode,
    output: cst.Call,
    readers: list[ReaderUse],
    sources: list[SourceUse],
) -> tuple[list[cst.Name], cst.Call] | None:
    """``return helper(...)`` whose one definition returns tuples of one length (no starred
    element): names to unpack them into, the helper's own where it returns plain names (a name
    of the batch's data may be reused), else ``output_<i>``. None for other helpers."""
    returns = returns_several(ctx, output) or []
    values = [r.value for r in returns]
    if not all(isinstance(v, (cst.Tuple, cst.List)) for v in values):
        return None
    sizes = {len(v.elements) for v in values}  # type: ignore[union-attr]
    if len(sizes) != 1 or any(
        isinstance(e, cst.StarredElement)
        for v in values
        for e in v.elements  # type: ignore[union-attr]
    ):
        return None
    uses: list[ReaderUse | SourceUse] = [*readers, *sources]
    data = {t for u in uses for t in names_in(u.target)}
    taken = {n.value for n in walk(container) if isinstance(n, cst.Name)} - data
    first = values[0].elements  # type: ignore[union-attr]
    names = []
    for i, e in enumerate(first):
        base = e.value.value if isinstance(e.value, cst.Name) else f"output_{i}"
        names.append(cst.Name(fresh_name(base, taken)))
    return names, output


def several_outputs(ctx: FileContext, output: cst.BaseExpression) -> str:
    return (
        f"its outputs come from `{ctx.text(output)}`, which returns tuples of different lengths "
        "(or with a starred element, or also something else): return the outputs by name"
    )


def sequence_built(output: cst.BaseExpression) -> bool:
    """``output`` stands for a number of outputs known only when the code runs:
    ``tuple(...)`` / ``list(...)``, a comprehension, ``*rest``."""
    if isinstance(output, (cst.ListComp, cst.GeneratorExp, cst.StarredElement)):
        return True
    return (
        isinstance(output, cst.Call)
        and isinstance(output.func, cst.Name)
        and output.func.value in ("tuple", "list")
    )


def built_at_run_time(ctx: FileContext, output: cst.BaseExpression) -> str:
    return (
        f"its outputs are a sequence built when it runs (`{ctx.text(output)}`): return each "
        "output by name, or migrate this pipeline by hand"
    )
