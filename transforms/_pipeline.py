"""The back end shared by the structural rules that migrate whole pipelines (DM2xx).

A front end (``@pipeline_def`` function, ``with pipe:`` block, ``Pipeline`` subclass) finds the
statements that build a pipeline's graph and where the pipeline object is built and run. This
module turns the graph into the body of a dynamic-mode generator (readers built once, epochs
chained without end, random operators fed the batch size and one RNG) and rewrites the use sites
(``pipe.build()`` gone, ``pipe.run()`` -> ``next(pipe)``, TensorList API -> Batch API).
Anything it cannot carry over raises :class:`Refused` with the reason; nothing is half-done.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import libcst as cst

from dali_migrate.catalog import OpInfo
from dali_migrate.context import FileContext, attr_chain
from dali_migrate.fixes import TODO_PREFIX, Diagnostic, Edit

from ._conditionals import lower_branches
from ._devices import move_cpu_operands
from ._external_source import SourceUse, analyse_source, fetch, wrap
from ._handles import record_use as record_handle_use
from ._handles import site_edits as handle_site_edits
from ._helpers import HelperCalls, helper_edits, random_helpers
from ._iterators import iterator_use
from ._iterators import site_edits as iterator_site_edits
from ._local import (  # noqa: F401  (fresh_name, truthy: also imported from here by the front ends)
    LocalEnv,
    append_arg,
    collect_nodes,
    fresh_name,
    in_source_order,
    kwarg,
    lower,
    remove_args,
    truthy,
    walk,
    within,
)
from .constants import Constants
from .fn_to_ndd import HANDED_OFF, FnToNdd
from .mixed_device import MixedDevice
from .node_indexing import NodeIndexing
from .python_function import PythonFunction
from .random_ops import RandomOps
from .shapes import Shapes

#: pipeline arguments dynamic mode has no use for, and why (written as a comment where dropped)
DROPPED_ARGS = {
    "prefetch_queue_depth": "dynamic mode runs each operator when it is called; there is no prefetch queue",
    "exec_async": "dynamic mode has no pipeline executor to configure",
    "exec_pipelined": "dynamic mode has no pipeline executor to configure",
    "exec_dynamic": "dynamic mode has no pipeline executor to configure",
    "experimental_exec_dynamic": "dynamic mode has no pipeline executor to configure",
    "set_affinity": "dynamic mode's thread pool has no CPU affinity setting",
    "max_streams": "dynamic mode manages its CUDA streams itself",
    "default_cuda_stream_priority": "dynamic mode manages its CUDA streams itself",
    "bytes_per_sample": "a memory hint of the pipeline executor",
    "enable_memory_stats": "a statistic of the pipeline executor",
    "py_num_workers": "only used by parallel external_source",
    "py_start_method": "only used by parallel external_source",
    "py_callback_pickler": "only used by parallel external_source",
    "output_dtype": "an output check of pipeline mode",
    "output_ndim": "an output check of pipeline mode",
    "output_layout": "an output check of pipeline mode",
    "stream_policy": "dynamic mode manages its CUDA streams itself",
    "concurrency": "dynamic mode has no pipeline executor to configure",
}
#: pipeline arguments whose behaviour this rule cannot carry over yet
UNSUPPORTED_ARGS = {
    "enable_checkpointing": "checkpointing (ndd.checkpoint.Checkpoint) is not migrated yet",
    "checkpoint": "checkpointing (ndd.checkpoint.Checkpoint) is not migrated yet",
    "debug": "debug-mode pipelines are not migrated yet",
}
#: the pipeline arguments of checkpointing, migrated by the front ends that handle them (``_handles``)
CHECKPOINT_ARGS = ("enable_checkpointing", "checkpoint")
#: what TensorList methods become on a Batch: (kind, template)
OUTPUT_METHODS = {"as_array", "as_tensor", "as_cpu", "at", "layout", "shape", "is_dense_tensor"}



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


class Refused(Exception):
    """The pipeline cannot be migrated safely; the message says why."""


@dataclass
class ReaderUse:
    """``jpegs, labels = fn.readers.file(...)``: a reader in the graph code."""

    stmt: cst.SimpleStatementLine
    target: cst.BaseAssignTargetExpression
    call: cst.Call
    op: OpInfo


@dataclass
class Graph:
    """The code that builds one pipeline's graph: the body of ``container`` (a function, or a
    ``with pipe:`` block), whose ``outputs_stmt`` (``return ...`` / ``pipe.set_outputs(...)``)
    names the ``outputs``."""

    container: cst.CSTNode
    docstring: cst.BaseStatement | None
    body: list[cst.BaseStatement]
    outputs_stmt: cst.SimpleStatementLine
    outputs: list[cst.BaseExpression]
    readers: list[ReaderUse]
    sources: list[SourceUse] = field(default_factory=list)
    #: filled by emit_generator_body: edits outside the graph code that belong to the same fix
    #: (helpers that now take the RNG), and the nodes they cover (claimed by the rule)
    extra_edits: list[Edit] = field(default_factory=list)
    claimed: list[cst.CSTNode] = field(default_factory=list)
    #: filled by emit_generator_body: "readers" (the reader variables) and "rng" (the RNG's), for
    #: the code that needs a handle on them (``_handles``)
    handles: dict = field(default_factory=dict)


@dataclass
class Instance:
    """``pipe = train_pipe(...)``: one pipeline object and what is done with it."""

    stmt: cst.SimpleStatementLine
    assign: cst.Assign
    call: cst.Call
    kwargs: dict[str, cst.Arg]
    builds: list[cst.SimpleStatementLine] = field(default_factory=list)
    runs: list[cst.Call] = field(default_factory=list)
    device_todo: str | None = None
    #: framework iterators over the pipeline (``_iterators.IteratorUse``), see follow_pipeline
    iterators: list = field(default_factory=list)
    #: ``pipe.epoch_size()``/``reader_meta()`` and ``pipe.checkpoint()`` calls, ``pipe.reset()``
    #: statements (recorded by follow_pipeline with ``handles``, see ``_handles``)
    meta_calls: list[cst.Call] = field(default_factory=list)
    checkpoints: list[cst.Call] = field(default_factory=list)
    resets: list[cst.SimpleStatementLine] = field(default_factory=list)
    #: the names the call site binds to the handles the migrated function returns, in order
    handle_names: dict[str, str] = field(default_factory=dict)
    #: the name= of the pipeline's reader (the key of ``pipe.epoch_size()`` without a name)
    reader_name: str | None = None


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
            op = ctx.fn_op(node.func)
            if op is not None and (op.target.is_reader or op.target.fn_path == "external_source"):
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
            elif op is not None and op.target.ndd_path is None and op.target.fn_path not in HANDED_OFF:
                reasons.append(f"{ctx.text(node.func)} has no dynamic-mode counterpart")
            elif op is None and ctx.is_fn_ref(node.func):
                reasons.append(f"{ctx.text(node.func)} is not a known DALI operator")
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
    return Graph(container, docstring, body, outputs_stmt, outputs, readers, sources)


def _is_outputs(ret: cst.Return, outputs_stmt: cst.BaseStatement | None) -> bool:
    return isinstance(outputs_stmt, cst.SimpleStatementLine) and any(s is ret for s in outputs_stmt.body)


def emit_generator_body(
    ctx: FileContext,
    graph: Graph,
    *,
    rule_id: str,
    batch_size: cst.BaseExpression,
    seed: cst.BaseExpression | None,
    dropped: list[cst.EmptyLine],
    notes: list[Diagnostic],
    single_use: bool = False,
    reader_meta: bool = False,
    checkpointing: bool = False,
) -> tuple[list[cst.BaseStatement], list[str]]:
    """The body of the generator that replaces ``graph``: setup code, the readers built once,
    one RNG, and an endless loop over batches that yields the outputs. ``batch_size`` and
    ``seed`` are the expressions to use inside it. ``single_use``: this is the module's only
    pipeline and it is instantiated once (a condition of capture mode, see :func:`_capturable`,
    and :func:`pipeline_count`). ``reader_meta``: the readers' metadata is read (they get
    ``max_batch_size``, pitfall 4); ``checkpointing``: their state is (``enable_checkpointing=True``,
    no capture mode). The reader and RNG variables go to ``graph.handles``. Returns the
    statements and the ids of the local rules that rewrote something."""
    taken = _names_in(graph.container)
    rng_var = fresh_name("rng", taken)
    ndd = ctx.ndd
    single = len(graph.readers) == 1
    nodes = collect_nodes(ctx, graph.container)

    # setup code before the first input stays outside the loop unless it builds graph nodes
    first = min(graph.body.index(u.stmt) for u in [*graph.readers, *graph.sources])
    setup = [s for s in graph.body[:first] if not _mentions_dali(ctx, s, nodes)]
    loop_body = [s for s in graph.body if s not in setup]
    per_batch_names = set().union(*(_assigned_names(s) for s in loop_body if not _is_reader_stmt(graph, s)))

    hoisted: list[cst.BaseStatement] = []
    reader_vars: dict[int, str] = {}
    for use in graph.readers:
        depends = _free_names(use.call) & per_batch_names
        if depends:
            raise Refused(f"the arguments of {ctx.text(use.call.func)} depend on per-batch code ({', '.join(sorted(depends))})")
        var = fresh_name("reader" if single else _reader_var(use), taken)
        reader_vars[id(use.stmt)] = var
        args = remove_args(list(use.call.args), {"name"})
        args = _reader_seed(ctx, use, args, seed, rule_id, notes)
        if not single or reader_meta:
            args = append_arg(args, kwarg("max_batch_size", batch_size))
        if checkpointing and not any(a.keyword and a.keyword.value == "enable_checkpointing" and truthy(a) for a in args):
            args = remove_args(args, {"enable_checkpointing"})
            args = append_arg(args, kwarg("enable_checkpointing", cst.Name("True")))
        graph.handles.setdefault("readers", []).append(var)
        cls = attr_chain(f"{ndd}.{use.op.target.ndd_path}")
        hoisted.append(
            cst.SimpleStatementLine(
                [cst.Assign([cst.AssignTarget(cst.Name(var))], use.call.with_changes(func=cls, args=args))],
                leading_lines=use.stmt.leading_lines,
            )
        )
    sources: list[SourceUse] = []
    for use in graph.sources:
        if use.kind != "iterable" and not isinstance(use.source, cst.Name):
            # the source object is made once, as when the graph was defined
            depends = _free_names(use.source) & per_batch_names
            if depends:
                raise Refused(f"the source of {ctx.text(use.call.func)} depends on per-batch code ({', '.join(sorted(depends))})")
            var = cst.Name(fresh_name(f"{_first_name(use.target)}_source", taken))
            hoisted.append(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(var)], use.source)]))
            use = dataclasses.replace(use, source=var)
        sources.append(use)
    graph = dataclasses.replace(graph, sources=sources)
    if dropped and hoisted:
        hoisted[0] = hoisted[0].with_changes(leading_lines=list(hoisted[0].leading_lines) + dropped)

    # without readers, one iterable source drives the loop: the generator ends where it ends
    iterable = [u for u in graph.sources if u.kind == "iterable"]
    if iterable and (graph.readers or len(graph.sources) > 1):
        raise Refused("an iterable external source next to a reader or another external source")
    counted = any(u.kind in ("call1", "sample1") for u in graph.sources)
    iteration = cst.Name(fresh_name("iteration", taken)) if counted else None
    data_var = cst.Name(fresh_name("data", taken))
    for use in graph.sources:
        for t in [use.target] if isinstance(use.target, cst.Name) else [e.value for e in use.target.elements]:
            nodes.add(t.value)
    if single:
        target, batch_expr = _loop_target(graph.readers[0], batch_size)
        if isinstance(target, cst.Name) and graph.readers[0].op.target.num_outputs == 1:
            nodes.add(target.value)
    elif graph.readers:
        target, batch_expr = None, batch_size
    else:
        target, batch_expr = None, cst.Attribute(cst.Name(_first_name(graph.sources[0].target)), cst.Name("batch_size"))
    for use in graph.readers:
        if isinstance(use.target, cst.Name) and use.op.target.num_outputs == 1:
            nodes.add(use.target.value)
    env = LocalEnv(batch_size=batch_expr, rng=cst.Name(rng_var), nodes=nodes)
    local_rules = [FnToNdd(), MixedDevice(), NodeIndexing(), RandomOps(), PythonFunction(), Shapes(), Constants()]

    fired: set[str] = set()
    helpers = random_helpers(ctx, graph.container, Refused)
    if helpers:
        graph.extra_edits += helper_edits(ctx, helpers, local_rules, fired, Refused)
        graph.claimed += [h.fn for h in helpers.values()]
        local_rules.append(HelperCalls(helpers))
    lowered: list[cst.BaseStatement] = []
    for s in loop_body:
        source = next((u for u in graph.sources if u.stmt is s), None)
        if source is not None:
            lowered += _source_statements(ctx, source, iteration, data_var, batch_size)
            continue
        if _is_reader_stmt(graph, s):
            if single:
                continue
            var = reader_vars[id(s)]
            call = cst.Call(cst.Name(var), args=[kwarg("batch_size", batch_size)])
            lowered.append(s.with_changes(body=[s.body[0].with_changes(value=call)], leading_lines=[]))
            continue
        if s is graph.outputs_stmt:
            values = []
            for v in graph.outputs:
                nv, diags = lower(ctx, v, env, local_rules, fired)
                if diags:
                    raise Refused("; ".join(dict.fromkeys(d.message for d in diags)))
                values.append(nv)
            yielded = cst.Tuple([cst.Element(v) for v in values], lpar=[], rpar=[]) if len(values) > 1 else cst.Tuple([cst.Element(values[0])])
            lowered.append(s.with_changes(body=[cst.Expr(cst.Yield(yielded))]))
            if iteration is not None:
                lowered.append(cst.SimpleStatementLine([cst.AugAssign(iteration, cst.AddAssign(), cst.Integer("1"))]))
            continue
        if isinstance(s, cst.BaseCompoundStatement):
            # an `if` on data nodes (enable_conditionals) becomes per-sample code
            branched = lower_branches(ctx, s, env, lambda n, e: _lowered(ctx, n, e, local_rules, fired), taken)
            if branched is not None:
                lowered += branched
                continue
        ns, diags = lower(ctx, s, env, local_rules, fired)
        if diags:
            raise Refused("; ".join(dict.fromkeys(d.message for d in diags)))
        lowered.append(ns)

    # capture mode rejects the moved operands on its second step (DALI 2.4, seen on an H200)
    lowered, moved = move_cpu_operands(lowered, nodes)
    if single:
        epoch_args = [kwarg("batch_size", batch_size)]
        capture = single_use and not moved and not checkpointing and _capturable(ctx, graph, lowered)
        if capture:
            epoch_args.append(kwarg("capture", cst.Name("True")))
        next_epoch = cst.Call(
            func=cst.Attribute(cst.Name(reader_vars[id(graph.readers[0].stmt)]), cst.Name("next_epoch")), args=epoch_args
        )
        loop_body_block = [cst.For(target=target, iter=next_epoch, body=cst.IndentedBlock(body=lowered))]
    else:
        loop_body_block = lowered
    if iterable:
        loop: cst.BaseCompoundStatement = cst.For(target=data_var, iter=iterable[0].source, body=cst.IndentedBlock(body=lowered))
        if iterable[0].cycle:  # cycle=True/"quiet": DALI starts the source over when it ends
            loop = cst.While(test=cst.Name("True"), body=cst.IndentedBlock(body=[loop]))
    else:
        loop = cst.While(test=cst.Name("True"), body=cst.IndentedBlock(body=loop_body_block))
    if dropped and not hoisted:
        loop = loop.with_changes(leading_lines=dropped)
    if single and capture:
        loop = loop.with_changes(leading_lines=[*loop.leading_lines, cst.EmptyLine(comment=cst.Comment(CAPTURE_COMMENT))])

    new_body: list[cst.BaseStatement] = []
    if graph.docstring is not None:
        new_body.append(graph.docstring)
    else:
        names = ", ".join(_output_names(ctx, graph.outputs))
        until = "epoch after epoch, without end," if not graph.sources else "until its external source ends,"
        new_body.append(
            cst.SimpleStatementLine([cst.Expr(cst.SimpleString(f'"""Yields ({names}) batches {until} as Pipeline.run() did."""'))])
        )
    new_body += setup
    new_body += hoisted
    if _has_random(ctx, graph.container) or helpers:
        graph.handles["rng"] = rng_var
        rng_args = [kwarg("seed", seed)] if seed is not None else []
        new_body.append(
            cst.SimpleStatementLine(
                [cst.Assign([cst.AssignTarget(cst.Name(rng_var))], cst.Call(func=attr_chain(f"{ndd}.random.RNG"), args=rng_args))]
            )
        )
        notes.append(
            ctx.info(
                rule_id,
                graph.container,
                "random operators now draw from an ndd.random.RNG: their values differ from the "
                "old pipeline's (dali-migrate verify aligns the streams to compare the rest)",
            )
        )
    if iteration is not None:
        new_body.append(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(iteration)], cst.Integer("0"))]))
    new_body.append(loop)
    return new_body, sorted(fired - {"DM200"})


def _lowered(ctx: FileContext, node: cst.CSTNode, env: LocalEnv, rules: list, fired: set[str]) -> cst.CSTNode:
    new, diags = lower(ctx, node, env, rules, fired)
    if diags:
        raise Refused("; ".join(dict.fromkeys(d.message for d in diags)))
    return new


def _first_name(target: cst.BaseAssignTargetExpression) -> str:
    while isinstance(target, (cst.Tuple, cst.List)):
        target = target.elements[0].value
    return target.value if isinstance(target, cst.Name) else "input"


def _source_statements(ctx: FileContext, use: SourceUse, iteration: cst.Name | None, data: cst.Name, batch_size=None) -> list[cst.BaseStatement]:
    """``x = fn.external_source(source=...)`` in the loop: the batch the source gives now."""
    if use.kind == "iterable":
        return [use.stmt.with_changes(body=[use.stmt.body[0].with_changes(value=wrap(ctx.ndd, use, data))])]
    call = fetch(use, iteration, batch_size)
    if not use.stops:
        return [use.stmt.with_changes(body=[use.stmt.body[0].with_changes(value=wrap(ctx.ndd, use, call))])]
    # pipeline mode ended the run when the source raised StopIteration; so does the generator
    guarded = cst.Try(
        body=cst.IndentedBlock([cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(data)], call)])]),
        handlers=[
            cst.ExceptHandler(
                body=cst.IndentedBlock([cst.SimpleStatementLine([cst.Return()])]), type=cst.Name("StopIteration")
            )
        ],
        leading_lines=use.stmt.leading_lines,
    )
    return [guarded, use.stmt.with_changes(body=[use.stmt.body[0].with_changes(value=wrap(ctx.ndd, use, data))], leading_lines=[])]


#: what capture mode means for the code around the generator, written above the loop
CAPTURE_COMMENT = "# capture=True: runs the loop as one prebuilt graph; one such loop can be active at a time"


def _capturable(ctx: FileContext, graph: Graph, lowered: list[cst.BaseStatement]) -> bool:
    """Whether the epoch loop can run in capture mode (``next_epoch(..., capture=True)``).

    Measured on an H200 (benchmarks/results/), capture mode closes the gap between dynamic mode
    and the pipeline; in DALI 2.4 it holds only when every step calls the same operators with
    batches of the same size (no per-sample Python: ``as_batch`` or a skipped random draw), the
    loop is the only capture-mode loop of the program (a suspended capture loop stays active, so
    a second pipeline in the same thread raises "Only one capture-mode loop can be active at a
    time"), and nothing checkpoints the reader. So: one reader, no external source, a module with
    a single pipeline instantiated once, and a body of operator calls."""
    if len(graph.readers) != 1 or graph.sources:
        return False
    if any(isinstance(n, cst.Name) and n.value in ("as_batch", "advance") for s in lowered for n in walk(s)):
        return False
    for arg in graph.readers[0].call.args:
        if arg.keyword is not None and arg.keyword.value == "enable_checkpointing":
            return False
    return True


def pipeline_count(ctx: FileContext) -> int:
    """Pipeline definitions in the module: @pipeline_def functions, Pipeline(...) constructions
    and Pipeline subclasses."""
    decorators = [d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator for d in ctx.nodes_of(cst.Decorator)]
    return (
        sum((ctx.qualname(target) or "").endswith("pipeline_def") for target in decorators)
        + sum(ctx.qualname(call.func) in PIPELINE_CLASSES for call in ctx.nodes_of(cst.Call))
        + sum(any(ctx.qualname(b.value) in PIPELINE_CLASSES for b in c.bases) for c in ctx.nodes_of(cst.ClassDef))
    )


def _is_reader_stmt(graph: Graph, stmt: cst.CSTNode) -> bool:
    return any(use.stmt is stmt for use in graph.readers)


def _reader_var(use: ReaderUse) -> str:
    """``images_reader`` for ``images, labels = fn.readers.file(...)``; ``numpy_reader`` when
    the outputs have no plain name."""
    target = use.target
    if isinstance(target, (cst.Tuple, cst.List)) and target.elements:
        target = target.elements[0].value
    if isinstance(target, cst.Name):
        return f"{target.value}_reader"
    return (use.op.target.ndd_path or "reader").split(".")[-1].lower() + "_reader"

def _reader_seed(
    ctx: FileContext, use: ReaderUse, args: list[cst.Arg], seed: cst.BaseExpression | None, rule_id: str, notes: list[Diagnostic]
) -> list[cst.Arg]:
    """A shuffling reader without its own seed gets the pipeline's (pitfall 5)."""
    shuffles = any(a.keyword and a.keyword.value in ("random_shuffle", "shuffle_after_epoch") and truthy(a) for a in args)
    if not shuffles or any(a.keyword and a.keyword.value == "seed" for a in args):
        return args
    if seed is not None:
        notes.append(
            ctx.info(
                rule_id,
                use.call,
                f"the reader now shuffles with seed={ctx.render(seed, [])}; pipeline mode derived its seed from the "
                "pipeline seed, so the shuffle order differs from the old pipeline's (each epoch holds the same samples)",
            )
        )
        return append_arg(args, kwarg("seed", seed))
    notes.append(
        ctx.info(
            rule_id,
            use.call,
            "the pipeline had no seed, so its shuffle order was random each run; the ndd "
            "reader without seed= shuffles the same way every run",
        )
    )
    return args


def _assigned_names(stmt: cst.CSTNode) -> set[str]:
    names: set[str] = set()
    for n in walk(stmt):
        if isinstance(n, cst.AssignTarget):
            names |= {x.value for x in walk(n.target) if isinstance(x, cst.Name)}
        elif isinstance(n, (cst.AugAssign, cst.AnnAssign)):
            names |= {x.value for x in walk(n.target) if isinstance(x, cst.Name)}
        elif isinstance(n, cst.For):
            names |= {x.value for x in walk(n.target) if isinstance(x, cst.Name)}
    return names


def _free_names(expr: cst.CSTNode) -> set[str]:
    """Plain names an expression reads (attribute names and keywords are not reads)."""
    attrs = {id(n.attr) for n in walk(expr) if isinstance(n, cst.Attribute)}
    keywords = {id(n.keyword) for n in walk(expr) if isinstance(n, cst.Arg) and n.keyword is not None}
    return {n.value for n in walk(expr) if isinstance(n, cst.Name) and id(n) not in attrs | keywords}


# -- what a structural rule reports ---------------------------------------------------------------


def refuse_pipeline(state, rule_id: str, node: cst.CSTNode, why: object, which: str = "") -> None:
    """The pipeline stays as it was, with one TODO listing every reason; no local rewrite of
    the file is applied either (``refused_pipeline``)."""
    state.refused_pipeline = True
    state.diagnostics.append(state.ctx.todo(rule_id, node, f"pipeline not migrated{which}: {why}"))


def propose_pipeline_fix(
    state, rule_id: str, node: cst.CSTNode, edits: list[Edit], message: str, includes, notes: list[Diagnostic]
) -> None:
    """The one fix that migrates a pipeline (definition and use sites) and its notes."""
    fix = state.ctx.make_fix(rule_id, node, edits, message, includes=includes)
    state.fixes.append(fix)
    state.structural.append(fix.id)
    state.diagnostics.extend(notes)


# -- where a pipeline object is used -----------------------------------------------------------


def follow_pipeline(
    ctx: FileContext,
    inst: Instance,
    reasons: list[str],
    ignore: tuple[cst.CSTNode, ...] = (),
    returns: list | None = None,
    *,
    handles: bool = False,
) -> None:
    """Find ``pipe.build()`` and ``pipe.run()`` for the name ``inst`` binds; any other use of
    the pipeline object is a reason to refuse. References in ``ignore`` are the front end's.
    With ``returns`` (a list), ``return pipe`` is allowed and collected there. With ``handles``
    (the front end migrates them, see ``_handles``), ``pipe.epoch_size()``, ``reader_meta()``,
    ``checkpoint()`` and ``reset()`` are recorded on ``inst``."""
    name = inst.assign.targets[0].target
    scope = ctx.scopes.get(inst.assign)
    assignments = list(scope.assignments[name.value]) if scope else []
    if len(assignments) != 1:
        reasons.append(f"`{name.value}` is assigned more than once")
        return
    for ref in in_source_order(ctx, assignments[0].references):
        if any(ref.node is n for n in ignore) or any(ref.node is n for u in inst.iterators for n in u.claimed):
            continue  # (claimed: pipe.epoch_size("Reader") as an iterator's size=, see _iterators)
        attr = ctx.parents.get(ref.node)
        call = ctx.parents.get(attr)
        line = ctx.line_of(ref.node)
        if returns is not None and isinstance(attr, cst.Return):
            returns.append(attr)
            continue
        if not (isinstance(attr, cst.Attribute) and isinstance(call, cst.Call) and call.func is attr):
            why = iterator_use(ctx, inst, ref.node)  # DALIGenericIterator([pipe], ...) and friends
            if why != "":
                reasons.append(why or f"`{name.value}` is passed on or stored at line {line}")
            continue
        method = attr.attr.value
        if method == "build" and not call.args:
            stmt = ctx.parents.get(ctx.parents.get(call))
            if isinstance(ctx.parents.get(call), cst.Expr) and isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
                inst.builds.append(stmt)
                continue
        if method == "run" and not call.args:
            inst.runs.append(call)
            continue
        if handles and record_handle_use(ctx, inst, method, call):
            continue
        hint = PIPELINE_METHOD_HINTS.get(method)
        reasons.append(f"`{name.value}.{method}(...)` at line {line} is not migrated yet" + (f" ({hint})" if hint else ""))


def find_instances(
    ctx: FileContext, fn: cst.FunctionDef, reasons: list[str], *, pipeline_args: bool, handles: bool = False
) -> list[Instance]:
    """``pipe = fn(...)`` statements in this file, each followed to its build and run calls.
    With ``pipeline_args`` (``@pipeline_def``), keyword arguments that are not parameters of
    ``fn`` are pipeline arguments. Uses in other modules of the project count too: their
    reasons (if any) join ``reasons``."""
    scope = ctx.scopes.get(fn)
    refs = [r for a in scope.assignments[fn.name.value] if a.node is fn for r in a.references] if scope else []
    refs = in_source_order(ctx, refs)
    refs = [r for r in refs if not within(ctx, r.node, fn)]  # super(Cls, self), recursion
    params = param_names(fn) if pipeline_args else set()
    external = ctx.project.external_uses.get(fn.name.value) if ctx.project is not None and pipeline_args else None
    if external:
        reasons.extend(external)
    if not refs and external is None:
        reasons.append("it is not instantiated in the files given (pass the modules that use it too)")
    return instances_of(ctx, refs, fn.name.value, params, reasons, pipeline_args=pipeline_args, handles=handles)


def instances_of(
    ctx: FileContext, refs, name: str, params: set[str], reasons: list[str], *, pipeline_args: bool, handles: bool = False
) -> list[Instance]:
    """Follow each reference to a pipeline factory ``name``: only ``pipe = name(...)`` is migrated.
    ``handles``: see :func:`follow_pipeline`; checkpoint arguments are then the front end's too."""
    instances: list[Instance] = []
    for ref in refs:
        call = ctx.parents.get(ref.node)
        assign = ctx.parents.get(call)
        stmt = ctx.parents.get(assign)
        if not (
            isinstance(call, cst.Call)
            and call.func is ref.node
            and isinstance(assign, cst.Assign)
            and len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name)
            and isinstance(stmt, cst.SimpleStatementLine)
            and len(stmt.body) == 1
        ):
            reasons.append(
                f"used at line {ctx.line_of(ref.node)} in a way the tool cannot follow "
                f"(only `pipe = {name}(...)` is migrated)"
            )
            continue
        if any(a.star for a in call.args):
            reasons.append(f"*args/**kwargs at the call on line {ctx.line_of(call)}")
            continue
        # keyword arguments naming the function's own parameters go to the function
        kwargs = {k: v for k, v in kwargs_of(call).items() if k not in params} if pipeline_args else {}
        reasons += check_pipeline_args(kwargs, f"call on line {ctx.line_of(call)}", checkpoints=handles)
        inst = Instance(stmt, assign, call, kwargs)
        follow_pipeline(ctx, inst, reasons, handles=handles)
        instances.append(inst)
    return instances


