"""Whether the loader class can replace the framework iterators over a pipeline: their
configuration against the pipeline's reader, where the iterators are made, the epochs the loader
must count (the reasons it cannot, each said where it stands)."""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import free_names, scope_label, source_of, walk
from .dataset_shapes import shape_reasons
from .datasets import batch_reasons, signature_reasons, sized_by_dataset_reasons
from .handles import name_arg, needs_of
from .iterator_consumers import left_early
from .iterator_follow import drop_in, enclosing, loops_around
from .iterator_use import ANY_READER, IteratorUse
from .iterators import BY_HAND, BY_HAND_TORCH
from .lockstep import lead_reader
from .model import FollowUp, Graph, Instance
from .per_device import ADVICE as PER_DEVICE_ADVICE
from .per_device import placement_reasons as devices_placement

# -- whether the loader can replace them -----------------------------------------------------------


def iterator_reasons(ctx: FileContext, graph: Graph, instances: list[Instance]) -> list[str]:
    """Why the framework iterators on ``instances`` cannot be migrated (empty: they can)."""
    uses = [u for inst in instances for u in inst.iterators]
    if not uses:
        return []
    bare = next((i for i in instances if not i.iterators), None)
    if bare is not None:
        why = _beside_reason(ctx, instances, bare)
        if why:
            return [why]
        instances = [i for i in instances if i.iterators]
    if len(uses) != 1 or len(instances) != 1:
        chosen = next((u for u in uses if u.policy_choice is not None), None)
        if chosen is not None:
            return [_choice_reason(chosen, "the pipeline's definition is wrapped more than once")]
        why = _shared_class_reason(ctx, instances)
        if why:
            return [why]
        return list(
            dict.fromkeys(r for i in instances for r in _one_iterator_reasons(ctx, graph, i))
        )
    return _one_iterator_reasons(ctx, graph, next(i for i in instances if i.iterators))


def _beside_reason(ctx: FileContext, instances: list[Instance], bare: Instance) -> str:
    """Objects of the definition that no framework iterator wraps (run, or made and passed on)
    keep the generator, beside the loader class the iterated ones get, where neither needs
    more of the function than its batches (the reader or a checkpoint returned with them) and
    the iterator is not TensorFlow's (whose generator the dataset is written from)."""
    needs = needs_of(instances)
    if needs.handles or needs.checkpointing:
        why = "the function would return the reader or a checkpoint to one of them"
    elif any(u.framework == "tf" for i in instances for u in i.iterators):
        why = "DALIDataset's generator would take the function's place"
    else:
        return ""
    return (
        f"the pipeline is also made at line {ctx.line_of(bare.call)}, where no framework "
        f"iterator the tool migrates wraps it, and {why}"
    )


def _shape(use: IteratorUse) -> tuple:
    """What the loader class is made from, besides the pipeline: iterators of one shape can
    share one class."""
    return (
        use.framework,
        use.output_map,
        use.reader_name,
        use.policy,
        use.last_batch_padded,
        use.auto_reset,
        sorted(use.sparse_lists),
        use.early_exit,
        use.hooked,
        bool(use.kept_resets),
        use.dropin,
    )


def _shared_class_reason(ctx: FileContext, instances: list[Instance]) -> str:
    """Several pipelines of one definition, each wrapped once, share its loader class when
    their iterators have the same configuration, sized by reader_name (or not at all), and
    nothing folds into the class (a subclass, a wrapper, next() calls)."""
    uses = [u for inst in instances for u in inst.iterators]
    alike = all(len(i.iterators) == 1 for i in instances)
    alike = alike and len({repr(_shape(u)) for u in uses}) == 1
    plain = all(
        u.size is None
        and u.size_reader is None
        and u.subclass is None
        and u.wrapper is None
        and u.signature is None
        and not u.pulls
        and not u.meta_calls
        and u.framework != "tf"
        for u in uses
    )
    if alike and plain:
        return ""
    bare = next((i for i in instances if not i.iterators), None)
    if bare is not None:
        return (
            f"the pipeline is also made at line {ctx.line_of(bare.call)}, where no framework "
            "iterator the tool migrates wraps it"
        )
    if any(len(i.iterators) > 1 for i in instances):
        return "a pipeline object is wrapped in several framework iterators"
    if any(u.framework == "tf" for u in uses):
        return (
            "the definition makes the pipelines of several DALIDatasets (or DALIIterator op "
            "calls): the tool writes the generator a DALIDataset runs for one only"
        )
    return (
        "its pipelines are wrapped in iterators that differ in reader_name=, policy or "
        "output_map, or are sized with size=, subclassed or wrapped: one loader class cannot "
        "serve them all"
    )


