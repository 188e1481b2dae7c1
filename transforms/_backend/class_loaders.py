"""The loader class for a ``Pipeline`` subclass (DM202) or a ``Pipeline(...)`` object (DM201)
consumed through a framework iterator: the same class ``loaders`` writes for a ``@pipeline_def``
function, made from the class's ``__init__`` or from the ``with pipe:`` block.

Before (the legacy example style)::

    class HybridValPipe(Pipeline):
        def __init__(self, batch_size, num_threads, device_id, data_dir):
            super().__init__(batch_size, num_threads, device_id)
            self.input = ops.readers.File(file_root=data_dir, pad_last_batch=True)
            self.decode = ops.decoders.Image(device="mixed")

        def define_graph(self):
            jpegs, labels = self.input(name="Reader")
            return self.decode(jpegs), labels

    pipe = HybridValPipe(batch_size=64, num_threads=4, device_id=0, data_dir=root)
    pipe.build()
    loader = DALIClassificationIterator(pipe, reader_name="Reader")
    for epoch in range(90):
        for data in loader:
            ...
        loader.reset()

After::

    class HybridValLoader:
        \"\"\"Batches as DALIClassificationIterator gave them, one epoch per pass.\"\"\"

        def __init__(self, batch_size, data_dir):
            self.batch_size = batch_size
            self.reader = ndd.readers.File(file_root=data_dir, pad_last_batch=True)

        def __iter__(self):
            for jpegs, labels in self.reader.next_epoch(batch_size=self.batch_size):
                yield [{"data": ndd.decoders.image(jpegs, device="gpu").torch(), ...}]

    ndd.set_num_threads(4)
    loader = HybridValLoader(batch_size=64, data_dir=root)

The class takes the parameters of ``__init__`` but those only passed on to the Pipeline
constructor (``num_threads``, ``device_id``, ...) that the loader's code does not read; the call
drops their arguments. A ``Pipeline(...)`` object's loader is defined where its ``with`` block was
and takes ``batch_size`` (defaulting to the constructor's); its code reads the names around it
when the loader runs, so it is made only when each of those names is bound once.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import libcst as cst
from libcst.metadata import Scope

from dali_migrate.context import FileContext

from .._cst import free_names, walk
from .arguments import PIPELINE_ARGS
from .iterator_checks import abandon_iterators, iterator_reasons, size_parameters
from .model import FollowUp, Graph, Instance
from .outer_self import OuterReads, self_reads
from .star_keys import passed_on

#: pipeline arguments the loader keeps (the others configure the pipeline object only)
KEPT = {"batch_size", "max_batch_size", "seed"}


def settle_iterators(
    ctx: FileContext,
    graph: Graph,
    instances: list[Instance],
    followups: list[FollowUp],
    extra: list[str] = (),  # type: ignore[assignment]
) -> Instance | None:
    """The instance whose framework iterator becomes a loader class, or None. Iterators that
    cannot (``iterator_reasons``, other uses of the pipeline not followed, ``extra``) keep their
    code, with a TODO that says why."""
    if not any(i.iterators for i in instances):
        return None
    why = iterator_reasons(ctx, graph, instances) + list(extra)
    if followups or not all(i.followed for i in instances):
        why.append(
            "the pipeline is also used in places the tool cannot follow, so it stays a "
            "generator of batches"
        )
    for inst in instances:
        if inst.iterators and why:
            abandon_iterators(inst, why[0], followups)
    return next((i for i in instances if i.iterators), None)


def batch_size_reason(
    batch: cst.BaseExpression, names: set[str]
) -> tuple[list[str], cst.BaseStatement | None]:
    """The loader's code calls the batch size ``batch_size``: a reason when it cannot, else the
    statement that names it (None when the pipeline's batch size is ``batch_size`` already)."""
    if isinstance(batch, cst.Name) and batch.value == "batch_size":
        return [], None
    if "batch_size" in names:
        return [
            "the pipeline's batch size is not the name batch_size, which its code also uses: a "
            "loader class would confuse them"
        ], None
    stmt = cst.SimpleStatementLine(
        [cst.Assign([cst.AssignTarget(cst.Name("batch_size"))], batch.deep_clone())]
    )
    return [], stmt


def with_batch_size(
    body: list[cst.BaseStatement], stmt: cst.BaseStatement | None
) -> list[cst.BaseStatement]:
    """The generator body with ``batch_size = <the pipeline's>`` after its docstring."""
    return body if stmt is None else [body[0], stmt, *body[1:]]


# -- a Pipeline subclass ---------------------------------------------------------------------------


def unused_pipeline_params(
    ctx: FileContext,
    params: cst.Parameters,
    kwargs: dict[str, cst.Arg],
    body: list[cst.BaseStatement],
    inst: Instance,
    fn: cst.FunctionDef,
) -> set[str]:
    """Parameters of ``__init__`` only passed to the Pipeline constructor (``num_threads``,
    ``device_id``, ...) that neither the loader's code nor the iterator's ``size=`` reads."""
    names = {p.name.value for p in [*params.params, *params.kwonly_params]}
    read: set[str] = set()
    for stmt in body:
        read |= free_names(stmt)
    use = inst.iterators[0]
    if use.size is not None and use.size_param is None:  # (else size= is given, not computed)
        read |= set(size_parameters(use, inst, fn)[0].values())
    out = set()
    for key, arg in kwargs.items():
        value = arg.value
        if key in PIPELINE_ARGS - KEPT and isinstance(value, cst.Name) and value.value in names:
            out.add(value.value)
    return out - read


def without_params(params: cst.Parameters, dropped: set[str]) -> cst.Parameters:
    """``params`` less the ``dropped`` ones (the new last of each list ends as the old did)."""
    return params.with_changes(
        params=_kept(params.params, dropped),
        kwonly_params=_kept(params.kwonly_params, dropped),
    )


def _kept(params: Sequence[cst.Param], dropped: set[str]) -> list[cst.Param]:
    out = [p for p in params if p.name.value not in dropped]
    if out and out[-1] is not params[-1]:  # (no ``batch_size, )`` where the rest was dropped)
        out[-1] = out[-1].with_changes(comma=params[-1].comma)
    return out


def loader_args(
    call: cst.Call, params: cst.Parameters, dropped: set[str], unpacked: Collection[str] = ()
) -> list[cst.Arg]:
    """The arguments of ``call`` (the class's) less those that bind ``dropped`` parameters;
    a ``**kwargs`` that may hold one of them (``unpacked``: the keys its dicts may hold) passes
    on the others: ``**{k: v for k, v in kwargs.items() if k not in (...)}``."""
    positional = [p.name.value for p in params.params]
    args = list(call.args)
    out = []
    gone = sorted(dropped & set(unpacked))
    for i, a in enumerate(args):
        name = a.keyword.value if a.keyword is not None else None
        if name is None and not a.star and i < len(positional):
            name = positional[i]
        if name in dropped:
            continue
        out.append(a)
    if out and out[-1] is not args[-1]:  # the new last argument closes the call as the old did
        out[-1] = out[-1].with_changes(comma=args[-1].comma)
    return passed_on(out, gone)


# -- a Pipeline(...) object ------------------------------------------------------------------------


def block_params(batch: cst.BaseExpression) -> cst.Parameters:
    """``(batch_size=<the constructor's batch size>)``: the default is computed where the class
    is defined, where the ``with`` block ran."""
    return cst.Parameters(
        [
            cst.Param(
                cst.Name("batch_size"),
                default=batch.deep_clone(),
                equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""),
                    whitespace_after=cst.SimpleWhitespace(""),
                ),
            )
        ]
    )


