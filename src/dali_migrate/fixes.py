"""Fixes, diagnostics and results: the list every view of dali-migrate is built on.

A :class:`Fix` is one semantic unit a reviewer can accept or reject on its own. It is made of
text edits on the *original* source (character offsets), so any subset of the fixes of a file can
be applied, serialised to JSON or SARIF, and replayed later. A :class:`Diagnostic` is something
the tool could not migrate safely: the code stays as it is and a ``# TODO(dali-migrate): ...``
marker line is proposed above it.
"""

from __future__ import annotations

import ast
import bisect
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeVar

Safety = Literal["safe", "unsafe"]
TODO_PREFIX = "# TODO(dali-migrate):"


class MigrateError(Exception):
    """Base class of every error the library API raises."""


class UnknownFixError(MigrateError, KeyError):
    """An id given to :func:`apply_fixes` names no fix of this source."""


class MissingDependencyError(MigrateError):
    """A chosen fix depends on a fix that was not chosen."""


class SourceParseError(MigrateError):
    """The input is not valid Python (or nested too deeply to analyse): nothing was changed.

    ``str(e)`` is one line, ``path:line:column: reason`` (column 0-based, as in diagnostics);
    ``line``, ``column`` and ``reason`` hold its parts."""

    def __init__(self, message: str, *, line: int = 0, column: int = 0, reason: str = "") -> None:
        super().__init__(one_line(message))
        self.line, self.column, self.reason = line, column, one_line(reason or message)


#: every character str.splitlines() breaks a line on (a Python comment ends at the first of
#: \n and \r; the others would end it for an editor, a diff or a terminal)
_LINE_BREAKS = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def one_line(text: str) -> str:
    """``text`` on one line: each run of white space that holds a line break becomes one space
    (source quoted across lines, ``a\n    and b``, reads ``a and b``)."""
    if not _LINE_BREAKS.search(text):
        return text
    return re.sub(r"\s*(?:" + _LINE_BREAKS.pattern + r")\s*", " ", text).strip()


