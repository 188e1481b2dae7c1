"""DM201 pipeline-object: a ``Pipeline(...)`` object whose graph is defined in a ``with pipe:``
block becomes a dynamic-mode generator defined in place of that block.

Before (``fixtures/DM201/with_block.in.py``)::

    import nvidia.dali.fn as fn
    from nvidia.dali import Pipeline, types


    def show(data_dir):
        # the training pipeline
        pipe = Pipeline(batch_size=32, num_threads=4, device_id=0, seed=7, prefetch_queue_depth=3)
        with pipe:
            jpegs, labels = fn.readers.file(file_root=data_dir, random_shuffle=True)
            images = fn.decoders.image(jpegs, device="mixed", output_type=types.RGB)
            flip = fn.random.coin_flip(probability=0.5)
            images = fn.flip(images, horizontal=flip)
            pipe.set_outputs(images, labels)
        pipe.build()
        for _ in range(3):
            images, labels = pipe.run()
            print(images.as_cpu().at(0).shape, labels.as_array())

After (``fixtures/DM201/with_block.out.py``)::

    import numpy as np
    import nvidia.dali.experimental.dynamic as ndd
    from nvidia.dali import types


    def show(data_dir):
        # the training pipeline
        ndd.set_num_threads(4)

        def pipe_batches():
            \"\"\"Yields (images, labels) batches epoch after epoch, without end, as Pipeline.run() did.\"\"\"
            # dali-migrate: dropped prefetch_queue_depth=3: dynamic mode runs each operator when it is
            # called; there is no prefetch queue
            reader = ndd.readers.File(file_root=data_dir, random_shuffle=True, seed=7)
            rng = ndd.random.RNG(seed=7)
            # capture=True: runs the loop as one prebuilt graph; one such loop can be active at a time
            while True:
                for jpegs, labels in reader.next_epoch(batch_size=32, capture=True):
                    images = ndd.decoders.image(jpegs, device="gpu", output_type=types.RGB)
                    flip = ndd.random.coin_flip(batch_size=jpegs.batch_size, probability=0.5, rng=rng)
                    images = ndd.flip(images, horizontal=flip)
                    yield images, labels

        pipe = pipe_batches()
        for _ in range(3):
            images, labels = next(pipe)
            print(np.asarray(images.cpu().tensors[0]).shape, np.asarray(ndd.as_tensor(labels)))

The graph code runs when the first batch is asked for, not when the block ran. Plain code of the
block whose effect is seen outside it (``n_batches = src.n // 2`` read after the block,
``self.length = ...``, ``log.append(...)``) stays where the block stood, above the generator,
with the statements it reads names from; names the generator reads that the code around rebinds
after the block or in a loop around it become its parameters, passed where it is made
(``block_effects``). ``batch_size`` and
``seed`` are the constructor's expressions; ``num_threads`` becomes one ``ndd.set_num_threads``.
Everything the shared back end of DM200 does applies (readers built once, several readers,
random operators fed the batch size and one RNG, the TensorList API of outputs rewritten).
DALI nodes made before the block in the same body (``mirror = fn.random.coin_flip()`` above
``with pipe:``) and used only by it are part of its graph: they move into the loop, computed
per batch. The object is followed as for DM200 (returned by a factory, kept in an attribute, ...); a use
the tool cannot rewrite gets a TODO where it stands. A framework iterator over the object makes the
block a loader class (``class_loaders``); in a method, what the block read from ``self`` is read
where it stood, since the class's methods have their own ``self`` (``outer_self``).

Safety: safe. Random values differ from the old pipeline's, as for DM200.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import TypeAlias, TypeGuard

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.dali_api import PIPELINE_CLASSES
from dali_migrate.fixes import Diagnostic, Edit
from dali_migrate.rules import FileState, Rule

from ._backend.arguments import (
    device_todo,
    dropped_comments,
    is_unset,
    pipeline_ctor_kwargs,
    set_threads_stmt,
)
from ._backend.block_effects import kept_in_place, late_bound
from ._backend.class_loaders import (
    block_params,
    init_reads,
    moved_code_reasons,
    rebound_reasons,
    settle_iterators,
)
from ._backend.conditionals import branch_reasons, has_data_branches
from ._backend.docstrings import outputs_text
from ._backend.edits import check_disjoint, moved_stmt, removed_stmt
from ._backend.emit import emit_generator_body
from ._backend.flow import Flow
from ._backend.flow_sites import enclosing_function
from ._backend.instances import follow_pipeline, own_uses
from ._backend.iterator_consumers import dropin_note
from ._backend.loader_sites import loader_site_edits
from ._backend.loaders import loader_definition
from ._backend.model import FollowUp, Graph, Instance, PipelinePlan, Refused
from ._backend.outer_self import OuterReads
from ._backend.recognise import analyse_graph, branch_outputs, chosen_outputs, pipeline_count
from ._backend.seeds import rng_seed
from ._backend.sites import device_todo_line, propose_pipeline_fix, refuse_pipeline, run_site_edits
from ._cst import free_names, fresh_name, leading_lines, truthy, walk
from ._local import collect_nodes

#: the last statement of a ``with`` block: a line, or a small statement of a one-line block
_Statement: TypeAlias = "cst.BaseStatement | cst.BaseSmallStatement"


class PipelineObject(Rule):
    id = "DM201"
    name = "pipeline-object"
    summary = "Pipeline(...) with a `with pipe:` graph block becomes a dynamic-mode generator"
    structural = True

    def run(self, state: FileState) -> None:
        ctx = state.ctx
        followed = set()
        for ctor_stmt, assign, call in _pipeline_constructions(ctx):
            block = _graph_block(ctx, ctor_stmt, _target_name(assign))
            if block is None:
                continue  # not built with a `with` block: refused below
            followed.add(id(call))
            state.claimed += [ctor_stmt, block]
            notes: list[Diagnostic] = []
            followups: list[FollowUp] = []
            try:
                edits, included, inst, claimed = self._migrate(
                    state, ctor_stmt, assign, call, block, notes, followups
                )
            except Refused as why:
                refuse_pipeline(state, self.id, ctor_stmt, why, keep=block)
                continue
            state.claimed += claimed
            message = f"migrate pipeline {inst.label} and its use sites to dynamic mode"
            names = outputs_text(ctx, graph_outputs(ctx, block, inst.label))
            advice = (
                f"`{inst.label}` is a generator of {names} batches now, "
                "not a Pipeline: take each batch with next(...), and drop build()"
            )
            propose_pipeline_fix(
                state, self.id, block, edits, message, included, notes, followups, advice
            )
        for call in ctx.nodes_of(cst.Call):
            if id(call) not in followed and ctx.qualname(call.func) in PIPELINE_CLASSES:
                # its graph is built in a way this rule does not follow; its fn.* calls must not
                # be rewritten one by one either (refusing withholds the file's local rewrites)
                stmt = ctx.enclosing_statement(call)
                refuse_pipeline(
                    state,
                    self.id,
                    stmt,
                    _unfollowed_reason(ctx, call),
                    keep=_graph_scope(ctx, stmt),
                )

    def _migrate(
        self,
        state: FileState,
        ctor_stmt: cst.SimpleStatementLine,
        assign: cst.Assign,
        call: cst.Call,
        block: cst.With,
        notes: list[Diagnostic],
        followups: list[FollowUp],
    ) -> tuple[list[Edit], list[str], Instance, list[cst.CSTNode]]:
        ctx = state.ctx
        var = _target_name(assign)
        graph, kwargs, batch_size = _block_graph(ctx, var, call, block)
        last = block.body.body[-1]
        # plain code whose effect is seen outside the block stays where the block stood
        kept = kept_in_place(
            ctx, block, [s for s in graph.body if s is not graph.outputs_stmt], var
        )
        graph = dataclasses.replace(graph, body=[s for s in graph.body if not _among(s, kept)])
        prefix = graph_prefix(ctx, block)
        if prefix:  # nodes made before the block are part of its graph: computed per batch
            moved = [s.with_changes(leading_lines=_comments(s)) for s in prefix]
            graph = dataclasses.replace(graph, body=[*moved, *graph.body])
        inst = Instance(ctor_stmt, assign, call, kwargs, label=var)
        own_refs = [block.items[0].item] + [
            cst.ensure_type(c.func, cst.Attribute).value
            for c in walk(last)
            if _is_set_outputs(c, var)
        ]
        flow = Flow(ctx, {id(call)}, ignore=tuple(own_refs))
        follow_pipeline(ctx, inst, call, flow, followups)
        own = own_uses(ctx, block, [inst], followups)
        if own:
            raise Refused("; ".join(own))
        # a framework iterator over the object: the block becomes a loader class
        loader, outer = None, OuterReads()
        if inst.iterators:
            sizes = [u.size for u in inst.iterators if u.size is not None]
            # the code that moves into the class: the block's, but what stays where it stood
            moving = block.with_changes(
                body=block.body.with_changes(
                    body=[s for s in block.body.body if not _among(s, kept)]
                )
            )
            why = rebound_reasons(ctx, moving, batch_size.value, *sizes, moved=prefix)
            why += moved_code_reasons(
                moving, batch_size.value, prefix, outer, [a.value for a in kwargs.values()]
            )
            loader = settle_iterators(ctx, graph, [inst], followups, why)

        seed = kwargs.get("seed")
        branches = has_data_branches(ctx, block.body, collect_nodes(ctx, block))
        plan = PipelinePlan(
            rule_id=self.id,
            passes=loader is not None,
            batch_size=batch_size.value,
            seed=rng_seed(seed.value if seed else None, _params_around(ctx, block)),
            single_use=not followups and inst.copies == 1 and pipeline_count(ctx) == 1,
            dropped=dropped_comments(ctx, [kwargs], branches=branches),
            lowering=state.lowering,
        )
        if loader is not None:
            # the loader's __init__ takes the context of the pipeline's GPU, where it reads the
            # constructor's device_id as it was
            device = kwargs.get("device_id")
            if (
                device is not None
                and device_todo(ctx, block, device, var)
                and init_reads(ctx, block, device.value, outer)
            ):
                plan.device = device.value
            body, fired = emit_generator_body(ctx, graph, plan, notes)
            if inst.iterators[0].framework != "tf":  # (TF's is a function: `self` is the method's)
                outer.bind(_names_around(ctx, block) | {n for s in body for n in free_names(s)})
                body = [outer.rebound(s) for s in body]
                if any("self" in free_names(s) for s in body):  # (none is left: a guard)
                    raise Refused("the pipeline's code reads `self`, which the loader class cannot")
            edits = _loader_edits(ctx, self.id, inst, block, graph, body, plan, notes, outer, kept)
        else:
            edits, fired = self._generator_edits(
                ctx, ctor_stmt, block, inst, kwargs, graph, plan, notes, kept
            )
        edits += [moved_stmt(ctx, stmt) for stmt in prefix]  # comments: with it, in the loop
        if loader is None:
            edits += run_site_edits(ctx, inst, notes, moved=block)
        check_disjoint(ctx, edits)
        return edits, fired, inst, [*graph.claimed, *prefix]

    def _generator_edits(
        self,
        ctx: FileContext,
        ctor_stmt: cst.SimpleStatementLine,
        block: cst.With,
        inst: Instance,
        kwargs: dict[str, cst.Arg],
        graph: Graph,
        plan: PipelinePlan,
        notes: list[Diagnostic],
        kept: list[cst.BaseStatement],
    ) -> tuple[list[Edit], list[str]]:
        """The ``with`` block becomes a generator function defined where it stood (named after
        the variable, ``inst.label``), below the statements of the block ``kept`` where they
        stood, and the constructor ``ndd.set_num_threads``; the ids of the local rules that
        fired. The names the generator reads that the code around rebinds are its parameters
        (``block_effects``)."""
        var = inst.label
        gen_name = fresh_name(
            f"{var}_batches", {n.value for n in ctx.nodes_of(cst.Name)} | ctx.skipped_names
        )
        inst.device_todo = device_todo(ctx, block, kwargs.get("device_id"), f"{gen_name}()")
        if inst.device_todo:  # the generator is defined where the Pipeline was made: same names
            plan.device = kwargs["device_id"].value
        body, fired = emit_generator_body(ctx, graph, plan, notes)
        if plan.device_applied:
            inst.device_todo = None
        blank = [cst.EmptyLine(indent=False)] * (
            2 if isinstance(ctx.parents.get(block), cst.Module) else 1
        )
        gen = cst.FunctionDef(
            name=cst.Name(gen_name),
            params=cst.Parameters(),
            body=cst.IndentedBlock(body=body),
            leading_lines=[] if kept else [*block.leading_lines, *blank],
        )
        params = late_bound(ctx, block, gen)
        gen = gen.with_changes(params=cst.Parameters([cst.Param(cst.Name(p)) for p in params]))
        todo_lines = []
        if inst.device_todo:
            todo_lines.append(device_todo_line(ctx, inst, self.id, notes, block))
        call = cst.Call(cst.Name(gen_name), [cst.Arg(cst.Name(p)) for p in params])
        instantiate = cst.SimpleStatementLine(
            [cst.Assign([cst.AssignTarget(cst.Name(var))], call)],
            leading_lines=blank + todo_lines,
        )
        if kept:  # the comments above `with` go above them, a blank line below them
            first = kept[0].with_changes(
                leading_lines=[*block.leading_lines, *leading_lines(kept[0])]
            )
            kept = [first, *kept[1:]]
            gen = gen.with_changes(leading_lines=blank)
        threads = kwargs.get("num_threads")
        if threads is not None and not is_unset(threads.value):
            ctor_edit = ctx.stmt_edit(
                ctor_stmt,
                [
                    set_threads_stmt(ctx, threads).with_changes(
                        leading_lines=ctor_stmt.leading_lines
                    )
                ],
            )
        else:
            ctor_edit = removed_stmt(ctx, ctor_stmt)
        edits: list[Edit] = [
            ctor_edit,
            ctx.stmt_edit(block, [*kept, gen, instantiate]),
            *graph.extra_edits,
        ]
        return edits, fired


def _block_graph(
    ctx: FileContext, var: str, call: cst.Call, block: cst.With
) -> tuple[Graph, dict[str, cst.Arg], cst.Arg]:
    """The graph of the ``with pipe:`` block (Refused with every reason when it cannot migrate),
    the arguments of ``Pipeline(...)`` and its batch size."""
    reasons: list[str] = []
    kwargs = pipeline_ctor_kwargs(call, reasons, "Pipeline(...)")
    last = block.body.body[-1]
    outputs_call = _set_outputs_call(last, var)
    outputs = (
        [a.value for a in outputs_call.args]
        if outputs_call is not None
        and all(a.keyword is None and not a.star for a in outputs_call.args)
        else []
    )
    graph = analyse_graph(
        ctx,
        block,
        last if isinstance(last, cst.SimpleStatementLine) and outputs_call is not None else None,
        outputs,
        reasons,
        lambda stmt: _set_outputs_values(stmt, var),
    )
    if truthy(kwargs.get("enable_conditionals")):
        reasons += branch_reasons(ctx, block.body.body, collect_nodes(ctx, block))
    batch_size = kwargs.get("batch_size") or kwargs.get("max_batch_size")
    if batch_size is None or is_unset(batch_size.value):
        reasons.append("Pipeline(...) has no batch_size")
    if reasons:
        raise Refused("; ".join(dict.fromkeys(reasons)))
    assert graph is not None and batch_size is not None
    return graph, kwargs, batch_size


def graph_prefix(ctx: FileContext, block: cst.With) -> list[cst.SimpleStatementLine]:
    """Statements before the ``with pipe:`` block, in the same body, that make DALI data nodes
    (no reader, no external source) used only by the block and by each other: pipeline mode
    adds them to the block's graph (``mirror = fn.random.coin_flip()`` made before the block is
    drawn anew at each run)."""
    body = list(getattr(ctx.parents.get(block), "body", ()))
    if block not in body:
        return []
    candidates = [s for s in body[: body.index(block)] if _makes_nodes(ctx, s)]
    while True:
        inside = {id(n) for s in [block, *candidates] for n in walk(s) if isinstance(n, cst.Name)}
        scope = walk(ctx.parents.get(block))
        used = {n.value for n in scope if isinstance(n, cst.Name) and id(n) not in inside}
        kept = [s for s in candidates if not _targets(s) & used]
        if len(kept) == len(candidates):  # moved into the loop: comments kept, blank lines not
            return kept
        candidates = kept


def _among(stmt: cst.CSTNode, stmts: list[cst.BaseStatement]) -> bool:
    return any(stmt is s for s in stmts)


def _first_line(ctx: FileContext, stmt: cst.CSTNode) -> str:
    return ctx.text(stmt).strip().splitlines()[0].rstrip(":")


def _comments(stmt: cst.SimpleStatementLine) -> list[cst.EmptyLine]:
    return [line for line in stmt.leading_lines if line.comment is not None]


def _targets(stmt: cst.SimpleStatementLine) -> set[str]:
    assign = stmt.body[0]
    assert isinstance(assign, cst.Assign)
    return {n.value for t in assign.targets for n in walk(t.target) if isinstance(n, cst.Name)}


def _makes_nodes(ctx: FileContext, stmt: cst.CSTNode) -> bool:
    """``x = fn.op(...)`` (or an expression of them), no reader or external source."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1):
        return False
    assign = stmt.body[0]
    if not isinstance(assign, cst.Assign) or not all(
        isinstance(n, (cst.Name, cst.Tuple, cst.Element))
        for t in assign.targets
        for n in walk(t.target)
    ):
        return False
    ops = [ctx.fn_op(n.func) for n in walk(assign.value) if isinstance(n, cst.Call)]
    found = [op for op in ops if op is not None]
    if not found or any(
        op.target.is_reader or op.target.fn_path == "external_source" for op in found
    ):
        return False
    return not any(isinstance(n, (cst.Lambda, cst.Yield, cst.Await)) for n in walk(assign.value))


