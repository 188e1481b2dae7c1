"""The shapes a TensorFlow ``DALIDataset`` / ``DALIIterator()`` op was given, as
``tf.data.Dataset.from_generator`` must be given them (a component of DM200).

DALI's plugin does not check shapes as ``from_generator`` does (checked in its sources,
``dali_tf_plugin/dali_dataset_op.cc`` and ``daliop.cc``):

- ``DALIDataset`` fits the pipeline's batch to ``output_shapes`` by squeezing 1-sized dimensions
  (``GetCompatibleShape``): a ``(batch_size,)`` shape over labels of shape ``(batch_size, 1)``
  gives ``(batch_size,)``, where ``from_generator`` raises. For a one-dimension shape that
  squeeze is ``reshape(-1)`` of the array in every case DALI accepted, so the generator writes
  it; a shape whose number of dimensions the tool cannot read keeps the dataset (TODO).
- The op checks a shape only where it has dimensions: an empty shape (``()``) neither checks
  nor sets the output's shape, which is ``tf.TensorSpec(None, dtype)``; other shapes must match
  exactly, as ``from_generator`` asks.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import source_of
from .datasets import _values, tupled
from .iterator_use import IteratorUse

#: why a one-dimension shape's output is reshaped, written above the generator's ``yield``
SQUEEZE = (
    "# reshape(-1): DALIDataset squeezed 1-sized dimensions to fit the one-dimension shape it\n"
    "# was given; from_generator takes only that exact shape"
)


def _entries(ctx: FileContext, use: IteratorUse, index: int) -> list[cst.BaseExpression] | None:
    """What output ``index``'s shape may be (one per value the shapes may have); None where the
    tool cannot read one."""
    shapes = use.signature[0] if use.signature is not None else None
    if shapes is None:
        return []
    if not tupled(ctx, use):  # one dtype: output_shapes is that one output's shape
        return [shapes] if index == 0 else None
    found: list[cst.BaseExpression] = []
    for value in _values(ctx, shapes):
        if not isinstance(value, (cst.Tuple, cst.List)) or index >= len(value.elements):
            return None
        found.append(value.elements[index].value)
    return found or None


def _rank(
    ctx: FileContext, use: IteratorUse, shape: cst.BaseExpression, depth: int = 0
) -> int | None:
    """How many dimensions ``shape`` gives: a tuple/list's length, 1 for an integer (or the
    name the dataset's ``batch_size=`` also gives), that of every value a name is assigned,
    None for ``None`` (any shape), -1 where the tool cannot tell."""
    if isinstance(shape, cst.Name) and shape.value == "None":
        return None
    if isinstance(shape, (cst.Tuple, cst.List)):
        if any(isinstance(e, cst.StarredElement) for e in shape.elements):
            return -1
        return len(shape.elements)
    if isinstance(shape, cst.Integer):
        return 1
    given = next(
        (
            a.value
            for a in use.call.args
            if a.keyword is not None and a.keyword.value == "batch_size"
        ),
        None,
    )
    if given is not None and source_of(given) == source_of(shape.with_changes(lpar=[], rpar=[])):
        return 1
    known = _values(ctx, shape) if isinstance(shape, cst.Name) and depth < 3 else []
    ranks = {_rank(ctx, use, v, depth + 1) if v is not shape else -1 for v in known}
    return ranks.pop() if len(ranks) == 1 else -1


def squeezed(ctx: FileContext, use: IteratorUse, outputs: int) -> list[bool]:
    """Per output of a ``DALIDataset``: its shape has one dimension (``reshape(-1)``)."""
    if use.op is not None:
        return [False] * outputs
    flags = []
    for i in range(outputs):
        entries = _entries(ctx, use, i) or []
        ranks = {_rank(ctx, use, e) for e in entries}
        flags.append(ranks == {1})
    return flags


def shape_reasons(ctx: FileContext, use: IteratorUse, outputs: int) -> list[str]:
    """Why the shapes cannot be written for ``from_generator`` exactly as DALI used them."""
    reasons = []
    for i in range(outputs):
        entries = _entries(ctx, use, i)
        if entries is None:
            continue  # (signature_reasons says why)
        ranks = {_rank(ctx, use, e) for e in entries}
        if use.op is None and (-1 in ranks or (1 in ranks and len(ranks) > 1)):
            text = " or ".join(f"`{source_of(e)}`" for e in entries)
            reasons.append(
                f"the tool cannot tell how many dimensions output {i}'s shape {text} has "
                "(DALIDataset squeezed 1-sized dimensions of the pipeline's output to fit it, "
                "from_generator takes only the exact shape: reshape the yielded array to it)"
            )
        shapes = use.signature[0] if use.signature is not None else None
        if use.op is not None and not isinstance(shapes, (cst.Tuple, cst.List)) and 0 in ranks:
            reasons.append(
                f"output {i}'s shape is empty, which the op does not check (write "
                "tf.TensorSpec(None, dtype) for it)"
            )
    return reasons
