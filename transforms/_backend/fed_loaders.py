"""The loader class that replaces a framework iterator with ``size=`` over a ``Pipeline``
subclass fed in ``iter_setup`` (no reader, no ``fn.external_source``), as DALI's iterator ran
it: ``_batches()`` is the generator's loop, the stream ``pipe.run()`` gave (iter_setup's code
and the operators; it ends where iter_setup raised StopIteration), and each pass of
``__iter__`` takes the batches that fill ``size`` samples (PARTIAL cuts the last one to them;
FILL without ``last_batch_padded`` counts what that batch read past them into the next epoch).
The code before the loop runs once, in ``__init__``, where the pipeline's ``__init__`` ran it.

Where iter_setup ends the data, DALI's epoch ended there and, with the pipeline left stopped,
every later one was empty; but where the data ended within the batches DALI had run iter_setup
ahead of the iterator (``prefetch_queue_depth``, 1 without ``exec_pipelined``) when an epoch
ended by its count, the iterator's ``reset()`` restarted the pipeline, which called iter_setup
again: the loader does the same with a new ``_batches()`` (its state is in attributes).

Before::

    class FedPipe(Pipeline):
        def __init__(self, batch_size, num_threads, device_id, data):
            super().__init__(batch_size, num_threads, device_id, exec_pipelined=False)
            self.input = ops.ExternalSource()
            self.data = data
            self.iterator = iter(data)

        def define_graph(self):
            self.jpegs = self.input()
            return self.decode(self.jpegs)

        def iter_setup(self):
            try:
                self.feed_input(self.jpegs, self.iterator.next())
            except StopIteration:
                self.iterator = iter(self.data)
                raise StopIteration

    loader = DALIGenericIterator(pipe, ["img"], size=len(data), fill_last_batch=False)

After::

    class FedLoader:
        \"\"\"Batches as DALIGenericIterator gave them, one epoch per pass.\"\"\"

        def __init__(self, batch_size, data, *, size):
            self.batch_size, self.data, self.size = batch_size, data, size
            self.iterator = iter(data)
            self.again = False
            self.batches = self._batches()

        def _batches(self):
            while True:
                try:
                    jpegs = ndd.as_batch(self.iterator.next())
                except StopIteration:
                    self.iterator = iter(self.data)
                    return
                yield ndd.decoders.image(jpegs, device="gpu").evaluate()

        def __iter__(self):
            left = self.size  # PARTIAL: ...
            for i in range(math.ceil(self.size / self.batch_size)):
                batch = next(self.batches, None)
                if batch is None and self.again and i < 1:
                    self.again = False
                    self.batches = self._batches()
                    batch = next(self.batches, None)
                if batch is None:
                    self.again = False
                    return
                ...
            self.again = True
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Callable, Sequence

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Diagnostic, Edit

from .._cst import free_names, fresh_name, names_in, source_of, visited, walk
from .loader_iter import PARTIAL_ONE
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
from .source_loaders import SIZED, SIZED_FILL

# -- what the front end tells of the class ---------------------------------------------------------


def prefetch_ahead(kwargs: dict[str, cst.Arg]) -> int | None:
    """How many batches ahead of the iterator DALI ran ``iter_setup``, from the Pipeline
    constructor's arguments: 1 with ``exec_pipelined=False``, else ``prefetch_queue_depth``
    (2 by default); None where an argument is not a literal the tool reads."""
    pipelined = kwargs.get("exec_pipelined")
    if pipelined is not None:
        value = pipelined.value
        if not (isinstance(value, cst.Name) and value.value in ("True", "False")):
            return None
        if value.value == "False":
            return 1
    depth = kwargs.get("prefetch_queue_depth")
    if depth is None:
        return 2
    if isinstance(depth.value, cst.Integer) and int(depth.value.value, 0) > 0:
        return int(depth.value.value, 0)
    return None


def attribute_value(
    methods: dict[str, cst.FunctionDef], init: cst.FunctionDef, attr: str
) -> cst.BaseExpression | None:
    """What ``pipe.<attr>`` is in the generator's code, where ``self.x`` is the name ``x``: the
    expression a ``@property`` returns, or the name itself (an attribute ``__init__`` sets).
    None for another method, or where it reads an attribute ``__init__`` does not set."""
    method = methods.get(attr)
    value: cst.BaseExpression = cst.Name(attr)
    if method is not None:
        if [source_of(d.decorator) for d in method.decorators] != ["property"]:
            return None
        smalls: Sequence[cst.BaseSmallStatement] = ()
        if isinstance(method.body, cst.IndentedBlock):
            body = [s for s in method.body.body if not _is_docstring(s)]
            line = body[0] if len(body) == 1 else None
            smalls = line.body if isinstance(line, cst.SimpleStatementLine) else ()
        elif isinstance(method.body, cst.SimpleStatementSuite):  # def size(self): return ...
            smalls = method.body.body
        ret = smalls[0] if len(smalls) == 1 else None
        if not isinstance(ret, cst.Return) or ret.value is None:
            return None
        value = visited(ret.value, _SelfToName())
        if any(isinstance(n, cst.Name) and n.value == "self" for n in walk(value)):
            return None  # (self itself, or self.x() of a method)
    return value if _attributes_read(value) <= _set_in(init) else None


def _attributes_read(value: cst.BaseExpression) -> set[str]:
    """The names ``value`` reads that are not builtins (``len``): the class's attributes."""
    return free_names(value) - set(dir(builtins))


