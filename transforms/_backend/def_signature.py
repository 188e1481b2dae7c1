"""DM200's generator signature: the keyword-only parameters a ``@pipeline_def`` function gains
(``batch_size``, ``seed``, ``device_id``, with the decorator's values as defaults) and what
``Pipeline.current()`` reads become in it."""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import assigned_names, free_names, fresh_name, names_in, param_names
from .current import self_assignments
from .model import Graph, Instance, Refused

#: a parameter named batch_size without the decorator's batch_size: DALI never sized the batches
UNSET_BATCH_NOTE = (
    "the parameter batch_size took the batch_size= argument (a parameter of the function shadows "
    "the Pipeline's), so DALI built this pipeline without a batch size and build() raised "
    "ValueError; the generator takes batches of the parameter's value"
)


def pipeline_params(
    fn: cst.FunctionDef, dec_kwargs: dict[str, cst.Arg], seed_source: str | None
) -> tuple[list[tuple[str, cst.Arg | None]], str, str | None]:
    """The keyword-only parameters the generator gains (name, default: the decorator's value)
    and the names of its batch size and seed. DALI gives a keyword argument that names a
    parameter of the function to the function only: there the pipeline's value is the
    decorator's, under another name (``pipeline_batch_size``); a ``batch_size`` parameter
    without one is the batch size (DALI had none: see ``UNSET_BATCH_NOTE``)."""
    existing = param_names(fn)
    taken = existing | names_in(fn)
    bs_arg = dec_kwargs.get("batch_size") or dec_kwargs.get("max_batch_size")
    hidden = (free_names(fn.body) | assigned_names(fn.body)) - existing
    for name in ("batch_size", "seed") if seed_source else ("batch_size",):
        if name in hidden:  # (the body reads a module's `batch_size`, say)
            raise Refused(
                f"the code of the pipeline uses `{name}`, a name from outside the function (or "
                f"one it binds), which the generator's {name} parameter would hide: rename it "
                "there and migrate again"
            )
    new: list[tuple[str, cst.Arg | None]] = []
    if "batch_size" not in existing:
        batch = "batch_size"
        new.append((batch, bs_arg))
    elif bs_arg is not None:
        batch = fresh_name("pipeline_batch_size", taken)
        new.append((batch, bs_arg))
    else:
        batch = "batch_size"
    seed = None
    if seed_source:
        seed = fresh_name("pipeline_seed", taken) if "seed" in existing else "seed"
        new.append((seed, dec_kwargs.get("seed")))
    return new, batch, seed


def device_param(
    fn: cst.FunctionDef,
    dec_kwargs: dict[str, cst.Arg],
    instances: list[Instance],
    loader: Instance | None,
    *,
    shadowed: bool = True,
) -> cst.Arg | None:
    """The default of the ``device_id`` parameter the generator takes when the pipeline runs on a
    GPU some call names (not 0 or None: those need nothing): the decorator's value, else None (the
    current device, as the pipeline's default). None where the function cannot take it: a name
    ``device_id`` of its own (DALI gave the argument to the function, not the pipeline), or a
    tf.data generator (run on TensorFlow's threads). ``shadowed=False``: the name device_id
    in the body is the pipeline's (``device_id = Pipeline.current().device_id``), which the
    parameter now is."""
    if not any(inst.device_todo for inst in instances):
        return None
    if "device_id" in param_names(fn) | (free_names(fn.body) if shadowed else set()):
        return None
    if loader is not None and loader.iterators[0].framework == "tf":
        return None
    given = dec_kwargs.get("device_id")
    return cst.Arg(given.value if given is not None else cst.Name("None"))


def current_device(
    ctx: FileContext, fn: cst.FunctionDef, graph: Graph, dec_kwargs: dict[str, cst.Arg]
) -> cst.Arg:
    """The default of the ``device_id`` parameter that ``Pipeline.current().device_id`` reads:
    the decorator's, else None (what the Pipeline holds when no device_id is given). Refused
    where the function binds the name itself (DALI gives such an argument to the function),
    other than by ``device_id = Pipeline.current().device_id``, which goes."""
    drops = self_assignments(graph.current, {"device_id": cst.Name("device_id")}, ctx)
    kept = [s for s in fn.body.body if not any(s is d for d in drops)]
    if "device_id" in param_names(fn) | set().union(*(assigned_names(s) for s in kept)):
        raise Refused(
            "`Pipeline.current().device_id` is read where the function has a name device_id "
            "of its own"
        )
    given = dec_kwargs.get("device_id")
    return cst.Arg(given.value if given is not None else cst.Name("None"))


def current_values(
    graph: Graph,
    dec_kwargs: dict[str, cst.Arg],
    instances: list[Instance],
    batch_name: str,
    seed_name: str | None,
) -> dict[str, cst.BaseExpression]:
    """What ``Pipeline.current().<attr>`` is in the generator: the batch size and seed
    parameters (no seed given: None, as the Pipeline holds), the ``device_id`` parameter, and
    the decorator's thread count where it is a number no call overrides."""
    if not graph.current.reads:
        return {}
    values: dict[str, cst.BaseExpression] = {
        "batch_size": cst.Name(batch_name),
        "max_batch_size": cst.Name(batch_name),
        "seed": cst.Name(seed_name or "None"),
        "device_id": cst.Name("device_id"),
    }
    threads = dec_kwargs.get("num_threads")
    if (
        threads is not None
        and isinstance(threads.value, cst.Integer)
        and not any("num_threads" in i.kwargs for i in instances)
    ):
        values["num_threads"] = threads.value
    return values
