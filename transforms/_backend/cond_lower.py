"""The per-sample code of the data-dependent ``if`` statements of an ``enable_conditionals``
pipeline (what it computes, and why, is in ``conditionals.py``)."""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import leading_lines, visited, walk
from .._local import LocalEnv
from .cond_logic import ValueCode
from .cond_reasons import if_reasons
from .cond_sample import LowerNode, Rename, stmt_of
from .cond_tree import (
    Branch,
    assigned,
    branches,
    is_data_if,
    is_data_test,
    outer_reads,
    owner_nodes,
    random_calls,
    strip_not,
)
from .model import Refused


class _Lowerer(ValueCode):
    """Lowers one top-level ``if`` on data (and the ``if``s nested in it) to per-sample code."""

    def lower_if(self, stmt: cst.If, env: LocalEnv) -> list[cst.BaseStatement]:
        out: list[cst.BaseStatement] = []
        take, skip, size = self._split(stmt.test, env, out)
        if stmt.leading_lines:
            out[0] = out[0].with_changes(
                leading_lines=list(stmt.leading_lines) + list(leading_lines(out[0]))
            )
        then, orelse = branches(stmt)
        names = [assigned(b) for b in (then, orelse)]
        merged = list(dict.fromkeys(names[0] + names[1]))
        samples = {name: self.fresh(f"{name}_samples") for name in merged}
        for name in merged:
            init = f"[None] * {size}" if all(name in a for a in names) else f"list({name}.tensors)"
            out.append(stmt_of(f"{samples[name]} = {init}\n"))
        for branch, idx, own in ((then, take, names[0]), (orelse, skip, names[1])):
            if _runs_something(branch):
                out.append(self._branch(branch, idx, own, samples, env))
        for name in merged:
            out.append(stmt_of(f"{name} = {self.ctx.ndd}.as_batch({samples[name]})\n"))
        return out

    def _split(
        self, test: cst.BaseExpression, env: LocalEnv, out: list[cst.BaseStatement]
    ) -> tuple[str, str, str]:
        """Statements (added to ``out``) that compute the indices of the samples ``test``
        holds for and of the others; their names and the expression of the batch size."""
        np = self.ctx.np
        bare, negated = strip_not(test)
        if isinstance(bare, cst.BooleanOperation):
            holds = self.fresh("holds")
            self.holds(test, False, None, holds, env, out)
            take, skip = self.fresh("take"), self.fresh("skip")
            out.append(stmt_of(f"{take} = [i for i, h in enumerate({holds}) if h]\n"))
            out.append(stmt_of(f"{skip} = [i for i, h in enumerate({holds}) if not h]\n"))
            return take, skip, f"len({holds})"
        pred_name = self.bind(bare, env, out)
        take, skip = self.fresh("take"), self.fresh("skip")
        sample = f"bool({np}.asarray(p))"
        first = f"not {sample}" if negated else sample
        second = sample if negated else f"not {sample}"
        out.append(stmt_of(f"{take} = [i for i, p in enumerate({pred_name}.tensors) if {first}]\n"))
        out.append(
            stmt_of(f"{skip} = [i for i, p in enumerate({pred_name}.tensors) if {second}]\n")
        )
        return take, skip, f"{pred_name}.batch_size"

    def _branch(
        self,
        branch: Branch,
        idx: str,
        own: list[str],
        samples: dict[str, str],
        env: LocalEnv,
    ) -> cst.If:
        """``if idx:`` running ``branch`` on the sub-batch of the samples ``idx`` and putting
        the samples of the names it assigns (``own``) back in place."""
        suffix = idx.rstrip("_")
        reads = outer_reads(branch, self.nodes)
        rename = {n: self.fresh(f"{n}_{suffix}") for n in dict.fromkeys(reads + own)}
        sub_env = self.sub_env(idx, env)
        body = self.sub_batches(reads, idx, rename)
        for s in branch:
            if isinstance(s, cst.If):  # validated: an `if` on data (nested, or an elif)
                body += [visited(n, Rename(rename)) for n in self.lower_if(s, sub_env)]
            else:  # a simple statement: its and/or/not values on data computed first
                assert isinstance(s, cst.SimpleStatementLine)
                done = self.statement(s, sub_env)
                body += [visited(n, Rename(rename)) for n in done.before]
                if not done.whole:
                    lowered = self.lower_node(s, done.env)
                    assert isinstance(lowered, cst.BaseStatement)  # the rules keep a statement
                    body.append(visited(lowered, Rename(rename)))
        for n in dict.fromkeys(own):
            body.append(
                stmt_of(
                    f"for i, sample in zip({idx}, {rename[n]}.tensors):\n    {samples[n]}[i] "
                    "= sample\n"
                )
            )
        return cst.If(
            test=cst.Name(idx),
            body=cst.IndentedBlock(body),
            orelse=self.advance_else(env, random_calls(self.ctx, branch)),
        )


def _runs_something(branch: Branch) -> bool:
    return bool(branch) and not all(
        isinstance(s, cst.SimpleStatementLine) and all(isinstance(x, cst.Pass) for x in s.body)
        for s in branch
    )


def lower_branches(
    ctx: FileContext,
    stmt: cst.BaseStatement,
    env: LocalEnv,
    lower_node: LowerNode,
    taken: set[str],
) -> list[cst.BaseStatement] | None:
    """The per-sample form of ``if <data node>: ... else: ...`` (see ``conditionals.py``), or
    None when ``stmt`` is not an ``if`` on data. ``lower_node`` applies the local rules to one
    original node with the given environment; ``taken`` are the names already in use (new names are
    added to it). Unsupported shapes raise the back end's ``Refused``."""
    nodes = owner_nodes(ctx, stmt, env.nodes)
    if not is_data_if(ctx, stmt, nodes):
        if any(
            isinstance(n, (cst.If, cst.While, cst.IfExp)) and is_data_test(ctx, n.test, nodes)
            for n in walk(stmt)
        ):
            raise Refused("an `if`/`while` on data inside other statements is not migrated yet")
        return None
    assert isinstance(stmt, cst.If)  # an `if` on data
    reasons = if_reasons(ctx, stmt, nodes)
    if reasons:
        raise Refused("; ".join(dict.fromkeys(reasons)))
    return _Lowerer(ctx, lower_node, taken, nodes).lower_if(stmt, env)
