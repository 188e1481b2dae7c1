"""Small libcst utilities every rule may use: walking, argument lists, names, literals.

Nothing here knows about DALI; the rules and the back end build on these.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

import libcst as cst
from libcst.metadata.scope_provider import Access

from dali_migrate.context import FileContext
from dali_migrate.cst_walk import children as children  # (where the rules take it from)
from dali_migrate.cst_walk import walk as walk


def in_source_order(ctx: FileContext, refs: Iterable[Access]) -> list[Access]:
    """Scope references (libcst keeps them in sets) sorted by where they are, so that what is
    derived from them (reasons, edits, TODOs) comes out the same on every run."""
    return sorted(
        refs, key=lambda r: (ctx.positions[r.node].start.line, ctx.positions[r.node].start.column)
    )


def within(ctx: FileContext, node: cst.CSTNode | None, container: cst.CSTNode | None) -> bool:
    """Whether ``node`` is ``container`` or lies inside it (nodes of ``ctx.module``)."""
    while node is not None and container is not None:
        if node is container:
            return True
        node = ctx.parents.get(node)
    return False


def nested(ctx: FileContext, node: cst.CSTNode, container: cst.CSTNode) -> bool:
    """``node`` belongs to a function defined inside the graph code (a helper, a lambda)."""
    cur = ctx.parents.get(node)
    while cur is not None and cur is not container:
        if isinstance(cur, (cst.FunctionDef, cst.Lambda)):
            return True
        cur = ctx.parents.get(cur)
    return False


def scope_label(ctx: FileContext, node: cst.CSTNode) -> str:
    """Where ``node`` is, in words a TODO can use whatever lines are inserted above it: "in
    `main()`", "in `Loader.__iter__()`", "in class `Loader`", "at module level"."""
    names: list[str] = []
    cur = ctx.parents.get(node)
    kind = ""
    while cur is not None:
        if isinstance(cur, (cst.FunctionDef, cst.ClassDef)):
            names.insert(0, cur.name.value)
            kind = kind or ("function" if isinstance(cur, cst.FunctionDef) else "class")
        cur = ctx.parents.get(cur)
    if not names:
        return "at module level"
    return f"in `{'.'.join(names)}()`" if kind == "function" else f"in class `{'.'.join(names)}`"


def use_text(ctx: FileContext, node: cst.CSTNode) -> str:
    """The code that uses ``node``, for a TODO: the call it is passed to or whose method it is
    (``print(loader)``, ``loader.close()``), else ``node`` itself; one line, not too long."""
    cur = node
    parent = ctx.parents.get(cur)
    while isinstance(parent, (cst.Arg, cst.Attribute, cst.Call)) and not isinstance(cur, cst.Call):
        cur, parent = parent, ctx.parents.get(parent)
    text = ctx.text(cur) if isinstance(cur, cst.Call) else ""
    return text if text and "\n" not in text and len(text) <= 60 else ctx.text(node)


# -- names -------------------------------------------------------------------------------------------


def source_of(node: cst.CSTNode) -> str:
    """The code of ``node`` alone, as libcst renders it."""
    return cst.Module([]).code_for_node(node)


def names_in(node: cst.CSTNode) -> set[str]:
    """Every plain name in ``node`` (reads, writes, attribute and keyword names alike)."""
    return {n.value for n in walk(node) if isinstance(n, cst.Name)}


def free_names(expr: cst.CSTNode) -> set[str]:
    """Plain names an expression reads (attribute names and keywords are not reads)."""
    attrs = {id(n.attr) for n in walk(expr) if isinstance(n, cst.Attribute)}
    keywords = {
        id(n.keyword) for n in walk(expr) if isinstance(n, cst.Arg) and n.keyword is not None
    }
    return {
        n.value for n in walk(expr) if isinstance(n, cst.Name) and id(n) not in attrs | keywords
    }