def _loader_edits(
    ctx: FileContext,
    rule_id: str,
    inst: Instance,
    block: cst.With,
    graph: Graph,
    body: list[cst.BaseStatement],
    plan: PipelinePlan,
    notes: list[Diagnostic],
    outer: OuterReads,
    kept: list[cst.BaseStatement],
) -> list[Edit]:
    """The ``with`` block becomes the loader class of the iterator over the object (``__init__``
    takes ``batch_size``, the constructor's by default, and the context of the pipeline's GPU
    where the loop's shape let the emitter apply its ``device_id``), made where the iterator
    was, below what its code read from ``self`` (``outer``) and the statements of the block
    ``kept`` where they stood; the constructor gives way to ``ndd.set_num_threads``."""
    var = inst.name
    device = inst.kwargs.get("device_id")
    inst.device_todo = None if plan.device_applied else device_todo(ctx, block, device, var)
    params = block_params(plan.batch_size)
    top = isinstance(ctx.parents.get(block), cst.Module)
    blank = [cst.EmptyLine(indent=False)] * (2 if top else 1)
    if kept:  # the comments above `with` go above them, a blank line below them
        first = kept[0].with_changes(leading_lines=[*block.leading_lines, *leading_lines(kept[0])])
        kept = [first, *kept[1:]]
    fn = cst.FunctionDef(
        cst.Name(var),
        params,
        cst.IndentedBlock(body),
        leading_lines=[*([] if kept else block.leading_lines), *blank],
    )
    helpers, edits, name = loader_definition(ctx, fn, graph, body, params, inst, at=block)
    reads = outer.statements(name, free_names(helpers[-1]))
    cls = helpers[-1]
    if reads and isinstance(cls, cst.ClassDef):  # the class's comments above them, then a blank
        reads[0] = reads[0].with_changes(
            leading_lines=[*cls.leading_lines, *reads[0].leading_lines]
        )
        helpers[-1:] = [*reads, cls.with_changes(leading_lines=blank)]
    notes += dropin_note(ctx, rule_id, inst.iterators[0], name)
    start, end = ctx.stmt_span(block)
    after = ctx.source[end:].split(ctx.module.default_newline, 1)[0]
    text = "".join(ctx.render(s, ctx.indents(block)) for s in [*kept, *helpers])
    text += ctx.module.default_newline * len(blank) if after.strip() else ""  # a gap below it too
    edits = [Edit(start, end, text), *edits, *graph.extra_edits]
    return edits + loader_site_edits(
        ctx, inst, name, rule_id, None, set(), notes, set(), args=[], todo_where_made=True
    )


