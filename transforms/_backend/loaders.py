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
  iterator did, with FILL; with PARTIAL and DROP the loader is a drop-in iterator (below).
- ``len(loader)``, or a Lightning hook that returns it: ``__len__``, DALI's count.
- Taken by code the tool cannot read (returned by a function no code of the module calls, a
  data module's ``get_loader()``; ``iter(it)``; an argument of ``islice()`` or of a call into
  another module), or used in ways the loader above cannot take (``next()`` mixed with loops
  or resets, a PARTIAL or DROP epoch left early): the loader is a drop-in iterator, as DALI's
  was (``__iter__`` returns it, ``__next__`` takes from the epoch ``_epoch_batches()`` runs, so
  a loop and ``next()`` go on with the same epoch; the batch after each is taken ahead, so an
  epoch is over with its last batch, as DALI counted; ``reset()``, which a new loop calls, then
  starts the next), with ``__len__``; every use stays as written. So does ``it = it.reset()``
  (``self.it = self.it.reset()``): DALI's ``reset()`` returned None, and the loader's does too.
  For unseen code, not in capture mode (a loader may be made by each call, and one capture
  loop can run).
- Made in a class from the pipelines its callers hand it (``self.it =
  DALIClassificationIterator(pipelines=pipelines, size=size)``): ``wrapped_iterators``, one
  generic loader over whatever generators the callers hand it.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Edit

from .._cst import free_names, names_in, source_of
from .dataset_generator import dataset_definition
from .fed_loaders import fed_loader_definition
from .iterator_checks import epochs_kind, is_sharded
from .iterator_use import IteratorUse
from .loader_init import init_method, init_tail, size_lines
from .loader_iter import iter_methods
from .loader_parts import (
    KEPT_RESET,
    LoaderBody,
    LoaderClass,
    bound_in,
    class_def,
    class_doc,
    class_name,
    import_edits,
    init_params,
    method_def,
    module_alias,
    renamed,
    runtime_helpers,
)
from .model import Graph, Instance, Refused
from .per_device import HELPER as DEVICES_HELPER
from .source_loaders import source_loader_definition

# -- the body the emitter wrote --------------------------------------------------------------------


def _parts(body: list[cst.BaseStatement]) -> LoaderBody:
    loop = body[-1]
    if not isinstance(loop, cst.While):
        raise Refused("the generated epoch loop has an unexpected shape")
    inner = loop.body.body
    epoch_for = inner[0] if len(inner) == 1 else None
    if not (isinstance(epoch_for, cst.For) and isinstance(epoch_for.iter, cst.Call)):
        raise Refused("the generated epoch loop has an unexpected shape")
    epoch = epoch_for.iter
    if not (isinstance(epoch.func, cst.Attribute) and isinstance(epoch.func.value, cst.Name)):
        raise Refused("the generated epoch loop has an unexpected shape")
    block = epoch_for.body
    stmts = list(block.body) if isinstance(block, cst.IndentedBlock) else []
    last = stmts[-1] if stmts else None
    small = (
        last.body[0] if isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1 else None
    )
    if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Yield)):
        raise Refused("the generated epoch loop does not end with its yield")
    yielded = small.value.value
    if not isinstance(yielded, cst.BaseExpression):  # a bare ``yield`` or ``yield from``
        raise Refused("the generated epoch loop does not end with its yield")
    values = [e.value for e in yielded.elements] if isinstance(yielded, cst.Tuple) else [yielded]
    prologue = body[1:-1]
    defs: list[cst.BaseStatement] = [s for s in prologue if isinstance(s, cst.FunctionDef)]
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
    """``_loader_definition``; where the iterator's policy is chosen at run time
    (``use.policy_choice``), one class per policy (``DropLoader``, ``PartialLoader``), each
    exactly DALI's iterator with that policy: their names are set on the use, the site makes
    one or the other (``loader_site_edits``), and the name returned is the first's."""
    use = inst.iterators[0]
    if use.policy_choice is None:
        return _loader_definition(ctx, fn, graph, body, params, inst, at, name)
    base = name or fn.name.value
    defs: list[cst.BaseStatement] = []
    edits: list[Edit] = []
    names: list[str] = []
    first = use.policy
    for policy in (first, use.policy_choice[2]):
        use.policy = policy
        made = _loader_definition(
            ctx, fn, graph, body, params, inst, at, f"{policy.lower()}_{base}"
        )
        defs, edits, names = defs + made[0], edits + made[1], [*names, made[2]]
    use.policy, use.policy_names = first, (names[0], names[1])
    return [*defs[:-1], _derived(defs[-1], defs[-1 - len(made[0])], names[0])], edits, names[0]


def _derived(cls: cst.BaseStatement, base: cst.BaseStatement, name: str) -> cst.BaseStatement:
    """The second policy's class derives from the first's (``name``), without the methods the
    two write alike (the docstring, the drop-in iterator's ``reset``, ``__iter__``, ``__next__``)."""
    if not isinstance(cls, cst.ClassDef) or not isinstance(base, cst.ClassDef):
        return cls
    code = cst.Module([]).code_for_node
    same = {code(m) for m in base.body.body}
    kept = [m for m in cls.body.body if code(m) not in same]
    if not any(isinstance(m, cst.FunctionDef) and code(m) in same for m in cls.body.body):
        return cls  # (a class that overrides every method would derive nothing)
    return cls.with_changes(
        bases=[cst.Arg(cst.Name(name))],
        lpar=cst.LeftParen(),
        rpar=cst.RightParen(),
        body=cls.body.with_changes(body=kept),
    )


