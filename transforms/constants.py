"""DM107 constants: ``types.Constant`` and ``fn.constant`` in arithmetic become literals or ``ndd.as_tensor``.

Before (``fixtures/DM107/arithmetic.in.py``)::

    import numpy as np
    from nvidia.dali import fn, types


    def normalize(jpegs):
        images = fn.decoders.image(jpegs)
        scaled = images * types.Constant(2)
        halved = types.Constant(0.5) * images
        shifted = images + types.Constant(np.array([0.5, 0.25, 0.125]))
        low = images & types.Constant(15, dtype=types.UINT8)
        bias = images + fn.constant(idata=[1, 2, 3])
        fill = images - types.Constant(3, shape=[3], dtype=types.UINT8)
        bright = images > types.Constant(200)
        return scaled, halved, shifted, low, bias, fill, bright

After (``fixtures/DM107/arithmetic.out.py``)::

    import numpy as np
    import nvidia.dali.experimental.dynamic as ndd


    def normalize(jpegs):
        images = ndd.decoders.image(jpegs)
        scaled = images * 2
        halved = 0.5 * images
        shifted = images + ndd.as_tensor([0.5, 0.25, 0.125], dtype=ndd.float32)
        low = images & ndd.as_tensor(15, dtype=ndd.uint8)
        bias = images + ndd.as_tensor([1, 2, 3], dtype=ndd.int32)
        fill = images - ndd.as_tensor(np.full([3], 3), dtype=ndd.uint8)
        bright = images > 200
        return scaled, halved, shifted, low, bias, fill, bright

Dynamic mode has no constant operator: a constant in arithmetic with a batch is a Python scalar or a
tensor, broadcast to every sample as pipeline mode did, with the dtype pipeline mode gave (float64
arrays became float32, int64 arrays and lists of ints int32, lists with a float float32: not numpy's
rules). Every form rewritten was checked against DALI 2.4 on CPU.

Only literals are rewritten (numbers, flat lists, ``np.array(<literal>)``, a scalar with ``shape=``;
no ``dtype=`` or a literal ``types.X`` of the same kind), as an operand of arithmetic or a
comparison with a data node. Others get a TODO (``ndd.Batch.broadcast(value, batch_size)`` where a
batch is expected), as do values the tool cannot read (their dtype decides the result), ``layout=``,
``device=``, float64 results and conversions that could round differently.

Safety: safe.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext, attr_chain
from dali_migrate.fixes import Diagnostic

from ._cst import has_star, kwarg, kwargs_of, literal, positional
from ._dali import DTYPES, dali_dtype
from ._local import LocalEnv, LocalRule, produces_node

_INT32 = 2**31 - 1
_EXACT_FLOAT32 = 2**24  # ints up to this convert to float32 exactly
_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**31), 2**31 - 1),  # checked range only
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**31 - 1),
    "uint64": (0, 2**31 - 1),
}


class _Unsupported(Exception):
    pass


class Constants(LocalRule[cst.Call]):
    id = "DM107"
    name = "constants"
    summary = (
        "types.Constant / fn.constant in arithmetic become a literal or ndd.as_tensor(..., dtype=)"
    )
    node_types = (cst.Call,)

    def rewrite(
        self, ctx: FileContext, original: cst.Call, updated: cst.Call, env: LocalEnv
    ) -> cst.CSTNode | Diagnostic | None:
        q = ctx.qualname(original.func)
        op = ctx.fn_op(original.func)
        if q == "nvidia.dali.types.Constant":
            kind = "Constant"
        elif op is not None and op.target.fn_path == "constant":
            kind = "constant"
        else:
            return None
        what = ctx.text(original.func)
        if _in_arithmetic_with_node(ctx, original, env):
            try:
                # the original node: names resolve only on nodes of the parsed module (the literal
                # arguments are the same in the updated one)
                new = (_from_constant if kind == "Constant" else _from_fn_constant)(ctx, original)
            except _Unsupported as e:
                if env.batch_size is None:
                    return ctx.todo(self.id, original, _reason(ctx, what, str(e)))
            else:
                expr = cst.parse_expression(new)
                return (
                    expr.with_changes(lpar=updated.lpar, rpar=updated.rpar)
                    if updated.lpar
                    else expr
                )
        if env.batch_size is None:
            return ctx.todo(
                self.id,
                original,
                f"{what} outside arithmetic with a batch: use {ctx.ndd}.as_tensor(value, dtype=...)"
                f" where it is combined with a batch, or {ctx.ndd}.Batch.broadcast(value, "
                "batch_size) where a batch is expected (pipeline mode made float64 float32 and "
                "int64 int32)",
            )
        try:
            return constant_batch(ctx, original, updated, kind, env.batch_size)
        except _Unsupported as e:
            return ctx.todo(self.id, original, _reason(ctx, what, str(e), batch=True))

    def message(self, ctx: FileContext, original: cst.CSTNode, new: cst.CSTNode) -> str:
        return f"{ctx.text(cst.ensure_type(original, cst.Call).func)}(...) -> {ctx.render(new, [])}"


def _reason(ctx: FileContext, what: str, why: str, batch: bool = False) -> str:
    use = (
        f"{ctx.ndd}.Batch.broadcast(value, batch_size, dtype=...)"
        if batch
        else f"{ctx.ndd}.as_tensor(value, dtype=...)"
    )
    return f"{what}: {why}; use {use} with the dtype pipeline mode gave (float64 became float32, int64 int32)"


def _in_arithmetic_with_node(ctx: FileContext, node: cst.Call, env: LocalEnv) -> bool:
    parent = ctx.parents.get(node)
    if isinstance(parent, cst.BinaryOperation) and not isinstance(
        parent.operator, cst.MatrixMultiply
    ):
        other = parent.right if parent.left is node else parent.left
        return produces_node(ctx, other, env.nodes)
    if isinstance(parent, cst.ComparisonTarget):
        comp = ctx.parents.get(parent)
        if isinstance(comp, cst.Comparison) and len(comp.comparisons) == 1:
            return produces_node(ctx, comp.left, env.nodes)
    if isinstance(parent, cst.Comparison) and parent.left is node and len(parent.comparisons) == 1:
        return produces_node(ctx, parent.comparisons[0].comparator, env.nodes)
    return False


def _value(node: cst.BaseExpression, ctx: FileContext):
    """(python value, from_numpy) of a literal value, or raises _Unsupported."""
    from_numpy = False
    if isinstance(node, cst.Call) and _is_np_array(ctx, node):
        args = node.args
        if len(args) != 1 or args[0].keyword is not None or args[0].star:
            raise _Unsupported("np.array(...) with arguments other than a literal")
        node = args[0].value
        from_numpy = True
    try:
        v = literal(node)
    except (ValueError, SyntaxError):
        raise _Unsupported("the value is not a literal, so its dtype is unknown here") from None
    if isinstance(v, tuple):
        v = list(v)
    if not from_numpy and isinstance(v, list) and any(isinstance(x, (list, tuple)) for x in v):
        raise _Unsupported("nested lists")
    flat = list(_flatten(v))
    if from_numpy and isinstance(v, list):
        lens = _shape(v)
        if lens is None:
            raise _Unsupported("a ragged array")
    if not all(isinstance(x, (bool, int, float)) for x in flat):
        raise _Unsupported("values other than numbers")
    if isinstance(v, list) and not flat:
        raise _Unsupported("an empty value")
    return v, from_numpy


def _is_np_array(ctx: FileContext, call: cst.Call) -> bool:
    f = call.func
    return (
        isinstance(f, cst.Attribute)
        and isinstance(f.value, cst.Name)
        and f.value.value == ctx.np
        and f.attr.value == "array"
    )


def _flatten(v):
    if isinstance(v, (list, tuple)):
        for x in v:
            yield from _flatten(x)
    else:
        yield v


def _shape(v):
    if not isinstance(v, (list, tuple)):
        return ()
    subs = [_shape(x) for x in v]
    if any(s is None for s in subs) or len(set(subs)) > 1:
        return None
    return (len(v),) + (subs[0] if subs else ())


def _natural(flat, from_numpy: bool) -> str:
    """The DALI type pipeline mode infers for these values (types.Constant / numpy rules)."""
    if any(isinstance(x, float) for x in flat):
        return "float32"  # floats, and numpy float64, become float32
    if all(isinstance(x, bool) for x in flat):
        return "bool"
    if any(isinstance(x, bool) for x in flat) and from_numpy:
        raise _Unsupported("mixed bools and ints")
    return "int32"  # Python ints, and numpy int64 narrowed to int32


def _check(flat, dtype: str) -> None:
    kinds = {"f" if isinstance(x, float) else "b" if isinstance(x, bool) else "i" for x in flat}
    if dtype == "float64":
        raise _Unsupported("a float64 constant (pipeline mode rounds its values through float32)")
    if dtype == "float16":
        raise _Unsupported("a float16 constant")
    if dtype == "bool":
        if kinds != {"b"}:
            raise _Unsupported("a bool dtype for non-bool values")
        return
    if dtype == "float32":
        if any(
            isinstance(x, int) and not isinstance(x, bool) and abs(x) > _EXACT_FLOAT32 for x in flat
        ):
            raise _Unsupported("ints too large to convert to float32 exactly")
        if "b" in kinds:
            raise _Unsupported("bools converted to float")
        return
    lo, hi = _RANGES[dtype]
    if kinds != {"i"}:
        raise _Unsupported(
            f"values that are not ints converted to {dtype} (pipeline mode rounds, numpy truncates)"
        )
    if any(x < lo or x > hi for x in flat):
        raise _Unsupported(f"values out of the range of {dtype}")


def _dtype_arg(ctx: FileContext, kw) -> str | None:
    if "dtype" not in kw:
        return None
    d = dali_dtype(ctx, kw["dtype"].value)
    if d is None:
        raise _Unsupported("dtype= is not a literal DALI type")
    return DTYPES[d][0]


def _shape_arg(kw):
    if "shape" not in kw:
        return None
    try:
        s = literal(kw["shape"].value)
    except (ValueError, SyntaxError):
        raise _Unsupported("shape= is not a literal") from None
    if isinstance(s, int) and not isinstance(s, bool):
        s = [s]
    if not isinstance(s, (list, tuple)) or not all(
        isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in s
    ):
        raise _Unsupported("shape= is not a list of sizes")
    return list(s)


def _emit(ctx: FileContext, value, dtype: str, shape) -> str:
    if shape is not None:
        if isinstance(value, list):
            if len(value) == 1:
                value = value[0]
            else:
                n = 1
                for x in shape:
                    n *= x
                if n != len(value):
                    raise _Unsupported("shape= does not match the number of values")
                return f"{ctx.ndd}.as_tensor({ctx.np}.reshape({value!r}, {shape!r}), dtype={ctx.ndd}.{dtype})"
        return f"{ctx.ndd}.as_tensor({ctx.np}.full({shape!r}, {value!r}), dtype={ctx.ndd}.{dtype})"
    return f"{ctx.ndd}.as_tensor({value!r}, dtype={ctx.ndd}.{dtype})"


def _from_constant(ctx: FileContext, call: cst.Call) -> str:
    args = positional(call)
    kw = kwargs_of(call)
    if "value" in kw and not args:
        args = [kw.pop("value")]
    if has_star(call) or len(args) != 1:
        raise _Unsupported("unexpected arguments")
    extra = set(kw) - {"dtype", "shape"}
    if extra:
        raise _Unsupported(f"{', '.join(sorted(extra))}= has no counterpart here")
    value, from_numpy = _value(args[0].value, ctx)
    dtype = _dtype_arg(ctx, kw)
    shape = _shape_arg(kw)
    flat = list(_flatten(value))
    scalar = not isinstance(value, list)
    if scalar and shape is None and not from_numpy:
        if dtype is None:
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _INT32:
                raise _Unsupported("an int beyond the int32 range")
            return repr(value)  # a ScalarConstant: the same as the Python scalar in arithmetic
        _check(flat, dtype)
        return f"{ctx.ndd}.as_tensor({value!r}, dtype={ctx.ndd}.{dtype})"
    if from_numpy and scalar:
        raise _Unsupported("a 0-d numpy array")
    if dtype is None:
        dtype = _natural(flat, from_numpy)
    _check(flat, dtype)
    if from_numpy and shape is not None:
        raise _Unsupported("np.array(...) with shape=")
    return _emit(ctx, value, dtype, shape)


def _from_fn_constant(ctx: FileContext, call: cst.Call) -> str:
    kw = kwargs_of(call)
    if positional(call) or has_star(call):
        raise _Unsupported("unexpected arguments")
    extra = set(kw) - {"fdata", "idata", "dtype", "shape", "device"}
    if extra:
        raise _Unsupported(f"{', '.join(sorted(extra))}= has no counterpart here")
    if "device" in kw:
        try:
            if literal(kw["device"].value) != "cpu":
                raise _Unsupported("device= other than 'cpu'")
        except (ValueError, SyntaxError):
            raise _Unsupported("device= is not a literal") from None
    if ("fdata" in kw) == ("idata" in kw):
        raise _Unsupported("give exactly one of fdata= and idata=")
    key = "fdata" if "fdata" in kw else "idata"
    value, _ = _value(kw[key].value, ctx)
    if isinstance(value, list) and any(isinstance(x, list) for x in value):
        raise _Unsupported("nested lists")
    flat = list(_flatten(value))
    if key == "idata" and not all(isinstance(x, int) and not isinstance(x, bool) for x in flat):
        raise _Unsupported("idata= with values other than ints")
    if key == "fdata" and not all(
        isinstance(x, (int, float)) and not isinstance(x, bool) for x in flat
    ):
        raise _Unsupported("fdata= with values other than numbers")
    dtype = _dtype_arg(ctx, kw)
    if dtype is None:
        dtype = "float32" if key == "fdata" else "int32"
    elif key == "fdata" and dtype != "float32":
        raise _Unsupported(
            "fdata= converted to another type (pipeline mode rounds, numpy truncates)"
        )
    if key == "fdata":
        flat = [float(x) for x in flat]
        value = [float(x) for x in value] if isinstance(value, list) else float(value)
    _check(flat, dtype)
    shape = _shape_arg(kw)
    if shape is None:
        value = value if isinstance(value, list) else [value]
    return _emit(ctx, value, dtype, shape)


# -- a constant where a batch is expected: a batch of copies of the value --------------------------

_NUMPY_DTYPES = {
    "bool": "bool",
    "bool_": "bool",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "float16": "float16",
    "float32": "float32",
    "float64": "float64",
    "float": "float64",
    "int": "int64",
    "single": "float32",
    "double": "float64",
}
#: numpy functions whose result has the dtype their ``dtype=`` names
_NUMPY_MAKERS = {"array", "asarray", "full", "zeros", "ones", "empty", "arange", "full_like"}
#: what pipeline mode made of a numpy array of these types (a tensor node, no dtype= given)
_NARROWED = {"float64": "float32", "int64": "int32", "uint64": "uint32"}


def constant_batch(
    ctx: FileContext,
    original: cst.Call,
    updated: cst.Call,
    kind: str,
    batch_size: cst.BaseExpression,
) -> cst.BaseExpression:
    """``ndd.Batch.broadcast(value, batch_size, dtype=...)``: the batch of copies of one value
    that the constant node gave (an operator input, an argument input, an output), with the
    dtype pipeline mode gave it; or the Python scalar an operator's keyword argument received.
    Raises _Unsupported where that dtype or value cannot be told from the code."""
    if kind == "constant":
        sample, dtype = _fn_constant_sample(ctx, original)
    else:
        scalar = _scalar_argument(ctx, original)
        if scalar is not None:
            return scalar
        sample, dtype = _constant_sample(ctx, original, updated)
        layout = kwargs_of(original).get("layout")
        if layout is not None:  # the tensor carries the layout to every sample
            sample = cst.Call(
                attr_chain(f"{ctx.ndd}.as_tensor"), [cst.Arg(sample), kwarg("layout", layout.value)]
            )
    args = [cst.Arg(sample), cst.Arg(batch_size), kwarg("dtype", attr_chain(f"{ctx.ndd}.{dtype}"))]
    call = cst.Call(attr_chain(f"{ctx.ndd}.Batch.broadcast"), args)
    return call.with_changes(lpar=updated.lpar, rpar=updated.rpar)


def _constant_args(call: cst.Call) -> tuple[cst.Arg, dict[str, cst.Arg]]:
    args = positional(call)
    kw = kwargs_of(call)
    if "value" in kw and not args:
        args = [kw.pop("value")]
    if has_star(call) or len(args) != 1:
        raise _Unsupported("unexpected arguments")
    extra = set(kw) - {"dtype", "shape", "device", "layout"}
    if extra:
        raise _Unsupported(f"{', '.join(sorted(extra))}= has no counterpart here")
    if "layout" in kw and not isinstance(kw["layout"].value, cst.SimpleString):
        raise _Unsupported("layout= is not a literal")
    return args[0], kw


def _cpu(kw: dict[str, cst.Arg]) -> bool:
    """device= is absent or "cpu" (a literal); raises for any other device."""
    if "device" not in kw:
        return False
    try:
        device = literal(kw["device"].value)
    except (ValueError, SyntaxError):
        raise _Unsupported("device= is not a literal") from None
    if device != "cpu":
        raise _Unsupported("device= other than 'cpu'")
    return True


def _always_a_node(ctx: FileContext, call: cst.Call, kind: str) -> bool:
    """Whether pipeline mode made a tensor node of this constant whatever its value (a scalar
    without device=, shape= or layout= was a ScalarConstant, typed weakly in arithmetic)."""
    if kind == "constant":
        return True
    try:
        value, kw = _constant_args(call)
        forced = _cpu(kw) or "layout" in kw
    except _Unsupported:
        return False
    if isinstance(value.value, (cst.List, cst.Tuple)):
        return True
    if "shape" in kw:
        try:
            return _shape_arg(kw) not in (None, [], [1])
        except _Unsupported:
            return False
    return forced


def _scalar_argument(ctx: FileContext, call: cst.Call) -> cst.BaseExpression | None:
    """A scalar constant as an operator's keyword argument: its value, converted to its dtype."""
    parent = ctx.parents.get(call)
    if not isinstance(parent, cst.Arg) or parent.keyword is None:
        return None
    host = ctx.parents.get(parent)
    if not isinstance(host, cst.Call) or not ctx.is_fn_ref(host.func):
        return None
    try:
        value, kw = _constant_args(call)
        if _always_a_node(ctx, call, "Constant") or "shape" in kw:
            return None
        v = literal(value.value)
    except (_Unsupported, ValueError, SyntaxError):
        return None
    if isinstance(v, (list, tuple)) or not isinstance(v, (bool, int, float)):
        return None
    dtype = _dtype_arg(ctx, kw) if "dtype" in kw else None
    if dtype is not None:
        kind = DTYPES[next(k for k, d in DTYPES.items() if d[0] == dtype)][2]
        v = bool(v) if kind == "b" else float(v) if kind == "f" else int(v)
    return cst.parse_expression(repr(v))


