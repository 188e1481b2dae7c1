"""``verify(old, new)``: run every pipeline of OLD against its counterpart in NEW and compare.

The mapping, for code dali-migrate produced: the pipeline ``f`` of OLD (a ``@pipeline_def``
function or a ``Pipeline`` subclass) corresponds to the object of the same name in NEW, called
with the same arguments (pipeline construction arguments such as ``num_threads`` are passed
only where the new callable accepts them). Whatever it returns is pulled batch after batch: a
generator or iterator, an iterable (iterated again at its end, epoch after epoch), a
``Pipeline`` (``run()``), or a callable. For any other migration an adapter says how to build
each side (:mod:`dali_migrate.harness.adapters`).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import discover as _discover
from .compare import Comparison, Tolerances, compare_runs
from .datasets import Dataset, make_dataset, spec_for_reader
from .lower import lower_to_cpu, strip_entry_points
from .runner import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S, run_side

__all__ = ["PipelineReport", "VerifyReport", "has_gpu", "verify", "verify_code"]

VERDICTS = ("match", "mismatch", "error", "skipped")
#: pipeline-construction arguments (they go to ``Pipeline``, not to the definition function)
from .side import PIPELINE_KWARGS  # noqa: E402  (side imports nothing heavy at module level)


@dataclass
class PipelineReport:
    name: str
    verdict: str
    reason: str = ""
    side: str | None = None  # for errors: "old", "new", "both" or "harness"
    comparison: Comparison | None = None
    rng: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    iterations: int = 0
    arguments: dict[str, Any] = field(default_factory=dict)
    random_ops: int = 0
    seconds: float = 0.0
    traceback: str = ""
    #: ``--bench``: {"old": batches/s, "new": batches/s, "ratio": new/old} (a match only)
    bench: dict[str, float] | None = None

    def to_dict(self) -> dict:
        return {
            "pipeline": self.name,
            "verdict": self.verdict,
            "reason": self.reason,
            "side": self.side,
            "iterations": self.iterations,
            "random_ops": self.random_ops,
            "arguments": {k: repr(v) if not isinstance(v, (int, float, str, bool, type(None))) else v
                          for k, v in self.arguments.items()},
            "comparison": self.comparison.to_dict() if self.comparison else None,
            "rng": self.rng,
            "notes": self.notes,
            "seconds": round(self.seconds, 2),
            **({"bench": self.bench} if self.bench else {}),
        }

    def summary(self) -> str:
        """One line: why this verdict."""
        if self.verdict == "match":
            c = self.comparison
            return f"{c.samples_compared} samples in {c.iterations} iterations identical" if c else "match"
        if self.verdict in ("skipped", "error"):
            return f"{self.side} side: {self.reason}" if self.verdict == "error" and self.side else self.reason
        parts = []
        if self.rng:
            parts.append(self.rng[0])
        c = self.comparison
        if c and c.first:
            f = c.first
            where = f"iteration {f.iteration}"
            if f.output >= 0:
                where += f", output {f.output}"
            if f.sample is not None:
                where += f", sample {f.sample}"
            if f.index is not None:
                where += f", index {tuple(f.index)}"
            text = f"{where}: {f.message}"
            if f.what == "values":
                text += f" (old {f.old_value!r}, new {f.new_value!r}; max abs err {c.max_abs_err:.3g}, max rel err {c.max_rel_err:.3g})"
            text += f"; {c.samples_differing} of {c.samples_compared} samples differ"
            parts.append(text)
        return "; ".join(parts) or self.reason


@dataclass
class VerifyReport:
    old: str
    new: str
    device: str
    lowered: bool
    lowering: list[str] = field(default_factory=list)
    pipelines: list[PipelineReport] = field(default_factory=list)
    dali_version: str = ""

    @property
    def exit_code(self) -> int:
        """0: every verified pipeline matched and at least one was verified; 1 otherwise."""
        if any(p.verdict in ("mismatch", "error") for p in self.pipelines):
            return 1
        return 0 if any(p.verdict == "match" for p in self.pipelines) else 1

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def verdict(self, name: str | None = None) -> str:
        reports = [p for p in self.pipelines if name is None or p.name == name]
        for v in ("error", "mismatch", "skipped", "match"):
            if any(p.verdict == v for p in reports):
                return v
        return "skipped"

    def to_dict(self) -> dict:
        return {
            "old": self.old,
            "new": self.new,
            "device": self.device,
            "lowered_to_cpu": self.lowered,
            "lowering": self.lowering,
            "pipelines": [p.to_dict() for p in self.pipelines],
            "exit_code": self.exit_code,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)


def has_gpu() -> bool:
    """Whether an NVIDIA GPU is visible (without importing CUDA or DALI)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    if Path("/proc/driver/nvidia/gpus").is_dir() and any(Path("/proc/driver/nvidia/gpus").iterdir()):
        return True
    return Path("/dev/nvidia0").exists()


