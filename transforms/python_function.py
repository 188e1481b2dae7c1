"""DM105 python-function: ``fn.python_function`` becomes plain Python over the samples.

Before::

    inverted = fn.python_function(images, function=invert)
    summed = fn.python_function(images, masks, function=lambda a, m: a * m)
    hi, lo = fn.python_function(images, function=split, num_outputs=2)

After (``images`` and ``masks`` hold batches)::

    inverted = ndd.as_batch([invert(np.asarray(t)) for t in images.tensors])
    summed = ndd.as_batch([a * m for a, m in zip(map(np.asarray, images.tensors), map(np.asarray, masks.tensors))])
    hi, lo = [ndd.as_batch(list(o)) for o in zip(*[split(np.asarray(t)) for t in images.tensors])]

Dynamic mode has no ``python_function``: the function is called on each sample as a numpy
array, in sample order, exactly as pipeline mode did (``batch_processing=False``, the default),
and its results become a batch. ``output_layouts="HWC"`` (one output) becomes ``layout=``.
Checked against DALI 2.4 on CPU: values, dtypes, shapes and layouts are equal.

Left as they are, with a TODO that says what to write instead:
``batch_processing=True`` (the function gets lists of arrays), ``device="gpu"`` (cupy arrays),
``num_outputs=0`` or not a literal, layouts of several outputs, inputs the tool cannot prove
are data nodes (function parameters, expressions: assign them to a variable first), a
``function=`` that is not a name or a lambda, and every ``fn.dl_tensor_python_function``.

One difference stays: pipeline mode copied a non-contiguous result (``a.T``); ``ndd.as_batch``
refuses it with "Strided data not supported" (wrap it in ``np.ascontiguousarray``).

Safety: safe.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext

from ._cst import fresh_name, has_star, kwargs_of, literal, names_in, positional
from ._dali import mentions_dali
from ._local import LocalEnv, LocalRule

#: keyword arguments dynamic mode needs no counterpart for
_IGNORED = {"preserve", "bytes_per_sample_hint"}


class PythonFunction(LocalRule[cst.Call]):
    id = "DM105"
    name = "python-function"
    summary = "fn.python_function becomes plain Python over the samples, then ndd.as_batch"
    node_types = (cst.Call,)

    def rewrite(self, ctx: FileContext, original: cst.Call, updated: cst.Call, env: LocalEnv):
        op = ctx.fn_op(original.func)
        if op is None or op.target.fn_path not in ("python_function", "dl_tensor_python_function"):
            return None
        path = ctx.text(original.func)
        if op.target.fn_path == "dl_tensor_python_function":
            return ctx.todo(
                self.id,
                original,
                f"{path} does not exist in dynamic mode: call the function in plain Python on the "
                "batch's samples (each batch.tensors[i] supports DLPack, or use batch.torch()) "
                "and wrap "
                "its results with ndd.as_batch(...)",
            )
        kw = kwargs_of(updated)
        inputs = [a.value for a in positional(updated)]
        func = kw["function"].value if "function" in kw else None
        try:
            num_outputs, layout = _checked(ctx, updated, env, kw, inputs, func)
        except _Unsupported as why:
            sketch = why.hint or _sketch(ctx, inputs, func)
            return ctx.todo(
                self.id, original, f"{path}: {why.reason}; write it as plain Python: {sketch}"
            )
        assert func is not None
        per_sample, taken = _per_sample(ctx, inputs, func)
        layout_node = kw["output_layouts"].value if "output_layouts" in kw else None
        if isinstance(layout_node, cst.List):
            layout_node = layout_node.elements[0].value
        layout_arg = ""
        if layout is not None and layout_node is not None:  # (a layout: output_layouts= given)
            layout_arg = f", layout={_code(layout_node)}"
        if num_outputs == 1:
            new = f"{ctx.ndd}.as_batch({per_sample}{layout_arg})"
        else:
            o = fresh_name("o", taken, "out")
            new = f"[{ctx.ndd}.as_batch(list({o})) for {o} in zip(*{per_sample})]"
        expr = cst.parse_expression(new)
        return expr.with_changes(lpar=updated.lpar, rpar=updated.rpar) if updated.lpar else expr

    def message(self, ctx, original, new):
        return f"{ctx.text(original.func)}(...) -> plain Python over the samples, then {ctx.ndd}.as_batch"


class _Unsupported(Exception):
    """A call the rule leaves as it is: why, and what to write instead (None: the sketch of
    a per-sample call)."""

    def __init__(self, reason: str, hint: str | None = None) -> None:
        super().__init__(reason)
        self.reason, self.hint = reason, hint


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _checked(
    ctx: FileContext,
    updated: cst.Call,
    env: LocalEnv,
    kw: dict[str, cst.Arg],
    inputs: list[cst.BaseExpression],
    func: cst.BaseExpression | None,
) -> tuple[int, object]:
    """The number of outputs and the layout of a call the rule can rewrite; raises
    ``_Unsupported`` for the others."""
    code = _code
    if has_star(updated) or func is None:
        raise _Unsupported("*args, **kwargs or no function=")
    if not inputs:
        raise _Unsupported("no inputs")
    unknown = (
        set(kw)
        - {"function", "num_outputs", "batch_processing", "device", "output_layouts"}
        - _IGNORED
    )
    if unknown:
        raise _Unsupported(f"argument {', '.join(sorted(unknown))} has no dynamic-mode counterpart")
    values = {}
    for name in ("num_outputs", "batch_processing", "device", "output_layouts"):
        if name in kw:
            try:
                values[name] = literal(kw[name].value)
            except (ValueError, SyntaxError):
                raise _Unsupported(f"{name}= is not a literal") from None
    num_outputs = values.get("num_outputs", 1)
    if values.get("batch_processing", False) is not False:
        raise _Unsupported(
            "batch_processing=True calls the function once per batch with lists of arrays",
            _sketch(ctx, inputs, func, batch=True),
        )
    if values.get("device", "cpu") != "cpu":
        raise _Unsupported(
            "device='gpu' hands the function cupy arrays",
            "call it on the GPU samples yourself, then ndd.as_batch(...)",
        )
    if not isinstance(num_outputs, int) or isinstance(num_outputs, bool) or num_outputs < 1:
        raise _Unsupported(
            "num_outputs=0 runs the function for its side effects only",
            f"for t in {code(inputs[0])}.tensors: f(np.asarray(t))" if len(inputs) == 1 else None,
        )
    layout = values.get("output_layouts")
    if isinstance(layout, list) and num_outputs == 1 and len(layout) == 1:
        layout = layout[0]
    if layout is not None and (num_outputs != 1 or not isinstance(layout, str)):
        raise _Unsupported("output_layouts for several outputs", None)
    for inp in inputs:
        if not (isinstance(inp, cst.Name) and inp.value in env.nodes):
            raise _Unsupported(
                f"the tool cannot tell that {code(inp)} is a data node (a batch after migration)"
            )
    if mentions_dali(ctx, func) or not _simple_function(func):
        raise _Unsupported("function= is neither a name nor a lambda (assign it to a name first)")
    return num_outputs, layout


def _per_sample(
    ctx: FileContext, inputs: list[cst.BaseExpression], func: cst.BaseExpression
) -> tuple[str, set[str]]:
    """The list of the function's results, sample by sample (``[f(np.asarray(t)) for t in
    images.tensors]``), and the names it takes."""
    code = _code
    np_ = ctx.np
    sources = [f"{code(i)}.tensors" for i in inputs]
    taken = names_in(func) | {code(i) for i in inputs} | {np_, ctx.ndd}
    lam = func if isinstance(func, cst.Lambda) and _plain_params(func, len(inputs)) else None
    if lam is not None:
        params = [p.name.value for p in lam.params.params]
        body = code(lam.body)
        if isinstance(lam.body, (cst.Lambda, cst.IfExp)):
            body = f"({body})"
        arrays = [f"map({np_}.asarray, {s})" for s in sources]
        if len(inputs) == 1:
            per_sample = f"[{body} for {params[0]} in {arrays[0]}]"
        else:
            per_sample = f"[{body} for {', '.join(params)} in zip({', '.join(arrays)})]"
    else:
        if isinstance(func, cst.Lambda):
            fexpr = f"({code(func)})"
        else:
            fexpr = code(func)
        if len(inputs) == 1:
            t = fresh_name("t", taken, "sample")
            per_sample = f"[{fexpr}({np_}.asarray({t})) for {t} in {sources[0]}]"
        else:
            vs = (
                [fresh_name(c, taken) for c in "abcdefgh"[: len(inputs)]]
                if len(inputs) <= 8
                else [fresh_name(f"t{i}", taken) for i in range(len(inputs))]
            )
            per_sample = (
                f"[{fexpr}({', '.join(f'{np_}.asarray({v})' for v in vs)}) "
                f"for {', '.join(vs)} in zip({', '.join(sources)})]"
            )
    return per_sample, taken


def _simple_function(func: cst.BaseExpression) -> bool:
    if isinstance(func, cst.Lambda):
        return True
    while isinstance(func, cst.Attribute):
        func = func.value
    return isinstance(func, cst.Name)


def _plain_params(lam: cst.Lambda, n: int) -> bool:
    p = lam.params
    if (
        p.star_arg is not cst.MaybeSentinel.DEFAULT
        or p.kwonly_params
        or p.star_kwarg
        or p.posonly_params
    ):
        return False
    if len(p.params) != n or any(x.default is not None for x in p.params):
        return False
    bad = False

    class V(cst.CSTVisitor):
        def visit_NamedExpr(self, node) -> None:
            nonlocal bad
            bad = True

        def visit_Yield(self, node) -> None:
            nonlocal bad
            bad = True

        def visit_Await(self, node) -> None:
            nonlocal bad
            bad = True

    lam.body.visit(V())
    return not bad


def _sketch(ctx: FileContext, inputs, func, batch: bool = False) -> str:
    code = lambda n: cst.Module(body=[]).code_for_node(n)  # noqa: E731
    f = code(func) if isinstance(func, (cst.Name, cst.Attribute)) else "f"
    np_ = ctx.np
    ins = [code(i) for i in inputs] or ["x"]
    if batch:
        args = ", ".join(f"[{np_}.asarray(t) for t in {i}.tensors]" for i in ins)
        return f"{ctx.ndd}.as_batch({f}({args}))"
    if len(ins) == 1:
        return f"{ctx.ndd}.as_batch([{f}({np_}.asarray(t)) for t in {ins[0]}.tensors])"
    vs = "abcdefgh"[: len(ins)]
    return (
        f"{ctx.ndd}.as_batch([{f}({', '.join(f'{np_}.asarray({v})' for v in vs)}) "
        f"for {', '.join(vs)} in zip({', '.join(i + '.tensors' for i in ins)})])"
    )