def _names_around(ctx: FileContext, block: cst.With) -> set[str]:
    """The names the function around ``block`` (or the module) reads or binds, and those the
    loader class's methods bind themselves."""
    return free_names(_graph_scope(ctx, block)) | set(ctx.skipped_names) | {"self", "batch_size"}


def _target_name(assign: cst.Assign) -> str:
    """The name ``pipe = Pipeline(...)`` binds (:func:`_pipeline_constructions` checked it)."""
    return cst.ensure_type(assign.targets[0].target, cst.Name).value


def _pipeline_constructions(
    ctx: FileContext,
) -> Iterator[tuple[cst.SimpleStatementLine, cst.Assign, cst.Call]]:
    """``pipe = Pipeline(...)`` statements anywhere in the module."""
    for node in ctx.nodes_of(cst.SimpleStatementLine):
        if not (
            isinstance(node, cst.SimpleStatementLine)
            and len(node.body) == 1
            and isinstance(node.body[0], cst.Assign)
        ):
            continue
        assign = node.body[0]
        if (
            isinstance(assign.value, cst.Call)
            and len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name)
            and ctx.qualname(assign.value.func) in PIPELINE_CLASSES
        ):
            yield node, assign, assign.value


def _graph_scope(ctx: FileContext, stmt: cst.CSTNode) -> cst.CSTNode:
    """Where the graph of a Pipeline(...) the rule does not follow may be built: the function
    around it, or the whole module."""
    cur = ctx.parents.get(stmt)
    while cur is not None and not isinstance(cur, (cst.FunctionDef, cst.Module)):
        cur = ctx.parents.get(cur)
    return cur if cur is not None else ctx.module


