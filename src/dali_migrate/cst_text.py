"""Rendering source through libcst without losing text.

libcst 1.9 renders some comment lines at the very end of a file as one: those indented deeper
than the module and shallower than the block above them (``if x:`` / ``    f()`` / ``   # a``
/ ``   # b`` comes back with ``# a`` gone). Code that parses a whole file and writes
``module.code`` back sets those lines aside first.
"""

from __future__ import annotations


def split_trailing_comments(code: str) -> tuple[str, str]:
    """``code`` split before the comment and blank lines that end it (``head + tail == code``);
    ``(code, "")`` when the last code line has no line break after it."""
    lines = code.splitlines(keepends=True)
    end = len(lines)
    while end and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
        end -= 1
    if end and not lines[end - 1].endswith(("\n", "\r")):
        return code, ""
    return "".join(lines[:end]), "".join(lines[end:])
