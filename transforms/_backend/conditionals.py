"""Data-dependent ``if``/``else`` of ``enable_conditionals`` pipelines, lowered to per-sample
logic (a component of DM200/DM201, called by ``emit_generator_body``; not a rule of its own).

Before (``@pipeline_def(enable_conditionals=True, ...)``)::

    flip = fn.random.coin_flip()
    if flip:
        out = fn.flip(images, horizontal=1)
        out = fn.noise.gaussian(out, stddev=10.0)
    else:
        out = fn.rotate(images, angle=90)

After (in the migrated generator)::

    flip = ndd.random.coin_flip(batch_size=jpegs.batch_size, rng=rng)
    take = [i for i, p in enumerate(flip.tensors) if bool(np.asarray(p))]
    skip = [i for i, p in enumerate(flip.tensors) if not bool(np.asarray(p))]
    out_samples = [None] * flip.batch_size
    if take:
        images_take = ndd.as_batch([images.tensors[i] for i in take])
        out_take = ndd.flip(images_take, horizontal=1)
        out_take = ndd.noise.gaussian(out_take, stddev=10.0, rng=rng)
        for i, sample in zip(take, out_take.tensors):
            out_samples[i] = sample
    else:
        # pipeline mode drew the random states of this branch's operators even with no samples
        rng.advance(7)
    if skip:
        ...
    out = ndd.as_batch(out_samples)

A Batch has no truth value (``if batch:`` is always true; docs/dali-facts.md [truth]), so the predicate is read
sample by sample. Each branch runs once on the sub-batch of its samples (``ndd.as_batch`` of the
picked tensors: ``Batch.select`` with a list gives the whole batch in DALI 2.4, [select]), only when it has
samples (operators fail on empty batches); its random operators get the sub-batch's size.
A branch without samples still advances the RNG by 7 words per random call ([rng]),
and branches run in source order, so the draws keep the order of the pipeline's graph. Names a
branch assigns are merged back in sample order; a name only one branch assigns keeps its old
samples elsewhere.

``elif`` is an ``else`` holding one nested ``if``; an ``if`` on data nested in a branch is
lowered the same way on that branch's sub-batch (its own branches on sub-batches of it).
``and``/``or``/``not`` in a data predicate follow DALI 2.4, checked by running it: ``not`` is
per sample; ``a and b`` / ``a or b`` are lazy, ``b`` runs as a branch of ``a`` (on the
sub-batch of the samples ``a`` leaves open, random operators in it with that batch size and
their states drawn even when it is empty)::

    if labels[0] == 1 and fn.random.coin_flip(dtype=types.BOOL):
        ...

becomes::

    cond = labels.slice[0] == 1
    holds = [bool(np.asarray(p)) for p in cond.tensors]
    # DALI evaluates the right operand of `and` only on the samples its left operand leaves open
    rest = [i for i, h in enumerate(holds) if h]
    if rest:
        cond_rest = ndd.random.coin_flip(batch_size=len(rest), dtype=types.BOOL, rng=rng)
        for i, p in zip(rest, cond_rest.tensors):
            holds[i] = bool(np.asarray(p))
    else:
        rng.advance(7)
    take = [i for i, h in enumerate(holds) if h]
    ...

(DALI itself requires the operands of ``and``/``or`` to be 0-d booleans and raises otherwise.)

Supported: ``if``/``elif``/``else`` and nested ``if`` on data, the predicate a data node, an
expression that produces one (``x > 5``), or ``and``/``or``/``not`` of those; the branches
plain assignments and expression statements of DALI operators and further ``if``s on data.
Refused (the pipeline keeps its TODO): ``while`` on data (DALI rejects it too: the loop test
calls ``DataNode.__bool__``, a TypeError), conditional expressions on data (DALI rejects them the
same way), ``and``/``or``/``not`` on data outside an ``if`` test, a Python value inside a data
``and``/``or`` (DALI picks the logic by its value while tracing), data ``if`` inside loops,
``with`` or Python ``if``, other compound statements inside a branch, calls of non-DALI
functions inside a branch or a short-circuited operand (their random draws cannot be counted), a
branch assigning something that is not a data node, and a name assigned by one branch only that
did not exist before the ``if``. An ``if`` on plain Python values stays a Python ``if``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import fresh_name, walk
from .._local import LocalEnv, produces_node
from .model import Refused

#: builtins a branch may call: they neither draw random numbers nor hide graph code
SAFE_CALLS = {
    "int",
    "float",
    "bool",
    "str",
    "len",
    "abs",
    "min",
    "max",
    "round",
    "tuple",
    "list",
    "range",
}
#: words of RNG state one ndd random call draws (docs/dali-facts.md [rng])
STATE_WORDS = 7
EMPTY_BRANCH_COMMENT = (
    "# pipeline mode drew the random states of this branch's operators even with no samples"
)


def _names(node: cst.CSTNode) -> set[str]:
    attrs = {id(n.attr) for n in walk(node) if isinstance(n, cst.Attribute)}
    keywords = {
        id(n.keyword) for n in walk(node) if isinstance(n, cst.Arg) and n.keyword is not None
    }
    return {
        n.value for n in walk(node) if isinstance(n, cst.Name) and id(n) not in attrs | keywords
    }


def _ordered_names(node: cst.CSTNode) -> list[str]:
    """``_names`` in source order (generated code reads its sub-batches in this order)."""
    names = _names(node)
    return list(
        dict.fromkeys(n.value for n in walk(node) if isinstance(n, cst.Name) and n.value in names)
    )


def data_names(ctx: FileContext, container: cst.CSTNode, nodes: set[str]) -> set[str]:
    """``nodes`` and every name assigned from a DALI operator call or from other data names
    anywhere in ``container`` (flow-insensitive; ops whose output count the catalog leaves open,
    like resize, still give data)."""
    names = set(nodes)
    assigns = [
        (t.target.value, n.value)
        for n in walk(container)
        if isinstance(n, cst.Assign)
        for t in n.targets
        if isinstance(t.target, cst.Name)
    ]
    assigns += [
        (n.target.value, n.value)
        for n in walk(container)
        if isinstance(n, cst.AugAssign) and isinstance(n.target, cst.Name)
    ]
    changed = True
    while changed:
        changed = False
        for name, value in assigns:
            if name not in names and (
                _names(value) & names
                or any(
                    isinstance(c, cst.Call) and ctx.fn_op(c.func) is not None for c in walk(value)
                )
            ):
                names.add(name)
                changed = True
    return names


def _owner_nodes(ctx: FileContext, stmt: cst.CSTNode, nodes: set[str]) -> set[str]:
    block = ctx.parents.get(stmt)
    owner = ctx.parents.get(block) if block is not None else None
    return data_names(ctx, owner, nodes) if owner is not None else set(nodes)


def is_data_test(ctx: FileContext, test: cst.BaseExpression, nodes: set[str]) -> bool:
    """True when ``test`` reads a data node (a name holding one, or a DALI operator call)."""
    if _names(test) & nodes:
        return True
    return any(isinstance(n, cst.Call) and ctx.fn_op(n.func) is not None for n in walk(test))


def _is_data_if(ctx: FileContext, node: cst.CSTNode, nodes: set[str]) -> bool:
    return isinstance(node, cst.If) and is_data_test(ctx, node.test, nodes)


def _is_logical(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.BooleanOperation) or (
        isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not)
    )


def has_data_branches(ctx: FileContext, body: cst.CSTNode, nodes: set[str]) -> bool:
    nodes = data_names(ctx, body, nodes)
    return any(
        isinstance(n, (cst.If, cst.While, cst.IfExp)) and is_data_test(ctx, n.test, nodes)
        for n in walk(body)
    )


def branch_reasons(ctx: FileContext, body: list[cst.BaseStatement], nodes: set[str]) -> list[str]:
    """Why the data-dependent branches of a pipeline body cannot be migrated (empty: they can)."""
    reasons: list[str] = []
    if body:
        nodes = _owner_nodes(ctx, body[0], nodes)
    handled: set[int] = (
        set()
    )  # the data `if`s lowered (nested and elif included) and the logic of their tests
    for stmt in body:
        if _is_data_if(ctx, stmt, nodes):
            reasons += if_reasons(ctx, stmt, nodes)
            handled |= _handled_ids(ctx, stmt, nodes)
    for stmt in body:
        for n in walk(stmt):
            if isinstance(n, cst.While) and is_data_test(ctx, n.test, nodes):
                # DALI 2.4 itself rejects it: the loop test calls DataNode.__bool__ (TypeError)
                reasons.append(
                    "a `while` loop on data: DALI conditionals reject it too (TypeError when the "
                    "pipeline is defined)"
                )
            elif isinstance(n, cst.IfExp) and is_data_test(ctx, n.test, nodes):
                reasons.append(
                    "a conditional expression (`a if c else b`) on data is not migrated yet"
                )
            elif (
                isinstance(n, cst.If) and id(n) not in handled and is_data_test(ctx, n.test, nodes)
            ):
                reasons.append(
                    "an `if` on data inside a loop, a `with` or a Python `if` is not migrated yet"
                )
            elif _is_logical(n) and id(n) not in handled and is_data_test(ctx, n, nodes):
                reasons.append(
                    f"`{ctx.text(n)}`: `and`/`or`/`not` on data outside an `if` test is not "
                    "migrated yet"
                )
    return list(dict.fromkeys(reasons))


def _handled_ids(ctx: FileContext, stmt: cst.If, nodes: set[str]) -> set[int]:
    ids = {id(stmt)}
    test = stmt.test
    stack = [test]
    while stack:  # the and/or/not tree at the top of the test
        t = stack.pop()
        if _is_logical(t):
            ids.add(id(t))
            stack += [t.left, t.right] if isinstance(t, cst.BooleanOperation) else [t.expression]
    for branch in _branches(stmt):
        for s in branch:
            if _is_data_if(ctx, s, nodes):
                ids |= _handled_ids(ctx, s, nodes)
    return ids


def _strip_not(test: cst.BaseExpression) -> tuple[cst.BaseExpression, bool]:
    negated = False
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, negated = test.expression, not negated
    return test, negated


def _atoms(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of the and/or/not tree of a test, left to right (evaluation order)."""
    test, _ = _strip_not(test)
    if isinstance(test, cst.BooleanOperation):
        return _atoms(test.left) + _atoms(test.right)
    return [test]


