"""What :func:`~dali_migrate.harness.verify.verify` returns: a verdict per pipeline, and the
report of the whole run (its exit code, its JSON form)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .compare import Comparison

__all__ = ["VERDICTS", "PipelineReport", "VerifyReport"]

VERDICTS = ("match", "mismatch", "error", "skipped")


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
