"""DM202 pipeline-class: a ``Pipeline`` subclass with ``define_graph`` (the legacy class API,
``ops.*`` objects created in ``__init__`` and called in ``define_graph``) becomes a dynamic-mode
generator function of the same name, so ``pipe = TrainPipe(...)`` keeps working.

Before (``fixtures/DM202/legacy_ops.in.py``)::

    \"\"\"ResNet-style training input, written with the legacy class API.\"\"\"
    import nvidia.dali.ops as ops
    import nvidia.dali.types as types
    from nvidia.dali.pipeline import Pipeline


    class HybridTrainPipe(Pipeline):
        def __init__(self, batch_size, num_threads, device_id, data_dir, crop):
            super(HybridTrainPipe, self).__init__(batch_size, num_threads, device_id, seed=12 + device_id)
            self.input = ops.FileReader(file_root=data_dir, shard_id=device_id, num_shards=1, random_shuffle=True)
            self.decode = ops.ImageDecoder(device="mixed", output_type=types.RGB)
            self.res = ops.RandomResizedCrop(device="gpu", size=crop, random_area=[0.08, 1.25])
            self.cmnp = ops.CropMirrorNormalize(
                device="gpu",
                dtype=types.FLOAT,
                output_layout=types.NCHW,
                crop=(crop, crop),
                mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
            )
            self.coin = ops.CoinFlip(probability=0.5)

        def define_graph(self):
            rng = self.coin()
            self.jpegs, self.labels = self.input(name="Reader")
            images = self.decode(self.jpegs)
            images = self.res(images)
            output = self.cmnp(images.gpu(), mirror=rng)
            return [output, self.labels]


    pipe = HybridTrainPipe(batch_size=256, num_threads=4, device_id=0, data_dir="/data/train", crop=224)
    pipe.build()
    for _ in range(10):
        images, labels = pipe.run()

After (``fixtures/DM202/legacy_ops.out.py``)::

    \"\"\"ResNet-style training input, written with the legacy class API.\"\"\"
    import nvidia.dali.experimental.dynamic as ndd
    import nvidia.dali.types as types


    def HybridTrainPipe(batch_size, num_threads, device_id, data_dir, crop):
        \"\"\"Yields (output, labels) batches epoch after epoch, without end, as Pipeline.run() did.\"\"\"
        reader = ndd.readers.File(
            file_root=data_dir,
            shard_id=device_id,
            num_shards=1,
            random_shuffle=True,
            seed=12 + device_id,
        )
        rng_ = ndd.random.RNG(seed=12 + device_id)
        # capture=True: runs the loop as one prebuilt graph; one such loop can be active at a time
        while True:
            for jpegs, labels in reader.next_epoch(batch_size=batch_size, capture=True):
                rng = ndd.random.coin_flip(batch_size=jpegs.batch_size, probability=0.5, rng=rng_)
                images = ndd.decoders.image(jpegs, device="gpu", output_type=types.RGB)
                images = ndd.random_resized_crop(
                    images, device="gpu", size=crop, random_area=[0.08, 1.25], rng=rng_
                )
                output = ndd.crop_mirror_normalize(
                    images.gpu(),
                    device="gpu",
                    dtype=types.FLOAT,
                    output_layout=types.NCHW,
                    crop=(crop, crop),
                    mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                    std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
                    mirror=rng,
                )
                yield output, labels


    ndd.set_num_threads(4)
    pipe = HybridTrainPipe(batch_size=256, num_threads=4, device_id=0, data_dir="/data/train", crop=224)
    for _ in range(10):
        images, labels = next(pipe)

How: ``__init__`` and ``define_graph`` are merged into one graph function (each call of an
operator object becomes the operator call with the object's arguments; ``self.x`` attributes
become local names), which the back end shared with DM200 migrates. Methods are looked up
through base classes defined in the same file, and the ``__init__`` of such a base is inlined
where the subclass calls it (``_backend/class_init.py``), so a hierarchy migrates class by class:
one function per class that is instantiated, the bases gone once no class derives from them.
Operator objects made under an ``if`` in ``__init__`` are called under the same condition,
helper methods ``define_graph`` calls become functions of the body,
``iter_setup`` + ``feed_input`` become code of the loop (``_backend/class_merge.py``,
``_backend/iter_setup.py``). ``pipe.epoch_size(...)``/``reader_meta(...)`` read the reader's
metadata as for DM200 (``_backend/class_handles.py``); checkpoints keep a TODO. Uses of the objects
the tool cannot rewrite get a TODO where they stand, as for DM200. A callable the caller passes to
``__init__`` (``self.augment = augment``) that ``define_graph`` calls, on data, for its data or
element by element, is called as written, once per batch, with a TODO above the call saying what
it must take and return now (``_backend/handed.py``); outputs gathered in a list by appending
(``views.append(...)``; ``return views``) are yielded as ``tuple(views)``
(``_backend/list_outputs.py``).

Decoder classes DALI removed migrate as the class that replaced each with the same
implementation (``dali_migrate.catalog.REMOVED_OPS_CLASSES``)::

    ops.nvJPEGDecoder, ops.HostDecoder                      ->  ops.ImageDecoder
    ops.nvJPEGDecoderCrop, ops.HostDecoderCrop              ->  ops.ImageDecoderCrop
    ops.nvJPEGDecoderRandomCrop, ops.HostDecoderRandomCrop  ->  ops.ImageDecoderRandomCrop
    ops.nvJPEGDecoderSlice, ops.HostDecoderSlice            ->  ops.ImageDecoderSlice

so ``ops.nvJPEGDecoder(device="mixed")`` becomes ``ndd.decoders.image(..., device="gpu")``.

Safety: safe. Random values differ from the old pipeline's, as for DM200.
"""