def _pred_reasons(ctx: FileContext, test: cst.BaseExpression, nodes: set[str]) -> list[str]:
    reasons: list[str] = []
    atoms = _atoms(test)
    for atom in atoms:
        data = produces_node(ctx, atom, nodes) or (
            len(atoms) > 1
            and is_data_test(ctx, atom, nodes)
            and not _call_reasons(ctx, atom, nodes)
        )  # `x.shape()[0] > 10` too
        if not data:
            if len(atoms) == 1:
                reasons.append(f"the data predicate `{ctx.text(test)}` is not one node")
            else:
                reasons.append(
                    f"`{ctx.text(atom)}` in the data predicate `{ctx.text(test)}` is not a data "
                    "node"
                    " (DALI chooses between Python and per-sample logic by its value when the "
                    "pipeline is defined)"
                )
        elif any(_is_logical(n) for n in walk(atom)):
            reasons.append(
                f"`and`/`or`/`not` inside the operand `{ctx.text(atom)}` of a data predicate is "
                "not migrated yet"
            )
    for atom in atoms[1:]:  # short-circuited operands run on sub-batches, like branch code
        reasons += _call_reasons(ctx, atom, nodes)
    return reasons


def _call_reasons(ctx: FileContext, node: cst.CSTNode, nodes: set[str]) -> list[str]:
    reasons = []
    for n in walk(node):
        if isinstance(n, cst.Call) and ctx.fn_op(n.func) is None:
            q = ctx.qualname(n.func) or ""
            plain = (
                isinstance(n.func, cst.Name)
                and n.func.value in SAFE_CALLS
                and not q.startswith("__main__")
            )
            method = (
                isinstance(n.func, cst.Attribute)
                and _names(n.func.value) <= nodes
                and bool(_names(n.func.value))
            )
            if not (plain or method or q.startswith("nvidia.dali")):
                reasons.append(
                    f"{ctx.text(n.func)}(...) is called inside an `if` on data: its random draws "
                    "cannot be counted"
                )
    return reasons


