"""The docstrings the back end writes for a migrated pipeline."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import walk
from .model import Graph


def is_generated_doc(doc: cst.BaseStatement | None) -> bool:
    """The docstring the structural rules give a migrated pipeline ("Yields (...) ... as Pipeline.run() did")."""
    return generated_doc_text(doc) is not None


def generated_doc_text(doc: cst.BaseStatement | None) -> str | None:
    """The text of ``doc`` when it is the docstring :func:`is_generated_doc` recognises."""
    if not (
        isinstance(doc, cst.SimpleStatementLine)
        and isinstance(doc.body[0], cst.Expr)
        and isinstance(doc.body[0].value, cst.SimpleString)
    ):
        return None
    text = doc.body[0].value.evaluated_value  # bytes for a b"..." string: never ours
    if isinstance(text, str) and text.startswith("Yields (") and "as Pipeline.run() did" in text:
        return text
    return None


def generator_doc(
    ctx: FileContext, graph: Graph, kind: str, fed: Sequence[cst.Name] = ()
) -> cst.SimpleStatementLine:
    """``\"\"\"Yields (images, labels) batches epoch after epoch, without end, as Pipeline.run() did.\"\"\"``;
    ``kind``: "endless", "sourced" (until its external source ends) or "fed" (a function of the
    data ``pipe.feed_input()`` gave, whose names are ``fed``)."""
    names = graph_outputs_text(ctx, graph)
    if kind == "fed":
        args = ", ".join(n.value for n in fed)
        text = (
            f'"""Returns a function of the data pipe.feed_input() gave: ({args}) -> {names} '
            'batches, as Pipeline.run()."""'
        )
    else:
        text = f'"""Yields {names} batches {until_phrase(kind)} as Pipeline.run() did."""'
    return cst.SimpleStatementLine([cst.Expr(cst.SimpleString(text))])


def generator_kind(graph: Graph, fed: bool) -> str:
    """ "fed" (``fed``: a function of the data pipe.feed_input() gave), "sourced" (its external
    source ends it: a ``return`` without a value in its code, or an external source) or
    "endless"."""
    if fed:
        return "fed"
    if graph.sources or any(
        isinstance(n, cst.Return) and n.value is None for s in graph.body for n in walk(s)
    ):
        return "sourced"
    return "endless"


def until_phrase(kind: str) -> str:
    """How long the generator of ``kind`` ("endless" or "sourced") yields."""
    if kind == "endless":
        return "epoch after epoch, without end,"
    return "until its external source ends,"


def graph_outputs_text(ctx: FileContext, graph: Graph, tupled: bool = True) -> str:
    """:func:`outputs_text` of what the generator of ``graph`` yields (each branch's outputs
    where a final ``if`` chooses them, the elements of a list built in the graph code)."""
    if graph.outputs_list is not None:
        return f"(*{graph.outputs_list})"
    branches = graph.branch_outputs.values() if graph.branch_outputs else [graph.outputs]
    return outputs_text(ctx, branches, tupled)


def outputs_text(
    ctx: FileContext, branches: Iterable[Sequence[cst.BaseExpression]], tupled: bool = True
) -> str:
    """What each batch is, as Python writes it: ``(images, labels)``; ``(images,)`` for one
    output (pipe.run() gave a tuple of one; ``tupled=False``: the batch itself, ``images``);
    ``(output, tiles) or (tiles,)`` where branches yield different outputs; "(its outputs)"
    where none is known."""
    texts: list[str] = []
    for outputs in filter(None, branches):
        names = ", ".join(output_name(ctx, v) for v in outputs)
        text = f"({names})" if len(outputs) > 1 else f"({names},)" if tupled else names
        if text not in texts:
            texts.append(text)
    return " or ".join(texts) or "(its outputs)"


def output_name(ctx: FileContext, output: cst.BaseExpression) -> str:
    """The name of the variable ``output`` is (``labels``, or ``labels.gpu()``: the same values
    on another device); "output" for anything else: ``fn.resize(images)``, ``labels[0]`` and
    ``self.decode(jpegs)`` are not ``images``, ``labels`` or ``jpegs``."""
    if (
        isinstance(output, cst.Call)
        and not output.args
        and isinstance(output.func, cst.Attribute)
        and output.func.attr.value in ("gpu", "cpu")
        and ctx.qualname(output.func) is None
    ):
        output = output.func.value
    return output.value if isinstance(output, cst.Name) else "output"
