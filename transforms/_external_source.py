"""``fn.external_source`` inside a migrated pipeline (a component of DM200-DM202).

Before (in a pipeline)::

    images = fn.external_source(source=next_batch, layout="HWC")       # def next_batch(): ...
    a, b = fn.external_source(source=Pairs(), num_outputs=2)          # class with __iter__

After (in the generator)::

    images = ndd.as_batch(next_batch(), layout="HWC")
    for a_data, b_data in Pairs():                                     # the loop of the generator
        a, b = (ndd.as_batch(part) for part in (a_data, b_data))

What the source is must be visible in the file: a function (called with no argument, or with
the iteration number when it takes one, as pipeline mode does), a generator function or an
object whose class defines ``__iter__`` (iterated once: the generator ends where ``pipe.run()``
raised StopIteration), or a list/tuple. ``cycle``, per-sample sources (``batch=False``),
``parallel=True``, ``feed_input`` (no ``source``) and sources passed in from outside are
refused with the reason: the pipeline keeps its TODO.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from dali_migrate.context import FileContext, attr_chain

#: external_source arguments that only tune pipeline mode's copies and queues
IGNORED = {"no_copy", "blocking", "prefetch_queue_depth", "cuda_stream", "use_copy_kernel", "ndim", "name", "bytes_per_sample_hint"}
#: arguments ndd.as_batch takes with the same meaning
AS_BATCH = {"layout", "dtype", "device"}


@dataclass
class SourceUse:
    """``x = fn.external_source(source=..., ...)`` in the graph code."""

    stmt: cst.SimpleStatementLine
    target: cst.BaseAssignTargetExpression
    call: cst.Call
    source: cst.BaseExpression
    kind: str  # "call0" (source()), "call1" (source(iteration)) or "iterable"
    num_outputs: int | None
    as_batch_args: list[cst.Arg]
    stops: bool  # the callable may raise StopIteration


def analyse_source(ctx: FileContext, call: cst.Call, target, stmt, reasons: list[str]) -> SourceUse | None:
    kw = {a.keyword.value: a for a in call.args if a.keyword is not None}
    if any(a.keyword is None or a.star for a in call.args):
        reasons.append("external_source with positional arguments")
        return None
    source = kw.get("source")
    if source is None:
        reasons.append("external_source without source= (fed by feed_input) is not migrated yet")
        return None
    for name, why in (("parallel", "parallel=True has no dynamic-mode counterpart"), ("cycle", "cycle= is not migrated yet")):
        if name in kw and not (isinstance(kw[name].value, cst.Name) and kw[name].value.value in ("False", "None")):
            reasons.append(f"external_source {why}")
    if "batch" in kw and not (isinstance(kw["batch"].value, cst.Name) and kw["batch"].value.value == "True"):
        reasons.append("per-sample external_source (batch=False) is not migrated yet")
    unknown = set(kw) - IGNORED - AS_BATCH - {"source", "num_outputs", "parallel", "cycle", "batch"}
    if unknown:
        reasons.append(f"external_source {', '.join(sorted(unknown))}= is not migrated yet")
    num_outputs = None
    if "num_outputs" in kw:
        v = kw["num_outputs"].value
        if not isinstance(v, cst.Integer):
            reasons.append("external_source num_outputs= is not a literal")
            return None
        num_outputs = int(v.value)
        n_targets = len(target.elements) if isinstance(target, (cst.Tuple, cst.List)) else None
        if n_targets != num_outputs or not all(isinstance(e.value, cst.Name) for e in target.elements):
            reasons.append("the outputs of a multi-output external_source are not unpacked into names")
            return None
    elif not isinstance(target, cst.Name):
        reasons.append("external_source output is not assigned to a name")
        return None
    kind, stops = _kind(ctx, source.value)
    if kind is None:
        reasons.append(
            f"the tool cannot tell whether source={ctx.text(source.value)} is a callable or an iterable "
            "(a function, generator or class defined in this file, or a list, is followed)"
        )
        return None
    args = [kw[k].with_changes(comma=cst.MaybeSentinel.DEFAULT) for k in kw if k in AS_BATCH]
    return SourceUse(stmt, target, call, source.value, kind, num_outputs, args, stops)


def _kind(ctx: FileContext, expr: cst.BaseExpression) -> tuple[str | None, bool]:
    if isinstance(expr, (cst.List, cst.Tuple)):
        return "iterable", False
    made = isinstance(expr, cst.Call)
    name = expr.func if made else expr
    if not isinstance(name, cst.Name):
        return None, False
    definition = _definition(ctx, name)
    if isinstance(definition, cst.FunctionDef):
        if _yields(definition):
            return ("iterable", False) if made else (None, False)  # gen() is iterable; gen itself too, not handled
        if made:
            return None, False
        required = [p for p in definition.params.params if p.default is None]
        stops = "StopIteration" in ctx.text(definition)
        return _arity(required, stops)
    if isinstance(definition, cst.ClassDef) and made:
        methods = {m.name.value: m for m in definition.body.body if isinstance(m, cst.FunctionDef)}
        if "__iter__" in methods:
            return "iterable", False
        call = methods.get("__call__")
        if call is not None:
            required = [p for p in call.params.params[1:] if p.default is None]
            return _arity(required, "StopIteration" in ctx.text(call))
        return None, False
    if isinstance(definition, cst.Assign) and not made:
        return _kind(ctx, definition.value)
    return None, False


def _arity(required: list, stops: bool) -> tuple[str | None, bool]:
    """Pipeline mode calls a source with no argument, or with the iteration number."""
    return {0: ("call0", stops), 1: ("call1", stops)}.get(len(required), (None, False))


def _definition(ctx: FileContext, name: cst.Name):
    """The module-level ``def``/``class`` or single assignment that binds ``name`` (top-level
    definitions only: scope metadata covers only the DALI-related part of the module)."""
    found = []
    for stmt in ctx.module.body:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) and stmt.name.value == name.value:
            found.append(stmt)
        elif isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Assign) and any(
                    isinstance(t.target, cst.Name) and t.target.value == name.value for t in small.targets
                ):
                    found.append(small)
    if len(found) != 1:
        return None
    node = found[0]
    if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and isinstance(node.value.func, cst.Name):
        cls = _definition(ctx, node.value.func)
        return cls if isinstance(cls, cst.ClassDef) else node
    return node


def _yields(fn: cst.FunctionDef) -> bool:
    stack = list(fn.body.children)
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Yield):
            return True
        if not isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            stack.extend(n.children)
    return False


def as_batch(ndd: str, value: cst.BaseExpression, args: list[cst.Arg]) -> cst.Call:
    sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    all_args = [cst.Arg(value)] + args
    return cst.Call(attr_chain(f"{ndd}.as_batch"), [a.with_changes(comma=sep) for a in all_args[:-1]] + all_args[-1:])


def wrap(ndd: str, use: SourceUse, data: cst.BaseExpression) -> cst.BaseExpression:
    """The batch (or the tuple of batches) the external source gave, from the source's ``data``."""
    if use.num_outputs is None:
        return as_batch(ndd, data, use.as_batch_args)
    part = cst.Name("part")
    return cst.GeneratorExp(
        as_batch(ndd, part, use.as_batch_args), cst.CompFor(target=part, iter=data), lpar=[cst.LeftParen()], rpar=[cst.RightParen()]
    )


def fetch(use: SourceUse, iteration: cst.Name | None) -> cst.BaseExpression:
    """What one iteration of a callable source gives."""
    args = [cst.Arg(iteration)] if use.kind == "call1" and iteration is not None else []
    return cst.Call(use.source, args)
