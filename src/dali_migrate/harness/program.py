"""Whole-program verification: run OLD and NEW as their users run them and compare what they do.

Each side runs in a fresh subprocess, in a temporary working directory of its own, with a
timeout and a memory cap, every pipeline of it in that one process:

* a script (``entry`` None): ``python OLD.py ARGS...``, exactly as a user runs it;
* a module of a project folder (``entry="pkg.train"``): ``python -m pkg.train ARGS...`` with the
  folder on the import path;
* a function (``entry="main"`` for a file, ``"pkg.train:main"`` for a folder): the module is
  imported and ``main(*ARGS)`` called, each argument read as a Python literal where it is one
  (``10`` is an int, ``/data`` stays a string); what it returns is compared too, output by
  output, sample by sample (a list of per-iteration tuples, as the program fixtures return).

Compared: the exit status (a crash, an abort, a hang on one side only is a ``mismatch`` that
says so), standard output (line by line, with each side's working directory and program
folder written as ``<cwd>`` and ``<program>``), the files each side wrote into its working
directory (by content), and the returned values. Standard error is not compared (warnings
differ by design) but its last lines explain a failure. Arguments that name an existing file or
folder (relative to the current directory) are made absolute, since the sides run elsewhere.

Random operators cannot be replayed across a whole program: their values differ by design, and
``random_outputs`` (indices of returned outputs) limits those to dtype and shape.
"""

from __future__ import annotations

import ast
import hashlib
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .compare import Tolerances
from .program_outcome import ProgramComparison, ProgramRun, compare_programs
from .reports import PipelineReport
from .runner import address_cap_usable

__all__ = ["ProgramRun", "ProgramSpec", "compare_programs", "run_program", "verify_program"]

_SKIP_DIRS = {"__pycache__", ".git", ".hg", ".svn", ".venv", "venv", "node_modules", ".tox"}
#: the module that turns returned values into comparable outputs (loaded by path in the child:
#: importing the dali_migrate package there would cost start-up time)
_SIDE = Path(__file__).resolve().parent / "side.py"

_CALL_ENTRY = r"""
import ast, importlib, importlib.util, pickle, sys
spec = pickle.load(open(sys.argv[1], "rb"))
sys.argv = [spec["argv0"], *spec["args"]]
sys.path.insert(0, spec["root"])
if spec["file"]:
    loader = importlib.util.spec_from_file_location(spec["module"], spec["file"])
    module = importlib.util.module_from_spec(loader)
    sys.modules[spec["module"]] = module
    loader.loader.exec_module(module)
else:
    module = importlib.import_module(spec["module"])
result = getattr(module, spec["function"])(*spec["call_args"])
loader = importlib.util.spec_from_file_location("_dali_migrate_side", spec["side"])
side = importlib.util.module_from_spec(loader)
loader.loader.exec_module(side)
if result is not None:
    try:
        items = result if isinstance(result, list) else [result]
        found = [side.to_outputs(item) for item in items]
    except Exception:  # not arrays or batches: compared as text
        found = repr(result)
    with open(spec["out"], "wb") as f:
        pickle.dump(found, f)
"""


@dataclass
class ProgramSpec:
    """How to run one side: ``path`` a script or a project folder, ``entry`` (see the module
    docstring), ``args`` the command-line arguments."""

    path: Path
    entry: str | None = None
    args: list[str] = field(default_factory=list)

    def root(self) -> Path:
        """The folder the program's imports resolve from (a script's own folder)."""
        return self.path if self.path.is_dir() else self.path.parent

    def target(self) -> tuple[str | None, str | None]:
        """(module, function) of the entry; module None: the script itself."""
        entry = self.entry or ""
        if ":" in entry:
            module, _, function = entry.rpartition(":")
        elif self.path.is_file() and entry.isidentifier():
            module, function = "", entry  # "main" with a script: a function of the script
        else:
            module, function = entry, ""
        return module or None, function or None


# -- running -----------------------------------------------------------------------------------


