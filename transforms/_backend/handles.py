"""Pipeline methods that need a handle on the migrated pipeline's reader or state:
``pipe.epoch_size()``, ``pipe.reader_meta()``, ``pipe.checkpoint()``
and ``p(..., checkpoint=cpt)``, and ``pipe.reset()``. A component of DM200, not a rule.

Before::

    @pipeline_def(batch_size=4, enable_checkpointing=True)
    def numbers(data_dir):
        data = fn.readers.numpy(file_root=data_dir, name="Reader")
        return data

    pipe = numbers(data_dir)
    pipe.build()
    steps = pipe.epoch_size("Reader") // 4
    ...
    cpt = pipe.checkpoint()
    restored = numbers(data_dir, checkpoint=cpt)

After::

    def numbers(data_dir, *, batch_size=4, checkpoint=None):
        \"\"\"Returns the reader (for its metadata), an ndd.checkpoint.Checkpoint of its state and a
        generator of (data) batches ...\"\"\"
        reader = ndd.readers.Numpy(file_root=data_dir, max_batch_size=batch_size, enable_checkpointing=True)
        # ndd.checkpoint writes JSON: checkpoints taken by the old pipeline cannot be restored here
        ckpt = ndd.checkpoint.Checkpoint()
        if checkpoint is not None:
            ckpt.deserialize(checkpoint)
        ckpt.register(reader, "reader")

        def batches():
            ...

        return reader, ckpt, batches()

    reader, ckpt, pipe = numbers(data_dir)
    steps = reader.get_metadata()["epoch_size_padded"] // 4
    ...
    ckpt.collect()
    cpt = ckpt.serialize()
    _, _, restored = numbers(data_dir, checkpoint=cpt)

Why this shape: the reader lives in the generator, whose body runs only at the first
``next()``; the call site needs the reader (its metadata) and the checkpoint (its state)
before that, so the function builds them eagerly and returns them next to the generator of
batches, which is the same inner ``batches()`` the iterator migration uses. Only pipelines whose
instances need a handle change shape. The reader is built with ``max_batch_size`` (metadata read
before the first batch would fix the batch size to 1: docs/dali-facts.md [metadata]) and ``enable_checkpointing=True``
(then no capture mode, which does not support checkpoints). Registration happens before the first
``next_epoch``, as a restore requires.

A restore from a checkpoint taken in the middle of an epoch: the restored ndd reader yields a
full-length epoch from the saved position, but the generator chains epochs without
end, so the stream of batches equals what the restored pipeline's ``run()`` gave; checked with
padding, shards (with and without ``stick_to_shard``), ``random_shuffle`` and
``shuffle_after_epoch``. A pipeline consumed by epochs (framework iterators) is not migrated here.

``pipe.reset()`` only restarts external sources that raised StopIteration (``Pipeline.reset``):
on a pipeline without external sources it does nothing, and it is removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import libcst as cst

from dali_migrate.context import FileContext, attr_chain
from dali_migrate.fixes import Edit

from .._cst import fresh_name, leading_lines, truthy, walk
from .docstrings import generator_kind, graph_outputs_text, is_generated_doc, until_phrase
from .edits import removed_stmt
from .handle_relays import name_relays, reader_name, relay_edits, relay_reason, site_of
from .meta_reads import key_free_edits, key_free_reads
from .model import FollowUp, Graph, Instance
from .reader_choice import chosen_one

META_METHODS = ("epoch_size", "reader_meta")
#: the parameter that takes a checkpoint to restore, as ``Pipeline(checkpoint=...)`` did
RESTORE_PARAM = "checkpoint"
FORMAT_COMMENT = (
    "# ndd.checkpoint writes JSON: checkpoints taken by the old pipeline cannot be restored here"
)
#: said in the fix's report when checkpoints are migrated
FORMAT_NOTE = (
    "checkpoints are now ndd.checkpoint.Checkpoint JSON strings: checkpoints saved by the old "
    "pipeline "
    "(pipe.checkpoint()) cannot be restored by the migrated code, nor the reverse; take new ones. "
    "A checkpoint "
    "taken before the first batch raises in dynamic mode (the reader has no state yet)"
)
ITERATORS = ("nvidia.dali.plugin.",)


def record_use(ctx: FileContext, inst: Instance, method: str, call: cst.Call) -> bool:
    """``pipe.<method>(...)`` found by follow_pipeline: record it on ``inst`` when it is one this
    module migrates (True), else leave it to be a reason (False)."""
    if method in META_METHODS:
        if _in_iterator_call(ctx, call):
            return False  # size=pipe.epoch_size(...) belongs to the iterator migration
        inst.meta_calls.append(call)
        return True
    if method == "checkpoint":
        inst.checkpoints.append(call)
        return True
    if method == "reset" and not call.args:
        expr = ctx.parents.get(call)
        stmt = ctx.parents.get(expr)
        if (
            isinstance(expr, cst.Expr)
            and isinstance(stmt, cst.SimpleStatementLine)
            and len(stmt.body) == 1
        ):
            inst.resets.append(stmt)
            return True
    return False


def abandon_handles(inst: Instance, reasons: dict[int, str], followups: list[FollowUp]) -> None:
    """The reader/checkpoint uses of ``inst`` cannot all be migrated (``reasons``, see
    :func:`handle_reasons`): each becomes a follow-up that says why, and the function stays a
    plain generator of batches."""
    general = reasons.get(0, "")
    uses: list[cst.Call | cst.SimpleStatementLine] = [
        *inst.meta_calls,
        *inst.checkpoints,
        *inst.resets,
    ]
    for node in uses:
        call = node if isinstance(node, cst.Call) else _reset_call(node)
        func = cst.ensure_type(call.func, cst.Attribute)  # pipe.<method>
        what = f"`{_code(func.value)}.{func.attr.value}(...)` is not migrated"
        why = reasons.get(id(node), general) or "another use of the pipeline is not migrated"
        followups.append(
            FollowUp(call, what, f"{why}; {PIPELINE_HINTS.get(func.attr.value, '')}".strip("; "))
        )
    if RESTORE_PARAM in inst.kwargs:
        why = reasons.get(id(inst.call), general)
        followups.append(
            FollowUp(inst.call, f"restoring from {RESTORE_PARAM}= is not migrated", why)
        )
        inst.kwargs = {k: v for k, v in inst.kwargs.items() if k != RESTORE_PARAM}
        inst.keep_args.add(RESTORE_PARAM)
    inst.meta_calls, inst.checkpoints, inst.resets = [], [], []


#: what to write instead of the pipeline methods this plug-in migrates, where it cannot
PIPELINE_HINTS = {
    "epoch_size": "use the reader's get_metadata()['epoch_size_padded'] (built with max_batch_size)",
    "reader_meta": "use the reader's get_metadata() (built with max_batch_size)",
    "checkpoint": "register the reader and the RNG with ndd.checkpoint.Checkpoint",
    "reset": "each reader.next_epoch() is a new epoch",
}


@dataclass
class Needs:
    """What the migrated function must give: the reader, a Checkpoint, a restore parameter."""

    reader: bool = False
    checkpoint: bool = False
    restore: bool = False

    @property
    def checkpointing(self) -> bool:
        return self.checkpoint or self.restore

    @property
    def handles(self) -> list[str]:
        return [k for k in ("reader", "checkpoint") if getattr(self, k)]


def needs_of(instances: list[Instance]) -> Needs:
    return Needs(
        reader=any(i.meta_calls for i in instances),
        checkpoint=any(i.checkpoints for i in instances),
        restore=any(RESTORE_PARAM in i.kwargs for i in instances),
    )


def handle_reasons(
    ctx: FileContext, graph: Graph, instances: list[Instance], enabled: bool, params: set[str]
) -> dict[int, str]:
    """Why the recorded uses cannot be migrated, by the id of the call or statement they are
    about (empty: they can), with ``0`` for what is about the pipeline as a whole. ``enabled``:
    the definition has ``enable_checkpointing=True``; ``params``: the function's parameters."""
    reasons: dict[int, str] = {}
    needs = needs_of(instances)
    reader_name = _reader_name(graph)
    for inst in instances:
        inst.reader_name = reader_name
        used = inst.meta_calls or inst.checkpoints or inst.resets or RESTORE_PARAM in inst.kwargs
        if used and inst.iterators:
            reasons[0] = "the pipeline is also iterated through a framework iterator"
        relayed_why = relay_reason(ctx, inst, needs.handles)
        for call in inst.meta_calls:
            why = _meta_reason(ctx, graph, call, reader_name) or relayed_why
            if why is None and inst.relays and site_of(ctx, inst, call) is None:
                why = f"`{_code(call.func)}` may hold the pipeline of more than one call"
            if why:
                reasons[id(call)] = why
        for stmt in inst.resets:
            if graph.sources:
                reasons[id(stmt)] = (
                    "it restarts external sources that ended (make the source start over, then "
                    "create the "
                    "pipeline again)"
                )
        checkpointed = enabled or truthy(inst.kwargs.get("enable_checkpointing"))
        for call in inst.checkpoints:
            if call.args:
                reasons[id(call)] = (
                    "writing the checkpoint to a file is not migrated yet (write ckpt.serialize())"
                )
            elif not checkpointed:
                reasons[id(call)] = "the pipeline is not built with enable_checkpointing=True"
            else:
                why = _statement_reason(ctx, call, inst.name)
                if why:
                    reasons[id(call)] = why
        if RESTORE_PARAM in inst.kwargs and not checkpointed:
            reasons[id(inst.call)] = "checkpoint= without enable_checkpointing=True"
    if needs.checkpointing and graph.sources:
        reasons[0] = (
            "checkpoints of a pipeline with an external source (its position is in the checkpoint)"
        )
    if needs.restore and RESTORE_PARAM in params:
        reasons[0] = f"the pipeline function already has a parameter named {RESTORE_PARAM}"
    return reasons


