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
from typing import TypeVar

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
        return code
    try:
        wrapped, tail = split_trailing_comments(code)
        lines = _code_lines(lines, wrapped)
        for _ in range(_PASSES if lines else 0):  # (long comment lines need no tree)
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
            lines = _code_lines(_long_new_lines(old, wrapped, limit), wrapped)
            if not lines:
                break
        wrapped = _wrap_comments(old, wrapped + tail, limit)
        if wrapped != code and _meaning(wrapped) != _meaning(code):
            return code
    except (SyntaxError, cst.ParserSyntaxError, RecursionError, ValueError, tokenize.TokenError):
        return code
    return wrapped


def _wrap_comments(old: set[str], code: str, limit: int) -> str:
    """Long comment lines and one-line docstrings written by the migration, continued on the
    lines below; TODO markers stay one line each (a person reads and deletes them as one).
    ``old``: the lines of the input. A comment line of the input that the migration moved (to
    another indentation) is the user's, and stays as it was written. A long comment of the
    migration's that goes on over the lines below is wrapped as one paragraph with them (so
    that no word is left alone on a line between two full ones)."""
    users = {ln.strip() for ln in old if ln.lstrip().startswith("#")}
    lines = code.splitlines(keepends=True)
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        body = line.rstrip("\r\n")
        text = body.lstrip()
        indent = body[: len(body) - len(text)]
        end = line[len(body) :]
        i += 1
        if len(body) <= limit or body in old or TODO_PREFIX in text or text.rstrip() in users:
            out.append(line)
        elif text.startswith("# "):
            words = [text[2:]]
            while i < len(lines) and _continues(lines[i], indent, old, users):
                words.append(lines[i].strip()[2:])
                i += 1
            parts = _words(" ".join(words), limit - len(indent) - 2)
            out.extend(f"{indent}# {part}{end}" for part in parts)
        elif _ONE_LINE_DOCSTRING.fullmatch(text):  # the meaning check reverts a plain string
            parts = _words(text[3:-3], limit - len(indent))
            parts[0] = '"""' + parts[0]
            out.extend(f"{indent}{part}{end}" for part in [*parts[:-1], parts[-1] + '"""'])
        else:
            out.append(line)
    return "".join(out)


def _continues(line: str, indent: str, old: set[str], users: set[str]) -> bool:
    """``line`` is a comment line of the migration's at ``indent`` that goes on with the one
    above (not a TODO marker, nor a line of the input)."""
    body = line.rstrip("\r\n")
    text = body[len(indent) :]
    return (
        body.startswith(indent)
        and text.startswith("# ")
        and text[2:3] not in ("", " ")
        and not text[2:].split(" ", 1)[0].endswith(":")  # a note of its own ("max_batch_size:")
        and body not in old
        and text.rstrip() not in users
        and TODO_PREFIX not in text
    )


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


def _code_lines(numbers: set[int], code: str) -> set[int]:
    """Those of the lines ``numbers`` (1-based) of ``code`` that hold code, not only a comment
    (beyond its end: set aside)."""
    lines = code.splitlines()
    return {n for n in numbers if n <= len(lines) and not lines[n - 1].lstrip().startswith("#")}


def _long_new_lines(old: set[str], code: str, limit: int) -> set[int]:
    """1-based numbers of the lines of ``code`` over ``limit`` that are not lines of the input
    (``old``)."""
    return {
        i
        for i, line in enumerate(code.splitlines(), 1)
        if len(line) > limit and line not in old and not line.rstrip().endswith("\\")
    }


#: bracketed expressions whose contents can go on their own indented line
_B = TypeVar("_B", cst.ListComp, cst.SetComp, cst.DictComp, cst.List, cst.Dict)


