"""The loader class that replaces a pipeline consumed through a framework iterator (a component
of DM200, fed by ``iterators``): one small class per pipeline + iterator, whose ``__init__``
builds the reader once and whose ``__iter__`` runs one epoch per pass and yields what the
iterator yielded, with only the lines the iterator's configuration needs.

Before::

    @pipeline_def(batch_size=64, num_threads=4, device_id=0)
    def loader_pipeline(root):
        jpegs, labels = fn.readers.file(file_root=root, name="Reader")
        images = fn.decoders.image(jpegs, device="mixed")
        return images, labels

    pipe = loader_pipeline("/data/train")
    loader = DALIGenericIterator([pipe], ["data", "label"], reader_name="Reader",
                                 last_batch_policy=LastBatchPolicy.PARTIAL)

After::

    class Loader:
        \"\"\"Batches as DALIGenericIterator gave them, one epoch per pass.\"\"\"

        def __init__(self, root, batch_size=64):
            self.batch_size = batch_size
            # max_batch_size: get_metadata() before the first epoch would fix it to 1
            self.reader = ndd.readers.File(file_root=root, max_batch_size=batch_size)
            self.samples = self.reader.get_metadata()["epoch_size"]

        def __iter__(self):
            left = self.samples  # PARTIAL: the last batch keeps only the samples left in the epoch
            for jpegs, labels in self.reader.next_epoch(batch_size=self.batch_size):
                images = ndd.decoders.image(jpegs, device="gpu")
                yield [{"data": images.torch()[:left], "label": labels.torch()[:left]}]
                left -= self.batch_size

    ndd.set_num_threads(4)
    loader = Loader("/data/train")

What each configuration gets (why it is exact: one ``next_epoch()`` gives the batches of the
current shard, padded or wrapped into the next epoch, then moves to the next shard; chained,
they are the ``pipe.run()`` stream that DALI's iterator cut into epochs):

- FILL over a padded reader: the epoch itself. PARTIAL over one shard, or a padded one: the
  epoch, its outputs cut to the samples left (``[:left]``, on the framework tensor, after the
  operators ran for the whole batch), the shard moving on per epoch. DROP over one shard: the
  epoch, the incomplete last batch run and not given.
- Where DALI's epochs do not line up with the reader's (FILL without padding, PARTIAL and DROP
  over unpadded shards, ``size=``), ``_batches()`` is the endless stream and each pass takes as
  many batches as DALI's iterator took: FILL counts the samples it read past the end into the
  next epoch, sharded FILL asks ``dali_fill_epochs`` (copied from ``runtime``).
- No ``reader_name`` or ``size``: the stream, never ending an epoch.
- A loop that can leave an epoch early (``break``) resumes it on the next pass, as DALI's
  iterator did, with FILL; with PARTIAL and DROP it is refused (``iterators``).
- ``len(loader)``, or a Lightning hook that returns it: ``__len__``, DALI's count.
- Taken by code the tool cannot read (returned by a function no code of the module calls, a
  data module's ``get_loader()``; ``iter(it)``; an argument of ``islice()`` or of a call into
  another module), or used in ways the loader above cannot take (``next()`` mixed with loops
  or resets, a PARTIAL or DROP epoch left early): the loader is a drop-in iterator, as DALI's
  was (``__iter__`` returns it, ``__next__`` takes from the epoch ``_epoch_batches()`` runs, so
  a loop and ``next()`` go on with the same epoch; the batch after each is taken ahead, so an
  epoch is over with its last batch, as DALI counted; ``reset()``, which a new loop calls, then
  starts the next), with ``__len__``; every use stays as written. For unseen code, not in
  capture mode (a loader may be made by each call, and one capture loop can run).
"""

from __future__ import annotations

import keyword

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Edit

from .._cst import (
    append_arg,
    assigned_names,
    free_names,
    fresh_name,
    kwarg,
    names_in,
    remove_args,
    walk,
)
from .arguments import PIPELINE_ARGS, set_threads_stmt
from .datasets import output_signature
from .docstrings import output_names
from .edits import removed_stmt
from .emit import CAPTURE_COMMENT
from .handles import metadata_value
from .iterator_checks import (
    SIZE_BUILTINS,
    epochs_kind,
    is_sharded,
    made_elsewhere,
    size_parameters,
)
from .iterator_use import IteratorUse
from .layout import fit
from .loader_parts import (
    LoaderBody,
    LoaderClass,
    atom_of,
    bound_in,
    class_def,
    class_doc,
    class_name,
    import_edits,
    imported_as,
    init_params,
    method_def,
    module_alias,
    renamed,
    runtime_helpers,
    stmt_of,
    stmts_of,
    yield_batch,
)
from .model import Graph, Instance, Refused
from .sites import device_todo_line, enclosing_blocks
from .source_loaders import source_loader_definition

KEPT_RESET = "# nothing to do: each pass is an epoch; kept for code that also resets DALI iterators"
MAX_BATCH_COMMENT = "# max_batch_size: get_metadata() before the first epoch would fix it to 1"
RESUME = "# else a loop left early resumes its epoch, as DALI's iterator did"
FILL_AHEAD = (
    "# FILL: an epoch ends with the batch that reaches its last sample; the samples that batch\n"
    "# took from the next epoch count into it"
)
PARTIAL_SHARDS = (
    "# PARTIAL: the last batch keeps only the samples of this epoch's shard; the reader moves on\n"
    "# to the next shard after each epoch"
)
PARTIAL_ONE = "# PARTIAL: the last batch keeps only the samples left in the epoch"
DROP = "# DROP: the incomplete last batch is read, not given"


# -- the body the emitter wrote --------------------------------------------------------------------


