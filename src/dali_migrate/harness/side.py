"""One side of a differential run, executed in its own subprocess:
``python -m dali_migrate.harness.side SPEC.pkl``.

The parent (:mod:`dali_migrate.harness.runner`) writes a spec (pickle) and reads back
``result.pkl`` from the spec's ``out`` directory. This module imports DALI; nothing else in the
package does at import time.

* role ``new``: the dynamic-mode side. :mod:`.rng` wraps ``ndd.random._draw_state`` (and
  ``RNG.advance``) so every random call's 7-word state is recorded, and the ndd readers'
  constructors so their ``seed=`` is recorded. Then it pulls batches from the new code.
* role ``old``: the pipeline-mode side. :mod:`.rng` wraps the random operators and readers of
  ``nvidia.dali.ops`` (which ``fn.*`` goes through) so each random operator gets the recorded
  states through ``fn.external_source`` as ``_random_state``, and each reader the recorded seed.
"""

from __future__ import annotations

import importlib.util
import inspect
import math
import pickle
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

#: pipeline construction arguments (the rest of a call's keywords are the function's own); the
#: list repeats dali_api's because program sides load this file by path, outside the package
PIPELINE_KWARGS = frozenset(
    {
        "batch_size",
        "num_threads",
        "device_id",
        "seed",
        "exec_pipelined",
        "prefetch_queue_depth",
        "exec_async",
        "bytes_per_sample",
        "set_affinity",
        "max_streams",
        "default_cuda_stream_priority",
        "enable_memory_stats",
        "enable_checkpointing",
        "py_num_workers",
        "py_start_method",
        "py_callback_pickler",
        "output_dtype",
        "output_ndim",
        "enable_conditionals",
        "exec_dynamic",
        "experimental_exec_dynamic",
        "debug",
    }
)


class SideError(Exception):
    """An error of the harness itself on this side (not of the code under test)."""