def _meta_reason(
    ctx: FileContext, graph: Graph, call: cst.Call, reader_name: str | None
) -> str | None:
    """Why ``pipe.epoch_size(...)`` / ``reader_meta(...)`` cannot become the reader's metadata."""
    if len(graph.readers) == 1 and graph.readers[0].guards:
        return "the pipeline's reader is made under an `if`: it may not exist"
    if len(graph.readers) != 1 and not chosen_one(graph.readers):
        if any(u.guards for u in graph.readers):
            return (
                f"the pipeline has {len(graph.readers)} readers, not one per branch of an "
                "`if`/`else` (one of them, into one variable): which one is read is not known"
            )
        return f"the pipeline has {len(graph.readers)} readers, only one is migrated"
    name = name_arg(call)
    if name is False:
        return "its arguments are not a reader name"
    if name is None and reader_name is None and key_free_reads(ctx, call) is None:
        return (
            "the reader has no name= to key the dictionary it returns (DALI keyed it by a name "
            "it made up) and not every read of the dictionary takes its one value in this function"
        )
    if name is not None and (
        not isinstance(name, cst.SimpleString) or name.evaluated_value != reader_name
    ):
        return f"{ctx.text(name)} is not the name= of the pipeline's reader"
    return None


def dropped_checkpointing(enabled: bool, needs: Needs) -> list[cst.EmptyLine]:
    """The comment for ``enable_checkpointing=True`` where nothing checkpoints the pipeline."""
    if not enabled or needs.checkpointing:
        return []
    text = "# dali-migrate: dropped enable_checkpointing=True: nothing checkpoints or restores this pipeline"
    return [cst.EmptyLine(comment=cst.Comment(text))]