from __future__ import annotations

from typing import TypeAlias

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import TODO_PREFIX, Diagnostic, Edit
from dali_migrate.project import SUBCLASSED
from dali_migrate.rules import FileState, Rule

from ._backend.arguments import (
    device_todo,
    dropped_comments,
    is_unset,
    set_threads_stmt,
)
from ._backend.branch_peers import class_peer_of
from ._backend.class_family import (
    base_names,
    bases_of_refused,
    class_methods,
    dead_factories,
    defines_graph,
    pipeline_chain,
    references_outside,
    removed_def,
    used_outside,
)
from ._backend.class_graph import graph_function
from ._backend.class_handles import settle_class_handles, unpacked
from ._backend.class_init import flat_init
from ._backend.class_loaders import (
    batch_size_reason,
    loader_args,
    settle_iterators,
    unused_pipeline_params,
    with_batch_size,
    without_params,
)
from ._backend.class_merge import LOOP_METHODS, NOT_MERGED, Merger
from ._backend.class_sites import (
    call_site_value,
    class_seed,
    device_named,
    device_todo_at,
    site_view,
)
from ._backend.conditionals import has_data_branches
from ._backend.edits import check_disjoint, removed_stmt
from ._backend.emit import emit_generator_body
from ._backend.fed_loaders import carried_note, fed_iterators
from ._backend.handed import Handed
from ._backend.handles import abandon_handles, name_handles, wrap_body
from ._backend.instances import find_instances, own_uses
from ._backend.iterator_checks import abandon_iterators
from ._backend.iterator_consumers import dropin_note
from ._backend.loader_sites import loader_site_edits
from ._backend.loaders import loader_definition, loader_instance
from ._backend.model import FollowUp, Graph, Instance, PipelinePlan, Refused
from ._backend.recognise import pipeline_count
from ._backend.site_args import lower_site_args, with_site_call
from ._backend.sites import (
    creation_todos,
    device_todo_line,
    propose_pipeline_fix,
    refuse_pipeline,
    run_site_edits,
)
from ._cst import (
    comment_line,
    free_names,
    names_in,
)
from ._local import collect_nodes

#: a class of a family migrated: its edits, the rules that fired, its instances, and its
#: notes, follow-ups and TODOs written
_Migrated: TypeAlias = tuple[
    cst.ClassDef,
    list[Edit],
    list[str],
    list[Instance],
    tuple[list[Diagnostic], list[FollowUp], list[Diagnostic]],
]