def called_defs(
    ctx: FileContext, root: cst.CSTNode
) -> dict[str, tuple[list[cst.FunctionDef], int]]:
    """The functions defined outside ``root`` that its code calls by name: for each name, the
    definitions Python finds where it is called (a module-level function, or one defined in a
    function around ``root``) and how many bindings of that name it finds there (more than one
    where the name is bound again). Code not in ``ctx.module`` as written finds the module's."""
    module = {s.name.value: s for s in ctx.module.body if isinstance(s, cst.FunctionDef)}
    out: dict[str, tuple[list[cst.FunctionDef], int]] = {}
    for call in walk(root):
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Name)):
            continue
        name = call.func.value
        scope = ctx.scopes.get(call)
        if scope is None:
            found: list[cst.CSTNode] = [module[name]] if name in module else []
        else:
            found = [n for a in scope[name] if (n := getattr(a, "node", None)) is not None]
        defs = [n for n in found if isinstance(n, cst.FunctionDef) and not within(ctx, n, root)]
        if defs:
            out[name] = (defs, len(found))
    return out


def sole_assignment(ctx: FileContext, value: cst.CSTNode) -> cst.Assign | None:
    """``name = value``: the assignment of which ``value`` is the whole right side, with one
    target, a plain name, alone on its line; None otherwise."""
    assign = ctx.parents.get(value)
    stmt = ctx.parents.get(assign)
    if (
        isinstance(assign, cst.Assign)
        and assign.value is value
        and len(assign.targets) == 1
        and isinstance(assign.targets[0].target, cst.Name)
        and isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
    ):
        return assign
    return None


def assigned_names(stmt: cst.CSTNode) -> set[str]:
    """Names bound in ``stmt`` by assignments and ``for`` targets."""
    names: set[str] = set()
    for n in walk(stmt):
        if isinstance(n, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For)):
            names |= names_in(n.target)
    return names


def fresh_name(base: str, taken: set[str], *alternatives: str) -> str:
    """The first of ``base``, ``alternatives``, ``base_``, ``base__``... not in ``taken``
    (which gets it): the one naming scheme of generated names."""
    for name in (base, *alternatives):
        if name not in taken:
            taken.add(name)
            return name
    name = base + "_"
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def param_names(fn: cst.FunctionDef) -> set[str]:
    p = fn.params
    return {x.name.value for x in [*p.posonly_params, *p.params, *p.kwonly_params]}


# -- arguments ---------------------------------------------------------------------------------------


def kwargs_of(call: cst.Call) -> dict[str, cst.Arg]:
    return {a.keyword.value: a for a in call.args if a.keyword is not None}


def positional(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None]


def has_star(call: cst.Call) -> bool:
    return any(a.star for a in call.args)


def _separator(args: list[cst.Arg]) -> cst.Comma:
    """The comma style between arguments already used by this call (one line or one per line)."""
    for a in args[:-1]:
        if isinstance(a.comma, cst.Comma):
            return _without_comments(a.comma)
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def _without_comments(comma: cst.Comma) -> cst.Comma:
    """``comma`` with its line break but not the comments after it (copied, they would repeat)."""
    after = comma.whitespace_after
    if not isinstance(after, cst.ParenthesizedWhitespace):
        return comma
    return comma.with_changes(
        whitespace_after=after.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[])
    )


def append_arg(args: list[cst.Arg], new: cst.Arg) -> list[cst.Arg]:
    """Add ``new`` after the last argument, keeping a trailing comma and the closing layout."""
    if not args:
        return [new]
    last = args[-1]
    sep = _separator(args)
    if isinstance(last.comma, cst.Comma):
        moved = new.with_changes(comma=last.comma, whitespace_after_arg=last.whitespace_after_arg)
    else:
        moved = new.with_changes(whitespace_after_arg=last.whitespace_after_arg)
    return args[:-1] + [
        last.with_changes(comma=sep, whitespace_after_arg=cst.SimpleWhitespace("")),
        moved,
    ]


def insert_arg(args: list[cst.Arg], index: int, new: cst.Arg) -> list[cst.Arg]:
    """Insert ``new`` before ``args[index]`` (or append when ``index`` is past the end)."""
    if index >= len(args):
        return append_arg(args, new)
    return args[:index] + [new.with_changes(comma=_separator(args))] + args[index:]


