"""DM103 node-indexing: indexing a data node becomes ``.slice[...]``.

Before::

    xy = fn.random.uniform(range=[0, 1], shape=2)
    crop_x = xy[0]
    patch = images[10:20, :, 0]

After::

    xy = ndd.random.uniform(range=[0, 1], shape=2)
    crop_x = xy.slice[0]
    patch = images.slice[10:20, :, 0]

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
    ):
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