def _unfollowed_reason(ctx: FileContext, call: cst.Call) -> str:
    """Why a ``Pipeline(...)`` construction is not migrated."""
    assign = ctx.parents.get(call)
    if isinstance(assign, cst.WithItem) and isinstance(assign.asname, cst.AsName):
        name = ctx.text(assign.asname.name)
        return (
            f"`with Pipeline(...) as {name}:` is not migrated yet; written as `{name} = "
            "Pipeline(...)` "
            f"followed by `with {name}:` it would be"
        )
    if not (isinstance(assign, cst.Assign) and assign.value is call and len(assign.targets) == 1):
        return "the Pipeline(...) object is not assigned to a variable, so its graph and runs cannot be followed"
    target = assign.targets[0].target
    if not isinstance(target, cst.Name):
        return (
            f"the Pipeline(...) object is stored in `{ctx.text(target)}`, not a local variable, "
            "so its graph "
            "and runs cannot be followed: migrate it by hand, or build it in a local variable first"
        )
    return (
        f"no `with {target.value}:` block after Pipeline(...) defines its graph in the same block"
    )


def _graph_block(ctx: FileContext, ctor_stmt: cst.SimpleStatementLine, var: str) -> cst.With | None:
    """The first ``with <var>:`` statement after the constructor in the same block."""
    block = ctx.parents.get(ctor_stmt)
    siblings = list(getattr(block, "body", ()))
    for stmt in siblings[siblings.index(ctor_stmt) + 1 :]:
        if (
            isinstance(stmt, cst.With)
            and len(stmt.items) == 1
            and stmt.items[0].asname is None
            and isinstance(stmt.items[0].item, cst.Name)
            and stmt.items[0].item.value == var
        ):
            return stmt
    return None