def _parts(body: list[cst.BaseStatement]) -> LoaderBody:
    loop = body[-1]
    inner = loop.body.body if isinstance(loop, cst.While) else ()
    epoch_for = inner[0] if len(inner) == 1 else None
    if not (isinstance(epoch_for, cst.For) and isinstance(epoch_for.iter, cst.Call)):
        raise Refused("the generated epoch loop has an unexpected shape")
    epoch = epoch_for.iter
    if not (isinstance(epoch.func, cst.Attribute) and isinstance(epoch.func.value, cst.Name)):
        raise Refused("the generated epoch loop has an unexpected shape")
    stmts = list(epoch_for.body.body)
    last = stmts[-1] if stmts else None
    small = (
        last.body[0] if isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1 else None
    )
    if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Yield)):
        raise Refused("the generated epoch loop does not end with its yield")
    yielded = small.value.value
    values = [e.value for e in yielded.elements] if isinstance(yielded, cst.Tuple) else [yielded]
    prologue = body[1:-1]
    defs = [s for s in prologue if isinstance(s, cst.FunctionDef)]
    setup = [s for s in prologue if not isinstance(s, cst.FunctionDef)]
    comments = [ln for ln in loop.leading_lines if ln.comment is not None]
    return LoaderBody(
        body[0],
        setup,
        defs,
        comments,
        epoch_for.target,
        epoch,
        stmts[:-1],
        values,
        epoch.func.value.value,
    )


# -- the class -------------------------------------------------------------------------------------


def loader_definition(
    ctx: FileContext,
    fn: cst.FunctionDef,
    graph: Graph,
    body: list[cst.BaseStatement],
    params: cst.Parameters,
    inst: Instance,
    at: cst.CSTNode | None = None,
    name: str | None = None,
) -> tuple[list[cst.BaseStatement], list[Edit], str]:
    """The loader class (and the runtime helpers it needs, once per module) that replaces the
    pipeline function ``fn`` whose generator body ``emit_generator_body`` wrote; the edits that
    import what it uses; its name. ``fn`` may be made up (a class's ``__init__`` parameters, a
    ``with`` block's body): ``at`` is then the statement it replaces (for the indentation) and
    ``name`` the pipeline's name the class is named after."""
    use = inst.iterators[0]
    if use.framework == "tf":
        return dataset_definition(ctx, fn, graph, body, params, inst)
    if not graph.readers:  # external sources: one pass of them per epoch
        return source_loader_definition(ctx, fn, graph, body, params, inst, at, name)
    reader_args = {
        a.keyword.value: a.value for a in graph.readers[0].call.args if a.keyword is not None
    }
    c = LoaderClass(ctx, use, epochs_kind(reader_args, use), _parts(body))
    c.meta = bool(use.meta_calls)  # pipe.epoch_size() reads the loader's reader
    use.reader_attr = c.body.reader
    named = reader_args.get("name")
    use.meta_reader = _code(named) if named is not None else None
    c.block = at if isinstance(at, cst.With) else None
    c.sharded, c.padded = is_sharded(reader_args), _is_true(reader_args.get("pad_last_batch"))
    c.moving = c.sharded and not _is_true(reader_args.get("stick_to_shard"))
    params = init_params(fn, params)
    param_names = [p.name.value for p in [*params.params, *params.kwonly_params]][1:]
    if "self" in param_names:
        raise Refused("the pipeline function has a parameter named self")
    c.shared = _self_names(c, param_names)
    c.taken = set(c.shared) | {"_batches", "_epoch", "_epoch_batches", "_ahead", "_ended"}
    c.local = names_in(fn) | set(param_names)
    if c.block is not None and use.size is not None:
        c.local |= free_names(use.size)  # the outer names size= reads stay visible in __init__
    iter_code = _iter_methods(c, inst, fn)
    tail, length = _init_tail(c, inst, fn)
    if use.dropin:
        tail = [*tail, *_dropin_state(use)]
    if use.size_reads:
        tail = [*tail, *_size_lines(c, inst, fn, tail)]
    methods = [_init(c, params, param_names, tail)]
    if length is not None and (use.lens or use.hooked):
        methods.append(method_def("__len__", [f"return {length}"]))
    if use.dropin:
        methods += _dropin_methods(use)
        iter_code = [_renamed_def(m, "__iter__", "_epoch_batches") for m in iter_code]
    elif use.kept_resets:
        methods.append(method_def("reset", [KEPT_RESET, "pass"]))
    methods += [renamed(m, c.shared) for m in reversed(iter_code)]  # _batches(), then __iter__
    name = class_name(ctx, name or fn.name.value)
    doc = c.body.doc if graph.docstring is not None else class_doc(use, c.kind)
    cls = class_def(ctx, name, [doc, *methods], fn, at)
    if "math.ceil(" not in _code(cls):
        c.imports.discard("math")
    return runtime_helpers(ctx, c) + [cls], import_edits(ctx, c), name


def _dropin_state(use: IteratorUse) -> list[str]:
    return [
        "# the epoch taken from, its next batch (taken ahead), and whether its last was given",
        "self._epoch, self._ahead, self._ended = None, None, False",
    ]


def _dropin_methods(use: IteratorUse) -> list[cst.FunctionDef]:
    """The loader as its own iterator, as DALI's was, for code the tool cannot read: a loop and
    ``next()`` take from the same epoch (a loop left early resumes it), which
    ``_epoch_batches()`` runs. The batch after the one given is taken ahead, so that an epoch is
    over as soon as its last batch is given, as DALI's iterator counted: ``reset()`` (which a
    new loop calls, as DALI's ``__iter__`` did) then starts the next; without auto_reset no
    batch comes before it."""
    then = "and the next epoch" if use.auto_reset else "until reset()"
    take = [
        f"# as DALI's iterator: one epoch's batches, then StopIteration {then}",
        "if self._ended:",
        *(["    self.reset()"] if use.auto_reset else []),
        "    raise StopIteration",
        "if self._epoch is None:",
        "    self._epoch = self._epoch_batches()",
        "    self._ahead = next(self._epoch, None)",
        "batch, self._ahead = self._ahead, next(self._epoch, None)",
        "self._ended = self._ahead is None",
        "if batch is None:  # an epoch without batches",
        "    raise StopIteration",
        "return batch",
    ]
    reset = [
        "if self._ended:  # within an epoch, reset() did nothing on DALI's iterator",
        "    self._epoch, self._ended = None, False",
    ]
    start = [
        "self.reset()  # as on DALI's iterator: a loop after an epoch starts the next",
        "return self",
    ]
    return [
        method_def("reset", reset),
        method_def("__iter__", start),
        method_def("__next__", take),
    ]


def _renamed_def(fn: cst.FunctionDef, old: str, new: str) -> cst.FunctionDef:
    return fn.with_changes(name=cst.Name(new)) if fn.name.value == old else fn


