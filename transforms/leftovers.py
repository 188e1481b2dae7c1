"""DM205 leftovers: pipeline-mode API that no other rule migrated or marked gets a TODO where it
stands, so no file is left silently half-migrated.

Before (``fixtures/DM205/foreign_pipeline.in.py``)::

    \"\"\"Pipelines from a module not given to the run: each use of pipeline-mode API gets a TODO.\"\"\"
    from nvidia.dali import ops
    from nvidia.dali.pipeline import Pipeline
    from nvidia.dali.plugin.pytorch import DALIClassificationIterator, LastBatchPolicy

    from pipes import TrainPipe


    def make_loader(root, batch_size):
        pipe = TrainPipe(root, batch_size=batch_size, num_threads=4, device_id=0)
        pipe.build()
        return DALIClassificationIterator(pipe, reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL)


    def load_served(path):
        return Pipeline.deserialize(filename=path)


    class Flip:
        \"\"\"A transform object built from the legacy operator API.\"\"\"

        def __init__(self):
            self.op = ops.Flip(horizontal=1)

        def __call__(self, images):
            return self.op(images)

After (``fixtures/DM205/foreign_pipeline.out.py``)::

    \"\"\"Pipelines from a module not given to the run: each use of pipeline-mode API gets a TODO.\"\"\"
    from nvidia.dali import ops
    from nvidia.dali.pipeline import Pipeline
    from nvidia.dali.plugin.pytorch import DALIClassificationIterator, LastBatchPolicy

    from pipes import TrainPipe


    def make_loader(root, batch_size):
        pipe = TrainPipe(root, batch_size=batch_size, num_threads=4, device_id=0)
        # TODO(dali-migrate): DM205: pipeline-mode API left here: `pipe.build()` is a method of `pipe`, the Pipeline that DALIClassificationIterator runs and which is left with it (see its TODO): rewrite this with that iterator
        pipe.build()
        # TODO(dali-migrate): DM205: pipeline-mode API left here: DALIClassificationIterator, LastBatchPolicy.PARTIAL, a framework iterator: migrate the module that defines its pipeline in the same run, then loop over the pipeline's epochs and convert each ndd.Batch (.torch(), DLPack)
        return DALIClassificationIterator(pipe, reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL)


    def load_served(path):
        # TODO(dali-migrate): DM205: pipeline-mode API left here: Pipeline.deserialize, the Pipeline API, which dynamic mode has no counterpart of: run the operators directly (a serialized pipeline stays in pipeline mode for serving)
        return Pipeline.deserialize(filename=path)


    class Flip:
        \"\"\"A transform object built from the legacy operator API.\"\"\"

        def __init__(self):
            # TODO(dali-migrate): DM205: pipeline-mode API left here: ops.Flip, a legacy operator object: where this runs in dynamic mode, make it functools.partial(ndd.flip, <the same arguments>) and call it as before
            self.op = ops.Flip(horizontal=1)

        def __call__(self, images):
            return self.op(images)

It runs after every other rule and looks at what they left: references to ``fn``, ``ops``,
``Pipeline``, ``pipeline_def``, the framework plugins and ``types.Constant`` outside the code a
fix rewrites and outside a pipeline another rule already marked. Types, ``tfrecord`` features
and dynamic mode itself are not pipeline-mode API. Nothing is changed but the TODO lines, except
that first a class that wraps a framework iterator over the pipelines its callers hand it gets a
drop-in loader over the migrated generators, where every definition of the module migrated (a fix
of the rule that migrated them, ``_backend/wrapped_iterators.py``).

Safety: safe (it only writes comments).
"""  # noqa: E501 (the example is the fixture as the rule writes it)

from __future__ import annotations

import libcst as cst

from dali_migrate.catalog import REMOVED_OPS_CLASSES
from dali_migrate.context import OPS_PREFIX, FileContext
from dali_migrate.fixes import TODO_PREFIX, Diagnostic, Edit
from dali_migrate.rules import FileState, Rule

from ._backend.base_internals import base_uses
from ._backend.instances import DROPPED_METHODS, PIPELINE_METHOD_HINTS, RUN_METHODS
from ._backend.wrapped_fix import wrapped_loaders
from ._cst import walk, within