def _set_outputs_values(stmt: _Statement, var: str) -> list[cst.BaseExpression] | None:
    """The nodes ``var.set_outputs(...)`` names, when ``stmt`` is that call alone."""
    call = _set_outputs_call(stmt, var)
    if call is None or any(a.keyword is not None or a.star for a in call.args):
        return None
    return [a.value for a in call.args]


def _set_outputs_call(stmt: _Statement, var: str) -> cst.Call | None:
    """``var.set_outputs(...)`` when ``stmt`` is that call alone on its line."""
    if (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
    ):
        call = stmt.body[0].value
        if _is_set_outputs(call, var):
            return call
    return None


def _is_set_outputs(call: cst.CSTNode, var: str) -> TypeGuard[cst.Call]:
    """``call`` is ``var.set_outputs(...)``."""
    return (
        isinstance(call, cst.Call)
        and isinstance(call.func, cst.Attribute)
        and call.func.attr.value == "set_outputs"
        and isinstance(call.func.value, cst.Name)
        and call.func.value.value == var
    )


def graph_outputs(ctx: FileContext, block: cst.With, var: str) -> list[list[cst.BaseExpression]]:
    """The nodes the block's final ``pipe.set_outputs(...)`` names (those of each branch of the
    ``if`` that ends it)."""
    last = block.body.body[-1]
    values = _set_outputs_values(last, var)
    if values is not None:
        return [values]
    chosen = chosen_outputs(ctx, block, last, lambda stmt: _set_outputs_values(stmt, var))
    if chosen is not None:
        return [chosen[1]]
    branched = branch_outputs(ctx, block, last, lambda stmt: _set_outputs_values(stmt, var), [])
    return list(branched.values()) if branched else []


def _params_around(ctx: FileContext, node: cst.CSTNode) -> cst.Parameters | None:
    """The parameters of the function around ``node``, if any (what a seed name may be)."""
    fn = enclosing_function(ctx, node)
    return fn.params if fn is not None else None