def loader_instance(instances: list[Instance]) -> Instance | None:
    """The iterated instance the loader class is made from: of several (each wrapped once, in
    iterators of one configuration) the first whose iterator takes ``len()``, so the class has
    ``__len__`` when any of them needs it."""
    iterated = [i for i in instances if i.iterators]
    sized = [i for i in iterated if i.iterators[0].lens or i.iterators[0].hooked]
    return (sized or iterated or [None])[0]


def _is_true(v: cst.BaseExpression | None) -> bool:
    return isinstance(v, cst.Name) and v.value == "True"


# -- which names the methods share through self ----------------------------------------------------


def _self_names(c: LoaderClass, params: list[str]) -> set[str]:
    """Names ``__init__`` binds (parameters, setup code, the reader) that the per-batch code
    reads: they become attributes."""
    b = c.body
    per_batch: list[cst.CSTNode] = [*b.ops, *b.defs, *b.values, b.epoch]
    reads: set[str] = set()
    for node in per_batch:
        reads |= free_names(node)
    init_bound = set(params) | bound_in(b.setup)
    shared = init_bound & (reads | {b.reader, "batch_size"})
    clash = shared & bound_in([*b.ops, *b.defs, b.target])
    if clash:
        raise Refused(f"`{sorted(clash)[0]}` is set both before the epoch loop and in it")
    return shared


# -- splicing the per-batch code into the templates ------------------------------------------------