def load_module(path: str, name: str, sys_path: list[str]):
    for p in reversed(sys_path):
        if p not in sys.path:
            sys.path.insert(0, p)
    # the module runs as if started without command-line options (argparse gets its defaults)
    sys.argv = [path]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SideError(f"cannot load {path} as a module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# -- outputs -----------------------------------------------------------------------------------


def _np_dtype_name(dtype) -> str:
    import numpy as np

    try:
        return np.dtype(dtype).name
    except TypeError:
        return str(dtype)


def to_output(x) -> dict:
    """One output of one iteration as ``{"container", "layout", "dtype", "samples"}``; samples
    are numpy arrays on the CPU. ``layout`` is None where the container has none (numpy, torch)."""
    import numpy as np

    mod = type(x).__module__ or ""
    name = type(x).__name__
    if mod.startswith("nvidia.dali.experimental.dynamic"):
        import nvidia.dali.experimental.dynamic as ndd

        name = (
            "Batch" if isinstance(x, ndd.Batch) else "Tensor" if isinstance(x, ndd.Tensor) else name
        )
        if name == "Batch":
            b = x.cpu() if x.device.device_type != "cpu" else x
            samples = [np.asarray(t) for t in b.tensors]
            return {
                "container": "dali",
                "layout": b.layout or "",
                "samples": samples,
                "dtype": samples[0].dtype.name if samples else str(b.dtype),
            }
        if name == "Tensor":
            t = x.cpu() if x.device.device_type != "cpu" else x
            arr = np.asarray(t)
            layout = t.layout or ""
            samples = list(arr) if arr.ndim else [arr]
            return {
                "container": "dali",
                "layout": layout[1:] if layout else "",
                "samples": samples,
                "dtype": arr.dtype.name,
            }
    if mod.startswith("nvidia.dali") and name.startswith("TensorList"):
        tl = x.as_cpu() if name == "TensorListGPU" else x
        samples = [np.array(tl[i]) for i in range(len(tl))]
        return {
            "container": "dali",
            "layout": tl.layout() or "",
            "samples": samples,
            "dtype": samples[0].dtype.name if samples else str(tl.dtype),
        }
    if mod.startswith("torch"):
        arr = x.detach().cpu().numpy()
        return {
            "container": "torch",
            "layout": None,
            "samples": list(arr) if arr.ndim else [arr],
            "dtype": arr.dtype.name,
        }
    if isinstance(x, np.ndarray):
        return {
            "container": "numpy",
            "layout": None,
            "samples": list(x) if x.ndim else [x],
            "dtype": x.dtype.name,
        }
    if isinstance(x, (list, tuple)):
        nested = [to_output(s)["samples"] for s in x]
        flat = [s[0] if len(s) == 1 else np.stack(s) for s in nested]
        return {
            "container": "list",
            "layout": None,
            "samples": flat,
            "dtype": flat[0].dtype.name if flat else "",
        }
    arr = np.asarray(x)
    if arr.dtype == object:
        raise TypeError(
            f"an output of type {mod}.{type(x).__qualname__} cannot be compared (not an array or "
            "a DALI batch)"
        )
    return {"container": "scalar", "layout": None, "samples": [arr], "dtype": arr.dtype.name}


def to_outputs(item) -> list[dict]:
    """The outputs of one iteration: a tuple (or list) of outputs as ``pipe.run()`` returns, a
    dict (TFRecord-style, values in order), ``[{name: tensor}]`` as framework iterators yield,
    or a single output."""
    if isinstance(item, list) and len(item) == 1 and isinstance(item[0], dict):
        item = item[0]
    if isinstance(item, dict):
        item = tuple(item.values())
    if not isinstance(item, (tuple, list)):
        item = (item,)
    return [to_output(o) for o in item]


# -- stepping ----------------------------------------------------------------------------------


def _call_with_supported(fn: Callable, kwargs: dict, notes: list[str]) -> Any:
    """Call ``fn(**kwargs)``, leaving out the keyword arguments it does not accept (reported)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn(**kwargs)
    params = sig.parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return fn(**kwargs)
    accepted = {k: v for k, v in kwargs.items() if k in params}
    dropped = sorted(set(kwargs) - set(accepted))
    if dropped:
        notes.append(
            f"new side: {getattr(fn, '__name__', fn)}() does not take {', '.join(dropped)}; not "
            "passed"
        )
    return fn(**accepted)


def _stepper(obj, notes: list[str]):
    """A function returning the next batch of whatever the new code gave: a generator or
    iterator, an iterable (re-iterated at its end, like one epoch after another), a Pipeline
    (run()), or a callable returning a batch. Returns (step, mode)."""
    from nvidia.dali.pipeline import Pipeline

    if isinstance(obj, tuple) and obj and hasattr(obj[-1], "__next__"):
        # ``reader, ckpt, batches()``: a migrated pipeline that returns handles on its reader
        # and state before its batches (transforms/_handles.py)
        notes.append("the new code returned handles before its batches: the batches are compared")
        obj = obj[-1]
    if isinstance(obj, Pipeline):
        obj.build()
        return obj.run, "pipeline"
    if hasattr(obj, "__next__"):
        state: dict[str, Any] = {"epoch": None}

        def step():
            # a generator of epochs (each an iterator of batches), as code that reproduces a
            # framework iterator yields: its batches, epoch after epoch
            while True:
                if state["epoch"] is not None:
                    try:
                        return next(state["epoch"])
                    except StopIteration:
                        state["epoch"] = None
                item = next(obj)
                if _is_epoch(item):
                    state["epoch"] = iter(item)
                    if "new side: yields epochs of batches; compared batch by batch" not in notes:
                        notes.append("new side: yields epochs of batches; compared batch by batch")
                    continue
                return item

        return step, "iterator"
    if hasattr(obj, "__iter__"):
        state = {"it": iter(obj), "fresh": True}

        def step():
            try:
                item = next(state["it"])
            except StopIteration:
                if state["fresh"]:
                    raise
                note = (
                    "new side: the iterable ended an epoch; "
                    "iterated it again (as pipe.run() continues)"
                )
                if note not in notes:
                    notes.append(note)
                state["it"], state["fresh"] = iter(obj), True
                item = next(state["it"])
            state["fresh"] = False
            return item

        return step, "iterable"
    if callable(obj):
        return obj, "callable"
    raise TypeError(
        f"the new code gave a {type(obj).__name__}, which is neither iterable nor callable"
    )


def _is_epoch(item) -> bool:
    import types as pytypes

    return isinstance(item, (pytypes.GeneratorType, map, filter, zip)) or (
        hasattr(item, "__next__")
        and not isinstance(item, (tuple, list, dict))
        and not (type(item).__module__ or "").startswith(("nvidia", "numpy", "torch"))
    )


def _auto_iterations(epoch_batches: int | None, cap: int) -> int:
    if not epoch_batches:
        return min(4, cap)
    return max(2, min(cap, epoch_batches + 2))


# -- the two roles -----------------------------------------------------------------------------


def run_new(spec: dict, result: dict) -> None:
    from . import rng

    recorder = rng.install_recorder()
    notes: list[str] = result["notes"]
    obj = _new_object(spec, notes)
    step, mode = _stepper(obj, notes)
    result["mode"] = mode
    iterations = spec.get("iterations")
    cap = spec.get("max_iterations", 50)
    i = 0
    planned = iterations
    while planned is None or i < planned:
        start = recorder.mark()
        epochs_before = recorder.next_epoch_calls
        result["phase"] = f"iteration {i}"
        try:
            item = step()
        except StopIteration:
            result["ended_early"] = i
            break
        result["draws"].append(recorder.since(start))
        result["iterations"].append(to_outputs(item))
        i += 1
        if iterations is not None or planned is not None:
            continue
        # auto: one batch past the first epoch boundary of the new code's readers: the first
        # batch after the first one for which a reader (the same or a new one) began an epoch
        if i > 1 and recorder.next_epoch_calls > epochs_before:
            planned = min(cap, i + 1)
        elif recorder.epochs_started == 0 and i == 1:
            batch = len(result["iterations"][0][0]["samples"]) if result["iterations"][0] else 0
            epoch = (
                _pipeline_epoch_batches(obj)
                if mode == "pipeline"
                else recorder.epoch_batches(batch)
            )
            planned = _auto_iterations(epoch, cap)
            if epoch and epoch + 2 > cap:
                notes.append(
                    f"an epoch has {epoch} batches, more than the cap of {cap} iterations: "
                    f"compared {cap}"
                )
        if planned is None and i >= cap:
            notes.append(f"no epoch boundary within {cap} iterations: compared {cap}")
            break
    result["readers"] = recorder.readers
    result["capture_draws"] = recorder.capture_groups
    if recorder.capture_groups:
        notes.append(
            "new side used capture=True: its random states were recorded from the capture pipeline"
        )


def _pipeline_epoch_batches(pipe) -> int | None:
    try:
        sizes = pipe.epoch_size()
    except Exception:
        return None
    if not sizes:
        return None
    return math.ceil(max(sizes.values()) / pipe.max_batch_size)


def _new_object(spec: dict, notes: list[str]):
    """What NEW gives for the pipeline: the adapter's ``new_batches`` or the object named like
    OLD's pipeline, called with the same arguments."""
    module = load_module(spec["module"], "_dali_verify_new", spec["sys_path"])
    if spec.get("adapter"):
        adapter = load_module(spec["adapter"], "_dali_verify_adapter", spec["sys_path"])
        return adapter.new_batches(module, **spec["kwargs"])
    target = getattr(module, spec["name"], None)
    if target is None:
        raise SideError(f"NEW defines no `{spec['name']}`")
    return _call_with_supported(target, {**spec["kwargs"], **spec["pipe_kwargs"]}, notes)


def _old_pipeline(spec: dict):
    """OLD's pipeline object (not built): the adapter's ``build_old`` or the pipeline by name."""
    module = load_module(spec["module"], "_dali_verify_old", spec["sys_path"])
    if spec.get("adapter"):
        adapter = load_module(spec["adapter"], "_dali_verify_adapter", spec["sys_path"])
        pipe = adapter.build_old(module, **spec["kwargs"])
    else:
        target = getattr(module, spec["name"], None)
        if target is None:
            raise SideError(f"OLD defines no `{spec['name']}`")
        pipe = target(**spec["kwargs"], **spec["pipe_kwargs"])
    from nvidia.dali.pipeline import Pipeline

    if not isinstance(pipe, Pipeline):
        raise SideError(
            f"`{spec.get('name') or 'build_old'}` gave a {type(pipe).__name__}, not a Pipeline"
        )
    return pipe


def run_old(spec: dict, result: dict) -> None:
    from . import rng

    replay = spec.get("replay")
    replayer = rng.install_replayer(replay) if replay is not None else None
    pipe = _old_pipeline(spec)
    if replayer is not None:
        replayer.batch_size = pipe.max_batch_size
    result["phase"] = "build"
    iterator = spec.get("iterator")
    if iterator is not None:
        run_old_iterator(pipe, iterator, spec, result, replayer)
        return
    pipe.build()
    if replayer is not None:
        result["random_ops"] = replayer.random_ops
        result["readers"] = replayer.readers
    result["mode"] = "pipeline"
    for i in range(spec["iterations"]):
        result["phase"] = f"iteration {i}"
        result["iterations"].append(to_outputs(pipe.run()))


def run_old_iterator(pipe, iterator: dict, spec: dict, result: dict, replayer) -> None:
    """The old pipeline through the framework iterator OLD wrapped it in (same arguments), its
    epochs chained batch by batch (``reset()`` at each end, as a training loop does)."""
    module = importlib.import_module(iterator["module"])
    cls = getattr(module, iterator["class"])

    def value(v):
        if isinstance(v, tuple) and len(v) == 2 and v[0] == "LastBatchPolicy":
            return getattr(module.LastBatchPolicy, v[1])
        return v

    args = [value(v) for v in iterator["args"]]
    kwargs = {k: value(v) for k, v in iterator["kwargs"].items()}
    loader = cls([pipe] if iterator["as_list"] else pipe, *args, **kwargs)
    if replayer is not None:
        result["random_ops"] = replayer.random_ops
        result["readers"] = replayer.readers
    result["mode"] = "iterator"
    result["notes"].append(f"old side: through {iterator['class']}, as OLD uses it")
    i = 0
    fresh = True
    while i < spec["iterations"]:
        result["phase"] = f"iteration {i}"
        try:
            data = next(loader)
        except StopIteration:
            if fresh:
                raise
            loader.reset()
            fresh = True
            continue
        fresh = False
        result["iterations"].append(to_outputs(data))
        i += 1


def run_bench(spec: dict, result: dict) -> None:
    """``verify --bench``: time ``spec["bench"]`` batches of one side (no recording, no replay),
    each consumed the way training does: every output as a torch tensor through DLPack (numpy
    where DLPack is not offered), the CUDA stream synchronised before the next batch."""
    import time

    notes: list[str] = result["notes"]
    result["phase"] = "build"
    if spec["role"] == "old":
        pipe = _old_pipeline(spec)
        pipe.build()
        step = pipe.run
    else:
        step, _ = _stepper(_new_object(spec, notes), notes)
    torch: ModuleType | None
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a test dependency
        torch = None
    gpu = torch is not None and spec.get("device") == "gpu" and torch.cuda.is_available()

    def consume(item) -> None:
        outputs = (
            item
            if isinstance(item, (tuple, list))
            else tuple(item.values())
            if isinstance(item, dict)
            else (item,)
        )
        for x in outputs:
            try:
                if hasattr(x, "torch"):  # an ndd Batch or Tensor
                    x.torch()
                elif hasattr(x, "as_tensor"):  # a pipeline-mode TensorList
                    t = x.as_tensor()
                    torch.from_dlpack(t) if torch is not None and hasattr(
                        t, "__dlpack__"
                    ) else np.asarray(t)
                else:
                    np.asarray(x)
            except Exception:
                pass  # ragged data (no dense tensor): the step has produced it, that is timed
        if gpu and torch is not None:
            torch.cuda.current_stream().synchronize()

    import numpy as np

    total = spec["bench"]
    # as many untimed batches first: capture mode traces its whole first epoch eagerly and builds
    # its graph at the second, which is start-up, not throughput
    warmup = max(2, total)
    stamps = []
    for i in range(warmup + total):
        result["phase"] = f"batch {i}"
        consume(step())
        if i >= warmup - 1:
            stamps.append(time.perf_counter())
    result["bench"] = {"batches": total, "batches_per_s": total / (stamps[-1] - stamps[0])}


def main(argv: list[str]) -> int:
    spec_path = Path(argv[1])
    with open(spec_path, "rb") as f:
        spec = pickle.load(f)
    out = Path(spec["out"])
    result: dict = {
        "ok": False,
        "error": None,
        "iterations": [],
        "draws": [],
        "readers": [],
        "random_ops": [],
        "notes": [],
        "mode": None,
        "phase": "import",
        "ended_early": None,
        "capture_draws": [],
    }
    code = 0
    try:
        if spec.get("bench"):
            run_bench(spec, result)
        else:
            (run_new if spec["role"] == "new" else run_old)(spec, result)
        result["ok"] = True
    except BaseException as e:  # the code under test may raise anything; it becomes a verdict
        result["error"] = {
            "type": type(e).__name__,
            "message": str(e).strip().splitlines()[0][:500] if str(e).strip() else type(e).__name__,
            "traceback": traceback.format_exc()[-6000:],
            "phase": result["phase"],
            "harness": isinstance(e, SideError),
        }
        code = 3
    tmp = out / "result.pkl.tmp"
    with open(tmp, "wb") as f:
        pickle.dump(result, f, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(out / "result.pkl")
    sys.stdout.flush()
    return code


def serve() -> int:
    """A fork server for CPU runs: imports DALI once, then forks one fresh child per job, so a
    side costs a fork instead of a DALI import (seconds). Protocol on stdin/stdout, one line each:
    ``<spec path>\t<memory cap MiB>`` in; ``pid <pid>`` when the child started and
    ``done <pid> <exit code>`` (negative: killed by that signal) out."""
    import os

    import numpy  # noqa: F401  (preload what every side imports)
    import nvidia.dali.experimental.dynamic
    import nvidia.dali.fn
    import nvidia.dali.pipeline  # noqa: F401

    from . import rng  # noqa: F401

    channel = os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    channel.write("ready\n")
    for line in sys.stdin:
        line = line.rstrip("\n")
        if not line:
            continue
        spec_path, _, memory = line.partition("\t")
        pid = os.fork()
        if pid == 0:  # the side
            try:
                os.setpgid(0, 0)
                os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
                workdir = Path(spec_path).parent
                log = os.open(workdir / "output.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(log, 1)
                os.dup2(log, 2)
                os.chdir(workdir)
                if memory and int(memory) > 0:
                    import resource

                    limit = int(memory) * 1024 * 1024
                    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
                code = main(["side", spec_path])
            except BaseException:
                traceback.print_exc()
                code = 4
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
        channel.write(f"pid {pid}\n")
        _, status = os.waitpid(pid, 0)
        channel.write(f"done {pid} {os.waitstatus_to_exitcode(status)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(serve() if sys.argv[1:] == ["--serve"] else main(sys.argv))