def pipeline_def_instance_edits(
    ctx: FileContext,
    inst: Instance,
    rule_id: str,
    threads_default: cst.Arg | None,
    params: set[str],
    notes: list[Diagnostic],
    comments: list[cst.EmptyLine] = (),
    peers: tuple[cst.Call, ...] = (),
) -> list[Edit]:
    """``pipe = f(..., num_threads=4)`` of a ``@pipeline_def`` function: pipeline arguments
    dynamic mode has no use for are dropped, ``num_threads`` becomes ``ndd.set_num_threads``
    before it (the call's, else the decorator's), then the build and run sites. When the function
    now returns handles before the batches (``inst.handle_names``), the call site unpacks them."""
    threads = inst.kwargs.get("num_threads", threads_default)
    keep = remove_args(list(inst.call.args), PIPELINE_ARGS - {"batch_size", "seed"} - params)
    keep = [
        a.with_changes(keyword=cst.Name("batch_size")) if a.keyword and a.keyword.value == "max_batch_size" else a
        for a in keep
    ]
    assign = inst.assign.with_changes(value=inst.call.with_changes(args=keep))
    if inst.handle_names:
        names = [*inst.handle_names.values(), inst.assign.targets[0].target.value]
        target = cst.Tuple([cst.Element(cst.Name(n)) for n in names], lpar=[], rpar=[])
        assign = assign.with_changes(targets=[assign.targets[0].with_changes(target=target)])
    new_stmt = inst.stmt.with_changes(body=[assign])
    stmts: list[cst.BaseStatement] = []
    todo_lines = list(comments)
    if inst.device_todo:
        todo_lines.append(cst.EmptyLine(comment=cst.Comment(f"{TODO_PREFIX} {rule_id}: {inst.device_todo}")))
        notes.append(Diagnostic(rule_id, inst.device_todo, ctx.line_of(inst.stmt), 0, "todo"))
    if threads is not None:
        stmts.append(set_threads_stmt(ctx, threads).with_changes(leading_lines=inst.stmt.leading_lines))
        new_stmt = new_stmt.with_changes(leading_lines=todo_lines)
    else:
        new_stmt = new_stmt.with_changes(leading_lines=list(inst.stmt.leading_lines) + todo_lines)
    stmts.append(new_stmt)
    return [ctx.stmt_edit(inst.stmt, stmts)] + run_site_edits(ctx, inst, notes, peers=peers)