#: qualified-name prefixes of pipeline-mode API -> what to write instead
_KINDS = (
    (
        "nvidia.dali.plugin.pytorch.feed_ndarray",
        "DALI's copy of a Tensor into a torch tensor: with an ndd Tensor `t` write "
        "`arr.copy_(t.torch())` (an ndd Batch: `ndd.as_tensor(b).torch()`)",
    ),
    (
        "nvidia.dali.plugin.",
        "a framework iterator: migrate the module that defines its pipeline in the same run, "
        "then loop over the pipeline's epochs and convert each ndd.Batch (.torch(), DLPack)",
    ),
    (
        "nvidia.dali.ops.",
        "a legacy operator object: call the ndd operator on Batches where it is called",
    ),
    (
        "nvidia.dali.fn.",
        "a pipeline-mode operator: call the ndd operator on Batches where this runs",
    ),
    ("nvidia.dali.math.", "a pipeline-mode operator: use ndd.math on Batches"),
    (
        "nvidia.dali.types.Constant",
        "a pipeline-mode constant: use ndd.as_tensor(...) or a numpy array",
    ),
    (
        "nvidia.dali.auto_aug.",
        "automatic augmentation, pipeline-mode graph code (its policies need "
        "enable_conditionals=True): dynamic mode has no counterpart; keep the pipeline that "
        "runs it in pipeline mode, or write the augmentations with ndd operators per sample",
    ),
    (
        "nvidia.dali.pipeline_def",
        "a pipeline definition the tool could not see: migrate its module in the same run",
    ),
    (
        "nvidia.dali.pipeline.",
        "the Pipeline API, which dynamic mode has no counterpart of: run the operators directly "
        "(a serialized pipeline stays in pipeline mode for serving)",
    ),
    (
        "nvidia.dali.Pipeline",
        "the Pipeline API, which dynamic mode has no counterpart of: run the operators directly "
        "(a serialized pipeline stays in pipeline mode for serving)",
    ),
)


class Leftovers(Rule):
    id = "DM205"
    name = "leftovers"
    summary = "pipeline-mode API no other rule migrated gets a TODO where it stands"
    last = True

    def run(self, state: FileState) -> None:
        ctx = state.ctx
        covered = [e for f in state.fixes for e in f.edits] + wrapped_loaders(state)
        marked = {d.line for d in state.diagnostics if d.severity == "todo"}
        claimed = list(state.claimed)
        found: dict[int, tuple[cst.CSTNode, dict[str, list[str]]]] = {}
        # a pipeline of this module was migrated (DM200-DM204)
        here = any(f.rule in ("DM200", "DM201", "DM202", "DM203", "DM204") for f in state.fixes)
        for node in _references(ctx):
            q = ctx.qualname(node)
            kind = (
                _legacy_op(ctx, q)
                or _subclassed(ctx, node, q, here)
                or _tf_plugin(q, here)
                or _kind(q)
            )
            if kind is None or _inside(ctx, node, claimed, covered):
                continue
            kind = kind.replace(SAME_RUN, _first_step(ctx))
            stmt = ctx.enclosing_statement(node)
            if (
                _annotation(ctx, node)
                or ctx.first_line(stmt) in marked
                or ctx.line_of(node) in marked
            ):
                continue
            if _marker_above(ctx, ctx.first_line(stmt)) or _marker_above(ctx, ctx.line_of(node)):
                continue
            entry = found.setdefault(id(stmt), (node, {}))
            entry[1].setdefault(kind, []).append(ctx.text(node))
        for node, texts in found.values():
            state.diagnostics.append(_todo(ctx, self.id, node, texts))
        marked |= {d.line for d in state.diagnostics if d.severity == "todo"}
        for call, pipe, iterator in _pipeline_calls(ctx, claimed, covered):
            line = ctx.first_line(ctx.enclosing_statement(call))
            if (
                {line, line - 1} & marked
                or _marker_above(ctx, line)
                or _marker_above(ctx, line - 1)
            ):
                continue  # (a TODO two lines above names this code already)
            marked.add(line)
            state.diagnostics.append(
                ctx.todo(
                    self.id,
                    call,
                    f"pipeline-mode API left here: `{ctx.text(call.func)}()` is a method of "
                    f"`{pipe}`, the Pipeline that {iterator} runs and which is left with it (see "
                    "its TODO): rewrite this with that iterator",
                )
            )


#: methods of a pipeline object that only pipeline mode has
_PIPE_METHODS = {*DROPPED_METHODS, *RUN_METHODS, *PIPELINE_METHOD_HINTS}


