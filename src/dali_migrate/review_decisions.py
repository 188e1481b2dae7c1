"""The decisions of earlier reviews, remembered per file and fix id in
``.dali-migrate/decisions.json`` (or the file ``--decisions`` names), written atomically."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Literal

DEFAULT_DECISIONS = Path(".dali-migrate") / "decisions.json"
DECISIONS_VERSION = 1
Decision = Literal["accepted", "rejected"]


class ReviewError(Exception):
    """A problem that stops the review before it starts (e.g. an unreadable decisions file)."""


class Decisions:
    """Decisions of earlier reviews: ``{file: {fix id: "accepted" | "rejected"}}``, where a file
    is its path relative to the working directory, with ``/`` separators."""

    def __init__(self, path: Path, files: dict[str, dict[str, Decision]] | None = None) -> None:
        self.path = path
        self.files: dict[str, dict[str, Decision]] = files or {}

    @classmethod
    def load(cls, path: Path, *, must_exist: bool = False) -> Decisions:
        """Read ``path``; a missing file is an empty store unless ``must_exist``."""
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            if must_exist:
                raise ReviewError(f"{path}: no such decisions file") from None
            return cls(path)
        except (OSError, UnicodeDecodeError) as e:
            raise ReviewError(f"{path}: cannot read decisions: {e}") from None
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise ReviewError(f"{path}: not a decisions file: {e}") from None
        if not isinstance(doc, dict) or doc.get("version") != DECISIONS_VERSION:
            raise ReviewError(f"{path}: not a decisions file of version {DECISIONS_VERSION}")
        files = doc.get("files")
        if not isinstance(files, dict) or not all(
            isinstance(ids, dict) and all(v in ("accepted", "rejected") for v in ids.values())
            for ids in files.values()
        ):
            raise ReviewError(
                f'{path}: not a decisions file: "files" must map paths to '
                f'{{fix id: accepted|rejected}}'
            )
        return cls(path, files)

    def get(self, file: str, fix_id: str) -> Decision | None:
        return self.files.get(file, {}).get(fix_id)

    def record(self, file: str, decisions: dict[str, Decision]) -> None:
        if decisions:
            self.files.setdefault(file, {}).update(decisions)

    def save(self) -> None:
        """Write the store atomically (temp file + rename), creating its directory."""
        doc = {
            "version": DECISIONS_VERSION,
            "files": {f: dict(sorted(ids.items())) for f, ids in sorted(self.files.items())},
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(
            dir=self.path.parent, prefix="." + self.path.name + ".", suffix=".tmp"
        )
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(doc, fh, indent=2)
                fh.write("\n")
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise


def decisions_key(path: str | os.PathLike[str]) -> str:
    """A file's name in the decisions store: relative to the working directory, ``/``-separated."""
    return Path(os.path.relpath(os.path.abspath(path))).as_posix()