class _Candidates(cst.CSTVisitor):
    """For each target line, the bracketed expression on it (wholly: a call, a comprehension, a
    list or dict display, a parenthesized tuple) whose contents are the longest: the outermost,
    as a formatter splits first."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, targets: set[int], lines: list[str]) -> None:
        super().__init__()
        self.targets = targets
        self.lines = lines
        self.best: dict[int, tuple[int, cst.CSTNode]] = {}
        self.fstrings = 0
        self.args = 0  # inside a call's arguments: a display there is split only at a line's start

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        self.fstrings += 1  # a line break inside a replacement field needs Python 3.12

    def visit_Arg(self, node: cst.Arg) -> None:
        self.args += 1

    def leave_Arg(self, original_node: cst.Arg) -> None:
        self.args -= 1

    def leave_FormattedString(self, original_node: cst.FormattedString) -> None:
        self.fstrings -= 1

    def visit_Call(self, node: cst.Call) -> None:
        if not node.args:
            return
        if any(isinstance(a.value, cst.GeneratorExp) and not a.value.lpar for a in node.args):
            return  # f(x for x in y) takes no trailing comma
        self._consider(node, len(_EMPTY.code_for_node(node.func)))

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._consider(node, 0)

    def visit_SetComp(self, node: cst.SetComp) -> None:
        self._consider(node, 0)

    def visit_DictComp(self, node: cst.DictComp) -> None:
        self._consider(node, 0)

    def visit_List(self, node: cst.List) -> None:
        self._consider(node, 0)

    def visit_Dict(self, node: cst.Dict) -> None:
        self._consider(node, 0)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if not _param_items(node.params):
            return
        line = self.get_metadata(PositionProvider, node.params).start.line
        if self.lines[line - 1].lstrip().startswith(("def ", "async def ")):
            self._consider(node, -2, at=node.params)  # -2: its parentheses count too

    def visit_Tuple(self, node: cst.Tuple) -> None:
        # (its position leaves out the parentheses: a split tuple's elements are on one line)
        if (
            len(node.lpar) == 1
            and node.elements
            and not isinstance(node.lpar[0].whitespace_after, cst.ParenthesizedWhitespace)
        ):
            self._consider(node, 0)

    def _consider(self, node: cst.CSTNode, head: int, at: cst.CSTNode | None = None) -> None:
        """``node`` as the line's candidate when its contents (``at``'s span, less ``head``
        columns of callee) are the longest there."""
        pos = self.get_metadata(PositionProvider, at if at is not None else node)
        line = pos.start.line
        if self.fstrings or line not in self.targets or pos.end.line != line:
            return
        if isinstance(node, (cst.List, cst.Dict)) and not node.elements:
            return
        text = self.lines[line - 1]
        start = pos.start.column - (1 if isinstance(node, cst.Tuple) else 0)  # its "("
        if head == 0 and self.args and start != len(text) - len(text.lstrip()):
            return  # f(a, b=[1, 2]): the call's arguments go one per line first
        size = pos.end.column - pos.start.column - head
        if size > self.best.get(line, (-1, node))[0]:
            self.best[line] = (size, node)

    def chosen(self) -> dict[cst.CSTNode, str]:
        """Each chosen expression, with the indentation of its line."""
        out = {}
        for line, (_, node) in self.best.items():
            text = self.lines[line - 1]
            out[node] = text[: len(text) - len(text.lstrip())]
        return out


class _Wrapper(cst.CSTTransformer):
    def __init__(self, chosen: dict[cst.CSTNode, str], limit: int) -> None:
        super().__init__()
        self.chosen = chosen
        self.limit = limit

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        indent = self.chosen.get(original_node)
        return updated_node if indent is None else _split(updated_node, indent, self.limit)

    def leave_FunctionDef(
        self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef
    ) -> cst.FunctionDef:
        indent = self.chosen.get(original_node)
        if indent is None:
            return updated_node
        return _split_params(updated_node, indent, self.limit)

    def leave_Tuple(self, original_node: cst.Tuple, updated_node: cst.Tuple) -> cst.Tuple:
        indent = self.chosen.get(original_node)
        return updated_node if indent is None else _split_tuple(updated_node, indent, self.limit)

    def leave_ListComp(
        self, original_node: cst.ListComp, updated_node: cst.ListComp
    ) -> cst.ListComp:
        return self._brackets(original_node, updated_node)

    def leave_SetComp(self, original_node: cst.SetComp, updated_node: cst.SetComp) -> cst.SetComp:
        return self._brackets(original_node, updated_node)

    def leave_DictComp(
        self, original_node: cst.DictComp, updated_node: cst.DictComp
    ) -> cst.DictComp:
        return self._brackets(original_node, updated_node)

    def leave_List(self, original_node: cst.List, updated_node: cst.List) -> cst.List:
        return self._brackets(original_node, updated_node)

    def leave_Dict(self, original_node: cst.Dict, updated_node: cst.Dict) -> cst.Dict:
        return self._brackets(original_node, updated_node)

    def _brackets(self, original: _B, updated: _B) -> _B:
        indent = self.chosen.get(original)
        return updated if indent is None else _split_brackets(updated, indent, self.limit)


def _split_brackets(node: _B, indent: str, limit: int) -> _B:
    """``[a for a in b]`` -> its contents on one indented line, the bracket below; a
    comprehension too long for that line gets its ``for`` on a line of its own."""
    inner = indent + _INDENT
    for_in = getattr(node, "for_in", None)
    if for_in is not None and len(inner) + len(_EMPTY.code_for_node(node)) - 2 > limit:
        node = node.with_changes(for_in=for_in.with_changes(whitespace_before=_break(inner)))
    opening = node.lbracket if hasattr(node, "lbracket") else node.lbrace  # type: ignore[attr-defined]
    closing = node.rbracket if hasattr(node, "rbracket") else node.rbrace  # type: ignore[attr-defined]
    changes = {
        "lbracket" if hasattr(node, "lbracket") else "lbrace": opening.with_changes(
            whitespace_after=_break(inner)
        ),
        "rbracket" if hasattr(node, "rbracket") else "rbrace": closing.with_changes(
            whitespace_before=_break(indent)
        ),
    }
    if isinstance(node, (cst.List, cst.Set, cst.Dict)):
        changes["elements"] = _spread(list(node.elements), indent, limit)
    return node.with_changes(**changes)


_PARAM_FIELDS = ("posonly_params", "posonly_ind", "params", "star_arg", "kwonly_params")


def _param_items(params: cst.Parameters) -> list[tuple[str, int]]:
    """The parameters in order, as (field, index) (index -1: a single-node field);
    ``**kwargs`` last."""
    items: list[tuple[str, int]] = []
    for name in (*_PARAM_FIELDS, "star_kwarg"):
        value = getattr(params, name)
        if isinstance(value, (list, tuple)):
            items += [(name, i) for i in range(len(value))]
        elif isinstance(value, (cst.Param, cst.ParamStar, cst.ParamSlash)):
            items.append((name, -1))
    return items


def _split_params(fn: cst.FunctionDef, indent: str, limit: int) -> cst.FunctionDef:
    """``def f(a, b):`` -> its parameters on one indented line when they fit there, else one per
    line with a trailing comma; the closing parenthesis on a line of its own."""
    params = fn.params
    items = _param_items(params)
    inner = indent + _INDENT
    one_line = _EMPTY.code_for_node(params).strip().rstrip(",")
    fits = len(inner) + len(one_line) <= limit
    gap = _SPACE if fits else _break(inner)
    changes: dict[str, object] = {}
    for k, (name, index) in enumerate(items):
        node = getattr(params, name) if index < 0 else getattr(params, name)[index]
        last = k == len(items) - 1
        comma = (
            cst.Comma(whitespace_after=gap) if not (last and fits) else cst.MaybeSentinel.DEFAULT
        )
        new = node.with_changes(comma=comma)
        if isinstance(node, cst.Param):
            new = new.with_changes(
                whitespace_after_param=_break(indent) if last else _NONE,
                comma=cst.Comma() if last and not fits else comma,
            )
        if index < 0:
            changes[name] = new
        else:
            current = list(changes.get(name, getattr(params, name)))  # type: ignore[call-overload]
            current[index] = new
            changes[name] = current
    return fn.with_changes(
        whitespace_before_params=_break(inner), params=params.with_changes(**changes)
    )


def _split_tuple(node: cst.Tuple, indent: str, limit: int) -> cst.Tuple:
    """``(a, b)`` -> its elements on one indented line when they fit there, else one per line,
    with a trailing comma; the closing parenthesis below."""
    elements = _spread(list(node.elements), indent, limit, tuple_=True)
    inner = indent + _INDENT
    return node.with_changes(
        elements=elements,
        lpar=[node.lpar[0].with_changes(whitespace_after=_break(inner))],
        rpar=[node.rpar[0].with_changes(whitespace_before=_break(indent))],
    )


def _spread(elements: list, indent: str, limit: int, tuple_: bool = False) -> list:
    """The elements of a display on one line at ``indent`` plus one level when they fit, else
    one per line with a trailing comma (a one-element tuple keeps its comma)."""
    inner = indent + _INDENT
    bare = [e.with_changes(comma=cst.MaybeSentinel.DEFAULT) for e in elements]
    one_line = ", ".join(_EMPTY.code_for_node(e) for e in bare)
    fits = len(inner) + len(one_line) + 1 <= limit
    gap = _SPACE if fits else _break(inner)
    out = [e.with_changes(comma=cst.Comma(whitespace_after=gap)) for e in bare[:-1]]
    last = (
        bare[-1]
        if fits and (len(bare) > 1 or not tuple_)
        else bare[-1].with_changes(comma=cst.Comma())
    )
    return [*out, last]


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
