"""Ctrl-C while the command's modules load (libcst, click, rich: about a third of a second):
the program ends with one line, not with a traceback from inside an import."""

from __future__ import annotations

import signal
import sys


def _interrupted_while_loading(signum, frame) -> None:
    sys.stderr.write("interrupted: nothing was written\n")
    raise SystemExit(130)


def guard_loading() -> None:
    """Until :func:`loaded`, a Ctrl-C ends the program quietly (unless SIGINT has a handler)."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupted_while_loading)


def loaded() -> None:
    """SIGINT raises KeyboardInterrupt again, which the command reports."""
    if signal.getsignal(signal.SIGINT) is _interrupted_while_loading:
        signal.signal(signal.SIGINT, signal.default_int_handler)
