"""JAX's ``@data_iterator``: a function whose every call makes a pipeline and the JAX iterator
over it (``DALIGenericIterator`` configured by the decorator's arguments). Each call is an
instance whose iterator is followed from the call, as ``iterators`` follows one made from a
pipeline object.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext

from .arguments import check_pipeline_args
from .iterator_args import analyse_iterator
from .iterator_consumers import check_uses
from .iterator_follow import Follower
from .iterators import BY_HAND
from .model import FollowUp, Instance

DATA_ITERATOR = "nvidia.dali.plugin.jax.data_iterator"
#: @data_iterator forwards these to the pipeline when the call does not give them
DATA_ITERATOR_DEFAULTS = {"num_threads": "4"}


def data_iterator_decorator(ctx: FileContext, fn: cst.FunctionDef) -> cst.Decorator | None:
    """The ``@data_iterator(...)`` decorator of ``fn`` (JAX), if it has one."""
    for d in fn.decorators:
        expr = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
        if ctx.qualname(expr) == DATA_ITERATOR:
            return d
    return None


def data_iterator_instances(
    ctx: FileContext, fn: cst.FunctionDef, config: dict[str, cst.Arg], followups: list[FollowUp]
) -> list[Instance]:
    """Each call of a ``@data_iterator`` function makes a pipeline and the JAX iterator over it
    (configured by the decorator's ``config``): an instance whose iterator is followed from the
    call. What cannot be followed is a follow-up (the caller refuses the definition then)."""
    scope = ctx.scopes.get(fn)
    refs = (
        [r.node for a in scope.assignments[fn.name.value] if a.node is fn for r in a.references]
        if scope
        else []
    )
    instances = []
    for ref in in_source_order_nodes(ctx, refs):
        inst = _call_instance(ctx, fn, ref, followups)
        if inst is None:
            continue
        reasons: list[str] = []
        fake = cst.Call(
            cst.Name("data_iterator"),
            [cst.Arg(cst.Name("pipe"))]
            + [cst.Arg(a.value, keyword=cst.Name(k)) for k, a in config.items()],
        )
        use = analyse_iterator(
            ctx, inst, fake, "nvidia.dali.plugin.jax.DALIGenericIterator", reasons
        )
        if "devices" in config:
            reasons.append("devices= (one pipeline per device) is not migrated")
        if use is not None:
            use.call = inst.call
            Follower(ctx, use, reasons).value(inst.call, 0)
            check_uses(ctx, use, reasons)
        if reasons or use is None:
            followups.append(
                FollowUp(
                    inst.call,
                    f"{fn.name.value}(...) is not migrated: {'; '.join(reasons)}",
                    BY_HAND["nvidia.dali.plugin.jax"][1],
                )
            )
            continue
        for key, value in DATA_ITERATOR_DEFAULTS.items():
            inst.kwargs.setdefault(key, cst.Arg(cst.parse_expression(value), keyword=cst.Name(key)))
        inst.iterators.append(use)
        instances.append(inst)
    return instances


def _call_instance(
    ctx: FileContext, fn: cst.FunctionDef, ref: cst.CSTNode, followups: list[FollowUp]
) -> Instance | None:
    """``fn(...)`` as an instance: its keyword arguments that are no parameter of ``fn`` are the
    pipeline's (``batch_size``, ``num_threads``, ``device_id``)."""
    call = ctx.parents.get(ref)
    name = fn.name.value
    if not (isinstance(call, cst.Call) and call.func is ref) or any(a.star for a in call.args):
        followups.append(
            FollowUp(ref, f"`{name}` is used here other than by calling it with plain arguments")
        )
        return None
    stmt = ctx.enclosing_statement(call)
    params = {p.name.value for p in [*fn.params.params, *fn.params.kwonly_params]}
    kwargs = {
        a.keyword.value: a
        for a in call.args
        if a.keyword is not None and a.keyword.value not in params
    }
    unsupported = check_pipeline_args(kwargs, f"at `{name}(...)`", checkpoints=False)
    if unsupported or not isinstance(stmt, cst.SimpleStatementLine):
        followups.append(
            FollowUp(
                call, "; ".join(unsupported) or f"`{name}(...)` is part of a compound statement"
            )
        )
        return None
    return Instance(stmt, None, call, kwargs, label=f"{name}(...)")


def in_source_order_nodes(ctx: FileContext, nodes: list[cst.CSTNode]) -> list[cst.CSTNode]:
    return sorted(nodes, key=lambda n: (ctx.positions[n].start.line, ctx.positions[n].start.column))
