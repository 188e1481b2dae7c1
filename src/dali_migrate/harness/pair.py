"""One pipeline verified: NEW runs first (it decides how many batches to compare and draws the
random states), then OLD replays NEW's random states, each side in its own subprocess; the
outputs are compared batch by batch. OLD's results can be cached between calls."""

from __future__ import annotations

import hashlib
import os
import pickle
import time
from pathlib import Path
from typing import Any

from .compare import Tolerances, compare_runs
from .replay import reader_notes, replay_from, rng_problems
from .reports import PipelineReport
from .runner import run_side

__all__ = ["verify_pair"]


def verify_pair(
    name: str,
    kind: str,
    fn_kwargs: dict,
    pipe_kwargs: dict,
    *,
    paths: dict,
    sys_path: list[str],
    device: str,
    iterations: int | None,
    max_iterations: int,
    timeout: float,
    memory_mb: int,
    tolerances: Tolerances,
    work: Path,
    cache_dir: Path | None,
    iterator: dict | None = None,
    bench: int = 0,
) -> PipelineReport:
    """The verdict on pipeline ``name`` called with these arguments, OLD against NEW (``paths``:
    the prepared copies, by role)."""
    started = time.monotonic()
    report = PipelineReport(name, "match", arguments={**fn_kwargs, **pipe_kwargs})
    base = {
        "name": name,
        "iterator": iterator,
        "kwargs": fn_kwargs,
        "pipe_kwargs": pipe_kwargs,
        "sys_path": sys_path,
        "adapter": paths.get("adapter"),
        "max_iterations": max_iterations,
        "device": device,
    }
    limits: dict[str, Any] = {"timeout": timeout, "memory_mb": memory_mb, "device": device}
    new = run_side(
        {**base, "role": "new", "module": paths["new"], "iterations": iterations},
        work / "new",
        **limits,
    )
    report.notes.extend(new.get("notes") or [])
    replay = None if new.get("mode") == "pipeline" else replay_from(new)
    n_old = len(new["iterations"]) if new["ok"] else max(1, len(new["iterations"]) + 1)
    if iterations is not None:
        n_old = iterations
    old_spec = {
        **base,
        "role": "old",
        "module": paths["old"],
        "iterations": n_old,
        "replay": replay,
    }
    old = _old_side(old_spec, paths, work / "old", cache_dir, limits)
    report.notes.extend(n for n in old.get("notes") or [] if n not in report.notes)
    report.random_ops = len(old.get("random_ops") or [])
    report.iterations = min(len(old["iterations"]), len(new["iterations"]))
    report.seconds = time.monotonic() - started
    if _side_errors(report, old, new):
        return report
    _judge(report, old, new, replay, tolerances)
    if bench and report.verdict == "match" and iterator is None:
        report.bench = _bench(base, paths, bench, work, notes=report.notes, **limits)
    return report


def _old_side(
    spec: dict, paths: dict, workdir: Path, cache_dir: Path | None, limits: dict[str, Any]
) -> dict:
    """OLD's result: run, or taken from ``cache_dir`` when OLD's code and everything the spec
    gives it are those of a cached successful run."""
    if cache_dir is None:
        return run_side(spec, workdir, **limits)
    key = _cache_key(
        Path(paths["old"]).read_bytes(),
        Path(paths["adapter"]).read_bytes() if paths.get("adapter") else b"",
        spec["name"],
        spec["kwargs"],
        spec["pipe_kwargs"],
        spec["iterations"],
        spec["replay"],
        spec["device"],
        spec["iterator"],
    )
    cached = cache_dir / f"old-{key}.pkl"
    if cached.exists():
        with open(cached, "rb") as f:
            return pickle.load(f)
    old = run_side(spec, workdir, **limits)
    if old["ok"]:
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = cache_dir / f"old-{key}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            pickle.dump(old, f, protocol=pickle.HIGHEST_PROTOCOL)
        tmp.replace(cache_dir / f"old-{key}.pkl")
    return old


def _cache_key(*parts: Any) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(pickle.dumps(p, protocol=4))
    return h.hexdigest()[:24]


def _side_errors(report: PipelineReport, old: dict, new: dict) -> bool:
    """Make ``report`` an error when a side (or the harness) failed; whether one did."""
    errors = [(side, r["error"]) for side, r in (("old", old), ("new", new)) if r.get("error")]
    if not errors:
        return False
    harness = [e for _, e in errors if e.get("harness") or e["type"] == "UnsupportedDali"]
    report.verdict = "error"
    if harness:
        report.side, err = "harness", harness[0]
    elif len(errors) == 2:
        report.side, err = "both", errors[0][1]
        report.notes.append(f"new side: {errors[1][1]['type']}: {errors[1][1]['message']}")
    else:
        report.side, err = errors[0][0], errors[0][1]
    where = f" ({err['phase']})" if err.get("phase") and err["phase"] != "process" else ""
    report.reason = f"{err['type']}: {err['message']}{where}"
    report.traceback = err.get("traceback", "")
    return True


def _judge(
    report: PipelineReport, old: dict, new: dict, replay: dict | None, tolerances: Tolerances
) -> None:
    """Compare the outputs of two runs that finished; a mismatch when they or the draws differ."""
    if replay is not None:
        report.rng = rng_problems(old, new, replay)
        report.notes.extend(reader_notes(old, new))
    if new.get("ended_early") is not None:
        report.notes.append(f"the new code stopped after {new['ended_early']} batches")
    report.comparison = compare_runs(old["iterations"], new["iterations"], tolerances)
    if report.rng or not report.comparison.equal:
        report.verdict = "mismatch"


def _bench(
    base: dict,
    paths: dict,
    batches: int,
    work: Path,
    *,
    timeout: float,
    memory_mb: int,
    device: str,
    notes: list[str],
) -> dict[str, float] | None:
    """Throughput of both sides on the same arguments, each in a fresh subprocess."""
    rates = {}
    for role in ("old", "new"):
        spec = {**base, "role": role, "module": paths[role], "bench": batches}
        out = run_side(
            spec, work / f"bench-{role}", timeout=timeout, memory_mb=memory_mb, device=device
        )
        if not out.get("ok") or "bench" not in out:
            err = out.get("error") or {}
            notes.append(
                f"--bench: the {role} side failed: {err.get('type', '?')}: {err.get('message', '')}"
            )
            return None
        rates[role] = out["bench"]["batches_per_s"]
    return {
        "old": round(rates["old"], 2),
        "new": round(rates["new"], 2),
        "ratio": round(rates["new"] / rates["old"], 3),
    }
