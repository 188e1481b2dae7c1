"""Runs one side in its own subprocess, with a timeout and a memory cap, and reads its result.

A crash (signal, nonzero exit without a result), a hang (timeout) or running out of memory
becomes an error *result* of that side, never an exception of the harness.

Memory cap: on the CPU, ``RLIMIT_AS`` (address space) is set in the child; it cannot be used with
CUDA, which reserves far more virtual address space than it uses, so GPU runs (and CPU runs on a
machine whose NVIDIA driver is loaded, see :func:`address_cap_usable`) are watched instead: the
parent polls the child's resident set size (``/proc/<pid>/status``) and kills the process group
when it passes the cap.
"""

from __future__ import annotations

import atexit
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

DEFAULT_TIMEOUT_S = 300.0
DEFAULT_MEMORY_MB = 8192


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass


class _ForkServer:
    """One ``side --serve`` process (see ``side.serve``): DALI imported once, a fork per job."""

    def __init__(self) -> None:
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONHASHSEED="0")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dali_migrate.harness.side", "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
            start_new_session=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.ready = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None  # stdout=PIPE
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, spec_path: Path, memory_mb: int, timeout: float) -> tuple[int | None, bool]:
        """(exit code or None if the server died, timed out)"""
        if not self.ready:  # the DALI import is not the job's time
            try:
                line = self.lines.get(timeout=300)
            except queue.Empty:
                line = None
            if line != "ready":
                self.close()
                return None, False
            self.ready = True
        assert self.proc.stdin is not None  # stdin=PIPE
        self.proc.stdin.write(f"{spec_path}\t{memory_mb or 0}\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        pid = None
        timed_out = False
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                if pid is None:
                    self.close()
                    return None, True
                timed_out = True
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                deadline = time.monotonic() + 30
                continue
            if line is None:
                return None, timed_out
            kind, _, rest = line.partition(" ")
            if kind == "pid":
                pid = int(rest)
            elif kind == "done":
                return int(rest.split()[1]), timed_out

    def close(self) -> None:
        _kill_group(self.proc)


_POOL: list[_ForkServer] = []
_POOL_LOCK = threading.Lock()


def address_cap_usable(device: str) -> bool:
    """Whether ``RLIMIT_AS`` can cap a run's memory: on the CPU, where no NVIDIA driver is
    loaded. With one, DALI's CUDA libraries (loaded even with ``CUDA_VISIBLE_DEVICES=""``)
    reserve more address space than the cap, and every CPU side crashed with SIGSEGV before it
    ran (seen on an H100 machine); such runs are watched by their resident set size instead."""
    return device == "cpu" and not os.path.exists("/proc/driver/nvidia")


def _use_fork_server(device: str) -> bool:
    # the forked sides are capped by RLIMIT_AS alone
    return (
        address_cap_usable(device)
        and os.environ.get("DALI_MIGRATE_VERIFY_FORK", "1") != "0"
        and hasattr(os, "fork")
    )


def _acquire() -> _ForkServer:
    with _POOL_LOCK:
        while _POOL:
            server = _POOL.pop()
            if server.alive():
                return server
    return _ForkServer()


def _release(server: _ForkServer) -> None:
    if server.alive():
        with _POOL_LOCK:
            _POOL.append(server)


@atexit.register
def shutdown_fork_servers() -> None:
    with _POOL_LOCK:
        while _POOL:
            _POOL.pop().close()


def run_side(
    spec: dict,
    workdir: Path,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    memory_mb: int = DEFAULT_MEMORY_MB,
    device: str = "cpu",
) -> dict:
    """Run ``dali_migrate.harness.side`` on ``spec`` in a fresh process; returns its result dict
    (see ``side.main``), or an error result for a crash, a timeout or the memory cap."""
    workdir.mkdir(parents=True, exist_ok=True)
    spec = dict(spec, out=str(workdir))
    spec_path = workdir / "spec.pkl"
    with open(spec_path, "wb") as f:
        pickle.dump(spec, f, protocol=pickle.HIGHEST_PROTOCOL)
    result_path = workdir / "result.pkl"
    if result_path.exists():
        result_path.unlink()
    limit = memory_mb * 1024 * 1024 if memory_mb else None
    started = time.monotonic()
    if _use_fork_server(device):
        server = _acquire()
        code, timed_out = server.run(spec_path, memory_mb, timeout)
        _release(server)
        log = workdir / "output.log"
        output = log.read_text(errors="replace") if log.exists() else ""
        memory_killed = False
    else:
        code, timed_out, memory_killed, output = _run_process(
            spec_path, workdir, timeout, memory_mb, limit, device
        )
    return _collect(
        result_path,
        code,
        timed_out,
        memory_killed,
        output,
        time.monotonic() - started,
        timeout,
        memory_mb,
        limit,
        device,
    )


def _run_process(
    spec_path: Path, workdir: Path, timeout: float, memory_mb: int, limit: int | None, device: str
) -> tuple[int | None, bool, bool, str]:
    """(exit status, timed out, killed for memory, output) of the side run in a new process."""
    env = dict(os.environ)
    env.setdefault("PYTHONHASHSEED", "0")
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""

    capped = address_cap_usable(device)

    def preexec() -> None:  # runs in the child, before exec
        if limit and capped:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    cmd = [sys.executable, "-m", "dali_migrate.harness.side", str(spec_path)]
    proc = subprocess.Popen(
        cmd,
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        preexec_fn=preexec,
        start_new_session=True,
    )
    killed_for_memory = threading.Event()

    def watch() -> None:  # RSS watchdog for runs that cannot have an address-space limit
        while proc.poll() is None:
            if _rss_mb(proc.pid) > memory_mb:
                killed_for_memory.set()
                _kill_group(proc)
                return
            time.sleep(0.2)

    if limit and not capped:
        threading.Thread(target=watch, daemon=True).start()
    timed_out = False
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        output, _ = proc.communicate()
    return proc.returncode, timed_out, killed_for_memory.is_set(), output


def _collect(
    result_path: Path,
    code: int | None,
    timed_out: bool,
    memory_killed: bool,
    output: str,
    elapsed: float,
    timeout: float,
    memory_mb: int,
    limit: int | None,
    device: str,
) -> dict:
    tail = (output or "")[-3000:]

    def failure(kind: str, message: str) -> dict:
        return {
            "ok": False,
            "iterations": [],
            "draws": [],
            "readers": [],
            "random_ops": [],
            "notes": [],
            "mode": None,
            "ended_early": None,
            "capture_draws": [],
            "seconds": elapsed,
            "error": {
                "type": kind,
                "message": message,
                "traceback": tail,
                "phase": "process",
                "harness": False,
            },
        }

    if timed_out:
        return failure("Timeout", f"did not finish within {timeout:g} s (killed)")
    if memory_killed:
        return failure("MemoryLimit", f"used more than {memory_mb} MiB of memory (killed)")
    if result_path.exists():
        with open(result_path, "rb") as f:
            result = pickle.load(f)
        result["seconds"] = elapsed
        result["output_tail"] = tail
        return result
    if code is None:
        return failure("Crash", "the fork server died")
    if code < 0:
        name = (
            signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        )
        capped = limit and address_cap_usable(device)
        hint = " (out of memory under the address-space cap?)" if capped else ""
        return failure("Crash", f"killed by {name}{hint}")
    last = next((line for line in reversed(tail.strip().splitlines()) if line.strip()), "")
    if "MemoryError" in tail or "std::bad_alloc" in tail:
        return failure(
            "MemoryLimit", f"ran out of memory under the {memory_mb} MiB cap: {last[:300]}"
        )
    return failure("Crash", f"exited with status {code} without a result: {last[:300]}")