def run_site_edits(
    ctx: FileContext, inst: Instance, notes: list[Diagnostic], moved: cst.CSTNode | None = None, peers: tuple[cst.Call, ...] = ()
) -> list[Edit]:
    """``pipe.build()`` removed, ``pipe.run()`` -> ``next(pipe)`` and its outputs' API.
    ``moved`` is graph code of the same scope that moves into the generator: names it assigns
    are no longer the run site's. ``peers``: the ``run()`` calls of the other instances migrated
    in the same fix (``data = pipe.run()`` then ``data = restored.run()`` in one scope: a use
    after both may hold either; the caller drops the edits found twice)."""
    edits = [removed_stmt(ctx, b) for b in inst.builds]
    edits += iterator_site_edits(ctx, inst, notes, removed_stmt, Refused)
    edits += handle_site_edits(ctx, inst, removed_stmt)
    for run in inst.runs:
        call = ctx.expr_edit(run, cst.Call(func=cst.Name("next"), args=[cst.Arg(run.func.value)]))
        outputs = _output_edits(ctx, run, notes, moved, peers)
        # `pipe.run()[0].as_array()` is rewritten whole, its next(pipe) included
        if not any(e.start <= call.start and call.end <= e.end for e in outputs):
            edits.append(call)
        edits += outputs
    return edits


