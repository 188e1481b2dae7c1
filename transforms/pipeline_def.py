"""DM200 pipeline-def: a ``@pipeline_def`` function and its use sites become a dynamic-mode
generator that yields what ``pipe.run()`` returned.

Before (``fixtures/DM200/canonical.in.py``)::

    from nvidia.dali import pipeline_def, fn


    @pipeline_def(batch_size=64, num_threads=4, device_id=0, seed=12)
    def train_pipe(data_dir):
        jpegs, labels = fn.readers.file(file_root=data_dir, random_shuffle=True, name="Reader")
        images = fn.decoders.image(jpegs, device="mixed")
        mirror = fn.random.coin_flip(probability=0.5)
        images = fn.crop_mirror_normalize(images, crop=(224, 224), mirror=mirror)
        return images, labels


    def train(data_dir, train_step):
        pipe = train_pipe(data_dir)
        pipe.build()
        for step in range(1000):
            images, labels = pipe.run()
            train_step(images.as_tensor(), labels.as_tensor())

After (``fixtures/DM200/canonical.out.py``)::

    import nvidia.dali.experimental.dynamic as ndd


    def train_pipe(data_dir, *, batch_size=64, seed=12):
        \"\"\"Yields (images, labels) batches epoch after epoch, without end, as Pipeline.run() did.\"\"\"
        reader = ndd.readers.File(file_root=data_dir, random_shuffle=True, seed=seed)
        rng = ndd.random.RNG(seed=seed)
        # capture=True: runs the loop as one prebuilt graph; one such loop can be active at a time
        while True:
            for jpegs, labels in reader.next_epoch(batch_size=batch_size, capture=True):
                images = ndd.decoders.image(jpegs, device="gpu")
                mirror = ndd.random.coin_flip(batch_size=jpegs.batch_size, probability=0.5, rng=rng)
                images = ndd.crop_mirror_normalize(images, crop=(224, 224), mirror=mirror)
                yield images, labels


    def train(data_dir, train_step):
        ndd.set_num_threads(4)
        pipe = train_pipe(data_dir)
        for step in range(1000):
            images, labels = next(pipe)
            train_step(ndd.as_tensor(images), ndd.as_tensor(labels))

The reader is built once, outside the per-batch code, and epochs are chained without end, which
is exactly the stream ``pipe.run()`` produced (docs/dali-facts.md [epochs]). ``batch_size`` and
``seed`` become keyword-only parameters with the decorator's values as defaults, so call sites
that passed them keep working; ``num_threads`` becomes one ``ndd.set_num_threads`` before the
pipeline is created. A GPU pipeline made with ``device_id=<not 0 or None>`` gets a ``device_id``
parameter too: the generator runs its operators in that GPU's default ``ndd.EvalContext``,
passed to ``reader.next_epoch(..., ctx=ctx)``. A parameter of the function named ``batch_size``
or ``seed`` takes the argument of that name (DALI gives it to the function only): the
decorator's value then becomes ``pipeline_batch_size``/``pipeline_seed``, and a ``batch_size``
parameter without one (DALI could not build that pipeline) is the batch size. Outputs read
through the TensorList API are rewritten to the Batch API.

With ``enable_conditionals=True``, an ``if``/``else`` on data nodes becomes per-sample code:
split by index, each branch on its sub-batch, merged back in order
(``_backend/conditionals.py`` says which shapes are supported; the others are refused).

Where a call site needs the reader or the pipeline's state (``pipe.epoch_size()``,
``pipe.reader_meta()``, ``pipe.checkpoint()``), the function builds them eagerly and returns them
before the generator of batches: ``reader, pipe = train_pipe(...)``, then
``reader.get_metadata()["epoch_size_padded"]``; checkpoints become an ``ndd.checkpoint.Checkpoint``
(``ckpt.collect()``, ``ckpt.serialize()``; ``train_pipe(..., checkpoint=s)`` restores), whose JSON
format is not the pipeline's. ``pipe.reset()`` of a pipeline without external sources does nothing
and is removed (``_backend/handles.py``). A factory that makes the pipeline and returns it
(``pipe = train_pipe(...); pipe.build(); return pipe``) returns the reader before it too, and its
callers unpack both (``_backend/handle_relays.py``). Without ``name=`` on the reader, the
dictionary ``pipe.epoch_size()`` returns was keyed by a name DALI made up (``"__File_0"``): where
every read takes its one value (``d[next(iter(d))]``, ``list(d.values())[0]``, ...), the read
becomes the reader's own value (``_backend/meta_reads.py``); other reads keep a TODO.

Where some objects of the definition are wrapped by a framework iterator and others are run (or
made) directly, each use migrates on its own: the function stays the generator for the latter,
and the loader class (``_backend/loaders.py``) is written after it for the former, its sites
rewritten as for a definition only iterated (not where the function would return the reader or a
checkpoint, nor for DALIDataset; where the class cannot be written, the iterators keep their TODO
and the generator stays).

The whole pipeline (definition and use sites) is one fix. The pipeline object is followed
wherever the code keeps it (names, ``self.pipe``, lists of per-GPU pipelines, factories, helper
parameters); the definition itself too, where it is passed as a value (``bench(train_pipe)``,
``for make in [train_pipe, eval_pipe]``, a table of ``[definition, ...]`` rows, a function that
returns one): a call ``make(...)`` that only migrated definitions taking its arguments can reach
is rewritten as a direct call is (``_backend/def_values.py``), with those definitions in one
fix. A use the tool cannot rewrite (``pipe`` passed to code it cannot see into, an unknown
method) keeps its code and gets a TODO right above it that says what to write there, written
with the fix and listed in its ``follow_ups``. When the graph itself cannot be carried
over (an operator dynamic mode lacks, an unsupported conditional, ...), the definition stays as
it was with a TODO that lists every reason, and the code that builds it keeps its ``fn.*``.

Safety: safe. Random values differ from the old pipeline's (hidden per-operator seeds of pipeline
mode cannot be reproduced by readable code); ``dali-migrate verify`` aligns the random streams to
prove that everything else is equal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Diagnostic, Edit
from dali_migrate.rules import FileState, Rule

from ._backend.arguments import device_todo, dropped_comments
from ._backend.conditionals import has_data_branches
from ._backend.data_iterators import data_iterator_decorator, data_iterator_instances
from ._backend.def_recognise import decorator_kwargs, definition_reasons, method_instances
from ._backend.def_signature import (
    UNSET_BATCH_NOTE,
    current_device,
    current_values,
    device_param,
    pipeline_params,
)
from ._backend.docstrings import graph_outputs_text
from ._backend.edits import check_disjoint, joined_imports, with_joined
from ._backend.emit import emit_generator_body
from ._backend.feeds import match_feeds
from ._backend.flow import PeerOf
from ._backend.handed import Handed
from ._backend.handles import (
    FORMAT_NOTE,
    RESTORE_PARAM,
    Needs,
    abandon_handles,
    dropped_checkpointing,
    handle_reasons,
    name_handles,
    needs_of,
    wrap_body,
)
from ._backend.instances import find_instances, own_uses
from ._backend.iterator_checks import abandon_iterators, iterator_reasons
from ._backend.iterator_consumers import dropin_note
from ._backend.loader_sites import loader_site_edits
from ._backend.loaders import loader_definition, loader_instance
from ._backend.model import FollowUp, Graph, Instance, PipelinePlan, Refused
from ._backend.peers import drop_without_peers, fix_groups, peer_of, peers_lost
from ._backend.random_helpers import unshared_reason
from ._backend.recognise import (
    analyse_graph,
    output_values,
    pipeline_count,
    pipeline_decorator,
    returned_values,
)
from ._backend.seeds import rng_seed, unset_seed
from ._backend.site_args import lower_site_args
from ._backend.sites import (
    SharedStatements,
    creation_todos,
    generator_advice,
    pipeline_def_instance_edits,
    propose_pipeline_fix,
    refuse_pipeline,
)
from ._cst import no_space_equal, param_names, truthy
from ._local import collect_nodes


@dataclass
class _Unit:
    """One ``@pipeline_def`` function on its way through the rule."""

    fn: cst.FunctionDef
    graph: Graph = None  # type: ignore[assignment]
    dec_kwargs: dict[str, cst.Arg] = field(default_factory=dict)
    instances: list[Instance] = field(default_factory=list)
    seed_source: str | None = None
    followups: list[FollowUp] = field(default_factory=list)
    notes: list[Diagnostic] = field(default_factory=list)
    written: list[Diagnostic] = field(default_factory=list)
    advice: str = ""
    edits: list[Edit] = field(default_factory=list)
    included: list[str] = field(default_factory=list)
    #: the local rules that rewrote the arguments of its calls (``site_args.py``)
    site_fired: set[str] = field(default_factory=set)
    capture_elsewhere: bool = False
    captured: bool = False


@dataclass
class _Signature:
    """The generator's keyword-only parameters and its ``*``, and the names it gives the batch
    size and the seed; ``device``: the default of its ``device_id`` parameter, if it has one."""

    kwonly: list[cst.Param]
    star: cst.Param | cst.ParamStar | cst.MaybeSentinel
    batch_name: str
    seed_name: str | None
    device: cst.Arg | None


class PipelineDef(Rule):
    id = "DM200"
    name = "pipeline-def"
    summary = "@pipeline_def function and its build/run use sites become a dynamic-mode generator"
    structural = True

    def run(self, state: FileState) -> None:
        ctx = state.ctx
        units: list[_Unit] = []
        for fn, result in self._analysed(state):
            if isinstance(result, Refused):
                refuse_pipeline(state, self.id, fn, result)
                continue
            unit = result
            unit.advice = generator_advice(fn.name.value, graph_outputs_text(ctx, unit.graph))
            unit.site_fired, site_todos = lower_site_args(ctx, unit.instances, state.lowering)
            unit.written = creation_todos(ctx, self.id, unit.instances, unit.followups, unit.advice)
            unit.written += site_todos
            units.append(unit)
        runs = tuple(r for u in units for inst in u.instances for r in inst.runs)
        # where set_num_threads is written already: the blocks of the generators' sites, the
        # (block, text) of the loaders' sites
        threads_set: set[int] = set()
        loader_threads: set[tuple[int, str]] = set()
        shared = SharedStatements()  # pipes = [a(), b()]: one rewrite of the statement for both
        may_capture = _may_capture(ctx)
        taken = False  # DALI 2.4 lets one capture loop be active at a time: the first made gets it
        for unit in sorted(units, key=lambda u: _first_made(ctx, u)):
            alone = may_capture and _capturable_alone(ctx, unit)
            unit.capture_elsewhere = alone and taken
            try:
                unit.edits, unit.included = self._rewrite(
                    state, unit, alone and not taken, runs, (threads_set, loader_threads), shared
                )
                unit.included = sorted({*unit.included, *unit.site_fired})
            except Refused as why:
                refuse_pipeline(state, self.id, unit.fn, why)
                units.remove(unit)
                unit.captured = False
            taken = taken or unit.captured
        for unit in units:
            unit.edits = shared.joined(unit.edits)
        _drop_unshared(state, self.id, units)
        drop_without_peers(state, self.id, units)
        for group in fix_groups(units):
            joined = joined_imports([e for u in group for e in u.edits])
            for unit in group:  # (two loaders' imports at one point: one insertion)
                unit.edits = with_joined(unit.edits, joined)
            try:  # code several of them reach (a call of a definition passed as a value)
                check_disjoint(ctx, [e for u in group for e in u.edits])
            except Refused as why:
                for unit in group:
                    refuse_pipeline(state, self.id, unit.fn, why)
                continue
            self._propose(state, group)

    def _analysed(self, state: FileState) -> list[tuple[cst.FunctionDef, _Unit | Refused]]:
        """Each pipeline definition of the module, analysed. Where the objects of several
        share code (a list of them, a helper that runs either), they are followed there
        together; a definition whose peer is refused is analysed again without it (those uses
        are then its follow-ups)."""
        ctx = state.ctx
        defs = []
        for fn in ctx.nodes_of(cst.FunctionDef):
            dec = pipeline_decorator(ctx, fn) or data_iterator_decorator(ctx, fn)
            if dec is not None:
                state.claimed.append(fn)
                defs.append((fn, dec))
        results: dict[int, _Unit | Refused] = {}
        refused: set[int] = set()
        pending = defs
        while pending:
            for fn, dec in pending:
                unit = _Unit(fn)
                try:
                    unit.graph, unit.dec_kwargs, unit.instances, unit.seed_source = self._analyse(
                        ctx, fn, dec, unit.followups, peer_of(ctx, refused)
                    )
                    results[id(fn)] = unit
                except Refused as why:
                    results[id(fn)] = why
            refused = {id(fn) for fn, _ in defs if isinstance(results[id(fn)], Refused)}
            pending = [d for d in defs if peers_lost(results[id(d[0])], refused)]
        return [(fn, results[id(fn)]) for fn, _ in defs]

    def _propose(self, state: FileState, group: list[_Unit]) -> None:
        """One fix for pipelines whose use sites are shared (``x = a.run()`` then ``x = b.run()``)."""
        ctx = state.ctx
        names = ", ".join(u.fn.name.value for u in group)
        several = len(group) > 1
        message = (
            f"migrate pipeline{'s' if several else ''} {names} and {'their' if several else 'its'} "
            "use sites to dynamic mode"
        )
        if any(needs_of(u.instances).checkpointing for u in group):
            message += f"; {FORMAT_NOTE}"
        for u in group:
            state.claimed += [inst.stmt for inst in u.instances] + u.graph.claimed
            if ctx.project is not None:
                ctx.project.migrated.add(u.fn.name.value)
        first = group[0]
        propose_pipeline_fix(
            state,
            self.id,
            first.fn,
            [e for u in group for e in u.edits],
            message,
            sorted({r for u in group for r in u.included}),
            # pipelines that share code find the same follow-ups there: each is said once
            list({(d.line, d.col, d.message): d for u in group for d in u.notes}.values()),
            [f for u in group for f in u.followups],
            first.advice,
            written=[d for u in group for d in u.written],
        )

    # -- analysis ----------------------------------------------------------------------------
    def _analyse(
        self,
        ctx: FileContext,
        fn: cst.FunctionDef,
        dec: cst.Decorator,
        followups: list[FollowUp],
        peer_of: PeerOf,
    ) -> tuple[Graph, dict[str, cst.Arg], list[Instance], str | None]:
        """The graph (Refused with every reason when it cannot migrate) and the objects created
        from it; uses that cannot be followed go to ``followups``."""
        reasons: list[str] = []
        dec_kwargs = (
            decorator_kwargs(ctx, dec.decorator) if isinstance(dec.decorator, cst.Call) else {}
        )
        config = None  # JAX's @data_iterator(...) configures the iterator each call makes
        if dec is data_iterator_decorator(ctx, fn):
            config, dec_kwargs = dec_kwargs, {}
        reasons += definition_reasons(ctx, fn, dec, dec_kwargs)
        last = fn.body.body[-1] if fn.body.body else None
        ret = (
            last.body[0]
            if isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1
            else None
        )
        outputs = output_values(ret.value) if isinstance(ret, cst.Return) else []
        outputs_stmt = (
            last
            if isinstance(last, cst.SimpleStatementLine) and isinstance(ret, cst.Return)
            else None
        )
        graph = analyse_graph(
            ctx, fn, outputs_stmt, outputs, reasons, returned_values, current_ok=True
        )
        if reasons:
            raise Refused("; ".join(dict.fromkeys(reasons)))
        assert graph is not None
        owner = ctx.parents.get(ctx.parents.get(fn))
        if config is not None:
            instances = data_iterator_instances(ctx, fn, config, followups)
        elif isinstance(owner, cst.ClassDef):
            instances = method_instances(ctx, owner, fn, followups)
        else:
            instances = find_instances(
                ctx, fn, followups, pipeline_args=True, with_handles=True, peer_of=peer_of
            )
        own = own_uses(ctx, fn, instances, followups)
        if own:
            raise Refused("; ".join(own))
        _settle_forms(ctx, fn, graph, dec_kwargs, instances, followups)
        if config is not None and (followups or not all(i.iterators for i in instances)):
            why = "; ".join(dict.fromkeys(f.what for f in followups))
            raise Refused(why or "its iterator is not migrated")
        fed = [u for u in graph.sources if u.kind == "fed"]
        for inst in instances:
            if fed or inst.feeds:
                match_feeds(ctx, inst, fed, followups)
        seed_source = "decorator" if "seed" in dec_kwargs else None
        if seed_source is None and any("seed" in i.kwargs for i in instances):
            seed_source = "call"
            for inst in instances:
                if "seed" not in inst.kwargs:
                    followups.append(
                        FollowUp(inst.call, f"{inst.label} gives no seed=", "pass seed= here too")
                    )
        for inst in instances:
            device = inst.kwargs.get("device_id", dec_kwargs.get("device_id"))
            inst.device_todo = device_todo(ctx, fn, device, inst.label)
            given = set(dec_kwargs) | set(inst.kwargs) | (param_names(fn) & {"batch_size"})
            if not ({"batch_size", "max_batch_size"} & given):
                followups.append(
                    FollowUp(
                        inst.call, f"{inst.label} gives no batch_size=", "pass batch_size= here"
                    )
                )
        return graph, dec_kwargs, instances, seed_source

    # -- rewriting ---------------------------------------------------------------------------
    def _rewrite(
        self,
        state: FileState,
        unit: _Unit,
        capture: bool,
        runs: tuple[cst.Call, ...],
        threads_written: tuple[set[int], set[tuple[int, str]]],
        shared: SharedStatements,
    ) -> tuple[list[Edit], list[str]]:
        """The function and its followed use sites; ``capture``: its loop runs in capture mode
        (the one pipeline of the run that may); ``runs``: the ``run()`` calls of every pipeline
        of the module (outputs bound by several of them are followed from each). Where some
        objects are iterated by a framework iterator and others run (or made) directly, the
        function stays a generator for the latter and a loader class is written for the former:
        each use site is rewritten for its own kind."""
        ctx = state.ctx
        fn, graph, instances, notes = unit.fn, unit.graph, unit.instances, unit.notes
        needs = needs_of(instances)
        loader = loader_instance(instances)  # iterated: a loader class
        defs: list[cst.BaseStatement] = []
        loader_edits: list[Edit] = []
        cls: str | None = None
        kept_loader: set[str] = set()
        fired: list[str] = []
        if loader is not None:
            iterated = [i for i in instances if i.iterators]
            try:
                params, body, kept_loader, fired = self._emitted(
                    state, unit, capture, needs, loader, iterated
                )
                defs, loader_edits, cls = loader_definition(ctx, fn, graph, body, params, loader)
                notes += dropin_note(ctx, self.id, loader.iterators[0], cls)
            except Refused as why:
                if len(iterated) == len(instances):
                    raise
                # the generator the others get stays; the iterators keep their code, with a TODO
                for inst in iterated:
                    abandon_iterators(inst, str(why), unit.followups)
                loader, kept_loader, fired = None, set(), []
        kept = kept_loader
        bare = [i for i in instances if loader is None or not i.iterators]
        if loader is None or bare:  # (the last emitted: graph.handles are the generator's)
            params, body, kept, more = self._emitted(state, unit, capture, needs, None, bare)
            fired = sorted({*fired, *more})
            body = wrap_body(ctx, body, graph, needs)  # the reader or checkpoint for the sites
            defs = [_generator_def(fn, params, body), *_apart(ctx, fn, defs)]
        name_handles(ctx, instances, needs)
        kept_loader = kept_loader | ({RESTORE_PARAM} if needs.restore else set())
        kept = kept | ({RESTORE_PARAM} if needs.restore else set())
        edits = [ctx.stmt_edit(fn, defs), *graph.extra_edits, *loader_edits]
        edits += self._site_edits(
            ctx, unit, cls, (kept, kept_loader), runs, threads_written, shared
        )
        # the outputs of two instances' runs in one scope are found from each of them
        edits = list({(e.start, e.end, e.text): e for e in edits}.values())
        check_disjoint(ctx, edits)
        notes[:] = list({(d.line, d.col, d.message): d for d in notes}.values())
        return edits, fired

    def _emitted(
        self,
        state: FileState,
        unit: _Unit,
        capture: bool,
        needs: Needs,
        loader: Instance | None,
        sites: list[Instance],
    ) -> tuple[cst.Parameters, list[cst.BaseStatement], set[str], list[str]]:
        """The parameters and body of the generator (``loader``: of the loader class made from
        it) that the objects ``sites`` get; the parameters their calls keep; the local rules
        that fired."""
        ctx, fn, graph = state.ctx, unit.fn, unit.graph
        sig = self._signature(ctx, unit, needs, loader)
        plan = self._plan(state, unit, capture, sig, needs, loader)
        # callables the caller passes as arguments: the graph code may call them
        batch = cst.Module([]).code_for_node(plan.batch_size)
        graph.handed = Handed({p: p for p in param_names(fn)}, f"{fn.name.value}(...)", batch)
        body, fired = emit_generator_body(ctx, graph, plan, unit.notes)
        unit.captured = unit.captured or plan.captured
        existing = param_names(fn)
        if plan.device_applied:  # the call sites keep their device_id=, the generator takes it
            existing = existing | {"device_id"}
            for inst in sites:
                inst.device_todo = None
        elif "device_id" in graph.current.attrs:  # the graph code reads it
            existing = existing | {"device_id"}
        elif sig.device is not None:  # the loop's shape kept the TODO: no parameter for nothing
            sig.kwonly = [p for p in sig.kwonly if p.name.value != "device_id"]
            sig.star = fn.params.star_arg if not sig.kwonly else sig.star
        params = fn.params.with_changes(kwonly_params=sig.kwonly, star_arg=sig.star)
        return params, body, existing, fired

    def _signature(
        self, ctx: FileContext, unit: _Unit, needs: Needs, loader: Instance | None
    ) -> _Signature:
        """The keyword-only parameters the function gains (Refused where it has one of that
        name already) and the names of its batch size and seed."""
        fn, graph, dec_kwargs = unit.fn, unit.graph, unit.dec_kwargs
        existing = param_names(fn)
        new_params, batch_name, seed_name = pipeline_params(fn, dec_kwargs, unit.seed_source)
        if "batch_size" in existing and "batch_size" not in dec_kwargs:
            unit.notes.append(ctx.info(self.id, fn, UNSET_BATCH_NOTE))
        if needs.restore:
            # p(..., checkpoint=cpt) restores, as the pipeline's checkpoint= argument did
            new_params.append((RESTORE_PARAM, cst.Arg(cst.Name("None"))))
        reads = "device_id" in graph.current.attrs  # Pipeline.current().device_id
        read_default = current_device(ctx, fn, graph, dec_kwargs) if reads else None
        device = device_param(fn, dec_kwargs, unit.instances, loader, shadowed=not reads)
        if device is not None:
            new_params.append(("device_id", device))
        if device is None and read_default is not None:  # the call sites' device_id= then
            new_params.append(("device_id", read_default))
        kwonly = list(fn.params.kwonly_params)
        for pname, default in new_params:
            if pname in existing:
                raise Refused(f"the pipeline function already has a parameter named {pname}")
            kwonly.append(
                cst.Param(
                    cst.Name(pname),
                    default=default.value if default is not None else None,
                    equal=no_space_equal() if default is not None else cst.MaybeSentinel.DEFAULT,
                )
            )
        star = fn.params.star_arg
        if star is cst.MaybeSentinel.DEFAULT and kwonly:
            star = cst.ParamStar()
        return _Signature(kwonly, star, batch_name, seed_name, device)

    def _plan(
        self,
        state: FileState,
        unit: _Unit,
        capture: bool,
        sig: _Signature,
        needs: Needs,
        loader: Instance | None,
    ) -> PipelinePlan:
        """What the generator of ``unit`` is to be, for the emitter (``loader``: the instance a
        loader class replaces, if any)."""
        ctx, fn, dec_kwargs, instances = state.ctx, unit.fn, unit.dec_kwargs, unit.instances
        branches = has_data_branches(ctx, fn.body, collect_nodes(ctx, fn))
        return PipelinePlan(
            rule_id=self.id,
            passes=loader is not None,
            batch_size=cst.Name(sig.batch_name),
            seed=_seed(sig.seed_name, dec_kwargs, instances),
            single_use=capture,
            capture_elsewhere=not capture and unit.capture_elsewhere,
            dropped=dropped_comments(
                ctx, [dec_kwargs] + [i.kwargs for i in instances], branches=branches
            )
            + dropped_checkpointing(truthy(dec_kwargs.get("enable_checkpointing")), needs),
            reader_meta=needs.reader,
            checkpointing=needs.checkpointing,
            lowering=state.lowering,
            helper_hosts=[
                f
                for f in ctx.nodes_of(cst.FunctionDef)
                if f is not fn and pipeline_decorator(ctx, f)
            ],
            device=cst.Name("device_id") if sig.device is not None else None,
            device_turns=loader is not None and loader.iterators[0].devices is not None,
            current=current_values(
                unit.graph, dec_kwargs, instances, sig.batch_name, sig.seed_name
            ),
        )

    def _site_edits(
        self,
        ctx: FileContext,
        unit: _Unit,
        loader_cls: str | None,
        kept: tuple[set[str], set[str]],
        runs: tuple[cst.Call, ...],
        threads_written: tuple[set[int], set[tuple[int, str]]],
        shared: SharedStatements,
    ) -> list[Edit]:
        """The edits of each use site: of a plain generator, or of the loader class
        ``loader_cls`` where the pipeline was iterated by a framework iterator (``kept``: the
        parameters the calls keep, of the generator and of the loader)."""
        dec_kwargs, notes = unit.dec_kwargs, unit.notes
        threads_set, loader_threads = threads_written
        edits: list[Edit] = []
        for inst in unit.instances:
            if loader_cls is not None and inst.iterators:
                threads = dec_kwargs.get("num_threads")
                edits += loader_site_edits(
                    ctx, inst, loader_cls, self.id, threads, kept[1], notes, loader_threads
                )
                continue
            peers = tuple(r for r in runs if not any(r is own for own in inst.runs))
            edits += pipeline_def_instance_edits(
                ctx,
                inst,
                self.id,
                dec_kwargs.get("num_threads"),
                kept[0],
                notes,
                peers=peers,
                threads_set=threads_set,
                shared=shared,
            )
        return edits


def _generator_def(
    fn: cst.FunctionDef, params: cst.Parameters, body: list[cst.BaseStatement]
) -> cst.FunctionDef:
    """The pipeline function as a generator: no decorator (the comments above it stay above
    the function)."""
    new_fn = fn.with_changes(decorators=[], params=params, body=fn.body.with_changes(body=body))
    if fn.decorators:
        new_fn = new_fn.with_changes(
            leading_lines=list(fn.leading_lines) + list(fn.decorators[0].leading_lines)
        )
    return new_fn


def _apart(
    ctx: FileContext, fn: cst.FunctionDef, defs: list[cst.BaseStatement]
) -> list[cst.BaseStatement]:
    """The loader class (and its helpers) written after the generator: blank lines above each
    in place of the function's comments, which stay above the generator."""
    blank = [cst.EmptyLine(indent=False)] * (
        2 if isinstance(ctx.parents.get(fn), cst.Module) else 1
    )
    return [d.with_changes(leading_lines=blank) for d in defs]