# -- inputs ------------------------------------------------------------------------------------


class _Skip(Exception):
    pass


class _Data:
    """Synthetic datasets, made on demand and shared within one verify() (or a cache dir)."""

    def __init__(self, root: Path, samples: int, image_format: str) -> None:
        self.root, self.samples, self.image_format = root, samples, image_format
        self._made: dict[str, Dataset] = {}

    def for_reader(self, reader: _discover.ReaderUse, audio: bool) -> Dataset:
        spec = spec_for_reader(reader.kind, self.samples, audio=audio, image_format=self.image_format)
        if spec is None:
            raise _Skip(f"no synthetic data for readers.{reader.kind} (line {reader.line}); pass the data with --kwargs")
        key = hashlib.sha1(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]
        if key not in self._made:
            target = self.root / f"{spec['kind']}-{key}"
            done = target / ".complete"
            if not done.exists():
                if target.exists():
                    shutil.rmtree(target)
                ds = make_dataset(spec, target)
                (target / ".dataset.json").write_text(json.dumps({"spec": spec, "paths": ds.paths, "count": ds.count}))
                done.touch()
            meta = json.loads((target / ".dataset.json").read_text())
            self._made[key] = Dataset(spec["kind"], target, meta["paths"], meta["count"])
        return self._made[key]


#: reader arguments that name one file, and the suffixes such a file has in a dataset folder
_FILE_ARGUMENTS = {"path": (".tfrecord", ".rec", ".tfr"), "index_path": (".idx", ".index"),
                   "annotations_file": (".json",), "file_list": (".txt", ".lst")}


def _user_data_for(data_path: str, argument: str) -> str:
    """The path ``--data`` gives a reader argument: the path itself, or, for an argument that
    names one file (``path``, ``index_path``, ...) when ``--data`` is a folder, the one file in it
    with a fitting suffix (the folder itself when there is none or several)."""
    folder = Path(data_path)
    suffixes = _FILE_ARGUMENTS.get(argument)
    if suffixes and folder.is_dir():
        found = [f for f in sorted(folder.iterdir()) if f.is_file() and f.suffix in suffixes]
        if len(found) == 1:
            return str(found[0])
    return data_path


def _arguments(info: _discover.PipelineInfo, user: dict, data: _Data, device: str, data_path: str | None = None) -> tuple[dict, dict, list[str]]:
    """(function kwargs, pipeline kwargs, notes) for one pipeline."""
    notes: list[str] = []
    values: dict[str, Any] = {}
    site = info.call_site
    if site is not None:
        values.update(site.values)
    data_params = info.data_params
    for param, reader in data_params.items():
        if param in user:
            continue
        if data_path is not None:
            argument = next(a for a, p in reader.bound.items() if p == param)
            values[param] = _user_data_for(data_path, argument)
            continue
        ds = data.for_reader(reader, info.uses_audio)
        argument = next(a for a, p in reader.bound.items() if p == param)
        values[param] = ds.for_argument(argument)
        notes.append(f"{param}: synthetic {ds.kind} data, {ds.count} samples ({ds.root})")
    values.update(user)
    missing = [p for p in info.required if p not in values]
    if missing:
        opaque = [p for p in missing if site and p in site.opaque]
        why = " (not a literal where OLD calls it)" if opaque else ""
        raise _Skip(f"no value for {', '.join(missing)}{why}; pass it with --kwargs")
    if info.kind == "pipeline_def":
        fn_kwargs = {k: v for k, v in values.items() if k in info.params or k not in PIPELINE_KWARGS}
        pipe_kwargs = {k: v for k, v in values.items() if k in PIPELINE_KWARGS and k not in info.params}
    else:
        fn_kwargs, pipe_kwargs = values, {}
    if device == "cpu":
        for d in (fn_kwargs, pipe_kwargs):
            if d.get("device_id") is not None:
                d["device_id"] = None
    return fn_kwargs, pipe_kwargs, notes


