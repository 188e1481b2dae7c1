"""DM200 pipeline-def: a ``@pipeline_def`` function and its use sites become a dynamic-mode
generator that yields what ``pipe.run()`` returned.

Before::

    @pipeline_def(batch_size=64, num_threads=4, device_id=0, seed=12)
    def train_pipe(data_dir):
        jpegs, labels = fn.readers.file(file_root=data_dir, random_shuffle=True, name="Reader")
        images = fn.decoders.image(jpegs, device="mixed")
        mirror = fn.random.coin_flip(probability=0.5)
        images = fn.crop_mirror_normalize(images, crop=(224, 224), mirror=mirror)
        return images, labels

    pipe = train_pipe(data_dir)
    pipe.build()
    for step in range(1000):
        images, labels = pipe.run()
        train_step(images.as_tensor(), labels.as_tensor())

After::

    def train_pipe(data_dir, *, batch_size=64, seed=12):
        \"\"\"Yields (images, labels) batches epoch after epoch, without end, as Pipeline.run() did.\"\"\"
        reader = ndd.readers.File(file_root=data_dir, random_shuffle=True, seed=seed)
        rng = ndd.random.RNG(seed=seed)
        while True:
            for jpegs, labels in reader.next_epoch(batch_size=batch_size):
                images = ndd.decoders.image(jpegs, device="gpu")
                mirror = ndd.random.coin_flip(batch_size=jpegs.batch_size, probability=0.5, rng=rng)
                images = ndd.crop_mirror_normalize(images, crop=(224, 224), mirror=mirror)
                yield images, labels

    ndd.set_num_threads(4)
    pipe = train_pipe(data_dir)
    for step in range(1000):
        images, labels = next(pipe)
        train_step(ndd.as_tensor(images), ndd.as_tensor(labels))

The reader is built once, outside the per-batch code, and epochs are chained without end, which
is exactly the stream ``pipe.run()`` produced (dali-semantics section 3). ``batch_size`` and
``seed`` become keyword-only parameters with the decorator's values as defaults, so call sites
that passed them keep working; ``num_threads`` becomes one ``ndd.set_num_threads`` before the
pipeline is created. Outputs read through the TensorList API are rewritten to the Batch API.

The whole pipeline (definition and use sites) is one fix. When anything in it is beyond what
this rule can prove equivalent (several readers, ``external_source``, conditionals on data,
``pipe`` passed to other code, ...), nothing is changed: the definition gets a TODO that lists
every reason, and no other rule touches the file.

Safety: safe. Random values differ from the old pipeline's (hidden per-operator seeds of pipeline
mode cannot be reproduced by readable code); ``dali-migrate verify`` aligns the random streams to
prove that everything else is equal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from dali_migrate.catalog import OpInfo
from dali_migrate.context import FileContext, attr_chain
from dali_migrate.fixes import TODO_PREFIX, Diagnostic, Edit
from dali_migrate.rules import FileState, Rule

from ._local import LocalEnv, append_arg, collect_nodes, kwarg, lower, remove_args
from .fn_to_ndd import FnToNdd
from .mixed_device import MixedDevice
from .node_indexing import NodeIndexing
from .random_ops import RandomOps

PIPELINE_DEFS = {
    "nvidia.dali.pipeline_def",
    "nvidia.dali.pipeline.pipeline_def",
    "nvidia.dali.pipeline.experimental.pipeline_def",
    "nvidia.dali.experimental.pipeline_def",
}

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
}
#: pipeline arguments whose behaviour this rule cannot carry over yet
UNSUPPORTED_ARGS = {
    "enable_checkpointing": "checkpointing (ndd.checkpoint.Checkpoint) is not migrated yet",
    "checkpoint": "checkpointing (ndd.checkpoint.Checkpoint) is not migrated yet",
    "debug": "debug-mode pipelines are not migrated yet",
}
#: what TensorList methods become on a Batch: (kind, template)
OUTPUT_METHODS = {"as_array", "as_tensor", "as_cpu", "at", "layout", "shape"}


class Refused(Exception):
    """The pipeline cannot be migrated safely; the message says why."""


@dataclass
class Instance:
    """``pipe = train_pipe(...)``: one instantiation and what is done with ``pipe``."""

    stmt: cst.SimpleStatementLine
    assign: cst.Assign
    call: cst.Call
    kwargs: dict[str, cst.Arg]
    builds: list[cst.SimpleStatementLine] = field(default_factory=list)
    runs: list[cst.Call] = field(default_factory=list)
    device_todo: str | None = None


@dataclass
class Plan:
    fn: cst.FunctionDef
    decorator: cst.Decorator
    dec_kwargs: dict[str, cst.Arg]
    reader_stmt: cst.SimpleStatementLine
    reader_call: cst.Call
    reader_op: OpInfo
    reader_target: cst.BaseAssignTargetExpression
    ret: cst.SimpleStatementLine
    instances: list[Instance]
    seed_source: str | None  # "decorator", "call" or None
    params: set[str]  # the pipeline function's own parameters


class PipelineDef(Rule):
    id = "DM200"
    name = "pipeline-def"
    summary = "@pipeline_def function and its build/run use sites become a dynamic-mode generator"
    structural = True

    def run(self, state: FileState) -> None:
        ctx = state.ctx
        for fn in _function_defs(ctx.module):
            dec = _pipeline_decorator(ctx, fn)
            if dec is None:
                continue
            state.claimed.append(fn)
            try:
                plan = self._analyse(ctx, fn, dec)
                edits, notes, included = self._rewrite(ctx, plan)
            except Refused as why:
                state.refused_pipeline = True
                state.diagnostics.append(ctx.todo(self.id, fn, f"pipeline not migrated: {why}"))
                continue
            for inst in plan.instances:
                state.claimed.append(inst.stmt)
            fix = ctx.make_fix(
                self.id,
                fn,
                edits,
                f"migrate pipeline {fn.name.value} and its use sites to dynamic mode",
                includes=included,
            )
            state.fixes.append(fix)
            state.structural.append(fix.id)
            state.diagnostics.extend(notes)

    # -- analysis ----------------------------------------------------------------------------
    def _analyse(self, ctx: FileContext, fn: cst.FunctionDef, dec: cst.Decorator) -> Plan:
        reasons: list[str] = []
        if any(d is not dec for d in fn.decorators):
            reasons.append("it has other decorators")
        if isinstance(ctx.parents.get(ctx.parents.get(fn)), cst.ClassDef):
            reasons.append("@pipeline_def on a method is not migrated yet")
        if fn.asynchronous is not None:
            reasons.append("async pipeline function")
        dec_kwargs = _kwargs(dec.decorator) if isinstance(dec.decorator, cst.Call) else {}
        if isinstance(dec.decorator, cst.Call) and any(
            a.keyword is None for a in dec.decorator.args
        ):
            reasons.append("positional or ** arguments to @pipeline_def")
        if fn.params.star_kwarg is not None:
            reasons.append("the pipeline function takes **kwargs")
        reasons += _check_pipeline_args(dec_kwargs, "decorator")
        if _truthy(dec_kwargs.get("enable_conditionals")) and _has_branches(fn):
            reasons.append("enable_conditionals with if/while on data is not migrated yet")

        readers: list[tuple[cst.SimpleStatementLine, cst.Assign, cst.Call, OpInfo]] = []
        returns: list[cst.Return] = []
        for node in _walk(fn.body):
            if isinstance(node, cst.Call):
                op = ctx.fn_op(node.func)
                if op is not None and op.target.is_reader:
                    stmt = ctx.parents.get(ctx.parents.get(node))
                    assign = ctx.parents.get(node)
                    if (
                        isinstance(assign, cst.Assign)
                        and isinstance(stmt, cst.SimpleStatementLine)
                        and ctx.parents.get(ctx.parents.get(stmt)) is fn
                        and len(assign.targets) == 1
                    ):
                        readers.append((stmt, assign, node, op))
                    else:
                        reasons.append(f"reader {ctx.text(node.func)} is not a plain assignment in the function body")
                        readers.append((stmt, assign, node, op))
                elif op is not None and op.target.ndd_path is None:
                    reasons.append(f"{ctx.text(node.func)} has no dynamic-mode counterpart")
                elif op is None and ctx.is_fn_ref(node.func):
                    reasons.append(f"{ctx.text(node.func)} is not a known DALI operator")
            elif isinstance(node, cst.Return):
                returns.append(node)
            elif isinstance(node, (cst.Yield, cst.Await)):
                reasons.append("the pipeline function yields or awaits")
            elif isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                reasons.append("nested function or class definitions in the pipeline body")
            elif isinstance(node, cst.Attribute) and node.attr.value == "gpu" and isinstance(
                ctx.parents.get(node), cst.Call
            ):
                pass  # .gpu() keeps its meaning on a Batch
        if not readers:
            reasons.append("it has no reader (external sources are not migrated yet)")
        elif len(readers) > 1:
            reasons.append("it has several readers (not migrated yet)")
        body = list(fn.body.body)
        last = body[-1] if body else None
        ret_ok = (
            isinstance(last, cst.SimpleStatementLine)
            and len(last.body) == 1
            and isinstance(last.body[0], cst.Return)
            and len(returns) == 1
            and returns[0] is last.body[0]
        )
        if not ret_ok:
            reasons.append("its outputs are not returned by a single return at the end")
        elif not _output_values(last.body[0].value):
            reasons.append("its return value is not a node or a tuple/list of nodes")

        instances = self._instances(ctx, fn, reasons)
        seed_source = "decorator" if "seed" in dec_kwargs else None
        if seed_source is None and any("seed" in i.kwargs for i in instances):
            if all("seed" in i.kwargs for i in instances):
                seed_source = "call"
            else:
                reasons.append("seed= given at some call sites only")
        if _uses_gpu(ctx, fn):
            for inst in instances:
                dev = inst.kwargs.get("device_id", dec_kwargs.get("device_id"))
                if dev is not None and not _is_literal(dev.value, (0, None)):
                    inst.device_todo = (
                        f"device_id={ctx.text(dev.value)} was dropped: dynamic mode runs GPU operators on the "
                        f"current CUDA device; make it {ctx.text(dev.value)} before iterating "
                        "(torch.cuda.set_device or ndd.Device)"
                    )
        if reasons:
            raise Refused("; ".join(dict.fromkeys(reasons)))
        stmt, assign, call, op = readers[0]
        return Plan(
            fn, dec, dec_kwargs, stmt, call, op, assign.targets[0].target, last, instances, seed_source, _param_names(fn)
        )

    def _instances(self, ctx: FileContext, fn: cst.FunctionDef, reasons: list[str]) -> list[Instance]:
        scope = ctx.scopes.get(fn)
        instances: list[Instance] = []
        refs = [r for a in scope.assignments[fn.name.value] if a.node is fn for r in a.references] if scope else []
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
                    "(only `pipe = {0}(...)` is migrated)".format(fn.name.value)
                )
                continue
            if any(a.star for a in call.args):
                reasons.append(f"*args/**kwargs at the call on line {ctx.line_of(call)}")
                continue
            # keyword arguments naming the function's own parameters go to the function
            kwargs = {k: v for k, v in _kwargs(call).items() if k not in _param_names(fn)}
            reasons += _check_pipeline_args(kwargs, f"call on line {ctx.line_of(call)}")
            inst = Instance(stmt, assign, call, kwargs)
            self._uses(ctx, inst, reasons)
            instances.append(inst)
        if not refs:
            reasons.append("it is not instantiated in this file (cross-module use is not migrated yet)")
        return instances

    def _uses(self, ctx: FileContext, inst: Instance, reasons: list[str]) -> None:
        name = inst.assign.targets[0].target
        scope = ctx.scopes.get(inst.assign)
        assignments = list(scope.assignments[name.value]) if scope else []
        if len(assignments) != 1:
            reasons.append(f"`{name.value}` is assigned more than once")
            return
        for ref in assignments[0].references:
            attr = ctx.parents.get(ref.node)
            call = ctx.parents.get(attr)
            line = ctx.line_of(ref.node)
            if not (isinstance(attr, cst.Attribute) and isinstance(call, cst.Call) and call.func is attr):
                reasons.append(f"`{name.value}` is passed on or stored at line {line}")
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
            reasons.append(f"`{name.value}.{method}(...)` at line {line} is not migrated yet")

    # -- rewriting ---------------------------------------------------------------------------
    def _rewrite(self, ctx: FileContext, plan: Plan) -> tuple[list[Edit], list[Diagnostic], list[str]]:
        notes: list[Diagnostic] = []
        fn = plan.fn
        taken = _names_in(fn)
        reader_var = _fresh("reader", taken)
        rng_var = _fresh("rng", taken)
        ndd = ctx.ndd

        # parameters: batch_size and seed become keyword-only parameters
        params = fn.params
        kwonly = list(params.kwonly_params)
        existing = {p.name.value for p in list(params.params) + kwonly + list(params.posonly_params)}
        bs_arg = plan.dec_kwargs.get("batch_size") or plan.dec_kwargs.get("max_batch_size")
        for pname, default in (("batch_size", bs_arg), ("seed", plan.dec_kwargs.get("seed") if plan.seed_source else None)):
            if pname == "seed" and plan.seed_source is None:
                continue
            if pname in existing:
                raise Refused(f"the pipeline function already has a parameter named {pname}")
            kwonly.append(
                cst.Param(
                    cst.Name(pname),
                    default=default.value if default is not None else None,
                    equal=_eq() if default is not None else cst.MaybeSentinel.DEFAULT,
                )
            )
        star = params.star_arg if params.star_arg is not cst.MaybeSentinel.DEFAULT else cst.ParamStar()
        new_params = params.with_changes(kwonly_params=kwonly, star_arg=star)
        if bs_arg is None and not all("batch_size" in i.kwargs or "max_batch_size" in i.kwargs for i in plan.instances):
            raise Refused("batch_size is given neither at the decorator nor at every call site")

        # the reader, built once
        reader_kwargs = remove_args(list(plan.reader_call.args), {"name"})
        shuffles = any(
            a.keyword and a.keyword.value in ("random_shuffle", "shuffle_after_epoch") and _truthy(a) for a in reader_kwargs
        )
        has_seed = any(a.keyword and a.keyword.value == "seed" for a in reader_kwargs)
        if shuffles and not has_seed:
            if plan.seed_source:
                reader_kwargs = append_arg(reader_kwargs, kwarg("seed", cst.Name("seed")))
                notes.append(
                    ctx.info(
                        self.id,
                        plan.reader_call,
                        "the reader now shuffles with seed=seed; pipeline mode derived its seed from the "
                        "pipeline seed, so the shuffle order differs from the old pipeline's (each epoch "
                        "holds the same samples)",
                    )
                )
            else:
                notes.append(
                    ctx.info(
                        self.id,
                        plan.reader_call,
                        "the pipeline had no seed, so its shuffle order was random each run; the ndd "
                        "reader without seed= shuffles the same way every run",
                    )
                )
        reader_cls = attr_chain(f"{ndd}.{plan.reader_op.target.ndd_path}")
        reader_stmt = plan.reader_stmt.with_changes(
            body=[
                cst.Assign(
                    targets=[cst.AssignTarget(cst.Name(reader_var))],
                    value=plan.reader_call.with_changes(func=reader_cls, args=reader_kwargs),
                )
            ]
        )

        # how the loop unpacks each batch, and where the batch size is read
        target, batch_expr = _loop_target(ctx, plan)
        nodes = collect_nodes(ctx, fn)
        if isinstance(target, cst.Name) and plan.reader_op.target.num_outputs == 1:
            nodes.add(target.value)
        if isinstance(plan.reader_target, cst.Name) and plan.reader_op.target.num_outputs == 1:
            nodes.add(plan.reader_target.value)
        env = LocalEnv(batch_size=batch_expr, rng=cst.Name(rng_var), nodes=nodes)
        local_rules = [FnToNdd(), MixedDevice(), NodeIndexing(), RandomOps()]

        body = list(fn.body.body)
        docstring = body[0] if body and _is_docstring(body[0]) else None
        if docstring is not None:
            body = body[1:]
        idx = body.index(plan.reader_stmt)
        prefix, loop_body = body[:idx], body[idx + 1 :]
        # setup code before the reader stays before it, unless it builds graph nodes
        setup = [s for s in prefix if not _mentions_dali(ctx, s, nodes)]
        loop_body = [s for s in prefix if _mentions_dali(ctx, s, nodes)] + loop_body
        lowered = []
        fired: set[str] = set()
        for s in loop_body:
            if s is plan.ret:
                values = _output_values(plan.ret.body[0].value)
                new_values = []
                for v in values:
                    nv, diags = lower(ctx, v, env, local_rules, fired)
                    if diags:
                        raise Refused("; ".join(d.message for d in diags))
                    new_values.append(nv)
                yielded = cst.Tuple([cst.Element(v) for v in new_values], lpar=[], rpar=[]) if len(new_values) > 1 else cst.Tuple([cst.Element(new_values[0])])
                lowered.append(plan.ret.with_changes(body=[cst.Expr(cst.Yield(yielded))]))
                continue
            ns, diags = lower(ctx, s, env, local_rules, fired)
            if diags:
                raise Refused("; ".join(d.message for d in diags))
            lowered.append(ns)
        random_used = _has_random(ctx, fn)

        next_epoch = cst.Call(
            func=cst.Attribute(cst.Name(reader_var), cst.Name("next_epoch")),
            args=[kwarg("batch_size", cst.Name("batch_size"))],
        )
        for_loop = cst.For(target=target, iter=next_epoch, body=cst.IndentedBlock(body=lowered))
        while_loop = cst.While(test=cst.Name("True"), body=cst.IndentedBlock(body=[for_loop]))
        new_body: list[cst.BaseStatement] = []
        if docstring is not None:
            new_body.append(docstring)
        else:
            names = ", ".join(_output_names(ctx, plan))
            new_body.append(
                cst.SimpleStatementLine(
                    [cst.Expr(cst.SimpleString(f'"""Yields ({names}) batches epoch after epoch, without end, as Pipeline.run() did."""'))]
                )
            )
        new_body += setup
        dropped = _dropped_comments(ctx, plan)
        reader_stmt = reader_stmt.with_changes(leading_lines=list(reader_stmt.leading_lines) + dropped)
        new_body.append(reader_stmt)
        if random_used:
            rng_args = [kwarg("seed", cst.Name("seed"))] if plan.seed_source else []
            new_body.append(
                cst.SimpleStatementLine(
                    [
                        cst.Assign(
                            targets=[cst.AssignTarget(cst.Name(rng_var))],
                            value=cst.Call(func=attr_chain(f"{ndd}.random.RNG"), args=rng_args),
                        )
                    ]
                )
            )
            notes.append(
                ctx.info(
                    self.id,
                    fn,
                    "random operators now draw from an ndd.random.RNG: their values differ from the "
                    "old pipeline's (dali-migrate verify aligns the streams to compare the rest)",
                )
            )
        new_body.append(while_loop)
        new_fn = fn.with_changes(
            decorators=[], params=new_params, body=fn.body.with_changes(body=new_body)
        )
        if fn.decorators:
            # comments above the decorator stay above the function
            new_fn = new_fn.with_changes(
                leading_lines=list(fn.leading_lines) + list(fn.decorators[0].leading_lines)
            )
        edits = [ctx.stmt_edit(fn, [new_fn])]
        edits += self._use_site_edits(ctx, plan, notes)
        return edits, notes, sorted(fired)

    def _use_site_edits(self, ctx: FileContext, plan: Plan, notes: list[Diagnostic]) -> list[Edit]:
        edits: list[Edit] = []
        ndd = ctx.ndd
        num_threads = plan.dec_kwargs.get("num_threads")
        for inst in plan.instances:
            threads = inst.kwargs.get("num_threads", num_threads)
            keep = remove_args(list(inst.call.args), _PIPELINE_ARGS - {"batch_size", "seed"} - set(plan.params))
            keep = [
                a.with_changes(keyword=cst.Name("batch_size")) if a.keyword and a.keyword.value == "max_batch_size" else a
                for a in keep
            ]
            new_call = inst.call.with_changes(args=keep)
            new_stmt = inst.stmt.with_changes(body=[inst.assign.with_changes(value=new_call)])
            stmts: list[cst.BaseStatement] = []
            todo_lines = []
            if inst.device_todo:
                todo_lines.append(cst.EmptyLine(comment=cst.Comment(f"{TODO_PREFIX} {self.id}: {inst.device_todo}")))
                notes.append(Diagnostic(self.id, inst.device_todo, ctx.line_of(inst.stmt), 0, "todo"))
            if threads is not None:
                stmts.append(
                    cst.SimpleStatementLine(
                        [cst.Expr(cst.Call(func=attr_chain(f"{ndd}.set_num_threads"), args=[cst.Arg(threads.value)]))],
                        leading_lines=inst.stmt.leading_lines,
                    )
                )
                new_stmt = new_stmt.with_changes(leading_lines=todo_lines)
            else:
                new_stmt = new_stmt.with_changes(leading_lines=list(inst.stmt.leading_lines) + todo_lines)
            stmts.append(new_stmt)
            edits.append(ctx.stmt_edit(inst.stmt, stmts))
            for b in inst.builds:
                edits.append(_removed(ctx, b))
            for run in inst.runs:
                pipe = run.func.value
                edits.append(ctx.expr_edit(run, cst.Call(func=cst.Name("next"), args=[cst.Arg(pipe)])))
                edits += _output_edits(ctx, run, notes)
        return edits


# -- outputs of pipe.run() --------------------------------------------------------------------


def _output_edits(ctx: FileContext, run: cst.Call, notes: list[Diagnostic]) -> list[Edit]:
    """Rewrite TensorList API uses of the names bound by ``a, b = pipe.run()`` /
    ``out = pipe.run()`` in the same scope, following ``a, b = out``, ``x = a`` and
    ``a = a.as_cpu()``. A TensorList handed to other code (``train_step(images)``) cannot be
    followed: it gets a TODO.

    Scope analysis is not flow-sensitive: a use is rewritten only when every assignment it may
    refer to holds a TensorList, so the set of such assignments is grown to a fixed point first.
    """
    assign = ctx.parents.get(run)
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
        return []
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
                    for ref in a.references:
                        if all(id(getattr(r, "node", None)) in table for r in ref.referents):
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


def _ends_conversion(new: cst.BaseExpression) -> bool:
    """True when a rewritten TensorList use yields something else (an array, a tensor, a
    property), False when it is still a Batch (``x.cpu()``)."""
    return not (isinstance(new, cst.Call) and isinstance(new.func, cst.Attribute) and new.func.attr.value == "cpu")


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

_PIPELINE_ARGS = {"batch_size", "max_batch_size", "num_threads", "device_id", "seed", "enable_conditionals"} | set(
    DROPPED_ARGS
) | set(UNSUPPORTED_ARGS)


def _function_defs(module: cst.Module) -> list[cst.FunctionDef]:
    out: list[cst.FunctionDef] = []

    class V(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            out.append(node)

    module.visit(V())
    return out


def _pipeline_decorator(ctx: FileContext, fn: cst.FunctionDef) -> cst.Decorator | None:
    for d in fn.decorators:
        expr = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
        if ctx.qualname(expr) in PIPELINE_DEFS:
            return d
    return None


def _kwargs(call: cst.Call) -> dict[str, cst.Arg]:
    return {a.keyword.value: a for a in call.args if a.keyword is not None}


def _check_pipeline_args(kwargs: dict[str, cst.Arg], where: str) -> list[str]:
    reasons = []
    for name in kwargs:
        if name in UNSUPPORTED_ARGS:
            reasons.append(f"{name} ({where}): {UNSUPPORTED_ARGS[name]}")
    return reasons


def _truthy(arg: cst.Arg | None) -> bool:
    if arg is None:
        return False
    v = arg.value
    return not (isinstance(v, cst.Name) and v.value in ("False", "None")) and not (
        isinstance(v, cst.Integer) and v.value == "0"
    )


def _is_literal(expr: cst.BaseExpression, values: tuple) -> bool:
    if isinstance(expr, cst.Integer):
        return int(expr.value) in values
    if isinstance(expr, cst.Name) and expr.value == "None":
        return None in values
    return False


def _has_branches(fn: cst.FunctionDef) -> bool:
    return any(isinstance(n, (cst.If, cst.While, cst.IfExp)) for n in _walk(fn.body))


def _walk(node: cst.CSTNode):
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def _uses_gpu(ctx: FileContext, fn: cst.FunctionDef) -> bool:
    for n in _walk(fn.body):
        if isinstance(n, cst.Arg) and n.keyword is not None and n.keyword.value == "device":
            if not (isinstance(n.value, cst.SimpleString) and n.value.evaluated_value == "cpu"):
                return True
        if isinstance(n, cst.Attribute) and n.attr.value == "gpu":
            return True
    return False


def _has_random(ctx: FileContext, fn: cst.FunctionDef) -> bool:
    for n in _walk(fn.body):
        if isinstance(n, cst.Call):
            op = ctx.fn_op(n.func)
            if op is not None and op.target.is_random:
                return True
    return False


def _mentions_dali(ctx: FileContext, stmt: cst.CSTNode, nodes: set[str]) -> bool:
    for n in _walk(stmt):
        if isinstance(n, (cst.Name, cst.Attribute)) and (ctx.is_fn_ref(n) or (isinstance(n, cst.Name) and n.value in nodes)):
            return True
        q = ctx.qualname(n) if isinstance(n, (cst.Name, cst.Attribute)) else None
        if q and q.startswith("nvidia.dali"):
            return True
    return False


def _param_names(fn: cst.FunctionDef) -> set[str]:
    p = fn.params
    return {x.name.value for x in [*p.posonly_params, *p.params, *p.kwonly_params]}


def _names_in(fn: cst.FunctionDef) -> set[str]:
    return {n.value for n in _walk(fn) if isinstance(n, cst.Name)}


def _fresh(base: str, taken: set[str]) -> str:
    name = base
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def _eq() -> cst.AssignEqual:
    return cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _output_values(value: cst.BaseExpression | None) -> list[cst.BaseExpression]:
    if value is None:
        return []
    if isinstance(value, (cst.Tuple, cst.List)):
        if any(isinstance(e, cst.StarredElement) for e in value.elements):
            return []
        return [e.value for e in value.elements]
    if isinstance(value, (cst.Dict, cst.DictComp, cst.ListComp, cst.GeneratorExp, cst.SimpleString)):
        return []
    return [value]


def _output_names(ctx: FileContext, plan: Plan) -> list[str]:
    """Names for the docstring: ``labels.gpu()``, ``labels[0]`` and ``fn.flip(labels)`` are
    still "labels"; anything else is "output"."""
    names = []
    for v in _output_values(plan.ret.body[0].value):
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
    return names


def _loop_target(ctx: FileContext, plan: Plan) -> tuple[cst.BaseAssignTargetExpression, cst.BaseExpression]:
    target = plan.reader_target
    op = plan.reader_op.target
    if isinstance(target, (cst.Tuple, cst.List)):
        elements = [e.value for e in target.elements]
        if not all(isinstance(e, cst.Name) for e in elements):
            raise Refused("the reader's outputs are not unpacked into plain names")
        first = elements[0]
        return cst.Tuple([cst.Element(e) for e in elements], lpar=[], rpar=[]), cst.Attribute(first, cst.Name("batch_size"))
    if not isinstance(target, cst.Name):
        raise Refused("the reader's outputs are not assigned to plain names")
    if op.fn_path == "readers.tfrecord":
        # ndd's TFRecord reader yields a dict keyed by feature, as the pipeline node did
        return target, cst.Name("batch_size")
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


def _removed(ctx: FileContext, stmt: cst.SimpleStatementLine) -> Edit:
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
    return Edit(*ctx.stmt_span(stmt), ctx.leading_comments(stmt))


def _dropped_comments(ctx: FileContext, plan: Plan) -> list[cst.EmptyLine]:
    lines = []
    seen = set()
    for kw in [plan.dec_kwargs] + [i.kwargs for i in plan.instances]:
        for name, arg in kw.items():
            if name in DROPPED_ARGS and name not in seen:
                seen.add(name)
                lines.append(
                    cst.EmptyLine(comment=cst.Comment(f"# dali-migrate: dropped {name}={ctx.text(arg.value)}: {DROPPED_ARGS[name]}"))
                )
            elif name == "enable_conditionals" and name not in seen:
                seen.add(name)
                lines.append(
                    cst.EmptyLine(comment=cst.Comment("# dali-migrate: dropped enable_conditionals: the pipeline has no data-dependent branch"))
                )
    return lines
