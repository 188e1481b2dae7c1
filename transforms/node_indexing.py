"""DM103 node-indexing: indexing a data node becomes ``.slice[...]``.

Before (``fixtures/DM103/indexing.in.py``)::

    from nvidia.dali import fn


    def crop_top_left(jpegs, images):
        shape = fn.peek_image_shape(jpegs)
        height = shape[0]
        width = shape[1]
        half = images[0 : height // 2, 0 : width // 2]
        return half, height * width


    def encode(boxes, labels, anchors):
        encoded = fn.box_encoder(boxes, labels, anchors=anchors)
        return encoded[0], encoded[1]  # a tuple of two outputs: plain indexing stays

After (``fixtures/DM103/indexing.out.py``)::

    import nvidia.dali.experimental.dynamic as ndd


    def crop_top_left(jpegs, images):
        shape = ndd.peek_image_shape(jpegs)
        height = shape.slice[0]
        width = shape.slice[1]
        half = images[0 : height // 2, 0 : width // 2]
        return half, height * width


    def encode(boxes, labels, anchors):
        encoded = ndd.box_encoder(boxes, labels, anchors=anchors)
        return encoded[0], encoded[1]  # a tuple of two outputs: plain indexing stays

A ``Batch`` has no ``[]``: ``batch.slice[...]`` indexes inside every sample, as pipeline-mode
node indexing did. Only names the tool can prove hold a single data node (assigned from a DALI
operator, or arithmetic on one) are rewritten; the outputs of multi-output operators indexed as
a tuple (``outs[0]``) are left alone.

Safety: safe.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Edit

from ._local import LocalEnv, LocalRule, produces_node


class NodeIndexing(LocalRule[cst.Subscript]):
    id = "DM103"
    name = "node-indexing"
    summary = "node[i] becomes node.slice[i]"
    node_types = (cst.Subscript,)

    def rewrite(
        self, ctx: FileContext, original: cst.Subscript, updated: cst.Subscript, env: LocalEnv
    ) -> cst.CSTNode | None:
        value = original.value
        if isinstance(value, cst.Attribute) and value.attr.value == "slice":
            return None
        if not produces_node(ctx, value, env.nodes):
            return None
        return updated.with_changes(
            value=cst.Attribute(value=updated.value, attr=cst.Name("slice"))
        )

    def edit(self, ctx: FileContext, original: cst.Subscript, new: cst.Subscript) -> Edit:
        end = ctx.positions[original.value].end
        off = ctx.lines.offset(end.line, end.column)
        return Edit(off, off, ".slice")