def _pipeline_calls(
    ctx: FileContext, claimed: list[cst.CSTNode], covered: list[Edit]
) -> list[tuple[cst.Call, str, str]]:
    """``pipe.build()``, ``self.pipe.epoch_size()``... on a pipeline that a framework iterator
    left in place is given in the same function (or class, for ``self.<attr>``): each call,
    the pipeline's text and the iterator's name."""
    out: list[tuple[cst.Call, str, str]] = []
    for call in ctx.nodes_of(cst.Call):
        q = ctx.qualname(call.func) or ""
        if not q.startswith(_PLUGIN) or _inside(ctx, call, claimed, covered):
            continue
        given = [a.value for a in call.args[:1] if a.keyword is None]
        given += [a.value for a in call.args if a.keyword and a.keyword.value.startswith("pipe")]
        pipes = [e.value for g in given for e in _elements(g)]
        texts = {ctx.text(p) for p in pipes if isinstance(p, (cst.Name, cst.Attribute))}
        scope = _owner(ctx, call, any(t.startswith("self.") for t in texts))
        if not texts or scope is None:
            continue
        for other in walk(scope):
            func = other.func if isinstance(other, cst.Call) else None
            if (
                isinstance(other, cst.Call)
                and isinstance(func, cst.Attribute)
                and func.attr.value in _PIPE_METHODS
                and ctx.text(func.value) in texts
                and not _inside(ctx, other, claimed, covered)
            ):
                out.append((other, ctx.text(func.value), ctx.text(call.func)))
    return out


def _elements(value: cst.BaseExpression) -> list[cst.BaseElement]:
    """The pipelines ``[a, b]`` / ``(a,)`` list, or ``value`` itself."""
    if isinstance(value, (cst.List, cst.Tuple)):
        return list(value.elements)
    return [cst.Element(value)]


def _owner(ctx: FileContext, node: cst.CSTNode, in_class: bool) -> cst.CSTNode | None:
    """The function around ``node`` (its class where ``in_class``: ``self.pipe`` is shared by
    the methods); None at module level."""
    cur = ctx.parents.get(node)
    found: cst.CSTNode | None = None
    while cur is not None:
        if isinstance(cur, cst.FunctionDef) and found is None:
            found = cur
            if not in_class:
                return found
        if isinstance(cur, cst.ClassDef) and in_class:
            return cur
        cur = ctx.parents.get(cur)
    return found


def _todo(
    ctx: FileContext, rule: str, node: cst.CSTNode, kinds: dict[str, list[str]]
) -> Diagnostic:
    parts = [f"{', '.join(dict.fromkeys(names))}, {kind}" for kind, names in kinds.items()]
    return ctx.todo(
        rule, node, " ".join(f"pipeline-mode API left here: {'; '.join(parts)}".split())
    )


def _annotation(ctx: FileContext, node: cst.CSTNode) -> bool:
    """``node`` is (in) a type annotation: nothing runs it."""
    cur = ctx.parents.get(node)
    while cur is not None and not isinstance(cur, cst.BaseStatement):
        if isinstance(cur, cst.Annotation):
            return True
        cur = ctx.parents.get(cur)
    return False


def _marker_above(ctx: FileContext, line: int) -> bool:
    """A ``# TODO(dali-migrate)`` of any rule already stands right above ``line``."""
    line -= 1
    starts = ctx.lines.starts
    if line < 1 or line > len(starts):
        return False
    end = starts[line] if line < len(starts) else len(ctx.source)
    return ctx.source[starts[line - 1] : end].strip().startswith(TODO_PREFIX)


def _references(ctx: FileContext) -> list[cst.CSTNode]:
    """The outermost names and attribute chains that may refer to DALI (not in imports)."""
    out = []
    for node in ctx.nodes_of(cst.Name, cst.Attribute):
        parent = ctx.parents.get(node)
        if isinstance(parent, cst.Attribute) and parent.value is node:
            continue  # part of a longer chain
        if isinstance(parent, cst.Attribute) and parent.attr is node:
            continue  # the attribute name of a chain
        if isinstance(ctx.enclosing_statement(node), cst.SimpleStatementLine) and _in_import(
            ctx, node
        ):
            continue
        out.append(node)
    return out


def _in_import(ctx: FileContext, node: cst.CSTNode) -> bool:
    cur = ctx.parents.get(node)
    while cur is not None and not isinstance(cur, cst.SimpleStatementLine):
        if isinstance(cur, (cst.Import, cst.ImportFrom)):
            return True
        cur = ctx.parents.get(cur)
    return False