def _set_in(init: cst.FunctionDef) -> set[str]:
    """The attributes ``__init__`` sets in its own statements (``self.x = ...``)."""
    out = set()
    for stmt in init.body.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            for target in small.targets if isinstance(small, cst.Assign) else ():
                t = target.target
                if isinstance(t, cst.Attribute) and source_of(t.value) == "self":
                    out.add(t.attr.value)
    return out


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else None
    return isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString)


class _SelfToName(cst.CSTTransformer):
    """``self.x`` -> ``x`` (the merged code's names); ``self.x(...)`` stays (a method)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: set[int] = set()

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.add(id(node.func))

    def leave_Attribute(
        self, original: cst.Attribute, updated: cst.Attribute
    ) -> cst.BaseExpression:
        value = updated.value
        if isinstance(value, cst.Name) and value.value == "self" and id(original) not in self.calls:
            return cst.Name(updated.attr.value)
        return updated


def fed_iterators(
    instances: list[Instance],
    kwargs: dict[str, cst.Arg],
    init: cst.FunctionDef,
    methods: dict[str, cst.FunctionDef],
) -> None:
    """What the iterators over a Pipeline subclass need if it is fed in ``iter_setup``: how far
    ahead DALI ran it, and what ``size=pipe.<attr>`` is in the generator's code."""
    for use in (u for i in instances for u in i.iterators):
        use.ahead = prefetch_ahead(kwargs)
        if use.size_attr is not None:
            use.size_value = attribute_value(methods, init, use.size_attr)


def carried_note(notes: list[Diagnostic], cls_name: str, loader: Instance) -> None:
    """The note that the class's other methods are not carried over, less those the loader
    carries (the property ``size=pipe.<attr>`` read)."""
    carried = {u.size_attr for u in loader.iterators if u.size_value is not None}
    prefix, suffix = "methods ", f" of {cls_name} are not carried over: their callers get a TODO"
    for k, d in enumerate(notes):
        if d.message.startswith(prefix) and d.message.endswith(suffix):
            named = d.message[len(prefix) : -len(suffix)].split(", ")
            left = [m for m in named if m not in carried]
            message = prefix + ", ".join(left) + suffix
            notes[k : k + 1] = [dataclasses.replace(d, message=message)] if left else []
            return


# -- the class -------------------------------------------------------------------------------------

AGAIN = (
    "# DALI ran iter_setup {n} ahead of the iterator: where the data ended that near the end\n"
    "# of the last epoch, the iterator's reset() started the pipeline again"
)
ENDED = "# iter_setup ended the data: so did DALI's epochs, for good"


def fed_loader_definition(
    ctx: FileContext,
    fn: cst.FunctionDef,
    graph: Graph,
    body: list[cst.BaseStatement],
    params: cst.Parameters,
    inst: Instance,
    at: cst.CSTNode | None,
    sized: Callable[[cst.Parameters], cst.Parameters] | None,
) -> tuple[list[cst.BaseStatement], list[Edit], str]:
    """The class (``__init__``: the code before the generator's loop; ``_batches``: the loop;
    ``__iter__``: one epoch of it), the edits that import what it uses, its name. ``sized``:
    adds the ``size=`` parameter (the iterator's, computed where the loader is made)."""
    use = inst.iterators[0]
    assert use.ahead is not None  # (iterator_checks: only such iterators come here)
    c = LoaderClass(ctx, use, "fed", None)  # type: ignore[arg-type]
    code = list(body[1:])  # (the generator's docstring: the class's now)
    loop = code[-1] if code else None
    if not isinstance(loop, cst.While):
        raise Refused("the generated loop has an unexpected shape")
    setup = code[:-1]
    all_params = init_params(fn, params)
    if sized is not None:
        all_params = sized(all_params)
    names = [p.name.value for p in [*all_params.params, *all_params.kwonly_params]][1:]
    if "self" in names:
        raise Refused("the pipeline function has a parameter named self")
    made = bound_in(setup)
    value = use.size_value
    if value is not None and not _attributes_read(value) <= made | set(names):
        raise Refused(f"size={source_of(use.size)} reads what the pipeline's __init__ does not set")
    c.local = names_in(fn) | set(names)
    c.taken = set(names) | made | {"_batches"}
    reads = free_names(loop) | (free_names(value) if value is not None else set())
    shared = (set(names) | made) & (reads | {"batch_size", use.size_param or "batch_size"})
    if "batch_size" not in shared:
        raise Refused("the pipeline's batch size is not a name the loader can keep")
    kept = [n for n in names if n in shared]
    init = [
        *stmts_of("\n".join(f"self.{n} = {n}" for n in kept)),
        *(renamed(s, shared) for s in setup),
    ]
    size = f"self.{use.size_param}" if use.size_param else c.attr("size")
    if value is not None:
        init.append(stmt_of(f"{size} = {source_of(renamed(value, shared))}"))
    counted = use.policy == "FILL" and not use.last_batch_padded
    if counted:
        init.append(stmt_of(f"{c.attr('read')} = 0"))
    init += stmts_of(f"{c.attr('again')} = False\n{c.attr('batches')} = self._batches()")
    batches = method_def("_batches", ["pass"], [renamed(loop, shared)])
    methods = [method_def("__init__", ["pass"], init).with_changes(params=all_params), batches]
    if use.kept_resets:
        methods.insert(1, method_def("reset", [KEPT_RESET, "pass"]))
    values = _yielded(loop)
    single = len(values) == 1 and any(
        isinstance(n, cst.Yield) and not isinstance(n.value, cst.Tuple) for n in walk(loop)
    )
    methods.append(_iter_method(c, values, single, size, counted))
    name = class_name(ctx, fn.name.value)
    cls = class_def(ctx, name, [class_doc(use, "fed"), *methods], fn, at)
    return [cls], import_edits(ctx, c), cls.name.value