def rebound_reasons(
    ctx: FileContext,
    block: cst.With,
    batch: cst.BaseExpression,
    *more: cst.BaseExpression,
    moved: Sequence[cst.CSTNode] = (),
) -> list[str]:
    """The loader's code reads the names the ``with`` block read (and those of ``more``: the
    iterators' ``size=``) when it runs, not when the block ran: each must be bound once, outside
    a loop, in the code around the block. ``moved``: statements before the block that move into
    the loader's loop with it (what they bind is the loop's own, what they read is read then)."""
    scope = ctx.scopes.get(block.body.body[0]) if block.body.body else None
    if scope is None:
        return ["the scope of the with block is unknown"]
    local = set()
    for node in (n for root in [*moved, block.body] for n in walk(root)):
        if isinstance(node, cst.AssignTarget):
            local |= {n.value for n in walk(node.target) if isinstance(n, cst.Name)}
    reasons = []
    read = free_names(block.body) | free_names(batch)
    for stmt in moved:
        read |= free_names(stmt)
    for expr in more:
        read |= free_names(expr)
    item = block.items[0].item  # the pipeline: the loader does not read it
    own = {item.value} if isinstance(item, cst.Name) else set()
    for name in sorted(read - local - own):
        if _rebound(ctx, scope, name):
            reasons.append(
                f"`{name}`, which the loader reads, may change after the pipeline is built: it "
                "is assigned more than once, or by a loop, and the loader would read it when it "
                "runs"
            )
    return reasons[:1]