class _Splice(cst.CSTTransformer):
    """Replaces the marker statements (``__OPS__``, ...) of a template by statements."""

    def __init__(self, markers: dict[str, list[cst.BaseStatement]]) -> None:
        super().__init__()
        self.markers = markers

    def leave_IndentedBlock(
        self, original: cst.IndentedBlock, updated: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        body: list[cst.BaseStatement] = []
        for s in updated.body:
            marker = _marker(s)
            if marker is None:
                body.append(s)
                continue
            new = list(self.markers[marker])
            if new and s.leading_lines:
                new[0] = new[0].with_changes(
                    leading_lines=[*s.leading_lines, *new[0].leading_lines]
                )
            body += new
        return updated.with_changes(body=body)


def _marker(s: cst.BaseStatement) -> str | None:
    if (
        isinstance(s, cst.SimpleStatementLine)
        and len(s.body) == 1
        and isinstance(s.body[0], cst.Expr)
    ):
        v = s.body[0].value
        if isinstance(v, cst.Name) and v.value.startswith("__") and v.value.isupper():
            return v.value
    return None


def _template(text: str, markers: dict[str, list[cst.BaseStatement]]) -> cst.FunctionDef:
    fn = cst.parse_statement(text)
    assert isinstance(fn, cst.FunctionDef)
    return fn.visit(_Splice(markers))


def _lines(*parts: str | list[str] | None) -> list[str]:
    out: list[str] = []
    for p in parts:
        if p is None:
            continue
        out += p.split("\n") if isinstance(p, str) else p
    return out


def _indent(lines: list[str], depth: int = 1) -> str:
    return "".join(("    " * depth + ln if ln else "") + "\n" for ln in lines)


# -- __iter__ (and _batches) per configuration ---------------------------------------------------


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _epoch_parts(c: LoaderClass) -> tuple[str, list[str]]:
    """The ``reader.next_epoch(...)`` call and the comment lines above its loop. A loop with no
    operator does not ask for capture mode (DALI would warn and run it eagerly)."""
    b = c.body
    capture = bool(b.ops) and any(
        a.keyword is not None and a.keyword.value == "capture" for a in b.epoch.args
    )
    comments = [ln.comment.value for ln in b.comments if ln.comment is not None]
    if not capture:
        comments = [t for t in comments if t != CAPTURE_COMMENT]
    # ctx=: the default EvalContext of the pipeline's GPU (emit.py), taken once in __init__
    device = [
        f", ctx={_code(a.value)}" for a in b.epoch.args if a.keyword and a.keyword.value == "ctx"
    ]
    return (
        f"{b.reader}.next_epoch(batch_size=batch_size{''.join(device)}{', capture=True' if capture else ''})",
        comments,
    )


def _iter_methods(c: LoaderClass, inst: Instance, fn: cst.FunctionDef) -> list[cst.FunctionDef]:
    """``__iter__`` for the configuration, and ``_batches`` (the endless stream) where the
    epochs do not line up with the reader's."""
    b = c.body
    epoch, comments = _epoch_parts(c)
    target = _code(b.target)
    kind = c.kind
    stream = kind not in ("plain", "partial", "drop")
    if stream:
        outs = _output_names(c)
        raw = stmt_of(f"yield {', '.join(o.value for o in outs)}")
        raw = raw.with_changes(body=[cst.Expr(cst.Yield(_tuple(b.values)))])
        batches = _template(
            "def _batches(self):\n"
            + _indent(
                [
                    "__DEFS__",
                    *comments,
                    "while True:",
                    f"    for {target} in {epoch}:",
                    "        __OPS__",
                    "        __RAW__",
                ]
            ),
            {"__DEFS__": b.defs, "__OPS__": b.ops, "__RAW__": [raw]},
        )
        take = f"{', '.join(o.value for o in outs)} = next({c.attr('batches')})"
        lines, trim = _stream_iter(c, take)
        it = _template(
            "def __iter__(self):\n" + _indent(lines), {"__YIELD__": yield_batch(c, outs, trim)}
        )
        return [it, batches]
    lines, trim = _epoch_iter(c, epoch, comments, target)
    it = _template(
        "def __iter__(self):\n" + _indent(lines),
        {"__DEFS__": b.defs, "__OPS__": b.ops, "__YIELD__": yield_batch(c, b.values, trim)},
    )
    return [it]


def _tuple(values: list[cst.BaseExpression]) -> cst.BaseExpression:
    if len(values) == 1:
        return values[0]
    return cst.Tuple([cst.Element(v) for v in values], lpar=[], rpar=[])


def _output_names(c: LoaderClass) -> list[cst.Name]:
    """Names for the outputs ``_batches()`` yields, from what the pipeline returned (only
    ``__iter__`` holds them: they need not differ from the pipeline's own names)."""
    taken = set(c.shared) | {"self"}
    names = []
    for value, key in zip(c.body.values, c.use.output_map):
        name = _name_of(value)
        base = (
            name
            if name not in (None, c.ctx.ndd)
            else (key if key.isidentifier() and not keyword.iskeyword(key) else "output")
        )
        names.append(cst.Name(fresh_name(base, taken)))
    c.local |= {n.value for n in names}
    return names


def _name_of(value: cst.BaseExpression) -> str | None:
    """``labels`` for ``labels`` or ``labels.gpu()`` (``ndd`` for ``ndd.resize(...)``)."""
    while isinstance(value, (cst.Call, cst.Attribute)):
        func = value.func if isinstance(value, cst.Call) else value
        if not isinstance(func, cst.Attribute):
            return None
        value = func.value
    return value.value if isinstance(value, cst.Name) else None


def _epoch_iter(
    c: LoaderClass, epoch: str, comments: list[str], target: str
) -> tuple[list[str], str | None]:
    """``__iter__`` over one ``next_epoch()``: FILL over a padded reader, PARTIAL over one shard
    or a padded one, DROP over one shard."""
    kind = c.kind
    loop = [*comments, f"for {target} in {epoch}:", "    __OPS__", "    __YIELD__"]
    if kind == "plain":
        return ["__DEFS__", *loop], None
    if kind == "drop":
        i, e = fresh_name("i", c.local), fresh_name("epoch", c.local)
        unpacked = (
            f"({target})"
            if isinstance(c.body.target, cst.Tuple) and c.body.target.lpar == []
            else target
        )
        return [
            "__DEFS__",
            *comments,
            f"{e} = {epoch}",
            f"for {i}, {unpacked} in enumerate({e}):",
            "    __OPS__",
            f"    if {i} < {c.attr('full_batches')}:  {DROP}",
            "        __YIELD__",
        ], None
    left = fresh_name("left", c.local)
    loop.append(f"    {left} -= batch_size")
    return ["__DEFS__", *_partial_start(c, left), *loop], left


def _partial_start(c: LoaderClass, left: str) -> list[str]:
    """The samples the last batch of this epoch may keep: this epoch's shard."""
    samples = c.attr("samples")
    if not c.moving or c.use.reader_name is None:  # one shard, one that sticks, or size=
        return [f"{left} = {samples}  {PARTIAL_ONE}"]
    shard, n = fresh_name("shard", c.local), fresh_name("n", c.local)
    return [
        *PARTIAL_SHARDS.split("\n"),
        f"{shard}, {n} = {c.attr('shard')}, {c.attr('num_shards')}",
        f"{left} = {samples} * ({shard} + 1) // {n} - {samples} * {shard} // {n}",
        f"{c.attr('shard')} = ({shard} + 1) % {n}",
    ]


def _stream_iter(c: LoaderClass, take: str) -> tuple[list[str], str | None]:
    """``__iter__`` over the stream: as many batches as DALI's iterator took this epoch."""
    kind = c.kind
    if kind == "endless":
        names = take.split(" = ")[0]
        return [
            "# without reader_name or size= the old iterator never ended an epoch",
            f"for {names} in {c.attr('batches')}:",
            "    __YIELD__",
        ], None
    if kind == "ahead":
        return _ahead_iter(c, take), None
    if kind in ("resume", "fill_shards"):
        todo = c.attr("todo")
        start = (
            f"{todo}, {c.attr('length')} = next({c.attr('plan')})"
            if kind == "fill_shards"
            else (f"{todo} = {c.attr('length')}")
        )
        return [
            f"if not {todo}:  {RESUME}",
            f"    {start}",
            f"while {todo}:",
            f"    {take}",
            f"    {todo} -= 1",
            "    __YIELD__",
        ], None
    if kind in ("drop_stream", "drop_counted"):
        i = fresh_name("i", c.local)
        return [
            f"for {i} in range({c.attr('per_epoch')}):",
            f"    {take}",
            f"    if {i} < {c.attr('full_batches')}:  {DROP}",
            "        __YIELD__",
        ], None
    if kind == "counted":
        return [f"for _ in range({c.attr('length')}):", f"    {take}", "    __YIELD__"], None
    left = fresh_name("left", c.local)  # partial_stream, partial_counted
    largest = ["# every epoch takes as many batches as the largest shard needs"]
    return [
        *_partial_start(c, left),
        *(largest if kind == "partial_stream" else []),
        f"for _ in range({c.attr('length')}):",
        f"    {take}",
        "    __YIELD__",
        f"    {left} -= batch_size",
    ], left


def _ahead_iter(c: LoaderClass, take: str) -> list[str]:
    """FILL without padding over one shard (or ``size=``): an epoch ends with the batch that
    reaches its last sample; what that batch read past it counts into the next epoch."""
    read, end, samples = c.attr("read"), c.attr("end"), c.attr("samples")
    start = [f"{end} += {samples}"]
    if c.use.lens and c.use.reader_name is not None:
        start.append(f"{c.attr('length')} = math.ceil(({end} - {read}) / batch_size)")
        c.imports.add("math")
    if c.use.early_exit:
        start = [f"if {read} >= {end}:  {RESUME}", *["    " + s for s in start]]
    comment = (
        FILL_AHEAD.split("\n")
        if c.use.reader_name is not None
        else [
            f"# an epoch ends with the batch that reaches {samples}; the samples that batch took "
            "from",
            "# the next epoch count into it",
        ]
    )
    return [
        *comment,
        *start,
        f"while {read} < {end}:",
        f"    {take}",
        f"    {read} += batch_size",
        "    __YIELD__",
    ]


# -- __init__ --------------------------------------------------------------------------------------


def _init_tail(c: LoaderClass, inst: Instance, fn: cst.FunctionDef) -> tuple[list[str], str | None]:
    """What ``__init__`` adds after the reader for the configuration: the sizes read from the
    reader's metadata, the stream, the counters; and what ``__len__`` returns."""
    kind, use, reader = c.kind, c.use, c.body.reader
    meta = fresh_name("meta", c.local)
    shards = f'{meta}["number_of_shards"]'
    lines: list[str] = []
    both = kind == "partial" and c.padded and (use.lens or use.hooked)  # two keys: read once
    if c.sharded or both or kind in ("partial_stream", "drop_stream"):
        lines.append(f"{meta} = {reader}.get_metadata()")
        size, padded = f'{meta}["epoch_size"]', f'{meta}["epoch_size_padded"]'
        padded += f" // {shards}" if c.sharded else ""
    else:
        size, padded = (
            f'{reader}.get_metadata()["epoch_size"]',
            f'{reader}.get_metadata()["epoch_size_padded"]',
        )
    if kind in ("plain", "resume"):
        if not (use.lens or use.hooked or kind == "resume"):
            return [], None
        return _with_stream(
            c, lines + [f"{c.attr('length')} = {_ceil(c, f'{padded} / batch_size')}"]
        ), c.attr("length")
    if kind in ("partial", "partial_stream"):
        lines += _shard_lines(c, meta, size)
        largest = _ceil(c, f"{size} / {shards}") if kind == "partial_stream" else c.attr("samples")
        per_epoch = _ceil(c, f"{padded if c.padded else largest} / batch_size")
        if kind == "partial_stream" or use.lens or use.hooked:
            lines.append(f"{c.attr('length')} = {per_epoch}")
        return _with_stream(c, lines), c.attr("length")
    if kind in ("drop", "drop_stream"):
        per_shard = size if kind == "drop" else fresh_name("per_shard", c.local)
        if kind == "drop_stream":
            lines.append(f"{per_shard} = {size} // {shards}")
            lines.append(
                f"{c.attr('full_batches')}, {c.attr('per_epoch')} = {per_shard} // batch_size, "
                f"{_ceil(c, f'{per_shard} / batch_size')}"
            )
        else:
            lines.append(f"{c.attr('full_batches')} = {per_shard} // batch_size")
        return _with_stream(c, lines), c.attr("full_batches")
    if kind == "fill_shards":
        c.helpers.append("dali_fill_epochs")
        plan = c.attr("plan")
        return _with_stream(
            c,
            [
                f"{plan} = dali_fill_epochs({reader}.get_metadata(), batch_size)",
                f"{c.attr('todo')}, {c.attr('length')} = next({plan})",
            ],
        ), c.attr("length")
    return _counted_tail(c, inst, fn, size)


def _size_lines(c: LoaderClass, inst: Instance, fn: cst.FunctionDef, tail: list[str]) -> list[str]:
    """``self._size``, which the code reads from the iterator: the samples of an epoch as
    DALI's iterator counts them (``size=``; else from the reader's shards and the policy)."""
    why = "# _size: the samples of an epoch, as DALI's iterator counted them"
    if c.use.reader_name is None:
        return [why, f"self._size = {_size_text(c, inst, fn)}"]
    read = f" = {c.body.reader}.get_metadata()"
    known = [ln[: -len(read)] for ln in tail if ln.endswith(read) and " " not in ln[: -len(read)]]
    meta = known[0] if known else fresh_name("meta", c.local)
    lines = [why] if known else [f"{meta}{read}", why]
    size, shards = f'{meta}["epoch_size"]', f'{meta}["number_of_shards"]'
    if c.use.policy == "DROP":
        value = f"{size} // {shards}"
    elif c.padded:
        value = f'{meta}["epoch_size_padded"] // {shards}'
    else:
        per_shard = _ceil(c, f"{size} / {shards}")
        value = _ceil(c, f"{per_shard} / batch_size") + " * batch_size"
    c.meta = True
    return [*lines, f"self._size = {value}"]


def _counted_tail(
    c: LoaderClass, inst: Instance, fn: cst.FunctionDef, size: str
) -> tuple[list[str], str | None]:
    """FILL without padding over one shard, ``size=`` and an iterator that never ends."""
    kind = c.kind
    if kind == "endless":
        return _with_stream(c, []), None
    samples = c.attr("samples")
    total = _size_text(c, inst, fn) if c.use.reader_name is None else size
    if kind == "ahead":
        lines = [f"{samples} = {total}", f"{c.attr('read')} = {c.attr('end')} = 0"]
        if c.use.lens or c.use.hooked:
            lines.append(f"{c.attr('length')} = {_ceil(c, f'{samples} / batch_size')}")
        return _with_stream(c, lines), c.attr("length")
    if kind == "drop_counted":
        local = fresh_name("size", c.local)
        return _with_stream(
            c,
            [
                f"{local} = {total}",
                f"{c.attr('full_batches')}, {c.attr('per_epoch')} = {local} // batch_size, "
                f"{_ceil(c, f'{local} / batch_size')}",
            ],
        ), c.attr("full_batches")
    lines = [f"{samples} = {total}"] if kind == "partial_counted" else []
    lines.append(f"{c.attr('length')} = {_ceil(c, f'{samples if lines else total} / batch_size')}")
    return _with_stream(c, lines), c.attr("length")


def _shard_lines(c: LoaderClass, meta: str, size: str) -> list[str]:
    """PARTIAL: the samples of the reader's shard (one shard, or one that sticks), or what the
    moving shard needs."""
    samples = c.attr("samples")
    if not c.sharded:
        return [f"{samples} = {size}"]
    if c.moving:
        return [
            f"{samples} = {size}",
            f'{c.attr("shard")}, {c.attr("num_shards")} = {meta}["shard_id"], '
            f'{meta}["number_of_shards"]',
        ]
    shard, n = fresh_name("shard", c.local), fresh_name("n", c.local)
    return [
        f'{shard}, {n} = {meta}["shard_id"], {meta}["number_of_shards"]',
        f"{samples} = {size} * ({shard} + 1) // {n} - {size} * {shard} // {n}  # this shard's "
        "samples",
    ]


def _with_stream(c: LoaderClass, lines: list[str]) -> list[str]:
    c.meta = c.meta or any("get_metadata()" in ln for ln in lines)
    if c.kind in ("plain", "partial", "drop"):
        return lines
    if c.kind == "resume":
        lines = [*lines, f"{c.attr('todo')} = 0"]
    return [*lines, f"{c.attr('batches')} = self._batches()"]


def _outer_name(c: LoaderClass, name: str) -> bool:
    """``name`` is one the class, defined where the ``with`` block was, reads from the block's
    scope as the iterator did (made in that scope; ``__init__``'s own names shadow nothing)."""
    block, ctx = c.block, c.ctx
    if block is None or not block.body.body or name in {"self", "batch_size", c.body.reader}:
        return False
    if any(name in assigned_names(s) for s in [*block.body.body, *c.body.setup]):
        return False
    scope = ctx.scopes.get(block.body.body[0])
    return scope is not None and ctx.scopes.get(c.use.call) is scope and name in scope


def _ceil(c: LoaderClass, ratio: str) -> str:
    c.imports.add("math")
    return f"math.ceil({ratio})"


def _size_text(c: LoaderClass, inst: Instance, fn: cst.FunctionDef) -> str:
    """The iterator's ``size=`` as ``__init__`` computes it: ``pipe.epoch_size("R")`` is the
    reader's padded epoch size, and a name the caller also gave to the pipeline is the parameter
    it gave it to (``size=pipe.epoch_size("Reader") // world_size`` with ``num_shards=world_size``
    is ``... // num_shards``)."""
    size = c.use.size
    assert size is not None
    given, _ = size_parameters(c.use, inst, fn)
    meta = f'{c.body.reader}.get_metadata()["epoch_size_padded"]'

    class Rewrite(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            func = original.func
            if isinstance(func, cst.Attribute) and any(func.value is n for n in c.use.claimed):
                return cst.parse_expression(meta)
            return updated

    new = size.visit(Rewrite())
    missing = []

    class Names(cst.CSTTransformer):
        def visit_Attribute_attr(self, node: cst.Attribute) -> None:
            self.skip = True

        def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
            if getattr(self, "skip", False):
                self.skip = False
                return updated
            if updated.value in given:
                return updated.with_changes(value=given[updated.value])
            if updated.value not in SIZE_BUILTINS and updated.value != c.body.reader:
                if not _outer_name(c, updated.value):
                    missing.append(updated.value)
            return updated

    new = new.visit(Names())
    text = _code(new)
    if missing or "\n" in text:
        raise Refused(
            f"size={_code(size)} uses `{missing[0] if missing else text}`, which the loader does "
            "not have"
        )
    return text


def _with_max_batch_size(
    stmt: cst.BaseStatement, reader: str, why: bool = True
) -> cst.BaseStatement:
    """``reader = ndd.readers.X(...)`` with ``max_batch_size=batch_size`` and the comment that
    says why: get_metadata() before the first next_epoch() would fix the batch size to 1."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Assign)):
        return stmt
    assign = stmt.body[0]
    target = assign.targets[0].target
    if not (
        isinstance(target, cst.Name)
        and target.value == reader
        and isinstance(assign.value, cst.Call)
    ):
        return stmt
    call = assign.value
    comment = [cst.EmptyLine(comment=cst.Comment(MAX_BATCH_COMMENT))] if why else []
    if any(a.keyword is not None and a.keyword.value == "max_batch_size" for a in call.args):
        return stmt.with_changes(leading_lines=[*stmt.leading_lines, *comment])
    new = append_arg(list(call.args), kwarg("max_batch_size", cst.Name("batch_size")))
    return stmt.with_changes(
        body=[assign.with_changes(value=call.with_changes(args=new))],
        leading_lines=[*stmt.leading_lines, *comment],
    )


def _init(
    c: LoaderClass, params: cst.Parameters, param_names: list[str], tail: list[str]
) -> cst.FunctionDef:
    """``__init__``: the parameters the batches need kept on self, the setup code and the
    reader (built once), then ``tail``."""
    kept = [p for p in param_names if p in c.shared]
    lines = []
    together = f"{', '.join('self.' + p for p in kept)} = {', '.join(kept)}"
    if kept and len(together) <= 80:
        lines.append(together)
    else:  # one per line where they would not fit on one
        lines += [f"self.{p} = {p}" for p in kept]
    setup = list(c.body.setup)
    if c.meta:
        setup = [_with_max_batch_size(s, c.body.reader) for s in setup]
    shared_setup = c.shared & bound_in(c.body.setup)
    body = [*stmts_of("\n".join(lines))] if lines else []
    body += [renamed(s, shared_setup) for s in setup]
    body += [renamed(s, shared_setup) for s in (stmts_of("\n".join(tail)) if tail else [])]
    fn = method_def("__init__", ["pass"], body)
    return fn.with_changes(params=params)


# -- the use sites ---------------------------------------------------------------------------------


def loader_site_edits(
    ctx: FileContext,
    inst: Instance,
    name: str,
    rule_id: str,
    threads_default: cst.Arg | None,
    params: set[str],
    notes: list,
    threads_set: set[tuple[int, str]],
    args: list[cst.Arg] | None = None,
) -> list[Edit]:
    """The pipeline's creation gives way to ``ndd.set_num_threads`` (its ``num_threads``), its
    ``build()`` goes, the iterator becomes the loader made from the pipeline's arguments (or
    ``args``), and ``reset()`` goes (or, for code that pulls with ``next()``, starts a new
    pass)."""
    use = inst.iterators[0]
    made = ctx.enclosing_statement(use.call)
    depth = len(ctx.indents(made))
    pre = _creation(
        ctx, inst, rule_id, threads_default, notes, threads_set
    )  # what stays of the pipeline
    together = made is inst.stmt  # @data_iterator: one call made both
    kept = made_elsewhere(ctx, inst, use)  # the loader is made where the pipeline was
    meta = [_meta_edit(ctx, use, call) for call in use.meta_calls]
    edits = meta if together or kept else [_creation_edit(ctx, inst, pre), *meta]
    edits += [removed_stmt(ctx, b) for b in inst.builds]
    keep = args
    if keep is None:
        keep = remove_args(
            list(inst.call.args), PIPELINE_ARGS - {"batch_size", "seed"} - params - inst.keep_args
        )
    keep = [
        (
            a.with_changes(keyword=cst.Name("batch_size"))
            if a.keyword and a.keyword.value == "max_batch_size"
            else a
        )
        for a in keep
    ]
    loader = cst.Call(cst.Name(name), args=_one_line(keep))
    if kept:
        return edits + _kept_edits(ctx, inst, use, pre, loader)
    if use.framework == "tf":
        return edits + [_dataset_edit(ctx, use, made, loader, name)]
    if use.wrapper is not None:  # the loader is made where the pipeline was passed to the wrapper
        edits.append(_wrapper_edit(ctx, use, loader))
        loader = cst.Name(use.wrapper[2])
    if use.dropin:  # every use stays as written
        new = [made.deep_replace(use.call, loader)]
    elif use.pulls:
        holder, fresh = _pull_holders(ctx, use)
        edits += [ctx.expr_edit(node, fresh.deep_clone()) for node, _ in use.lens]
        new = [
            made.with_changes(body=[cst.Assign([cst.AssignTarget(fresh)], loader)]),
            _again(holder, fresh),
        ]
        edits += [
            ctx.stmt_edit(r, [_again(holder, fresh).with_changes(leading_lines=r.leading_lines)])
            for r in use.resets
        ]
    else:
        new = [made.deep_replace(use.call, loader)]
        if use.subclass is not None and _follows(
            ctx, made, use.subclass
        ):  # no gap where the class was
            new[0] = new[0].with_changes(
                leading_lines=[ln for ln in made.leading_lines if ln.comment is not None]
            )
        if use.subclass is not None:  # its conversion moved into the loader
            edits.append(removed_stmt(ctx, use.subclass))
        edits += [_dropped(ctx, r) for r in use.resets]
    if together and pre:
        new = [*pre, new[0].with_changes(leading_lines=[]), *new[1:]]
    edits.append(ctx.stmt_edit(made, [fit(s, ctx.module.default_indent, depth) for s in new]))
    return edits


def _meta_edit(ctx: FileContext, use: IteratorUse, call: cst.Call) -> Edit:
    """``pipe.epoch_size("Reader")`` -> ``loader.reader.get_metadata()["epoch_size_padded"]``
    (``reader_meta``: the whole dictionary; without a name: ``{name: value}``, as the
    pipeline gave)."""
    assert use.holder is not None and use.reader_attr is not None
    reader = cst.Attribute(use.holder.deep_clone(), cst.Name(use.reader_attr))  # type: ignore[arg-type]
    key = cst.parse_expression(use.meta_reader) if use.meta_reader is not None else None
    return ctx.expr_edit(call, metadata_value(reader, call, key))


def _kept_edits(
    ctx: FileContext, inst: Instance, use: IteratorUse, pre: list, loader: cst.Call
) -> list[Edit]:
    """``self.pipe = make(...)`` becomes ``self.pipe = Loader(...)``, the iterator made over it
    elsewhere becomes ``self.pipe``, and the iterator's ``reset()`` calls go."""
    assert use.kept_in is not None
    stmt = inst.stmt.deep_replace(inst.call, loader)
    if pre:
        stmt = stmt.with_changes(leading_lines=[])
    depth = len(ctx.indents(inst.stmt))
    new = [fit(s, ctx.module.default_indent, depth) for s in [*pre, stmt]]
    edits = [ctx.stmt_edit(inst.stmt, new)]
    edits.append(ctx.expr_edit(use.call, use.kept_in.deep_clone()))
    return edits + [_dropped(ctx, r) for r in use.resets]


def _off_gpu(value: cst.BaseExpression) -> cst.BaseExpression:
    """``labels.gpu()`` -> ``labels``: the value goes to the host anyway (``.cpu()``)."""
    if (
        isinstance(value, cst.Call)
        and not value.args
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value == "gpu"
    ):
        return value.func.value
    return value


def _wrapper_edit(ctx: FileContext, use: IteratorUse, loader: cst.Call) -> Edit:
    outer, ref, _ = use.wrapper
    stmt = ctx.enclosing_statement(outer)
    new = fit(stmt.deep_replace(ref, loader), ctx.module.default_indent, len(ctx.indents(stmt)))
    return ctx.stmt_edit(stmt, [new])


def _follows(ctx: FileContext, stmt: cst.CSTNode, before: cst.CSTNode) -> bool:
    block = ctx.parents.get(stmt)
    body = list(getattr(block, "body", ()))
    return stmt in body and body.index(stmt) > 0 and body[body.index(stmt) - 1] is before


def _one_line(args: list[cst.Arg]) -> list[cst.Arg]:
    """The arguments on one line (``fit`` splits the call again where it is too long), unless a
    comment sits between them."""
    if "#" in "".join(_code(cst.Call(cst.Name("f"), args=[a])) for a in args):
        return args
    out = [
        a.with_changes(
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
            whitespace_after_arg=cst.SimpleWhitespace(""),
        )
        for a in args
    ]
    if out:
        out[-1] = out[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return out


def _creation(
    ctx: FileContext,
    inst: Instance,
    rule_id: str,
    threads_default: cst.Arg | None,
    notes: list,
    threads_set: set[tuple[int, str]],
) -> list[cst.BaseStatement]:
    """What stays where the pipeline was made: ``ndd.set_num_threads`` (once per scope) and the
    TODO about a dropped device_id, with the comments above it."""
    threads = inst.kwargs.get("num_threads", threads_default)
    if threads is not None:
        text = _code(threads.value)
        blocks = enclosing_blocks(ctx, inst.stmt)
        threads = None if any((b, text) in threads_set for b in blocks) else threads
        threads_set.add((blocks[0], text))
    todo = [device_todo_line(ctx, inst, rule_id, notes)] if inst.device_todo else []
    if threads is None:
        return [cst.EmptyLine(), *todo] if todo else []  # type: ignore[list-item]
    lines = [*inst.stmt.leading_lines, *todo]
    return [set_threads_stmt(ctx, threads).with_changes(leading_lines=lines)]


def _creation_edit(ctx: FileContext, inst: Instance, pre: list) -> Edit:
    if not pre:
        return _dropped(ctx, inst.stmt)
    if isinstance(pre[0], cst.EmptyLine):  # only the TODO
        text = ctx.leading_comments(inst.stmt) + "".join(
            ctx.render(t, ctx.indents(inst.stmt)) for t in pre[1:]
        )
        return Edit(*ctx.stmt_span(inst.stmt), text)
    return ctx.stmt_edit(inst.stmt, pre)


def _dropped(ctx: FileContext, stmt: cst.SimpleStatementLine) -> Edit:
    """The statement removed; ``pass`` where it was alone in its block."""
    block = ctx.parents.get(stmt)
    if isinstance(block, cst.IndentedBlock) and len(block.body) == 1:
        return ctx.stmt_edit(stmt, [stmt.with_changes(body=[cst.Pass()])])
    return removed_stmt(ctx, stmt)


def _pull_holders(
    ctx: FileContext, use: IteratorUse
) -> tuple[cst.BaseExpression, cst.BaseExpression]:
    """Where the iterator was kept (``self._iterator``), and a fresh place next to it for the
    loader (``self._loader``)."""
    holder = use.holder
    assert holder is not None
    if isinstance(holder, cst.Attribute):
        cls = ctx.parents.get(holder)
        while cls is not None and not isinstance(cls, cst.ClassDef):
            cls = ctx.parents.get(cls)
        taken = {n.attr.value for n in walk(cls or ctx.module) if isinstance(n, cst.Attribute)}
        base = "_loader" if holder.attr.value.startswith("_") else "loader"
        return holder, holder.with_changes(attr=cst.Name(fresh_name(base, taken)))
    scope_names = {n.value for n in walk(ctx.module) if isinstance(n, cst.Name)}
    return holder, cst.Name(fresh_name("loader", scope_names))


def _again(holder: cst.BaseExpression, loader: cst.BaseExpression) -> cst.SimpleStatementLine:
    """``holder = iter(loader)``: a new pass over the loader, as reset() started a new epoch."""
    call = cst.Call(cst.Name("iter"), [cst.Arg(loader.deep_clone())])
    return cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(holder.deep_clone())], call)])


