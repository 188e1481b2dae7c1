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
        head, tail = split_trailing_comments(code)
        lines = _code_lines(lines, head)
        pieces = _by_statement(old, head, lines, limit)
        if pieces is None:
            return _wrap_module(old, head, tail, lines, limit, code)
        before, after = pieces[-1]
        pieces[-1] = (before + tail, after + tail)
        pieces = [(before, _wrap_comments(old, after, limit)) for before, after in pieces]
        if any(
            before != after and _meaning(after, k == 0) != _meaning(before, k == 0)
            for k, (before, after) in enumerate(pieces)
        ):
            return code
    except (SyntaxError, cst.ParserSyntaxError, RecursionError, ValueError, tokenize.TokenError):
        return code
    return "".join(after for _, after in pieces)


def _wrap_module(
    old: set[str], head: str, tail: str, lines: set[int], limit: int, code: str
) -> str:
    """:func:`wrap_new_lines` over the whole module at once (``code``: ``head + tail``)."""
    wrapped = (_passes(old, head, lines, limit) or head) if lines else head
    wrapped = _wrap_comments(old, wrapped + tail, limit)
    if wrapped != code and _meaning(wrapped) != _meaning(code):
        return code
    return wrapped


def _by_statement(
    old: set[str], code: str, lines: set[int], limit: int
) -> list[tuple[str, str]] | None:
    """Each top-level statement of ``code`` (with the lines above it) and what it becomes with
    the calls on ``lines`` wrapped. A line is wrapped by what is on it, so only the statements
    that hold such a line are parsed: a simple statement alone on its lines (moved to the left
    margin), else the top-level statement it is in, and each comes out as from the passes over
    the whole module. None when ``code`` is better wrapped as a whole (see :func:`_pieces`)."""
    cut = _pieces(code, lines)
    if cut is None:
        return None
    source, statements = cut
    first = _FIRST_NEWLINE.search(code)
    newline = first.group(0) if first else "\n"  # (libcst's when there is none)
    out = []
    for pieces in statements:
        before, after = [], []
        for piece in pieces:
            wrapped = _wrap_piece(old, source, piece, limit, newline)
            if wrapped is None:  # (not seen) the statements alone do not read back as they were
                return None
            before.append("".join(source[piece[0] : piece[1]]))
            after.append(wrapped)
        out.append(("".join(before), "".join(after)))
    return out


#: lines ``start`` to ``end`` (0-based, end excluded) of a module, the lines among them to
#: wrap (counted from 1 at ``start``) and the indentation all of them start with
_Piece = tuple[int, int, set[int], str]


def _wrap_piece(
    old: set[str], source: list[str], piece: _Piece, limit: int, newline: str
) -> str | None:
    """The lines of ``piece`` wrapped; None when they cannot be wrapped on their own."""
    start, end, targets, indent = piece
    if not targets:
        return "".join(source[start:end])
    text = "".join(line[len(indent) :] for line in source[start:end])
    if indent:  # moved to the left margin: the limit moves with it
        old = {line[len(indent) :] for line in old if line.startswith(indent)}
    try:
        wrapped = _passes(old, text, targets, limit - len(indent), newline)
    except cst.ParserSyntaxError:
        return None
    if wrapped is None or not indent:
        return wrapped
    return "".join(indent + line for line in wrapped.splitlines(keepends=True))


def _passes(
    old: set[str], code: str, lines: set[int], limit: int, newline: str | None = None
) -> str | None:
    """Up to ``_PASSES`` passes of wrapping over ``code``, a whole module; or with ``newline``,
    statements of a module whose line break is ``newline``: then None when libcst does not
    give them back as they were or reads another newline."""
    wrapped = code
    for _ in range(_PASSES):
        tree = cst.parse_module(wrapped)
        if tree.code != wrapped or newline is not None and tree.default_newline != newline:
            if newline is not None:
                return None
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
    return wrapped


