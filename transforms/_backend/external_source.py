"""``fn.external_source`` inside a migrated pipeline (a component of DM200-DM202).

Before (in a pipeline)::

    images = fn.external_source(source=next_batch, layout="HWC")       # def next_batch(): ...
    a, b = fn.external_source(source=Pairs(), num_outputs=2)          # class with __iter__
    crops = fn.external_source(source=load_sample, batch=False)       # def load_sample(sample_info)

After (in the generator)::

    images = ndd.as_batch(next_batch(), layout="HWC")
    for a_data, b_data in Pairs():                                     # the loop of the generator
        a, b = (ndd.as_batch(part) for part in (a_data, b_data))
    try:
        data = [load_sample(types.SampleInfo(iteration * batch_size + i, i, iteration, 0)) for i in range(batch_size)]
    except StopIteration:
        return
    crops = ndd.as_batch(data)

What the source is must be visible in the file: a function (called with no argument, or with
the iteration number when it takes one, as pipeline mode does), a generator function or an
object whose class defines ``__iter__`` (iterated once: the generator ends where ``pipe.run()``
raised StopIteration), or a list/tuple.

Per-sample sources (``batch=False``), as DALI 2.4 runs them (checked): a callable is called once
per sample, in order, with ``types.SampleInfo(idx_in_epoch, idx_in_batch, iteration,
epoch_idx)`` when it takes one argument (``idx_in_epoch = iteration * batch_size +
idx_in_batch``; ``epoch_idx`` is 0 until ``pipe.reset()``, which the generator has no
counterpart of), with none otherwise; an iterable or generator gives one sample per ``next``.
When the source raises StopIteration in the middle of a batch, pipeline mode drops that
incomplete batch and ``pipe.run()`` raises StopIteration: the generator returns there. With
``num_outputs`` each sample is a tuple, one item per output.

A source whose kind is not visible (a parameter, an object of an imported class) is handled as
DALI decides at run time, when it is the pipeline's only input: iterated if ``iter()`` takes
it, else called once per batch (``iter(source, None)``, which ends where the callable raises
StopIteration, as the pipeline did). With ``cycle`` it must be iterable (DALI raises otherwise).

``cycle=True``/``"quiet"`` over an iterable: DALI calls ``iter()`` on the source again (or the
generator function again) when it ends, so the generator loops over it ``while True``.

Refused, with the reason (the pipeline keeps its TODO): ``cycle="raise"`` (each pass ends with
StopIteration and the next one starts after ``pipe.reset()``: a generator cannot resume),
``cycle`` over a generator object (DALI raises TypeError too) or an object made in the pipeline
call, ``batch_info=``, and a source of unknown kind next to a reader or another source, or with
``batch=False``.

Made under an ``if`` on configuration (``guards``), a source is made before the loop under the
same tests (its source object, when the call makes one) and its batch is taken in the loop's
``if``, as readers there are; a test that calls code is decided once, before the loop. A source
iterated there (the generator iterates one only in its own loop), one whose kind the file does
not show, and one with no ``source=`` (fed by name: ``pipe.feed_input()``, or a server such as
Triton running the serialized pipeline) keep the definition, with the reason.

``parallel=True`` ran the source in worker processes (``py_num_workers``); DALI requires such a
source's data to depend only on the sample (or batch) it is asked for, so calling it in the
generator's own thread gives the same batches, more slowly. It migrates that way, with a TODO
above the call that says so (dynamic mode has no worker pool of its own to hand it to). The
source is the first positional argument (``fn.external_source(load, batch=False)``) as well as
``source=``, ``num_outputs`` the second.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from dali_migrate.context import FileContext, attr_chain

from .._cst import names_in, no_space_equal
from .model import Refused
from .source_kinds import is_generator_function, source_kind

#: external_source arguments that only tune pipeline mode's copies and queues
IGNORED = {
    "no_copy",
    "blocking",
    "prefetch_queue_depth",
    "cuda_stream",
    "use_copy_kernel",
    "ndim",
    "name",
    "bytes_per_sample_hint",
}
#: arguments ndd.as_batch takes with the same meaning
AS_BATCH = {"layout", "dtype", "device"}


@dataclass
class SourceUse:
    """``x = fn.external_source(source=..., ...)`` in the graph code."""

    stmt: cst.SimpleStatementLine
    target: cst.BaseAssignTargetExpression
    call: cst.Call
    source: cst.BaseExpression
    kind: str  # "call0" (source()), "call1" (source(iteration)), "iterable", "either" (iterated,
    # or called once per batch when not iterable: the kind is not visible), or per sample
    # (batch=False):
    # "sample0" (source()), "sample1" (source(sample_info)), "sample_iter" (next(source))
    num_outputs: int | None
    as_batch_args: list[cst.Arg]
    stops: bool  # the callable may raise StopIteration
    cycle: bool = False  # an iterable started over when it ends (cycle=True or "quiet")
    #: how the module spells ``nvidia.dali.types.SampleInfo`` (kind "sample1")
    sample_info: str | None = None
    #: kind "fed": the ``name=`` that ``pipe.feed_input(name, data)`` gives the data to
    feed_name: str | None = None
    #: the statement of the graph code the call is part of, when it is not ``stmt`` itself
    #: (``return fn.external_source(...)``: ``stmt`` binds ``target`` to the call then)
    inline_at: cst.SimpleStatementLine | None = None
    #: ``parallel=True``: pipeline mode ran the source in worker processes; the generator calls
    #: it in its own thread (a TODO there says so)
    parallel: bool = False

    #: cycle="raise": each pass ends with StopIteration, the next starts at once (a loader
    #: class, one pass per epoch, does that; a generator cannot)
    raises: bool = False
    #: made in ``if`` blocks of the graph code: their tests (``guards.Guard``), outermost first,
    #: and the statement of the body that holds them
    guards: list[Any] = field(default_factory=list)
    guard_top: cst.BaseStatement | None = None

    @property
    def top(self) -> cst.BaseStatement:
        """The statement of the graph code's body that makes this source."""
        return self.guard_top or self.inline_at or self.stmt


