"""The reader handle through a factory: ``pipe.epoch_size()`` read on what a function of the
module returned, the pipeline it made there. A component of DM200's handles (``handles.py``),
not a rule.

Before::

    def make(paths):
        pipe = train_pipe(paths)
        pipe.build()
        return pipe

    def read(paths):
        pipe = make(paths)
        total = pipe.epoch_size("Reader")

After::

    def make(paths):
        reader, pipe = train_pipe(paths)
        return reader, pipe

    def read(paths):
        reader, pipe = make(paths)
        total = reader.get_metadata()["epoch_size_padded"]

The factory (a :class:`~.model.Relay`: ``return pipe`` a statement of its own, every call of the
factory ``name = make(...)``, see ``Flow``) hands the handles on as the migrated pipeline function
does, before the batches; each caller unpacks them, ``_`` where it reads no metadata. A name
that may hold the pipeline of more than one such call, or a factory that returns it from another
function than the one that made it, keeps its TODO.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Edit

from .._cst import fresh_name
from .flow_sites import enclosing_function, made_by
from .model import Instance


def site_of(ctx: FileContext, inst: Instance, call: cst.Call) -> cst.Assign | None:
    """The assignment whose name ``call`` (``pipe.epoch_size(...)``) reads the pipeline from:
    the instance's own, or one of its factories' callers; None when that is not certain."""
    holder = cst.ensure_type(call.func, cst.Attribute).value
    made = made_by(ctx, holder) if isinstance(holder, cst.Name) else None
    sites = [inst.assign, *(a for r in inst.relays for a in r.callers)]
    return next((a for a in sites if a is not None and a.value is made), None)


def relay_reason(ctx: FileContext, inst: Instance, kinds: list[str]) -> str | None:
    """Why the handles (``kinds``) of ``inst`` cannot be handed through its factories, or None."""
    if not inst.relays or not inst.meta_calls:
        return None
    if kinds != ["reader"]:
        return "the pipeline is returned by a factory: its checkpoints are not followed there"
    made_in = enclosing_function(ctx, inst.stmt)
    if any(enclosing_function(ctx, r.ret) is not made_in for r in inst.relays):
        return "the pipeline is returned by another function than the one that makes it"
    return None


def name_relays(
    ctx: FileContext, inst: Instance, kinds: list[str], taken: set[str], underscore: bool
) -> None:
    """The names each caller of ``inst``'s factories binds to the handles (``kinds``, in order):
    ``reader`` (``<pipe>_reader`` where the module uses that name, or another caller in the same
    function took it) where its metadata is read there, else ``_``."""
    module_names = set(taken)
    per_function: dict[int, set[str]] = {}
    for relay in inst.relays:
        for assign in relay.callers:
            reads = any(site_of(ctx, inst, c) is assign for c in inst.meta_calls)
            var = cst.ensure_type(assign.targets[0].target, cst.Name).value
            names = []
            for kind in kinds:
                if (kind == "reader" and reads) or not underscore:
                    local = per_function.setdefault(
                        id(enclosing_function(ctx, assign)), set(module_names)
                    )
                    base = "reader" if kind == "reader" else "ckpt"
                    names.append(fresh_name(base, local, f"{var}_{base}"))
                else:
                    names.append("_")
            inst.relay_names[id(assign)] = names


def reader_name(ctx: FileContext, inst: Instance, call: cst.Call) -> str:
    """The name bound to the reader where ``call`` reads the pipeline's metadata."""
    site = site_of(ctx, inst, call) if inst.relays else inst.assign
    if site is None or site is inst.assign:
        return inst.handle_names["reader"]
    return inst.relay_names[id(site)][0]


def relay_edits(ctx: FileContext, inst: Instance) -> list[Edit]:
    """``return pipe`` returns the handles first; each ``pipe = make(...)`` unpacks them."""
    edits: list[Edit] = []
    if not inst.meta_calls:  # the factory hands on the batches alone, as it did the pipeline
        return edits
    for relay in inst.relays:
        value = relay.ret.value
        assert value is not None  # the pipeline is returned
        handles = [cst.Name(n) for n in inst.handle_names.values()]
        edits.append(ctx.expr_edit(value, _tuple([*handles, value])))
        for assign in relay.callers:
            target = assign.targets[0].target
            names = [cst.Name(n) for n in inst.relay_names[id(assign)]]
            edits.append(ctx.expr_edit(target, _tuple([*names, target])))
    return edits


def _tuple(values: list[cst.BaseExpression]) -> cst.Tuple:
    return cst.Tuple([cst.Element(v) for v in values], lpar=[], rpar=[])