def _yielded(loop: cst.While) -> list[cst.BaseExpression]:
    """What the loop yields (the pipeline's outputs)."""
    found = [n for n in walk(loop) if isinstance(n, cst.Yield)]
    if len(found) != 1 or not isinstance(found[0].value, cst.BaseExpression):
        raise Refused("the generated loop does not yield once")
    out = found[0].value
    if isinstance(out, cst.Tuple):
        return [e.value for e in out.elements]
    return [out]


def _unpacked(outs: list[str], single: bool) -> str:
    """The target that takes a batch of the stream: one output yielded alone, else a tuple."""
    if single:
        return outs[0]
    return f"({outs[0]},)" if len(outs) == 1 else ", ".join(outs)


def _iter_method(
    c: LoaderClass, values: list[cst.BaseExpression], single: bool, size: str, counted: bool
) -> cst.FunctionDef:
    """``__iter__``: the batches that fill ``size`` samples of the stream, each converted for
    the framework (PARTIAL: cut to the samples left)."""
    use = c.use
    taken = {"self", "math", c.ctx.ndd}  # (the methods' own names: __iter__ reads self.x)
    outs = [fresh_name(_base(v, k, c.ctx.ndd), taken) for v, k in zip(values, use.output_map)]
    taken |= set(outs)
    i, batch = fresh_name("i", taken), fresh_name("batch", taken | set(outs))
    trim = fresh_name("left", taken | {i, batch}) if use.policy == "PARTIAL" else None
    again, batches = c.attr("again"), c.attr("batches")
    c.imports.add("math")
    bs = "self.batch_size"
    if counted:
        read, n = c.attr("read"), fresh_name("n", taken | {i, batch})
        head = [
            *SIZED_FILL.split("\n"),
            f"{n} = math.ceil(({size} - {read}) / {bs})",
            f"{read} = ({read} + {n} * {bs}) % {size}",
            f"for {i} in range({n}):",
        ]
    else:
        start = [f"{trim} = {size}  {PARTIAL_ONE}"] if trim else []
        head = [SIZED, *start, f"for {i} in range(math.ceil({size} / {bs})):"]
    ahead = f"{use.ahead} batch{'es' if use.ahead != 1 else ''}"
    take = [
        f"{batch} = next({batches}, None)",
        f"if {batch} is None and {again} and {i} < {use.ahead}:",
        *("    " + ln for ln in AGAIN.format(n=ahead).split("\n")),
        f"    {again} = False",
        f"    {batches} = self._batches()",
        f"    {batch} = next({batches}, None)",
        f"if {batch} is None:  {ENDED}",
        f"    {again} = False",
        "    return",
        f"{_unpacked(outs, single)} = {batch}",
    ]
    yields = yield_batch(c, [cst.Name(o) for o in outs], trim)
    text = [source_of(s).rstrip("\n") for s in yields]
    tail = [f"{trim} -= {bs}"] if trim else []
    lines = [*head, *("    " + ln for ln in [*take, *text, *tail]), f"{again} = True"]
    return method_def("__iter__", lines)


def _base(value: cst.BaseExpression, key: str, ndd: str) -> str:
    """A name for an output: the name it is made from (``images`` in ``images.evaluate()``),
    else its key in output_map."""
    node = value
    while isinstance(node, (cst.Call, cst.Attribute)):
        node = node.func if isinstance(node, cst.Call) else node.value
    if isinstance(node, cst.Name) and node.value != ndd:
        return node.value
    return key if key.isidentifier() else "output"