def moved_code_reasons(
    block: cst.With,
    batch: cst.BaseExpression,
    moved: Sequence[cst.CSTNode],
    outer: OuterReads,
    ctor: Sequence[cst.BaseExpression] = (),
) -> list[str]:
    """The loader class's methods bind ``self`` and ``batch_size`` themselves: what the code of
    the ``with`` block (the statements ``moved`` with it, the arguments ``ctor`` of the Pipeline
    constructor: its seed) reads from ``self`` is read where the block stood (into
    ``outer``), and a ``batch_size`` the block reads from around it must be the pipeline's; else
    the reasons the class cannot take that code."""
    roots = [*moved, block.body]
    why, reads = self_reads([*roots, *ctor])
    outer.names.update(reads.names)
    names: set[str] = set()
    for root in roots:
        names |= free_names(root)
    return why + batch_size_reason(batch, names)[0]


def init_reads(
    ctx: FileContext, block: cst.With, expr: cst.BaseExpression, outer: OuterReads
) -> bool:
    """Whether the ``__init__`` of the loader class defined where the ``with`` block was reads
    ``expr`` (an argument of the Pipeline constructor) as the constructor did: no name the class
    binds there itself (``batch_size``; ``self`` only as what ``outer`` reads where the block
    stood, which then reads it too), each other one bound once, outside a loop, in the code
    around the block (:func:`rebound_reasons`)."""
    names = free_names(expr)
    scope = ctx.scopes.get(block.body.body[0]) if block.body.body else None
    why, reads = self_reads([expr])
    if scope is None or why or (names - {"self"}) & _INIT_NAMES:
        return False
    if any(_rebound(ctx, scope, name) for name in names - {"self"}):
        return False
    for attr in reads.names:
        outer.names.setdefault(attr, "")
    return True


#: the names the loader's ``__init__`` binds (its parameters; ``self`` aside)
_INIT_NAMES = {"self", "batch_size"}


def _rebound(ctx: FileContext, scope: Scope, name: str) -> bool:
    """``name``, read in ``scope``, is assigned there more than once, or by a loop."""
    if name not in scope:
        return False
    assignments = list(scope[name])
    nodes = [getattr(a, "node", None) for a in assignments]
    return len(assignments) > 1 or any(_loop_bound(ctx, n) for n in nodes if n is not None)


def _loop_bound(ctx: FileContext, node: cst.CSTNode) -> bool:
    """``node`` (a binding) is a comprehension's target, or in a loop (its target or its body) of
    its own function: each turn binds it again."""
    cur = ctx.parents.get(node)
    while cur is not None and not isinstance(cur, (cst.FunctionDef, cst.ClassDef, cst.Module)):
        if isinstance(cur, (cst.For, cst.While, cst.CompFor)):
            return True
        cur = ctx.parents.get(cur)
    return False