def device_todo(ctx: FileContext, container: cst.CSTNode, device_id: cst.Arg | None) -> str | None:
    """A TODO for ``device_id=<not 0 or None>`` when the pipeline uses the GPU."""
    if device_id is None or _is_literal(device_id.value, (0, None)) or not _uses_gpu(ctx, container):
        return None
    value = ctx.render(device_id.value, [])
    return (
        f"device_id={value} was dropped: dynamic mode runs GPU operators on the current CUDA device; "
        f"make it {value} before iterating (torch.cuda.set_device or ndd.Device)"
    )


def set_threads_stmt(ctx: FileContext, threads: cst.Arg) -> cst.SimpleStatementLine:
    return cst.SimpleStatementLine(
        [cst.Expr(cst.Call(func=attr_chain(f"{ctx.ndd}.set_num_threads"), args=[cst.Arg(threads.value)]))]
    )


def dropped_comments(ctx: FileContext, kwarg_sets: list[dict[str, cst.Arg]], *, branches: bool = False) -> list[cst.EmptyLine]:
    """One comment per pipeline argument dynamic mode has no use for, saying why (``branches``:
    the pipeline has ``if`` statements on data, lowered to per-sample code)."""
    lines = []
    seen = set()
    for kw in kwarg_sets:
        for name, arg in kw.items():
            if name in DROPPED_ARGS and name not in seen:
                seen.add(name)
                lines.append(
                    cst.EmptyLine(comment=cst.Comment(f"# dali-migrate: dropped {name}={ctx.text(arg.value)}: {DROPPED_ARGS[name]}"))
                )
            elif name == "enable_conditionals" and name not in seen:
                seen.add(name)
                why = "its branches on data run per sample" if branches else "the pipeline has no data-dependent branch"
                lines.append(cst.EmptyLine(comment=cst.Comment(f"# dali-migrate: dropped enable_conditionals: {why}")))
    return lines


