"""What one side of a whole-program run did (:class:`ProgramRun`), and the verdict on the two
sides (:func:`compare_programs`): exit status first, then standard output, the files written and
the values returned."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field

from .compare import Comparison, Tolerances, compare_runs

__all__ = ["ProgramComparison", "ProgramRun", "compare_programs"]

#: how many lines of standard error a report quotes
STDERR_LINES = 12
_ABORT = "terminate called without an active exception"


@dataclass
class ProgramRun:
    """What one side did."""

    exit_code: int | None  # None: killed by the harness (timeout or memory)
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    memory_killed: bool = False
    files: dict[str, str] = field(default_factory=dict)  # path in the working dir -> sha256
    #: a called entry's return value: per iteration outputs, or its repr() when it holds
    #: something else than arrays and batches (None: it returned None, or did not return)
    results: list | str | None = None
    timeout: float = 0.0
    memory_mb: int = 0

    def describe(self) -> str:
        """The way the side ended, in words."""
        if self.timed_out:
            return f"did not finish within {self.timeout:g} s (killed: a hang?)"
        if self.memory_killed:
            return f"used more than {self.memory_mb} MiB of memory (killed)"
        code = self.exit_code
        if code is not None and code < 0:
            name = (
                signal.Signals(-code).name
                if -code in signal.Signals._value2member_map_
                else f"signal {-code}"
            )
            text = f"was killed by {name} (exit status {128 - code})"
            if _ABORT in self.stderr:
                text += f", aborted: \"{_ABORT}\""
            return text
        return f"exited with status {code}"

    @property
    def ended_normally(self) -> bool:
        return not self.timed_out and not self.memory_killed

    def stderr_tail(self, lines: int = STDERR_LINES) -> str:
        return "\n".join(self.stderr.strip().splitlines()[-lines:])


@dataclass
class ProgramComparison:
    verdict: str  # match | mismatch | error
    reason: str
    side: str | None = None
    notes: list[str] = field(default_factory=list)
    comparison: Comparison | None = None


def _normalized(text: str, replacements: dict[str, str]) -> list[str]:
    for path, name in sorted(replacements.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(path, name)
    return text.splitlines()


def _first_line_difference(old: list[str], new: list[str]) -> str | None:
    for i, (a, b) in enumerate(zip(old, new)):
        if a != b:
            return f"line {i + 1}: OLD {a[:200]!r}, NEW {b[:200]!r}"
    if len(old) != len(new):
        longer, side = (old, "OLD") if len(old) > len(new) else (new, "NEW")
        extra = longer[min(len(old), len(new))]
        return f"{side} printed {abs(len(old) - len(new))} more line(s), from {extra[:200]!r}"
    return None


def _file_differences(old: dict[str, str], new: dict[str, str]) -> list[str]:
    out = [f"only OLD wrote {p}" for p in sorted(set(old) - set(new))]
    out += [f"only NEW wrote {p}" for p in sorted(set(new) - set(old))]
    out += [f"{p} differs" for p in sorted(set(old) & set(new)) if old[p] != new[p]]
    return out


def _exit_verdict(old: ProgramRun, new: ProgramRun) -> ProgramComparison | None:
    """The verdict when the two sides did not both end with status 0 (None: they did)."""
    if old.ended_normally and new.ended_normally and old.exit_code == new.exit_code == 0:
        return None
    if old.ended_normally and new.ended_normally and old.exit_code == new.exit_code:
        why = old.stderr_tail(1) or "no message"
        return ProgramComparison(
            "error", f"both sides exited with status {old.exit_code}: {why}", side="both"
        )
    if not old.ended_normally and not new.ended_normally:
        return ProgramComparison(
            "error", f"OLD {old.describe()}; NEW {new.describe()}", side="both"
        )
    failing = "new" if new.exit_code != 0 or not new.ended_normally else "old"
    bad, good = (new, old) if failing == "new" else (old, new)
    reason = (
        f"{failing.upper()} {bad.describe()}, "
        f"{'OLD' if failing == 'new' else 'NEW'} {good.describe()}"
    )
    last = bad.stderr_tail(1)
    if last and _ABORT not in last:
        reason += f": {last[:300]}"
    return ProgramComparison("mismatch", reason, side=failing)


def compare_programs(
    old: ProgramRun,
    new: ProgramRun,
    *,
    replacements: dict[str, str],
    tolerances: Tolerances | None = None,
    random_outputs: set[int] | None = None,
) -> ProgramComparison:
    """The verdict on two runs: exit status first, then standard output, files, results."""
    verdict = _exit_verdict(old, new)
    if verdict is not None:
        return verdict
    problems: list[str] = []
    stdout = _first_line_difference(
        _normalized(old.stdout, replacements), _normalized(new.stdout, replacements)
    )
    if stdout:
        problems.append(f"standard output differs at {stdout}")
    problems += _file_differences(old.files, new.files)
    comparison = None
    if old.results is not None or new.results is not None:
        if old.results is None or new.results is None:
            problems.append("only one side returned results")
        elif isinstance(old.results, str) or isinstance(new.results, str):
            if old.results != new.results:
                problems.append(
                    f"returned values differ: OLD {str(old.results)[:200]!r}, "
                    f"NEW {str(new.results)[:200]!r}"
                )
        else:
            comparison = compare_runs(
                old.results, new.results, tolerances, shapes_only=random_outputs
            )
            if not comparison.equal:
                problems.append(f"returned values differ: {_where(comparison)}")
    if problems:
        return ProgramComparison("mismatch", problems[0], notes=problems[1:], comparison=comparison)
    lines = len(old.stdout.splitlines())
    what = f"exit status 0, {lines} line(s) of output, {len(old.files)} file(s)"
    if comparison is not None:
        what += f", {comparison.samples_compared} returned samples"
    return ProgramComparison("match", what + " identical", comparison=comparison)


def _where(c: Comparison) -> str:
    f = c.first
    if f is None:
        return ""
    text = f"iteration {f.iteration}"
    if f.output >= 0:
        text += f", output {f.output}"
    if f.sample is not None:
        text += f", sample {f.sample}"
    return f"{text}: {f.message}"