def _branches(stmt: cst.If) -> tuple[list[cst.BaseStatement], list[cst.BaseStatement]]:
    """The statements of both branches; an ``elif`` is an ``else`` holding one nested ``if``."""
    orelse = stmt.orelse
    if isinstance(orelse, cst.If):
        return list(stmt.body.body), [orelse]
    return list(stmt.body.body), list(orelse.body.body) if isinstance(orelse, cst.Else) else []


def if_reasons(ctx: FileContext, stmt: cst.If, nodes: set[str]) -> list[str]:
    reasons = _pred_reasons(ctx, stmt.test, nodes)
    assigned: list[list[str]] = []
    for branch in _branches(stmt):
        names: list[str] = []
        for s in branch:
            if _is_data_if(ctx, s, nodes):
                # nested (or elif): its test and branches run on this branch's sub-batch
                reasons += if_reasons(ctx, s, nodes)
                reasons += _call_reasons(ctx, s.test, nodes)
                names += _assigned([s])
                continue
            if not isinstance(s, cst.SimpleStatementLine):
                reasons.append(
                    "a compound statement other than an `if` on data inside an `if` on data is "
                    "not migrated yet"
                )
                continue
            for small in s.body:
                if isinstance(small, cst.Assign):
                    for t in small.targets:
                        if not isinstance(t.target, cst.Name) or not _is_node(
                            ctx, small.value, nodes
                        ):
                            reasons.append(
                                f"`{ctx.text(t.target)} = ...` inside an `if` on data does not "
                                "assign one data node"
                            )
                        if isinstance(t.target, cst.Name):
                            names.append(t.target.value)
                elif isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name):
                    names.append(small.target.value)
                elif not isinstance(small, (cst.Expr, cst.Pass)):
                    reasons.append(
                        f"`{ctx.text(small)}` inside an `if` on data is not migrated yet"
                    )
            reasons += _call_reasons(ctx, s, nodes)
        assigned.append(names)
    for name in dict.fromkeys(assigned[0] + assigned[1]):
        if (name in assigned[0]) != (name in assigned[1]) and not _bound_before(ctx, stmt, name):
            reasons.append(f"`{name}` is assigned in only one branch of the `if` on data")
    return reasons