def _legacy_op(ctx: FileContext, q: str | None) -> str | None:
    """What to write instead of the legacy operator object ``q`` (``nvidia.dali.ops.X``)."""
    op = ctx.catalog.ops_class(q[len(OPS_PREFIX) :]) if q and q.startswith(OPS_PREFIX) else None
    target = op.target if op is not None else None
    if target is None or target.ndd_path is None:
        return None
    ndd = f"{ctx.ndd}.{target.ndd_path}"
    if target.is_reader:
        return (
            f"a legacy reader object: where this runs in dynamic mode, build {ndd}(...) with the "
            "same arguments once and iterate reader.next_epoch(batch_size=...)"
        )
    sized = ""
    if target.is_random and op is not None and not op.inputs[0]:
        sized = " with batch_size= (of the data it goes with)"
    elif target.is_decoder:
        sized = ' (device="mixed" becomes "gpu")'
    removed = REMOVED_OPS_CLASSES.get(q[len(OPS_PREFIX) :]) if q else None
    gone = f" (DALI removed this class: in pipeline mode it is ops.{removed})" if removed else ""
    return (
        f"a legacy operator object{gone}: where this runs in dynamic mode, make it "
        f"functools.partial({ndd}, <the same arguments>) and call it as before{sized}"
    )


def _subclassed(ctx: FileContext, node: cst.CSTNode, q: str | None, here: bool) -> str | None:
    """A framework-iterator name in a class of this module that subclasses one (its base, its
    ``last_batch_policy``): what to write instead of that class (``here``: over a pipeline this
    module defines, migrated)."""
    if not q or not q.startswith(_PLUGIN):
        return None
    cur = ctx.parents.get(node)
    while cur is not None and not isinstance(cur, cst.ClassDef):
        cur = ctx.parents.get(cur)
    if cur is None or not any((ctx.qualname(b.value) or "").startswith(_PLUGIN) for b in cur.bases):
        return None
    name = cur.name.value
    uses = base_uses(cur) if any(within(ctx, node, b) for b in cur.bases) else []
    return (
        f"a framework iterator that {name} subclasses or configures: "
        + ("" if here else "migrate the module that defines its pipeline in the same run, then ")
        + f"write {name} without the DALI base, over the migrated pipeline: loop over "
        "reader.next_epoch(batch_size=...), convert each ndd.Batch (.torch(), DLPack) and end "
        "each epoch as its last_batch_policy did"
        + (f"; of the DALI base it uses: {'; '.join(uses)}" if uses else "")
    )


_PLUGIN = "nvidia.dali.plugin."

#: the first step where the module that defines the pipeline was not among the paths of the run
SAME_RUN = "migrate the module that defines its pipeline in the same run, then "


def _first_step(ctx: FileContext) -> str:
    """What to do first about the pipeline's definition: where every pipeline this module
    imports from the other modules of the run stayed in pipeline mode, migrate it there (its
    module was given: its TODO says why it was not)."""
    info = ctx.project
    foreign = list(info.foreign.values()) if info is not None else []
    if not foreign or any(fp.migrated for fp in foreign):
        return SAME_RUN
    names = ", ".join(sorted({f"{fp.name} of {fp.module}" for fp in foreign}))
    return (
        f"its pipeline ({names}, given in this run) stayed in pipeline mode (see the TODO at its "
        "definition): once it migrates, "
    )


def _tf_plugin(q: str | None, here: bool) -> str | None:
    """TensorFlow's plugin (``DALIDataset``, the ``DALIIterator()`` op): what to write, as the
    tool writes it where it migrates the dataset (``here``: a pipeline of this module is a
    generator of batches now)."""
    if not q or not q.startswith(_PLUGIN + "tf."):
        return None
    return (
        "TensorFlow's DALI plugin: "
        + ("" if here else "migrate the module that defines its pipeline in the same run, then ")
        + "make the dataset tf.data.Dataset.from_generator(lambda: batches(...), "
        "output_signature=(tf.TensorSpec(shape, dtype), ...)) from the shapes/dtypes, where "
        "batches() calls the reader once per step and yields np.asarray(ndd.as_tensor(out.cpu())) "
        "per output"
        + (
            "; the DALIIterator() op's tensors are "
            "tf.compat.v1.data.make_one_shot_iterator(dataset).get_next() (graph mode: one "
            "pipeline per op)"
            if q.endswith(".DALIIterator")
            else ""
        )
    )


def _kind(q: str | None) -> str | None:
    if not q:
        return None
    for prefix, what in _KINDS:
        if q == prefix.rstrip(".") or q.startswith(prefix):
            return what
    return None


def _inside(
    ctx: FileContext, node: cst.CSTNode, claimed: list[cst.CSTNode], covered: list[Edit]
) -> bool:
    """``node`` is code a structural rule owns, or code a fix rewrites."""
    if any(within(ctx, node, c) for c in claimed):
        return True
    pos = ctx.positions[node].start
    start = ctx.lines.offset(pos.line, pos.column)
    return any(e.start <= start < e.end for e in covered)