def _drop_unshared(state: FileState, rule_id: str, units: list[_Unit]) -> None:
    """A helper with random operators shared by several pipelines now takes the RNG: each
    pipeline that calls it is migrated (by one fix, found by ``_groups``) only if all are."""
    dropped = True
    while dropped:
        dropped = False
        hosts: list[cst.CSTNode] = [u.fn for u in units]
        for unit in list(units):
            why = unshared_reason(state.ctx, unit.graph.claimed, hosts)
            if why is not None:
                refuse_pipeline(state, rule_id, unit.fn, Refused(why))
                units.remove(unit)
                dropped = True


def _settle_forms(
    ctx: FileContext,
    fn: cst.FunctionDef,
    graph: Graph,
    dec_kwargs: dict[str, cst.Arg],
    instances: list[Instance],
    followups: list[FollowUp],
) -> None:
    """The function returns more than a generator of batches (the reader or a checkpoint with
    it, or the epochs of a framework iterator) only where every use of it is rewritten: uses
    that need such a form and cannot have it become follow-ups."""
    enabled = truthy(dec_kwargs.get("enable_checkpointing"))
    handles_why = handle_reasons(ctx, graph, instances, enabled, param_names(fn))
    iterators_why = iterator_reasons(ctx, graph, instances)
    if "batch_size" in param_names(fn) and "batch_size" in dec_kwargs:
        iterators_why.append(
            "the pipeline's batch size is the decorator's, not the parameter batch_size: "
            "a loader class would confuse them"
        )
    elsewhere = fn.name.value in getattr(ctx.project, "external_uses", {})
    if elsewhere or followups or not all(i.followed for i in instances):
        where = "other modules" if elsewhere else "places the tool cannot follow"
        shared = f"the pipeline is also used in {where}, so it stays a plain generator of batches"
        if elsewhere or followups or not all(i.followed or i.relayed for i in instances):
            handles_why.setdefault(0, shared)  # (handles follow it through factories)
        iterators_why.append(shared)
    if any(i.through_value for i in instances):  # the code that calls it runs others too
        passed = "the pipeline function is passed as a value, so it stays a plain generator"
        handles_why.setdefault(0, passed)
        # where only this definition reaches the call that makes an iterated pipeline, the
        # loader class is made there, and the function stays a generator for the other calls
        peered = [i for i in instances if i.iterators and i.through_value and i.value_peers]
        handed = [i for i in instances if i.iterators and i.through_value and i.value_param]
        if peered:
            iterators_why.append(
                f"`{ctx.text(peered[0].call.func)}` may be another pipeline definition where the "
                "pipeline is made: one loader class cannot stand for them all"
            )
        elif handed:
            iterators_why.append(
                f"`{ctx.text(handed[0].call.func)}` gets the pipeline function through a "
                "parameter, which code the tool does not see may give another one"
            )
    for inst in instances:
        if handles_why and (
            needs_of([inst]).handles or inst.resets or RESTORE_PARAM in inst.kwargs
        ):
            abandon_handles(inst, handles_why, followups)
        if inst.iterators and iterators_why:
            abandon_iterators(inst, iterators_why[0], followups)