def wrap_body(
    ctx: FileContext, body: list[cst.BaseStatement], graph: Graph, needs: Needs
) -> list[cst.BaseStatement]:
    """The generator body from ``emit_generator_body`` (docstring, setup, the endless loop),
    with the checkpoint built and restored before the loop, made a function that returns the
    handles the call sites need and the generator of batches."""
    if not needs.checkpointing and not needs.handles:
        return body
    doc, setup, loop = body[0], list(body[1:-1]), body[-1]
    taken = {n.value for s in body for n in walk(s) if isinstance(n, cst.Name)} | {RESTORE_PARAM}
    ckpt = fresh_name("ckpt", taken)
    if needs.checkpointing:
        setup += _checkpoint_setup(ctx, graph, ckpt, needs.restore)
    if not needs.handles:
        return [doc, *setup, loop]
    outputs = graph_outputs_text(ctx, graph)
    until = until_phrase(generator_kind(graph, fed=False))
    batches = fresh_name("batches", taken)
    inner_doc = _doc(f"{outputs} batches {until} as Pipeline.run() gave them.")
    first = loop.with_changes(leading_lines=list(leading_lines(loop)))
    inner = cst.FunctionDef(
        name=cst.Name(batches),
        params=cst.Parameters(),
        body=cst.IndentedBlock([inner_doc, first]),
        leading_lines=[cst.EmptyLine(indent=False)],
    )
    returned: list[cst.BaseExpression] = [
        cst.Name(graph.handles["readers"][0]) if k == "reader" else cst.Name(ckpt)
        for k in needs.handles
    ]
    returned.append(cst.Call(cst.Name(batches)))
    ret = cst.SimpleStatementLine(
        [cst.Return(cst.Tuple([cst.Element(v) for v in returned], lpar=[], rpar=[]))],
        leading_lines=[cst.EmptyLine(indent=False)],
    )
    if is_generated_doc(doc):
        said = {
            "reader": "the reader (for its metadata)",
            "checkpoint": "an ndd.checkpoint.Checkpoint of its state",
        }
        handles = ", ".join(said[k] for k in needs.handles)
        doc = _doc(
            f"Returns {handles} and a generator of its {outputs} batches, as Pipeline.run() "
            "gave them."
        )
    return [doc, *setup, inner, ret]


