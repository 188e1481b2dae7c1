"""Helper functions with random operators, called from a migrated pipeline (a component of
DM200/DM201).

Before::

    def augment(images):
        flip = fn.random.coin_flip()
        return fn.flip(fn.random_resized_crop(images, size=64), horizontal=flip)

    @pipeline_def(batch_size=8, num_threads=2, device_id=None, seed=3)
    def pipe(root):
        jpegs, labels = fn.readers.file(file_root=root)
        return augment(fn.decoders.image(jpegs)), labels

After::

    def augment(images, *, rng, batch_size):
        flip = ndd.random.coin_flip(batch_size=batch_size, rng=rng)
        return ndd.flip(ndd.random_resized_crop(images, size=64, rng=rng), horizontal=flip)

    def pipe(root, *, batch_size=8, seed=3):
        ...
            for jpegs, labels in reader.next_epoch(batch_size=batch_size):
                yield augment(ndd.decoders.image(jpegs), rng=rng, batch_size=jpegs.batch_size), labels

Random operators need the pipeline's RNG and the current batch size, which only the pipeline
has (a helper defined in the function around the pipeline, e.g. beside a ``with pipe:`` block,
too): the helper takes them as keyword-only parameters (``batch_size`` only when one of its
random operators has no data input) and draws in the same order as when its code was inlined.
A helper that calls such a helper (``preprocess`` calling ``augment``) takes them too and
passes them on. A helper with random operators that is also used outside the pipelines migrated
with it (and their helpers), or already has a parameter named ``rng``/``batch_size`` keeps the
pipeline's TODO. Several ``@pipeline_def`` functions may share one: each passes its own RNG, and they are
migrated by one fix (or all keep their TODO). A Pipeline subclass's methods (and its bases') call
the module's helpers alike; a helper it shares with other code keeps the class's TODO.
Helpers without random operators need nothing: the local rules rewrite them on their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Diagnostic, Edit

from .._cst import append_arg, called_defs, free_names, kwarg, scope_label, walk, within
from .._local import LocalEnv, LocalRule, collect_nodes, lower
from .model import Refused


@dataclass
class RandomHelper:
    fn: cst.FunctionDef
    needs_batch_size: bool


def random_helpers(
    ctx: FileContext,
    container: cst.CSTNode,
    hosts: list[cst.CSTNode] | None = None,
    more: Sequence[cst.CSTNode] = (),
) -> dict[str, RandomHelper]:
    """The functions with random operators that ``container`` calls, defined outside it (at
    module level, or in a function around it), and the functions between them
    (``preprocess`` calling ``augment``): each passes the RNG on. Refused with the reason when
    one cannot be migrated. Calls inside ``hosts`` (other pipelines, migrated with this one or
    not at all) are no use outside; ``more``: code merged into the container's (the bases of a
    Pipeline class), whose calls count as its own."""
    defs: dict[str, cst.FunctionDef] = {}
    for root in (container, *more):
        defs |= _reachable_defs(ctx, root)
    random = _drawing(ctx, defs)
    fns = [defs[name] for name in random]
    helpers: dict[str, RandomHelper] = {}
    for name in sorted(random):
        fn = defs[name]
        _check_signature(fn, name)
        inside = [container, *more, *(hosts or []), *fns]
        outside = [
            n
            for n in ctx.nodes_of(cst.Name)
            if n.value == name and n is not fn.name and not any(within(ctx, n, c) for c in inside)
        ]
        if outside:
            raise Refused(
                f"helper `{name}` with random operators is also used outside this pipeline, "
                f"{scope_label(ctx, outside[0])}"
            )
        helpers[name] = RandomHelper(fn, _draws_unsized(ctx, fn))
    changed = True
    while changed:  # a helper that calls one needing the batch size passes it on
        changed = False
        for h in helpers.values():
            if not h.needs_batch_size and _calls(h.fn) & {
                n for n, o in helpers.items() if o.needs_batch_size
            }:
                h.needs_batch_size = changed = True
    return helpers


def _reachable_defs(ctx: FileContext, container: cst.CSTNode) -> dict[str, cst.FunctionDef]:
    """The functions ``container`` calls by name, defined outside it, and those they call."""
    defs = dict(_called_defs(ctx, container))
    todo = list(defs.values())
    while todo:
        for name, fn in _called_defs(ctx, todo.pop()).items():
            if name not in defs and not within(ctx, fn, container):
                defs[name] = fn
                todo.append(fn)
    return defs


def _drawing(ctx: FileContext, defs: dict[str, cst.FunctionDef]) -> set[str]:
    """The names of ``defs`` with random operators or calling one of those (to a fixed point)."""
    random = {name for name, fn in defs.items() if _has_random(ctx, fn)}
    changed = True
    while changed:
        more = {name for name, fn in defs.items() if name not in random and _calls(fn) & random}
        random |= more
        changed = bool(more)
    return random


def _check_signature(fn: cst.FunctionDef, name: str) -> None:
    """Refused where the helper cannot take the keyword parameters ``rng``/``batch_size``."""
    if fn.decorators or fn.asynchronous is not None:
        raise Refused(f"helper {name} with random operators is decorated or async")
    taken = {
        p.name.value
        for p in [*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params]
    }
    if {"rng", "batch_size"} & taken or fn.params.star_kwarg is not None:
        raise Refused(
            f"helper {name} with random operators already takes rng, batch_size or **kwargs"
        )
    read = sorted({"rng", "batch_size"} & free_names(fn.body))
    if read:  # the parameters it gains would hide them
        raise Refused(
            f"helper {name} with random operators reads `{read[0]}` from around it, which "
            f"the parameter {read[0]} it would take (the pipeline's) would hide: rename "
            "that variable"
        )


def _draws_unsized(ctx: FileContext, fn: cst.FunctionDef) -> bool:
    """One of its random operators has no data input (it needs the batch size)."""
    return any(
        isinstance(n, cst.Call)
        and _is_random(ctx, n)
        and not any(a.keyword is None and not a.star for a in n.args)
        for n in walk(fn.body)
    )


def _calls(fn: cst.FunctionDef) -> set[str]:
    return {
        n.func.value
        for n in walk(fn.body)
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Name)
    }


def helper_edits(
    ctx: FileContext, helpers: dict[str, RandomHelper], rules: list[LocalRule], fired: set[str]
) -> list[Edit]:
    """Each helper lowered with the RNG and batch size it now receives as parameters."""
    edits = []
    for h in helpers.values():
        env = LocalEnv(
            batch_size=cst.Name("batch_size"), rng=cst.Name("rng"), nodes=collect_nodes(ctx, h.fn)
        )
        lowered, diags = lower(ctx, h.fn, env, rules, fired)
        if diags:
            raise Refused("; ".join(dict.fromkeys(d.message for d in diags)))
        new = cst.ensure_type(lowered, cst.FunctionDef)  # the rules rewrite what is inside it
        extra = [cst.Param(cst.Name("rng"))] + (
            [cst.Param(cst.Name("batch_size"))] if h.needs_batch_size else []
        )
        params = new.params
        star = (
            params.star_arg if params.star_arg is not cst.MaybeSentinel.DEFAULT else cst.ParamStar()
        )
        new = new.with_changes(
            params=params.with_changes(kwonly_params=[*params.kwonly_params, *extra], star_arg=star)
        )
        edits.append(ctx.stmt_edit(h.fn, [new]))
    return edits


class HelperCalls(LocalRule[cst.Call]):
    """Inside the pipeline body: ``augment(x)`` -> ``augment(x, rng=rng, batch_size=...)``."""

    id = "DM200"
    name = "helper-calls"
    summary = "calls of helpers with random operators pass the RNG and the batch size"
    node_types = (cst.Call,)

    def __init__(self, helpers: dict[str, RandomHelper]) -> None:
        self.helpers = helpers

    def rewrite(
        self, ctx: FileContext, original: cst.Call, updated: cst.Call, env: LocalEnv
    ) -> cst.CSTNode | Diagnostic | None:
        if not (isinstance(original.func, cst.Name) and original.func.value in self.helpers):
            return None
        # the rule lowers generator bodies, whose env names the RNG and the batch size
        assert env.rng is not None and env.batch_size is not None
        args = append_arg(list(updated.args), kwarg("rng", env.rng))
        if self.helpers[original.func.value].needs_batch_size:
            args = append_arg(args, kwarg("batch_size", env.batch_size))
        return updated.with_changes(args=args)


def _called_defs(ctx: FileContext, container: cst.CSTNode) -> dict[str, cst.FunctionDef]:
    """The functions defined outside ``container`` that its code calls by name (those defined
    inside it are part of its graph code); Refused where such a name is bound more than once
    and one binding is a function with random operators."""
    out: dict[str, cst.FunctionDef] = {}
    for name, (defs, bindings) in called_defs(ctx, container).items():
        if bindings == 1:
            out[name] = defs[0]
        elif any(_has_random(ctx, d) for d in defs):
            raise Refused(f"helper {name} with random operators is bound more than once")
    return out


def _has_random(ctx: FileContext, fn: cst.FunctionDef) -> bool:
    return any(isinstance(n, cst.Call) and _is_random(ctx, n) for n in walk(fn.body))


def _is_random(ctx: FileContext, call: cst.Call) -> bool:
    op = ctx.fn_op(call.func)
    return op is not None and op.target.is_random


def unshared_reason(
    ctx: FileContext, helpers: list[cst.CSTNode], hosts: list[cst.CSTNode]
) -> str | None:
    """Why ``helpers`` (migrated to take the RNG) cannot be: one is used outside ``hosts``, the
    pipelines migrated with them (None: every use is inside)."""
    inside = [*hosts, *helpers]  # a helper calling another one passes the RNG on
    for fn in helpers:
        if not isinstance(fn, cst.FunctionDef):
            continue
        name = fn.name.value
        for n in ctx.nodes_of(cst.Name):
            if n.value == name and n is not fn.name and not any(within(ctx, n, h) for h in inside):
                return (
                    f"helper `{name}` with random operators is also used outside the pipelines "
                    f"migrated with it, {scope_label(ctx, n)}"
                )
    return None