def _choice_reason(use: IteratorUse, why: str) -> str:
    test = " ".join(source_of(use.policy_choice[0]).split()) if use.policy_choice else ""
    return (
        f"last_batch_policy is chosen at run time (by `{test}`) and {why}: one loader class "
        "per policy is written only for an iterator made in place over a pipeline with a reader, "
        "its class named nowhere else"
    )


def _one_iterator_reasons(ctx: FileContext, graph: Graph, inst: Instance) -> list[str]:
    """``_iterator_reasons``, for each policy where the policy is chosen at run time (a loop
    left early needs the drop-in loader where either policy's epochs cannot resume)."""
    use = inst.iterators[0]
    peered = _peered_reasons(graph, use)
    if peered:
        return peered
    if use.policy_choice is None:
        return _iterator_reasons(ctx, graph, inst)
    if not graph.readers:  # (external sources, iter_setup)
        return [_choice_reason(use, "the pipeline has no reader")]
    if use.kept_in or use.wrapper or use.pulls or use.devices is not None:
        return [_choice_reason(use, "the loader would be made away from the iterator")]
    if use.annotations:  # (each would name one class of the two)
        return [_choice_reason(use, f"annotations name {use.name}")]
    first, other = use.policy, use.policy_choice[2]
    use.policy = other
    reasons = _iterator_reasons(ctx, graph, inst)
    use.policy = first
    return list(dict.fromkeys([*reasons, *_iterator_reasons(ctx, graph, inst)]))


def _peered_reasons(graph: Graph, use: IteratorUse) -> list[str]:
    """A framework iterator over a name bound to a different pipeline in each branch: each branch
    binds a partial of its loader class, which the iterator's place calls; only a loader made
    there as it is, over a pipeline with a reader, the iterator's arguments all written in it."""
    if use.peered is None or use.framework == "tf":
        return []
    what = "a framework iterator over a name that holds a different pipeline in each branch"
    if not graph.readers:
        return [f"{what}, over a pipeline without a reader, is not migrated"]
    odd = {
        "kept in another method": use.kept_in is not None,
        "over one pipeline per GPU": use.devices is not None,
        "made in a wrapper class": use.wrapper is not None,
        "subclassed": use.subclass is not None or use.built_in is not None,
        "with its policy chosen at run time": use.policy_choice is not None,
        "pulled with next() and made again": bool(use.pulls),
        "with size=": use.size is not None or use.size_param is not None,
        "with epoch_size() read from its pipeline": bool(use.meta_calls),
        "named in a type annotation": bool(use.annotations),
    }
    found = [k for k, v in odd.items() if v]
    return [f"{what}, {found[0]}, is not migrated"] if found else []


