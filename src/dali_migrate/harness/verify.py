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
from typing import Any, TypedDict

from . import discover as _discover
from .compare import Comparison, Tolerances, compare_runs
from .datasets import Dataset, make_dataset, spec_for_reader
from .lower import lower_to_cpu, split_entry_points
from .runner import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S, run_side

__all__ = [
    "InputError",
    "PipelineReport",
    "VerifyDependencyError",
    "VerifyOptions",
    "VerifyReport",
    "check_dependencies",
    "has_gpu",
    "read_source",
    "verify",
    "verify_code",
]

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
            "arguments": {
                k: repr(v) if not isinstance(v, (int, float, str, bool, type(None))) else v
                for k, v in self.arguments.items()
            },
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
            if self.reason or not c:
                return self.reason or "match"
            return f"{c.samples_compared} samples in {c.iterations} iterations identical"
        if self.verdict in ("skipped", "error"):
            return (
                f"{self.side} side: {self.reason}"
                if self.verdict == "error" and self.side
                else self.reason
            )
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
                text += (
                    f" (old {f.old_value!r}, new {f.new_value!r}; max abs err {c.max_abs_err:.3g},"
                    f" max rel err {c.max_rel_err:.3g})"
                )
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
    #: module-level statements of OLD/NEW the harness did not run (they run the program: calls
    #: of its own functions, and what uses their results), as "OLD line 12: main()"
    not_run: list[str] = field(default_factory=list)
    #: "pipelines" (each pipeline against its counterpart) or "program" (whole programs)
    mode: str = "pipelines"

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
            "mode": self.mode,
            "not_run": self.not_run,
            "pipelines": [p.to_dict() for p in self.pipelines],
            "exit_code": self.exit_code,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)


