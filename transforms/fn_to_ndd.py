"""DM101 fn-to-ndd: pipeline-mode operators become dynamic-mode calls.

Before (``fixtures/DM101/aliases.in.py``)::

    import nvidia.dali as dali
    from nvidia.dali import fn as dfn
    from nvidia.dali.fn import rotate


    def rotate_and_root(images, angle):
        images = rotate(images, angle=angle, fill_value=0)
        images = dfn.flip(images, horizontal=1)
        return dali.math.sqrt(dali.fn.cast(images, dtype=dali.types.FLOAT))

After (``fixtures/DM101/aliases.out.py``)::

    import nvidia.dali as dali
    import nvidia.dali.experimental.dynamic as ndd


    def rotate_and_root(images, angle):
        images = ndd.rotate(images, angle=angle, fill_value=0)
        images = ndd.flip(images, horizontal=1)
        return ndd.math.sqrt(ndd.cast(images, dtype=dali.types.FLOAT))

The operator names come from the catalog generated from DALI: deprecated aliases go to their
modern name. Operators that dynamic mode lacks (``fn.python_function``, ``fn.shapes``,
``fn.external_source``, ...) are left as they are with a TODO that names the replacement.
Readers are not rewritten here: a reader becomes a stateful object, which only the structural
rules (DM2xx) can place correctly.

Safety: safe inside code the structural rules migrate, and in helper functions that build graph
parts. A file in which a pipeline could not be migrated gets no local rewrites at all.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FN_PREFIX, MATH_PREFIX, FileContext, attr_chain
from dali_migrate.fixes import Diagnostic

from ._local import LocalEnv, LocalRule
from .random_ops import migrates_outside

#: what to use instead of the operators dynamic mode does not have
REPLACEMENTS = {
    "external_source": "feed the data directly: ndd.as_batch(...) per batch, or ndd.ExternalSource",
    "python_function": "call the function in plain Python on the samples, then ndd.as_batch(...)",
    "dl_tensor_python_function": "call the function in plain Python on the samples, then ndd.as_batch(...)",
    "constant": "use a numpy array or ndd.as_tensor(...)",
    "shapes": "use batch.shape (a list of per-sample shapes)",
    "readers.sequence": "dynamic mode has no sequence reader: read the frames with ndd.readers.File and "
    "stack each sequence with ndd.stack, or keep this pipeline in pipeline mode",
    "experimental.inputs.video": "decode the encoded video with ndd.decoders.video yourself, "
    "or keep this pipeline in pipeline mode",
}


#: operators dynamic mode lacks whose calls another local rule rewrites (or flags with its own
#: TODO): DM101 leaves those calls to it. Structural rules lowering code with these rules must not
#: refuse these operators up front: the rule's TODO, if any, comes back from ``lower``.
HANDED_OFF = {
    "python_function": "DM105",
    "dl_tensor_python_function": "DM105",
    "shapes": "DM106",
    "constant": "DM107",
}


class FnToNdd(LocalRule):
    id = "DM101"
    name = "fn-to-ndd"
    summary = "pipeline-mode operator fn.X becomes ndd.X"
    node_types = (cst.Attribute, cst.Name)

    def rewrite(
        self,
        ctx: FileContext,
        original: cst.Attribute | cst.Name,
        updated: cst.Attribute | cst.Name,
        env: LocalEnv,
    ) -> cst.CSTNode | Diagnostic | None:
        q = ctx.qualname(original)
        if not q:
            return None
        parent = ctx.parents.get(original)
        # only the outermost name of a dotted reference (fn.decoders.image, not fn.decoders)
        if isinstance(parent, cst.Attribute) and parent.value is original:
            return None
        if isinstance(parent, (cst.ImportAlias, cst.ImportFrom)) or _in_import(ctx, original):
            return None
        if q.startswith(MATH_PREFIX):
            name = q[len(MATH_PREFIX) :]
            if ctx.catalog.has_math(name):
                return attr_chain(f"{ctx.ndd}.math.{name}")
            return ctx.todo(self.id, original, f"dali.math.{name} has no dynamic-mode counterpart")
        if not q.startswith(FN_PREFIX):
            return None
        path = q[len(FN_PREFIX) :]
        op = ctx.catalog.fn(path)
        if op is None:
            if any(o.fn_path.startswith(path + ".") for o in ctx.catalog):
                return None  # a submodule such as fn.readers, not an operator
            return ctx.todo(
                self.id, original, f"fn.{path} is not a DALI {ctx.catalog.dali_version} operator"
            )
        target = op.target
        if target.is_reader and target.ndd_path is not None:
            if isinstance(parent, cst.Call) and parent.func is original:
                return ctx.todo(
                    self.id,
                    original,
                    f"fn.{path} outside a pipeline the tool migrated: build ndd.readers."
                    f"{(target.ndd_path or '').split('.')[-1]} once and iterate "
                    "reader.next_epoch(batch_size=...)",
                )
            return None
        if op is not target and (
            op.inputs != target.inputs or op.num_outputs != target.num_outputs
        ):
            return ctx.todo(
                self.id,
                original,
                f"fn.{path} is deprecated for fn.{target.fn_path}, which takes different inputs or "
                "gives different outputs: rewrite it by hand",
            )
        called = isinstance(parent, cst.Call) and parent.func is original
        if target.is_random and env.rng is None and not (called and migrates_outside(ctx, parent)):
            return None  # DM104 leaves it as it is, with a TODO that says what it needs
        if target.ndd_path is None:
            if (
                target.fn_path in HANDED_OFF
                and isinstance(parent, cst.Call)
                and parent.func is original
            ):
                return None  # the call is rewritten or flagged by HANDED_OFF[...]
            hint = REPLACEMENTS.get(target.fn_path, "no dynamic-mode counterpart")
            return ctx.todo(self.id, original, f"fn.{path} does not exist in dynamic mode: {hint}")
        return attr_chain(f"{ctx.ndd}.{target.ndd_path}")

    def message(self, ctx: FileContext, original: cst.CSTNode, new: cst.CSTNode) -> str:
        return f"{ctx.text(original)} -> {ctx.render(new, [])}"


def _in_import(ctx: FileContext, node: cst.CSTNode) -> bool:
    cur = ctx.parents.get(node)
    while cur is not None and not isinstance(cur, cst.BaseStatement):
        if isinstance(cur, (cst.Import, cst.ImportFrom)):
            return True
        cur = ctx.parents.get(cur)
    return False