# -- outputs of pipe.run() --------------------------------------------------------------------


def _output_edits(
    ctx: FileContext, run: cst.Call, notes: list[Diagnostic], moved: cst.CSTNode | None, peers: tuple[cst.Call, ...] = ()
) -> list[Edit]:
    """Rewrite TensorList API uses of the names bound by ``a, b = pipe.run()`` /
    ``out = pipe.run()`` in the same scope, following ``a, b = out``, ``x = a`` and
    ``a = a.as_cpu()``. A TensorList handed to other code (``train_step(images)``) cannot be
    followed: it gets a TODO.

    Scope analysis is not flow-sensitive: a use is rewritten only when every assignment it may
    refer to holds a TensorList, so the set of such assignments is grown to a fixed point first.
    """
    assign = ctx.parents.get(run)
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
        return _unnamed_output_edits(ctx, run, notes)
    scope = ctx.scopes.get(assign)
    if scope is None:
        return []
    tuples: dict[int, cst.Name] = {}  # names bound to the whole output tuple
    lists: dict[int, cst.Name] = {}  # names bound to one TensorList

    def bind(target: cst.BaseAssignTargetExpression, whole_tuple: bool) -> None:
        if isinstance(target, (cst.Tuple, cst.List)) and whole_tuple:
            for e in target.elements:
                bind(e.value, False)
        elif isinstance(target, cst.Name):
            (tuples if whole_tuple else lists)[id(target)] = target

    def uses():
        """(reference node, its name, is_tuple) for references that surely hold our values."""
        for table, is_tuple in ((tuples, True), (lists, False)):
            for name in list(table.values()):
                for a in scope.assignments[name.value]:
                    if a.node is not name:
                        continue
                    for ref in in_source_order(ctx, a.references):
                        if all(id(getattr(r, "node", None)) in table or within(ctx, r.node, moved) for r in ref.referents):
                            yield ref.node, name, is_tuple

    def plan():
        """One pass: the edits, the TODOs, and new names to bind."""
        edits, todos, binds = [], [], []
        for expr, name, is_tuple in uses():
            parent = ctx.parents.get(expr)
            if is_tuple:
                if isinstance(parent, cst.Assign) and parent.value is expr and len(parent.targets) == 1:
                    binds.append((parent.targets[0].target, True))
                    continue
                if not (isinstance(parent, cst.Subscript) and parent.value is expr and _int_index(parent) is not None):
                    continue
                expr = parent
                base: cst.BaseExpression = cst.Subscript(value=cst.Name(name.value), slice=parent.slice)
            else:
                base = cst.Name(name.value)
            outer, new = _tensorlist_use(ctx, expr, base)
            if outer is not None:
                edits.append(ctx.expr_edit(outer, new))
            result = outer if outer is not None and not _ends_conversion(new) else expr
            holder = ctx.parents.get(result)
            if isinstance(holder, cst.Assign) and holder.value is result and len(holder.targets) == 1:
                binds.append((holder.targets[0].target, False))
            elif outer is None and _unknown_attribute(ctx, expr):
                attr = ctx.parents.get(expr).attr.value
                todos.append(
                    ctx.todo(
                        "DM200",
                        expr,
                        f"{ctx.text(expr)} is an ndd Batch now (it was a TensorList): TensorList.{attr} has no "
                        "Batch counterpart the tool knows; rewrite it with the Batch API by hand",
                    )
                )
            elif outer is None and _handed_over(ctx, expr):
                callee = ctx.text(ctx.parents.get(ctx.parents.get(expr)).func)
                todos.append(
                    ctx.todo(
                        "DM200",
                        expr,
                        f"{ctx.text(expr)} is an ndd Batch now (it was a TensorList): check that {callee} uses the Batch API",
                    )
                )
        return edits, todos, binds

    bind(assign.targets[0].target, True)
    for peer in peers:
        holder = ctx.parents.get(peer)
        if isinstance(holder, cst.Assign) and len(holder.targets) == 1 and ctx.scopes.get(holder) is scope:
            bind(holder.targets[0].target, True)
    while True:
        before = len(tuples) + len(lists)
        edits, todos, binds = plan()
        for target, whole in binds:
            bind(target, whole)
        if len(tuples) + len(lists) == before:
            break
    # a use reachable from several tracked assignments is found once per assignment
    notes.extend({(d.line, d.col, d.message): d for d in todos}.values())
    return list({(e.start, e.end): e for e in edits}.values())