#: the parameters of ``fn.external_source`` that may be given by position, in order
POSITIONAL = ("source", "num_outputs")


def source_kwargs(call: cst.Call) -> dict[str, cst.Arg] | None:
    """The arguments of an ``external_source`` call by parameter name (the positional ones
    named as DALI names them); None with ``*``/``**`` or more positional arguments than DALI
    takes."""
    kw: dict[str, cst.Arg] = {}
    positional = [a for a in call.args if a.keyword is None]
    if any(a.star for a in call.args) or len(positional) > len(POSITIONAL):
        return None
    for name, arg in zip(POSITIONAL, positional):
        kw[name] = arg.with_changes(keyword=cst.Name(name), equal=no_space_equal())
    for a in call.args:
        if a.keyword is not None:
            if a.keyword.value in kw:
                return None  # given twice: DALI raises TypeError
            kw[a.keyword.value] = a
    return kw


def analyse_source(
    ctx: FileContext,
    call: cst.Call,
    target: cst.BaseAssignTargetExpression,
    stmt: cst.SimpleStatementLine,
    reasons: list[str],
) -> SourceUse | None:
    """``target = fn.external_source(...)`` (``call``) as a ``SourceUse``, or None; what cannot
    be migrated goes to ``reasons``."""
    kw = source_kwargs(call)
    if kw is None:
        reasons.append(
            "external_source with * or ** arguments, or positional ones past source and num_outputs"
        )
        return None
    source = kw.get("source")
    if source is None:
        return _fed(ctx, call, target, stmt, kw, reasons)
    parallel, cycle, raises, per_sample = _options(ctx, kw, reasons)
    num_outputs = None
    if "num_outputs" in kw:
        v = kw["num_outputs"].value
        if not isinstance(v, cst.Integer):
            reasons.append("external_source num_outputs= is not a literal")
            return None
        num_outputs = int(v.value)
        elements = target.elements if isinstance(target, (cst.Tuple, cst.List)) else None
        if (
            elements is None
            or len(elements) != num_outputs
            or not all(isinstance(e.value, cst.Name) for e in elements)
        ):
            reasons.append(
                "the outputs of a multi-output external_source are not unpacked into names"
            )
            return None
    elif not isinstance(target, cst.Name):
        reasons.append("external_source output is not assigned to a name")
        return None
    kind, stops = source_kind(ctx, source.value)
    value = source.value
    if kind is None and isinstance(value, cst.Name) and is_generator_function(ctx, value):
        # a generator function: pipeline mode calls it (again at each rewind with cycle)
        kind, value = "iterable", cst.Call(value)
    if kind is None and cycle:
        kind = "iterable"  # DALI raises for a cycled source that is not iterable; so does the loop
    elif kind is None and not per_sample:
        kind = "either"  # iterated, or called once per batch if not iterable (as DALI decides)
    if kind is None:
        reasons.append(unknown_source(ctx.text(source.value)))
        return None
    if cycle:
        _cycle_reasons(ctx, source.value, kind, per_sample, reasons)
    sample_info = None
    if per_sample:
        if kind == "iterable":
            kind, stops = "sample_iter", True
            value = cst.Call(cst.Name("iter"), [cst.Arg(value)])
        elif kind == "call1":
            sample_info = _sample_info(ctx)
            if sample_info is None:
                reasons.append(
                    "per-sample external_source: the migrated code builds "
                    "nvidia.dali.types.SampleInfo, and the name `types` is something else in this "
                    "file (add `import nvidia.dali.types as dali_types`)"
                )
                return None
            kind = "sample1"
        else:
            kind = "sample0"
    args = [kw[k].with_changes(comma=cst.MaybeSentinel.DEFAULT) for k in kw if k in AS_BATCH]
    use = SourceUse(stmt, target, call, value, kind, num_outputs, args, stops, cycle, sample_info)
    use.raises = raises
    use.parallel = parallel
    return use