def _constant_sample(
    ctx: FileContext, call: cst.Call, updated: cst.Call
) -> tuple[cst.BaseExpression, str]:
    """The value of ``types.Constant(...)`` as code, and the dtype pipeline mode gave it."""
    value_arg, kw = _constant_args(call)
    forced = _cpu(kw) or _always_a_node(ctx, call, "Constant")
    new_value = _updated_value(call, updated, value_arg)
    dtype = _dtype_arg(ctx, kw)
    try:
        value, from_numpy = _value(value_arg.value, ctx)
    except _Unsupported as e:
        if "shape" in kw:
            raise
        return _unread(ctx, value_arg.value, new_value, dtype, forced, str(e))
    flat = list(_flatten(value))
    shape = _shape_arg(kw)
    if from_numpy and not isinstance(value, list) and not forced and dtype is None:
        # np.array(<scalar>) without device= was a ScalarConstant of numpy's own type
        dtype = {"b": "bool", "i": "int64"}.get(_kind_of(flat), "")
        if not dtype:
            raise _Unsupported("a 0-d float64 numpy array (pipeline mode kept float64 here)")
    if dtype is None:
        dtype = _natural(flat, from_numpy)
    _check(flat, dtype)
    if shape is None:
        return new_value, dtype
    if from_numpy:
        raise _Unsupported("np.array(...) with shape=")
    sample = _emit(ctx, value, dtype, shape)  # ndd.as_tensor(<sample>, dtype=...)
    return cst.ensure_type(cst.parse_expression(sample), cst.Call).args[0].value, dtype


