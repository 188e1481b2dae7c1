"""``verify(old, new)``: run every pipeline of OLD against its counterpart in NEW and compare.

The mapping, for code dali-migrate produced: the pipeline ``f`` of OLD (a ``@pipeline_def``
function or a ``Pipeline`` subclass) corresponds to the object of the same name in NEW, called
with the same arguments (pipeline construction arguments such as ``num_threads`` are passed
only where the new callable accepts them). Whatever it returns is pulled batch after batch: a
generator or iterator, an iterable (iterated again at its end, epoch after epoch), a
``Pipeline`` (``run()``), or a callable. For any other migration an adapter says how to build
each side (:mod:`dali_migrate.harness.adapters`).

Here: the options, the checks on OLD and NEW, their copies for the subprocesses, and the run over
the pipelines OLD defines (:mod:`.discover`). The arguments each pipeline gets are made in
:mod:`.inputs`, one pipeline is run on both sides and judged in :mod:`.pair`, and
:mod:`.reports` holds what comes back.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from . import discover as _discover
from .compare import Tolerances
from .inputs import Skip, SyntheticData, absolute_data_kwargs, pipeline_arguments
from .inputs import user_data_for as _user_data_for  # noqa: F401  (tests import it from here)
from .lower import lower_to_cpu, split_entry_points
from .pair import verify_pair
from .reports import PipelineReport, VerifyReport
from .runner import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S

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


def has_gpu() -> bool:
    """Whether an NVIDIA GPU is visible (without importing CUDA or DALI)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    if Path("/proc/driver/nvidia/gpus").is_dir() and any(
        Path("/proc/driver/nvidia/gpus").iterdir()
    ):
        return True
    return Path("/dev/nvidia0").exists()


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
    """The keyword arguments of :func:`~.pair.verify_pair` that all pipelines of a run share."""

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
        self.data = SyntheticData(root, opts.samples, opts.image_format)
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
        return verify_pair(
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
        user = absolute_data_kwargs(self.user, {"data_dir"})
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
        except Skip as e:
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
            user = absolute_data_kwargs(self.user, set(info.data_params))
            fn_kwargs, pipe_kwargs, notes = pipeline_arguments(
                info, user, self.data, self.device, self.data_path, settings
            )
        except Skip as e:
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
