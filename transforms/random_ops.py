"""DM104 random-ops: random operators get ``batch_size=`` and ``rng=``.

Before (``fixtures/DM104/in_pipeline.in.py``)::

    from nvidia.dali import fn, pipeline_def


    @pipeline_def(batch_size=16, num_threads=2, device_id=None, seed=99)
    def augmenting(root):
        jpegs, labels = fn.readers.file(file_root=root)
        images = fn.decoders.image(jpegs)
        images = fn.random_resized_crop(images, size=(64, 64), seed=7)
        angle = fn.random.uniform(range=(-10.0, 10.0))
        shift = fn.random.uniform(range=(0, 4), shape=2)
        images = fn.rotate(images, angle=angle, fill_value=0)
        images = fn.noise.gaussian(images, stddev=5.0)
        return images, shift, labels


    pipe = augmenting("/data")
    pipe.build()
    images, shift, labels = pipe.run()

After (``fixtures/DM104/in_pipeline.out.py``)::

    import nvidia.dali.experimental.dynamic as ndd


    def augmenting(root, *, batch_size=16, seed=99):
        \"\"\"Yields (images, shift, labels) batches epoch after epoch, without end, as Pipeline.run() did.\"\"\"
        reader = ndd.readers.File(file_root=root)
        rng = ndd.random.RNG(seed=seed)
        # capture=True: runs the loop as one prebuilt graph; one such loop can be active at a time
        while True:
            for jpegs, labels in reader.next_epoch(batch_size=batch_size, capture=True):
                images = ndd.decoders.image(jpegs)
                images = ndd.random_resized_crop(images, size=(64, 64), rng=rng)
                angle = ndd.random.uniform(batch_size=jpegs.batch_size, range=(-10.0, 10.0), rng=rng)
                shift = ndd.random.uniform(batch_size=jpegs.batch_size, range=(0, 4), shape=2, rng=rng)
                images = ndd.rotate(images, angle=angle, fill_value=0)
                images = ndd.noise.gaussian(images, stddev=5.0, rng=rng)
                yield images, shift, labels


    ndd.set_num_threads(2)
    pipe = augmenting("/data")
    images, shift, labels = next(pipe)

Dynamic mode has no pipeline batch size to inherit: a random operator without a batch input
needs ``batch_size=`` (without it, it returns one sample, broadcast to every sample where used
as an argument). Random operators take no ``seed=`` in dynamic mode; they draw from the RNG the
migrated pipeline creates. The values therefore differ from the old pipeline's (pipeline mode
derives hidden per-operator seeds); ``dali-migrate verify`` aligns both to prove the rest equal.

Outside a pipeline the tool migrated (a helper function, which runs eagerly once its file is
migrated) the operator draws from ndd's default RNG (``ndd.random.set_seed``): one with a data
input is complete as it is; one without takes ``batch_size=`` of the function's parameter that
is the data input of a DALI operator there (``images.batch_size``). With ``seed=``, or without
such a parameter, the call gets a TODO that says what to write.

Safety: safe (random streams change by construction, which the report says).
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Diagnostic, Edit

from ._cst import append_arg, children, insert_arg, kwarg, remove_args
from ._local import LocalEnv, LocalRule, collect_nodes, produces_node


class RandomOps(LocalRule[cst.Call]):
    id = "DM104"
    name = "random-ops"
    summary = "random operators get batch_size= and rng="
    node_types = (cst.Call,)

    def rewrite(
        self, ctx: FileContext, original: cst.Call, updated: cst.Call, env: LocalEnv
    ) -> cst.CSTNode | Diagnostic | None:
        op = ctx.fn_op(original.func)
        if op is None or not op.target.is_random:
            return None
        if env.rng is None:
            return _outside(ctx, self.id, original, updated)
        keywords = {a.keyword.value for a in updated.args if a.keyword is not None}
        args = remove_args(list(updated.args), {"seed"})
        has_data_input = any(a.keyword is None and a.star == "" for a in updated.args)
        if not has_data_input and "batch_size" not in keywords and env.batch_size is not None:
            args = insert_arg(args, _first_keyword(args), kwarg("batch_size", env.batch_size))
        if "rng" not in keywords:
            args = append_arg(args, kwarg("rng", env.rng))
        return updated.with_changes(args=args)

    def edit(self, ctx: FileContext, original: cst.Call, new: cst.Call) -> Edit:
        """Only the arguments: DM101 renames the operator by its own fix."""
        indents = ctx.indents(original)
        full, func = ctx.render(new, indents), ctx.render(new.func, indents)
        if not full.startswith(func):
            return ctx.expr_edit(original, new)
        end = ctx.positions[original.func].end
        start = ctx.lines.offset(end.line, end.column)
        close = ctx.positions[original].end
        return Edit(start, ctx.lines.offset(close.line, close.column), full[len(func) :])


def migrates_outside(ctx: FileContext, call: cst.Call) -> bool:
    """A random operator outside a migrated pipeline that DM104 completes (DM101 renames it)."""
    keywords = {a.keyword.value for a in call.args if a.keyword is not None}
    if "seed" in keywords:
        return False
    has_data_input = any(a.keyword is None for a in call.args)
    return has_data_input or "batch_size" in keywords or _data_parameter(ctx, call) is not None


def _outside(
    ctx: FileContext, rule: str, original: cst.Call, updated: cst.Call
) -> cst.Call | Diagnostic | None:
    """A random operator in a helper, which runs eagerly once its file is migrated: it draws from
    ndd's default RNG, and takes the batch size of its data input, else of the data the
    function is given."""
    name = ctx.text(original.func)
    keywords = {a.keyword.value for a in updated.args if a.keyword is not None}
    if "seed" in keywords:
        return ctx.todo(
            rule,
            original,
            f"random operator {name} with seed= outside a migrated pipeline: dynamic mode takes "
            "no seed=; make one ndd.random.RNG(seed=...) once, where the data is read, and pass "
            "it as rng=",
        )
    has_data_input = any(a.keyword is None for a in updated.args)
    if has_data_input or "batch_size" in keywords:
        return None  # complete as it is: DM101 renames it
    data = _data_parameter(ctx, original)
    if data is None:
        return ctx.todo(
            rule,
            original,
            f"random operator {name} outside a migrated pipeline, with no data input: pass it "
            "batch_size= (of the data its values go with); it draws from ndd's default RNG "
            "(ndd.random.set_seed), or from an rng= you pass",
        )
    size = kwarg("batch_size", cst.Attribute(cst.Name(data), cst.Name("batch_size")))
    args = list(updated.args)
    return updated.with_changes(args=insert_arg(args, _first_keyword(args), size))


def _data_parameter(ctx: FileContext, call: cst.Call) -> str | None:
    """The parameter of the function around ``call`` that is the data input of a DALI operator
    there (``images`` in ``def random_flip(images): ... fn.flip(images, ...)``), or None."""
    fn = ctx.parents.get(call)
    while fn is not None and not isinstance(fn, (cst.FunctionDef, cst.Lambda, cst.Module)):
        fn = ctx.parents.get(fn)
    if not isinstance(fn, cst.FunctionDef):
        return None
    params = {p.name.value for p in (*fn.params.posonly_params, *fn.params.params)}
    params -= {"self", "cls"}
    stack: list[cst.CSTNode] = [fn.body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Call) and ctx.fn_op(node.func) is not None and node.args:
            arg = node.args[0]
            first = arg.value if arg.keyword is None and not arg.star else None
            moved = isinstance(first, cst.Call) and isinstance(first.func, cst.Attribute)
            if moved and first.func.attr.value == "gpu":  # type: ignore[union-attr]
                first = first.func.value  # type: ignore[union-attr]  # images.gpu()
            if isinstance(first, cst.Name) and first.value in params:
                return first.value
        if isinstance(node, cst.BinaryOperation):  # images * mask, mask a node
            for one, other in ((node.left, node.right), (node.right, node.left)):
                if (
                    isinstance(one, cst.Name)
                    and one.value in params
                    and produces_node(ctx, other, collect_nodes(ctx, fn))
                ):
                    return one.value
        if not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            stack.extend(reversed(children(node)))
    return None


def _first_keyword(args: list[cst.Arg]) -> int:
    for i, a in enumerate(args):
        if a.keyword is not None or a.star:
            return i
    return len(args)