# -- running -----------------------------------------------------------------------------------


def _replay_from(new: dict) -> dict:
    draws = [[list(w) for _, w in it] for it in new["draws"]]
    groups = list(new.get("capture_draws") or [])
    if groups:  # capture mode draws states ahead, a group per iteration: give them to the iterations in order
        for i, it in enumerate(draws):
            if not it and groups:
                draws[i] = [list(w) for _, w in groups.pop(0)]
    return {"draws": draws, "readers": new["readers"]}


def _rng_problems(old: dict, new: dict, replay: dict) -> list[str]:
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
                f"iteration {i}: random states drawn in a different order: old pipeline {_short(ops)}, new code {_short(names)}"
            )
    return problems


def _short(ops: list[str]) -> str:
    return "[" + ", ".join(o.replace("__", ".") for o in ops) + "]"


def _reader_notes(old: dict, new: dict) -> list[str]:
    notes = []
    o, n = old.get("readers") or [], new.get("readers") or []
    if len(o) != len(n):
        notes.append(f"the new code built {len(n)} reader(s), the old pipeline {len(o)}")
    for k, r in enumerate(o):
        if r.get("seed") is not None and r.get("seed_used") is not None and r["seed"] != r["seed_used"]:
            notes.append(
                f"reader {k} ({r['op'].replace('__', '.')}): seed {r['seed']} of OLD replaced by the new code's {r['seed_used']} to align the shuffles"
            )
    return notes


def _cache_key(*parts: Any) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(pickle.dumps(p, protocol=4))
    return h.hexdigest()[:24]


def _verify_one(name: str, kind: str, fn_kwargs: dict, pipe_kwargs: dict, *, paths: dict, sys_path: list[str],
                device: str, iterations: int | None, max_iterations: int, timeout: float, memory_mb: int,
                tolerances: Tolerances, work: Path, cache_dir: Path | None, iterator: dict | None = None,
                bench: int = 0) -> PipelineReport:
    started = time.monotonic()
    report = PipelineReport(name, "match", arguments={**fn_kwargs, **pipe_kwargs})
    base = {"name": name, "iterator": iterator, "kwargs": fn_kwargs, "pipe_kwargs": pipe_kwargs, "sys_path": sys_path,
            "adapter": paths.get("adapter"), "max_iterations": max_iterations, "device": device}
    new = run_side({**base, "role": "new", "module": paths["new"], "iterations": iterations}, work / "new",
                   timeout=timeout, memory_mb=memory_mb, device=device)
    report.notes.extend(new.get("notes") or [])
    replay = None if new.get("mode") == "pipeline" else _replay_from(new)
    n_old = len(new["iterations"]) if new["ok"] else max(1, len(new["iterations"]) + 1)
    if iterations is not None:
        n_old = iterations
    old_spec = {**base, "role": "old", "module": paths["old"], "iterations": n_old, "replay": replay}
    old = None
    key = None
    if cache_dir is not None:
        key = _cache_key(Path(paths["old"]).read_bytes(), Path(paths["adapter"]).read_bytes() if paths.get("adapter") else b"",
                         name, fn_kwargs, pipe_kwargs, n_old, replay, device, iterator)
        cached = cache_dir / f"old-{key}.pkl"
        if cached.exists():
            with open(cached, "rb") as f:
                old = pickle.load(f)
    if old is None:
        old = run_side(old_spec, work / "old", timeout=timeout, memory_mb=memory_mb, device=device)
        if cache_dir is not None and old["ok"]:
            cache_dir.mkdir(parents=True, exist_ok=True)
            tmp = cache_dir / f"old-{key}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                pickle.dump(old, f, protocol=pickle.HIGHEST_PROTOCOL)
            tmp.replace(cache_dir / f"old-{key}.pkl")
    report.notes.extend(n for n in old.get("notes") or [] if n not in report.notes)
    report.random_ops = len(old.get("random_ops") or [])
    report.iterations = min(len(old["iterations"]), len(new["iterations"]))
    report.seconds = time.monotonic() - started

    errors = [(side, r["error"]) for side, r in (("old", old), ("new", new)) if r.get("error")]
    if errors:
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
        return report

    if replay is not None:
        report.rng = _rng_problems(old, new, replay)
        report.notes.extend(_reader_notes(old, new))
    if new.get("ended_early") is not None:
        report.notes.append(f"the new code stopped after {new['ended_early']} batches")
    report.comparison = compare_runs(old["iterations"], new["iterations"], tolerances)
    if report.rng or not report.comparison.equal:
        report.verdict = "mismatch"
    if bench and report.verdict == "match" and iterator is None:
        report.bench = _bench(base, paths, bench, work, timeout=timeout, memory_mb=memory_mb, device=device, notes=report.notes)
    return report


