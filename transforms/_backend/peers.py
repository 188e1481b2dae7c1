"""Pipeline definitions whose objects share code: ``pipes = [a(), b()]`` iterated, a helper of
the module given ``a()`` at one call and ``b()`` at another. ``Flow`` follows such objects there
when every other object there is a pipeline of a definition migrated too (a peer); the peers are
then migrated by one fix, or none of them is.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.rules import FileState

from .flow import PeerOf
from .flow_sites import called_function
from .model import Refused
from .recognise import pipeline_decorator
from .sites import refuse_pipeline


def peer_of(ctx: FileContext, refused: set[int]) -> PeerOf:
    """The ``@pipeline_def`` function of the module that ``call`` calls (or that a name refers
    to), unless it is one of ``refused`` (ids): see ``Flow``."""

    def find(call: cst.CSTNode) -> cst.CSTNode | None:
        name = call.func if isinstance(call, cst.Call) else call  # a call, or the name alone
        if not isinstance(name, cst.Name):
            return None
        fn = called_function(ctx, name)
        if fn is None or id(fn) in refused or pipeline_decorator(ctx, fn) is None:
            return None
        return fn

    return find


def peers_lost(result: object, refused: set[int]) -> bool:
    """``result`` is a unit that shares code with a pipeline definition ``refused`` now."""
    return not isinstance(result, Refused) and any(
        id(p) in refused for inst in getattr(result, "instances", ()) for p in inst.peers
    )


def drop_without_peers(state: FileState, rule_id: str, units: list[Any]) -> None:
    """Pipelines of several definitions that share use sites (``pipes = [a(), b()]``, a helper
    that runs either) are migrated together (one fix) or not at all: the code
    they share cannot run both a Pipeline and a generator."""
    dropped = True
    while dropped:
        dropped = False
        kept = {id(u.fn) for u in units}
        for unit in list(units):
            lost = [p for i in unit.instances for p in i.peers if id(p) not in kept]
            if lost:
                name = lost[0].name.value
                why = f"its pipelines share code with those of `{name}`, which is not migrated"
                refuse_pipeline(state, rule_id, unit.fn, Refused(why))
                units.remove(unit)
                dropped = True


def fix_groups(units: list[Any]) -> list[list[Any]]:
    """The units that share an edit (use sites reached from several pipelines) go together."""
    owner: dict[tuple[int, int, str], int] = {}
    parent = list(range(len(units)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for i, unit in enumerate(units):
        for e in unit.edits:
            j = owner.setdefault((e.start, e.end, e.text), i)
            parent[root(i)] = root(j)
    index = {id(u.fn): i for i, u in enumerate(units)}
    for i, unit in enumerate(units):  # pipelines that share code go in one fix
        for peer in (p for inst in unit.instances for p in inst.peers):
            parent[root(i)] = root(index[id(peer)])
    groups: dict[int, list[Any]] = {}
    for i, unit in enumerate(units):
        groups.setdefault(root(i), []).append(unit)
    return list(groups.values())