def _may_capture(ctx: FileContext) -> bool:
    """A ``@pipeline_def`` loop of this module may run in capture mode: the module defines no
    ``Pipeline`` objects or subclasses besides (their loops would be active alongside)."""
    decorated = sum(pipeline_decorator(ctx, fn) is not None for fn in ctx.nodes_of(cst.FunctionDef))
    return pipeline_count(ctx) == decorated


def _first_made(ctx: FileContext, unit: _Unit) -> int:
    """The line where the pipeline is first made (units never made go last)."""
    return min((ctx.positions[i.stmt].start.line for i in unit.instances), default=1 << 30)


def _capturable_alone(ctx: FileContext, unit: _Unit) -> bool:
    """The pipeline is made once, here, and every use of it is followed; one used in other
    modules too only when the cross-module plan gives it the capture loop of the program."""
    if ctx.project is not None and _used_elsewhere(ctx, unit.fn):
        name = unit.fn.name.value
        return (
            not (unit.instances or unit.followups or ctx.project.external_uses[name])
            and name in ctx.project.capture
        )
    if unit.followups or not unit.instances or not all(i.followed for i in unit.instances):
        return False
    return sum(i.copies for i in unit.instances) == 1


def _used_elsewhere(ctx: FileContext, fn: cst.FunctionDef) -> bool:
    return ctx.project is not None and fn.name.value in ctx.project.external_uses


def _seed(
    name: str | None, dec_kwargs: dict[str, cst.Arg], instances: list[Instance]
) -> cst.BaseExpression | None:
    """The RNG's seed: the generator's seed parameter, guarded where the decorator or a call
    gives it DALI's "no seed" (-1, None)."""
    if name is None:
        return None
    given = [dec_kwargs.get("seed")] + [i.kwargs.get("seed") for i in instances]
    unset = any(a is not None and unset_seed(a.value) for a in given)
    return rng_seed(cst.Name(name), may_be_unset=unset)