def _iterator_reasons(ctx: FileContext, graph: Graph, inst: Instance) -> list[str]:
    """Why the one framework iterator over ``inst`` cannot be migrated (empty: it can)."""
    use = inst.iterators[0]
    if inst.runs:
        return ["the pipeline is both run (pipe.run()) and iterated through a framework iterator"]
    if use.meta_calls:
        why = _meta_reason(graph, use)
        if why:
            return [why]
    if graph.outputs_list is not None:
        return [
            f"the pipeline's outputs are the list `{graph.outputs_list}` built in define_graph: "
            "their number is known only when it runs, and the iterator's output_map must name "
            "each"
        ]
    if use.framework == "tf":
        if graph.sources:
            return [
                "DALIDataset over a pipeline with an external source (DALIDatasetWithInputs) is "
                "not migrated"
            ]
        if use.peered is not None:  # each branch a partial, called with the dataset's batch size
            return (
                signature_reasons(ctx, use, len(graph.outputs))
                + shape_reasons(ctx, use, len(graph.outputs))
                + sized_by_dataset_reasons(graph)
            )
        return (
            signature_reasons(ctx, use, len(graph.outputs))
            + shape_reasons(ctx, use, len(graph.outputs))
            + _placement_reasons(ctx, inst, use)
            + batch_reasons(ctx, inst, use)
        )
    if graph.branch_outputs and len({len(v) for v in graph.branch_outputs.values()}) > 1:
        return ["the pipeline's number of outputs depends on the `if` that ends it"]
    if use.ahead is not None and not graph.sources and not graph.readers:
        return _fed_reasons(ctx, inst, use)
    if use.size_attr is not None:
        return [
            f"size={source_of(use.size)} is not migrated (only an expression with at most one "
            f'{inst.variable}.epoch_size("<reader name>")): give the reader a name and pass '
            "reader_name= instead"
        ]
    if graph.sources and not graph.readers:
        return _source_reasons(graph, use) or _sized_source_reasons(ctx, inst, graph, use)
    if any(u.guards for u in graph.readers) and not graph.sources:
        return [
            "a framework iterator over a pipeline whose reader is made under an `if` is not "
            "migrated yet"
        ]
    lead = lead_reader(graph, use)
    if lead is None:
        return [
            "a framework iterator over a pipeline with an external source beside its readers, a "
            "reader made under an `if`, or several readers without a reader_name= that names "
            "one of them as a string (or with size=) is not migrated"
        ]
    graph.lead = lead if len(graph.readers) > 1 else None
    reader = {a.keyword.value: a.value for a in lead.call.args if a.keyword is not None}
    name = reader.get("name")
    for wanted, what in (
        (use.reader_name, "reader_name={!r}"),
        (use.size_reader, "size=pipe.epoch_size({!r})"),
    ):
        if (
            wanted is not None
            and wanted is not ANY_READER
            and not (isinstance(name, cst.SimpleString) and name.evaluated_value == wanted)
        ):
            return [f"{what.format(wanted)} does not name the reader of the pipeline"]
    if use.size is not None and isinstance(graph.container, cst.FunctionDef):
        _, missing = size_parameters(use, inst, graph.container)
        if missing and _size_at_site(ctx, inst, use):
            use.size_param = "size"  # (named in the loader's __init__)
        elif missing:
            return [
                f"size={source_of(use.size)} reads `{missing[0]}`, which the loader cannot have: give "
                "the reader a name and pass reader_name= instead, or pass it to the pipeline"
            ]
    reasons = (
        _reader_reasons(reader, use)
        + _placement_reasons(ctx, inst, use)
        + _len_reasons(ctx, reader, use)
    )
    if use.early_exit and not use.dropin and epochs_kind(reader, use) not in RESUMABLE:
        # DALI's iterator resumed that epoch in the next loop: a drop-in loader does too
        drop_in(use, next(lp for lp in use.loops if left_early(lp)))
    return reasons


#: sources a loader runs as DALI did: an iterable gone over once (later epochs are empty) or,
#: with cycle="raise", again in each epoch (a callable of unknown kind is called on after a
#: StopIteration, which a loop over it cannot do)
PASS_SOURCES = ("iterable", "either")


def _source_reasons(graph: Graph, use: IteratorUse) -> list[str]:
    """Why the iterator over a pipeline fed by external sources cannot become a loader that
    runs one pass of the sources per epoch (as DALI's iterator without reader_name or size did:
    its epoch ended when a source raised StopIteration, and reset() started the next)."""
    what = "a framework iterator over an external source"
    if any(
        u.kind not in PASS_SOURCES or u.cycle or (u.kind == "either" and not u.raises)
        for u in graph.sources
    ):
        return [f"{what} that is fed per sample, by iteration number or without end"]
    if use.reader_name is not None or use.size_reader is not None:
        return [f"{what} with reader_name= (the reader it names is not there)"]
    if use.lens or use.size_reads or use.meta_calls:
        return [f"{what}: len() and the epoch size are unknown before a pass ends"]
    if use.early_exit:
        return [f"{what}: a loop left early resumed the source where it stood"]
    if use.subclass is not None or use.wrapper is not None:
        return [f"{what}, subclassed or made in a wrapper class"]
    if use.rebinds:  # (the loader over the sources has no reset() that returns None)
        return [f"{what}, rebound to what its reset() returns ({use.name}.reset() is None)"]
    if use.dropin:  # (nor __next__ and reset(): it is no iterator of its own)
        return [f"{what}, taken by code the tool cannot read"]
    return []


