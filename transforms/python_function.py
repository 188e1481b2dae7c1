"""DM105 python-function: ``fn.python_function`` becomes plain Python over the samples.

Before (``fixtures/DM105/per_sample.in.py``)::

    \"\"\"Host-side steps written as Python functions, in helpers that build graph parts.\"\"\"
    import numpy as np
    from nvidia.dali import fn


    def invert(image):
        return 255 - image


    def split_channels(image):
        return image[..., 0].copy(), image[..., 1:].copy()


    def darken(jpegs):
        images = fn.decoders.image(jpegs)
        dark = fn.python_function(images, function=invert)
        return fn.flip(dark, horizontal=1)


    def blend(jpegs, other):
        images = fn.decoders.image(jpegs)
        others = fn.decoders.image(other)
        mixed = fn.python_function(images, others, function=lambda a, b: a // 2 + b // 2)
        return mixed


    def channels(jpegs):
        images = fn.decoders.image(jpegs)
        first, rest = fn.python_function(images, function=split_channels, num_outputs=2)
        return first, rest


    def with_layout(jpegs):
        images = fn.decoders.image(jpegs)
        # the function keeps the HWC layout, which pipeline mode forgot unless told
        return_value = fn.python_function(images, function=invert, output_layouts="HWC", preserve=True)
        return return_value

After (``fixtures/DM105/per_sample.out.py``)::

    \"\"\"Host-side steps written as Python functions, in helpers that build graph parts.\"\"\"
    import numpy as np
    import nvidia.dali.experimental.dynamic as ndd


    def invert(image):
        return 255 - image


    def split_channels(image):
        return image[..., 0].copy(), image[..., 1:].copy()


    def darken(jpegs):
        images = ndd.decoders.image(jpegs)
        dark = ndd.as_batch([invert(np.asarray(t)) for t in images.tensors])
        return ndd.flip(dark, horizontal=1)


    def blend(jpegs, other):
        images = ndd.decoders.image(jpegs)
        others = ndd.decoders.image(other)
        mixed = ndd.as_batch(
            [
                a // 2 + b // 2
                for a, b in zip(map(np.asarray, images.tensors), map(np.asarray, others.tensors))
            ]
        )
        return mixed


    def channels(jpegs):
        images = ndd.decoders.image(jpegs)
        first, rest = [
            ndd.as_batch(list(o)) for o in zip(*[split_channels(np.asarray(t)) for t in images.tensors])
        ]
        return first, rest


    def with_layout(jpegs):
        images = ndd.decoders.image(jpegs)
        # the function keeps the HWC layout, which pipeline mode forgot unless told
        return_value = ndd.as_batch([invert(np.asarray(t)) for t in images.tensors], layout="HWC")
        return return_value

Dynamic mode has no ``python_function``: the function is called on each sample as a numpy
array, in sample order, exactly as pipeline mode did (``batch_processing=False``, the default),
and its results become a batch. With ``batch_processing=True`` pipeline mode called it once per
batch with one list of (writable, contiguous) numpy arrays per input, in sample order, and took
back a list of arrays per output (a tuple of such lists for several outputs; a single array is an
error there); ``num_outputs=0`` ran it for its side effects and gave ``[]``: it becomes a statement
(where its result is not used). ``output_layouts="HWC"`` (one output) becomes ``layout=``.
Checked against DALI 2.4 on CPU: values, dtypes, shapes and layouts are equal.

Left as they are, with a TODO that says what to write instead:
``device="gpu"`` (cupy arrays on DALI's stream: the tool checks no GPU code), ``num_outputs=0``
per sample or with its result used, ``num_outputs`` not a literal, layouts of several outputs,
inputs the tool cannot prove are data nodes (function parameters, expressions: assign them to a
variable first), a ``function=`` that is not a name or a lambda, and every
``fn.dl_tensor_python_function``.

Two differences stay: pipeline mode copied a non-contiguous result (``a.T``); ``ndd.as_batch``
refuses it with "Strided data not supported" (wrap it in ``np.ascontiguousarray``). And pipeline
mode ran the function ahead of ``pipe.run()``, by its prefetch queue (one batch by default): a
function with side effects now runs once per batch taken, when it is taken.

Safety: safe.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Diagnostic

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

    def rewrite(
        self, ctx: FileContext, original: cst.Call, updated: cst.Call, env: LocalEnv
    ) -> cst.CSTNode | Diagnostic | None:
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
        values: dict = {}  # the literal arguments, as far as they were read
        try:
            num_outputs, layout, batch = _checked(ctx, original, updated, env, func, values)
        except _Unsupported as why:
            batch = values.get("batch_processing", False) is not False
            outputs = values.get("num_outputs", 1)
            sketch = why.hint or _sketch(ctx, inputs, func, batch, outputs)
            return ctx.todo(
                self.id, original, f"{path}: {why.reason}; write it as plain Python: {sketch}"
            )
        assert func is not None
        layout_node = kw["output_layouts"].value if "output_layouts" in kw else None
        if isinstance(layout_node, cst.List):
            layout_node = layout_node.elements[0].value
        layout_arg = ""
        if layout is not None and layout_node is not None:  # (a layout: output_layouts= given)
            layout_arg = f", layout={_code(layout_node)}"
        make = _batch_call if batch else _per_sample
        new = make(ctx, inputs, func, num_outputs, layout_arg)
        expr = cst.parse_expression(new)
        return expr.with_changes(lpar=updated.lpar, rpar=updated.rpar) if updated.lpar else expr

    def message(self, ctx: FileContext, original: cst.CSTNode, new: cst.CSTNode) -> str:
        func = cst.ensure_type(original, cst.Call).func
        if isinstance(new, cst.Call) and not _code(new.func).endswith("as_batch"):
            return (
                f"{ctx.text(func)}(...) -> the function called on the batch's samples "
                "(once per batch taken: pipeline mode ran it ahead, by its prefetch queue)"
            )
        return f"{ctx.text(func)}(...) -> plain Python over the samples, then {ctx.ndd}.as_batch"


#: arguments whose literal value decides the rewrite
_LITERAL_ARGS = ("num_outputs", "batch_processing", "device", "output_layouts")


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


class _Unsupported(Exception):
    """A call the rule leaves as it is: why, and what to write instead (None: the sketch of
    the call, per sample or per batch)."""

    def __init__(self, reason: str, hint: str | None = None) -> None:
        super().__init__(reason)
        self.reason, self.hint = reason, hint


def _checked(
    ctx: FileContext,
    original: cst.Call,
    updated: cst.Call,
    env: LocalEnv,
    func: cst.BaseExpression | None,
    values: dict,
) -> tuple[int, object, bool]:
    """The number of outputs, the layout and ``batch_processing`` of a call the rule can
    rewrite; raises ``_Unsupported`` for the others. ``values`` gets the literal arguments as
    they are read."""
    kw = kwargs_of(updated)
    inputs = [a.value for a in positional(updated)]
    if has_star(updated) or func is None:
        raise _Unsupported("*args, **kwargs or no function=")
    if not inputs:
        raise _Unsupported("no inputs")
    unknown = set(kw) - {"function", *_LITERAL_ARGS} - _IGNORED
    if unknown:
        raise _Unsupported(f"argument {', '.join(sorted(unknown))} has no dynamic-mode counterpart")
    for name in _LITERAL_ARGS:
        if name in kw:
            try:
                values[name] = literal(kw[name].value)
            except (ValueError, SyntaxError):
                raise _Unsupported(f"{name}= is not a literal") from None
    num_outputs = values.get("num_outputs", 1)
    batch = values.get("batch_processing", False)
    if batch not in (True, False):
        raise _Unsupported("batch_processing= is neither True nor False")
    if values.get("device", "cpu") != "cpu":
        raise _Unsupported(
            "device='gpu' hands the function cupy arrays on DALI's stream",
            _gpu_sketch(ctx, inputs, func, batch, num_outputs),
        )
    if not isinstance(num_outputs, int) or isinstance(num_outputs, bool) or num_outputs < 0:
        raise _Unsupported("num_outputs= is not a number of outputs")
    if num_outputs == 0 and not batch:
        raise _Unsupported(
            "num_outputs=0 runs the function for its side effects only",
            f"for t in {_code(inputs[0])}.tensors: f(np.asarray(t))" if len(inputs) == 1 else None,
        )
    if num_outputs == 0 and not isinstance(ctx.parents.get(original), cst.Expr):
        raise _Unsupported("the result of num_outputs=0 (an empty list) is used")
    layout = values.get("output_layouts")
    if isinstance(layout, list) and num_outputs == 1 and len(layout) == 1:
        layout = layout[0]
    if layout is not None and (num_outputs != 1 or not isinstance(layout, str)):
        raise _Unsupported(
            "output_layouts for several outputs",
            f"{ctx.ndd}.as_batch(..., layout=...) of each output, with its layout",
        )
    for inp in inputs:
        if not (isinstance(inp, cst.Name) and inp.value in env.nodes):
            raise _Unsupported(
                f"the tool cannot tell that {_code(inp)} is a data node (a batch after migration)"
            )
    if mentions_dali(ctx, func) or not _simple_function(func):
        raise _Unsupported("function= is neither a name nor a lambda (assign it to a name first)")
    return num_outputs, layout, bool(batch)


def _per_sample(
    ctx: FileContext, inputs: list, func: cst.BaseExpression, num_outputs: int, layout_arg: str
) -> str:
    """The function called on each sample (as numpy arrays, in sample order), its results made
    into batches."""
    np_ = ctx.np
    sources = [f"{_code(i)}.tensors" for i in inputs]
    taken = names_in(func) | {_code(i) for i in inputs} | {np_, ctx.ndd}
    lam = func if isinstance(func, cst.Lambda) and _plain_params(func, len(inputs)) else None
    if lam is not None:
        params = [p.name.value for p in lam.params.params]
        body = _code(lam.body)
        if isinstance(lam.body, (cst.Lambda, cst.IfExp)):
            body = f"({body})"
        arrays = [f"map({np_}.asarray, {s})" for s in sources]
        if len(inputs) == 1:
            per_sample = f"[{body} for {params[0]} in {arrays[0]}]"
        else:
            per_sample = f"[{body} for {', '.join(params)} in zip({', '.join(arrays)})]"
    else:
        fexpr = f"({_code(func)})" if isinstance(func, cst.Lambda) else _code(func)
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
    if num_outputs == 1:
        return f"{ctx.ndd}.as_batch({per_sample}{layout_arg})"
    o = fresh_name("o", taken, "out")
    return f"[{ctx.ndd}.as_batch(list({o})) for {o} in zip(*{per_sample})]"


def _batch_call(
    ctx: FileContext, inputs: list, func: cst.BaseExpression, num_outputs: int, layout_arg: str
) -> str:
    """The function called once on the batch: one list of numpy arrays per input (what
    ``batch_processing=True`` gave it); it returned a list of arrays per output (a tuple of them
    for several outputs), each made into a batch."""
    np_ = ctx.np
    taken = names_in(func) | {_code(i) for i in inputs} | {np_, ctx.ndd}
    t = fresh_name("t", taken, "sample")
    lists = ", ".join(f"[{np_}.asarray({t}) for {t} in {_code(i)}.tensors]" for i in inputs)
    fexpr = f"({_code(func)})" if isinstance(func, cst.Lambda) else _code(func)
    call = f"{fexpr}({lists})"
    if num_outputs == 0:
        return call
    if num_outputs == 1:
        return f"{ctx.ndd}.as_batch({call}{layout_arg})"
    o = fresh_name("o", taken, "out")
    return f"[{ctx.ndd}.as_batch({o}) for {o} in {call}]"


def _gpu_sketch(
    ctx: FileContext, inputs: list, func: cst.BaseExpression | None, batch: bool, outputs: object
) -> str:
    """What to write for a function that ran on GPU samples (cupy arrays)."""
    f = _code(func) if isinstance(func, (cst.Name, cst.Attribute)) else "f"
    ins = [_code(i) for i in inputs] or ["x"]
    if batch:
        call = f"{f}({', '.join(f'[cupy.from_dlpack(t) for t in {i}.tensors]' for i in ins)})"
    elif len(ins) == 1:
        call = f"[{f}(cupy.from_dlpack(t)) for t in {ins[0]}.tensors]"
    else:
        vs = "abcdefgh"[: len(ins)]
        arrays = ", ".join(f"cupy.from_dlpack({v})" for v in vs)
        sources = ", ".join(f"{i}.tensors" for i in ins)
        call = f"[{f}({arrays}) for {', '.join(vs)} in zip({sources})]"
    then = "" if outputs == 0 else f", then {ctx.ndd}.as_batch(...) of what it returns"
    return f"{call} on the GPU samples{then} (the tool checks no GPU code)"


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


def _sketch(ctx: FileContext, inputs, func, batch: bool = False, outputs: object = 1) -> str:
    f = _code(func) if isinstance(func, (cst.Name, cst.Attribute)) else "f"
    np_ = ctx.np
    ins = [_code(i) for i in inputs] or ["x"]
    if batch:
        args = ", ".join(f"[{np_}.asarray(t) for t in {i}.tensors]" for i in ins)
        if outputs == 0:
            return f"{f}({args}) as a statement (pipeline mode gave [] for its result)"
        if isinstance(outputs, int) and outputs > 1:
            return f"[{ctx.ndd}.as_batch(o) for o in {f}({args})]"
        return f"{ctx.ndd}.as_batch({f}({args}))"
    if len(ins) == 1:
        return f"{ctx.ndd}.as_batch([{f}({np_}.asarray(t)) for t in {ins[0]}.tensors])"
    vs = "abcdefgh"[: len(ins)]
    return (
        f"{ctx.ndd}.as_batch([{f}({', '.join(f'{np_}.asarray({v})' for v in vs)}) "
        f"for {', '.join(vs)} in zip({', '.join(i + '.tensors' for i in ins)})])"
    )