def absolute_args(args: list[str], cwd: Path | None = None) -> list[str]:
    """The arguments, those that name an existing path (also as ``--opt=PATH``) made absolute."""
    base = Path(cwd or os.getcwd())

    def fix(value: str) -> str:
        if not value or value.startswith("-") or Path(value).is_absolute():
            return value
        candidate = base / value
        return str(candidate.resolve()) if candidate.exists() else value

    out = []
    for arg in args:
        if arg.startswith("--") and "=" in arg:
            name, _, value = arg.partition("=")
            out.append(f"{name}={fix(value)}")
        else:
            out.append(fix(arg))
    return out


def _literal(arg: str):
    try:
        return ast.literal_eval(arg)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return arg


def _command(spec: ProgramSpec, root: Path, workdir: Path) -> list[str]:
    module, function = spec.target()
    script = root / spec.path.name if spec.path.is_file() else None
    if function is not None:
        call = {
            "argv0": str(script or root),
            "args": spec.args,
            "root": str(root),
            "file": str(script) if module is None else None,
            "module": module or (script.stem if script else ""),
            "function": function,
            "call_args": [_literal(a) for a in spec.args],
            "side": str(_SIDE),
            "out": str(workdir.parent / (workdir.name + "-result.pkl")),
        }
        spec_file = workdir.parent / (workdir.name + "-call.pkl")
        spec_file.write_bytes(pickle.dumps(call))
        return [sys.executable, "-c", _CALL_ENTRY, str(spec_file)]
    if module is not None:
        return [sys.executable, "-m", module, *spec.args]
    if script is None:
        raise ValueError(f"{spec.path} is a folder: say which module runs it (--entry MODULE)")
    return [sys.executable, str(script), *spec.args]


def _environment(root: Path, device: str, extra_paths: list[str]) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PYTHONHASHSEED", "0")
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # no __pycache__ in the user's folders
    env["PYTHONPATH"] = os.pathsep.join(
        [str(root), *extra_paths, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]
    )
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass


def _watch_memory(proc: subprocess.Popen, memory_mb: int, flag: threading.Event) -> None:
    from .runner import _rss_mb

    while proc.poll() is None:
        if _rss_mb(proc.pid) > memory_mb:
            flag.set()
            _kill_group(proc)
            return
        time.sleep(0.2)


def run_program(
    spec: ProgramSpec,
    root: Path,
    workdir: Path,
    *,
    timeout: float,
    memory_mb: int = 0,
    device: str = "cpu",
    extra_paths: Sequence[str] = (),
) -> ProgramRun:
    """Run one side (its code under ``root``; ``extra_paths`` also on its import path) in
    ``workdir``, which must be empty."""
    workdir.mkdir(parents=True, exist_ok=True)
    command = _command(spec, root, workdir)
    limit = memory_mb * 1024 * 1024 if memory_mb else None
    capped = address_cap_usable(device)

    def preexec() -> None:  # in the child: an address-space cap where CUDA is not used
        if limit and capped:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    started = time.monotonic()
    proc = subprocess.Popen(
        command,
        cwd=workdir,
        env=_environment(root, device, list(extra_paths)),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=preexec,
        start_new_session=True,
    )
    memory_killed = threading.Event()
    if limit and not capped:
        threading.Thread(
            target=_watch_memory, args=(proc, memory_mb, memory_killed), daemon=True
        ).start()
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        out, err = proc.communicate()
    run = ProgramRun(
        None if timed_out or memory_killed.is_set() else proc.returncode,
        out.decode(errors="replace"),
        err.decode(errors="replace"),
        time.monotonic() - started,
        timed_out,
        memory_killed.is_set(),
        files=_files(workdir),
        timeout=timeout,
        memory_mb=memory_mb,
    )
    result = workdir.parent / (workdir.name + "-result.pkl")
    if result.exists():
        with open(result, "rb") as f:
            run.results = pickle.load(f)
    return run


