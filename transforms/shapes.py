"""DM106 shapes: ``fn.shapes(x)`` and ``x.shape()`` become a batch built from ``x.shape``.

Before (``fixtures/DM106/shapes.in.py``)::

    import nvidia.dali.fn as fn
    import nvidia.dali.types as types


    def sizes(jpegs):
        images = fn.decoders.image(jpegs)
        shape = fn.shapes(images)
        hw = fn.shapes(images, dtype=types.INT32)
        return shape, hw


    def node_method(jpegs):
        images = fn.decoders.image(jpegs)
        return images.shape()


    def crop_window(jpegs):
        images = fn.decoders.image(jpegs)
        return fn.slice(images, 0, images.shape(dtype=types.FLOAT) * 0.5, normalized_anchor=False, normalized_shape=False)

After (``fixtures/DM106/shapes.out.py``)::

    import numpy as np
    import nvidia.dali.experimental.dynamic as ndd


    def sizes(jpegs):
        images = ndd.decoders.image(jpegs)
        shape = ndd.as_batch([np.array(s, dtype=np.int64) for s in images.shape])
        hw = ndd.as_batch([np.array(s, dtype=np.int32) for s in images.shape])
        return shape, hw


    def node_method(jpegs):
        images = ndd.decoders.image(jpegs)
        return ndd.as_batch([np.array(s, dtype=np.int64) for s in images.shape])


    def crop_window(jpegs):
        images = ndd.decoders.image(jpegs)
        return ndd.slice(
            images,
            0,
            ndd.as_batch([np.array(s, dtype=np.float32) for s in images.shape]) * 0.5,
            normalized_anchor=False,
            normalized_shape=False,
        )

Dynamic mode has no ``shapes`` operator (deprecated since DALI 1.44), and ``Batch.shape`` is a
property: a Python list with one shape tuple per sample. Pipeline mode gave one 1-D tensor per
sample, int64 unless ``dtype=`` said otherwise; the dtype is spelled out because numpy would
make the shape of a scalar sample ``()`` float64. Checked against DALI 2.4 on CPU for the
default and for INT32, INT64, UINT32, UINT64, FLOAT and FLOAT64, including scalar samples.

``device="gpu"`` (or an expression) places the batch there: ``ndd.as_batch([...],
device="gpu")``. The operator read only the metadata of its input, of either device, and put its
output on its own device (``GetInputDevice`` of its schema keeps the input's device), and a Batch
has its ``shape`` on either device.

Left as they are, with a TODO: a ``dtype=`` that is not a literal DALI type (or one not
checked), and inputs the tool cannot prove are data nodes (function parameters, expressions:
assign them to a variable first).

Safety: safe.
"""  # noqa: E501 (the example is the fixture as the rule writes it)

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Diagnostic

from ._cst import fresh_name, has_star, kwargs_of, literal, names_in, positional
from ._dali import DTYPES, dali_dtype
from ._local import LocalEnv, LocalRule

#: dtypes whose result was compared with pipeline mode
_CHECKED = {"INT32", "INT64", "UINT32", "UINT64", "FLOAT", "FLOAT64"}
_IGNORED = {"preserve", "bytes_per_sample_hint"}


class Shapes(LocalRule[cst.Call]):
    id = "DM106"
    name = "shapes"
    summary = "fn.shapes(x) and x.shape() become a batch built from x.shape"
    node_types = (cst.Call,)

    def rewrite(
        self, ctx: FileContext, original: cst.Call, updated: cst.Call, env: LocalEnv
    ) -> cst.CSTNode | Diagnostic | None:
        op = ctx.fn_op(original.func)
        code = lambda n: cst.Module(body=[]).code_for_node(n)  # noqa: E731
        if op is not None and op.target.fn_path == "shapes":
            what = ctx.text(original.func)
            ins = positional(updated)
            if has_star(updated) or len(ins) != 1:
                return ctx.todo(self.id, original, f"{what}: expected one input; {_hint(ctx, 'x')}")
            node = ins[0].value
        elif (
            isinstance(original.func, cst.Attribute)
            and original.func.attr.value == "shape"
            and isinstance(original.func.value, cst.Name)
            and original.func.value.value in env.nodes
            and not positional(original)
        ):
            what = f"{original.func.value.value}.shape()"
            node = cst.ensure_type(updated.func, cst.Attribute).value
        else:
            return None
        kw = kwargs_of(updated)
        if set(kw) - {"dtype", "device"} - _IGNORED or has_star(updated):
            return ctx.todo(
                self.id, original, f"{what}: unexpected arguments; {_hint(ctx, code(node))}"
            )
        device_arg = ""
        if "device" in kw:
            try:
                device = literal(kw["device"].value)
            except (ValueError, SyntaxError):
                device = None  # an expression: "cpu" or "gpu" (no mixed backend)
            if device not in ("cpu", "gpu", None):
                return ctx.todo(
                    self.id, original, f"{what} with device={device!r}: {_hint(ctx, code(node))}"
                )
            if device != "cpu":  # the shapes of data of either device, placed on that one
                device_arg = f", device={code(kw['device'].value)}"
        dtype_arg = kwargs_of(original).get("dtype")  # (the node the file's imports resolve)
        np_dtype = "int64"
        if dtype_arg is not None:
            d = dali_dtype(ctx, dtype_arg.value)
            if d is None or d not in _CHECKED:
                return ctx.todo(
                    self.id,
                    original,
                    f"{what}: dtype= is not a known literal DALI type; "
                    f"{_hint(ctx, code(node), None)}",
                )
            np_dtype = DTYPES[d][1]
        if not (isinstance(node, cst.Name) and node.value in env.nodes):
            return ctx.todo(
                self.id,
                original,
                f"{what}: the tool cannot tell that {code(node)} is a data node (a batch after "
                "migration); "
                f"{_hint(ctx, code(node), np_dtype)}",
            )
        s = fresh_name("s", names_in(node) | {ctx.np, ctx.ndd}, "shape")
        shapes = f"[{ctx.np}.array({s}, dtype={ctx.np}.{np_dtype}) for {s} in {node.value}.shape]"
        new = f"{ctx.ndd}.as_batch({shapes}{device_arg})"
        expr = cst.parse_expression(new)
        return expr.with_changes(lpar=updated.lpar, rpar=updated.rpar) if updated.lpar else expr

    def message(self, ctx: FileContext, original: cst.CSTNode, new: cst.CSTNode) -> str:
        return f"{ctx.text(cst.ensure_type(original, cst.Call).func)}(...) -> a batch built from .shape"


def _hint(ctx: FileContext, x: str, dtype: str | None = "int64") -> str:
    d = f"{ctx.np}.{dtype}" if dtype else "<the numpy dtype>"
    return f"use {ctx.ndd}.as_batch([{ctx.np}.array(s, dtype={d}) for s in {x}.shape])"