def _kind_of(flat) -> str:
    if all(isinstance(x, bool) for x in flat):
        return "b"
    return "f" if any(isinstance(x, float) for x in flat) else "i"


def _updated_value(call: cst.Call, updated: cst.Call, arg: cst.Arg) -> cst.BaseExpression:
    """The value argument as the other rewrites left it (names of a merged class, ...)."""
    index = list(call.args).index(arg)
    return updated.args[index].value


def _unread(
    ctx: FileContext,
    value: cst.BaseExpression,
    new_value: cst.BaseExpression,
    dtype: str | None,
    forced: bool,
    why: str,
) -> tuple[cst.BaseExpression, str]:
    """A value the tool cannot read, as code, and its dtype: the one ``dtype=`` names, or the
    one a numpy function's ``dtype=`` names (narrowed as pipeline mode narrowed it)."""
    if dtype is None:
        made = _numpy_dtype(ctx, value)
        if made is None:
            raise _Unsupported(why)
        if made in _NARROWED:
            if not forced:
                article = "a" if made.startswith("f") else "an"
                raise _Unsupported(
                    f"{article} {made} numpy value that may be a scalar (pipeline mode kept "
                    f"{made} then)"
                )
            return new_value, _NARROWED[made]
        return new_value, made
    if dtype in ("float64", "float16"):
        raise _Unsupported(f"a {dtype} constant")
    # an integer dtype= is taken to be given integers: pipeline mode rounded a fractional value
    # of a list or array and truncated a scalar one, where ndd truncates a Python value and rounds
    # an array's
    return new_value, dtype


