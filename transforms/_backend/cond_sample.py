"""Building blocks of the per-sample code ``conditionals.py`` writes: sub-batches, the truth of
an ``and``/``or``/``not`` tree sample by sample with its lazy operands, the RNG states an empty
sub-batch still consumes."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import fresh_name, visited
from .._local import LocalEnv
from .cond_tree import logic_values, ordered_names, random_calls, strip_not
from .model import Refused

#: applies the local rules to one original node, in the environment given
LowerNode = Callable[[cst.CSTNode, LocalEnv], cst.CSTNode]
#: words of RNG state one ndd random call draws (docs/dali-facts.md [rng])
STATE_WORDS = 7
EMPTY_BRANCH_COMMENT = (
    "# pipeline mode drew the random states of this branch's operators even with no samples"
)


class Rename(cst.CSTTransformer):
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


def stmt_of(code: str) -> cst.BaseStatement:
    return cst.parse_statement(code)


def comment_lines(text: str) -> list[cst.EmptyLine]:
    return [cst.EmptyLine(comment=cst.Comment(text))]


def assign(name: str, value: cst.BaseExpression) -> cst.SimpleStatementLine:
    return cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], value)])


class SampleCode:
    """What the lowering of one statement shares: the file, the local rules (``lower_node``),
    the names in use (``taken``, new ones added) and the names holding data (``nodes``)."""

    def __init__(
        self, ctx: FileContext, lower_node: LowerNode, taken: set[str], nodes: set[str]
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
        advance = stmt_of(f"{self.ctx.render(env.rng, [])}.advance({words})\n").with_changes(
            leading_lines=comment_lines(EMPTY_BRANCH_COMMENT)
        )
        return cst.Else(body=cst.IndentedBlock([advance]))

    def sub_batches(
        self, reads: list[str], idx: str, rename: dict[str, str]
    ) -> list[cst.BaseStatement]:
        return [
            stmt_of(f"{rename[n]} = {self.ctx.ndd}.as_batch([{n}.tensors[i] for i in {idx}])\n")
            for n in reads
        ]

    def sub_env(self, idx: str, env: LocalEnv) -> LocalEnv:
        """``env`` for code that runs on the sub-batch of the samples ``idx``."""
        return LocalEnv(
            batch_size=cst.Call(cst.Name("len"), [cst.Arg(cst.Name(idx))]),
            rng=env.rng,
            nodes=env.nodes,
        )

    def bind(self, expr: cst.BaseExpression, env: LocalEnv, out: list[cst.BaseStatement]) -> str:
        """The name of the batch ``expr`` evaluates to: itself, or a new name assigned its
        lowered value (the assignment added to ``out``)."""
        if isinstance(expr, cst.Name):
            return expr.value
        env = self.inner_values(expr, env, out)
        name = self.fresh("cond")
        out.append(assign(name, _bare(self.lower_node(expr, env))))
        return name

    def inner_values(
        self, expr: cst.BaseExpression, env: LocalEnv, out: list[cst.BaseStatement]
    ) -> LocalEnv:
        """``env`` where the ``and``/``or``/``not`` values on data inside the operand ``expr``
        (``fn.cast(a and b, ...)``) are computed, by statements added to ``out``."""
        computed: dict[int, cst.BaseExpression] = {}
        for v in logic_values(self.ctx, expr, self.nodes):
            name = self.fresh("truth")
            self.value(v, name, env, out)
            computed[id(v)] = cst.Name(name)
        return env.with_computed(computed) if computed else env

    def value(
        self, expr: cst.BaseExpression, target: str, env: LocalEnv, out: list[cst.BaseStatement]
    ) -> None:
        """Statements (added to ``out``) that assign ``target`` the batch of booleans that the
        ``and``/``or``/``not`` tree ``expr`` gave in pipeline mode: one 0-d bool per sample."""
        ndd, np = self.ctx.ndd, self.ctx.np
        bare, negated = strip_not(expr)
        if isinstance(bare, cst.BooleanOperation):
            holds = self.fresh("holds")
            self.holds(expr, False, None, holds, env, out)
            out.append(stmt_of(f"{target} = {ndd}.as_batch([{np}.array(h) for h in {holds}])\n"))
            return
        source = self.bind(bare, env, out)
        truth = f"not bool({np}.asarray(p))" if negated else f"bool({np}.asarray(p))"
        out.append(
            stmt_of(f"{target} = {ndd}.as_batch([{np}.array({truth}) for p in {source}.tensors])\n")
        )

    def holds(
        self,
        expr: cst.BaseExpression,
        negate: bool,
        idx: str | None,
        holds: str,
        env: LocalEnv,
        out: list[cst.BaseStatement],
    ) -> None:
        """Statements that set ``holds[i]`` to the truth of ``expr`` for every sample ``i`` of
        ``idx`` (None: all samples, creating ``holds``), evaluating and/or lazily as DALI does:
        the right operand runs only on the sub-batch of the samples the left one leaves open."""
        np = self.ctx.np
        expr, flipped = strip_not(expr)
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
            note = (
                f"# DALI evaluates the right operand of `{op}` only on the samples its left "
                "operand leaves open"
            )
            out.append(stmt_of(code).with_changes(leading_lines=comment_lines(note)))
            self.holds(expr.right, negate, rest, holds, env, out)
            return
        truth = f"not bool({np}.asarray(p))" if negate else f"bool({np}.asarray(p))"
        if idx is None:
            source = self.bind(expr, env, out)
            out.append(stmt_of(f"{holds} = [{truth} for p in {source}.tensors]\n"))
        elif isinstance(expr, cst.Name):
            read = truth.replace("(p)", f"({expr.value}.tensors[i])")
            out.append(stmt_of(f"for i in {idx}:\n    {holds}[i] = {read}\n"))
        else:
            out.append(self._lazy_operand(expr, idx, holds, truth, env))

    def _lazy_operand(
        self, expr: cst.BaseExpression, idx: str, holds: str, truth: str, env: LocalEnv
    ) -> cst.If:
        """``if idx:`` computing ``expr`` on the sub-batch of the samples ``idx`` only, its
        truth (``truth`` of ``p``) stored in ``holds``; ``else``: its random states skipped."""
        suffix = idx.rstrip("_")
        reads = [n for n in ordered_names(expr) if n in self.nodes]
        rename = {n: self.fresh(f"{n}_{suffix}") for n in reads}
        cond = self.fresh(f"cond_{suffix}")
        body = self.sub_batches(reads, idx, rename)
        inner: list[cst.BaseStatement] = []
        sub_env = self.inner_values(expr, self.sub_env(idx, env), inner)
        body += [visited(s, Rename(rename)) for s in inner]
        value = visited(self.lower_node(expr, sub_env), Rename(rename))
        body.append(assign(cond, _bare(value)))
        body.append(stmt_of(f"for i, p in zip({idx}, {cond}.tensors):\n    {holds}[i] = {truth}\n"))
        return cst.If(
            test=cst.Name(idx),
            body=cst.IndentedBlock(body),
            orelse=self.advance_else(env, random_calls(self.ctx, [expr])),
        )


def _bare(value: cst.CSTNode) -> cst.BaseExpression:
    """The lowered operand ``value`` without the parentheses it had in ``not (...)``."""
    assert isinstance(value, cst.BaseExpression)
    if value.lpar and isinstance(value, _UNWRAPPED):
        return value.with_changes(lpar=[], rpar=[])
    return value


#: expressions whose parentheses an assignment does not need (a generator or a tuple keeps them)
_UNWRAPPED = (
    cst.Comparison,
    cst.BinaryOperation,
    cst.UnaryOperation,
    cst.Call,
    cst.Subscript,
    cst.Attribute,
    cst.Name,
)