def _loader_definition(
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
    if not graph.readers and not graph.sources and use.ahead is not None:  # fed in iter_setup
        taken = names_in(fn)
        sized = (lambda p: _with_size_param(p, use, taken)) if use.size_param else None
        return fed_loader_definition(ctx, fn, graph, body, params, inst, at, sized)
    if not graph.readers:  # external sources: one pass of them per epoch (or size= samples)
        taken = names_in(fn)
        sized = (lambda p: _with_size_param(p, use, taken)) if use.size is not None else None
        return source_loader_definition(ctx, fn, graph, body, params, inst, at, name, sized)
    lead = graph.lead or graph.readers[0]  # the reader whose epochs the loader runs
    reader_args = {a.keyword.value: a.value for a in lead.call.args if a.keyword is not None}
    c = LoaderClass(ctx, use, epochs_kind(reader_args, use), _parts(body))
    c.meta = bool(use.meta_calls)  # pipe.epoch_size() reads the loader's reader
    use.reader_attr = c.body.reader
    named = reader_args.get("name")
    use.meta_reader = source_of(named) if named is not None else None
    c.block = at if isinstance(at, cst.With) else None
    c.sharded, c.padded = is_sharded(reader_args), _is_true(reader_args.get("pad_last_batch"))
    c.moving = c.sharded and not _is_true(reader_args.get("stick_to_shard"))
    if use.devices is not None:  # one loader per GPU: their batches side by side
        c.helpers.append(DEVICES_HELPER)
    params = init_params(fn, params)
    if use.size_param is not None:
        params = _with_size_param(params, use, names_in(fn))
    param_names = [p.name.value for p in [*params.params, *params.kwonly_params]][1:]
    if "self" in param_names:
        raise Refused("the pipeline function has a parameter named self")
    c.shared = _self_names(c, param_names)
    c.taken = set(c.shared) | {"_batches", "_epoch", "_epoch_batches", "_ahead", "_ended"}
    c.local = names_in(fn) | set(param_names)
    if c.block is not None and use.size is not None:
        c.local |= free_names(use.size)  # the outer names size= reads stay visible in __init__
    iter_code = iter_methods(c)
    tail, length = init_tail(c, inst, fn)
    if use.dropin:
        tail = [*tail, *_dropin_state(use)]
    if use.size_reads:
        tail = [*tail, *size_lines(c, inst, fn, tail)]
    methods = [init_method(c, params, param_names, tail)]
    if length is not None and use.measured:
        methods.append(method_def("__len__", [f"return {length}"]))
    if use.dropin:
        methods += _dropin_methods(use)
        iter_code = [_renamed_def(m, "__iter__", "_epoch_batches") for m in iter_code]
    elif use.kept_resets:
        methods.append(method_def("reset", [KEPT_RESET, "pass"]))
    # _batches(), then __iter__
    methods += [cst.ensure_type(renamed(m, c.shared), cst.FunctionDef) for m in reversed(iter_code)]
    name = class_name(ctx, name or fn.name.value)
    doc = c.body.doc if graph.docstring is not None else class_doc(use, c.kind)
    cls = class_def(ctx, name, [doc, *methods], fn, at)
    if "math.ceil(" not in source_of(cls):
        c.imports.discard("math")
    if use.peered is not None:  # (each branch binds the name to a partial of the loader class)
        module_alias(c, "functools", "functools")
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


def _with_size_param(params: cst.Parameters, use: IteratorUse, taken: set[str]) -> cst.Parameters:
    """``__init__`` takes the iterator's ``size=`` as a keyword parameter, under a name the
    pipeline function does not use."""
    names = taken | {p.name.value for p in [*params.params, *params.kwonly_params]}
    use.size_param = next(n for n in ("size", "epoch_samples", "iterator_size") if n not in names)
    size = cst.Param(cst.Name(use.size_param))
    star = params.star_arg
    if isinstance(star, cst.MaybeSentinel):
        star = cst.ParamStar()
    inner = [*params.params, *params.kwonly_params]
    if len(inner) >= 2 and _own_lines(inner[-2].comma) and _own_lines(inner[-1].comma):
        # one per line, and a trailing comma, as they are written
        between, end = inner[-2].comma, inner[-1].comma
        if isinstance(params.star_arg, cst.MaybeSentinel):
            star = cst.ParamStar(comma=between)  # type: ignore[arg-type]
        size = size.with_changes(comma=end)
        last = inner[-1].with_changes(comma=between)
        if params.kwonly_params:
            params = params.with_changes(kwonly_params=[*params.kwonly_params[:-1], last])
        else:
            params = params.with_changes(params=[*params.params[:-1], last])
    return params.with_changes(star_arg=star, kwonly_params=[*params.kwonly_params, size])


def _own_lines(comma: cst.Comma | cst.MaybeSentinel) -> bool:
    """A comma followed by a new line (parameters written one per line)."""
    return isinstance(comma, cst.Comma) and "\n" in cst.Module([]).code_for_node(comma)


def _renamed_def(fn: cst.FunctionDef, old: str, new: str) -> cst.FunctionDef:
    return fn.with_changes(name=cst.Name(new)) if fn.name.value == old else fn


def loader_instance(instances: list[Instance]) -> Instance | None:
    """The iterated instance the loader class is made from: of several (each wrapped once, in
    iterators of one configuration) the first whose iterator takes ``len()``, so the class has
    ``__len__`` when any of them needs it."""
    iterated = [i for i in instances if i.iterators]
    sized = [i for i in iterated if i.iterators[0].lens or i.iterators[0].hooked]
    chosen = sized or iterated
    return chosen[0] if chosen else None


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
    init_bound = set(params) | bound_in([*b.setup])
    shared = init_bound & (reads | {b.reader, "batch_size"})
    clash = shared & bound_in([*b.ops, *b.defs, b.target])
    if clash:
        raise Refused(f"`{sorted(clash)[0]}` is set both before the epoch loop and in it")
    return shared
