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
    edits += fed_to_torch(ctx, node)
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


def fed_to_torch(ctx: FileContext, node: cst.CSTNode) -> list[Edit]:
    """``feed_ndarray(t, arr)`` (DALI's copy of a Tensor into a torch tensor of the same dtype and
    shape, which it asserts; ``t`` is ``node``, an ndd Tensor now) -> ``arr.copy_(t.torch())``:
    the same values, ``arr`` returned as ``feed_ndarray`` did. Two edits around ``arr``, which
    other rules may rewrite inside. None where the call passes more (a ``cuda_stream=`` other
    than None: the copy's stream would change) or ``arr`` needs parentheses. A TensorList never
    passed the shape assertion, so a Batch is not rewritten."""
    arg = ctx.parents.get(node)
    call = ctx.parents.get(arg) if isinstance(arg, cst.Arg) else None
    if not isinstance(call, cst.Call) or ctx.qualname(call.func) != _FEED:
        return []
    args = list(call.args)
    if len(args) < 2 or args[0] is not arg or any(not _none_stream(a) for a in args[2:]):
        return []
    if any(a.star or a.keyword is not None for a in args[:2]):
        return []
    arr = args[1].value
    if not isinstance(arr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
        return []
    whole, inner = ctx.positions[call], ctx.positions[arr]
    at = ctx.lines.offset
    return [
        Edit(
            at(whole.start.line, whole.start.column), at(inner.start.line, inner.start.column), ""
        ),
        Edit(
            at(inner.end.line, inner.end.column),
            at(whole.end.line, whole.end.column),
            f".copy_({ctx.text(node)}.torch())",
        ),
    ]


_FEED = "nvidia.dali.plugin.pytorch.feed_ndarray"


def _none_stream(arg: cst.Arg) -> bool:
    """``cuda_stream=None`` (or a third positional None): the default, DALI's copy stream."""
    return isinstance(arg.value, cst.Name) and arg.value.value == "None"