def _checkpoint_setup(
    ctx: FileContext, graph: Graph, ckpt: str, restore: bool
) -> list[cst.BaseStatement]:
    ndd = ctx.ndd
    make = cst.SimpleStatementLine(
        [
            cst.Assign(
                [cst.AssignTarget(cst.Name(ckpt))],
                cst.Call(attr_chain(f"{ndd}.checkpoint.Checkpoint")),
            )
        ],
        leading_lines=[cst.EmptyLine(comment=cst.Comment(FORMAT_COMMENT))],
    )
    out: list[cst.BaseStatement] = [make]
    if restore:
        deserialize = _call_stmt(ckpt, "deserialize", [cst.Arg(cst.Name(RESTORE_PARAM))])
        out.append(
            cst.If(
                test=cst.Comparison(
                    cst.Name(RESTORE_PARAM), [cst.ComparisonTarget(cst.IsNot(), cst.Name("None"))]
                ),
                body=cst.IndentedBlock([deserialize]),
            )
        )
    objects = list(graph.handles.get("readers", []))
    if graph.handles.get("rng"):
        objects.append(graph.handles["rng"])
    for var in objects:
        out.append(
            _call_stmt(
                ckpt, "register", [cst.Arg(cst.Name(var)), cst.Arg(cst.SimpleString(f'"{var}"'))]
            )
        )
    return out


