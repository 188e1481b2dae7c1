"""What the loops, ``len()``, ``reset()`` and ``next()`` that consume a framework iterator (found
by :mod:`.iterator_follow`) say about the loader that replaces it: early exits, resets inside
loops, code that pulls batches, where each ``len()`` stands; and the note that a drop-in loader
gets where code the tool cannot read takes it."""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Diagnostic

from .._cst import children, scope_label, use_text, walk
from .iterator_follow import drop_in, enclosing, loops_around
from .iterator_use import IteratorUse


def check_uses(ctx: FileContext, use: IteratorUse, reasons: list[str]) -> None:
    """What the loops, len(), reset() and next() found say about the loader: early exits,
    where each len() is, resets inside loops, code that pulls."""
    for loop in use.loops:
        if loop.orelse is not None:
            header = f"for {ctx.text(loop.target)} in {ctx.text(loop.iter)}"
            reasons.append(f"the loop `{header}` {scope_label(ctx, loop)} has an else clause")
        # DALI's iterator resumes an epoch left early (it ignores reset() until the epoch is over)
        if left_early(loop):
            use.early_exit = True
    for r in [*use.resets, *use.rebinds]:
        if any(a is lp for a in loops_around(ctx, r) for lp in use.loops):
            # after the last batch DALI's reset() starts the next epoch inside the same loop
            reasons.append(
                f"{use.name}.reset() {scope_label(ctx, r)} is inside a loop over the iterator"
            )
    if use.pulls and not use.dropin:
        pulled: list[str] = []
        _check_pulls(ctx, use, pulled)
        if pulled:  # (mixed with loops, resets, auto_reset): a drop-in loader takes them all
            drop_in(use, use.pulls[0])
    if use.lens and not use.sized:
        reasons.append(
            f"len({ctx.text(use.lens[0][0])}) {scope_label(ctx, use.lens[0][0])} of an iterator "
            "without reader_name or "
            "size (DALI's len() gives 0 there; the loader has no epochs to count)"
        )
    first = min(use.loops, key=ctx.line_of, default=None)
    placed = []
    for node, _ in use.lens:
        ancestors = loops_around(ctx, node)
        where = "other"
        same = first is None or enclosing(ctx, node, cst.FunctionDef) is enclosing(
            ctx, first, cst.FunctionDef
        )
        if any(a is lp for a in ancestors for lp in use.loops):
            where = "loop"
        elif not ancestors and same and (first is None or ctx.line_of(node) < ctx.line_of(first)):
            where = "first"
        placed.append((node, where))
    use.lens = placed


def _check_pulls(ctx: FileContext, use: IteratorUse, reasons: list[str]) -> None:
    """Code that takes batches with ``next(it)`` and starts the next epoch with ``it.reset()``
    on StopIteration: ``it`` becomes ``iter(loader)``, again at each reset."""
    if use.loops or use.hooked:
        reasons.append("the iterator is both looped over and taken from with next()")
    if use.holder is None:
        reasons.append("next() on an iterator that is not kept in a name or a self attribute")
    if use.kept_resets:
        reasons.append(
            "next() on an iterator passed to code that also gets other values and resets them"
        )
    if use.auto_reset:
        reasons.append(
            "next() on an iterator with auto_reset (the loader needs the reset() to start an epoch)"
        )
    for r in use.resets:
        handler = enclosing(ctx, r, cst.ExceptHandler)
        if handler is None or not (
            isinstance(handler.type, cst.Name) and handler.type.value == "StopIteration"
        ):
            reasons.append(
                f"{use.name}.reset() {scope_label(ctx, r)} is not in an `except StopIteration:`"
            )


def left_early(loop: cst.For) -> bool:
    """The loop can leave before the iterator's end (break, return, raise)."""
    return any(isinstance(n, (cst.Break, cst.Return, cst.Raise)) for n in _walk_loop(loop.body))


def _walk_loop(node: cst.CSTNode):
    """Like walk, but not into nested loops (their break is theirs) or functions."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            continue
        if isinstance(n, (cst.For, cst.While)) and n is not node:
            # a return inside a nested loop still leaves the epoch
            stack.extend(
                x for x in walk(n.body) if isinstance(x, (cst.Return, cst.Yield, cst.Raise))
            )
            continue
        stack.extend(reversed(children(n)))


def dropin_note(ctx: FileContext, rule: str, use: IteratorUse, name: str) -> list[Diagnostic]:
    """What the code the tool cannot read gets now: the loader class ``name``, a drop-in
    iterator."""
    if not use.opaque:
        return []
    first = use.opaque[0]
    made = f"{name}(...)"
    if use.policy_names is not None:  # one class per policy, as the test chooses
        made = f"{use.policy_names[0]}(...) or {use.policy_names[1]}(...)"
    rebind = ctx.enclosing_statement(first)
    if any(rebind is r for r in use.rebinds):
        text = (
            f"`{ctx.text(rebind).strip()}` {scope_label(ctx, first)} stays as written: "
            f"{made} takes the place of {use.name}(...), an iterator of one epoch's "
            "batches at a time, as DALI's was, whose reset() returns None, as DALI's did; loops "
            "over it, len(), next() and reset() work as before, its other attributes do not"
        )
        return [ctx.info(rule, first, text)]
    if use.built_in is not None:
        cls = use.built_in.name.value
        text = (
            f"{cls} is no {use.name} now: its methods take the batches from self._loader, a "
            f"{made}, an iterator of one epoch's batches at a time, as DALI's was; loops over "
            f"{cls}, len(), next() and reset() work as before, the other attributes of "
            f"{use.name} do not"
        )
        return [ctx.info(rule, first, text)]
    if isinstance(first, cst.Return):
        fn = enclosing(ctx, first, cst.FunctionDef)
        what = f"{fn.name.value}() returns" if isinstance(fn, cst.FunctionDef) else "returned"
        where = f"{what} {made} now, in place of {use.name}(...)"
    else:
        where = (
            f"`{use_text(ctx, first)}` {scope_label(ctx, first)} takes {made} now, in "
            f"place of {use.name}(...)"
        )
    text = (
        f"{where}: it is an iterator of one epoch's batches at a time, as DALI's was; loops "
        "over it, len(), next() and reset() work as before, its other attributes do not"
    )
    return [ctx.info(rule, first, text)]
