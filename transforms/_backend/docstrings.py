"""The docstrings the back end writes for a migrated pipeline."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from dali_migrate.context import FileContext


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
    ctx: FileContext,
    outputs: list[cst.BaseExpression],
    kind: str,
    fed: Sequence[cst.Name] = (),
    listed: str | None = None,
) -> cst.SimpleStatementLine:
    """``\"\"\"Yields (images, labels) batches epoch after epoch, without end, as Pipeline.run() did.\"\"\"``;
    ``kind``: "endless", "sourced" (until its external source ends) or "fed" (a function of the
    data ``pipe.feed_input()`` gave, whose names are ``fed``); ``listed``: the outputs are the
    elements of the list of that name."""
    names = f"*{listed}" if listed is not None else ", ".join(output_names(ctx, outputs))
    if kind == "fed":
        args = ", ".join(n.value for n in fed)
        text = (
            f'"""Returns a function of the data pipe.feed_input() gave: ({args}) -> ({names}) '
            'batches, as Pipeline.run()."""'
        )
    else:
        until = (
            "epoch after epoch, without end,"
            if kind == "endless"
            else "until its external source ends,"
        )
        text = f'"""Yields ({names}) batches {until} as Pipeline.run() did."""'
    return cst.SimpleStatementLine([cst.Expr(cst.SimpleString(text))])


def output_names(ctx: FileContext, outputs: list[cst.BaseExpression]) -> list[str]:
    """Names for the docstring: ``labels.gpu()``, ``labels[0]`` and ``fn.flip(labels)`` are
    still "labels"; anything else is "output" (``fn.resize(fn.decoders.image(jpegs))`` is no
    longer jpegs)."""
    names = []
    for v in outputs:
        while True:
            if (
                isinstance(v, cst.Call)
                and ctx.is_fn_ref(v.func)
                and v.args
                and v.args[0].keyword is None
            ):
                v = v.args[0].value  # fn.resize(images, ...) yields resized images
                if not isinstance(v, cst.Name):
                    break
            elif (
                isinstance(v, cst.Call)
                and isinstance(v.func, cst.Attribute)
                and ctx.qualname(v.func) is None
            ):
                v = v.func.value
            elif isinstance(v, (cst.Attribute, cst.Subscript)):
                v = v.value
            else:
                break
        names.append(v.value if isinstance(v, cst.Name) else "output")
    # two outputs derived from one name (`volumes[0], fn.reductions.sum(volumes)`) tell nothing apart
    return [n if names.count(n) == 1 or n == "output" else "output" for n in names]
