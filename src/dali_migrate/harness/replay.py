"""Random operators made comparable: the random states NEW drew are replayed into OLD, and
what the two sides drew says where they differ (count, order, reader seeds)."""

from __future__ import annotations

__all__ = ["reader_notes", "replay_from", "rng_problems"]


def replay_from(new: dict) -> dict:
    """What OLD replays: the states NEW drew, per iteration (the groups capture mode drew ahead
    put in their slots), and NEW's readers (their seeds)."""
    draws = [[list(w) for _, w in it] for it in new["draws"]]
    groups = list(new.get("capture_draws") or [])
    # capture mode draws states ahead, a group per iteration: give them to the iterations in
    # order, each state in its slot; what the iteration drew at the call fills the other slots
    for i, it in enumerate(draws):
        if groups and _group_fits(groups[0], len(it)):
            draws[i] = _merged(groups.pop(0), it)
    return {"draws": draws, "readers": new["readers"]}


def _group_fits(group: list, eager: int) -> bool:
    slots = max((entry[3] for entry in group if len(entry) > 3), default=0)
    return eager == 0 or (slots > 0 and len(group) + eager == slots)


def _merged(group: list, eager: list[list[int]]) -> list[list[int]]:
    if not eager:
        return [list(entry[1]) for entry in group]
    placed = {entry[2]: list(entry[1]) for entry in group}
    rest = iter(eager)
    return [placed[k] if k in placed else next(rest) for k in range(len(group) + len(eager))]


def rng_problems(old: dict, new: dict, replay: dict) -> list[str]:
    """One line per iteration whose draws do not line up with OLD's random operators."""
    ops = old.get("random_ops") or []
    problems = []
    new_ops = [[op for op, _ in it] for it in new["draws"]]
    for i, drawn in enumerate(replay["draws"][: len(old["iterations"]) or None]):
        names = new_ops[i] if i < len(new_ops) and new_ops[i] else ["?"] * len(drawn)
        if len(drawn) != len(ops):
            problems.append(
                f"iteration {i}: the old pipeline has {len(ops)} random operator(s) {_short(ops)}, "
                f"the new code drew {len(drawn)} random state(s) {_short(names)}"
            )
        elif any(a != b and b not in ("?", "advance") for a, b in zip(ops, names)):
            problems.append(
                f"iteration {i}: random states drawn in a different order: old pipeline "
                f"{_short(ops)}, new code {_short(names)}"
            )
    return problems


def _short(ops: list[str]) -> str:
    return "[" + ", ".join(o.replace("__", ".") for o in ops) + "]"


def reader_notes(old: dict, new: dict) -> list[str]:
    """How many readers each side built, and the seeds of OLD replaced by NEW's."""
    notes = []
    o, n = old.get("readers") or [], new.get("readers") or []
    if len(o) != len(n):
        notes.append(f"the new code built {len(n)} reader(s), the old pipeline {len(o)}")
    for k, r in enumerate(o):
        if (
            r.get("seed") is not None
            and r.get("seed_used") is not None
            and r["seed"] != r["seed_used"]
        ):
            notes.append(
                f"reader {k} ({r['op'].replace('__', '.')}): seed {r['seed']} of OLD replaced by "
                f"the new code's {r['seed_used']} to align the shuffles"
            )
    return notes