def _unnamed_output_edits(ctx: FileContext, run: cst.Call, notes: list[Diagnostic]) -> list[Edit]:
    """Outputs of a ``pipe.run()`` that is not assigned: ``pipe.run()[0].as_array()`` is
    rewritten whole; any other use of the outputs (iterated, returned, handed to a function,
    bound by ``x = pipe.run()[0]``) gets a TODO, since they are ndd Batches now."""
    parent = ctx.parents.get(run)
    if isinstance(parent, cst.Expr):
        return []  # the batch is dropped
    batch = cst.Call(func=cst.Name("next"), args=[cst.Arg(run.func.value)])
    if isinstance(parent, cst.Subscript) and parent.value is run and _int_index(parent) is not None:
        outer, new = _tensorlist_use(ctx, parent, cst.Subscript(value=batch, slice=parent.slice))
        if outer is not None and _ends_conversion(new):
            return [ctx.expr_edit(outer, new)]
    if _unread_list(ctx, run):
        return []  # `warmup = [pipe.run() for _ in range(3)]` and never read
    what = ctx.text(run.func.value)
    notes.append(
        ctx.todo(
            "DM200",
            run,
            f"the outputs of {what}.run() are ndd Batches now (they were TensorLists), used here in a way the tool "
            "cannot follow: rewrite their TensorList calls with the Batch API (as_array() -> "
            "np.asarray(ndd.as_tensor(b)), at(i) -> np.asarray(b.tensors[i]), len() -> b.batch_size)",
        )
    )
    return []


