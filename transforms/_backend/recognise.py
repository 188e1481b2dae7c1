"""Recognise: the graph code of a pipeline definition, and every use of the pipeline object.

A front end (``@pipeline_def`` function, ``with pipe:`` block, ``Pipeline`` subclass) hands the
statements that build a graph to :func:`analyse_graph`, and the references to the object or its
factory to :func:`instances_of`; what cannot be carried over is appended to ``reasons``.
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata.scope_provider import Access

from dali_migrate.context import FileContext
from dali_migrate.dali_api import PIPELINE_CLASSES, PIPELINE_DEFS

from ..fn_to_ndd import HANDED_OFF
from .._cst import in_source_order, is_docstring, kwargs_of, param_names, walk, within
from . import handles, iterators
from .arguments import check_pipeline_args
from .external_source import SourceUse, analyse_source
from .model import Graph, Instance, ReaderUse

#: what to do by hand for the Pipeline methods the tool does not migrate (written in the TODO)
PIPELINE_METHOD_HINTS = {
    "schedule_run": "dynamic mode is asynchronous by itself: take batches with next(pipe)",
    "share_outputs": "dynamic mode is asynchronous by itself: take batches with next(pipe)",
    "release_outputs": "dynamic mode frees a batch when it is no longer referenced",
    "outputs": "dynamic mode is asynchronous by itself: take batches with next(pipe)",
    "checkpoint": "register the reader and the RNG with ndd.checkpoint.Checkpoint; the formats differ",
    "serialize": "dynamic mode has no serialized form: keep this pipeline for serving (Triton)",
    "epoch_size": "use the reader's get_metadata()['epoch_size_padded'], built with max_batch_size",
    "reader_meta": "use the reader's get_metadata(), built with max_batch_size",
    "reset": "each reader.next_epoch() is a new epoch",
    "feed_input": "give the data to the code with ndd.as_batch(...)",
}


# -- the graph ------------------------------------------------------------------------------------


def analyse_graph(
    ctx: FileContext,
    container: cst.FunctionDef | cst.With,
    outputs_stmt: cst.BaseStatement | None,
    outputs: list[cst.BaseExpression],
    reasons: list[str],
) -> Graph | None:
    """Check that the graph code of ``container`` can be carried over; reasons it cannot are
    appended to ``reasons`` (all of them, so the TODO lists every one)."""
    readers: list[ReaderUse] = []
    sources: list[SourceUse] = []
    for node in walk(container.body):
        if isinstance(node, cst.Call):
            _inputs_and_ops(ctx, container, node, readers, sources, reasons)
        elif isinstance(node, cst.Return) and not _is_outputs(node, outputs_stmt):
            reasons.append("the pipeline returns before its last statement")
        elif isinstance(node, (cst.Yield, cst.Await)):
            reasons.append("the pipeline code yields or awaits")
        elif isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            reasons.append("nested function or class definitions in the pipeline body")
    body = list(container.body.body)
    docstring = body[0] if body and isinstance(container, cst.FunctionDef) and is_docstring(body[0]) else None
    if docstring is not None:
        body = body[1:]
    if not readers and not sources and not reasons:
        reasons.append("it has neither a reader nor an external source")
    if outputs_stmt is None or not body or body[-1] is not outputs_stmt:
        reasons.append("its outputs are not given by one statement at the end")
        return None
    if not outputs:
        reasons.append("its outputs are not a node or a tuple/list of nodes")
        return None
    if reasons:
        return None
    assert isinstance(outputs_stmt, cst.SimpleStatementLine)
    return Graph(container, docstring, body, outputs_stmt, outputs, readers, sources)


def _inputs_and_ops(
    ctx: FileContext,
    container: cst.CSTNode,
    node: cst.Call,
    readers: list[ReaderUse],
    sources: list[SourceUse],
    reasons: list[str],
) -> None:
    """One call of the graph code: a reader or external source (which must be a plain
    assignment in the body), or an operator dynamic mode must have."""
    op = ctx.fn_op(node.func)
    if op is None:
        if ctx.is_fn_ref(node.func):
            reasons.append(f"{ctx.text(node.func)} is not a known DALI operator")
        return
    if not (op.target.is_reader or op.target.fn_path == "external_source"):
        if op.target.ndd_path is None and op.target.fn_path not in HANDED_OFF:
            reasons.append(f"{ctx.text(node.func)} has no dynamic-mode counterpart")
        return
    assign = ctx.parents.get(node)
    stmt = ctx.parents.get(assign)
    if not (
        isinstance(assign, cst.Assign)
        and isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and ctx.parents.get(ctx.parents.get(stmt)) is container
        and len(assign.targets) == 1
    ):
        reasons.append(f"{ctx.text(node.func)} is not a plain assignment in the pipeline body")
    elif op.target.is_reader:
        readers.append(ReaderUse(stmt, assign.targets[0].target, node, op))
    else:
        use = analyse_source(ctx, node, assign.targets[0].target, stmt, reasons)
        if use is not None:
            sources.append(use)


def _is_outputs(ret: cst.Return, outputs_stmt: cst.BaseStatement | None) -> bool:
    return isinstance(outputs_stmt, cst.SimpleStatementLine) and any(s is ret for s in outputs_stmt.body)


def output_values(value: cst.BaseExpression | None) -> list[cst.BaseExpression]:
    """The nodes a ``return``/``set_outputs`` names, or [] when they are not plain nodes."""
    if value is None:
        return []
    if isinstance(value, (cst.Tuple, cst.List)):
        if any(isinstance(e, cst.StarredElement) for e in value.elements):
            return []
        return [e.value for e in value.elements]
    if isinstance(value, (cst.Dict, cst.DictComp, cst.ListComp, cst.GeneratorExp, cst.SimpleString)):
        return []
    return [value]


def has_random(ctx: FileContext, container: cst.CSTNode) -> bool:
    """Whether the graph code calls a random operator."""
    for n in walk(container.body if isinstance(container, (cst.FunctionDef, cst.With)) else container):
        if isinstance(n, cst.Call):
            op = ctx.fn_op(n.func)
            if op is not None and op.target.is_random:
                return True
    return False


def pipeline_count(ctx: FileContext) -> int:
    """Pipeline definitions in the module: @pipeline_def functions, Pipeline(...) constructions
    and Pipeline subclasses."""
    decorators = [
        d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator for d in ctx.nodes_of(cst.Decorator)
    ]
    return (
        sum((ctx.qualname(target) or "").endswith("pipeline_def") for target in decorators)
        + sum(ctx.qualname(call.func) in PIPELINE_CLASSES for call in ctx.nodes_of(cst.Call))
        + sum(any(ctx.qualname(b.value) in PIPELINE_CLASSES for b in c.bases) for c in ctx.nodes_of(cst.ClassDef))
    )


def pipeline_decorator(ctx: FileContext, fn: cst.FunctionDef) -> cst.Decorator | None:
    """The ``@pipeline_def`` / ``@pipeline_def(...)`` decorator of ``fn``, if it has one."""
    for d in fn.decorators:
        expr = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
        if ctx.qualname(expr) in PIPELINE_DEFS:
            return d
    return None


# -- where a pipeline object is used -----------------------------------------------------------


def follow_pipeline(
    ctx: FileContext,
    inst: Instance,
    reasons: list[str],
    ignore: tuple[cst.CSTNode, ...] = (),
    returns: list[cst.Return] | None = None,
    *,
    with_handles: bool = False,
) -> None:
    """Find ``pipe.build()`` and ``pipe.run()`` for the name ``inst`` binds; any other use of
    the pipeline object is a reason to refuse. References in ``ignore`` are the front end's.
    With ``returns`` (a list), ``return pipe`` is allowed and collected there. With
    ``with_handles`` (the front end migrates them, see ``handles``), ``pipe.epoch_size()``,
    ``reader_meta()``, ``checkpoint()`` and ``reset()`` are recorded on ``inst``."""
    scope = ctx.scopes.get(inst.assign)
    assignments = list(scope.assignments[inst.name]) if scope else []
    if len(assignments) != 1:
        reasons.append(f"`{inst.name}` is assigned more than once")
        return
    for ref in in_source_order(ctx, assignments[0].references):
        claimed = (n for u in inst.iterators for n in u.claimed)  # pipe.epoch_size() as an iterator's size=
        if any(ref.node is n for n in ignore) or any(ref.node is n for n in claimed):
            continue
        attr = ctx.parents.get(ref.node)
        call = ctx.parents.get(attr)
        if returns is not None and isinstance(attr, cst.Return):
            returns.append(attr)
            continue
        if not (isinstance(attr, cst.Attribute) and isinstance(call, cst.Call) and call.func is attr):
            why = iterators.iterator_use(ctx, inst, ref.node)  # DALIGenericIterator([pipe], ...) and friends
            if why != "":
                reasons.append(why or f"`{inst.name}` is passed on or stored at line {ctx.line_of(ref.node)}")
            continue
        if not _method_use(ctx, inst, attr.attr.value, call, with_handles):
            hint = PIPELINE_METHOD_HINTS.get(attr.attr.value)
            where = f"`{inst.name}.{attr.attr.value}(...)` at line {ctx.line_of(ref.node)}"
            reasons.append(f"{where} is not migrated yet" + (f" ({hint})" if hint else ""))


def _method_use(ctx: FileContext, inst: Instance, method: str, call: cst.Call, with_handles: bool) -> bool:
    """Records ``pipe.<method>(...)`` on ``inst`` when it is migrated; False if it is not."""
    if method == "build" and not call.args:
        expr = ctx.parents.get(call)
        stmt = ctx.parents.get(expr)
        if isinstance(expr, cst.Expr) and isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
            inst.builds.append(stmt)
            return True
    if method == "run" and not call.args:
        inst.runs.append(call)
        return True
    return with_handles and handles.record_use(ctx, inst, method, call)


def find_instances(
    ctx: FileContext, fn: cst.FunctionDef | cst.ClassDef, reasons: list[str], *, pipeline_args: bool,
    with_handles: bool = False,
) -> list[Instance]:
    """``pipe = fn(...)`` statements in this file, each followed to its build and run calls.
    With ``pipeline_args`` (``@pipeline_def``), keyword arguments that are not parameters of
    ``fn`` are pipeline arguments. Uses in other modules of the project count too: their
    reasons (if any) join ``reasons``."""
    scope = ctx.scopes.get(fn)
    refs = [r for a in scope.assignments[fn.name.value] if a.node is fn for r in a.references] if scope else []
    refs = in_source_order(ctx, refs)
    refs = [r for r in refs if not within(ctx, r.node, fn)]  # super(Cls, self), recursion
    params = param_names(fn) if pipeline_args and isinstance(fn, cst.FunctionDef) else set()
    external = ctx.project.external_uses.get(fn.name.value) if ctx.project is not None and pipeline_args else None
    if external:
        reasons.extend(external)
    if not refs and external is None:
        reasons.append("it is not instantiated in the files given (pass the modules that use it too)")
    return instances_of(ctx, refs, fn.name.value, params, reasons, pipeline_args=pipeline_args, with_handles=with_handles)


def instances_of(
    ctx: FileContext,
    refs: list[Access] | list[object],
    name: str,
    params: set[str],
    reasons: list[str],
    *,
    pipeline_args: bool,
    with_handles: bool = False,
) -> list[Instance]:
    """Follow each reference to a pipeline factory ``name``: only ``pipe = name(...)`` is migrated.
    ``with_handles``: see :func:`follow_pipeline`; checkpoint arguments are then the front end's."""
    instances: list[Instance] = []
    for ref in refs:
        node = ref.node  # type: ignore[attr-defined]
        call, assign, stmt = _assignment_of(ctx, node)
        if call is None or assign is None or stmt is None:
            reasons.append(
                f"used at line {ctx.line_of(node)} in a way the tool cannot follow "
                f"(only `pipe = {name}(...)` is migrated)"
            )
            continue
        if any(a.star for a in call.args):
            reasons.append(f"*args/**kwargs at the call on line {ctx.line_of(call)}")
            continue
        # keyword arguments naming the function's own parameters go to the function
        kwargs = {k: v for k, v in kwargs_of(call).items() if k not in params} if pipeline_args else {}
        reasons += check_pipeline_args(kwargs, f"call on line {ctx.line_of(call)}", checkpoints=with_handles)
        inst = Instance(stmt, assign, call, kwargs)
        follow_pipeline(ctx, inst, reasons, with_handles=with_handles)
        instances.append(inst)
    return instances


def _assignment_of(
    ctx: FileContext, ref: cst.CSTNode
) -> tuple[cst.Call | None, cst.Assign | None, cst.SimpleStatementLine | None]:
    """``pipe = <ref>(...)`` as one statement: its call, assignment and statement."""
    call = ctx.parents.get(ref)
    assign = ctx.parents.get(call)
    stmt = ctx.parents.get(assign)
    if (
        isinstance(call, cst.Call)
        and call.func is ref
        and isinstance(assign, cst.Assign)
        and len(assign.targets) == 1
        and isinstance(assign.targets[0].target, cst.Name)
        and isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
    ):
        return call, assign, stmt
    return None, None, None