def _options(
    ctx: FileContext, kw: dict[str, cst.Arg], reasons: list[str]
) -> tuple[bool, bool, bool, bool]:
    """``parallel=``, ``cycle=`` (True or "quiet": cycled; "raise": raises) and ``batch=False``
    (per sample) of an external source; what it cannot carry over of them and of its other
    arguments goes to ``reasons``."""
    # parallel=True: the same data (DALI asks for sources whose data depends on the sample or
    # batch index only), computed in worker processes; the generator computes it in its thread
    parallel = "parallel" in kw and not _is_false(kw["parallel"].value)
    cycle = raises = False
    if "cycle" in kw and not _is_false(kw["cycle"].value):
        value = kw["cycle"].value
        if isinstance(value, cst.Name) and value.value == "True" or _string(value) == "quiet":
            cycle = True
        elif _string(value) == "raise":
            raises = True
        else:
            reasons.append(f"external_source cycle={ctx.text(value)} is not a literal")
    per_sample = "batch" in kw and not (
        isinstance(kw["batch"].value, cst.Name) and kw["batch"].value.value == "True"
    )
    if per_sample and not _is_false(kw["batch"].value):
        reasons.append(f"external_source batch={ctx.text(kw['batch'].value)} is not a literal")
    unknown = set(kw) - IGNORED - AS_BATCH - {"source", "num_outputs", "parallel", "cycle", "batch"}
    if unknown:
        reasons.append(f"external_source {', '.join(sorted(unknown))}= is not migrated yet")
    return parallel, cycle, raises, per_sample