def _sized_source_reasons(
    ctx: FileContext, inst: Instance, graph: Graph, use: IteratorUse
) -> list[str]:
    """``size=N`` over sources: DALI counted N samples per epoch over the one pass of the
    sources (an iterable gone over once); the loader does too, given N where it is made. Where
    the sources are started over, the pass and the count would interleave: refused."""
    if use.size is None:
        return _placement_reasons(ctx, inst, use)
    what = "a framework iterator with size= over an external source"
    if any(u.kind != "iterable" or u.cycle or u.raises for u in graph.sources):
        return [f"{what} that is started over or called per batch"]
    if use.last_batch_padded or use.subclass or use.wrapper or use.dropin:
        return [f"{what}: only loops over it (no last_batch_padded, subclass or wrapper)"]
    if made_elsewhere(ctx, inst, use) or (inst.variable or "") in free_names(use.size):
        return [f"{what}: size={source_of(use.size)} cannot be computed where the loader is made"]
    use.size_param = "size"  # (named in the loader's __init__)
    return _placement_reasons(ctx, inst, use)


def _fed_reasons(ctx: FileContext, inst: Instance, use: IteratorUse) -> list[str]:
    """``size=N`` over a Pipeline subclass fed in ``iter_setup``: DALI's iterator counted N
    samples an epoch over the batches iter_setup fed; the loader does too, given N where it is
    made (or computing ``pipe.<attr>`` as the class did)."""
    what = "a framework iterator over a pipeline fed in iter_setup"
    if use.size is None or use.size_reader is not None:
        return [f"{what} without size= (its epochs end where iter_setup raises StopIteration)"]
    if use.policy == "DROP":
        return [f"{what} with the DROP policy"]
    if use.dropin:
        return [f"{what}, taken by code the tool cannot read"]
    if use.early_exit or use.subclass is not None or use.wrapper is not None:
        return [f"{what}: only loops over it to their end (no subclass, wrapper or early exit)"]
    if use.lens or use.size_reads or use.meta_calls or use.pulls or use.hooked:
        return [f"{what}: len(), _size, next() or the epoch size of the iterator are read"]
    if use.size_attr is not None:
        if use.size_value is None:
            return [
                f"size={source_of(use.size)} is not migrated: `{use.size_attr}` is not an "
                "attribute the class sets in __init__ or a property that returns one"
            ]
        return _placement_reasons(ctx, inst, use)
    if not _size_at_site(ctx, inst, use):
        return [f"{what}: size={source_of(use.size)} cannot be computed where the loader is made"]
    use.size_param = "size"  # (named in the loader's __init__)
    return _placement_reasons(ctx, inst, use)


def _meta_reason(graph: Graph, use: IteratorUse) -> str | None:
    """Why ``pipe.epoch_size()`` after the iterator cannot read the loader's reader."""
    first = f"`{source_of(use.meta_calls[0])}`"
    if use.framework == "tf" or use.pulls or use.kept_in or use.wrapper or use.subclass:
        return f"{first} reads the pipeline next to an iterator the loader replaces differently"
    if len(graph.readers) != 1 or graph.readers[0].guards:
        return f"{first}: the pipeline has not one reader made unconditionally"
    name = next(
        (a.value for a in graph.readers[0].call.args if a.keyword and a.keyword.value == "name"),
        None,
    )
    for call in use.meta_calls:
        given = name_arg(call)
        if given is False:
            return f"`{source_of(call)}`: its arguments are not a reader name"
        if given is None and not isinstance(name, cst.SimpleString):
            return f"`{source_of(call)}`: the reader has no name= to key the dictionary it returns"
        if isinstance(given, cst.SimpleString) and not (
            isinstance(name, cst.SimpleString) and name.evaluated_value == given.evaluated_value
        ):
            return f"`{source_of(call)}` does not name the pipeline's reader"
        if given is not None and not isinstance(given, (cst.SimpleString, cst.Name)):
            return f"`{source_of(call)}`: its reader name is not a string or a variable"
    return None


def _reader_reasons(reader: dict[str, cst.BaseExpression], use: IteratorUse) -> list[str]:
    """Reader arguments the loader's epoch arithmetic needs as literals."""
    out = []
    for key in ("pad_last_batch", "stick_to_shard"):
        v = reader.get(key)
        if v is not None and not (isinstance(v, cst.Name) and v.value in ("True", "False")):
            out.append(
                f"the reader's {key}= is not True or False (the epochs of {use.name} depend on it)"
            )
    return out


