"""Readers made under an ``if`` on configuration (``if with_masks: masks, _ = fn.readers.file()``).

Pipeline mode evaluates such a test once, when it defines the graph: the reader exists or not.
The generator builds the reader before its loop under the same test, and calls it for each batch
under the same ``if`` of the loop body. That is the same only when the test gives the same value
both times: it reads no data node and no name the loop assigns (parameters, closure variables,
names set before the first input, and attributes of them: configuration). A test that calls
code (``if self.train and self._masking():``) is decided once, as pipeline mode did: bound to a
name before the readers (:func:`decisions`), which the ``if`` before the loop and the one in it
test. External sources made under such tests are made the same way. Any other enclosing
statement (a loop, ``with``, ``try``) or test keeps the definition, with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import free_names, fresh_name, walk

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
    if any(isinstance(n, (cst.Await, cst.NamedExpr, cst.Yield)) for n in walk(test)):
        return f"{what} is made under `if {text}`, which awaits, yields or binds a name"
    names = free_names(test)
    if names & nodes or any(
        isinstance(n, (cst.Name, cst.Attribute)) and ctx.is_fn_ref(n) for n in walk(test)
    ):
        return f"{what} is made under `if {text}`, a test on data"
    return None


def branch_tests(
    ctx: FileContext,
    stmts: Sequence[cst.CSTNode],
    nodes: set[str],
    unsettled: set[str],
    outer: Sequence[Guard] = (),
) -> list[list[Guard]]:
    """The ``if`` statements among ``stmts`` (the loop's code, and the branches of those) whose
    test calls code (``if aug.wants_flip():``), each with the tests it runs under, outermost
    first: pipeline mode decided each once, when it defined the graph, so the generator decides
    it once too (:func:`decisions`). Only tests on configuration: no data, no DALI, none of the
    ``unsettled`` names (assigned in the loop, or defined after the decisions)."""
    out: list[list[Guard]] = []
    for s in stmts:
        if isinstance(s, cst.If):
            out += _if_tests(ctx, s, nodes, unsettled, list(outer))
    return out


def _if_tests(
    ctx: FileContext, stmt: cst.If, nodes: set[str], unsettled: set[str], outer: list[Guard]
) -> list[list[Guard]]:
    test = stmt.test
    if _not_static(ctx, test, nodes, "") is not None or free_names(test) & unsettled:
        return []
    here: list[Guard] = [*outer, (test, True)]
    out = [here] if any(isinstance(n, cst.Call) for n in walk(test)) else []
    out += branch_tests(ctx, stmt.body.body, nodes, unsettled, here)
    if isinstance(stmt.orelse, cst.If):
        out += _if_tests(ctx, stmt.orelse, nodes, unsettled, [*outer, (test, False)])
    elif isinstance(stmt.orelse, cst.Else):
        out += branch_tests(ctx, stmt.orelse.body.body, nodes, unsettled, [*outer, (test, False)])
    return out


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


def decisions(
    guards: list[Guard], decided: dict[int, cst.Name], taken: set[str]
) -> list[tuple[cst.BaseExpression, cst.BaseStatement]]:
    """``name = test`` for each test of ``guards`` that calls code and is not in ``decided`` yet
    (which gets its name), each after its test: evaluated once, as when pipeline mode defined
    the graph, and only where pipeline mode reached it (``name = a and (test)`` under ``if a:``,
    ``name = not (a) and (test)`` for ``elif test:``)."""
    out: list[tuple[cst.BaseExpression, cst.BaseStatement]] = []
    for i, (test, _) in enumerate(guards):
        if id(test) in decided or not any(isinstance(n, cst.Call) for n in walk(test)):
            continue
        value = test
        if i:
            before = [(decided.get(id(t), t), b) for t, b in guards[:i]]
            value = cst.BooleanOperation(guard_test(before), cst.And(), _grouped(test))
        name = cst.Name(fresh_name(_decision_base(test), taken))
        decided[id(test)] = name
        out.append((test, cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(name)], value)])))
    return out


#: calls whose name says nothing of the decision (``cfg.get("extra")``: named after "extra")
_GENERIC = {
    *("get", "getattr", "hasattr", "bool", "len", "isinstance", "any", "all", "callable"),
    *("type", "int", "float", "str", "min", "max", "abs", "round", "sum"),
}


def _decision_base(test: cst.BaseExpression) -> str:
    """A name for the value of ``test``: after the function it calls (``use_masking`` for
    ``self._masking()``), or the key it reads (``cfg.get("extra")``: ``use_extra``)."""
    call = next(n for n in walk(test) if isinstance(n, cst.Call))
    func = call.func
    name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
    name = name.strip("_")
    if name in _GENERIC or not name.isidentifier():
        keys = [a.value.evaluated_value for a in call.args if isinstance(a.value, cst.SimpleString)]
        name = keys[0] if keys and isinstance(keys[0], str) and keys[0].isidentifier() else ""
    if not name:
        return "condition"
    return name if name.startswith(("use_", "do_", "is_", "has_", "with_")) else f"use_{name}"


def skeleton(
    stmt: cst.BaseStatement | cst.BaseSmallStatement,
    made: dict[int, list[cst.BaseStatement]],
    decided: dict[int, cst.Name] | None = None,
) -> cst.BaseStatement | None:
    """The ``if`` statement ``stmt`` of the graph code with only the statements ``made`` gives
    (by id of the statement they replace) in its branches, each where that statement was: the
    readers built before the loop, under the tests they were made under (the names of those
    ``decided`` once, by id of the test). None where no branch keeps anything."""
    if not isinstance(stmt, cst.If):
        return None
    decided = decided or {}
    test = decided.get(id(stmt.test), stmt.test)
    body = _kept(stmt.body.body, made, decided)
    orelse: cst.If | cst.Else | None = None
    if isinstance(stmt.orelse, cst.If):
        elif_ = skeleton(stmt.orelse, made, decided)
        orelse = elif_ if isinstance(elif_, cst.If) else None
    elif isinstance(stmt.orelse, cst.Else):
        rest = _kept(stmt.orelse.body.body, made, decided)
        orelse = cst.Else(cst.IndentedBlock(rest)) if rest else None
    if not body and orelse is None:
        return None
    if not body and isinstance(orelse, cst.Else):  # only the else branch makes a reader
        return cst.If(cst.UnaryOperation(cst.Not(), _grouped(test)), orelse.body)
    if not body:
        body = [cst.SimpleStatementLine([cst.Pass()])]
    return cst.If(test, cst.IndentedBlock(body), orelse=orelse)


def _kept(
    stmts: Sequence[cst.BaseStatement] | Sequence[cst.BaseSmallStatement],
    made: dict[int, list[cst.BaseStatement]],
    decided: dict[int, cst.Name],
) -> list[cst.BaseStatement]:
    """What ``made`` gives for ``stmts``, the statements of a block (or the small statements
    of a one-line block, which make no reader)."""
    out: list[cst.BaseStatement] = []
    for s in stmts:
        if id(s) in made:
            out += made[id(s)]
        else:
            nested = skeleton(s, made, decided)
            out += [nested] if nested is not None else []
    return out