def _cycle_reasons(
    ctx: FileContext, source: cst.BaseExpression, kind: str, per_sample: bool, reasons: list[str]
) -> None:
    """Why a cycled source of ``kind`` cannot be migrated (nothing appended: it can)."""
    if per_sample:
        reasons.append("external_source cycle= with batch=False is not migrated yet")
    elif kind != "iterable":
        reasons.append(
            "external_source cycle= is only valid for an iterable source (DALI raises too)"
        )
    elif isinstance(source, cst.Call):
        reasons.append(
            f"external_source cycle= over {ctx.text(source)}, made where the graph is "
            "defined: DALI "
            "rewinds that one object (a generator object cannot be rewound at all); give it a "
            "module-level "
            "name, or pass a generator function"
        )


def unknown_source(text: str, where: str = "") -> str:
    """Why an external source whose kind the tool cannot see is not migrated."""
    return (
        f"the tool cannot tell whether source={text} is a callable or an iterable{where} (a "
        "function, generator or class defined in this file, or a list, is followed): bind it to "
        "one, "
        "or annotate the parameter (Iterable[...]: iterated; Callable[[], T]: called once per "
        "batch; "
        "Callable[[int], T]: called with the iteration number)"
    )


def _fed(
    ctx: FileContext,
    call: cst.Call,
    target: cst.BaseAssignTargetExpression,
    stmt: cst.SimpleStatementLine,
    kw: dict[str, cst.Arg],
    reasons: list[str],
) -> SourceUse | None:
    """``x = fn.external_source(name="x")`` with no source: ``pipe.feed_input("x", data)`` gives
    its data before each ``pipe.run()``; the migrated pipeline takes that data as an argument."""
    name = _string(kw["name"].value) if "name" in kw else None
    unknown = set(kw) - IGNORED - AS_BATCH
    if name is None:
        reasons.append(
            "external_source fed by pipe.feed_input() is migrated when it has a literal name= only"
        )
        return None
    if not isinstance(target, cst.Name) or unknown:
        what = f"{', '.join(sorted(unknown))}=" if unknown else "several outputs"
        reasons.append(f"external_source fed by pipe.feed_input() with {what} is not migrated yet")
        return None
    args = [kw[k].with_changes(comma=cst.MaybeSentinel.DEFAULT) for k in kw if k in AS_BATCH]
    return SourceUse(
        stmt, target, call, cst.Name(target.value), "fed", None, args, False, feed_name=name
    )


def _is_false(value: cst.BaseExpression) -> bool:
    return (
        isinstance(value, cst.Name) and value.value in ("False", "None") or _string(value) == "no"
    )


def _string(value: cst.BaseExpression) -> str | None:
    text = value.evaluated_value if isinstance(value, cst.SimpleString) else None
    return text if isinstance(text, str) else None  # (a bytes literal is no name or mode)


def _sample_info(ctx: FileContext) -> str | None:
    """``types.SampleInfo`` as this module can spell it (``from nvidia.dali import types``, or
    ``import nvidia.dali.types as t``), or None."""
    for stmt in ctx.module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if (
                isinstance(small, cst.ImportFrom)
                and small.module is not None
                and not isinstance(small.names, cst.ImportStar)
            ):
                if ctx.text(small.module) == "nvidia.dali":
                    for alias in small.names:
                        if isinstance(alias.name, cst.Name) and alias.name.value == "types":
                            return f"{_bound_as(alias, 'types')}.SampleInfo"
            elif isinstance(small, cst.Import):
                for alias in small.names:
                    if ctx.text(alias.name) == "nvidia.dali.types" and alias.asname:
                        return f"{_bound_as(alias, '')}.SampleInfo"
    # DM100 adds `from nvidia.dali import types` where the migrated code uses a name `types`
    # the file never used
    return "types.SampleInfo" if "types" not in names_in(ctx.module) else None


def _bound_as(alias: cst.ImportAlias, default: str) -> str:
    """The name an import binds: its ``as`` name (a name, in an import), else ``default``."""
    if alias.asname is None:
        return default
    return cst.ensure_type(alias.asname.name, cst.Name).value