def name_handles(ctx: FileContext, instances: list[Instance], needs: Needs) -> None:
    """The names each call site binds to the returned handles: ``reader`` / ``ckpt`` for the
    first instance that uses them (``<pipe>_reader`` when taken), ``_`` where unused."""
    if not needs.handles:
        return
    taken = {n.value for n in walk(ctx.module) if isinstance(n, cst.Name)} | ctx.skipped_names
    underscore = "_" not in taken or not _underscore_read(ctx)
    base = {"reader": "reader", "checkpoint": "ckpt"}
    module_names = set(taken)
    for inst in instances:
        pipe = inst.name if inst.local or inst.relayed else inst.label
        used = {"reader": bool(inst.meta_calls), "checkpoint": bool(inst.checkpoints)}
        for kind in needs.handles:
            if not used[kind] and underscore:
                inst.handle_names[kind] = "_"
            elif base[kind] not in taken:
                inst.handle_names[kind] = fresh_name(base[kind], taken)
            else:
                inst.handle_names[kind] = fresh_name(f"{pipe}_{base[kind]}", taken)
        if inst.relays and inst.meta_calls:
            name_relays(ctx, inst, needs.handles, module_names, underscore)


def site_edits(ctx: FileContext, inst: Instance) -> list[Edit]:
    """``pipe.epoch_size(...)`` / ``reader_meta(...)`` read the reader's metadata,
    ``pipe.checkpoint()`` collects and serializes the Checkpoint, ``pipe.reset()`` goes."""
    edits = [removed_stmt(ctx, stmt) for stmt in inst.resets]
    edits += relay_edits(ctx, inst)
    # name_handles named the reader and the checkpoint of an instance that uses them
    for call in inst.meta_calls:
        reader = cst.Name(reader_name(ctx, inst, call))
        if inst.reader_name is None and not call.args:  # _meta_reason found its reads
            found = key_free_reads(ctx, call)
            assert found is not None
            edits += key_free_edits(ctx, found, metadata_value(reader, call, None))
            continue
        key = cst.SimpleString(f'"{inst.reader_name}"')
        edits.append(ctx.expr_edit(call, metadata_value(reader, call, key)))
    for call in inst.checkpoints:
        ckpt = inst.handle_names["checkpoint"]
        # a statement of its own, or _statement_reason refused the checkpoint
        stmt = cst.ensure_type(ctx.enclosing_statement(call), cst.SimpleStatementLine)
        collect = _call_stmt(ckpt, "collect", []).with_changes(leading_lines=stmt.leading_lines)
        small = stmt.body[0]
        if isinstance(small, cst.Expr) and small.value is call:
            edits.append(ctx.stmt_edit(stmt, [collect]))  # the checkpoint was not kept
            continue
        serialized = cst.Call(cst.Attribute(cst.Name(ckpt), cst.Name("serialize")))
        new = stmt.deep_replace(call, serialized).with_changes(leading_lines=[])
        edits.append(ctx.stmt_edit(stmt, [collect, new]))
    return edits


def metadata_value(
    reader: cst.BaseExpression, call: cst.Call, key: cst.BaseExpression | None
) -> cst.BaseExpression:
    """What ``pipe.epoch_size(...)`` / ``pipe.reader_meta(...)`` gave, read from ``reader``:
    ``reader.get_metadata()["epoch_size_padded"]`` (``reader_meta``: the whole dictionary);
    without a name the pipeline returned ``{key: value}``, ``key`` the reader's name."""
    meta: cst.BaseExpression = cst.Call(cst.Attribute(reader, cst.Name("get_metadata")))
    if cst.ensure_type(call.func, cst.Attribute).attr.value == "epoch_size":
        meta = cst.Subscript(
            meta, [cst.SubscriptElement(cst.Index(cst.SimpleString('"epoch_size_padded"')))]
        )
    if not call.args and key is not None:
        meta = cst.Dict([cst.DictElement(key, meta)])
    return meta


# -- small helpers ----------------------------------------------------------------------------


