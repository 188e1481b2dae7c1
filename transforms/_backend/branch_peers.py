"""A name bound to a pipeline of one definition in one branch and of another in the other
(``if train: pipe = TrainPipe(...)`` / ``else: pipe = ValPipe(...)``), then built after the
``if``: ``pipe.build()`` does the same for either, so it is dropped, when the other definitions
are migrated with this one (*peers*, see :mod:`.peers`). Any other use of such a name (``run()``,
a framework iterator) depends on which pipeline it holds: it keeps its TODO.

Before::

    if mode == "train":
        pipe = TrainPipe(flags)
    else:
        pipe = ValPipe(flags)
    pipe.build()

After (both classes become generators)::

    if mode == "train":
        pipe = TrainPipe(flags)
    else:
        pipe = ValPipe(flags)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import libcst as cst

from dali_migrate.context import FileContext

#: the pipeline definition (its ``FunctionDef`` or ``ClassDef``) that made the object an
#: expression evaluates to, where it is another definition of the module migrated by the same
#: rule; else None
PeerOf = Callable[[cst.CSTNode], "cst.CSTNode | None"]


def shared_use(ctx: FileContext, ref: cst.CSTNode) -> bool:
    """``ref`` is the object of ``<ref>.build()``, a statement of its own."""
    attr = ctx.parents.get(ref)
    call = ctx.parents.get(attr) if isinstance(attr, cst.Attribute) else None
    expr = ctx.parents.get(call) if isinstance(call, cst.Call) else None
    return (
        isinstance(attr, cst.Attribute)
        and attr.value is ref
        and attr.attr.value == "build"
        and isinstance(call, cst.Call)
        and call.func is attr
        and not call.args
        and isinstance(expr, cst.Expr)
    )


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