def _len_reasons(
    ctx: FileContext, reader: dict[str, cst.BaseExpression], use: IteratorUse
) -> list[str]:
    padded = _is_true(reader.get("pad_last_batch"))
    if use.reader_name is None or use.policy != "FILL" or padded:
        return []
    # FILL without padding: the batch count, and so len(), changes from epoch to epoch, and
    # DALI's value between two epochs depends on when reset() ran
    for node, where in use.lens:
        if where == "other":
            return [
                f"len({ctx.text(node)}) {scope_label(ctx, node)} is not migrated: with FILL "
                "over a reader without pad_last_batch=True the batch count changes from epoch to "
                "epoch, and between two loops DALI's value depends on when reset() ran; take "
                "len() inside the loop over it (or before the first one), or give the reader "
                "pad_last_batch=True"
            ]
    return []


def _placement_reasons(ctx: FileContext, inst: Instance, use: IteratorUse) -> list[str]:
    """The loader is made where the iterator was, from the pipeline's arguments: the pipeline
    must be made before it in the same scope and loops, and those arguments' names must mean
    the same there."""
    if use.devices is not None:  # the loaders are made where the pipelines were
        return devices_placement(ctx, inst, use)
    if use.peered is not None:  # (a partial takes the arguments where the pipeline is made)
        return []
    made = ctx.enclosing_statement(use.site)
    if made is inst.stmt:  # @data_iterator: one call makes both
        return []
    if made_elsewhere(ctx, inst, use):
        return _kept_placement_reasons(ctx, inst, use)
    if ctx.scopes.get(made) is not ctx.scopes.get(inst.stmt):
        return ["the iterator is made in another function than the pipeline"]
    loops = [id(n) for n in loops_around(ctx, made)]
    if loops != [id(n) for n in loops_around(ctx, inst.stmt)]:
        return ["the iterator is made in another loop than the pipeline"]
    start, end = ctx.positions[inst.stmt].end, ctx.positions[made].start
    if (start.line, start.column) > (end.line, end.column):
        return ["the iterator is made before the pipeline"]
    names = {n.value for a in inst.call.args for n in walk(a.value) if isinstance(n, cst.Name)}
    container = enclosing(ctx, made, cst.FunctionDef) or ctx.module
    for node in walk(container):
        if isinstance(
            node, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr)
        ):
            target = node.target
            pos = (
                ctx.positions.get(target)
                if hasattr(ctx.positions, "get")
                else ctx.positions[target]
            )
            if pos is None:
                continue
            inside = (
                (start.line, start.column)
                <= (pos.start.line, pos.start.column)
                < (end.line, end.column)
            )
            hit = _rebound_names(target) & names
            if inside and hit:
                return [f"`{sorted(hit)[0]}` changes between the pipeline and the iterator"]
    return []


def _rebound_names(target: cst.CSTNode) -> set[str]:
    """The names an assignment to ``target`` changes: ``x`` and ``a, b`` themselves, ``x`` of
    ``x.attr = ...`` and ``x[i] = ...`` (the object changes), never the ``attr`` of ``self.attr``
    (another variable than a local ``attr``)."""
    skip = {id(n.attr) for n in walk(target) if isinstance(n, cst.Attribute)}
    return {n.value for n in walk(target) if isinstance(n, cst.Name) and id(n) not in skip}


def made_elsewhere(ctx: FileContext, inst: Instance, use: IteratorUse) -> bool:
    """The pipeline is kept in ``self.<attr>`` and its iterator made in another function: the
    loader is made where the pipeline was (else where the iterator was)."""
    made = ctx.enclosing_statement(use.site)
    return use.kept_in is not None and ctx.scopes.get(made) is not ctx.scopes.get(inst.stmt)


def _kept_placement_reasons(ctx: FileContext, inst: Instance, use: IteratorUse) -> list[str]:
    """``self.pipe = make(...)`` in one method, ``DALIGenericIterator([self.pipe], ...)`` in
    another: the loader is made in place of the pipeline, so the iterator's arguments must mean
    the same there (literals and module-level names), and it must be the pipeline's one use."""
    assign = inst.assign
    if (
        assign is None
        or len(assign.targets) != 1
        or not isinstance(assign.targets[0].target, cst.Attribute)
        or inst.copies != 1
        or len(inst.iterators) > 1
        or use.pulls
    ):
        return ["the pipeline is kept in a way the loader cannot replace"]
    scope = ctx.scopes.get(use.call)
    skip = {id(n) for n in walk(use.kept_in)} if use.kept_in is not None else set()
    skip |= {id(n.attr) for n in walk(use.call) if isinstance(n, cst.Attribute)}
    for node in walk(use.call):
        if (
            isinstance(node, cst.Name)
            and id(node) not in skip
            and scope is not None
            and node.value in scope.assignments
        ):
            return [
                f"the iterator's arguments read `{node.value}`, which the place where the "
                "pipeline is made does not see"
            ]
    return []


