"""A name bound to a pipeline of one definition in one branch and of another in the other
(``if train: pipe = TrainPipe(...)`` / ``else: pipe = ValPipe(...)``), then used after the
``if``, where the other definitions are migrated with this one (*peers*, see :mod:`.peers`):
``pipe.build()`` does the same for either, so it is dropped; ``pipe.run()`` becomes
``next(pipe)`` (each definition is a generator of batches now); ``return pipe`` hands the
generator to the factory's callers in this file, whose uses are held to the same rule;
``DALIDataset(pipe, ...)`` becomes ``from_generator`` over ``functools.partial`` of the definition
each branch binds the name to, a framework iterator over it the call of ``functools.partial`` of
each definition's loader class. Any other use (a framework iterator, ``epoch_size()``, a call into
other code) depends on which pipeline the name holds: it keeps a TODO that says what to write in
each branch.

Before::

    if mode == "train":
        pipe = TrainPipe(flags)
    else:
        pipe = ValPipe(flags)
    pipe.build()
    images, labels = pipe.run()

After (both classes become generators)::

    if mode == "train":
        pipe = TrainPipe(flags)
    else:
        pipe = ValPipe(flags)
    images, labels = next(pipe)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import libcst as cst

from dali_migrate.context import FileContext

from .datasets import DATASET
from .iterator_args import ITERATORS

#: the pipeline definition (its ``FunctionDef`` or ``ClassDef``) that made the object an
#: expression evaluates to, where it is another definition of the module migrated by the same
#: rule; else None
PeerOf = Callable[[cst.CSTNode], "cst.CSTNode | None"]


#: ``pipe.<method>()`` that does the same for the pipeline of any migrated definition: dropped
#: (``build``) or ``next(pipe)`` (``run``: each definition is a generator of batches now)
SHARED_METHODS = ("build", "run")


def shared_use(ctx: FileContext, ref: cst.CSTNode) -> bool:
    """``ref`` is the object of ``<ref>.build()`` (a statement of its own) or ``<ref>.run()``
    (without arguments): rewritten alike whichever peer's pipeline ``ref`` holds."""
    attr = ctx.parents.get(ref)
    call = ctx.parents.get(attr) if isinstance(attr, cst.Attribute) else None
    expr = ctx.parents.get(call) if isinstance(call, cst.Call) else None
    if not (
        isinstance(attr, cst.Attribute)
        and attr.value is ref
        and attr.attr.value in SHARED_METHODS
        and isinstance(call, cst.Call)
        and call.func is attr
        and not call.args
    ):
        return False
    return attr.attr.value == "run" or isinstance(expr, cst.Expr)


def consumer_site(ctx: FileContext, ref: cst.CSTNode) -> bool:
    """``ref`` is the pipeline of ``DALIDataset(ref, ...)`` (or ``pipeline=ref``) or of a DALI
    framework iterator (``DALIGenericIterator([ref], ...)``, ``pipelines=ref``): each branch
    binds the name to ``functools.partial`` of what its definition becomes, which the consumer's
    replacement calls (see :mod:`.dataset_generator` and :mod:`.loader_sites`)."""
    node = ctx.parents.get(ref)
    if isinstance(node, cst.Element):  # [pipe]: the one pipeline of the iterator
        listed = ctx.parents.get(node)
        if not isinstance(listed, (cst.List, cst.Tuple)) or len(listed.elements) != 1:
            return False
        node = ctx.parents.get(listed)
    call = ctx.parents.get(node) if isinstance(node, cst.Arg) else None
    if not isinstance(call, cst.Call) or not isinstance(node, cst.Arg) or node.star:
        return False
    q = ctx.qualname(call.func) or ""
    if q != DATASET and q not in ITERATORS:
        return False
    if node.keyword is not None:
        return node.keyword.value in ("pipeline", "pipelines")
    return call.args[0] is node


def branch_peers(
    ctx: FileContext, holders: Sequence[object], own: Callable[[object], bool], peer_of: PeerOf
) -> list[cst.CSTNode] | None:
    """The peer definitions whose objects the bindings ``holders`` (libcst assignments) give
    the name where ``own`` does not: each such binding must be ``name = <call of a peer>``;
    None where one may give it something else."""
    peers: list[cst.CSTNode] = []
    for holder in holders:
        if own(holder):
            continue
        target = ctx.parents.get(getattr(holder, "node", None))
        assign = ctx.parents.get(target) if isinstance(target, cst.AssignTarget) else None
        if not (
            isinstance(assign, cst.Assign)
            and len(assign.targets) == 1
            and isinstance(assign.value, cst.Call)
        ):
            return None
        peer = peer_of(assign.value)
        if peer is None:
            return None
        peers.append(peer)
    return peers or None


def peer_use_advice(ctx: FileContext, ref: cst.CSTNode, iterator_advice: str) -> tuple[str, str]:
    """The TODO at a use of ``ref``, a name that holds this pipeline or a peer's (one per branch),
    that depends on which it holds: what the code does there, and what to write
    (``iterator_advice``: what a framework iterator over it needs, "" where it is none)."""
    name = ctx.text(ref)
    what = (
        f"`{name}` holds the pipeline of one of several definitions here (each branch that "
        "made it called another)"
    )
    if iterator_advice:
        return what, iterator_advice
    arg = ctx.parents.get(ref)
    call = ctx.parents.get(arg) if isinstance(arg, cst.Arg) else None
    if isinstance(call, cst.Call):
        what += f", passed to `{ctx.text(call.func)}`"
    attr = ctx.parents.get(ref)
    method = attr.attr.value if isinstance(attr, cst.Attribute) and attr.value is ref else ""
    if method in ("epoch_size", "reader_meta"):
        return what, (
            f"which reader {method}() asks depends on the branch that made the pipeline: "
            "read it in each branch from the reader that branch's definition builds: its "
            "get_metadata() (epoch_size() was its 'epoch_size_padded'), the reader built with "
            "max_batch_size="
        )
    return what, (
        "each definition returns a generator of batches now, not a Pipeline (no build()): "
        "take each batch with next(...), whichever branch made it"
    )


def class_peer_of(ctx: FileContext, family: Sequence[cst.ClassDef], own: cst.ClassDef) -> PeerOf:
    """Peers of the pipeline class ``own``: the other classes of ``family`` (those migrated by
    the same fix), where a call makes one of them."""
    others = {id(c): c for c in family if c is not own}

    def find(call: cst.CSTNode) -> cst.CSTNode | None:
        name = call.func if isinstance(call, cst.Call) else None
        if not isinstance(name, cst.Name):
            return None
        scope = ctx.scopes.get(name)
        referents = {id(r): r for a in (scope.accesses[name] if scope else ()) for r in a.referents}
        if len(referents) != 1:
            return None
        return others.get(id(getattr(next(iter(referents.values())), "node", None)))

    return find