def _unread_list(ctx: FileContext, run: cst.Call) -> bool:
    """``name = [pipe.run() for ...]`` where ``name`` is never read."""
    comp = ctx.parents.get(run)
    assign = ctx.parents.get(comp)
    if not (isinstance(comp, (cst.ListComp, cst.GeneratorExp)) and comp.elt is run and isinstance(assign, cst.Assign)):
        return False
    targets = [t.target for t in assign.targets]
    scope = ctx.scopes.get(assign)
    if scope is None or not all(isinstance(t, cst.Name) for t in targets):
        return False
    return all(
        not a.references for t in targets for a in scope.assignments[t.value] if a.node is t
    )


def _ends_conversion(new: cst.BaseExpression) -> bool:
    """True when a rewritten TensorList use yields something else (an array, a tensor, a
    property), False when it is still a Batch (``x.cpu()``)."""
    return not (isinstance(new, cst.Call) and isinstance(new.func, cst.Attribute) and new.func.attr.value == "cpu")


def _unknown_attribute(ctx: FileContext, expr: cst.CSTNode) -> bool:
    parent = ctx.parents.get(expr)
    return isinstance(parent, cst.Attribute) and parent.value is expr


def _handed_over(ctx: FileContext, expr: cst.CSTNode) -> bool:
    """``expr`` is passed to a call the tool cannot see into (not print/len/str/repr)."""
    arg = ctx.parents.get(expr)
    call = ctx.parents.get(arg)
    if not (isinstance(arg, cst.Arg) and isinstance(call, cst.Call) and arg.value is expr):
        return False
    return not (isinstance(call.func, cst.Name) and call.func.value in ("print", "len", "str", "repr", "type", "id"))


def _tensorlist_use(ctx: FileContext, expr: cst.CSTNode, base: cst.BaseExpression):
    """Climb from a TensorList expression through TensorList methods; returns the outermost
    expression to replace and its Batch-API replacement (or (None, None): nothing to do)."""
    np = ctx.np
    ndd = ctx.ndd
    current: cst.CSTNode = expr
    new: cst.BaseExpression = base
    changed = False
    while True:
        parent = ctx.parents.get(current)
        if isinstance(parent, cst.Attribute) and parent.value is current:
            call = ctx.parents.get(parent)
            method = parent.attr.value
            if isinstance(call, cst.Call) and call.func is parent and method in OUTPUT_METHODS:
                args = call.args
                if method == "as_cpu" and not args:
                    new = cst.Call(func=cst.Attribute(new, cst.Name("cpu")))
                    current, changed = call, True
                    continue
                if method == "as_tensor" and not args:
                    tensor = cst.Call(func=attr_chain(f"{ndd}.as_tensor"), args=[cst.Arg(new)])
                    # Tensor.shape()/.layout() are properties of an ndd Tensor
                    attr = ctx.parents.get(call)
                    outer = ctx.parents.get(attr)
                    if (
                        isinstance(attr, cst.Attribute)
                        and attr.value is call
                        and attr.attr.value in ("shape", "layout")
                        and isinstance(outer, cst.Call)
                        and outer.func is attr
                        and not outer.args
                    ):
                        return outer, cst.Attribute(tensor, cst.Name(attr.attr.value))
                    return call, tensor
                if method == "as_array" and not args:
                    inner = cst.Call(func=attr_chain(f"{ndd}.as_tensor"), args=[cst.Arg(new)])
                    return call, cst.Call(func=attr_chain(f"{np}.asarray"), args=[cst.Arg(inner)])
                if method == "at" and len(args) == 1 and args[0].keyword is None:
                    pick = cst.Subscript(
                        value=cst.Attribute(new, cst.Name("tensors")), slice=[cst.SubscriptElement(cst.Index(args[0].value))]
                    )
                    return call, cst.Call(func=attr_chain(f"{np}.asarray"), args=[cst.Arg(pick)])
                if method in ("layout", "shape") and not args:
                    return call, cst.Attribute(new, cst.Name(method))
                if method == "is_dense_tensor" and not args:
                    # no public counterpart: a batch is dense when all its samples have one shape
                    shapes = cst.Call(cst.Name("set"), [cst.Arg(cst.Attribute(new, cst.Name("shape")))])
                    length = cst.Call(cst.Name("len"), [cst.Arg(shapes)])
                    return call, cst.Comparison(length, [cst.ComparisonTarget(cst.LessThanEqual(), cst.Integer("1"))])
            elif method == "dtype" and not isinstance(call, cst.Call):
                # TensorList.dtype is a DALIDataType; Batch.dtype an ndd DType whose type_id is one
                return parent, cst.Attribute(cst.Attribute(new, cst.Name("dtype")), cst.Name("type_id"))
            break
        if isinstance(parent, cst.Subscript) and parent.value is current and _int_index(parent) is not None:
            return parent, cst.Subscript(value=cst.Attribute(new, cst.Name("tensors")), slice=parent.slice)
        if isinstance(parent, cst.Arg):
            call = ctx.parents.get(parent)
            if isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "len" and len(call.args) == 1:
                return call, cst.Attribute(new, cst.Name("batch_size"))
        break
    return (current, new) if changed else (None, None)


# -- small helpers ----------------------------------------------------------------------------

PIPELINE_ARGS = {"batch_size", "max_batch_size", "num_threads", "device_id", "seed", "enable_conditionals"} | set(
    DROPPED_ARGS
) | set(UNSUPPORTED_ARGS)


def kwargs_of(call: cst.Call) -> dict[str, cst.Arg]:
    return {a.keyword.value: a for a in call.args if a.keyword is not None}


#: the positional parameters of ``Pipeline.__init__`` (DALI 2.4), in order
PIPELINE_POSITIONAL = (
    "batch_size",
    "num_threads",
    "device_id",
    "seed",
    "exec_pipelined",
    "prefetch_queue_depth",
    "exec_async",
    "bytes_per_sample",
    "set_affinity",
    "max_streams",
    "default_cuda_stream_priority",
)
PIPELINE_CLASSES = {"nvidia.dali.Pipeline", "nvidia.dali.pipeline.Pipeline"}


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


