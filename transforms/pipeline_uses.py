"""DM204 pipeline-uses: a ``@pipeline_def`` pipeline (or a ``Pipeline`` subclass) imported from
another module of the project is built and run here; its use sites follow the migration of its
definition.

The example is the loop module of a project whose ``pipelines.py`` defines ``train_pipe`` and
``val_pipe`` with ``@pipeline_def``; DM200 migrates that module in the same run.

Before (``fixtures/projects/training/old/trainer/loop.py``)::

    \"\"\"The training loop: it never mentions DALI, it only runs the pipelines.\"\"\"
    from .pipelines import train_pipe, val_pipe


    def main(data_dir, iterations):
        train = train_pipe(data_dir, size=24, prefetch_queue_depth=1)
        train.build()
        val = val_pipe(data_dir)
        val.build()
        results = []
        for _ in range(iterations):
            images, labels = train.run()
            val_images, val_labels = val.run()
            results.append((images.as_array(), labels.as_array(), val_images.as_array(), val_labels.as_array()))
        return results

After (``fixtures/projects/training/new/trainer/loop.py``)::

    \"\"\"The training loop: it never mentions DALI, it only runs the pipelines.\"\"\"
    from .pipelines import train_pipe, val_pipe
    import numpy as np
    import nvidia.dali.experimental.dynamic as ndd


    def main(data_dir, iterations):
        ndd.set_num_threads(2)
        # dali-migrate: dropped prefetch_queue_depth=1: dynamic mode runs each operator when it is
        # called; there is no prefetch queue
        train = train_pipe(data_dir, size=24)
        val = val_pipe(data_dir)
        results = []
        for _ in range(iterations):
            images, labels = next(train)
            val_images, val_labels = next(val)
            results.append(
                (
                    np.asarray(ndd.as_tensor(images)),
                    np.asarray(ndd.as_tensor(labels)),
                    np.asarray(ndd.as_tensor(val_images)),
                    np.asarray(ndd.as_tensor(val_labels)),
                )
            )
        return results

The definition and its uses are found by a discovery pass over all the paths given to one run
(``dali-migrate --write src/``): the uses here change when the definition migrates, and those
the tool cannot follow get a TODO where they stand. A definition used in other modules stays a
plain generator of batches (no reader handles or iterator epochs), so every module calls it the
same way. A ``Pipeline`` subclass becomes a generator function with its ``__init__``'s
parameters: the call that made the object stays, with ``ndd.set_num_threads`` before it given
what ``__init__`` handed the Pipeline as ``num_threads``, and the TODOs at the uses the tool
cannot rewrite say what became of the class. A class derived from it here keeps it a class
(its module refuses it with that reason). Run on one file alone, this rule sees nothing to do
(DM205 marks the uses then).

Safety: safe.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Diagnostic, Edit
from dali_migrate.project import SUBCLASSED, ForeignPipeline
from dali_migrate.rules import FileState, Rule

from ._backend.arguments import dropped_comments, is_unset
from ._backend.class_sites import call_site_value, site_view
from ._backend.handles import abandon_handles
from ._backend.instances import PIPELINE_METHOD_HINTS, instances_of
from ._backend.iterator_checks import abandon_iterators
from ._backend.model import FollowUp, Instance
from ._backend.recognise import pipeline_count
from ._backend.site_args import lower_site_args
from ._backend.sites import (
    creation_todos,
    follow_up_todos,
    generator_advice,
    pipeline_def_instance_edits,
    propose_pipeline_fix,
)
from ._cst import in_source_order


class PipelineUses(Rule):
    id = "DM204"
    name = "pipeline-uses"
    summary = "build/run sites of a pipeline imported from another module follow its migration"
    structural = True

    def run(self, state: FileState) -> None:
        ctx = state.ctx
        info = ctx.project
        if info is None or not info.foreign:
            return
        self.threads_set: set[int] = set()  # the thread pool is one: set once per scope
        self.made: list[tuple[int, str, bool]] = []
        for stmt in ctx.module.body:
            if not (
                isinstance(stmt, cst.SimpleStatementLine)
                and isinstance(stmt.body[0], cst.ImportFrom)
            ):
                continue
            imp = stmt.body[0]
            scope = ctx.scopes.get(imp)
            if scope is None or isinstance(imp.names, cst.ImportStar):
                continue
            for alias in imp.names:
                local = alias.evaluated_alias or alias.evaluated_name  # the name bound here
                fp = info.foreign.get(local)
                if fp is None:
                    continue
                refs = in_source_order(
                    ctx,
                    [r for a in scope.assignments[local] if a.node is imp for r in a.references],
                )
                self._uses(state, alias, local, fp, [r.node for r in refs])
        info.first_made = self._first_made(ctx)

    def _first_made(self, ctx: FileContext) -> str | None:
        """The imported pipeline made first here, when it is made once with every use followed
        and this module has no pipelines of its own (its loop may then run in capture mode)."""
        if not self.made or pipeline_count(ctx):
            return None
        line, local, followed = min(self.made)
        return (
            local
            if followed and [m for m in self.made if m[1] == local] == [(line, local, followed)]
            else None
        )

    def _uses(
        self,
        state: FileState,
        alias: cst.ImportAlias,
        local: str,
        fp: ForeignPipeline,
        refs: list[cst.CSTNode],
    ) -> None:
        """The uses of the pipeline ``local`` imported from another module of the run."""
        ctx = state.ctx
        followups: list[FollowUp] = []
        notes: list[Diagnostic] = []
        params = set(fp.params)
        is_class = fp.kind == "class"
        instances = instances_of(ctx, refs, local, params, followups, pipeline_args=not is_class)
        across = _class_why(fp) if is_class else "not across modules"
        if is_class:
            followups[:] = [_for_class(ctx, f, fp) for f in followups]
        for inst in instances:
            abandon_handles(inst, {0: across}, followups)
            abandon_iterators(inst, across, followups)
            if is_class:
                continue  # its batch size and seed are the class's
            if not fp.batch_size_given and not (
                {"batch_size", "max_batch_size"} & set(inst.kwargs)
            ):
                followups.append(
                    FollowUp(
                        inst.call,
                        f"{inst.label} gives no batch_size (the decorator has none)",
                        "pass batch_size= here",
                    )
                )
            if "seed" in inst.kwargs and not fp.seed_given:
                followups.append(
                    FollowUp(
                        inst.call,
                        f"seed= at {inst.label} (the decorator has none)",
                        "give the seed at the decorator, or to the migrated function by hand",
                    )
                )
        ctx.project.use_reasons[local] = [f.what for f in followups]
        for inst in instances:
            followed = not followups and inst.local and inst.copies == 1
            if not is_class:  # (a class used in other modules never runs captured)
                self.made.append((ctx.positions[inst.stmt].start.line, local, followed))
        if not fp.migrated:
            return  # the definition's TODO (in its own module) tells why
        threads = cst.Arg(cst.parse_expression(fp.num_threads)) if fp.num_threads else None
        advice = generator_advice(fp.name, "(its outputs)")
        if is_class:
            advice = f"{_class_why(fp)}: take each batch with next(...), and drop build()"
        site_fired, site_todos = lower_site_args(ctx, instances, state.lowering)
        written = creation_todos(ctx, self.id, instances, followups, advice) + site_todos
        edits: list[Edit] = []
        for inst in instances:
            dropped = dropped_comments(ctx, [inst.kwargs])
            if is_class:
                threads = _class_threads(ctx, self.id, fp, inst, notes)
            edits += pipeline_def_instance_edits(
                ctx, inst, self.id, threads, params, notes, dropped, threads_set=self.threads_set
            )
        state.claimed += [inst.stmt for inst in instances]
        if not edits:
            state.diagnostics.extend(follow_up_todos(ctx, self.id, followups, advice))
            return
        message = f"use the migrated pipeline {fp.name} of {fp.module}"
        key = f"{fp.module}.{fp.name}"
        propose_pipeline_fix(
            state,
            self.id,
            alias,
            edits,
            message,
            sorted(site_fired),
            notes,
            followups,
            advice,
            key=key,
            written=written,
        )


def _class_why(fp: ForeignPipeline) -> str:
    """What became of the ``Pipeline`` subclass ``fp`` (for the TODOs at uses not rewritten)."""
    return (
        f"class {fp.name} of {fp.module} was migrated into a generator function "
        f"{fp.name}({fp.signature}) that yields batches, not a Pipeline"
    )


def _for_class(ctx: FileContext, followup: FollowUp, fp: ForeignPipeline) -> FollowUp:
    """A use of the class ``fp`` not followed, as the TODO tells it: a class derived from it
    here (its definition then stays a class), ``pipe.epoch_size(...)`` (its reader is inside
    the function now)."""
    arg = ctx.parents.get(followup.node)
    cls = ctx.parents.get(arg) if isinstance(arg, cst.Arg) else None
    if isinstance(cls, cst.ClassDef) and any(a is arg for a in cls.bases):
        return FollowUp(
            followup.node,
            f"`{fp.name}` {SUBCLASSED} {cls.name.value}",
            f"{fp.name} stays a class of pipeline mode while it is",
        )
    if followup.advice != PIPELINE_METHOD_HINTS["epoch_size"]:
        return followup
    return FollowUp(
        followup.node,
        f"{followup.what} ({_class_why(fp)}, its reader inside it)",
        "make the ndd reader of that function here, with the same arguments and "
        "max_batch_size=, and read its get_metadata()['epoch_size_padded']",
    )


def _class_threads(
    ctx: FileContext, rule_id: str, fp: ForeignPipeline, inst: Instance, notes: list[Diagnostic]
) -> cst.Arg | None:
    """``ndd.set_num_threads``'s argument where ``inst`` makes the class ``fp``: what its call
    gives the parameter that ``__init__`` hands the Pipeline as ``num_threads`` (or the literal
    it hands); None, with a note, where that cannot be read."""
    params = cst.ensure_type(cst.parse_statement(f"def f({fp.signature}): pass"), cst.FunctionDef)
    value = (
        call_site_value(
            params.params, site_view(params.params, inst), cst.parse_expression(fp.num_threads)
        )
        if fp.num_threads is not None
        else None
    )
    if value is not None and not is_unset(value):
        return cst.Arg(value)
    if value is None:
        text = "num_threads could not be followed to this call: ndd uses its default thread count"
        notes.append(ctx.info(rule_id, inst.stmt, text))
    return None