def _reader_name(graph: Graph) -> str | None:
    """The literal name= of the pipeline's reader (of each of the readers the branches of one
    ``if`` choose from, the same in all: ``reader_choice``), or None."""
    if len(graph.readers) != 1 and not chosen_one(graph.readers):
        return None
    names = {_literal_name(u.call) for u in graph.readers}
    return names.pop() if len(names) == 1 else None


def _literal_name(call: cst.Call) -> str | None:
    for a in call.args:
        if (
            a.keyword is not None
            and a.keyword.value == "name"
            and isinstance(a.value, cst.SimpleString)
        ):
            value = a.value.evaluated_value
            return value if isinstance(value, str) else None  # a bytes name= names no reader
    return None


def name_arg(call: cst.Call) -> cst.BaseExpression | Literal[False] | None:
    """The reader name a metadata call passes: None (none), the expression, or False (other
    arguments)."""
    if not call.args:
        return None
    if (
        len(call.args) == 1
        and not call.args[0].star
        and (call.args[0].keyword is None or call.args[0].keyword.value == "name")
    ):
        return call.args[0].value
    return False


def _statement_reason(ctx: FileContext, call: cst.Call, pipe: str) -> str | None:
    """``pipe.checkpoint()`` becomes ``ckpt.collect()`` before its statement: the statement must
    be a plain one in a block, evaluate the call unconditionally and use ``pipe`` only there."""
    stmt = ctx.enclosing_statement(call)
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return "not a statement of its own"
    node = ctx.parents.get(call)
    while node is not None and node is not stmt:
        if not isinstance(
            node,
            (
                cst.Assign,
                cst.AssignTarget,
                cst.Expr,
                cst.Arg,
                cst.Call,
                cst.Tuple,
                cst.Element,
                cst.List,
            ),
        ):
            return "evaluated under a condition or later (lambda, comprehension, if-expression)"
        node = ctx.parents.get(node)
    if sum(isinstance(n, cst.Name) and n.value == pipe for n in walk(stmt)) != 1:
        return f"its statement uses `{pipe}` more than once"
    return None


def _in_iterator_call(ctx: FileContext, call: cst.Call) -> bool:
    node = ctx.parents.get(call)
    while node is not None and not isinstance(node, cst.BaseStatement):
        if isinstance(node, cst.Call) and (ctx.qualname(node.func) or "").startswith(ITERATORS):
            return True
        node = ctx.parents.get(node)
    return False


def _underscore_read(ctx: FileContext) -> bool:
    """Whether the module reads a variable named ``_`` (then it is not free for unused handles)."""
    if "_" in ctx.skipped_reads:
        return True
    for n in walk(ctx.module):
        if isinstance(n, cst.Name) and n.value == "_":
            node: cst.CSTNode = n
            parent = ctx.parents.get(n)
            while isinstance(parent, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
                node, parent = parent, ctx.parents.get(parent)
            stored = (isinstance(parent, cst.AssignTarget) and parent.target is node) or (
                isinstance(parent, (cst.For, cst.CompFor)) and parent.target is node
            )
            if not stored:
                return True
    return False


def _reset_call(stmt: cst.SimpleStatementLine) -> cst.Call:
    """The call of a recorded ``pipe.reset()`` statement (record_use checked its shape)."""
    return cst.ensure_type(cst.ensure_type(stmt.body[0], cst.Expr).value, cst.Call)


def _call_stmt(obj: str, method: str, args: list[cst.Arg]) -> cst.SimpleStatementLine:
    return cst.SimpleStatementLine(
        [cst.Expr(cst.Call(cst.Attribute(cst.Name(obj), cst.Name(method)), args=args))]
    )


def _doc(text: str) -> cst.SimpleStatementLine:
    return cst.SimpleStatementLine([cst.Expr(cst.SimpleString(f'"""{text}"""'))])


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)
