"""DM200's definitions: the arguments of ``@pipeline_def(...)``, why a decorated function cannot
become a generator, and the objects a ``@pipeline_def`` method creates."""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import param_names, truthy, within
from .._local import collect_nodes
from .arguments import check_pipeline_args
from .conditionals import branch_reasons
from .instances import instances_of
from .model import FollowUp, Instance


def decorator_kwargs(ctx: FileContext, call: cst.Call) -> dict[str, cst.Arg]:
    """The keyword arguments of ``@pipeline_def(...)``, with ``**kwargs`` of a dict literal
    (``kwargs = {"batch_size": bs, ...}`` in the same scope) spread out."""
    out: dict[str, cst.Arg] = {}
    for a in call.args:
        spread = spread_dict(ctx, a.value) if a.star == "**" else None
        if spread is not None:
            out.update(spread)
        elif a.keyword is not None:
            out[a.keyword.value] = a
    return out


def spread_dict(ctx: FileContext, expr: cst.BaseExpression) -> dict[str, cst.Arg] | None:
    """``name`` bound once, to a dict literal with string keys: its items as keyword arguments."""
    if not isinstance(expr, cst.Name):
        return None
    scope = ctx.scopes.get(expr)
    bindings = list(scope.assignments[expr.value]) if scope is not None else []
    target = ctx.parents.get(bindings[0].node) if len(bindings) == 1 else None
    assign = ctx.parents.get(target) if isinstance(target, cst.AssignTarget) else None
    value = assign.value if isinstance(assign, cst.Assign) and len(assign.targets) == 1 else None
    if not isinstance(value, cst.Dict):
        return None
    out: dict[str, cst.Arg] = {}
    for el in value.elements:
        if not (isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString)):
            return None
        key = el.key.evaluated_value
        if not isinstance(key, str) or not key.isidentifier():
            return None
        out[key] = cst.Arg(value=el.value, keyword=cst.Name(key))
    return out


def definition_reasons(
    ctx: FileContext, fn: cst.FunctionDef, dec: cst.Decorator, dec_kwargs: dict[str, cst.Arg]
) -> list[str]:
    """Why the function itself cannot become a generator (empty: it can)."""
    reasons: list[str] = []
    if any(d is not dec for d in fn.decorators):
        reasons.append("it has other decorators")
    if fn.asynchronous is not None:
        reasons.append("async pipeline function")
    if isinstance(dec.decorator, cst.Call) and any(
        a.keyword is None and not (a.star == "**" and spread_dict(ctx, a.value) is not None)
        for a in dec.decorator.args
    ):
        reasons.append(
            "positional arguments, or ** of something else than a dict literal, to @pipeline_def"
        )
    if fn.params.star_kwarg is not None:
        reasons.append("the pipeline function takes **kwargs")
    reasons += check_pipeline_args(dec_kwargs, "decorator", checkpoints=True)
    if truthy(dec_kwargs.get("enable_conditionals")):
        reasons += branch_reasons(ctx, fn.body.body, collect_nodes(ctx, fn))
    return reasons


def method_instances(
    ctx: FileContext, cls: cst.ClassDef, fn: cst.FunctionDef, followups: list[FollowUp]
) -> list[Instance]:
    """A ``@pipeline_def`` method is followed through ``self.<name>(...)`` in its class; an
    attribute of that name used anywhere else may be another way in: a TODO there."""
    name = fn.name.value
    refs: list[cst.CSTNode] = []
    for node in ctx.nodes_of(cst.Attribute):
        if node.attr.value == name:
            inside = _is_self(node.value) and within(ctx, node, cls)
            if inside and isinstance(ctx.parents.get(node), cst.Call):
                refs.append(node)
            else:
                followups.append(
                    FollowUp(node, f"`.{name}` may be the pipeline method {name} here")
                )
    params = param_names(fn) - {"self"}
    return instances_of(ctx, refs, f"self.{name}", params, followups, pipeline_args=True)


def _is_self(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "self"
