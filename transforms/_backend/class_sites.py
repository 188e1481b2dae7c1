"""What a ``Pipeline`` subclass's ``__init__`` arguments are at the calls that make it (DM202):
the literal a call passes, or the parameter's default, and what that says about its GPU and
its seed."""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext

from .arguments import device_message, is_default_device
from .model import Instance
from .seeds import rng_seed, unset_seed
from .star_keys import written_out


def device_todo_at(
    ctx: FileContext, inst: Instance, params: cst.Parameters, device: cst.Arg | None, gpu: bool
) -> bool:
    """Sets the TODO about the device the call asks for, dropped (``gpu``: the pipeline uses
    the GPU) where it is not 0 or None; whether it did."""
    where = (
        call_site_value(params, site_view(params, inst), device.value)
        if device is not None
        else None
    )
    if gpu and device is not None and (where is None or not is_default_device(where)):
        shown = _shown(ctx, where if where is not None else device.value)
        inst.device_todo = device_message(shown, inst.label)
        return True
    return False


def _shown(ctx: FileContext, expr: cst.BaseExpression) -> str:
    """The code of ``expr``, also of one :func:`site_view` wrote (``kw["device_id"]``)."""
    return ctx.text(expr) if expr in ctx.positions else cst.Module([]).code_for_node(expr)


def device_named(
    params: cst.Parameters, instances: list[Instance], device: cst.BaseExpression
) -> bool:
    """Some call (or, with none in sight, the class) asks for a GPU other than 0 or None, or
    for one the tool cannot follow: only then does the generator select it."""
    for inst in instances:
        where = call_site_value(params, site_view(params, inst), device)
        if where is None or not is_default_device(where):
            return True
    return not instances


def site_view(params: cst.Parameters, inst: Instance) -> cst.Call:
    """The call that made ``inst`` as its arguments are read: with its ``**kwargs`` (and
    ``*args``) written out where the tool read them (``star_keys``); a key that may be missing
    reads ``kw.get("k", <the parameter's default>)``."""
    if inst.unpacked is None:
        return inst.call
    defaults = {p.name.value: p.default for p in [*params.params, *params.kwonly_params]}
    return written_out(inst.call, inst.unpacked, defaults.get)


def call_site_value(
    params: cst.Parameters, call: cst.Call, expr: cst.BaseExpression
) -> cst.BaseExpression | None:
    """What ``expr`` (a literal, or a parameter of ``__init__``) is at ``call``."""
    if not isinstance(expr, cst.Name):
        return expr if isinstance(expr, (cst.Integer, cst.SimpleString)) else None
    every = [*params.params, *params.kwonly_params]  # keyword-only ones are never positional
    names = [p.name.value for p in every]
    if expr.value not in names:
        return None
    index = names.index(expr.value)
    for i, a in enumerate(call.args):
        if (a.keyword is None and i == index) or (
            a.keyword is not None and a.keyword.value == expr.value
        ):
            return a.value
    default = every[index].default
    return default if isinstance(default, (cst.Integer, cst.Name)) else None


def _fallback(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``kw.get("seed", -1)`` (a key the call's **kwargs may lack): its default, ``-1``."""
    if (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value == "get"
        and len(expr.args) == 2
    ):
        return expr.args[1].value
    return expr


def class_seed(
    seed: cst.Arg | None, params: cst.Parameters, instances: list[Instance]
) -> cst.BaseExpression | None:
    """The RNG's seed: the Pipeline constructor's, guarded where ``__init__``'s default or a
    call gives the parameter DALI's "no seed" (-1, None)."""
    if seed is None:
        return None
    given = [call_site_value(params, site_view(params, i), seed.value) for i in instances]
    unset = any(v is not None and (unset_seed(v) or unset_seed(_fallback(v))) for v in given)
    return rng_seed(seed.value, params, may_be_unset=unset)
