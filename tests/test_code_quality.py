"""The linter, the formatter and the type checker configured in pyproject.toml pass.

They are part of the test extra, so CI runs them on every submission; a finding fails here
with the tool's own output.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINTED = ["src", "transforms", "tests", "benchmarks", "scripts", "examples"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_ruff_finds_nothing() -> None:
    done = _run("ruff", "check", "--no-cache", *LINTED)
    assert done.returncode == 0, done.stdout + done.stderr


def test_code_is_formatted() -> None:
    done = _run("ruff", "format", "--check", "--no-cache", *LINTED)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_finds_nothing() -> None:
    done = _run("mypy", "--no-incremental")
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_merge_conflict_markers_are_left() -> None:
    """A merge left unresolved in a document or a source file is never committed."""
    root = Path(__file__).resolve().parent.parent
    files = [root / "CHANGELOG.md", root / "README.md", *root.glob("docs/**/*.md")]
    for folder in ("src", "transforms", "tests", "fixtures", "benchmarks"):
        files += (root / folder).rglob("*.py")
    marked = [
        f"{f.relative_to(root)}:{n}"
        for f in files
        for n, line in enumerate(f.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if line.startswith(("<<<<<<< ", ">>>>>>> ")) or line == "======="
    ]
    assert marked == []
