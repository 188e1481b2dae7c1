"""``__iter__`` (and ``_batches``, the endless stream) of the loader class that ``loaders``
writes, one shape per configuration of the iterator (``LoaderClass.kind``): the per-batch code
the emitter wrote spliced into small templates.

- ``plain`` (FILL over a padded reader), ``partial`` (PARTIAL over one shard, or a padded one),
  ``drop`` (DROP over one shard): one loop over ``reader.next_epoch()``, the outputs cut to the
  samples left (PARTIAL) or the incomplete last batch read and not given (DROP).
- the others: ``_batches()`` chains the epochs into the stream ``pipe.run()`` gave, and each
  pass of ``__iter__`` takes as many batches from it as DALI's iterator took in that epoch.
"""

from __future__ import annotations

import keyword

import libcst as cst

from .._cst import fresh_name, source_of
from .emit import CAPTURE_COMMENT
from .loader_parts import LoaderClass, stmt_of, yield_batch

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
            first = new[0] if new else None
            # (a marker is a SimpleStatementLine; every statement is one or a compound statement)
            if (
                isinstance(s, cst.SimpleStatementLine)
                and s.leading_lines
                and isinstance(first, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
            ):
                new[0] = first.with_changes(leading_lines=[*s.leading_lines, *first.leading_lines])
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
    return cst.ensure_type(fn.visit(_Splice(markers)), cst.FunctionDef)


def _indent(lines: list[str], depth: int = 1) -> str:
    return "".join(("    " * depth + ln if ln else "") + "\n" for ln in lines)


# -- __iter__ (and _batches) per configuration ---------------------------------------------------


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
        f", ctx={source_of(a.value)}"
        for a in b.epoch.args
        if a.keyword and a.keyword.value == "ctx"
    ]
    return (
        f"{b.reader}.next_epoch(batch_size=batch_size{''.join(device)}{', capture=True' if capture else ''})",
        comments,
    )


def iter_methods(c: LoaderClass) -> list[cst.FunctionDef]:
    """``__iter__`` for the configuration, and ``_batches`` (the endless stream) where the
    epochs do not line up with the reader's."""
    b = c.body
    epoch, comments = _epoch_parts(c)
    target = source_of(b.target)
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
            "def __iter__(self):\n" + _indent(lines), {"__YIELD__": yield_batch(c, [*outs], trim)}
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
    reaches its last sample; what that batch read past it counts into the next epoch (with
    ``size=``, modulo ``size``: DALI's ``reset()`` took ``counter % size``, which differs from the
    excess where a batch holds more than ``size`` samples)."""
    if c.use.reader_name is None:
        return _sized_ahead_iter(c, take)
    read, end, samples = c.attr("read"), c.attr("end"), c.attr("samples")
    start = [f"{end} += {samples}"]
    if c.use.lens or c.use.built_in is not None:
        start.append(f"{c.attr('length')} = math.ceil(({end} - {read}) / batch_size)")
        c.imports.add("math")
    if c.use.early_exit:
        start = [f"if {read} >= {end}:  {RESUME}", *["    " + s for s in start]]
    return [
        *FILL_AHEAD.split("\n"),
        *start,
        f"while {read} < {end}:",
        f"    {take}",
        f"    {read} += batch_size",
        "    __YIELD__",
    ]


def _sized_ahead_iter(c: LoaderClass, take: str) -> list[str]:
    """:func:`_ahead_iter` with ``size=`` (no ``reader_name=``): the count starts each epoch at
    what the last one read past ``size``, modulo ``size`` (a loop left early resumes its epoch)."""
    read, samples = c.attr("read"), c.attr("samples")
    return [
        f"# an epoch ends with the batch that reaches {samples}; the samples that batch took from",
        f"# the next epoch count into it (modulo {samples}, as DALI's reset() counted them)",
        f"{read} %= {samples}",
        f"while {read} < {samples}:",
        f"    {take}",
        f"    {read} += batch_size",
        "    __YIELD__",
    ]