def _is_node(ctx: FileContext, expr: cst.BaseExpression, nodes: set[str]) -> bool:
    """``produces_node``, and ``a if flag else b`` on a plain Python ``flag``."""
    if isinstance(expr, cst.IfExp):
        return (
            not is_data_test(ctx, expr.test, nodes)
            and _is_node(ctx, expr.body, nodes)
            and _is_node(ctx, expr.orelse, nodes)
        )
    if isinstance(expr, cst.Call) and (op := ctx.fn_op(expr.func)) is not None:
        return op.target.num_outputs in (
            1,
            None,
        )  # None: resize and the like, one output unless asked
    return produces_node(ctx, expr, nodes)


def _bound_before(ctx: FileContext, stmt: cst.If, name: str) -> bool:
    scope = ctx.scopes.get(stmt)
    if scope is None:
        return False
    line = ctx.line_of(stmt)
    for a in scope.assignments[name]:
        node = a.node
        inside = False
        p = node
        while p is not None:
            if p is stmt:
                inside = True
                break
            p = ctx.parents.get(p)
        if not inside and ctx.line_of(node) < line:
            return True
    return False


def _random_calls(ctx: FileContext, body: list[cst.CSTNode]) -> int:
    return sum(
        1
        for s in body
        for n in walk(s)
        if isinstance(n, cst.Call) and (op := ctx.fn_op(n.func)) is not None and op.target.is_random
    )


class _Rename(cst.CSTTransformer):
    """Rename plain names (not attribute names, not keywords) of generated code."""

    def __init__(self, names: dict[str, str]) -> None:
        super().__init__()
        self.names = names

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        return updated.with_changes(value=self.names.get(original.value, original.value))


def _stmt(code: str) -> cst.BaseStatement:
    return cst.parse_statement(code)


