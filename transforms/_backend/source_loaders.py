"""The loader class that replaces a framework iterator over a pipeline fed by external sources
(no reader), as DALI's iterator without ``reader_name`` or ``size`` ran it: an epoch ends when a
source raises StopIteration; with ``cycle="raise"`` the next epoch goes over the source again,
without it DALI goes over an iterable once (later epochs are empty: the loader continues one
iterator made in ``__init__``). Code before the sources runs once, in ``__init__``. A component
of the loader migration.

Before::

    @pipeline_def(batch_size=4, num_threads=2, device_id=0)
    def external_pipe(source):
        jpegs, labels = fn.external_source(source=source, num_outputs=2, cycle="raise")
        return fn.decoders.image(jpegs, device="mixed"), labels

    loader = DALIGenericIterator(external_pipe(eii), ["data", "label"], auto_reset=True)

After::

    class ExternalLoader:
        \"\"\"Batches as DALIGenericIterator gave them, one epoch per pass.\"\"\"

        def __init__(self, source, batch_size=4):
            self.source = source

        def __iter__(self):  # cycle="raise": the source again in each pass
            for data in self.source:
                jpegs, labels = (ndd.as_batch(part) for part in data)
                images = ndd.decoders.image(jpegs, device="gpu")
                yield [{"data": images.evaluate().torch(), "label": labels.torch()}]

    loader = ExternalLoader(eii)
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Edit

from .._cst import assigned_names, comment_line, free_names, fresh_name, names_in, visited, walk
from .loader_parts import (
    LoaderClass,
    bound_in,
    class_def,
    class_doc,
    class_name,
    import_edits,
    init_params,
    method_def,
    renamed,
    stmts_of,
    yield_batch,
)
from .model import Graph, Instance, Refused


def source_loader_definition(
    ctx: FileContext,
    fn: cst.FunctionDef,
    graph: Graph,
    body: list[cst.BaseStatement],
    params: cst.Parameters,
    inst: Instance,
    at: cst.CSTNode | None = None,
    name: str | None = None,
) -> tuple[list[cst.BaseStatement], list[Edit], str]:
    """The class (``__init__`` keeps the parameters the code reads, ``__iter__`` is the
    generator's code with each ``yield`` converted for the framework), the edits that import
    what it uses, its name."""
    use = inst.iterators[0]
    c = LoaderClass(ctx, use, "source", None)  # type: ignore[arg-type]
    code = list(body[1:])  # (the generator's docstring: the class's now)
    restarts = any(u.raises for u in graph.sources)
    setup, per_pass = _split(code) if restarts else _once(code, names_in(fn))
    all_params = init_params(fn, params)
    names = [p.name.value for p in [*all_params.params, *all_params.kwonly_params]][1:]
    if "self" in names:
        raise Refused("the pipeline function has a parameter named self")
    c.local = names_in(fn) | set(names)
    reads = set().union(*(free_names(s) for s in per_pass))
    made = bound_in(setup)
    shared = (set(names) | made) & reads
    clash = made & bound_in(per_pass)
    if clash:
        raise Refused(f"`{sorted(clash)[0]}` is set both before the loop and in it")
    kept = [n for n in names if n in shared]
    kept_lines = stmts_of("\n".join(f"self.{n} = {n}" for n in kept))
    init = [*kept_lines, *(renamed(s, shared) for s in setup)]
    iter_code = [_converted_yields(c, renamed(s, shared)) for s in per_pass]
    methods = [
        method_def("__init__", ["pass"], init or None).with_changes(params=all_params),
        method_def("__iter__", ["pass"], iter_code),
    ]
    name = class_name(ctx, name or fn.name.value)
    cls = class_def(ctx, name, [class_doc(use, "source"), *methods], fn, at)
    return [cls], import_edits(ctx, c), cls.name.value


def _split(
    code: list[cst.BaseStatement],
) -> tuple[list[cst.BaseStatement], list[cst.BaseStatement]]:
    """The generator's code before its loop (run once: ``__init__``) and the loop with the
    statements that start the sources' pass (``batches = iter(source)``: each pass)."""
    loop = _final_loop(code)
    source = free_names(loop.iter)
    start = len(code) - 1
    while start > 0 and assigned_names(code[start - 1]) & source and _starts_pass(code[start - 1]):
        start -= 1
    return code[:start], code[start:]


ONCE = "# DALI went over the source once for all epochs: a generator, which a new loop continues"


def _final_loop(code: list[cst.BaseStatement]) -> cst.For:
    """The loop over the sources that ends the generator's code."""
    loop = code[-1]
    if not isinstance(loop, cst.For) or any(isinstance(n, cst.Return) for n in walk(loop)):
        raise Refused("the pipeline's code does not end in one loop over its sources")
    return loop


def _once(
    code: list[cst.BaseStatement], taken: set[str]
) -> tuple[list[cst.BaseStatement], list[cst.BaseStatement]]:
    """Without ``cycle="raise"`` DALI goes over an iterable source once: the iterator is made
    in ``__init__`` and each pass continues it (the passes after its end are empty)."""
    loop = _final_loop(code)
    batches = cst.Name(fresh_name("batches", taken))
    line = cst.ensure_type(
        cst.parse_statement(f"{batches.value} = (batch for batch in x)\n"), cst.SimpleStatementLine
    )
    genexp = cst.ensure_type(cst.ensure_type(line.body[0], cst.Assign).value, cst.GeneratorExp)
    made = cst.ensure_type(
        line.deep_replace(genexp.for_in.iter, loop.iter), cst.SimpleStatementLine
    )
    made = made.with_changes(leading_lines=[comment_line(ONCE)])
    return [*code[:-1], made], [loop.with_changes(iter=batches)]


def _starts_pass(stmt: cst.BaseStatement) -> bool:
    """The emitter's start of a pass over a source whose kind is not visible: ``batches =
    source() if inspect.isgeneratorfunction(source) else source`` and ``try: iter(batches)``."""
    if isinstance(stmt, cst.Try):
        return True
    return any(
        isinstance(n, cst.Attribute) and n.attr.value == "isgeneratorfunction" for n in walk(stmt)
    )


def _converted_yields(c: LoaderClass, stmt: cst.BaseStatement) -> cst.BaseStatement:
    # the yields are in the loop: a statement of the pass is never replaced itself
    return visited(stmt, _Yields(c))


class _Yields(cst.CSTTransformer):
    """``yield images, labels`` -> ``yield [{"data": images.torch(), ...}]``."""

    def __init__(self, c: LoaderClass) -> None:
        self.c = c

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        small = updated.body[0] if len(updated.body) == 1 else None
        value = small.value if isinstance(small, cst.Expr) else None
        if not isinstance(value, cst.Yield) or not isinstance(value.value, cst.BaseExpression):
            return updated
        out = value.value
        values = [e.value for e in out.elements] if isinstance(out, cst.Tuple) else [out]
        new = yield_batch(self.c, values, None)
        new[0] = new[0].with_changes(leading_lines=updated.leading_lines)
        return cst.FlattenSentinel(new)
