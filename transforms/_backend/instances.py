"""Recognise, the uses: every object a pipeline definition creates, followed wherever the
program keeps it (:func:`find_instances`, :func:`instances_of`). Each use is recorded on an
``Instance`` (``build()``, ``run()``, handles, iterators, feeds) or becomes a ``FollowUp``: a use
the tool cannot rewrite, to be marked where it stands.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import in_source_order, kwargs_of, param_names, within
from . import feeds, handles, iterators
from .arguments import CHECKPOINT_ARGS, PIPELINE_ARGS, check_pipeline_args
from .def_values import DefinitionValues, ValueCall
from .flow import Flow, PeerOf, in_loop
from .iterator_follow import adopt_meta_call
from .model import FollowUp, Instance
from .per_device import listed_pipelines
from .star_keys import Unpacked, key_value, unpacked
from .wrapped_iterators import takes_generators

#: pipeline arguments a ``**kwargs`` dict may not hand a ``@pipeline_def`` call: the rewrite
#: renames them or reads them where it rewrites the definition
_WRITTEN_ONLY = frozenset({"max_batch_size", "enable_conditionals", *CHECKPOINT_ARGS})

#: statements ``pipe.<method>()`` that have nothing to do in dynamic mode: removed
DROPPED_METHODS = ("build", "schedule_run", "release_outputs")
#: ``pipe.<method>()`` that gives the next batch: ``next(pipe)``
RUN_METHODS = ("run", "share_outputs")

#: what to do by hand for the Pipeline methods the tool does not migrate (written in the TODO)
PIPELINE_METHOD_HINTS = {
    "schedule_run": "dynamic mode is asynchronous by itself: drop it",
    "share_outputs": "dynamic mode is asynchronous by itself: take batches with next(pipe)",
    "release_outputs": "dynamic mode frees a batch when it is no longer referenced: drop it",
    "outputs": "dynamic mode is asynchronous by itself: take batches with next(pipe)",
    "checkpoint": "register the reader and the RNG with ndd.checkpoint.Checkpoint; the formats differ",
    "serialize": "dynamic mode has no serialized form: keep this pipeline for serving (Triton)",
    "epoch_size": "use the reader's get_metadata()['epoch_size_padded'], built with max_batch_size",
    "reader_meta": "use the reader's get_metadata(), built with max_batch_size",
    "reset": "each reader.next_epoch() is a new epoch",
    "feed_input": "give the data to the code with ndd.as_batch(...)",
}


def follow_pipeline(
    ctx: FileContext,
    inst: Instance,
    origin: cst.CSTNode,
    flow: Flow,
    followups: list[FollowUp],
    *,
    with_handles: bool = False,
) -> None:
    """Every use of the pipeline object ``origin`` evaluates to: ``build()`` and ``run()`` (and
    with ``with_handles``, ``epoch_size()``, ``reader_meta()``, ``checkpoint()``, ``reset()``,
    see ``handles``) and framework iterators are recorded on ``inst``; any other use is a
    follow-up (a TODO at the use)."""
    found = flow.follow(origin, inst.label)
    inst.uses = [*found.reached, *(f.node for f in found.followups)]
    named = inst.assign is not None and isinstance(inst.assign.targets[0].target, cst.Name)
    inst.local = found.local and (named or _inline_in_iterator(ctx, origin))
    inst.relayed = not found.local and found.relayed and named and bool(found.relays)
    inst.relays = found.relays if inst.relayed else []
    inst.copies = found.copies * (2 if in_loop(ctx, inst.stmt) else 1)
    inst.peers = list({id(p): p for p in found.peers}.values())
    followups += found.followups
    pending: list[tuple[cst.Call, str]] = []  # pipe.epoch_size(): the loader's, if one replaces it
    for use in found.uses:
        claimed = (
            n for u in inst.iterators for n in u.claimed
        )  # pipe.epoch_size() as an iterator's size=
        if any(use is n for n in claimed):
            continue
        attr = ctx.parents.get(use)
        call = ctx.parents.get(attr)
        label = _label(ctx, use, inst)
        if isinstance(attr, cst.Del) and attr.target is use:
            continue  # `del pipe`: the generator goes as the pipeline did
        if isinstance(attr, cst.Attribute) and attr.value is use:
            if isinstance(call, cst.Call) and call.func is attr:
                if attr.attr.value in handles.META_METHODS:
                    pending.append((call, label))
                else:
                    _method_or_followup(ctx, inst, call, label, with_handles, followups)
            else:
                followups.append(
                    FollowUp(
                        attr, f"`{label}.{attr.attr.value}` reads an attribute of the Pipeline"
                    )
                )
            continue
        why = (
            iterators.iterator_use(ctx, inst, use)
            if inst.local or _kept_in_attribute(ctx, inst, use) or listed_pipelines(ctx, inst, use)
            else iterators.iterator_hint(ctx, use)
        )
        if why == "" and any(use is n for n in found.peer_consumers):
            inst.iterators[-1].peered = use
        if why is None and takes_generators(ctx, use):
            continue  # the class's wrapped iterator becomes a loader over the generator
        if why is None:
            followups.append(FollowUp(use, _describe(ctx, use, label)))
        elif isinstance(why, FollowUp):  # ("": recorded on inst.iterators)
            followups.append(why)
    taken = {id(n) for u in inst.iterators for n in u.claimed}  # (an iterator's size=)
    for call, label in pending:
        if id(cst.ensure_type(call.func, cst.Attribute).value) in taken:
            continue
        if not adopt_meta_call(ctx, inst, call):
            _method_or_followup(ctx, inst, call, label, with_handles, followups)


def _method_or_followup(
    ctx: FileContext,
    inst: Instance,
    call: cst.Call,
    label: str,
    with_handles: bool,
    followups: list[FollowUp],
) -> None:
    """``pipe.<method>(...)`` recorded on ``inst`` where it is migrated, else a follow-up."""
    method = cst.ensure_type(call.func, cst.Attribute).attr.value  # pipe.<method>(...)
    if not _method_use(ctx, inst, method, call, with_handles and (inst.local or inst.relayed)):
        hint = PIPELINE_METHOD_HINTS.get(method, "")
        followups.append(FollowUp(call, f"`{label}.{method}(...)` is not migrated", hint))


def _kept_in_attribute(ctx: FileContext, inst: Instance, use: cst.CSTNode) -> bool:
    """``self.pipe = make(...)`` made once, and ``use`` reads ``self.pipe`` in the same class."""
    assign = inst.assign
    return (
        assign is not None
        and len(assign.targets) == 1
        and isinstance(assign.targets[0].target, cst.Attribute)
        and isinstance(use, cst.Attribute)
        and use.attr.value == assign.targets[0].target.attr.value
        and inst.copies == 1
    )


def _inline_in_iterator(ctx: FileContext, origin: cst.CSTNode) -> bool:
    """``origin`` (the pipeline's call) is made in the call of a framework iterator, alone or
    as the one element of its list (``DALIGenericIterator([make_pipe(...)], ...)``)."""
    parent = ctx.parents.get(origin)
    if isinstance(parent, cst.Element):
        listed = ctx.parents.get(parent)
        if not isinstance(listed, (cst.List, cst.Tuple)) or len(listed.elements) != 1:
            return False
    call = iterators._enclosing_call(ctx, origin)
    q = ctx.qualname(call.func) if call is not None else None
    return q in iterators.ITERATORS or q == iterators.DATASET


def own_uses(
    ctx: FileContext, container: cst.CSTNode, instances: list[Instance], followups: list[FollowUp]
) -> list[str]:
    """Uses of the pipeline objects (or of their factory) inside the code that defines their
    graph (``pipe.build()`` in the ``@pipeline_def`` function that ``pipe`` is made from): that
    code becomes the generator, which has no pipeline object to use. One reason per use."""
    factory = container.name.value if isinstance(container, cst.FunctionDef) else None
    said = {
        id(f.node): f.what
        for f in followups
        if isinstance(f.node, cst.Name) and f.node.value == factory
    }
    nodes = [n for inst in instances for n in inst.uses] + [f.node for f in followups]
    inside = [n for n in nodes if within(ctx, n, container)]
    inside.sort(key=lambda n: (ctx.positions[n].start.line, ctx.positions[n].start.column))
    reasons = [
        said.get(id(n))
        or f"`{ctx.text(_use_expr(ctx, n))}` uses the pipeline inside the code that defines it"
        for n in inside
    ]
    return list(dict.fromkeys(reasons))


def _use_expr(ctx: FileContext, node: cst.CSTNode) -> cst.CSTNode:
    """``pipe.build()`` for the ``pipe`` in it (``pipe`` alone when it is not called)."""
    attr = ctx.parents.get(node)
    call = ctx.parents.get(attr)
    if isinstance(attr, cst.Attribute) and attr.value is node:
        return call if isinstance(call, cst.Call) and call.func is attr else attr
    return node


def _label(ctx: FileContext, use: cst.CSTNode, inst: Instance) -> str:
    """How a TODO names the pipeline object at ``use``."""
    if isinstance(use, (cst.Name, cst.Attribute, cst.Subscript)):
        return ctx.text(use)
    if isinstance(use, cst.Call):
        return f"{ctx.text(use.func)}(...)"
    return inst.label


def _describe(ctx: FileContext, use: cst.CSTNode, label: str) -> str:
    """What the code does with the pipeline object at ``use``, for its TODO."""
    parent = ctx.parents.get(use)
    if isinstance(parent, cst.Element):  # [pipe] handed on as a list
        parent = ctx.parents.get(ctx.parents.get(parent))
        if not isinstance(parent, cst.Arg):
            return f"`{label}` is put in a container"
    holder = ctx.parents.get(parent)
    if isinstance(parent, cst.Arg) and isinstance(holder, cst.Call):
        return f"`{label}` is passed to `{ctx.text(holder.func)}`"
    if isinstance(parent, cst.Return):
        return f"`{label}` is returned"
    if isinstance(parent, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
        targets = parent.targets if isinstance(parent, cst.Assign) else [parent]
        return f"`{label}` is stored in `{', '.join(ctx.text(t.target) for t in targets)}`"
    if isinstance(parent, (cst.Element, cst.DictElement, cst.ListComp, cst.GeneratorExp)):
        return f"`{label}` is put in a container"
    return f"`{label}` is used here"


def _method_use(
    ctx: FileContext, inst: Instance, method: str, call: cst.Call, with_handles: bool
) -> bool:
    """Records ``pipe.<method>(...)`` on ``inst`` when it is migrated; False if it is not."""
    if method in DROPPED_METHODS and not call.args:
        expr = ctx.parents.get(call)
        stmt = ctx.parents.get(expr)
        if (
            isinstance(expr, cst.Expr)
            and isinstance(stmt, cst.SimpleStatementLine)
            and len(stmt.body) == 1
        ):
            inst.builds.append(stmt)
            return True
    if method in RUN_METHODS and not call.args:
        inst.runs.append(call)
        return True
    if method == "feed_input" and feeds.is_feed(call):
        expr = ctx.parents.get(call)
        if isinstance(expr, cst.Expr) and isinstance(
            ctx.parents.get(expr), cst.SimpleStatementLine
        ):
            inst.feeds.append(call)
            return True
    return with_handles and handles.record_use(ctx, inst, method, call)


def find_instances(
    ctx: FileContext,
    fn: cst.FunctionDef | cst.ClassDef,
    followups: list[FollowUp],
    *,
    pipeline_args: bool,
    with_handles: bool = False,
    peer_of: PeerOf | None = None,
) -> list[Instance]:
    """The objects ``fn(...)`` creates in this file, each followed to its uses. With
    ``pipeline_args`` (``@pipeline_def``), keyword arguments that are not parameters of ``fn``
    are pipeline arguments; ``peer_of``: see :class:`~.flow.Flow`."""
    scope = ctx.scopes.get(fn)
    refs = (
        [r for a in scope.assignments[fn.name.value] if a.node is fn for r in a.references]
        if scope
        else []
    )
    refs = in_source_order(ctx, refs)
    nodes = [r.node for r in refs if not within(ctx, r.node, fn)]  # super(Cls, self), recursion
    if isinstance(fn, cst.FunctionDef):  # the factory used by its own graph code
        what = f"`{fn.name.value}` is used inside its own definition"
        followups += [FollowUp(r.node, what) for r in refs if within(ctx, r.node, fn)]
    params = param_names(fn) if pipeline_args and isinstance(fn, cst.FunctionDef) else set()
    return instances_of(
        ctx,
        nodes,
        fn.name.value,
        params,
        followups,
        pipeline_args=pipeline_args,
        with_handles=with_handles,
        peer_of=peer_of,
    )


def instances_of(
    ctx: FileContext,
    refs: Sequence[cst.CSTNode],
    name: str,
    params: set[str],
    followups: list[FollowUp],
    *,
    pipeline_args: bool,
    with_handles: bool = False,
    peer_of: PeerOf | None = None,
) -> list[Instance]:
    """Each call of the pipeline factory ``name`` (``refs`` are references to it) creates an
    object, followed wherever it goes. ``with_handles``: see :func:`follow_pipeline`;
    checkpoint arguments are then the front end's."""
    calls = []
    # (references to a pipeline class other than calls are not followed)
    values = DefinitionValues(ctx, peer_of) if peer_of is not None and pipeline_args else None
    through: dict[int, ValueCall] = {}  # calls of a parameter (or name) given the definition
    for ref in refs:
        call = ctx.parents.get(ref)
        if isinstance(call, cst.Call) and call.func is ref:
            calls.append(call)
            continue
        reach = values.follow(ref) if values is not None else None
        if reach is None:
            followups.append(FollowUp(ref, f"`{name}` is used here other than by calling it"))
        else:
            followups += [f for f in reach.followups if f not in followups]
            through.update((id(v.call), v) for v in reach.calls if id(v.call) not in through)
    calls += [v.call for v in through.values()]
    flow = Flow(ctx, {id(c) for c in calls}, peer_of=peer_of)
    instances: list[Instance] = []
    for call in calls:
        stmt = ctx.enclosing_statement(call)
        args = _creation_args(ctx, call, name, params if pipeline_args else None, followups)
        if args is None:
            continue
        kwargs, found = args
        unsupported = check_pipeline_args(kwargs, f"at `{name}(...)`", checkpoints=with_handles)
        if unsupported:
            followups.append(FollowUp(call, "; ".join(unsupported)))
            continue
        assert isinstance(stmt, cst.SimpleStatementLine)
        inst = Instance(stmt, _plain_assign(stmt, call), call, kwargs, label=f"{name}(...)")
        inst.unpacked = found
        follow_pipeline(ctx, inst, call, flow, followups, with_handles=with_handles)
        value = through.get(id(call))
        if value is not None:  # pipe_fn(...): the definitions that may reach it share its code
            inst.through_value = True
            inst.label = f"{ctx.text(call.func)}(...)"
            inst.copies = 2  # one per call of the code around it, at least
            others = [d for d in value.defs if d.name.value != name]
            inst.value_peers, inst.value_param = len(others), value.via_param
            inst.peers = list({id(p): p for p in [*inst.peers, *others]}.values())
        instances.append(inst)
    return instances


def _creation_args(
    ctx: FileContext,
    call: cst.Call,
    name: str,
    params: set[str] | None,
    followups: list[FollowUp],
) -> tuple[dict[str, cst.Arg], Unpacked | None] | None:
    """The pipeline arguments of the creation ``call`` (``params``: the ``@pipeline_def``
    function's own parameters, whose keywords go to the function; None: a class, whose call
    passes every argument on) and what its star arguments hand it; None, with the follow-up,
    where the call is not rewritten."""
    stmt = ctx.enclosing_statement(call)
    found = unpacked(ctx, call) if any(a.star for a in call.args) else None
    why = (
        "the call is part of a compound statement"
        if not isinstance(stmt, cst.SimpleStatementLine)
        else _star_reason(found, params)
    )
    if why or isinstance(found, str):
        text = f"`{name}(...)` creates the pipeline here ({why}: not rewritten)"
        followups.append(FollowUp(call, text))
        return None
    if params is None:
        return {}, found
    kwargs = {k: v for k, v in kwargs_of(call).items() if k not in params}
    if found is not None:  # and those the dict always holds, read from it
        kwargs |= {
            k: cst.Arg(key_value(k, found, lambda _: None), keyword=cst.Name(k))
            for k in found.keys
            if k not in params
        }
    return kwargs, found


def _star_reason(found: Unpacked | str | None, params: set[str] | None) -> str | None:
    """Why the star arguments of a creation stop its rewrite (None: there are none, or they
    hand it what written-out arguments would). ``params``: the definition's own parameters,
    where the keywords that are not among them are pipeline arguments (``@pipeline_def``): the
    rewrite reads those the dict always holds as written-out ones (and takes them out of it)."""
    if isinstance(found, str):
        return found
    if found is None or params is None:
        return None
    for key in sorted(set(found.keys) - params):
        if key not in PIPELINE_ARGS:
            return f"its **kwargs may hold {key}, which neither the function nor the Pipeline takes"
        if key in _WRITTEN_ONLY:
            return f"its **kwargs hold {key}: write it out as a keyword"
        if not found.keys[key]:
            return (
                f"its **kwargs hold the pipeline argument {key} on some paths only: write it out "
                "as a keyword"
            )
    return None


def _plain_assign(stmt: cst.SimpleStatementLine, call: cst.Call) -> cst.Assign | None:
    """``stmt`` is ``<target> = <call>``: its assignment."""
    small = stmt.body[0] if len(stmt.body) == 1 else None
    if isinstance(small, cst.Assign) and small.value is call and len(small.targets) == 1:
        return small
    return None