def _comment(text: str) -> list[cst.EmptyLine]:
    return [cst.EmptyLine(comment=cst.Comment(text))]


class _Lowerer:
    """Lowers one top-level ``if`` on data (and the ``if``s nested in it) to per-sample code."""

    def __init__(
        self,
        ctx: FileContext,
        lower_node: Callable[[cst.CSTNode, LocalEnv], cst.CSTNode],
        taken: set[str],
        nodes: set[str],
    ) -> None:
        self.ctx, self.lower_node, self.taken, self.nodes = ctx, lower_node, taken, nodes

    def fresh(self, base: str) -> str:
        return fresh_name(base, self.taken)

    def advance_else(self, env: LocalEnv, draws: int) -> cst.Else | None:
        """``else: rng.advance(7 * draws)``: an empty sub-batch still consumes its random states."""
        if not draws:
            return None
        if env.rng is None:
            raise Refused("a random operator inside an `if` on data without an RNG")
        words = str(STATE_WORDS) if draws == 1 else f"{STATE_WORDS} * {draws}"
        advance = _stmt(f"{self.ctx.render(env.rng, [])}.advance({words})\n").with_changes(
            leading_lines=_comment(EMPTY_BRANCH_COMMENT)
        )
        return cst.Else(body=cst.IndentedBlock([advance]))

    def sub_batches(
        self, reads: list[str], idx: str, rename: dict[str, str]
    ) -> list[cst.BaseStatement]:
        return [
            _stmt(f"{rename[n]} = {self.ctx.ndd}.as_batch([{n}.tensors[i] for i in {idx}])\n")
            for n in reads
        ]

    # -- the predicate ---------------------------------------------------------------------

    def holds(
        self,
        expr: cst.BaseExpression,
        negate: bool,
        idx: str | None,
        holds: str,
        env: LocalEnv,
        out: list,
    ) -> None:
        """Statements that set ``holds[i]`` to the truth of ``expr`` for every sample ``i`` of
        ``idx`` (None: all samples, creating ``holds``), evaluating and/or lazily as DALI does:
        the right operand runs only on the sub-batch of the samples the left one leaves open."""
        ctx, np = self.ctx, self.ctx.np
        expr, flipped = _strip_not(expr)
        negate ^= flipped
        if isinstance(expr, cst.BooleanOperation):
            conj = isinstance(expr.operator, cst.And) != negate  # De Morgan keeps who runs where
            self.holds(expr.left, negate, idx, holds, env, out)
            rest = self.fresh("rest")
            keep = "" if conj else "not "
            if idx is None:
                code = f"{rest} = [i for i, h in enumerate({holds}) if {keep}h]\n"
            else:
                code = f"{rest} = [i for i in {idx} if {keep}{holds}[i]]\n"
            op = "and" if isinstance(expr.operator, cst.And) else "or"
            note = f"# DALI evaluates the right operand of `{op}` only on the samples its left operand leaves open"
            out.append(_stmt(code).with_changes(leading_lines=_comment(note)))
            self.holds(expr.right, negate, rest, holds, env, out)
            return
        truth = f"not bool({np}.asarray(p))" if negate else f"bool({np}.asarray(p))"
        if idx is None:
            if isinstance(expr, cst.Name):
                source = expr.value
            else:
                source = self.fresh("cond")
                out.append(
                    cst.SimpleStatementLine(
                        [
                            cst.Assign(
                                [cst.AssignTarget(cst.Name(source))], self.lower_node(expr, env)
                            )
                        ]
                    )
                )
            out.append(_stmt(f"{holds} = [{truth} for p in {source}.tensors]\n"))
            return
        if isinstance(expr, cst.Name):
            out.append(
                _stmt(
                    f"for i in {idx}:\n    {holds}[i] = "
                    f"{truth.replace('(p)', f'({expr.value}.tensors[i])')}\n"
                )
            )
            return
        suffix = idx.rstrip("_")
        reads = [n for n in _ordered_names(expr) if n in self.nodes]
        rename = {n: self.fresh(f"{n}_{suffix}") for n in reads}
        cond = self.fresh(f"cond_{suffix}")
        sub_env = LocalEnv(
            batch_size=cst.Call(cst.Name("len"), [cst.Arg(cst.Name(idx))]),
            rng=env.rng,
            nodes=env.nodes,
        )
        body = self.sub_batches(reads, idx, rename)
        value = self.lower_node(expr, sub_env).visit(_Rename(rename))
        body.append(
            cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(cond))], value)])
        )
        body.append(_stmt(f"for i, p in zip({idx}, {cond}.tensors):\n    {holds}[i] = {truth}\n"))
        out.append(
            cst.If(
                test=cst.Name(idx),
                body=cst.IndentedBlock(body),
                orelse=self.advance_else(env, _random_calls(ctx, [expr])),
            )
        )

    # -- the statement ---------------------------------------------------------------------

    def lower_if(self, stmt: cst.If, env: LocalEnv) -> list[cst.BaseStatement]:
        ctx, np, ndd = self.ctx, self.ctx.np, self.ctx.ndd
        out: list[cst.BaseStatement] = []
        test, negated = _strip_not(stmt.test)
        if isinstance(test, cst.BooleanOperation):
            holds = self.fresh("holds")
            self.holds(stmt.test, False, None, holds, env, out)
            take, skip = self.fresh("take"), self.fresh("skip")
            out.append(_stmt(f"{take} = [i for i, h in enumerate({holds}) if h]\n"))
            out.append(_stmt(f"{skip} = [i for i, h in enumerate({holds}) if not h]\n"))
            size = f"len({holds})"
        else:
            if isinstance(test, cst.Name):
                pred_name = test.value
            else:
                pred_name = self.fresh("cond")
                out.append(
                    cst.SimpleStatementLine(
                        [
                            cst.Assign(
                                [cst.AssignTarget(cst.Name(pred_name))], self.lower_node(test, env)
                            )
                        ]
                    )
                )
            take, skip = self.fresh("take"), self.fresh("skip")
            sample = f"bool({np}.asarray(p))"
            first = f"not {sample}" if negated else sample
            second = sample if negated else f"not {sample}"
            out.append(
                _stmt(f"{take} = [i for i, p in enumerate({pred_name}.tensors) if {first}]\n")
            )
            out.append(
                _stmt(f"{skip} = [i for i, p in enumerate({pred_name}.tensors) if {second}]\n")
            )
            size = f"{pred_name}.batch_size"
        if stmt.leading_lines:
            out[0] = out[0].with_changes(
                leading_lines=list(stmt.leading_lines) + list(out[0].leading_lines)
            )

        then, orelse = _branches(stmt)
        assigned = [_assigned(b) for b in (then, orelse)]
        merged = list(dict.fromkeys(assigned[0] + assigned[1]))
        samples = {name: self.fresh(f"{name}_samples") for name in merged}
        for name in merged:
            init = (
                f"[None] * {size}" if all(name in a for a in assigned) else f"list({name}.tensors)"
            )
            out.append(_stmt(f"{samples[name]} = {init}\n"))

        for branch, idx, names in ((then, take, assigned[0]), (orelse, skip, assigned[1])):
            if not branch or all(
                isinstance(s, cst.SimpleStatementLine)
                and all(isinstance(x, cst.Pass) for x in s.body)
                for s in branch
            ):
                continue
            suffix = idx.rstrip("_")
            reads = _outer_reads(branch, self.nodes)
            rename = {n: self.fresh(f"{n}_{suffix}") for n in dict.fromkeys(reads + names)}
            sub_env = LocalEnv(
                batch_size=cst.Call(cst.Name("len"), [cst.Arg(cst.Name(idx))]),
                rng=env.rng,
                nodes=env.nodes,
            )
            body = self.sub_batches(reads, idx, rename)
            for s in branch:
                if isinstance(s, cst.If):  # validated: an `if` on data (nested, or an elif)
                    body += [n.visit(_Rename(rename)) for n in self.lower_if(s, sub_env)]
                else:
                    body.append(self.lower_node(s, sub_env).visit(_Rename(rename)))
            for n in dict.fromkeys(names):
                body.append(
                    _stmt(
                        f"for i, sample in zip({idx}, {rename[n]}.tensors):\n    {samples[n]}[i] "
                        "= sample\n"
                    )
                )
            out.append(
                cst.If(
                    test=cst.Name(idx),
                    body=cst.IndentedBlock(body),
                    orelse=self.advance_else(env, _random_calls(ctx, branch)),
                )
            )

        for name in merged:
            out.append(_stmt(f"{name} = {ndd}.as_batch({samples[name]})\n"))
        return out


