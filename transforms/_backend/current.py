"""``Pipeline.current()`` in graph code: the pipeline being built, read for its configuration.

Graph code reads the pipeline it builds for the values it was made with
(``shard_id=Pipeline.current().device_id``, ``pipe = Pipeline.current()`` then
``Source(pipe.batch_size)``). The generator that replaces the graph knows each of them: its
batch size and seed parameters, a ``device_id`` parameter, the thread count the decorator gives.
:func:`record_current` recognises those reads (analysis), :class:`CurrentReads` rewrites them
(emission); any other use of the current pipeline keeps the definition as it was, with a reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import in_source_order, sole_assignment

#: the attributes of the current pipeline the generator has a value for
KNOWN = ("batch_size", "max_batch_size", "device_id", "seed", "num_threads")


@dataclass
class Current:
    """The reads of the pipeline being built in one graph: each ``<pipeline>.<attr>``
    expression with the attribute it reads, and the statements that only name the pipeline
    (``pipe = Pipeline.current()``), which the generator drops."""

    reads: list[tuple[cst.Attribute, str]] = field(default_factory=list)
    aliases: list[cst.SimpleStatementLine] = field(default_factory=list)

    @property
    def attrs(self) -> set[str]:
        return {attr for _, attr in self.reads}


def is_current_call(ctx: FileContext, node: cst.Attribute) -> cst.Call | None:
    """``node`` is ``Pipeline.current`` called with no arguments: the call."""
    call = ctx.parents.get(node)
    if (
        node.attr.value == "current"
        and isinstance(call, cst.Call)
        and call.func is node
        and not call.args
    ):
        return call
    return None


def record_current(
    ctx: FileContext, container: cst.CSTNode, call: cst.Call, current: Current
) -> str | None:
    """Records what the graph code reads of ``call`` (``Pipeline.current()``) on ``current``;
    the reason it cannot be rewritten, else None."""
    text = ctx.text(call)
    parent = ctx.parents.get(call)
    if isinstance(parent, cst.Attribute) and parent.value is call:
        return _read(ctx, parent, current)
    assign = sole_assignment(ctx, call)
    stmt = ctx.parents.get(assign) if assign is not None else None
    if assign is None or ctx.parents.get(stmt) is not getattr(container, "body", None):
        return _other_use(text)
    name = cst.ensure_type(assign.targets[0].target, cst.Name)
    scope = ctx.scopes.get(name)
    bindings = list(scope.assignments[name.value]) if scope is not None else []
    if len(bindings) != 1:
        return f"`{name.value}` holds `{text}` and is assigned more than once"
    for ref in in_source_order(ctx, bindings[0].references):
        attr = ctx.parents.get(ref.node)
        if not (isinstance(attr, cst.Attribute) and attr.value is ref.node):
            return _other_use(f"{name.value} = {text}")
        why = _read(ctx, attr, current)
        if why is not None:
            return why
    current.aliases.append(cst.ensure_type(stmt, cst.SimpleStatementLine))
    return None


def _read(ctx: FileContext, attr: cst.Attribute, current: Current) -> str | None:
    """``<current pipeline>.<attr>`` read as a value: recorded."""
    holder = ctx.parents.get(attr)
    called = isinstance(holder, cst.Call) and holder.func is attr
    stored = isinstance(holder, (cst.AssignTarget, cst.AugAssign, cst.Del))
    if attr.attr.value not in KNOWN or called or stored:
        return _other_use(ctx.text(holder if called else attr))
    current.reads.append((attr, attr.attr.value))
    return None


def _other_use(text: str) -> str:
    return (
        f"`{text}` reads the pipeline being built other than for its "
        f"{', '.join(KNOWN)}, which dynamic mode has no counterpart of"
    )


def self_assignments(
    current: Current, values: dict[str, cst.BaseExpression], ctx: FileContext
) -> list[cst.SimpleStatementLine]:
    """Statements ``device_id = Pipeline.current().device_id`` whose read becomes the name they
    bind (``device_id = device_id``): the generator drops them."""
    out = []
    for attr, name in current.reads:
        value = values.get(name)
        assign = ctx.parents.get(attr)
        stmt = ctx.parents.get(assign)
        if (
            isinstance(value, cst.Name)
            and isinstance(assign, cst.Assign)
            and assign.value is attr
            and len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name)
            and assign.targets[0].target.value == value.value
            and isinstance(stmt, cst.SimpleStatementLine)
            and len(stmt.body) == 1
        ):
            out.append(stmt)
    return out


class CurrentReadsRule:
    """Lowering rule: each read of the current pipeline becomes the generator's value."""

    id = "DM200"
    node_types = (cst.Attribute,)

    def __init__(self, values: dict[int, cst.BaseExpression]) -> None:
        self.values = values

    def replaces(self, node: cst.CSTNode) -> bool:
        return id(node) in self.values

    def rewrite(
        self, ctx: FileContext, original: cst.CSTNode, updated: cst.CSTNode, env: object
    ) -> cst.CSTNode | None:
        return self.values.get(id(original))