def _bench(base: dict, paths: dict, batches: int, work: Path, *, timeout: float, memory_mb: int, device: str,
           notes: list[str]) -> dict[str, float] | None:
    """Throughput of both sides on the same arguments, each in a fresh subprocess."""
    rates = {}
    for role in ("old", "new"):
        spec = {**base, "role": role, "module": paths[role], "bench": batches}
        out = run_side(spec, work / f"bench-{role}", timeout=timeout, memory_mb=memory_mb, device=device)
        if not out.get("ok") or "bench" not in out:
            err = out.get("error") or {}
            notes.append(f"--bench: the {role} side failed: {err.get('type', '?')}: {err.get('message', '')}")
            return None
        rates[role] = out["bench"]["batches_per_s"]
    return {"old": round(rates["old"], 2), "new": round(rates["new"], 2), "ratio": round(rates["new"] / rates["old"], 3)}


def verify_code(old_code: str, new_code: str, *, old_name: str = "old.py", new_name: str = "new.py",
                base_dir: str | Path | None = None, **options) -> VerifyReport:
    """:func:`verify` for two sources in memory (``base_dir``: where their imports resolve)."""
    with tempfile.TemporaryDirectory(prefix="dali-verify-src-") as tmp:
        old_path, new_path = Path(tmp) / "old" / old_name, Path(tmp) / "new" / new_name
        for p, code in ((old_path, old_code), (new_path, new_code)):
            p.parent.mkdir()
            p.write_text(code, encoding="utf-8")
        extra = [str(base_dir)] if base_dir else []
        return verify(old_path, new_path, extra_sys_path=extra, **options)


