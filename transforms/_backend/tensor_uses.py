"""Names bound to ``out.as_tensor()`` after the migration: ndd Tensors where they were
TensorCPU / TensorGPU objects.

``t = images.as_tensor()`` becomes ``t = ndd.as_tensor(images)``; the methods the code then
calls on ``t`` are those of DALI's TensorCPU, some of which are properties of an ndd Tensor::

    t.shape()     ->  t.shape
    t.layout()    ->  t.layout
    t.as_array()  ->  np.asarray(t)
    t.as_cpu()    ->  t.cpu()

Any other attribute of ``t`` gets a TODO next to it. ``np.array(t)``, ``print(t)`` and the like
work on an ndd Tensor as they did.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext, attr_chain
from dali_migrate.fixes import Diagnostic, Edit

from .._cst import in_source_order
from .reaching import reaching

_PROPERTIES = ("shape", "layout")


def tensor_edits(
    ctx: FileContext, scope: object, names: list[cst.Name], todos: list[Diagnostic]
) -> list[Edit]:
    """The edits of the uses of ``names`` (each the target of ``x = ndd.as_tensor(...)``) that
    surely refer to that assignment; a TODO for an attribute the tool does not know."""
    edits: list[Edit] = []
    for name in names:
        for a in scope.assignments[name.value]:  # type: ignore[attr-defined]
            if a.node is not name:
                continue
            for ref in in_source_order(ctx, a.references):
                if all(getattr(r, "node", None) is name for r in reaching(ctx, ref)):
                    _use(ctx, ref.node, edits, todos)
    return edits


def _use(ctx: FileContext, node: cst.CSTNode, edits: list[Edit], todos: list[Diagnostic]) -> None:
    attr = ctx.parents.get(node)
    if not (isinstance(attr, cst.Attribute) and attr.value is node):
        return
    call = ctx.parents.get(attr)
    called = isinstance(call, cst.Call) and call.func is attr and not call.args
    method = attr.attr.value
    base = cst.Name(ctx.text(node))
    if called and method in _PROPERTIES:
        edits.append(ctx.expr_edit(call, cst.Attribute(base, cst.Name(method))))
    elif called and method == "as_array":
        edits.append(
            ctx.expr_edit(call, cst.Call(attr_chain(f"{ctx.np}.asarray"), [cst.Arg(base)]))
        )
    elif called and method == "as_cpu":
        edits.append(ctx.expr_edit(call, cst.Call(cst.Attribute(base, cst.Name("cpu")))))
    else:
        todos.append(
            ctx.todo(
                "DM200",
                node,
                f"`{ctx.text(node)}` is an ndd Tensor now (it was a TensorCPU/TensorGPU): "
                f"TensorCPU.{method} has no Tensor counterpart the tool knows; rewrite it with "
                "the ndd Tensor API by hand",
            )
        )