#: why a generator cannot take a ``cycle="raise"`` source (a loader class can)
RAISE_REASON = (
    'external_source cycle="raise" ends each pass with StopIteration and starts the next after '
    "pipe.reset(), which a generator cannot do: loop over the source yourself, one generator per "
    "pass"
)


def as_batch(ndd: str, value: cst.BaseExpression, args: list[cst.Arg]) -> cst.Call:
    sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    # (the arguments come from the source's call: their line breaks stay there)
    all_args = [cst.Arg(value)] + [
        a.with_changes(whitespace_after_arg=cst.SimpleWhitespace("")) for a in args
    ]
    return cst.Call(
        attr_chain(f"{ndd}.as_batch"),
        [a.with_changes(comma=sep) for a in all_args[:-1]] + all_args[-1:],
    )


def wrap(ndd: str, use: SourceUse, data: cst.BaseExpression) -> cst.BaseExpression:
    """The batch (or the tuple of batches) the external source gave, from the source's ``data``
    (a list of samples for a per-sample source, each a tuple with ``num_outputs``)."""
    if use.num_outputs is None:
        return as_batch(ndd, data, use.as_batch_args)
    if use.kind.startswith("sample"):
        data = cst.Call(cst.Name("zip"), [cst.Arg(data, star="*")])
    part = cst.Name("part")
    # dtype=[...] / layout=[...] with num_outputs: one value per output (DALI pairs them up)
    keywords = {
        id(a): a.keyword.value
        for a in use.as_batch_args
        if isinstance(a.value, (cst.List, cst.Tuple)) and a.keyword is not None
    }
    listed = [a for a in use.as_batch_args if id(a) in keywords]
    args = [
        a.with_changes(value=cst.Name(keywords[id(a)])) if id(a) in keywords else a
        for a in use.as_batch_args
    ]
    target: cst.BaseAssignTargetExpression = part
    if listed:
        names = [part, *(cst.Name(keywords[id(a)]) for a in listed)]
        target = cst.Tuple([cst.Element(n) for n in names], lpar=[], rpar=[])
        data = cst.Call(cst.Name("zip"), [cst.Arg(data), *(cst.Arg(a.value) for a in listed)])
    return cst.GeneratorExp(
        as_batch(ndd, part, args),
        cst.CompFor(target=target, iter=data),
        lpar=[cst.LeftParen()],
        rpar=[cst.RightParen()],
    )


def fetch(
    use: SourceUse, iteration: cst.Name | None, batch_size: cst.BaseExpression | None = None
) -> cst.BaseExpression:
    """What one iteration of a callable (or per-sample) source gives."""
    if not use.kind.startswith("sample"):
        args = [cst.Arg(iteration)] if use.kind == "call1" and iteration is not None else []
        return cst.Call(use.source, args)
    if batch_size is None or (use.kind == "sample1" and iteration is None):
        raise Refused(
            "a per-sample external_source needs the batch size and the iteration number here"
        )
    if use.kind == "sample1":
        assert iteration is not None  # (refused above)
        i = cst.Name("i")
        info = cst.parse_expression(use.sample_info or "types.SampleInfo")
        index = cst.BinaryOperation(
            cst.BinaryOperation(iteration, cst.Multiply(), batch_size), cst.Add(), i
        )
        args = [cst.Arg(a) for a in (index, i, iteration, cst.Integer("0"))]
        sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        element: cst.BaseExpression = cst.Call(
            use.source,
            [cst.Arg(cst.Call(info, [a.with_changes(comma=sep) for a in args[:-1]] + args[-1:]))],
        )
    else:
        i = cst.Name("_")
        element = (
            cst.Call(cst.Name("next"), [cst.Arg(use.source)])
            if use.kind == "sample_iter"
            else cst.Call(use.source)
        )
    return cst.ListComp(
        element, cst.CompFor(target=i, iter=cst.Call(cst.Name("range"), [cst.Arg(batch_size)]))
    )