def _is_true(v: cst.BaseExpression | None) -> bool:
    return isinstance(v, cst.Name) and v.value == "True"


def abandon_iterators(inst: Instance, why: str, followups: list[FollowUp]) -> None:
    """The framework iterators over ``inst`` cannot be migrated (``why``): each keeps its code,
    with a TODO, and the pipeline function stays a plain generator of batches."""
    for use in inst.iterators:
        advice = (
            BY_HAND_TORCH
            if use.framework == "torch"
            else BY_HAND[f"nvidia.dali.plugin.{use.framework}"][1]
        )
        if use.framework == "tf":
            advice = BY_HAND["nvidia.dali.plugin.tf"][1]
        if use.devices is not None:
            advice = PER_DEVICE_ADVICE
        followups.append(FollowUp(use.call, f"{use.name} is not migrated ({why})", advice))
    inst.iterators = []


#: calls allowed in a size= expression besides the pipeline's epoch_size()
SIZE_BUILTINS = {"int", "round", "len", "min", "max", "abs"}


def _size_at_site(ctx: FileContext, inst: Instance, use: IteratorUse) -> bool:
    """``size=`` can be computed where the loader is made, from what the iterator's call sees:
    the loader is made in its place (not where the pipeline was kept, nor in a wrapper), and
    the expression does not read the pipeline."""
    if use.size is None or use.size_reader is not None or use.wrapper is not None:
        return False
    if ctx.enclosing_statement(use.site) is inst.stmt or made_elsewhere(ctx, inst, use):
        return False
    return inst.variable not in free_names(use.size)


def size_parameters(
    use: IteratorUse, inst: Instance, fn: cst.FunctionDef
) -> tuple[dict[str, str], list[str]]:
    """For ``size=``: the names the caller also gave to the pipeline -> the parameter it gave
    them to (``num_shards=world_size``: ``world_size`` -> ``num_shards``), and the other names
    the expression reads (the loader does not have them)."""
    given: dict[str, str] = {}
    positional = [p.name.value for p in fn.params.params]
    for i, a in enumerate(inst.call.args):
        if isinstance(a.value, cst.Name) and not a.star:
            param = a.keyword.value if a.keyword is not None else None
            if param is None and i < len(positional):
                param = positional[i]
            if param is not None:
                given.setdefault(a.value.value, param)
    pipe = inst.variable
    names = free_names(use.size) if use.size is not None else set()
    return given, sorted(names - set(given) - SIZE_BUILTINS - {pipe})


def is_sharded(reader: dict[str, cst.BaseExpression]) -> bool:
    """The reader reads one of several shards (``num_shards=`` other than a literal 1)."""
    n = reader.get("num_shards")
    return n is not None and not (isinstance(n, cst.Integer) and int(n.value, 0) == 1)


def epochs_kind(reader: dict[str, cst.BaseExpression], use: IteratorUse) -> str:
    """How the loader cuts epochs for the iterator's configuration: over the reader's own epochs
    ("plain", "partial", "drop") where DALI's line up with them, else over the endless stream
    ("resume", "ahead", "fill_shards", "partial_stream", "drop_stream", "counted",
    "partial_counted", "drop_counted", "endless")."""
    padded, sharded = _is_true(reader.get("pad_last_batch")), is_sharded(reader)
    if not use.sized:
        return "endless"
    if use.reader_name is None:  # size=
        if use.policy == "FILL":
            return "counted" if use.last_batch_padded else "ahead"
        return "partial_counted" if use.policy == "PARTIAL" else "drop_counted"
    if use.policy == "FILL":
        if padded:
            return "resume" if use.early_exit else "plain"
        return "fill_shards" if sharded else "ahead"
    if use.policy == "PARTIAL":
        return "partial" if padded or not sharded else "partial_stream"
    return "drop_stream" if sharded else "drop"


#: configurations whose loader resumes an epoch a loop left early
RESUMABLE = ("resume", "ahead", "fill_shards", "endless")


# -- JAX's @data_iterator: the decorated function makes the pipeline and its iterator --------------