def has_gpu() -> bool:
    """Whether an NVIDIA GPU is visible (without importing CUDA or DALI)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    if Path("/proc/driver/nvidia/gpus").is_dir() and any(
        Path("/proc/driver/nvidia/gpus").iterdir()
    ):
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
        spec = spec_for_reader(
            reader.kind, self.samples, audio=audio, image_format=self.image_format
        )
        if spec is None:
            raise _Skip(
                f"no synthetic data for readers.{reader.kind} (line {reader.line}); pass the data "
                "with --kwargs"
            )
        key = hashlib.sha1(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]
        if key not in self._made:
            target = self.root / f"{spec['kind']}-{key}"
            done = target / ".complete"
            if not done.exists():
                if target.exists():
                    shutil.rmtree(target)
                ds = make_dataset(spec, target)
                (target / ".dataset.json").write_text(
                    json.dumps({"spec": spec, "paths": ds.paths, "count": ds.count})
                )
                done.touch()
            meta = json.loads((target / ".dataset.json").read_text())
            self._made[key] = Dataset(spec["kind"], target, meta["paths"], meta["count"])
        return self._made[key]


#: reader arguments that name one file, and the suffixes such a file has in a dataset folder
_FILE_ARGUMENTS = {
    "path": (".tfrecord", ".rec", ".tfr"),
    "index_path": (".idx", ".index"),
    "annotations_file": (".json",),
    "file_list": (".txt", ".lst"),
}


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


def _from_settings(
    site: _discover.CallSite | None, settings: dict, values: dict, user: dict, notes: list[str]
) -> None:
    """Arguments OLD passes as ``args.NAME`` where it builds the pipeline get the default of its
    command-line option ``--NAME`` (argparse), as a run without options would."""
    if site is None:
        return
    for param in site.opaque:
        if param in values or param in user:
            continue
        expr = site.expressions.get(param, "")
        attr = expr.rpartition(".")[2] if expr.count(".") == 1 else ""
        if attr.isidentifier() and attr in settings:
            values[param] = settings[attr]
            notes.append(
                f"{param}: {settings[attr]!r}, the default of the command-line option "
                f"--{attr.replace('_', '-')} (OLD passes {expr})"
            )


def _missing(names: list[str], site: _discover.CallSite | None) -> _Skip:
    """The skip that names the arguments without a value and the --kwargs that supplies them."""
    exprs = [f"{n} as `{site.expressions[n]}`" for n in names if site and n in site.expressions]
    why = f" (OLD passes {', '.join(exprs)} where it builds the pipeline)" if exprs else ""
    example = json.dumps(dict.fromkeys(names, "VALUE")).replace('"VALUE"', "<value>")
    return _Skip(f"no value for {', '.join(names)}{why}; pass it with --kwargs '{example}'")


def _arguments(
    info: _discover.PipelineInfo,
    user: dict,
    data: _Data,
    device: str,
    data_path: str | None = None,
    settings: dict | None = None,
) -> tuple[dict, dict, list[str]]:
    """(function kwargs, pipeline kwargs, notes) for one pipeline."""
    notes: list[str] = []
    values: dict[str, Any] = {}
    site = info.call_site
    if site is not None:
        values.update(site.values)
    for param, reader in info.data_params.items():
        if param in user:
            continue
        argument = next(a for a, p in reader.bound.items() if p == param)
        if data_path is not None:
            values[param] = _user_data_for(data_path, argument)
            continue
        ds = data.for_reader(reader, info.uses_audio)
        values[param] = ds.for_argument(argument)
        notes.append(f"{param}: synthetic {ds.kind} data, {ds.count} samples ({ds.root})")
    _from_settings(site, settings or {}, values, user, notes)
    values.update(user)
    missing = [p for p in info.required if p not in values]
    given = set(values) | info.decorator_names | set(info.params)
    if info.kind == "pipeline_def" and not {"batch_size", "max_batch_size"} & given:
        missing.append("batch_size")
    if missing:
        raise _missing(missing, site)
    if info.kind == "pipeline_def":
        fn_kwargs = {
            k: v for k, v in values.items() if k in info.params or k not in PIPELINE_KWARGS
        }
        pipe_kwargs = {
            k: v for k, v in values.items() if k in PIPELINE_KWARGS and k not in info.params
        }
    else:
        fn_kwargs, pipe_kwargs = values, {}
    if device == "cpu":
        for d in (fn_kwargs, pipe_kwargs):
            if d.get("device_id") is not None:
                d["device_id"] = None
        if info.decorator_kwargs.get("debug") is True and "debug" not in pipe_kwargs:
            pipe_kwargs["debug"] = False
            notes.append(
                "debug mode off on the CPU (DALI 2.4's debug mode needs CUDA even for CPU "
                "pipelines); the outputs are those of the normal mode"
            )
    return fn_kwargs, pipe_kwargs, notes


# -- running -----------------------------------------------------------------------------------


def _replay_from(new: dict) -> dict:
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
                f"iteration {i}: random states drawn in a different order: old pipeline "
                f"{_short(ops)}, new code {_short(names)}"
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


def _cache_key(*parts: Any) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(pickle.dumps(p, protocol=4))
    return h.hexdigest()[:24]


def _verify_one(
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
    new = run_side(
        {**base, "role": "new", "module": paths["new"], "iterations": iterations},
        work / "new",
        timeout=timeout,
        memory_mb=memory_mb,
        device=device,
    )
    report.notes.extend(new.get("notes") or [])
    replay = None if new.get("mode") == "pipeline" else _replay_from(new)
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
    old = None
    key = None
    if cache_dir is not None:
        key = _cache_key(
            Path(paths["old"]).read_bytes(),
            Path(paths["adapter"]).read_bytes() if paths.get("adapter") else b"",
            name,
            fn_kwargs,
            pipe_kwargs,
            n_old,
            replay,
            device,
            iterator,
        )
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
        report.bench = _bench(
            base,
            paths,
            bench,
            work,
            timeout=timeout,
            memory_mb=memory_mb,
            device=device,
            notes=report.notes,
        )
    return report


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


def verify_code(
    old_code: str,
    new_code: str,
    *,
    old_name: str = "old.py",
    new_name: str = "new.py",
    base_dir: str | Path | None = None,
    **options,
) -> VerifyReport:
    """:func:`verify` for two sources in memory (``base_dir``: where their imports resolve)."""
    with tempfile.TemporaryDirectory(prefix="dali-verify-src-") as tmp:
        old_path, new_path = Path(tmp) / "old" / old_name, Path(tmp) / "new" / new_name
        for p, code in ((old_path, old_code), (new_path, new_code)):
            p.parent.mkdir()
            p.write_text(code, encoding="utf-8")
        extra = [str(base_dir)] if base_dir else []
        options["extra_sys_path"] = [*extra, *(options.get("extra_sys_path") or [])]
        return verify(old_path, new_path, **options)


@dataclass(frozen=True)
class VerifyOptions:
    """The options of :func:`verify` (each is also a keyword argument of it).

    ``kwargs``: arguments of the pipelines (missing data arguments get synthetic datasets of
    ``samples`` samples, or ``data``: one path for every data argument; for a folder, file
    arguments such as ``path``/``index_path`` get its one ``.tfrecord``/``.idx`` file);
    ``iterations``: batches compared (default: one past the first epoch boundary of the new
    code's readers, at most ``max_iterations``); ``device``: ``auto``, ``cpu`` (both sides
    lowered to CPU) or ``gpu`` (as written); ``atol``/``rtol``: see :mod:`.compare`;
    ``adapter``: a Python file that says how to build both sides (:mod:`.adapters`);
    ``timeout``/``memory_mb``: per side; ``workdir``: keep the copies, specs and results there
    (default: a temporary directory, removed); ``data_dir``/``cache_dir``: reuse synthetic
    datasets / old-side results between calls; ``bench``: also time that many batches of each
    side. Relative paths (``data``, and the data arguments in ``kwargs``) are relative to the
    current directory.
    """

    pipeline: str | None = None
    kwargs: dict | None = None
    iterations: int | None = None
    max_iterations: int = 50
    device: str = "auto"
    atol: Any = None
    rtol: Any = None
    samples: int = 8
    image_format: str = "jpeg"
    adapter: str | os.PathLike | None = None
    timeout: float = DEFAULT_TIMEOUT_S
    memory_mb: int = DEFAULT_MEMORY_MB
    workdir: str | os.PathLike | None = None
    data: str | os.PathLike | None = None
    data_dir: str | os.PathLike | None = None
    cache_dir: str | os.PathLike | None = None
    extra_sys_path: list[str] | None = None
    bench: int = 0

    def check(self) -> None:
        """Raise ValueError for an option no run could use."""
        if self.device not in ("auto", "cpu", "gpu"):
            raise ValueError(f"device must be auto, cpu or gpu, not {self.device!r}")
        if not self.timeout or self.timeout <= 0 or self.timeout != self.timeout:
            raise ValueError(f"timeout must be a positive number of seconds, not {self.timeout!r}")
        for name in ("iterations", "max_iterations", "samples"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, not {value!r}")
        if self.memory_mb < 0 or self.bench < 0:
            raise ValueError("memory_mb and bench cannot be negative")


class InputError(ValueError):
    """OLD, NEW or the adapter cannot be used (not a regular file, binary, not Python)."""


class VerifyDependencyError(RuntimeError):
    """The harness needs DALI and numpy (the ``verify`` extra)."""


#: what the harness imports in the processes that run the code, by the module that provides it
_DEPENDENCIES = {"numpy": "numpy", "nvidia.dali": "nvidia-dali"}


def check_dependencies() -> None:
    """Raise :class:`VerifyDependencyError`, with the one line to print, when the ``verify``
    extra is not installed."""
    import importlib.util

    missing = []
    for module, package in _DEPENDENCIES.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(package)
    if missing:
        raise VerifyDependencyError(
            f"verifying needs {' and '.join(missing)}, which are not installed: "
            "pip install 'dali-migrate[verify]' (from a checkout: pip install '.[verify]')"
        )


def read_source(path: str | os.PathLike, role: str) -> str:
    """The text of OLD, NEW or the adapter, or :class:`InputError` saying in one line why it
    cannot be verified (checked before anything runs; a FIFO is never opened)."""
    p = Path(path)
    label = f"{role} {path}"
    if not p.exists():
        raise InputError(f"{label}: no such file")
    if not p.is_file():
        kind = "a folder" if p.is_dir() else "not a regular file"
        raise InputError(f"{label}: {kind} (verify takes Python files; --program takes folders)")
    data = p.read_bytes()
    if b"\0" in data:
        raise InputError(f"{label}: a binary file, not Python source")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"{label}: not UTF-8 text (byte {e.start})") from None
    try:
        compile(text, str(p), "exec", dont_inherit=True)
    except SyntaxError as e:
        where = f"line {e.lineno}" + (f", column {e.offset}" if e.offset else "")
        raise InputError(f"{label}: not valid Python ({where}: {e.msg})") from None
    except (ValueError, RecursionError, MemoryError) as e:
        raise InputError(f"{label}: cannot be compiled ({type(e).__name__})") from None
    return text


def _local_modules(*folders: Path) -> set[str]:
    """Top-level module names that resolve to the program's own files (not libraries)."""
    names = set()
    for folder in folders:
        try:
            entries = list(folder.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.suffix == ".py":
                names.add(entry.stem)
            elif entry.is_dir() and (entry / "__init__.py").exists():
                names.add(entry.name)
    return names


def _prepare(
    role: str,
    code: str,
    resolved: str,
    work: Path,
    local: set[str],
    lowering: list[str],
    not_run: list[str],
) -> str:
    """Write the copy of one side that the subprocesses import; returns its path."""
    try:
        if resolved == "cpu":
            lowered = lower_to_cpu(code)
            code = lowered.code
            lowering.extend(f"{role}: {c}" for c in lowered.changes)
        if role != "adapter":
            code, dropped = split_entry_points(code, local)
            not_run.extend(f"{role.upper()} {d}" for d in dropped)
    except Exception as e:  # libcst cannot parse what CPython compiles: say so, in one line
        raise InputError(
            f"{role.upper()}: cannot be rewritten for the harness "
            f"({type(e).__name__}: {str(e).strip().splitlines()[0][:200]})"
        ) from None
    target = work / "src" / f"{role}.py"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(code, encoding="utf-8")
    return str(target)


def verify(
    old: str | os.PathLike,
    new: str | os.PathLike,
    options: VerifyOptions | None = None,
    **kwargs: Any,
) -> VerifyReport:
    """Verify that NEW computes what OLD computes, pipeline by pipeline (see the module
    docstring). Options: a :class:`VerifyOptions`, or its fields as keyword arguments (both:
    the keywords win). Raises ValueError (:class:`InputError` for OLD/NEW) for inputs no run
    could use and :class:`VerifyDependencyError` without the ``verify`` extra."""
    from dataclasses import replace

    opts = replace(options or VerifyOptions(), **kwargs)
    opts.check()
    check_dependencies()
    resolved = ("gpu" if has_gpu() else "cpu") if opts.device == "auto" else opts.device
    old_path, new_path = Path(old).resolve(), Path(new).resolve()
    sources = {"old": read_source(old, "OLD"), "new": read_source(new, "NEW")}
    adapter_path: Path | None = None
    if opts.adapter:
        adapter_path = Path(opts.adapter).resolve()
        sources["adapter"] = read_source(opts.adapter, "adapter")

    own_tmp = opts.workdir is None
    work = (
        Path(tempfile.mkdtemp(prefix="dali-verify-"))
        if opts.workdir is None
        else Path(opts.workdir)
    )
    work.mkdir(parents=True, exist_ok=True)
    try:
        lowering: list[str] = []
        not_run: list[str] = []
        extra = [Path(p) for p in opts.extra_sys_path or []]
        local = _local_modules(old_path.parent, new_path.parent, *extra)
        copies = {
            role: _prepare(role, code, resolved, work, local, lowering, not_run)
            for role, code in sources.items()
        }
        sys_path = [str(old_path.parent), str(new_path.parent)]
        sys_path += [str(adapter_path.parent)] if adapter_path else []
        sys_path += list(opts.extra_sys_path or [])
        report = VerifyReport(
            str(old),
            str(new),
            resolved,
            resolved == "cpu" and bool(lowering),
            lowering,
            not_run=not_run,
        )
        run = _Run(opts, resolved, copies, sys_path, work)
        if adapter_path:
            report.pipelines.append(run.adapter(sources, adapter_path))
        else:
            report.pipelines.extend(run.pipelines(sources["old"], sources["new"]))
        return report
    finally:
        if own_tmp:
            shutil.rmtree(work, ignore_errors=True)


class _Common(TypedDict):
    """The keyword arguments of :func:`_verify_one` that all pipelines of a run share."""

    sys_path: list[str]
    device: str
    iterations: int | None
    max_iterations: int
    timeout: float
    memory_mb: int
    tolerances: Tolerances
    cache_dir: Path | None
    bench: int


class _Run:
    """One verify() call: the options, the prepared copies, the synthetic data."""

    def __init__(
        self, opts: VerifyOptions, device: str, copies: dict, sys_path: list[str], work: Path
    ) -> None:
        self.opts, self.device, self.copies, self.work = opts, device, copies, work
        self.data_path = str(Path(opts.data).resolve()) if opts.data is not None else None
        root = Path(opts.data_dir) if opts.data_dir else work / "data"
        self.data = _Data(root, opts.samples, opts.image_format)
        self.user = dict(opts.kwargs or {})
        self.common: _Common = {
            "sys_path": sys_path,
            "device": device,
            "iterations": opts.iterations,
            "max_iterations": opts.max_iterations,
            "timeout": opts.timeout,
            "memory_mb": opts.memory_mb,
            "tolerances": Tolerances.parse(opts.atol, opts.rtol),
            "cache_dir": Path(opts.cache_dir) if opts.cache_dir else None,
            "bench": opts.bench,
        }

    def one(
        self, name: str, kind: str, fn_kwargs: dict, pipe_kwargs: dict, iterator: dict | None = None
    ) -> PipelineReport:
        return _verify_one(
            name,
            kind,
            fn_kwargs,
            pipe_kwargs,
            paths=self.copies,
            work=self.work / name,
            iterator=iterator,
            **self.common,
        )

    def adapter(self, sources: dict, adapter_path: Path) -> PipelineReport:
        from .adapters import load_adapter_info

        infos = _discover.discover(sources["old"])
        info = load_adapter_info(sources["adapter"], adapter_path.stem)
        fn_kwargs = dict(info.kwargs)
        user = _absolute_data_kwargs(self.user, {"data_dir"})
        try:
            if self.data_path is not None and "data_dir" not in user:
                fn_kwargs["data_dir"] = self.data_path
            elif "data_dir" not in user and "data_dir" not in fn_kwargs:
                readers = [r for i in infos for r in i.readers]
                if readers:
                    audio = any(i.uses_audio for i in infos)
                    ds = self.data.for_reader(readers[0], audio)
                    fn_kwargs["data_dir"] = ds.for_argument("file_root")
            fn_kwargs.update(user)
        except _Skip as e:
            return PipelineReport(info.name, "skipped", str(e))
        return self.one(info.name, "adapter", fn_kwargs, {})

    def pipelines(self, old_code: str, new_code: str) -> list[PipelineReport]:
        infos = _discover.discover(old_code)
        if self.opts.pipeline is not None:
            chosen = [i for i in infos if i.name == self.opts.pipeline]
            if not chosen:
                names = ", ".join(i.name for i in infos) or "none"
                raise ValueError(
                    f"OLD has no pipeline {self.opts.pipeline!r} (pipelines found: {names})"
                )
            infos = chosen
        if not infos:
            return [_no_pipeline(old_code)]
        new_names = _defined_names(new_code)
        settings = _discover.argparse_defaults(old_code)
        return [self.pipeline(info, new_names, settings) for info in infos]

    def pipeline(
        self, info: _discover.PipelineInfo, new_names: set[str] | None, settings: dict
    ) -> PipelineReport:
        if info.kind == "base_class":
            return PipelineReport(
                info.name, "skipped", f"a base class; verified through {', '.join(info.derived)}"
            )
        if info.kind == "method":
            return PipelineReport(
                info.name,
                "skipped",
                "a @pipeline_def method: the harness cannot build its object; use an adapter",
            )
        if info.fed:
            return PipelineReport(
                info.name,
                "skipped",
                f"its external source {', '.join(info.fed)} is fed by pipe.feed_input(): "
                "verify the whole program (--program)",
            )
        if new_names is not None and info.name not in new_names:
            return PipelineReport(
                info.name, "skipped", f"NEW defines no `{info.name}`; use an adapter"
            )
        try:
            user = _absolute_data_kwargs(self.user, set(info.data_params))
            fn_kwargs, pipe_kwargs, notes = _arguments(
                info, user, self.data, self.device, self.data_path, settings
            )
        except _Skip as e:
            return PipelineReport(info.name, "skipped", str(e))
        report = self.one(info.name, info.kind, fn_kwargs, pipe_kwargs, info.iterator)
        report.notes[:0] = notes
        return report


def _no_pipeline(old_code: str) -> PipelineReport:
    lines = _discover.inline_pipelines(old_code)
    if lines:
        why = (
            f"OLD builds its pipeline inline (line {lines[0]}), not in a @pipeline_def "
            "function or a Pipeline subclass the harness can call; write an adapter "
            "(--adapter), or verify the whole program (--program)"
        )
    else:
        why = "OLD defines no pipeline (@pipeline_def function or Pipeline subclass)"
    return PipelineReport("(inline)", "skipped", why)


def _absolute_data_kwargs(user: dict, data_params: set[str]) -> dict:
    """``kwargs`` with the relative paths given to data arguments made absolute (the sides run
    in other directories)."""
    out = dict(user)
    for name in data_params:
        value = out.get(name)
        if isinstance(value, str) and value and not Path(value).is_absolute():
            out[name] = str(Path(value).resolve())
    return out


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
