"""Readers made under an ``if`` on configuration (``if with_masks: masks, _ = fn.readers.file()``).

Pipeline mode evaluates such a test once, when it defines the graph: the reader exists or not.
The generator builds the reader before its loop under the same test, and calls it for each batch
under the same ``if`` of the loop body. That is the same only when the test gives the same value
both times: it reads no data node, calls nothing, and reads no name the loop assigns
(parameters, closure variables, names set before the first input, and attributes of them:
configuration). Any other enclosing
statement (a loop, ``with``, ``try``) or test keeps the definition, with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import free_names, walk

#: one enclosing test and whether the reader is in its ``if`` branch (True) or its ``else``
Guard = tuple[cst.BaseExpression, bool]


def guards_of(
    ctx: FileContext, container: cst.CSTNode, stmt: cst.CSTNode, nodes: set[str], what: str
) -> tuple[list[Guard], cst.BaseStatement] | str:
    """The tests under which ``stmt`` (a statement of the graph code) runs, outermost first, and
    the statement of the body that holds it; or why they cannot be carried over."""
    guards: list[Guard] = []
    cur: cst.CSTNode = stmt
    body = getattr(container, "body", None)
    while True:
        block = ctx.parents.get(cur)
        holder = ctx.parents.get(block) if block is not None else None
        if block is body:
            assert isinstance(cur, cst.BaseStatement)
            guards.reverse()
            return guards, cur
        if isinstance(holder, cst.Else):
            cur, branch = ctx.parents[holder], False
        elif isinstance(holder, cst.If) and block is holder.body:
            cur, branch = holder, True
        elif isinstance(block, cst.If) and block.orelse is cur:  # elif
            cur, branch = block, False
        else:
            kind = _KINDS.get(type(holder or block), "compound")
            return f"{what} is called inside a `{kind}` statement of the pipeline body"
        assert isinstance(cur, cst.If)
        why = _not_static(ctx, cur.test, nodes, what)
        if why is not None:
            return why
        guards.append((cur.test, branch))


#: how a reason names the statements a reader cannot be made in
_KINDS: dict[type, str] = {
    cst.For: "for",
    cst.While: "while",
    cst.With: "with",
    cst.Try: "try",
    cst.TryStar: "try",
    cst.FunctionDef: "def",
    cst.ClassDef: "class",
    cst.Match: "match",
}


def _not_static(
    ctx: FileContext, test: cst.BaseExpression, nodes: set[str], what: str
) -> str | None:
    """Why ``test`` may not give the same value before the loop and in it (None: it does, if
    the names it reads are not assigned for each batch, which the emitter checks)."""
    text = ctx.text(test)
    if any(isinstance(n, (cst.Call, cst.Await, cst.NamedExpr, cst.Yield)) for n in walk(test)):
        return (
            f"{what} is made under `if {text}`, which calls code: the generator would call it "
            "again for each batch"
        )
    names = free_names(test)
    if names & nodes or any(
        isinstance(n, (cst.Name, cst.Attribute)) and ctx.is_fn_ref(n) for n in walk(test)
    ):
        return f"{what} is made under `if {text}`, a test on data"
    return None


def guard_test(guards: list[Guard]) -> cst.BaseExpression:
    """One test that holds where all ``guards`` do: ``a and not (b)``."""
    parts: list[cst.BaseExpression] = []
    for test, branch in guards:
        value = _grouped(test) if not branch or len(guards) > 1 else test
        parts.append(value if branch else cst.UnaryOperation(cst.Not(), value))
    out = parts[0]
    for part in parts[1:]:
        out = cst.BooleanOperation(out, cst.And(), part)
    return out


def _grouped(test: cst.BaseExpression) -> cst.BaseExpression:
    """``test`` in parentheses where ``not``/``and`` would bind into it."""
    loose = (cst.BooleanOperation, cst.IfExp, cst.Lambda, cst.UnaryOperation)
    if isinstance(test, loose) and not test.lpar:
        return test.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return test


def exclusive(one: list[Guard], other: list[Guard]) -> bool:
    """Code under ``one`` and code under ``other`` never both run: they sit in different
    branches of one ``if`` (``if``/``elif``/``else``)."""
    for (test, branch), (other_test, other_branch) in zip(one, other):
        if test is not other_test:
            return False
        if branch != other_branch:
            return True
    return False


def skeleton(
    stmt: cst.BaseStatement | cst.BaseSmallStatement, made: dict[int, list[cst.BaseStatement]]
) -> cst.BaseStatement | None:
    """The ``if`` statement ``stmt`` of the graph code with only the statements ``made`` gives
    (by id of the statement they replace) in its branches, each where that statement was: the
    readers built before the loop, under the tests they were made under. None where no branch
    keeps anything."""
    if not isinstance(stmt, cst.If):
        return None
    body = _kept(stmt.body.body, made)
    orelse: cst.If | cst.Else | None = None
    if isinstance(stmt.orelse, cst.If):
        elif_ = skeleton(stmt.orelse, made)
        orelse = elif_ if isinstance(elif_, cst.If) else None
    elif isinstance(stmt.orelse, cst.Else):
        rest = _kept(stmt.orelse.body.body, made)
        orelse = cst.Else(cst.IndentedBlock(rest)) if rest else None
    if not body and orelse is None:
        return None
    if not body and isinstance(orelse, cst.Else):  # only the else branch makes a reader
        test = cst.UnaryOperation(cst.Not(), _grouped(stmt.test))
        return cst.If(test, orelse.body)
    if not body:
        body = [cst.SimpleStatementLine([cst.Pass()])]
    return cst.If(stmt.test, cst.IndentedBlock(body), orelse=orelse)


def _kept(
    stmts: Sequence[cst.BaseStatement] | Sequence[cst.BaseSmallStatement],
    made: dict[int, list[cst.BaseStatement]],
) -> list[cst.BaseStatement]:
    """What ``made`` gives for ``stmts``, the statements of a block (or the small statements
    of a one-line block, which make no reader)."""
    out: list[cst.BaseStatement] = []
    for s in stmts:
        if id(s) in made:
            out += made[id(s)]
        else:
            nested = skeleton(s, made)
            out += [nested] if nested is not None else []
    return out