def verify(
    old: str | os.PathLike,
    new: str | os.PathLike,
    *,
    pipeline: str | None = None,
    kwargs: dict | None = None,
    iterations: int | None = None,
    max_iterations: int = 50,
    device: str = "auto",
    atol: Any = None,
    rtol: Any = None,
    samples: int = 8,
    image_format: str = "jpeg",
    adapter: str | os.PathLike | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    memory_mb: int = DEFAULT_MEMORY_MB,
    workdir: str | os.PathLike | None = None,
    data: str | os.PathLike | None = None,
    data_dir: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    extra_sys_path: list[str] | None = None,
    bench: int = 0,
) -> VerifyReport:
    """Verify that NEW computes what OLD computes, pipeline by pipeline (see the module docstring).

    ``kwargs``: arguments of the pipelines (missing data arguments get synthetic datasets of
    ``samples`` samples, or ``data``: one path for every data argument; for a folder, file
    arguments such as ``path``/``index_path`` get its one ``.tfrecord``/``.idx`` file); ``iterations``: batches compared (default: one past the first epoch
    boundary of the new code's readers, at most ``max_iterations``); ``device``: ``auto``,
    ``cpu`` (both sides lowered to CPU) or ``gpu`` (as written); ``atol``/``rtol``: see
    :mod:`.compare`; ``adapter``: a Python file that says how to build both sides
    (:mod:`.adapters`); ``timeout``/``memory_mb``: per side; ``workdir``: keep the copies,
    specs and results there (default: a temporary directory, removed); ``data_dir``/``cache_dir``:
    reuse synthetic datasets / old-side results between calls.
    """
    if device not in ("auto", "cpu", "gpu"):
        raise ValueError(f"device must be auto, cpu or gpu, not {device!r}")
    resolved = ("gpu" if has_gpu() else "cpu") if device == "auto" else device
    tolerances = Tolerances.parse(atol, rtol)
    old_path, new_path = Path(old).resolve(), Path(new).resolve()
    old_code = old_path.read_text(encoding="utf-8")
    new_code = new_path.read_text(encoding="utf-8")
    adapter_path = Path(adapter).resolve() if adapter else None

    own_tmp = workdir is None
    work = Path(tempfile.mkdtemp(prefix="dali-verify-")) if own_tmp else Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    try:
        lowering: list[str] = []
        copies = {}
        sources = {"old": old_code, "new": new_code}
        if adapter_path:
            sources["adapter"] = adapter_path.read_text(encoding="utf-8")
        for role, code in sources.items():
            if resolved == "cpu":
                lowered = lower_to_cpu(code)
                code = lowered.code
                lowering.extend(f"{role}: {c}" for c in lowered.changes)
            if role != "adapter":
                code = strip_entry_points(code)
            target = work / "src" / f"{role}.py"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(code, encoding="utf-8")
            copies[role] = str(target)
        sys_path = [str(old_path.parent), str(new_path.parent)] + ([str(adapter_path.parent)] if adapter_path else [])
        sys_path += list(extra_sys_path or [])
        report = VerifyReport(str(old), str(new), resolved, resolved == "cpu" and bool(lowering), lowering)
        data_path = str(data) if data is not None else None
        data = _Data(Path(data_dir) if data_dir else work / "data", samples, image_format)
        user = dict(kwargs or {})
        options = dict(sys_path=sys_path, device=resolved, iterations=iterations, max_iterations=max_iterations,
                       timeout=timeout, memory_mb=memory_mb, tolerances=tolerances,
                       cache_dir=Path(cache_dir) if cache_dir else None, bench=bench)

        try:
            infos = _discover.discover(old_code)
        except SyntaxError as e:
            report.pipelines.append(PipelineReport("(module)", "error", f"OLD does not parse: {e}", side="old"))
            return report

        if adapter_path:
            from .adapters import load_adapter_info

            info = load_adapter_info(sources["adapter"], adapter_path.stem)
            fn_kwargs = dict(info.kwargs)
            try:
                if data_path is not None and "data_dir" not in user:
                    fn_kwargs["data_dir"] = data_path
                elif not any(k in user or k in fn_kwargs for k in ("data_dir",)):
                    readers = [r for i in infos for r in i.readers]
                    if readers:
                        audio = any(i.uses_audio for i in infos)
                        fn_kwargs["data_dir"] = data.for_reader(readers[0], audio).for_argument("file_root")
                fn_kwargs.update(user)
            except _Skip as e:
                report.pipelines.append(PipelineReport(info.name, "skipped", str(e)))
                return report
            report.pipelines.append(
                _verify_one(info.name, "adapter", fn_kwargs, {}, paths=copies, work=work / info.name, **options)
            )
            return report

        if pipeline is not None:
            chosen = [i for i in infos if i.name == pipeline]
            if not chosen:
                names = ", ".join(i.name for i in infos) or "none"
                raise ValueError(f"OLD has no pipeline {pipeline!r} (pipelines found: {names})")
            infos = chosen
        if not infos:
            lines = _discover.inline_pipelines(old_code)
            why = (f"OLD builds its pipeline inline (line {lines[0]}), not in a @pipeline_def function or a"
                   " Pipeline subclass the harness can call; write an adapter (--adapter)") if lines else \
                "OLD defines no pipeline (@pipeline_def function or Pipeline subclass)"
            report.pipelines.append(PipelineReport("(inline)", "skipped", why))
            return report
        new_names = _defined_names(new_code)
        for info in infos:
            if info.kind == "base_class":
                report.pipelines.append(PipelineReport(
                    info.name, "skipped", f"a base class; verified through {', '.join(info.derived)}"))
                continue
            if info.kind == "method":
                report.pipelines.append(PipelineReport(
                    info.name, "skipped", "a @pipeline_def method: the harness cannot build its object; use an adapter"))
                continue
            if new_names is not None and info.name not in new_names:
                report.pipelines.append(PipelineReport(info.name, "skipped", f"NEW defines no `{info.name}`; use an adapter"))
                continue
            try:
                fn_kwargs, pipe_kwargs, notes = _arguments(info, user, data, resolved, data_path)
            except _Skip as e:
                report.pipelines.append(PipelineReport(info.name, "skipped", str(e)))
                continue
            r = _verify_one(info.name, info.kind, fn_kwargs, pipe_kwargs, paths=copies, work=work / info.name,
                            iterator=info.iterator, **options)
            r.notes[:0] = notes
            report.pipelines.append(r)
        return report
    finally:
        if own_tmp:
            shutil.rmtree(work, ignore_errors=True)


def _defined_names(code: str) -> set[str] | None:
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(t, ast.Name):
                    names.add(t.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                names.add((a.asname or a.name).split(".")[0])
    return names