#: the first line break of a module: the one libcst writes for the breaks it adds
_FIRST_NEWLINE = re.compile(r"\r\n?|\n")
#: line breaks of ``str.splitlines`` that end no line for Python (and libcst)
_ODD_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _pieces(code: str, lines: set[int]) -> tuple[list[str], list[list[_Piece]]] | None:
    """The lines of ``code`` and the pieces of each top-level statement (no two statements
    share a line; the lines above one go with it): the statement whole, or cut around the
    simple statements that hold ``lines`` when all its lines of ``lines`` are in such ones.
    None when ``code`` cannot be cut so (a line break that ``str.splitlines`` sees and Python
    does not would shift the numbers)."""
    if _ODD_BREAKS.search(code):
        return None
    tree = ast.parse(code)
    ends: list[int] = []  # the last line of each top-level statement
    for stmt in tree.body:
        first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])
        if ends and first <= ends[-1]:
            ends[-1] = max(ends[-1], stmt.end_lineno or stmt.lineno)
        else:
            ends.append(stmt.end_lineno or stmt.lineno)
    source = code.splitlines(keepends=True)
    if not ends or ends[-1] > len(source):
        return None
    ends[-1] = len(source)  # what follows the last statement goes with it
    inner = _simple_statements(tree.body, source, lines)
    statements: list[list[_Piece]] = []
    start = 0
    for end in ends:
        held = {n for n in lines if start < n <= end}
        if held and all(n in inner for n in held):
            pieces: list[_Piece] = []
            at = start
            for first, last, indent in sorted({inner[n] for n in held}):
                if at < first:
                    pieces.append((at, first, set(), ""))
                pieces.append((first, last, {n - first for n in held if first < n <= last}, indent))
                at = last
            if at < end:
                pieces.append((at, end, set(), ""))
            statements.append(pieces)
        else:
            statements.append([(start, end, {n - start for n in held}, "")])
        start = end
    return source, statements


def _simple_statements(
    body: list[ast.stmt], source: list[str], lines: set[int]
) -> dict[int, tuple[int, int, str]]:
    """For each of ``lines`` in a simple statement of ``body`` (nested ones too) that is alone
    on its lines, all of them indented at least as its first: the statement's lines (0-based,
    end excluded) and the indentation of its first."""
    touching: dict[int, list[ast.stmt]] = {}
    stack = list(body)
    while stack:
        node = stack.pop()
        held = [n for n in lines if node.lineno <= n <= (node.end_lineno or node.lineno)]
        if not held:
            continue
        blocks = [getattr(node, f, None) for f in ("body", "orelse", "finalbody")]
        blocks += [h.body for h in getattr(node, "handlers", ())]
        blocks += [c.body for c in getattr(node, "cases", ())]
        if hasattr(node, "body") or hasattr(node, "cases"):  # compound: its blocks
            stack.extend(s for block in blocks if isinstance(block, list) for s in block)
            continue
        for n in held:
            touching.setdefault(n, []).append(node)
    out: dict[int, tuple[int, int, str]] = {}
    for n, stmts in touching.items():
        stmt = stmts[0]
        first, last = stmt.lineno - 1, stmt.end_lineno or stmt.lineno
        text = source[first]
        indent = text[: len(text) - len(text.lstrip(" \t"))]
        rest = source[last - 1].encode("utf-8")[stmt.end_col_offset or 0 :].strip()
        if (
            len(stmts) == 1
            and len(indent.encode("utf-8")) == stmt.col_offset
            and (not rest or rest.startswith(b"#"))
            and all(line.startswith(indent) for line in source[first:last])
        ):
            out[n] = (first, last, indent)
    return out


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


def _meaning(code: str, first: bool = True) -> str:
    """The tree of ``code`` and the words of its comments, docstrings compared by their words
    (a wrapped comment or docstring means the same). ``first``: ``code`` starts the module
    (else it is statements further down, and its first one is no docstring)."""
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if node is tree and not first:
            continue
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
