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

A Batch has no truth value (``if batch:`` is always true, pitfall 2), so the predicate is read
sample by sample. Each branch runs once on the sub-batch of its samples (``ndd.as_batch`` of the
picked tensors: ``Batch.select`` with a list is broken in DALI 2.4, pitfall 1), only when it has
samples (ops fail on empty batches, pitfall 18); its random operators get the sub-batch's size.
A branch without samples still advances the RNG by 7 words per random call (pitfall 8, row 20),
and branches run in source order, so the draws keep the order of the pipeline's graph. Names a
branch assigns are merged back in sample order; a name only one branch assigns keeps its old
samples elsewhere.

Supported: ``if <pred>:`` / ``if not <pred>:`` with or without ``else``, where ``<pred>`` is a
data node or an expression that produces one (``x > 5``), at the top level of the pipeline body,
whose branches are plain assignments and expression statements of DALI operators. Refused (the
pipeline keeps its TODO): ``while`` and conditional expressions on data, ``elif``, ``and``/``or``
on data predicates, data ``if`` nested in other statements, compound statements inside a branch,
calls of non-DALI functions inside a branch (their random draws cannot be counted), a branch
assigning something that is not a data node, and a name assigned by one branch only that did
not exist before the ``if``. An ``if`` on plain Python values stays a Python ``if``.
"""

from __future__ import annotations

from typing import Callable

import libcst as cst

from dali_migrate.context import FileContext

from ._local import LocalEnv, produces_node, walk

#: builtins a branch may call: they neither draw random numbers nor hide graph code
SAFE_CALLS = {"int", "float", "bool", "str", "len", "abs", "min", "max", "round", "tuple", "list", "range"}
#: words of RNG state one ndd random call draws (dali-semantics section 2.1)
STATE_WORDS = 7


def _names(node: cst.CSTNode) -> set[str]:
    attrs = {id(n.attr) for n in walk(node) if isinstance(n, cst.Attribute)}
    keywords = {id(n.keyword) for n in walk(node) if isinstance(n, cst.Arg) and n.keyword is not None}
    return {n.value for n in walk(node) if isinstance(n, cst.Name) and id(n) not in attrs | keywords}


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
        (n.target.value, n.value) for n in walk(container) if isinstance(n, cst.AugAssign) and isinstance(n.target, cst.Name)
    ]
    changed = True
    while changed:
        changed = False
        for name, value in assigns:
            if name not in names and (
                _names(value) & names
                or any(isinstance(c, cst.Call) and ctx.fn_op(c.func) is not None for c in walk(value))
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


def has_data_branches(ctx: FileContext, body: cst.CSTNode, nodes: set[str]) -> bool:
    nodes = data_names(ctx, body, nodes)
    return any(
        isinstance(n, (cst.If, cst.While, cst.IfExp)) and is_data_test(ctx, n.test, nodes) for n in walk(body)
    )


def branch_reasons(ctx: FileContext, body: list[cst.BaseStatement], nodes: set[str]) -> list[str]:
    """Why the data-dependent branches of a pipeline body cannot be migrated (empty: they can)."""
    reasons: list[str] = []
    top = {id(s) for s in body}
    if body:
        nodes = _owner_nodes(ctx, body[0], nodes)
    for stmt in body:
        for n in walk(stmt):
            if isinstance(n, cst.While) and is_data_test(ctx, n.test, nodes):
                reasons.append("a `while` loop on data (enable_conditionals) is not migrated yet")
            elif isinstance(n, cst.IfExp) and is_data_test(ctx, n.test, nodes):
                reasons.append("a conditional expression (`a if c else b`) on data is not migrated yet")
            elif isinstance(n, cst.If) and is_data_test(ctx, n.test, nodes):
                if id(n) not in top and not isinstance(ctx.parents.get(n), cst.If):  # elif: reported below
                    reasons.append("an `if` on data inside other statements (nested or elif) is not migrated yet")
                else:
                    reasons += if_reasons(ctx, n, nodes)
    return list(dict.fromkeys(reasons))


def _predicate(ctx: FileContext, test: cst.BaseExpression, nodes: set[str]) -> tuple[cst.BaseExpression, bool] | None:
    """The data node the test reads and whether it is negated (``not pred``); None: unsupported."""
    negated = False
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, negated = test.expression, not negated
    if isinstance(test, cst.BooleanOperation) or not produces_node(ctx, test, nodes):
        return None
    return test, negated


def _branches(stmt: cst.If) -> tuple[list[cst.BaseStatement], list[cst.BaseStatement]]:
    orelse = stmt.orelse
    return list(stmt.body.body), list(orelse.body.body) if isinstance(orelse, cst.Else) else []


def if_reasons(ctx: FileContext, stmt: cst.If, nodes: set[str]) -> list[str]:
    reasons: list[str] = []
    if _predicate(ctx, stmt.test, nodes) is None:
        reasons.append(f"the data predicate `{ctx.text(stmt.test)}` is not one node (and/or on data are not migrated yet)")
    if isinstance(stmt.orelse, cst.If):
        reasons.append("an `elif` chain on data is not migrated yet")
    then, orelse = _branches(stmt)
    assigned: list[list[str]] = []
    for branch in (then, orelse):
        names: list[str] = []
        for s in branch:
            if not isinstance(s, cst.SimpleStatementLine):
                reasons.append("a compound statement inside an `if` on data is not migrated yet")
                continue
            for small in s.body:
                if isinstance(small, cst.Assign):
                    for t in small.targets:
                        if not isinstance(t.target, cst.Name) or not _is_node(ctx, small.value, nodes):
                            reasons.append(
                                f"`{ctx.text(t.target)} = ...` inside an `if` on data does not assign one data node"
                            )
                        if isinstance(t.target, cst.Name):
                            names.append(t.target.value)
                elif isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name):
                    names.append(small.target.value)
                elif not isinstance(small, (cst.Expr, cst.Pass)):
                    reasons.append(f"`{ctx.text(small)}` inside an `if` on data is not migrated yet")
            for n in walk(s):
                if isinstance(n, cst.Call) and ctx.fn_op(n.func) is None:
                    q = ctx.qualname(n.func) or ""
                    plain = isinstance(n.func, cst.Name) and n.func.value in SAFE_CALLS and not q.startswith("__main__")
                    method = isinstance(n.func, cst.Attribute) and _names(n.func.value) <= nodes and bool(_names(n.func.value))
                    if not (plain or method or q.startswith("nvidia.dali")):
                        reasons.append(
                            f"{ctx.text(n.func)}(...) is called inside an `if` on data: its random draws cannot be counted"
                        )
        assigned.append(names)
    for name in dict.fromkeys(assigned[0] + assigned[1]):
        if (name in assigned[0]) != (name in assigned[1]) and not _bound_before(ctx, stmt, name):
            reasons.append(f"`{name}` is assigned in only one branch of the `if` on data")
    return reasons


def _is_node(ctx: FileContext, expr: cst.BaseExpression, nodes: set[str]) -> bool:
    """``produces_node``, and ``a if flag else b`` on a plain Python ``flag``."""
    if isinstance(expr, cst.IfExp):
        return not is_data_test(ctx, expr.test, nodes) and _is_node(ctx, expr.body, nodes) and _is_node(ctx, expr.orelse, nodes)
    if isinstance(expr, cst.Call) and (op := ctx.fn_op(expr.func)) is not None:
        return op.target.num_outputs in (1, None)  # None: resize and the like, one output unless asked
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


def _random_calls(ctx: FileContext, body: list[cst.BaseStatement]) -> int:
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
    from ._pipeline import Refused, fresh_name

    nodes = _owner_nodes(ctx, stmt, env.nodes)
    if not isinstance(stmt, cst.If) or not is_data_test(ctx, stmt.test, nodes):
        if any(isinstance(n, (cst.If, cst.While, cst.IfExp)) and is_data_test(ctx, n.test, nodes) for n in walk(stmt)):
            raise Refused("an `if`/`while` on data inside other statements is not migrated yet")
        return None
    reasons = if_reasons(ctx, stmt, nodes)
    if reasons:
        raise Refused("; ".join(dict.fromkeys(reasons)))
    np, ndd = ctx.np, ctx.ndd
    pred, negated = _predicate(ctx, stmt.test, nodes)  # type: ignore[misc]
    out: list[cst.BaseStatement] = []

    # the predicate, sample by sample
    if isinstance(pred, cst.Name):
        pred_name = pred.value
    else:
        pred_name = fresh_name("cond", taken)
        value = lower_node(pred, env)
        out.append(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(pred_name))], value)]))
    take, skip = fresh_name("take", taken), fresh_name("skip", taken)
    sample = f"bool({np}.asarray(p))"
    first = f"not {sample}" if negated else sample
    second = sample if negated else f"not {sample}"
    out.append(_stmt(f"{take} = [i for i, p in enumerate({pred_name}.tensors) if {first}]\n"))
    out.append(_stmt(f"{skip} = [i for i, p in enumerate({pred_name}.tensors) if {second}]\n"))
    if stmt.leading_lines:
        out[0] = out[0].with_changes(leading_lines=stmt.leading_lines)

    then, orelse = _branches(stmt)
    assigned = [_assigned(b) for b in (then, orelse)]
    merged = list(dict.fromkeys(assigned[0] + assigned[1]))
    samples = {name: fresh_name(f"{name}_samples", taken) for name in merged}
    for name in merged:
        init = f"[None] * {pred_name}.batch_size" if all(name in a for a in assigned) else f"list({name}.tensors)"
        out.append(_stmt(f"{samples[name]} = {init}\n"))

    for branch, idx, names in ((then, take, assigned[0]), (orelse, skip, assigned[1])):
        if not branch or all(isinstance(s, cst.SimpleStatementLine) and all(isinstance(x, cst.Pass) for x in s.body) for s in branch):
            continue
        suffix = idx.rstrip("_")
        reads = _outer_reads(branch, nodes)
        rename = {n: fresh_name(f"{n}_{suffix}", taken) for n in dict.fromkeys(reads + names)}
        sub_env = LocalEnv(batch_size=cst.Call(cst.Name("len"), [cst.Arg(cst.Name(idx))]), rng=env.rng, nodes=env.nodes)
        body: list[cst.BaseStatement] = [
            _stmt(f"{rename[n]} = {ndd}.as_batch([{n}.tensors[i] for i in {idx}])\n") for n in reads
        ]
        for s in branch:
            body.append(lower_node(s, sub_env).visit(_Rename(rename)))
        for n in dict.fromkeys(names):
            body.append(_stmt(f"for i, sample in zip({idx}, {rename[n]}.tensors):\n    {samples[n]}[i] = sample\n"))
        draws = _random_calls(ctx, branch)
        orelse_block = None
        if draws:
            if env.rng is None:
                raise Refused("a random operator inside an `if` on data without an RNG")
            words = str(STATE_WORDS) if draws == 1 else f"{STATE_WORDS} * {draws}"
            advance = _stmt(f"{ctx.render(env.rng, [])}.advance({words})\n").with_changes(
                leading_lines=[
                    cst.EmptyLine(
                        comment=cst.Comment("# pipeline mode drew the random states of this branch's operators even with no samples")
                    )
                ]
            )
            orelse_block = cst.Else(body=cst.IndentedBlock([advance]))
        out.append(cst.If(test=cst.Name(idx), body=cst.IndentedBlock(body), orelse=orelse_block))

    for name in merged:
        out.append(_stmt(f"{name} = {ndd}.as_batch({samples[name]})\n"))
    return out


def _assigned(branch: list[cst.BaseStatement]) -> list[str]:
    names: list[str] = []
    for s in branch:
        for small in getattr(s, "body", ()):
            if isinstance(small, cst.Assign):
                names += [t.target.value for t in small.targets if isinstance(t.target, cst.Name)]
            elif isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name):
                names.append(small.target.value)
    return list(dict.fromkeys(names))


def _outer_reads(branch: list[cst.BaseStatement], nodes: set[str]) -> list[str]:
    """Data nodes a branch reads before assigning them: they need the branch's sub-batch."""
    reads: list[str] = []
    bound: set[str] = set()
    for s in branch:
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