def _files(workdir: Path) -> dict[str, str]:
    files = {}
    for path in sorted(workdir.rglob("*")):
        if path.is_file() and not path.is_symlink() and "__pycache__" not in path.parts:
            digest = hashlib.sha256()
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
            files[str(path.relative_to(workdir))] = digest.hexdigest()
    return files


def prepared_root(spec: ProgramSpec, device: str, work: Path, lowering: list[str]) -> Path:
    """The folder to run the program from: its own, or, on a CPU run of code that asks for a
    GPU, a copy with every module lowered to the CPU (other entries linked, not copied)."""
    root = spec.root().resolve()
    if device != "cpu":
        return root
    from .lower import lower_to_cpu

    lowered: dict[Path, str] = {}
    for path in _python_files(root):
        text = path.read_text(encoding="utf-8", errors="replace")
        if not any(word in text for word in ("gpu", "mixed", "device_id", "cuda")):
            continue
        try:
            result = lower_to_cpu(text)
        except Exception:  # not parsable: it runs as it is, and fails as it would
            continue
        if result.changes:
            lowered[path] = result.code
            lowering.extend(f"{path.relative_to(root)}: {c}" for c in result.changes)
    if not lowered:
        return root
    return _mirror(root, lowered, work)


def _is_package(folder: Path) -> bool:
    return (
        folder.name not in _SKIP_DIRS
        and not folder.name.startswith(".")
        and (folder / "__init__.py").is_file()
    )


def _python_files(root: Path) -> list[Path]:
    """The regular ``.py`` files of ``root`` and of its packages (folders with an
    ``__init__.py``, recursively); data folders beside the code are not walked."""
    found = []
    for entry in sorted(root.iterdir()):
        if entry.suffix == ".py" and entry.is_file():  # is_file: a FIFO is never opened
            found.append(entry)
        elif entry.is_dir() and not entry.is_symlink() and _is_package(entry):
            found.extend(_python_files(entry))
    return found


def _mirror(root: Path, lowered: dict[Path, str], target: Path) -> Path:
    """A copy of ``root``'s modules and packages (lowered where given); every other entry of
    it is a link to the original."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for entry in sorted(root.iterdir()):
        copy = target / entry.name
        if entry.suffix == ".py" and entry.is_file():
            text = lowered.get(entry) or entry.read_text(encoding="utf-8", errors="replace")
            copy.write_text(text, encoding="utf-8")
        elif entry.is_dir() and not entry.is_symlink() and _is_package(entry):
            _mirror(entry, lowered, copy)
        else:
            copy.symlink_to(entry)
    return target


# -- the whole verification --------------------------------------------------------------------


def _random_ops(path: Path) -> int:
    """Random operators OLD's code calls (a static count; 0 where it cannot be read)."""
    from .discover import discover

    files = [path] if path.is_file() else _python_files(path)
    count = 0
    for file in files:
        try:
            count += sum(i.random_ops for i in discover(file.read_text(encoding="utf-8")))
        except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, OSError):
            continue
    return count


def _replacements(root: Path, cwd: Path) -> dict[str, str]:
    out = {}
    for path, name in ((cwd, "<cwd>"), (root, "<program>")):
        out[str(path)] = name
        out[os.path.realpath(path)] = name
    return out


def _check_program(path: Path, role: str, entry: str | None) -> None:
    """InputError (one line) for a side that cannot be run: nothing there, not a regular file
    or folder (a FIFO is never opened), a folder without an entry, a script that is not Python."""
    from .verify import InputError, read_source

    if path.is_dir():
        if not entry:
            raise InputError(
                f"{role} {path}: a folder; say which module runs it (--entry MODULE "
                "or MODULE:FUNCTION)"
            )
        return
    read_source(path, role)


