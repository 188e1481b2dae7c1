"""The arguments of a call that makes a migrated pipeline, migrated with it.

The generator (or function) the pipeline becomes runs in dynamic mode: what the call hands it
runs there too, on ``ndd.Batch`` (a callable the graph code calls, once per batch now). The
structural rule rewrites the whole statement of the call, so the local rules (DM101-DM107) do
not see it: their rewrites are applied to the arguments here. Where one cannot rewrite what it
finds, it gives the TODO it would give once the pipeline is gone, above the statement.

Before::

    pipe = train_pipe(root, transform=lambda x: fn.decoders.image(x))

After::

    pipe = train_pipe(root, transform=lambda x: ndd.decoders.image(x))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import TODO_PREFIX, Diagnostic

from .._cst import comment_line
from .._local import LocalEnv, lower
from .model import Instance


def lower_site_args(
    ctx: FileContext, instances: Sequence[Instance], rules: Sequence[Any]
) -> tuple[set[str], list[Diagnostic]]:
    """Record on each instance (``Instance.lowered``) its arguments with the local ``rules``
    applied, and each TODO a rule gives there as a line above its statement (as the rule would
    write it once the pipeline is gone: a second run changes nothing). The ids of the rules that
    rewrote something, and the TODOs written."""
    fired: set[str] = set()
    written: list[Diagnostic] = []
    for inst in instances:
        for arg in inst.call.args:
            new, diags = lower(ctx, arg, LocalEnv(), list(rules), fired)
            if not new.deep_equals(arg):
                inst.lowered[id(arg)] = cst.ensure_type(new, cst.Arg)
            for d in diags:
                inst.todo_lines.append(comment_line(f"{TODO_PREFIX} {d.rule}: {d.message}"))
                written.append(dataclasses.replace(d, marker=None))
    return fired, written


def site_call(inst: Instance) -> cst.Call:
    """The call with its arguments as :func:`lower_site_args` rewrote them."""
    if not inst.lowered:
        return inst.call
    return inst.call.with_changes(args=[inst.lowered.get(id(a), a) for a in inst.call.args])


def with_site_call(stmt: cst.BaseStatement, inst: Instance) -> cst.BaseStatement:
    """``stmt`` with the instance's call as :func:`site_call` gives it."""
    if not inst.lowered:
        return stmt
    new = stmt.visit(_Replace(id(inst.call), site_call(inst)))
    return cst.ensure_type(new, cst.BaseStatement)  # type: ignore[type-abstract]


class _Replace(cst.CSTTransformer):
    def __init__(self, target: int, call: cst.Call) -> None:
        super().__init__()
        self.target, self.call = target, call

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        return self.call if id(original) == self.target else updated
