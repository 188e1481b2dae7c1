"""``pipe.feed_input(name, data)`` before ``pipe.run()``: the plug-in of the back end for
pipelines whose external sources have no ``source=`` (servers, Triton models).

Before::

    @pipeline_def(batch_size=8, num_threads=2, device_id=0)
    def preprocess():
        images = fn.external_source(name="images", layout="HWC")
        return fn.resize(images, size=[224, 224])

    pipe = preprocess()
    pipe.build()
    pipe.feed_input("images", batch)
    (resized,) = pipe.run()

After::

    def preprocess(*, batch_size=8):
        \"\"\"Returns a function of the data pipe.feed_input() gave: (images) -> (output,) batches,
        as Pipeline.run().\"\"\"
        def run(images):
            images = ndd.as_batch(images, layout="HWC")
            return (ndd.resize(images, size=[224, 224]),)
        return run

    pipe = preprocess()
    (resized,) = pipe(images=batch)

The ``feed_input`` calls a ``run()`` consumes are the ones in the same block since the previous
``run()``; each gives its data as the argument named after the source's variable.
``pipe.run(images=batch)`` (DALI feeds each source its data by name, then runs) becomes
``pipe(images=batch)`` alike. A ``run()`` without the data of every source, or data given in
another way, keeps its code with a TODO.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import kwarg, kwargs_of, source_of
from .external_source import SourceUse, as_batch
from .model import FollowUp, Instance


def match_feeds(
    ctx: FileContext, inst: Instance, fed: list[SourceUse], followups: list[FollowUp]
) -> None:
    """Pair each ``pipe.run()`` of ``inst`` with the ``feed_input`` calls before it; what cannot
    be paired becomes a follow-up (and is not rewritten)."""
    by_name: dict[str, SourceUse] = {}
    for u in fed:
        assert u.feed_name is not None  # an external source fed by feed_input has a literal name
        by_name[u.feed_name] = u
    _adopt_input_runs(inst, followups)
    feeds = {id(ctx.enclosing_statement(c)): c for c in inst.feeds}
    runs = {id(ctx.enclosing_statement(r)) for r in inst.runs}
    matched: set[int] = set()
    for run in list(inst.runs):
        if run.args:  # pipe.run(images=data): the data of each source by its name
            _input_run(inst, run, by_name, followups)
            continue
        stmt = ctx.enclosing_statement(run)
        given = _feeds_before(stmt, ctx.parents.get(stmt), feeds, runs, by_name)
        missing = [n for n in by_name if n not in given]
        if missing:
            inst.runs.remove(run)
            followups.append(
                FollowUp(
                    run, f"the data of {', '.join(missing)} is not fed right before this run()"
                )
            )
            continue
        args = [_argument(ctx, by_name[n], call) for n, call in given.items()]
        inst.run_calls[id(run)] = cst.Call(
            cst.ensure_type(run.func, cst.Attribute).value, args=args
        )
        matched |= {id(c) for c in given.values()}
    for call in inst.feeds:
        if id(call) in matched:
            stmt = ctx.enclosing_statement(call)
            assert isinstance(stmt, cst.BaseStatement)  # a feed_input() call is in a statement
            inst.feed_stmts.append(stmt)
        else:
            followups.append(
                FollowUp(call, "this feed_input() is not followed by a run() in the same block")
            )


def _adopt_input_runs(inst: Instance, followups: list[FollowUp]) -> None:
    """``pipe.run(images=data)`` (DALI feeds each external source its data by name, then runs):
    taken from the follow-ups it was left in, to be rewritten with the other runs."""
    uses = {id(u) for u in inst.uses}
    for f in list(followups):
        run = f.node
        if (
            isinstance(run, cst.Call)
            and isinstance(run.func, cst.Attribute)
            and run.func.attr.value == "run"
            and id(run.func.value) in uses
            and run.args
            and all(a.keyword is not None and not a.star for a in run.args)
        ):
            followups.remove(f)
            inst.runs.append(run)


def _input_run(
    inst: Instance, run: cst.Call, by_name: dict[str, SourceUse], followups: list[FollowUp]
) -> None:
    """``pipe.run(images=data)`` -> ``pipe(images=data)`` (the argument named after each
    source's variable), where it gives the data of every fed source and of nothing else."""
    given = {a.keyword.value: a.value for a in run.args if a.keyword is not None}
    unknown = [n for n in given if n not in by_name]
    missing = [n for n in by_name if n not in given]
    if unknown or missing:
        inst.runs.remove(run)
        what = (
            f"names no fed external source: {', '.join(unknown)}"
            if unknown
            else (f"does not give the data of {', '.join(missing)}")
        )
        names = ", ".join(f"{u.source.value}=..." for u in by_name.values())  # type: ignore[attr-defined]
        pipe = source_of(cst.ensure_type(run.func, cst.Attribute).value)
        advice = f"the pipeline is a function of its sources' data now: call {pipe}({names})"
        followups.append(FollowUp(run, f"this run(...) {what}", advice))
        return
    args = [kwarg(by_name[n].source.value, v) for n, v in given.items()]  # type: ignore[attr-defined]
    inst.run_calls[id(run)] = cst.Call(cst.ensure_type(run.func, cst.Attribute).value, args=args)


def _feeds_before(
    stmt: cst.CSTNode,
    block: cst.CSTNode | None,
    feeds: dict[int, cst.Call],
    runs: set[int],
    by_name: dict[str, SourceUse],
) -> dict[str, cst.Call]:
    """The ``feed_input`` calls in ``block`` between the previous ``run()`` and ``stmt``."""
    siblings = list(getattr(block, "body", ()))
    if stmt not in siblings:
        return {}
    given: dict[str, cst.Call] = {}
    for s in reversed(siblings[: siblings.index(stmt)]):
        if id(s) in runs:
            break  # an earlier run() consumed what was fed before it
        call = feeds.get(id(s))
        if call is None:
            continue
        name = _fed_name(call)
        if name is not None and name in by_name and name not in given:
            given[name] = call
    return given


def _fed_name(call: cst.Call) -> str | None:
    first = (
        call.args[0].value
        if call.args and call.args[0].keyword is None
        else kwargs_of(call).get("data_node")
    )
    value = first.value if isinstance(first, cst.Arg) else first
    text = value.evaluated_value if isinstance(value, cst.SimpleString) else None
    return text if isinstance(text, str) else None  # a bytes name names no source


def _argument(ctx: FileContext, use: SourceUse, call: cst.Call) -> cst.Arg:
    """``images=<data>`` for ``pipe.feed_input("images", <data>, layout=...)``."""
    positional = [a for a in call.args if a.keyword is None]
    kw = kwargs_of(call)
    data = positional[1].value if len(positional) > 1 else kw["data"].value
    extra = [
        a.with_changes(comma=cst.MaybeSentinel.DEFAULT)
        for k, a in kw.items()
        if k in ("layout", "cuda_stream")
    ]
    if any(a.keyword.value == "layout" for a in extra):  # type: ignore[union-attr]
        data = as_batch(ctx.ndd, data, [a for a in extra if a.keyword.value == "layout"])  # type: ignore[union-attr]
    return kwarg(use.source.value, data)  # type: ignore[attr-defined]


def is_feed(call: cst.Call) -> bool:
    """``pipe.feed_input("name", data, ...)`` with a literal name and the data given."""
    positional = [a for a in call.args if a.keyword is None]
    has_data = len(positional) > 1 or "data" in kwargs_of(call)
    return _fed_name(call) is not None and has_data and not any(a.star for a in call.args)
