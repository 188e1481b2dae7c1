"""What the reviewer types: one key at a time on a terminal (or one answer per line of a
script), and a proposed result edited in ``$EDITOR``."""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

import click

from .review_decisions import ReviewError
from .sourcefile import SourceFile


class Answers:
    """The reviewer's answers: one key press on a terminal; otherwise one answer per line of
    ``stream``, so a review can be scripted (``printf 'y\\nn\\nq\\n' | dali-migrate -i ...``).

    Used as a context manager: on a terminal, keys are read without Enter (cbreak mode) from
    the start of the review to its end, so a key pressed as soon as a prompt shows is never
    held back in the line buffer; the editor runs with the terminal as it was (:meth:`paused`).
    """

    def __init__(self, stream: TextIO, terminal: bool) -> None:
        self.stream = stream
        self.terminal = terminal
        self._saved: list | None = None

    def __enter__(self) -> Answers:
        if self.terminal:
            self._saved = _cbreak(self.stream.fileno())
        return self

    def __exit__(self, *exc: object) -> None:
        self._restore()

    def _restore(self) -> None:
        if self._saved is not None:
            import termios

            termios.tcsetattr(self.stream.fileno(), termios.TCSADRAIN, self._saved)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """The terminal as it was before the review, e.g. while an editor runs."""
        self._restore()
        try:
            yield
        finally:
            if self._saved is not None:
                _cbreak(self.stream.fileno())

    def read(self) -> str | None:
        """The next answer, or None at the end of the input (Ctrl-D on a terminal)."""
        if self.terminal:
            if self._saved is None:  # no termios (Windows): click reads one key
                try:
                    return click.getchar()
                except EOFError:
                    return None
            while True:
                # one read takes a whole escape sequence (an arrow key), which is then no answer;
                # Enter after a key (out of habit) is not one either
                key = os.read(self.stream.fileno(), 32).decode("utf-8", "replace")
                if key in ("", "\x04"):
                    return None
                if key.strip():
                    return key.strip()
        line = self.stream.readline()
        return line.strip() if line else None


def _cbreak(fd: int) -> list | None:
    """Put the terminal ``fd`` in cbreak mode; returns its previous settings (None: no termios)."""
    try:
        import termios
        import tty
    except ImportError:  # pragma: no cover - Windows
        return None
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd, termios.TCSADRAIN)
    return saved


def edit_text(text: str, source: SourceFile) -> str:
    """Let the reviewer edit ``text`` in ``$EDITOR`` (or ``$VISUAL``), in a temporary file named
    like ``source`` and in its encoding; returns what was saved."""
    editor = os.environ.get("EDITOR") or os.environ.get("VISUAL")
    if not editor:
        raise ReviewError("no editor: set $EDITOR")
    with tempfile.TemporaryDirectory(prefix="dali-migrate-") as tmp:
        path = Path(tmp) / Path(source.path).name
        try:
            path.write_bytes(text.encode(source.encoding))
            proc = subprocess.run([*shlex.split(editor), str(path)])
        except UnicodeError as e:
            raise ReviewError(
                f"cannot encode the proposed result as {source.encoding}: {e}"
            ) from None
        except OSError as e:
            raise ReviewError(f"cannot run the editor {editor!r}: {e.strerror or e}") from None
        if proc.returncode != 0:
            raise ReviewError(f"the editor {editor!r} exited with status {proc.returncode}")
        try:
            return path.read_bytes().decode(source.encoding)
        except UnicodeError as e:
            raise ReviewError(f"the edited file is not valid {source.encoding}: {e}") from None