def lower_branches(
    ctx: FileContext,
    stmt: cst.BaseStatement,
    env: LocalEnv,
    lower_node: Callable[[cst.CSTNode, LocalEnv], cst.CSTNode],
    taken: set[str],
) -> list[cst.BaseStatement] | None:
    """The per-sample form of ``if <data node>: ... else: ...`` (see the module docstring), or
    None when ``stmt`` is not an ``if`` on data. ``lower_node`` applies the local rules to one
    original node with the given environment; ``taken`` are the names already in use (new names are
    added to it). Unsupported shapes raise the back end's ``Refused``."""

    nodes = _owner_nodes(ctx, stmt, env.nodes)
    if not _is_data_if(ctx, stmt, nodes):
        if any(
            isinstance(n, (cst.If, cst.While, cst.IfExp)) and is_data_test(ctx, n.test, nodes)
            for n in walk(stmt)
        ):
            raise Refused("an `if`/`while` on data inside other statements is not migrated yet")
        return None
    reasons = if_reasons(ctx, stmt, nodes)
    if reasons:
        raise Refused("; ".join(dict.fromkeys(reasons)))
    return _Lowerer(ctx, lower_node, taken, nodes).lower_if(stmt, env)


def _assigned(branch: list[cst.BaseStatement]) -> list[str]:
    """Names a branch assigns, those of the ``if``s nested in it included."""
    names: list[str] = []
    for s in branch:
        if isinstance(s, cst.If):
            for sub in _branches(s):
                names += _assigned(sub)
            continue
        body = getattr(s, "body", ())
        if isinstance(body, cst.IndentedBlock):  # a for/while/with/try: what its block assigns
            names += _assigned(list(body.body))
            continue
        if isinstance(s, cst.BaseSmallStatement):  # the body of a one-line `if c: a = 1; b = 2`
            smalls: Sequence = (s,)
        else:
            smalls = body.body if isinstance(body, cst.SimpleStatementSuite) else body
        for small in smalls:
            if isinstance(small, cst.Assign):
                names += [t.target.value for t in small.targets if isinstance(t.target, cst.Name)]
            elif isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name):
                names.append(small.target.value)
    return list(dict.fromkeys(names))