class PipelineClass(Rule):
    id = "DM202"
    name = "pipeline-class"
    summary = "Pipeline subclass with define_graph (ops.* objects) becomes a dynamic-mode generator function"
    structural = True

    def run(self, state: FileState) -> None:
        ctx = state.ctx
        classes = {c.name.value: c for c in ctx.nodes_of(cst.ClassDef)}
        chains = {name: pipeline_chain(ctx, c, classes) for name, c in classes.items()}
        bases = {name for c in classes.values() for name in base_names(c)}
        # classes that others derive from migrate together with them, as one fix per family
        families: dict[str, list[tuple[cst.ClassDef, list[cst.ClassDef]]]] = {}
        for name, cls in classes.items():
            chain = chains[name]
            if chain is not None and name not in bases:
                families.setdefault(chain[-1].name.value, []).append((cls, chain))
        for leaves in families.values():
            members = list({id(c): c for _, chain in leaves for c in chain}.values())
            # a base also used by itself (instantiated, named) migrates as well
            leaf_ids = {id(c) for c, _ in leaves}
            used = [
                (c, chains[c.name.value])
                for c in members
                if id(c) not in leaf_ids and used_outside(ctx, c, members)
            ]
            leaves += [(c, chain) for c, chain in used if chain and defines_graph(chain)]
            abstract = [c for c, chain in used if not defines_graph(chain or [])]
            state.claimed += members
            self._family(state, leaves, members, abstract)

    def _family(
        self,
        state: FileState,
        leaves: list[tuple[cst.ClassDef, list[cst.ClassDef]]],
        members: list[cst.ClassDef],
        abstract: list[cst.ClassDef],
    ) -> None:
        """One fix for the classes of a family that migrate; a TODO at each other one. The bases
        go when every class deriving from them migrated."""
        ctx = state.ctx
        edits: list[Edit] = []
        fired: set[str] = set()
        notes: list[Diagnostic] = []
        followups: list[FollowUp] = []
        written: list[Diagnostic] = []
        done: list[cst.ClassDef] = []
        self.factories: set[str] = set()
        self.members = members
        migrated, refused = self._each(state, leaves)
        for cls, why in refused:
            which = f" (class {cls.name.value})" if len(members) > 1 else ""
            refuse_pipeline(state, self.id, cls, why, which)
        for cls, cls_edits, cls_fired, instances, mine in migrated:
            state.claimed += [i.stmt for i in instances]
            edits += cls_edits
            fired |= set(cls_fired)
            notes += mine[0]
            followups += mine[1]
            written += mine[2]
            done.append(cls)
        if not done:
            return
        names = ", ".join(c.name.value for c in done)
        if len(done) == len(leaves):
            leaf_ids = {id(c) for c, _ in leaves}
            gone = [c for c in members if id(c) not in leaf_ids and c not in abstract]
            edits += [removed_stmt(ctx, c) for c in gone]
            edits += [removed_def(ctx, f) for f in dead_factories(ctx, self.factories, members)]
            for base in abstract:  # kept: still named elsewhere, but no longer their base
                name = base.name.value
                what = f"`{name}` is no longer a base class of {names}"
                kept = FollowUp(base, f"{what}; it stays for its uses", "delete it once they are")
                followups.append(kept)
                advice = f"{names}(...) make generators now: rewrite this use"
                followups += [
                    FollowUp(n, what, advice) for n in references_outside(ctx, base, members)
                ]
        try:
            check_disjoint(ctx, edits)
        except Refused as why:
            for cls in done:
                refuse_pipeline(state, self.id, cls, why)
            return
        if ctx.project is not None:  # the other modules' call sites follow (DM204)
            ctx.project.migrated.update(c.name.value for c in done)
        message = f"migrate pipeline class {names} and its use sites to dynamic mode"
        advice = (
            f"{names}(...) returns a generator of batches now, not a Pipeline: take each batch "
            "with next(...), and drop build()"
        )
        propose_pipeline_fix(
            state,
            self.id,
            done[0],
            edits,
            message,
            sorted(fired),
            notes,
            followups,
            advice,
            written=written,
        )

    def _each(
        self, state: FileState, leaves: list[tuple[cst.ClassDef, list[cst.ClassDef]]]
    ) -> tuple[list[_Migrated], list[tuple[cst.ClassDef, str]]]:
        """Each class of the family migrated, or refused with its reason. A class that a refused
        one derives from is refused too: the class would derive from the function it becomes.
        A class whose objects share code with a refused one's (``branch_peers``) is migrated
        again without it as a peer (that code keeps its TODO)."""
        self.leaves = [cls for cls, _ in leaves]
        self.excluded: set[int] = set()
        results = {id(cls): self._one(state, cls, chain) for cls, chain in leaves}
        while True:
            refused_ids = {k for k, r in results.items() if isinstance(r, str)}
            again = [
                (cls, chain)
                for cls, chain in leaves
                if any(id(p) in refused_ids for p in _peers(results[id(cls)]))
            ]
            if not again:
                break
            self.excluded = refused_ids
            results.update((id(cls), self._one(state, cls, chain)) for cls, chain in again)
        migrated = [r for r in results.values() if not isinstance(r, str)]
        refused = [(c, chain, r) for c, chain in leaves if isinstance(r := results[id(c)], str)]
        bases = bases_of_refused(refused)
        kept = [m for m in migrated if id(m[0]) not in bases]
        return kept, [(c, why) for c, _, why in refused] + [
            (m[0], bases[id(m[0])]) for m in migrated if id(m[0]) in bases
        ]

    def _one(
        self, state: FileState, cls: cst.ClassDef, chain: list[cst.ClassDef]
    ) -> _Migrated | str:
        """The class migrated, or why it is not."""
        mine: tuple[list[Diagnostic], list[FollowUp], list[Diagnostic]] = ([], [], [])
        try:
            cls_edits, cls_fired, instances = self._migrate(state, cls, chain, *mine)
            check_disjoint(state.ctx, cls_edits)  # identical edits count once
        except Refused as why:
            return str(why)
        return (cls, cls_edits, cls_fired, instances, mine)

    def _migrate(
        self,
        state: FileState,
        cls: cst.ClassDef,
        chain: list[cst.ClassDef],
        notes: list[Diagnostic],
        followups: list[FollowUp],
        written: list[Diagnostic],
    ) -> tuple[list[Edit], list[str], list[Instance]]:
        ctx = state.ctx
        reasons: list[str] = []
        init, merged, body_stmts = self._merge(ctx, cls, chain, reasons, notes)
        kwargs = merged.kwargs
        instances = find_instances(
            ctx,
            cls,
            followups,
            pipeline_args=False,
            with_handles=True,
            peer_of=class_peer_of(ctx, [c for c in self.leaves if id(c) not in self.excluded], cls),
        )
        # a base that is also used by itself: the classes deriving from it migrate with it
        bases = {id(a.value) for c in self.members for a in c.bases}
        followups[:] = [f for f in followups if id(f.node) not in bases]
        for member in self.members:  # the classes of a family are rewritten or refused together
            reasons += own_uses(ctx, member, instances, followups)
        derived = _derived_elsewhere(ctx, cls)
        if derived:
            reasons.append(f"other modules derive classes from it ({'; '.join(derived)})")
        if used_elsewhere(ctx, cls):  # its other modules' call sites take a generator of batches
            for inst in instances:
                abandon_handles(inst, {0: ELSEWHERE}, followups)
                abandon_iterators(inst, ELSEWHERE, followups)
        batch_size = kwargs.get("batch_size") or kwargs.get("max_batch_size")
        if batch_size is None or is_unset(batch_size.value):
            reasons.append("the Pipeline constructor gets no batch_size")
        if reasons:
            raise Refused("; ".join(dict.fromkeys(reasons)))
        assert batch_size is not None
        mini, mini_fn, params, graph, conditionals = graph_function(
            ctx, cls, init, body_stmts, kwargs, reasons
        )
        needs = settle_class_handles(ctx, graph, instances, followups)
        if merged.handed:  # callables the caller passes: the graph code may call them
            batch = cst.Module([]).code_for_node(batch_size.value)
            graph.handed = Handed(merged.handed, f"{cls.name.value}(...)", batch)
        # a framework iterator over the class's object: the class becomes a loader class
        why, batch_stmt = batch_size_reason(batch_size.value, names_in(mini_fn))
        fed_iterators(instances, kwargs, init, merged.methods)  # (fed in iter_setup)
        loader = settle_iterators(ctx, graph, instances, followups, why)
        advice = (
            f"{cls.name.value}(...) returns a generator of batches now, not a Pipeline: take each "
            "batch with next(...)"
        )
        site_fired, site_todos = lower_site_args(ctx, instances, state.lowering)
        written += creation_todos(ctx, self.id, instances, followups, advice) + site_todos
        seed = kwargs.get("seed")
        device = kwargs.get("device_id")
        todo = device_todo(mini, mini_fn, device, f"{cls.name.value}(...)")
        mini_notes: list[Diagnostic] = []
        branches = conditionals and has_data_branches(
            mini, mini_fn.body, collect_nodes(mini, mini_fn)
        )
        plan = PipelinePlan(
            rule_id=self.id,
            passes=loader is not None,
            batch_size=cst.Name("batch_size") if loader and batch_stmt else batch_size.value,
            seed=class_seed(seed, mini_fn.params, instances),
            dropped=dropped_comments(ctx, [kwargs], branches=branches),
            single_use=self._single_use(ctx, chain, instances, followups),
            lowering=state.lowering,
            reader_meta=needs.reader,
            device=device.value
            if todo
            and device
            and device_named(params, instances, device.value)
            and _visible(ctx, cls, mini, mini_fn, device.value)
            else None,
            device_turns=loader is not None and loader.iterators[0].devices is not None,
            helper_home=(ctx, chain),
        )
        body, fired = emit_generator_body(mini, graph, plan, mini_notes)
        state.claimed += graph.claimed  # the file's helpers, now taking the RNG
        fired = sorted({*fired, *site_fired})
        todo = None if plan.device_applied else todo
        # what the back end noted is about the class (the small module's lines mean nothing here)
        notes += [
            Diagnostic(self.id, d.message, ctx.first_line(cls), 0, d.severity) for d in mini_notes
        ]
        leading = list(cls.leading_lines)
        if todo and not instances:  # the callers pass the device: with none in sight, say it here
            leading.append(comment_line(f"{TODO_PREFIX} {self.id}: {todo}"))
            notes.append(Diagnostic(self.id, todo, ctx.first_line(cls), 0, "todo"))
        if loader is not None:
            body = with_batch_size(body, batch_stmt)
            loader_edits = self._loader_edits(
                ctx, cls, params, kwargs, graph, body, instances, notes, todo is not None
            )
            return [*loader_edits, *graph.extra_edits], fired, instances
        body = wrap_body(mini, body, graph, needs)  # the reader for the call sites
        name_handles(ctx, instances, needs)
        new_fn = _generator_def(cls, init, params, body, leading)
        if (
            used_elsewhere(ctx, cls)
            and _param_names(new_fn.params) != _param_names(init.params)[1:]
        ):
            raise Refused(
                "other modules make it with its __init__'s arguments, which the function it "
                "would become does not take"
            )
        edits: list[Edit] = [Edit(*ctx.stmt_span(cls), mini.render(new_fn, ctx.indents(cls)))]
        for inst in instances:
            edits += self._instance_edits(ctx, inst, params, kwargs, notes, todo is not None)
        return [*edits, *graph.extra_edits], fired, instances

    def _merge(
        self,
        ctx: FileContext,
        cls: cst.ClassDef,
        chain: list[cst.ClassDef],
        reasons: list[str],
        notes: list[Diagnostic],
    ) -> tuple[cst.FunctionDef, Merger, list[cst.BaseStatement]]:
        """``__init__`` (the bases' inlined), the merger of the class's methods and the body it
        made; Refused where the class has no graph to merge."""
        methods = class_methods(chain)
        init, graph_fn = methods.get("__init__"), methods.get("define_graph")
        blocked = sorted(set(methods) & set(NOT_MERGED))
        reasons += [NOT_MERGED[m] for m in blocked]
        if init is None or graph_fn is None:
            reasons.append("it lacks __init__ or define_graph")
            raise Refused("; ".join(reasons))
        # the __init__s of the bases in this file inlined where they are called
        flat = flat_init(chain, reasons)
        if flat is None and len(chain) > 1 and reasons:
            raise Refused("; ".join(reasons))  # the rest would only follow from it
        init = flat or init
        if cls.decorators:
            reasons.append("it has decorators")
        star = init.params.star_arg
        if init.params.posonly_params or isinstance(star, cst.Param) or init.params.star_kwarg:
            reasons.append("__init__ takes *args, **kwargs or positional-only parameters")

        merged = Merger(ctx, reasons, methods)
        body_stmts = merged.merge(init, graph_fn)
        self.factories |= merged.factories
        merged_methods = {"__init__", "define_graph", *LOOP_METHODS, *blocked}
        merged_methods |= {*merged.helpers, *merged.inlined}
        dropped = sorted(set(methods) - merged_methods)
        if dropped:
            notes.append(
                ctx.info(
                    self.id,
                    cls,
                    f"methods {', '.join(dropped)} of {cls.name.value} are not carried over: "
                    "their callers get a TODO",
                )
            )
        return init, merged, body_stmts

    def _single_use(
        self,
        ctx: FileContext,
        chain: list[cst.ClassDef],
        instances: list[Instance],
        followups: list[FollowUp],
    ) -> bool:
        """The class is made once, every use of it is followed, and it is the one pipeline of
        the module: its loop may run in capture mode."""
        return (
            not followups
            and sum(i.copies for i in instances) == 1
            and len(chain) == 1
            and len(self.members) == 1
            and pipeline_count(ctx) == 1
            and not used_elsewhere(ctx, chain[0])
        )

    def _instance_edits(
        self,
        ctx: FileContext,
        inst: Instance,
        params: cst.Parameters,
        kwargs: dict[str, cst.Arg],
        notes: list[Diagnostic],
        gpu: bool,
    ) -> list[Edit]:
        """``pipe = TrainPipe(...)``: ``ndd.set_num_threads`` before it, a TODO when the device it
        asks for is dropped (``gpu``: the pipeline uses the GPU), then its run sites."""
        threads, device = kwargs.get("num_threads"), kwargs.get("device_id")
        value = (
            call_site_value(params, site_view(params, inst), threads.value)
            if threads is not None
            else None
        )
        lines = list(inst.stmt.leading_lines)
        stmts: list[cst.BaseStatement] = []
        after = list(inst.todo_lines)
        if value is not None and not is_unset(value):
            # before the pipeline is created, never while another one has work in flight
            stmts.append(set_threads_stmt(ctx, cst.Arg(value)).with_changes(leading_lines=lines))
            lines = []
        elif threads is not None and not is_unset(threads.value):
            text = (
                "num_threads could not be followed to this call: ndd uses its default thread count"
            )
            notes.append(ctx.info(self.id, inst.stmt, text))
        if device_todo_at(ctx, inst, params, device, gpu):
            lines.append(device_todo_line(ctx, inst, self.id, notes))
        edits: list[Edit] = []
        stmt = with_site_call(unpacked(inst) if inst.handle_names else inst.stmt, inst)
        if stmts or after or lines != list(inst.stmt.leading_lines) or stmt is not inst.stmt:
            stmts.append(stmt.with_changes(leading_lines=lines + after))
            edits.append(ctx.stmt_edit(inst.stmt, stmts))
        return edits + run_site_edits(ctx, inst, notes)

    def _loader_edits(
        self,
        ctx: FileContext,
        cls: cst.ClassDef,
        params: cst.Parameters,
        kwargs: dict[str, cst.Arg],
        graph: Graph,
        body: list[cst.BaseStatement],
        instances: list[Instance],
        notes: list[Diagnostic],
        gpu: bool,
    ) -> list[Edit]:
        """The class becomes the loader class of its iterator: ``__init__``'s parameters less
        those only passed to the Pipeline constructor, made where the iterator was."""
        loader = loader_instance(instances)
        assert loader is not None
        carried_note(notes, cls.name.value, loader)
        fn = cst.FunctionDef(
            cls.name, params, cst.IndentedBlock(body), leading_lines=cls.leading_lines
        )
        dropped = unused_pipeline_params(ctx, params, kwargs, body, loader, fn)
        helpers, edits, name = loader_definition(
            ctx, fn, graph, body, without_params(params, dropped), loader, at=cls
        )
        notes += dropin_note(ctx, self.id, loader.iterators[0], name)
        edits = [ctx.stmt_edit(cls, helpers), *edits]
        threads_set: set = set()  # ndd.set_num_threads once per scope
        for inst in instances:
            if not inst.iterators:
                edits += self._instance_edits(ctx, inst, params, kwargs, notes, gpu)
                continue
            threads = kwargs.get("num_threads")
            value = (
                call_site_value(params, site_view(params, inst), threads.value)
                if threads is not None
                else None
            )
            if value is None and threads is not None and not is_unset(threads.value):
                text = (
                    "num_threads could not be followed to this call: ndd uses its default "
                    "thread count"
                )
                notes.append(ctx.info(self.id, inst.stmt, text))
            threads_arg = cst.Arg(value) if value is not None and not is_unset(value) else None
            device_todo_at(ctx, inst, params, kwargs.get("device_id"), gpu)
            _check_unpacked(inst)
            keys = inst.unpacked.keys if inst.unpacked is not None else ()
            args = loader_args(inst.call, params, dropped, keys)
            edits += loader_site_edits(
                ctx, inst, name, self.id, threads_arg, set(), notes, threads_set, args=args
            )
        return edits


