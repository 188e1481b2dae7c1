"""DM104 random-ops: random operators get ``batch_size=`` and ``rng=``.

Before::

    mirror = fn.random.coin_flip(probability=0.5)
    images = fn.random_resized_crop(images, size=(224, 224), seed=7)

After (inside a migrated pipeline whose reader yields ``jpegs``)::

    mirror = ndd.random.coin_flip(batch_size=jpegs.batch_size, probability=0.5, rng=rng)
    images = ndd.random_resized_crop(images, size=(224, 224), rng=rng)

Dynamic mode has no pipeline batch size to inherit: a random operator without a batch input
needs ``batch_size=`` (without it, it returns one sample, broadcast to every sample where used
as an argument). Random operators take no ``seed=`` in dynamic mode; they draw from the RNG the
migrated pipeline creates. The values therefore differ from the old pipeline's (pipeline mode
derives hidden per-operator seeds); ``dali-migrate verify`` aligns both to prove the rest equal.

Outside a pipeline the tool migrated there is no batch size or RNG to use: the call gets a TODO.

Safety: safe (random streams change by construction, which the report says).
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext

from ._cst import append_arg, insert_arg, kwarg, remove_args
from ._local import LocalEnv, LocalRule


class RandomOps(LocalRule):
    id = "DM104"
    name = "random-ops"
    summary = "random operators get batch_size= and rng="
    node_types = (cst.Call,)

    def rewrite(self, ctx: FileContext, original: cst.Call, updated: cst.Call, env: LocalEnv):
        op = ctx.fn_op(original.func)
        if op is None or not op.target.is_random:
            return None
        if env.rng is None:
            return ctx.todo(
                self.id,
                original,
                f"random operator {ctx.text(original.func)} outside a migrated pipeline: "
                "pass it batch_size= and rng= from the caller",
            )
        keywords = {a.keyword.value for a in updated.args if a.keyword is not None}
        args = remove_args(list(updated.args), {"seed"})
        has_data_input = any(a.keyword is None and a.star == "" for a in updated.args)
        if not has_data_input and "batch_size" not in keywords and env.batch_size is not None:
            args = insert_arg(args, _first_keyword(args), kwarg("batch_size", env.batch_size))
        if "rng" not in keywords:
            args = append_arg(args, kwarg("rng", env.rng))
        return updated.with_changes(args=args)


def _first_keyword(args: list[cst.Arg]) -> int:
    for i, a in enumerate(args):
        if a.keyword is not None or a.star:
            return i
    return len(args)
