"""The arguments of a pipeline (``@pipeline_def(...)``, ``Pipeline(...)``): which ones dynamic
mode keeps, which it has no use for (each dropped with a comment that says why), and which stop
a migration."""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext, attr_chain
from dali_migrate.dali_api import PIPELINE_POSITIONAL

from .._cst import called_defs, comment_line, is_literal, source_of, statement, walk

#: pipeline arguments dynamic mode has no use for, and why (written as a comment where dropped)
_NO_EXECUTOR = "dynamic mode has no pipeline executor to configure"
_OWN_STREAMS = "dynamic mode manages its CUDA streams itself"
_PARALLEL_ES = "only used by parallel external_source"
_OUTPUT_CHECK = "an output check of pipeline mode"
DROPPED_ARGS = {
    "prefetch_queue_depth": "dynamic mode runs each operator when it is called; there is no prefetch queue",
    "exec_async": _NO_EXECUTOR,
    "exec_pipelined": _NO_EXECUTOR,
    "exec_dynamic": _NO_EXECUTOR,
    "experimental_exec_dynamic": _NO_EXECUTOR,
    "set_affinity": "dynamic mode's thread pool has no CPU affinity setting",
    "max_streams": _OWN_STREAMS,
    "default_cuda_stream_priority": _OWN_STREAMS,
    "bytes_per_sample": "a memory hint of the pipeline executor",
    "enable_memory_stats": "a statistic of the pipeline executor",
    "py_num_workers": _PARALLEL_ES,
    "py_start_method": _PARALLEL_ES,
    "py_callback_pickler": _PARALLEL_ES,
    "output_dtype": _OUTPUT_CHECK,
    "output_ndim": _OUTPUT_CHECK,
    "output_layout": _OUTPUT_CHECK,
    "stream_policy": _OWN_STREAMS,
    "concurrency": _NO_EXECUTOR,
    "debug": "dynamic mode runs every operator eagerly, which is what debug mode was for",
}
#: pipeline arguments whose behaviour cannot be carried over yet
UNSUPPORTED_ARGS = {
    "enable_checkpointing": "checkpointing (ndd.checkpoint.Checkpoint) is not migrated yet",
    "checkpoint": "checkpointing (ndd.checkpoint.Checkpoint) is not migrated yet",
}
#: the pipeline arguments of checkpointing, migrated by the front ends that handle them
CHECKPOINT_ARGS = ("enable_checkpointing", "checkpoint")
PIPELINE_ARGS = (
    {"batch_size", "max_batch_size", "num_threads", "device_id", "seed", "enable_conditionals"}
    | set(DROPPED_ARGS)
    | set(UNSUPPORTED_ARGS)
)


def pipeline_ctor_kwargs(call: cst.Call, reasons: list[str], where: str) -> dict[str, cst.Arg]:
    """The arguments of ``Pipeline(...)`` (or ``super().__init__(...)``) by parameter name."""
    out: dict[str, cst.Arg] = {}
    for i, a in enumerate(call.args):
        if a.star:
            reasons.append(f"*args/**kwargs in {where}")
        elif a.keyword is not None:
            out[a.keyword.value] = a
        elif i < len(PIPELINE_POSITIONAL):
            out[PIPELINE_POSITIONAL[i]] = a
        else:
            reasons.append(f"too many positional arguments in {where}")
    reasons += check_pipeline_args(out, where)
    return out


def check_pipeline_args(
    kwargs: dict[str, cst.Arg], where: str, *, checkpoints: bool = False
) -> list[str]:
    """Reasons the pipeline arguments give to refuse; ``checkpoints``: the front end migrates
    ``enable_checkpointing`` and ``checkpoint`` itself."""
    reasons = []
    for name in kwargs:
        if checkpoints and name in CHECKPOINT_ARGS:
            continue
        if name in UNSUPPORTED_ARGS:
            reasons.append(f"{name} ({where}): {UNSUPPORTED_ARGS[name]}")
    return reasons


def is_unset(expr: cst.BaseExpression) -> bool:
    """``None`` or ``-1``: how pipeline arguments say "not given"."""
    return is_literal(expr, (None, -1)) or (
        isinstance(expr, cst.UnaryOperation)
        and isinstance(expr.operator, cst.Minus)
        and is_literal(expr.expression, (1,))
    )


