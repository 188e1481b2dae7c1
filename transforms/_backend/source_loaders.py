"""The loader class that replaces a framework iterator over a pipeline fed by external sources
(no reader), as DALI's iterator without ``reader_name`` or ``size`` ran it: an epoch ends when a
source raises StopIteration; with ``cycle="raise"`` the next epoch goes over the source again,
without it DALI goes over an iterable once (later epochs are empty: the loader continues one
iterator made in ``__init__``). Code before the sources runs once, in ``__init__``. With
``size=N`` over an iterable gone over once (``counted_pass``), DALI's iterator counted N samples
an epoch instead, and its epochs ended for good where the source did. A component of the loader
migration.

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

from collections.abc import Callable

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Edit

from .._cst import (
    assigned_names,
    comment_line,
    free_names,
    fresh_name,
    names_in,
    source_of,
    visited,
    walk,
)
from .loader_iter import DROP, PARTIAL_ONE
from .loader_parts import (
    KEPT_RESET,
    LoaderClass,
    bound_in,
    class_def,
    class_doc,
    class_name,
    import_edits,
    init_params,
    method_def,
    renamed,
    stmt_of,
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
    sized: Callable[[cst.Parameters], cst.Parameters] | None = None,
) -> tuple[list[cst.BaseStatement], list[Edit], str]:
    """The class (``__init__`` keeps the parameters the code reads, ``__iter__`` is the
    generator's code with each ``yield`` converted for the framework), the edits that import
    what it uses, its name. ``sized``: adds the ``size=`` parameter (the iterator's)."""
    use = inst.iterators[0]
    c = LoaderClass(ctx, use, "source", None)  # type: ignore[arg-type]
    code = list(body[1:])  # (the generator's docstring: the class's now)
    restarts = any(u.raises for u in graph.sources)
    setup, per_pass = _split(code) if restarts else _once(code, names_in(fn))
    all_params = init_params(fn, params)
    if sized is not None:
        all_params = sized(all_params)
    names = [p.name.value for p in [*all_params.params, *all_params.kwonly_params]][1:]
    if "self" in names:
        raise Refused("the pipeline function has a parameter named self")
    c.local = names_in(fn) | set(names)
    c.taken = set(names) | bound_in(setup)
    if sized is not None:
        per_pass = counted_pass(c, _final_loop(per_pass), names)
    reads = set().union(*(free_names(s) for s in per_pass))
    made = bound_in(setup)
    shared = (set(names) | made) & reads
    clash = made & bound_in(per_pass)
    if clash:
        raise Refused(f"`{sorted(clash)[0]}` is set both before the loop and in it")
    kept = [n for n in names if n in shared]
    kept_lines = stmts_of("\n".join(f"self.{n} = {n}" for n in kept))
    init = [*kept_lines, *(renamed(s, shared) for s in setup)]
    iter_code = [renamed(s, shared) for s in per_pass]
    if sized is None:  # (counted_pass converted them)
        iter_code = [_converted_yields(c, s) for s in iter_code]
    if sized is not None and use.policy == "FILL":  # the samples read, where this epoch ends
        init.append(stmt_of(f"{c.attr('read')} = 0"))
    methods = [
        method_def("__init__", ["pass"], init or None).with_changes(params=all_params),
    ]
    if use.kept_resets:
        methods.append(method_def("reset", [KEPT_RESET, "pass"]))
    methods.append(method_def("__iter__", ["pass"], iter_code))
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


def _converted_yields(
    c: LoaderClass, stmt: cst.BaseStatement, trim: str | None = None, guard: str | None = None
) -> cst.BaseStatement:
    # the yields are in the loop: a statement of the pass is never replaced itself
    return visited(stmt, _Yields(c, trim, guard))


class _Yields(cst.CSTTransformer):
    """``yield images, labels`` -> ``yield [{"data": images.torch(), ...}]`` (each output cut
    to ``[:trim]``; under ``if guard:``)."""

    def __init__(self, c: LoaderClass, trim: str | None, guard: str | None) -> None:
        self.c, self.trim, self.guard = c, trim, guard

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        small = updated.body[0] if len(updated.body) == 1 else None
        value = small.value if isinstance(small, cst.Expr) else None
        if not isinstance(value, cst.Yield) or not isinstance(value.value, cst.BaseExpression):
            return updated
        out = value.value
        values = [e.value for e in out.elements] if isinstance(out, cst.Tuple) else [out]
        new = yield_batch(self.c, values, self.trim)
        if self.guard is not None:
            guarded = cst.parse_statement(f"{DROP}\nif {self.guard}:\n    pass\n")
            assert isinstance(guarded, cst.If)
            new = [guarded.with_changes(body=guarded.body.with_changes(body=new))]
        first = new[0]
        assert isinstance(first, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
        new[0] = first.with_changes(leading_lines=[*updated.leading_lines, *first.leading_lines])
        return cst.FlattenSentinel(new)


SIZED_FILL = (
    "# DALI's iterator counted size= samples an epoch: it ends with the batch that reaches them,\n"
    "# and what that batch read past them counts into the next epoch (modulo size=)"
)
SIZED = "# DALI's iterator counted size= samples an epoch: the batches they fill"
ENDED = "# the source ended: so did DALI's epochs"


def counted_pass(c: LoaderClass, loop: cst.For, names: list[str]) -> list[cst.BaseStatement]:
    """The loop over the one pass of the sources, as DALI's iterator with ``size=`` ran it: each
    epoch takes the batches that reach ``size`` samples (cut to them for PARTIAL, the last one
    not given for DROP), and the epochs end for good where the source does."""
    if "batch_size" not in names:
        raise Refused("the pipeline function has no batch_size parameter for size= to count")
    if any(isinstance(n, (cst.Break, cst.Continue, cst.Return)) for n in walk(loop.body)):
        raise Refused("the loop over the sources leaves a batch early")
    size, bs = c.use.size_param, "batch_size"  # (attributes once the code is renamed)
    taken = c.local | {"self"}
    policy = c.use.policy
    take = [
        "try:",
        f"    {source_of(loop.target)} = next({source_of(loop.iter)})",
        f"except StopIteration:  {ENDED}",
        "    return",
    ]
    trim, guard = None, None
    if policy == "FILL":
        read = c.attr("read")  # modulo size=, as DALI's reset() took it (a batch may hold more)
        head = [*SIZED_FILL.split("\n"), f"{read} %= {size}", f"while {read} < {size}:"]
        take.append(f"{read} += {bs}")
        tail: list[str] = []
    else:
        c.imports.add("math")
        i = fresh_name("i" if policy == "DROP" else "_", taken)
        trim = None if policy == "DROP" else fresh_name("left", taken)
        guard = f"{i} < {size} // {bs}" if policy == "DROP" else None
        head = [
            SIZED,
            *([f"{trim} = {size}  {PARTIAL_ONE}"] if trim else []),
            f"for {i} in range(math.ceil({size} / {bs})):",
        ]
        tail = [f"{trim} -= {bs}"] if trim else []
    text = "\n".join([*head, *("    " + t for t in [*take, "__BODY__", *tail])])
    stmts = stmts_of("def f():\n" + "\n".join("    " + ln for ln in text.split("\n")))
    fn = stmts[0]
    assert isinstance(fn, cst.FunctionDef)
    converted = _converted_yields(c, loop, trim, guard)
    assert isinstance(converted, cst.For)
    body = list(converted.body.body)
    return [s.visit(_Marker(body)) for s in fn.body.body]  # type: ignore[misc]


class _Marker(cst.CSTTransformer):
    """``__BODY__`` -> the statements of the loop's body."""

    def __init__(self, body: list[cst.CSTNode]) -> None:
        self.body = body

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        small = updated.body[0]
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Name):
            if small.value.value == "__BODY__":
                return cst.FlattenSentinel(self.body)  # type: ignore[arg-type]
        return updated