def _outer_reads(
    branch: list[cst.BaseStatement], nodes: set[str], bound: set[str] | None = None
) -> list[str]:
    """Data nodes a branch reads before assigning them: they need the branch's sub-batch. A
    nested ``if`` reads its test, what its branches read, and the names only one of its
    branches assigns (their other samples are kept)."""
    reads: list[str] = []
    bound = set() if bound is None else set(bound)
    for s in branch:
        if isinstance(s, cst.If):
            used = [n for n in _ordered_names(s.test) if n in nodes]
            then, orelse = _branches(s)
            used += _outer_reads(then, nodes, bound) + _outer_reads(orelse, nodes, bound)
            a, b = _assigned(then), _assigned(orelse)
            used += [n for n in dict.fromkeys(a + b) if (n in a) != (n in b) and n in nodes]
            reads += [n for n in dict.fromkeys(used) if n not in bound and n not in reads]
            bound |= set(a + b)
            continue
        for small in getattr(s, "body", ()):
            if isinstance(small, cst.Assign):
                used, targets = _names(small.value), [t.target for t in small.targets]
            elif isinstance(small, cst.AugAssign):
                used, targets = _names(small.value) | _names(small.target), [small.target]
            else:
                used, targets = _names(small), []
            reads += sorted((used & nodes) - bound - set(reads), key=lambda n: _first_pos(small, n))
            for t in targets:
                bound |= _names(t)
    return reads


def _first_pos(node: cst.CSTNode, name: str) -> int:
    for i, n in enumerate(walk(node)):
        if isinstance(n, cst.Name) and n.value == name:
            return i
    return 0