def _numpy_dtype(ctx: FileContext, value: cst.BaseExpression) -> str | None:
    """``np.full(..., dtype=np.uint8)`` / ``np.int32(1)`` -> the numpy dtype name, or None."""
    if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Attribute):
        return None
    f = value.func
    if not (isinstance(f.value, cst.Name) and f.value.value == ctx.np):
        return None
    name = f.attr.value
    if name in _NUMPY_DTYPES and name not in ("float", "int", "bool"):
        return _NUMPY_DTYPES[name]  # np.uint8(...), np.bool_([...])
    if name not in _NUMPY_MAKERS:
        return None
    kw = kwargs_of(value)
    if "dtype" not in kw:
        return None
    d = kw["dtype"].value
    if isinstance(d, cst.Attribute) and isinstance(d.value, cst.Name) and d.value.value == ctx.np:
        return _NUMPY_DTYPES.get(d.attr.value)
    if isinstance(d, cst.Name) and d.value in ("float", "int", "bool"):
        return _NUMPY_DTYPES[d.value]
    if isinstance(d, cst.SimpleString):
        return _NUMPY_DTYPES.get(literal(d))
    return None


def _fn_constant_sample(ctx: FileContext, call: cst.Call) -> tuple[cst.BaseExpression, str]:
    """The value of ``fn.constant(...)`` as code, and its dtype."""
    sample = cst.parse_expression(
        _from_fn_constant(ctx, call)
    )  # ndd.as_tensor(<sample>, dtype=...)
    assert isinstance(sample, cst.Call)
    dtype = sample.args[1].value
    assert isinstance(dtype, cst.Attribute)
    return sample.args[0].value, dtype.attr.value