def dropped_comments(
    ctx: FileContext, kwarg_sets: list[dict[str, cst.Arg]], *, branches: bool = False
) -> list[cst.EmptyLine]:
    """One comment per pipeline argument dynamic mode has no use for, saying why (``branches``:
    the pipeline has ``if`` statements on data, lowered to per-sample code)."""
    lines = []
    seen = set()
    for kw in kwarg_sets:
        for name, arg in kw.items():
            if name in DROPPED_ARGS and name not in seen:
                seen.add(name)
                value = arg.value
                shown = ctx.text(value) if value in ctx.positions else source_of(value)
                text = f"# dali-migrate: dropped {name}={shown}: {DROPPED_ARGS[name]}"
                lines.append(comment_line(text))
            elif name == "enable_conditionals" and name not in seen:
                seen.add(name)
                why = (
                    "its branches on data run per sample"
                    if branches
                    else "the pipeline has no data-dependent branch"
                )
                lines.append(comment_line(f"# dali-migrate: dropped enable_conditionals: {why}"))
    return lines


def device_todo(
    ctx: FileContext, container: cst.CSTNode, device_id: cst.Arg | None, where: str = ""
) -> str | None:
    """A TODO for ``device_id=<not 0 or None>`` when the pipeline uses the GPU (``where``: the
    code that made the pipeline, as the TODO names it)."""
    if device_id is None or is_default_device(device_id.value):
        return None
    if not uses_gpu(container) and not _helpers_use_gpu(ctx, container):
        return None
    return device_message(ctx.render(device_id.value, []), where)


def is_default_device(expr: cst.BaseExpression) -> bool:
    """``device_id=<expr>`` needs no code in dynamic mode, which runs on the current CUDA device:
    ``None``, ``0``, ``torch.cuda.current_device()``, or a conditional choosing among them."""
    if isinstance(expr, cst.IfExp):
        return is_default_device(expr.body) and is_default_device(expr.orelse)
    if isinstance(expr, cst.Call) and not expr.args and isinstance(expr.func, cst.Attribute):
        owner = expr.func.value
        return (
            expr.func.attr.value == "current_device"
            and isinstance(owner, cst.Attribute)
            and owner.attr.value == "cuda"
        )
    return is_literal(expr, (0, None))


def device_message(value: str, where: str = "") -> str:
    """The TODO for a dropped ``device_id=<value>``."""
    made = (
        f"`{where}` made the pipeline with device_id={value}"
        if where
        else f"device_id={value} was dropped"
    )
    return (
        f"{made}: dynamic mode runs GPU operators on the current CUDA device; select device "
        f"{value} "
        f"before iterating (torch.cuda.set_device({value}), or `with ndd.Device(\"gpu\", "
        f"{value}):`)"
    )


def uses_gpu(container: cst.CSTNode) -> bool:
    """Whether graph code asks for a device other than the CPU, or moves data with ``.gpu()``."""
    body = container.body if isinstance(container, (cst.FunctionDef, cst.With)) else container
    for n in walk(body):
        if isinstance(n, cst.Arg) and n.keyword is not None and n.keyword.value == "device":
            if not (isinstance(n.value, cst.SimpleString) and n.value.evaluated_value == "cpu"):
                return True
        if isinstance(n, cst.Attribute) and n.attr.value == "gpu":
            return True
    return False


def _helpers_use_gpu(ctx: FileContext, container: cst.CSTNode) -> bool:
    """Whether a function of the module that the graph code calls (at any depth) asks for the
    GPU: its operators are the pipeline's too (``images = preprocess(jpegs)``)."""
    seen: set[int] = set()
    todo = [container]
    while todo:
        node = todo.pop()
        for defs, _ in called_defs(ctx, node).values():
            for fn in defs:
                if id(fn) in seen:
                    continue
                seen.add(id(fn))
                if uses_gpu(fn):
                    return True
                todo.append(fn)
    return False


def set_threads_stmt(ctx: FileContext, threads: cst.Arg) -> cst.SimpleStatementLine:
    """``ndd.set_num_threads(<threads>)``."""
    call = cst.Call(func=attr_chain(f"{ctx.ndd}.set_num_threads"), args=[cst.Arg(threads.value)])
    return statement(cst.Expr(call))