def remove_args(args: list[cst.Arg], names: set[str]) -> list[cst.Arg]:
    """Drop keyword arguments by name; the new last argument takes over the closing layout."""
    out: list[cst.Arg] = []
    for a in args:
        if a.keyword is not None and a.keyword.value in names:
            if a is args[-1] and out:
                out[-1] = out[-1].with_changes(
                    comma=a.comma, whitespace_after_arg=a.whitespace_after_arg
                )
            continue
        out.append(a)
    trailing = out and out[-1] is not args[-1] and isinstance(out[-1].comma, cst.Comma)
    if trailing and not isinstance(args[-1].comma, cst.Comma):
        out[-1] = out[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return out


def kwarg(name: str, value: cst.BaseExpression) -> cst.Arg:
    """``name=value``, written without spaces around ``=``."""
    return cst.Arg(keyword=cst.Name(name), value=value, equal=no_space_equal())


def no_space_equal() -> cst.AssignEqual:
    return cst.AssignEqual(
        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
    )


# -- literals ----------------------------------------------------------------------------------------


def truthy(arg: cst.Arg | None) -> bool:
    """A keyword argument that is given and not literally False, None or 0."""
    if arg is None:
        return False
    v = arg.value
    return not (isinstance(v, cst.Name) and v.value in ("False", "None")) and not (
        isinstance(v, cst.Integer) and v.value == "0"
    )


def literal(node: cst.CSTNode) -> Any:
    """The Python value of a literal expression (numbers, strings, lists, tuples), or raises ValueError."""
    code = cst.Module(body=[]).code_for_node(node)
    return ast.literal_eval(code.strip())


def is_literal(expr: cst.BaseExpression, values: tuple[object, ...]) -> bool:
    """``expr`` is an integer literal or ``None`` among ``values``."""
    if isinstance(expr, cst.Integer):
        return int(expr.value) in values
    if isinstance(expr, cst.Name) and expr.value == "None":
        return None in values
    return False


def is_docstring(stmt: cst.BaseStatement) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def int_index(sub: cst.Subscript) -> cst.BaseExpression | None:
    """The index of ``x[i]`` when it is one plain index (a number, a name or arithmetic)."""
    if len(sub.slice) == 1 and isinstance(sub.slice[0].slice, cst.Index):
        v = sub.slice[0].slice.value
        if isinstance(v, (cst.Integer, cst.Name, cst.UnaryOperation, cst.BinaryOperation)):
            return v
    return None


def block_statements(block: cst.BaseSuite) -> list[cst.BaseStatement]:
    """The statements of a block; a one-line suite (``def f(self): a; return b``) gives one
    line per small statement, as if it were written indented."""
    if isinstance(block, cst.SimpleStatementSuite):
        semicolon = cst.MaybeSentinel.DEFAULT
        return [cst.SimpleStatementLine([s.with_changes(semicolon=semicolon)]) for s in block.body]
    assert isinstance(block, cst.IndentedBlock)  # the other kind of suite
    return list(block.body)


def leading_lines(stmt: cst.BaseStatement) -> Sequence[cst.EmptyLine]:
    """The blank and comment lines above a statement (both kinds of statement have them)."""
    assert isinstance(stmt, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
    return stmt.leading_lines


_Node = TypeVar("_Node", bound=cst.CSTNode)


def visited(node: _Node, visitor: cst.CSTVisitorT) -> _Node:
    """``node.visit(visitor)`` for a visitor that replaces nodes one for one: it never removes
    ``node`` nor flattens it into several."""
    out = node.visit(visitor)
    assert not isinstance(out, (cst.RemovalSentinel, cst.FlattenSentinel))
    return out


def statement(small: cst.BaseSmallStatement, **changes: Any) -> cst.SimpleStatementLine:
    """One small statement on its own line."""
    return cst.SimpleStatementLine([small], **changes)


def comment_line(text: str) -> cst.EmptyLine:
    """A comment on its own line (``text`` starts with ``#``)."""
    return cst.EmptyLine(comment=cst.Comment(text))