#: why a class made in other modules stays a plain generator of batches
ELSEWHERE = "the pipeline is also used in other modules, so it stays a plain generator of batches"


def used_elsewhere(ctx: FileContext, cls: cst.ClassDef) -> bool:
    """Other modules of the run make objects of ``cls`` (see ``dali_migrate.project``)."""
    return ctx.project is not None and cls.name.value in ctx.project.external_uses


def _derived_elsewhere(ctx: FileContext, cls: cst.ClassDef) -> list[str]:
    """Where other modules of the run derive a class from ``cls`` (it must stay a class)."""
    if not used_elsewhere(ctx, cls):
        return []
    assert ctx.project is not None
    return [r for r in ctx.project.external_uses[cls.name.value] if SUBCLASSED in r]


def _param_names(params: cst.Parameters) -> list[str]:
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    return [p.name.value for p in every]


def _check_unpacked(inst: Instance) -> None:
    """Refused where the call that becomes the loader's shifts its positional arguments with
    ``*args`` (the loader's call leaves out some of them by their place)."""
    if inst.unpacked is not None and any(a.star == "*" for a in inst.call.args):
        raise Refused(f"`{inst.label}` is made with *args, which the loader's call cannot take")


def _generator_def(
    cls: cst.ClassDef,
    init: cst.FunctionDef,
    params: cst.Parameters,
    body: list[cst.BaseStatement],
    leading: list[cst.EmptyLine],
) -> cst.FunctionDef:
    """The generator function that replaces the class, named as it was."""
    self_comma = init.params.params[0].comma
    return cst.FunctionDef(
        name=cls.name,
        params=params,
        body=cst.IndentedBlock(body),
        leading_lines=leading,
        # `def f(self,\n  a, ...)`: the parameters keep their layout without self
        whitespace_before_params=self_comma.whitespace_after
        if isinstance(self_comma, cst.Comma)
        and isinstance(self_comma.whitespace_after, cst.ParenthesizedWhitespace)
        else init.whitespace_before_params,
    )


def _visible(
    ctx: FileContext,
    cls: cst.ClassDef,
    mini: FileContext,
    fn: cst.FunctionDef,
    expr: cst.BaseExpression,
) -> bool:
    """Every name ``expr`` reads is one the generator ``fn`` sees: its parameters and locals,
    the module's names, builtins."""
    inside = mini.scopes.get(fn.body.body[0])
    outside = ctx.scopes.get(cls)
    return all(
        (inside is not None and n in inside) or (outside is not None and n in outside)
        for n in free_names(expr)
    )


def _peers(result: _Migrated | str) -> list[cst.CSTNode]:
    """The pipeline classes whose objects share code with those of a class migrated (none for
    one refused: ``result`` is then why)."""
    return [] if isinstance(result, str) else [p for inst in result[3] for p in inst.peers]