# -- TensorFlow: a generator of numpy batches, and tf.data.Dataset.from_generator ------------------

PER_STEP = (
    "# reader(...) gives the next batch, across epochs; tf.data resumes this generator on its own\n"
    "# threads, which a next_epoch() loop does not allow"
)
FROM_GENERATOR = (
    "# from_generator calls {name} anew for each iterator, as DALIDataset started a fresh\n"
    "# pipeline; it takes host arrays"
)


def dataset_definition(
    ctx: FileContext,
    fn: cst.FunctionDef,
    graph: Graph,
    body: list[cst.BaseStatement],
    params: cst.Parameters,
    inst: Instance,
) -> tuple[list[cst.BaseStatement], list[Edit], str]:
    """The pipeline function as a generator of numpy batches that calls the reader once per step
    (see ``datasets``)."""
    use = inst.iterators[0]
    loop = body[-1]
    assert isinstance(loop, cst.While)
    inner = list(loop.body.body)
    np = ctx.np
    single = len(graph.readers) == 1 and len(inner) == 1 and isinstance(inner[0], cst.For)
    if single:
        epoch_for = inner[0]
        target = epoch_for.target
        if isinstance(target, cst.Tuple) and len(target.elements) == 1:
            target = target.elements[0].value
        reader = epoch_for.iter.func.value.value
        step = cst.parse_statement(f"{_code(target)} = {reader}(batch_size=batch_size)\n")
        inner = [step, *epoch_for.body.body]
    *ops, last = inner
    yielded = last.body[0].value.value
    values = [e.value for e in yielded.elements] if isinstance(yielded, cst.Tuple) else [yielded]
    arrays = [
        cst.parse_expression(f"{np}.asarray({ctx.ndd}.as_tensor(__V__.cpu()))") for _ in values
    ]
    arrays = [a.visit(_Replace("__V__", atom_of(_off_gpu(v)))) for a, v in zip(arrays, values)]
    out = (
        arrays[0]
        if len(arrays) == 1 and not isinstance(use.signature[1], (cst.Tuple, cst.List))
        else (
            cst.Tuple([cst.Element(a) for a in arrays], lpar=[], rpar=[])
            if len(arrays) > 1
            else cst.Tuple([cst.Element(arrays[0])])
        )
    )
    new_last = last.with_changes(body=[cst.Expr(cst.Yield(out))])
    comments = (
        [cst.EmptyLine(comment=cst.Comment(t)) for t in PER_STEP.split("\n")] if single else []
    )
    new_loop = loop.with_changes(
        body=loop.body.with_changes(body=[*ops, new_last]), leading_lines=comments
    )
    prologue = list(body[1:-1])
    if single:
        prologue = [_with_max_batch_size(s, reader, why=False) for s in prologue]
    doc = body[0]
    if graph.docstring is None:
        names = ", ".join(output_names(ctx, graph.outputs))
        doc = stmt_of(
            f'"""({names}) batches as numpy arrays, without end, as DALIDataset ran them."""'
        )
    new_fn = fn.with_changes(
        decorators=[], params=params, body=fn.body.with_changes(body=[doc, *prologue, new_loop])
    )
    if fn.decorators:
        new_fn = new_fn.with_changes(
            leading_lines=list(fn.leading_lines) + list(fn.decorators[0].leading_lines)
        )
    new_fn = fit(new_fn, ctx.module.default_indent, len(ctx.indents(fn)))
    c = LoaderClass(ctx, use, "tf", None)  # type: ignore[arg-type]
    module_alias(c, "tensorflow", "tensorflow")
    return [new_fn], import_edits(ctx, c), fn.name.value


class _Replace(cst.CSTTransformer):
    def __init__(self, name: str, value: cst.BaseExpression) -> None:
        super().__init__()
        self.name, self.value = name, value

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return self.value if updated.value == self.name else updated


def _dataset_edit(
    ctx: FileContext, use: IteratorUse, made: cst.BaseStatement, call: cst.Call, name: str
) -> Edit:
    """``DALIDataset(...)`` -> ``tf.data.Dataset.from_generator(lambda: <pipeline>(...),
    output_signature=...)``."""
    tf = imported_as(ctx, "tensorflow") or "tensorflow"
    gen = cst.Lambda(cst.Parameters(), call)
    func = cst.parse_expression(f"{tf}.data.Dataset.from_generator")
    dataset = cst.Call(
        func, [cst.Arg(gen), kwarg("output_signature", output_signature(ctx, use, tf))]
    )
    comments = [
        cst.EmptyLine(comment=cst.Comment(t)) for t in FROM_GENERATOR.format(name=name).split("\n")
    ]
    new = made.deep_replace(use.call, dataset)
    new = new.with_changes(leading_lines=[*made.leading_lines, *comments])
    return ctx.stmt_edit(made, [fit(new, ctx.module.default_indent, len(ctx.indents(made)))])
