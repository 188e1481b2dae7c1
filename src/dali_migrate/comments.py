"""Users' comments survive the migration: what counts as a lost comment, and the last guard that
puts back those a fix's generated code left out.

The rules carry comments with the code they are attached to where they know where that code goes
(the comment lines above a statement move with it; comments inside the arguments of a call stay in
the rewritten call). :func:`keep_comments` is the guard behind them, applied to every fix: a
comment of the code a fix replaces that its new text no longer holds is written, on its own line,
above the statement of the new text that shares the most names with the code the comment was
about (the statement below a comment line, or the line a trailing comment ends); where no
statement shares a name, above the first statement of the new text, so nothing is lost.

Policy: a comment is dropped only with a statement the migration deletes on purpose and has no
equivalent for (``pipe.build()  # build it``): the trailing comment of a line that a fix deletes
without writing code in its place, or of an import it deletes (a pipeline-mode name left
unused). Comment lines above or inside such a statement are kept where
they stood. TODO markers of the tool are not users' comments.

Comments are compared by their words, so a long comment the line wrapper continued on the next
line is the same comment (:func:`lost_comments`).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import Counter
from dataclasses import dataclass, replace

from .fixes import Edit, Fix, Result, splice

#: comments the tool writes itself (its TODO markers come and go with the code they mark)
_OWN = "TODO(dali-migrate)"
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Comment:
    """A ``#`` comment of some code: its text, its line (0-based) and whether code precedes it on
    that line (a trailing comment)."""

    text: str
    line: int
    trailing: bool


def comments_of(code: str) -> list[Comment]:
    """The comments of ``code`` (tokenized; code that does not tokenize is read line by line)."""
    out: list[Comment] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(_lf(code)).readline):
            if tok.type == tokenize.COMMENT:
                before = tok.line[: tok.start[1]].strip()
                out.append(Comment(tok.string.strip(), tok.start[0] - 1, bool(before)))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        out = []
        for i, line in enumerate(_lines(code)):
            code_part, sep, rest = line.partition("#")
            if sep and code_part.count('"') % 2 == 0 and code_part.count("'") % 2 == 0:
                out.append(Comment("#" + rest.rstrip(), i, bool(code_part.strip())))
    return [c for c in out if _OWN not in c.text]


def _words(text: str) -> str:
    return " ".join(text.lstrip("#").split())


def lost_comments(before: str, after: str) -> list[str]:
    """The comments of ``before`` that ``after`` does not hold, each occurrence once (a comment
    continued over several comment lines, or joined with others, still counts as held)."""
    return _missing([c.text for c in comments_of(before)], comments_of(after))


def _missing(texts: list[str], after: list[Comment]) -> list[str]:
    stream = " ".join(_words(c.text) for c in after)
    wanted = Counter(_words(t) for t in texts)
    found = {w: _occurrences(w, stream) if w else len(after) for w in wanted}
    out = []
    for t in texts:
        w = _words(t)
        if found[w] > 0:
            found[w] -= 1
        else:
            out.append(t)
    return out


def dropped_on_purpose(source: str, fixes: list[Fix]) -> list[str]:
    """The comments ``fixes`` drop by the policy: the trailing comments of the lines an edit
    deletes without writing code in their place, and of the imports it deletes."""
    return [c.text for f in fixes for e in f.edits for c in _deleted_with_statement(source, e)]


def _deleted_with_statement(source: str, e: Edit) -> list[Comment]:
    old = source[e.start : e.end]
    lines = _lines(old)
    deletes = not _has_code(e.text)
    kept = {" ".join(line.split()) for line in _lines(e.text)}
    out = []
    for c in comments_of(old):
        code = " ".join(lines[c.line].split("#", 1)[0].split())
        if c.trailing and (deletes or (_IMPORT.match(code) is not None and code not in kept)):
            out.append(c)
    return out


_IMPORT = re.compile(r"(import|from)\s")


def unexplained_losses(result: Result) -> list[str]:
    """The comments of ``result.source`` missing from ``result.code`` that no applied fix dropped
    on purpose (the figure that must stay 0)."""
    applied = [f for f in result.fixes if f.id in set(result.applied)]
    lost = Counter(lost_comments(result.source, result.code))
    lost.subtract(dropped_on_purpose(result.source, applied))
    return sorted(lost.elements())


def _occurrences(words: str, stream: str) -> int:
    return len(re.findall(r"(?<!\S)" + re.escape(words) + r"(?!\S)", stream))


# ------------------------------------------------------------------------------------------------
# The guard
# ------------------------------------------------------------------------------------------------


def keep_comments(source: str, fix: Fix) -> Fix:
    """``fix`` with the comments of the code it replaces that its edits lost written back (see
    the module docstring); ``fix`` itself where none was lost or where writing them back would
    not parse."""
    lost = _lost(source, fix.edits)
    if not lost:
        return fix
    edits = list(fix.edits)
    for group in _groups(lost):
        edits = _put_back(source, edits, group)
    if edits == list(fix.edits) or not _same_code(source, fix.edits, edits):
        return fix
    if len(edits) == 1:
        return replace(fix, edits=tuple(edits), replacement=edits[0].text)
    return replace(fix, edits=tuple(edits), replacement="")


@dataclass(frozen=True)
class _Lost:
    comment: Comment
    edit: int  # the index of the edit whose span held it
    anchor: str  # the code the comment is about


def _lost(source: str, edits: tuple[Edit, ...]) -> list[_Lost]:
    held = [c for e in edits for c in comments_of(e.text)]
    found: list[tuple[Comment, int, str]] = []
    for i, e in enumerate(edits):
        old = source[e.start : e.end]
        lines = _lines(old)
        dropped = _deleted_with_statement(source, e)
        for c in comments_of(old):
            if c not in dropped:  # (those are deleted with their statement, on purpose)
                found.append((c, i, _anchor(lines, c)))
    missing = Counter(_missing([c.text for c, _, _ in found], held))
    out = []
    for c, i, anchor in found:
        if missing[c.text] > 0:
            missing[c.text] -= 1
            out.append(_Lost(c, i, anchor))
    return out


def _lf(code: str) -> str:
    """``code`` with ``\n`` newlines (tokenize reads a file of ``\r`` newlines as one line)."""
    return code.replace("\r\n", "\n").replace("\r", "\n")


def _lines(text: str, keepends: bool = False) -> list[str]:
    """The lines of ``text`` as Python counts them (``str.splitlines`` also splits at form feeds
    and other separators that are no newline to the tokenizer)."""
    lines = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", text)
    return lines if keepends else [ln.rstrip("\r\n") for ln in lines]


def _newline(source: str) -> str:
    return "\r\n" if "\r\n" in source else "\r" if "\r" in source else "\n"


def _has_code(text: str) -> bool:
    return any(line.strip() and not line.strip().startswith("#") for line in _lines(text))


def _anchor(lines: list[str], c: Comment) -> str:
    """The code a comment is about: the code of its line, or the next line of code below it (with
    the lines that continue it while brackets are open)."""
    if c.trailing:
        return lines[c.line].split("#", 1)[0]
    out: list[str] = []
    depth = 0
    for line in lines[c.line + 1 :]:
        code = line.split("#", 1)[0]
        if not out and not code.strip():
            continue
        out.append(code)
        depth += sum(code.count(b) for b in "([{") - sum(code.count(b) for b in ")]}")
        if depth <= 0 or len(out) > 8:
            break
    return " ".join(out)


def _groups(lost: list[_Lost]) -> list[list[_Lost]]:
    """Runs of comment lines that stand one below the other (they go together, in order)."""
    groups: list[list[_Lost]] = []
    for item in lost:
        prev = groups[-1][-1] if groups else None
        if (
            prev is not None
            and prev.edit == item.edit
            and not prev.comment.trailing
            and not item.comment.trailing
            and item.comment.line == prev.comment.line + 1
        ):
            groups[-1].append(item)
        else:
            groups.append([item])
    return groups


#: names too common in pipeline code to tie a comment to a statement
_COMMON = frozenset(
    {"self", "ops", "fn", "ndd", "nvidia", "dali", "types", "True", "False", "None"}
)


def _put_back(source: str, edits: list[Edit], group: list[_Lost]) -> list[Edit]:
    """``edits`` with the comment lines of ``group`` above the statement of their new text that
    the comments are about: the one sharing the most names with the code they were about, in the
    edit that held them if it ties, the nearest to where they stood if it ties again; where none
    shares a name, where they stood."""
    home = group[0].edit
    old = source[edits[home].start : edits[home].end]
    where = group[0].comment.line / max(1, len(_lines(old)))
    names = set(_WORD.findall(group[-1].anchor)) - _COMMON
    best: tuple[tuple[int, int, float], int, int] | None = None  # (key, edit, line)
    for i, e in enumerate(edits):
        if not _whole_lines(source, e):
            continue
        lines = _lines(e.text)
        starts = _statement_starts(e.text) or [(0, 0)]
        for start, end in starts:
            shared = len(names & set(_WORD.findall(" ".join(lines[start:end]))))
            if not shared and i != home:
                continue
            near = -abs(start / max(1, len(lines)) - where) if i == home else -1.0
            key = (shared, int(i == home), near)
            if best is None or key > best[0]:
                best = (key, i, start)
    if best is None:
        return edits
    _, i, at = best
    e = edits[i]
    lines = _lines(e.text, keepends=True)
    if at < len(lines):
        indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    else:  # a deletion: the comments stay where they stood
        indent = _indent_at(source, e.start)
    newline = _newline(source)
    new = [f"{indent}{item.comment.text}{newline}" for item in group]
    text = "".join(lines[:at] + new + lines[at:])
    return edits[:i] + [Edit(e.start, e.end, text)] + edits[i + 1 :]


def _whole_lines(source: str, e: Edit) -> bool:
    """The edit replaces whole lines (it starts a line and its text ends one, or is empty)."""
    starts_line = e.start == 0 or source[e.start - 1] in "\r\n"
    return starts_line and (not e.text or e.text.endswith(("\n", "\r")))


def _indent_at(source: str, offset: int) -> str:
    line = source[offset:].split("\n", 1)[0]
    return line[: len(line) - len(line.lstrip())]


def _statement_starts(text: str) -> list[tuple[int, int]]:
    """(first line, end line) of each statement of ``text`` (0-based, end exclusive); the header
    of a compound statement is one, each statement of its body another."""
    try:
        starts = _token_starts(text)
    except (tokenize.TokenError, SyntaxError):
        return []
    ends = starts[1:] + [len(_lines(text))]
    return list(zip(starts, ends)) if starts else []


def _token_starts(text: str) -> list[int]:
    """The lines where a logical line begins. Lines are read without their indentation, so a
    piece of a block that ends shallower than it starts tokenizes too."""
    stripped = "".join(line.lstrip(" \t") + "\n" for line in _lines(text))
    starts: list[int] = []
    new_line = True
    for tok in tokenize.generate_tokens(io.StringIO(stripped).readline):
        if tok.type == tokenize.NEWLINE:
            new_line = True
        elif tok.type not in (tokenize.NL, tokenize.COMMENT, tokenize.ENDMARKER) and new_line:
            starts.append(tok.start[0] - 1)
            new_line = False
    return starts


def _same_code(source: str, old: tuple[Edit, ...], new: list[Edit]) -> bool:
    """The comments written back changed no code: the file parses to the same tree with ``new``
    as with ``old`` (a line written into a string would not), or did not parse with ``old``."""

    def tree(edits: list[Edit]) -> str | None:
        try:
            return ast.dump(ast.parse(splice(source, edits)))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None

    before = tree(list(old))
    return before is None or tree(new) == before