@dataclass(frozen=True)
class Edit:
    """Replace ``source[start:end]`` with ``text`` (character offsets into the original)."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Span:
    """A region of the original source: 1-based lines, 0-based columns, end exclusive."""

    start_line: int
    start_col: int
    end_line: int
    end_col: int

    def to_dict(self) -> dict:
        return {
            "start": {"line": self.start_line, "column": self.start_col},
            "end": {"line": self.end_line, "column": self.end_col},
        }


@dataclass(frozen=True)
class Fix:
    """One reviewable change. ``id`` is stable across unrelated edits of the file."""

    id: str
    rule: str
    message: str
    safety: Safety
    edits: tuple[Edit, ...]
    span: Span
    depends_on: tuple[str, ...] = ()
    original: str = ""
    replacement: str = ""
    #: local rules whose rewrites this (structural) fix carries out inside the code it replaces
    includes: tuple[str, ...] = ()
    #: the first line of the code the fix is about (its decorator, for a decorated function):
    #: suppression comments are looked for on it and on the line above
    line: int = 0
    #: what the fix leaves for a person: each is a TODO the fix writes next to the code it is
    #: about (a use of a migrated pipeline the tool cannot rewrite)
    follow_ups: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "message", one_line(self.message))
        # ``replacement`` is the text that replaces the whole ``span`` (``original``); makers
        # set it for a single edit only, so it is derived here for a fix of several edits
        if not self.replacement and len(self.edits) > 1:
            start = self.edits[0].start
            if len(self.original) == self.edits[-1].end - start:
                inner = [Edit(e.start - start, e.end - start, e.text) for e in self.edits]
                object.__setattr__(self, "replacement", splice(self.original, inner))

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "rule": self.rule,
            "message": self.message,
            "safety": self.safety,
            "span": self.span.to_dict(),
            "original": self.original,
            "replacement": self.replacement,
            "depends_on": list(self.depends_on),
            "includes": list(self.includes),
            "follow_ups": list(self.follow_ups),
        }


@dataclass(frozen=True)
class Diagnostic:
    """Code left unmigrated (``todo``), a note on behaviour (``info``) or a rule failure
    (``error``)."""

    rule: str
    message: str
    line: int
    col: int = 0
    severity: Literal["todo", "info", "error"] = "todo"
    marker: Edit | None = None
    #: the id of the fix whose follow-up this is: its marker is written only with that fix
    requires: str | None = None
    #: the id of a fix that settles what this TODO asks (a function rewritten for the ndd
    #: Batches its calls pass): applied with it, the TODO is neither written nor reported
    resolved_by: str | None = None

    def __post_init__(self) -> None:
        # a message may quote source that spans lines: it is printed, and its marker written,
        # as one line
        object.__setattr__(self, "message", one_line(self.message))

    def to_dict(self) -> dict:
        return {
            "rule": self.rule,
            "message": self.message,
            "line": self.line,
            "column": self.col,
            "severity": self.severity,
        }


@dataclass
class Result:
    """What :func:`dali_migrate.migrate_source` returns."""

    source: str
    code: str
    fixes: list[Fix] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.code != self.source

    def to_dict(self) -> dict:
        return {
            "changed": self.changed,
            "fixes": [f.to_dict() for f in self.fixes],
            "applied": list(self.applied),
            "diagnostics": [d.to_dict() for d in self.diagnostics],
        }


class LineIndex:
    """Converts between libcst (line, column) positions and character offsets."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.starts = [0]
        for m in re.finditer(r"\r\n|\r|\n", source):
            self.starts.append(m.end())

    def offset(self, line: int, col: int) -> int:
        if line - 1 >= len(self.starts):
            return len(self.source)
        return self.starts[line - 1] + col

    def position(self, offset: int) -> tuple[int, int]:
        lo, hi = 0, len(self.starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1, offset - self.starts[lo]

    def span(self, start: int, end: int) -> Span:
        return Span(*self.position(start), *self.position(end))


def normalized(text: str) -> str:
    return " ".join(text.split())


def fix_id(rule: str, anchor: str, original: str) -> str:
    """rule + anchor (qualified name of the enclosing code) + hash of the normalised original."""
    digest = hashlib.sha1(normalized(original).encode("utf-8")).hexdigest()[:10]
    return f"{rule}:{anchor}:{digest}" if anchor else f"{rule}:{digest}"


def uniquify(fixes: Iterable[Fix]) -> list[Fix]:
    """Identical replacements in one scope get ``#2``, ``#3``... in source order."""
    seen: dict[str, int] = {}
    out = []
    for f in sorted(fixes, key=lambda f: f.edits[0].start):
        n = seen.get(f.id, 0) + 1
        seen[f.id] = n
        if n > 1:
            f = Fix(**{**f.__dict__, "id": f"{f.id}#{n}"})
        out.append(f)
    return out


def overlaps(a: Edit, b: Edit) -> bool:
    if a.start == a.end or b.start == b.end:  # insertions collide only at the same point
        return a.start == b.start and a.start == a.end and b.start == b.end and a is not b
    return a.start < b.end and b.start < a.end


def _contains(outer: Edit, inner: Edit) -> bool:
    return outer.start <= inner.start and inner.end <= outer.end and outer != inner


def splice(source: str, edits: Sequence[Edit]) -> str:
    """Apply non-overlapping edits to ``source`` (an edit given twice, by two fixes that each
    need it, such as the same import, is applied once)."""
    parts = []
    pos = 0
    for e in sorted(dict.fromkeys(edits), key=lambda e: (e.start, e.end)):
        parts.append(source[pos : e.start])
        parts.append(e.text)
        pos = e.end
    parts.append(source[pos:])
    return "".join(parts)


def parses(code: str) -> bool:
    """Is ``code`` valid Python? (CPython's own parser: far cheaper than a libcst parse)."""
    try:
        compile(
            code,
            "<dali-migrate>",
            "exec",
            ast.PyCF_ONLY_AST | ast.PyCF_TYPE_COMMENTS,
            dont_inherit=True,
        )
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return True


def drop_nested(fixes: list[Fix]) -> list[Fix]:
    """A fix whose edits all lie inside another fix's edit was absorbed by it (e.g. a local
    rewrite inside a pipeline that a structural fix rewrites whole).

    One sweep over the edits in order of start: an edit can only lie inside the edits still open
    where it starts (or of its own extent), so the cost follows the number of edits times their
    nesting, not its square."""
    groups: dict[tuple[int, int], list[tuple[Edit, int]]] = {}
    for i, f in enumerate(fixes):
        for e in f.edits:
            groups.setdefault((e.start, e.end), []).append((e, i))
    # per fix: the other fixes that hold all of its edits seen so far (None: none seen yet)
    outer: list[set[int] | None] = [None] * len(fixes)
    open_edits: list[tuple[Edit, int]] = []
    for (start, _), group in sorted(groups.items(), key=lambda kv: (kv[0][0], -kv[0][1])):
        open_edits = [(o, j) for o, j in open_edits if o.end >= start]
        for e, i in group:
            held = {j for o, j in open_edits + group if j != i and _contains(o, e)}
            seen = outer[i]
            outer[i] = held if seen is None else seen & held
        open_edits += group
    return [f for f, held in zip(fixes, outer) if not held]


def select_consistent(fixes: Sequence[Fix]) -> tuple[list[Fix], list[Fix]]:
    """Take fixes in order, skipping any that overlaps one already taken (an edit identical to
    one taken is shared, not an overlap).

    Returns (taken, skipped).
    """
    taken: list[Fix] = []
    skipped: list[Fix] = []
    covered = _Coverage()
    for f in fixes:
        if any(covered.overlaps(e) and e not in covered.edits for e in f.edits):
            skipped.append(f)
        else:
            taken.append(f)
            for e in f.edits:
                covered.add(e)
    return taken, skipped


class _Coverage:
    """The text ranges of the edits taken so far (merged, sorted) and their insertion points:
    :func:`overlaps` against all of them in logarithmic time."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.points: set[int] = set()
        #: the edits themselves: another fix may need the very same one (it is applied once)
        self.edits: set[Edit] = set()

    def overlaps(self, e: Edit) -> bool:
        if e.start == e.end:
            return e.start in self.points
        k = bisect.bisect_left(self.starts, e.end) - 1  # the last range starting before e ends
        return k >= 0 and self.ends[k] > e.start

    def add(self, e: Edit) -> None:
        self.edits.add(e)
        if e.start == e.end:
            self.points.add(e.start)
            return
        lo = bisect.bisect_left(self.ends, e.start)  # first range that may touch e
        hi = bisect.bisect_right(self.starts, e.end)
        start = min([e.start] + self.starts[lo:hi])
        end = max([e.end] + self.ends[lo:hi])
        self.starts[lo:hi] = [start]
        self.ends[lo:hi] = [end]


F = TypeVar("F", bound="HasEdits")


class HasEdits(Protocol):
    @property
    def edits(self) -> tuple[Edit, ...]: ...  # read-only: Fix and the markers are frozen


def apply_edits_checked(
    source: str, fixes: Sequence[F], base: Sequence[Edit] = ()
) -> tuple[str, list[F], list[F]]:
    """Apply ``fixes`` (anything with ``edits``) to ``source`` on top of the ``base`` edits,
    which parse; a fix whose result would not parse is dropped.

    Returns (code, applied, dropped). Fast path: all at once; on a parse failure, the longest
    run of the remaining fixes that still parses is found by bisection, the fix after it is
    dropped, and so on: as adding the fixes one at a time would, in a few parses per dropped fix.
    """
    fixes = list(fixes)
    applied: list[F] = []
    dropped: list[F] = []

    def ok(more: Sequence[F]) -> bool:
        return parses(splice(source, [*base, *(e for g in [*applied, *more] for e in g.edits)]))

    i = 0
    while i < len(fixes):
        if ok(fixes[i:]):
            applied += fixes[i:]
            break
        lo, hi = i, len(fixes)  # fixes[i:lo] parse with what is applied, fixes[i:hi] do not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if ok(fixes[i:mid]) else (lo, mid)
        applied += fixes[i:lo]
        dropped.append(fixes[lo])
        i = lo + 1
    return splice(source, [*base, *(e for f in applied for e in f.edits)]), applied, dropped