def check_pipeline_args(kwargs: dict[str, cst.Arg], where: str, *, checkpoints: bool = False) -> list[str]:
    """Reasons the pipeline arguments give to refuse; ``checkpoints``: the front end migrates
    ``enable_checkpointing`` and ``checkpoint`` itself (``_handles``)."""
    reasons = []
    for name in kwargs:
        if checkpoints and name in CHECKPOINT_ARGS:
            continue
        if name in UNSUPPORTED_ARGS:
            reasons.append(f"{name} ({where}): {UNSUPPORTED_ARGS[name]}")
    return reasons


def is_unset(expr: cst.BaseExpression) -> bool:
    """``None`` or ``-1``: how pipeline arguments say "not given"."""
    return _is_literal(expr, (None, -1)) or (
        isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus) and _is_literal(expr.expression, (1,))
    )


def _is_literal(expr: cst.BaseExpression, values: tuple) -> bool:
    if isinstance(expr, cst.Integer):
        return int(expr.value) in values
    if isinstance(expr, cst.Name) and expr.value == "None":
        return None in values
    return False


def _uses_gpu(ctx: FileContext, fn: cst.FunctionDef) -> bool:
    for n in walk(fn.body):
        if isinstance(n, cst.Arg) and n.keyword is not None and n.keyword.value == "device":
            if not (isinstance(n.value, cst.SimpleString) and n.value.evaluated_value == "cpu"):
                return True
        if isinstance(n, cst.Attribute) and n.attr.value == "gpu":
            return True
    return False


def _has_random(ctx: FileContext, fn: cst.FunctionDef) -> bool:
    for n in walk(fn.body):
        if isinstance(n, cst.Call):
            op = ctx.fn_op(n.func)
            if op is not None and op.target.is_random:
                return True
    return False


def _mentions_dali(ctx: FileContext, stmt: cst.CSTNode, nodes: set[str]) -> bool:
    for n in walk(stmt):
        if isinstance(n, (cst.Name, cst.Attribute)) and (ctx.is_fn_ref(n) or (isinstance(n, cst.Name) and n.value in nodes)):
            return True
        q = ctx.qualname(n) if isinstance(n, (cst.Name, cst.Attribute)) else None
        if q and q.startswith("nvidia.dali"):
            return True
    return False


def param_names(fn: cst.FunctionDef) -> set[str]:
    p = fn.params
    return {x.name.value for x in [*p.posonly_params, *p.params, *p.kwonly_params]}


def _names_in(fn: cst.FunctionDef) -> set[str]:
    return {n.value for n in walk(fn) if isinstance(n, cst.Name)}


def is_docstring(stmt: cst.BaseStatement) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def output_values(value: cst.BaseExpression | None) -> list[cst.BaseExpression]:
    if value is None:
        return []
    if isinstance(value, (cst.Tuple, cst.List)):
        if any(isinstance(e, cst.StarredElement) for e in value.elements):
            return []
        return [e.value for e in value.elements]
    if isinstance(value, (cst.Dict, cst.DictComp, cst.ListComp, cst.GeneratorExp, cst.SimpleString)):
        return []
    return [value]


def _output_names(ctx: FileContext, outputs: list[cst.BaseExpression]) -> list[str]:
    """Names for the docstring: ``labels.gpu()``, ``labels[0]`` and ``fn.flip(labels)`` are
    still "labels"; anything else is "output"."""
    names = []
    for v in outputs:
        while True:
            if isinstance(v, cst.Call) and ctx.is_fn_ref(v.func) and v.args and v.args[0].keyword is None:
                v = v.args[0].value  # fn.resize(images, ...) yields resized images
            elif isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and not ctx.is_fn_ref(v.func):
                v = v.func.value
            elif isinstance(v, (cst.Attribute, cst.Subscript)):
                v = v.value
            else:
                break
        names.append(v.value if isinstance(v, cst.Name) else "output")
    # two outputs derived from one name (`volumes[0], fn.reductions.sum(volumes)`) tell nothing apart
    return [n if names.count(n) == 1 or n == "output" else "output" for n in names]


def _loop_target(use: ReaderUse, batch_size: cst.BaseExpression) -> tuple[cst.BaseAssignTargetExpression, cst.BaseExpression]:
    """How ``for ... in reader.next_epoch(...)`` unpacks a batch like the old code unpacked the
    reader node, and an expression for the size of the current batch."""
    target = use.target
    op = use.op.target
    if isinstance(target, (cst.Tuple, cst.List)):
        elements = [e.value for e in target.elements]
        if not all(isinstance(e, cst.Name) for e in elements):
            raise Refused("the reader's outputs are not unpacked into plain names")
        first = elements[0]
        bare = {"lpar": [], "rpar": []} if len(elements) > 1 else {}
        return cst.Tuple([cst.Element(e) for e in elements], **bare), cst.Attribute(first, cst.Name("batch_size"))
    if not isinstance(target, cst.Name):
        raise Refused("the reader's outputs are not assigned to plain names")
    if op.fn_path == "readers.tfrecord":
        # ndd's TFRecord reader yields a dict keyed by feature, as the pipeline node did
        return target, batch_size
    if op.num_outputs == 1:
        return cst.Tuple([cst.Element(target)]), cst.Attribute(target, cst.Name("batch_size"))
    if op.num_outputs and op.num_outputs > 1:
        first = cst.Subscript(value=target, slice=[cst.SubscriptElement(cst.Index(cst.Integer("0")))])
        return target, cst.Attribute(first, cst.Name("batch_size"))
    raise Refused(f"the number of outputs of {op.fn_path} depends on its arguments: unpack them into names")


def _int_index(sub: cst.Subscript) -> cst.BaseExpression | None:
    if len(sub.slice) == 1 and isinstance(sub.slice[0].slice, cst.Index):
        v = sub.slice[0].slice.value
        if isinstance(v, (cst.Integer, cst.Name, cst.UnaryOperation, cst.BinaryOperation)):
            return v
    return None


def removed_stmt(ctx: FileContext, stmt: cst.SimpleStatementLine) -> Edit:
    """Delete a statement but keep the comments above it; an emptied block gets ``pass``."""
    block = ctx.parents.get(stmt)
    siblings = getattr(block, "body", ())
    only_builds = all(
        isinstance(s, cst.SimpleStatementLine)
        and len(s.body) == 1
        and isinstance(s.body[0], cst.Expr)
        and isinstance(s.body[0].value, cst.Call)
        and isinstance(s.body[0].value.func, cst.Attribute)
        and s.body[0].value.func.attr.value == "build"
        for s in siblings
    )
    if only_builds and isinstance(block, cst.IndentedBlock) and siblings[-1] is stmt:
        return ctx.stmt_edit(stmt, [stmt.with_changes(body=[cst.Pass()])])
    kept = ctx.leading_comments(stmt)
    if isinstance(stmt, cst.ClassDef):
        kept = "".join(line for line in kept.splitlines(keepends=True) if line.strip())
    return Edit(*ctx.stmt_span(stmt), kept)
