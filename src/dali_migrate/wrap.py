"""Wrap the long lines the migration wrote, as a formatter would, leaving the user's lines alone.

A line is the tool's when it does not occur in the input. A call on such a line that makes it
longer than the limit is split after its opening parenthesis: its arguments go on one indented
line when they fit there, else one per line with a trailing comma, and the closing parenthesis
on a line of its own. Calls nested in it are split on the next pass when their line is still
too long. The result must parse to the same tree as the unwrapped code, or the code is
returned as it was::

    reader = ndd.readers.File(file_root=data_dir, random_shuffle=True, shard_id=rank, num_shards=n)

becomes, at a limit of 80::

    reader = ndd.readers.File(
        file_root=data_dir, random_shuffle=True, shard_id=rank, num_shards=n
    )
"""

from __future__ import annotations

import ast
import io
import re
import textwrap
import tokenize

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from .cst_text import split_trailing_comments
from .fixes import TODO_PREFIX

DEFAULT_LINE_LENGTH = 100
_INDENT = "    "
_PASSES = 8


def wrap_new_lines(source: str, code: str, limit: int = DEFAULT_LINE_LENGTH) -> str:
    """``code`` with the calls on its long lines that are not in ``source`` wrapped."""
    old = set(source.splitlines())
    lines = _long_new_lines(old, code, limit)
    if not lines:
        return code  # (comment lines too are long lines)
    try:
        before = _meaning(code)
        wrapped, tail = split_trailing_comments(code)
        for _ in range(_PASSES):
            tree = cst.parse_module(wrapped)
            if tree.code != wrapped:
                break  # (not seen once the comments at the end are set aside)
            module = MetadataWrapper(tree, unsafe_skip_copy=True)
            found = _Candidates(lines, wrapped.splitlines())
            module.visit(found)
            text = module.module.visit(_Wrapper(found.chosen(), limit)).code
            if text == wrapped:
                break
            wrapped = text
            lines = _long_new_lines(old, wrapped, limit)
            if not lines:
                break
        wrapped = _wrap_comments(old, wrapped + tail, limit)
        if _meaning(wrapped) != before:
            return code
    except (SyntaxError, cst.ParserSyntaxError, RecursionError, ValueError, tokenize.TokenError):
        return code
    return wrapped


def _wrap_comments(old: set[str], code: str, limit: int) -> str:
    """Long comment lines and one-line docstrings written by the migration, continued on the
    lines below; TODO markers stay one line each (a person reads and deletes them as one).
    ``old``: the lines of the input. A comment line of the input that the migration moved (to
    another indentation) is the user's, and stays as it was written."""
    users = {ln.strip() for ln in old if ln.lstrip().startswith("#")}
    out = []
    for line in code.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        text = body.lstrip()
        indent = body[: len(body) - len(text)]
        end = line[len(body) :]
        if len(body) <= limit or body in old or TODO_PREFIX in text or text.rstrip() in users:
            out.append(line)
        elif text.startswith("# "):
            parts = _words(text[2:], limit - len(indent) - 2)
            out.extend(f"{indent}# {part}{end}" for part in parts)
        elif _ONE_LINE_DOCSTRING.fullmatch(text):  # the meaning check reverts a plain string
            parts = _words(text[3:-3], limit - len(indent))
            parts[0] = '"""' + parts[0]
            out.extend(f"{indent}{part}{end}" for part in [*parts[:-1], parts[-1] + '"""'])
        else:
            out.append(line)
    return "".join(out)


_ONE_LINE_DOCSTRING = re.compile(r'"""[^"\\]+"""')


def _words(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]


def _meaning(code: str) -> str:
    """The tree of ``code`` and the words of its comments, docstrings compared by their words
    (a wrapped comment or docstring means the same)."""
    tree = ast.parse(code)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            doc = body[0].value
            if isinstance(doc, ast.Constant) and isinstance(doc.value, str):
                doc.value = " ".join(doc.value.split())
    return ast.dump(tree) + "\n" + " ".join(_comment_words(code))


def _comment_words(code: str) -> list[str]:
    tokens = tokenize.generate_tokens(io.StringIO(code).readline)
    return [w for t in tokens if t.type == tokenize.COMMENT for w in t.string[1:].split()]


def _long_new_lines(old: set[str], code: str, limit: int) -> set[int]:
    """1-based numbers of the lines of ``code`` over ``limit`` that are not lines of the input
    (``old``)."""
    return {
        i
        for i, line in enumerate(code.splitlines(), 1)
        if len(line) > limit and line not in old and not line.rstrip().endswith("\\")
    }


class _Candidates(cst.CSTVisitor):
    """For each target line, the call on it (wholly) whose arguments are the longest."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, targets: set[int], lines: list[str]) -> None:
        super().__init__()
        self.targets = targets
        self.lines = lines
        self.best: dict[int, tuple[int, cst.Call]] = {}
        self.fstrings = 0

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        self.fstrings += 1  # a line break inside a replacement field needs Python 3.12

    def leave_FormattedString(self, original_node: cst.FormattedString) -> None:
        self.fstrings -= 1

    def visit_Call(self, node: cst.Call) -> None:
        pos = self.get_metadata(PositionProvider, node)
        line = pos.start.line
        if self.fstrings or line not in self.targets or pos.end.line != line or not node.args:
            return
        if any(isinstance(a.value, cst.GeneratorExp) and not a.value.lpar for a in node.args):
            return  # f(x for x in y) takes no trailing comma
        size = pos.end.column - pos.start.column - len(_EMPTY.code_for_node(node.func))
        if size > self.best.get(line, (-1, node))[0]:
            self.best[line] = (size, node)

    def chosen(self) -> dict[cst.Call, str]:
        """Each chosen call, with the indentation of its line."""
        out = {}
        for line, (_, call) in self.best.items():
            text = self.lines[line - 1]
            out[call] = text[: len(text) - len(text.lstrip())]
        return out


class _Wrapper(cst.CSTTransformer):
    def __init__(self, chosen: dict[cst.Call, str], limit: int) -> None:
        super().__init__()
        self.chosen = chosen
        self.limit = limit

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        indent = self.chosen.get(original_node)
        if indent is None:
            return updated_node
        return _split(updated_node, indent, self.limit)


def _split(call: cst.Call, indent: str, limit: int) -> cst.Call:
    args = [
        a.with_changes(comma=cst.MaybeSentinel.DEFAULT, whitespace_after_arg=_NONE)
        for a in call.args
    ]
    inner = indent + _INDENT
    one_line = ", ".join(_EMPTY.code_for_node(a) for a in args)
    if len(args) == 1 or len(inner) + len(one_line) <= limit:
        spaced = [a.with_changes(comma=cst.Comma(whitespace_after=_SPACE)) for a in args[:-1]]
        last = args[-1].with_changes(whitespace_after_arg=_break(indent))
    else:
        spaced = [
            a.with_changes(comma=cst.Comma(whitespace_after=_break(inner))) for a in args[:-1]
        ]
        last = args[-1].with_changes(comma=cst.Comma(whitespace_after=_break(indent)))
    return call.with_changes(whitespace_before_args=_break(inner), args=[*spaced, last])


_EMPTY = cst.Module([])
_NONE = cst.SimpleWhitespace("")
_SPACE = cst.SimpleWhitespace(" ")


def _break(indent: str) -> cst.ParenthesizedWhitespace:
    """A line break (in the module's own newline) followed by ``indent``."""
    return cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(), indent=False, last_line=cst.SimpleWhitespace(indent)
    )