def verify_program(
    old: str | os.PathLike,
    new: str | os.PathLike,
    *,
    args: Sequence[str] = (),
    entry: str | None = None,
    device: str = "auto",
    timeout: float | None = None,
    memory_mb: int | None = None,
    atol=None,
    rtol=None,
    random_outputs: list[int] | None = None,
    workdir: str | os.PathLike | None = None,
    extra_paths: Sequence[str] = (),
):
    """Run OLD and NEW as whole programs and compare them (see the module docstring); returns
    a :class:`~dali_migrate.harness.verify.VerifyReport` with one entry, named after the
    program. ``extra_paths``: more folders on both sides' import path."""
    from .runner import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S
    from .verify import VerifyReport, has_gpu

    if device not in ("auto", "cpu", "gpu"):
        raise ValueError(f"device must be auto, cpu or gpu, not {device!r}")
    timeout = DEFAULT_TIMEOUT_S if timeout is None else timeout
    if not timeout or timeout <= 0 or timeout != timeout:
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    memory_mb = DEFAULT_MEMORY_MB if memory_mb is None else memory_mb
    for role, path in (("OLD", old), ("NEW", new)):
        _check_program(Path(path), role, entry)
    resolved = ("gpu" if has_gpu() else "cpu") if device == "auto" else device
    arguments = absolute_args(list(args))
    own = workdir is None
    work = (
        Path(tempfile.mkdtemp(prefix="dali-verify-program-")) if workdir is None else Path(workdir)
    )
    lowering: list[str] = []
    limits = {
        "timeout": timeout,
        "memory_mb": memory_mb,
        "device": resolved,
        "extra_paths": list(extra_paths),
    }
    started = time.monotonic()
    try:
        sides = (Path(old), Path(new))
        runs, replacements = _run_sides(sides, entry, arguments, work, lowering, limits)
        outcome = compare_programs(
            runs["old"],
            runs["new"],
            replacements=replacements,
            tolerances=Tolerances.parse(atol, rtol),
            random_outputs=set(random_outputs or ()),
        )
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)
    name = entry or Path(old).name
    report = _program_report(name, outcome, runs, arguments, time.monotonic() - started)
    randoms = _random_ops(Path(old))
    if randoms and not random_outputs:
        report.notes.append(
            f"OLD calls {randoms} random operator(s): their values differ by design in a "
            "whole-program run (the per-pipeline mode replays them); --random-outputs"
        )
    lowered = resolved == "cpu" and bool(lowering)
    return VerifyReport(str(old), str(new), resolved, lowered, lowering, [report], mode="program")


def _run_sides(
    sides: tuple[Path, Path],
    entry: str | None,
    arguments: list[str],
    work: Path,
    lowering: list[str],
    limits: dict[str, Any],
) -> tuple[dict[str, ProgramRun], dict[str, str]]:
    """Each side prepared under ``work`` and run (``limits``: of :func:`run_program`); the runs
    by role, and the paths to write as ``<cwd>``/``<program>`` when comparing their output."""
    runs, replacements = {}, {}
    for role, path in zip(("old", "new"), sides):
        spec = ProgramSpec(path.resolve(), entry, arguments)
        root = prepared_root(spec, limits["device"], work / role / "src", lowering)
        cwd = work / role / "cwd"
        runs[role] = run_program(spec, root, cwd, **limits)
        replacements.update(_replacements(root, cwd))
        replacements.update(_replacements(spec.root(), cwd))
    return runs, replacements


def _program_report(
    name: str,
    outcome: ProgramComparison,
    runs: dict[str, ProgramRun],
    arguments: list[str],
    seconds: float,
) -> PipelineReport:
    """The report's one entry: the verdict, how each side ended, their standard error."""
    report = PipelineReport(
        name,
        outcome.verdict,
        outcome.reason,
        side=outcome.side,
        comparison=outcome.comparison,
        notes=list(outcome.notes),
        arguments={"args": arguments},
        seconds=seconds,
    )
    returned = runs["old"].results
    report.iterations = len(returned) if isinstance(returned, list) else 0
    for role in ("old", "new"):
        run = runs[role]
        report.notes.append(f"{role.upper()} {run.describe()} after {run.seconds:.1f} s")
        if run.exit_code != 0 and run.stderr.strip():
            report.traceback += (
                f"--- {role.upper()} standard error (end) ---\n{run.stderr_tail()}\n"
            )
    return report
