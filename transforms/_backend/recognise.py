"""Recognise: the graph code of a pipeline definition, and every use of the pipeline object.

A front end (``@pipeline_def`` function, ``with pipe:`` block, ``Pipeline`` subclass) hands the
statements that build a graph to :func:`analyse_graph`, and the references to the object or its
factory to :func:`instances_of`; what cannot be carried over is appended to ``reasons``.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from dali_migrate.catalog import OpInfo
from dali_migrate.context import FileContext
from dali_migrate.dali_api import PIPELINE_CLASSES, PIPELINE_DEFS

from .._cst import (
    fresh_name,
    in_source_order,
    is_docstring,
    kwargs_of,
    names_in,
    param_names,
    walk,
    within,
)
from .._local import collect_nodes
from ..fn_to_ndd import HANDED_OFF
from . import feeds, handles, iterators
from .arguments import check_pipeline_args
from .current import Current, is_current_call, record_current
from .external_source import SourceUse, analyse_source, source_kwargs
from .flow import Flow, in_loop
from .guards import guards_of
from .iterator_follow import adopt_meta_call
from .model import FollowUp, Graph, Instance, ReaderUse

#: statements ``pipe.<method>()`` that have nothing to do in dynamic mode: removed
DROPPED_METHODS = ("build", "schedule_run", "release_outputs")
#: ``pipe.<method>()`` that gives the next batch: ``next(pipe)``
RUN_METHODS = ("run", "share_outputs")

#: what to do by hand for the Pipeline methods the tool does not migrate (written in the TODO)
PIPELINE_METHOD_HINTS = {
    "schedule_run": "dynamic mode is asynchronous by itself: drop it",
    "share_outputs": "dynamic mode is asynchronous by itself: take batches with next(pipe)",
    "release_outputs": "dynamic mode frees a batch when it is no longer referenced: drop it",
    "outputs": "dynamic mode is asynchronous by itself: take batches with next(pipe)",
    "checkpoint": "register the reader and the RNG with ndd.checkpoint.Checkpoint; the formats differ",
    "serialize": "dynamic mode has no serialized form: keep this pipeline for serving (Triton)",
    "epoch_size": "use the reader's get_metadata()['epoch_size_padded'], built with max_batch_size",
    "reader_meta": "use the reader's get_metadata(), built with max_batch_size",
    "reset": "each reader.next_epoch() is a new epoch",
    "feed_input": "give the data to the code with ndd.as_batch(...)",
}


# -- the graph ------------------------------------------------------------------------------------


def analyse_graph(
    ctx: FileContext,
    container: cst.FunctionDef | cst.With,
    outputs_stmt: cst.BaseStatement | None,
    outputs: list[cst.BaseExpression],
    reasons: list[str],
    outputs_of: Callable[[cst.BaseStatement], list[cst.BaseExpression] | None] | None = None,
    *,
    current_ok: bool = False,
) -> Graph | None:
    """Check that the graph code of ``container`` can be carried over; reasons it cannot are
    appended to ``reasons`` (all of them, so the TODO lists every one). ``outputs_of``: the
    outputs one statement gives (None: it gives none), to follow outputs chosen by an ``if``
    that ends the graph code (:func:`chosen_outputs`). ``current_ok``: the front end gives the
    generator's values for the reads of ``Pipeline.current()`` (``current.Current``)."""
    readers: list[ReaderUse] = []
    sources: list[SourceUse] = []
    current = Current()
    chosen = None
    branched = None
    body_end = container.body.body[-1] if container.body.body else None
    if outputs_stmt is None and outputs_of is not None and container.body.body:
        chosen = chosen_outputs(ctx, container, container.body.body[-1], outputs_of)
        if chosen is not None:
            outputs_stmt, outputs = chosen
        else:
            last = container.body.body[-1]
            branched = branch_outputs(ctx, container, last, outputs_of, reasons)
        if branched is not None:  # each branch yields its own
            outputs_stmt, outputs = container.body.body[-1], next(iter(branched.values()))
    # the statements that give the outputs of the branches of the final `if`
    ends = [n for n in walk(body_end) if id(n) in branched] if branched and body_end else []
    ends += [body_end] if chosen is not None and body_end is not None else []
    for node in walk(container.body):
        if isinstance(node, cst.Call):
            _inputs_and_ops(ctx, container, node, readers, sources, reasons)
        elif isinstance(node, cst.Return) and any(within(ctx, node, e) for e in ends):
            continue  # the outputs of one branch of the final `if`
        elif (
            isinstance(node, cst.Return)
            and not _is_outputs(node, outputs_stmt)
            and not _nested(ctx, node, container)
        ):
            if not _ends_data(ctx, node):
                reasons.append("the pipeline returns before its last statement")
        elif isinstance(node, (cst.Yield, cst.Await)) and not _nested(ctx, node, container):
            reasons.append("the pipeline code yields or awaits")
        elif isinstance(node, cst.ClassDef):
            reasons.append("class definitions in the pipeline body")
        elif isinstance(node, cst.Attribute) and _pipeline_api(ctx, node):
            call = is_current_call(ctx, node) if current_ok else None
            why = record_current(ctx, container, call, current) if call is not None else None
            if call is not None:
                if why is not None:
                    reasons.append(why)
                continue
            reasons.append(
                f"`{ctx.text(node)}` reads the pipeline being built, which dynamic mode has no "
                "counterpart of"
            )
        elif isinstance(node, cst.Attribute) and _builds_or_runs(ctx, node, container):
            call = ctx.text(ctx.parents[node])
            reasons.append(f"`{call}` builds or runs a pipeline inside the code that defines one")
    body = list(container.body.body)
    if chosen is not None:
        body[-1] = chosen[0]
    docstring = (
        body[0]
        if body and isinstance(container, cst.FunctionDef) and is_docstring(body[0])
        else None
    )
    if docstring is not None:
        body = body[1:]
    if outputs_stmt is None or not body or body[-1] is not outputs_stmt:
        reasons.append("its outputs are not given by one statement at the end")
        return None
    if not outputs:
        reasons.append("its outputs are not a node or a tuple/list of nodes")
        return None
    every = [o for values in branched.values() for o in values] if branched else outputs
    several = [o for o in every if _returns_several(ctx, o) is not None]
    unpacked = None
    if len(outputs) == 1 and several and not branched:
        unpacked = _unpacked(ctx, container, outputs[0], readers, sources)  # type: ignore[arg-type]
        outputs = list(unpacked[0]) if unpacked is not None else outputs
    if unpacked is None:
        reasons += [_several_outputs(ctx, o) for o in several]
    defined = isinstance(container, cst.With) or pipeline_decorator(ctx, container) is not None
    if defined and not readers and not sources:  # (subclasses are fed through iter_setup)
        reasons += _outside_data(ctx, container)
    if reasons:
        return None
    assert isinstance(outputs_stmt, (cst.SimpleStatementLine, cst.If))
    graph = Graph(container, docstring, body, outputs_stmt, outputs, readers, sources)  # type: ignore[arg-type]
    graph.current = current
    graph.unpacked = unpacked
    graph.branch_outputs = branched
    return graph


def _inputs_and_ops(
    ctx: FileContext,
    container: cst.CSTNode,
    node: cst.Call,
    readers: list[ReaderUse],
    sources: list[SourceUse],
    reasons: list[str],
) -> None:
    """One call of the graph code: a reader or external source (which must be a plain
    assignment in the body), or an operator dynamic mode must have."""
    op = ctx.fn_op(node.func)
    if op is None:
        if ctx.is_fn_ref(node.func):
            reasons.append(f"{ctx.text(node.func)} is not a known DALI operator")
        return
    if not (op.target.is_reader or op.target.fn_path == "external_source"):
        if op.target.ndd_path is None and op.target.fn_path not in HANDED_OFF:
            reasons.append(f"{ctx.text(node.func)} has no dynamic-mode counterpart")
        return
    assign = ctx.parents.get(node)
    stmt = ctx.parents.get(assign)
    plain = (
        isinstance(assign, cst.Assign)
        and isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and len(assign.targets) == 1
    )
    top = ctx.enclosing_statement(node)
    at_top = (
        isinstance(top, cst.SimpleStatementLine)
        and ctx.parents.get(ctx.parents.get(top)) is container
    )
    if not (plain and at_top):
        if not isinstance(top, cst.SimpleStatementLine):
            reasons.append(f"{ctx.text(node.func)} is not a plain assignment in the pipeline body")
        elif not at_top:
            _guarded(ctx, container, node, op, top, readers, reasons)
        elif not op.target.is_reader:
            _inline_source(ctx, container, node, top, sources, reasons)
        else:
            readers.append(
                ReaderUse(
                    top,
                    cst.Name(_fresh_output(ctx, container, op.target.ndd_path)),
                    node,
                    op,
                    inline=True,
                )
            )
    elif op.target.is_reader:
        readers.append(ReaderUse(stmt, assign.targets[0].target, node, op))
    else:
        use = analyse_source(ctx, node, assign.targets[0].target, stmt, reasons)
        if use is not None:
            sources.append(use)


def _guarded(
    ctx: FileContext,
    container: cst.CSTNode,
    call: cst.Call,
    op: OpInfo,
    stmt: cst.SimpleStatementLine,
    readers: list[ReaderUse],
    reasons: list[str],
) -> None:
    """A reader made in an ``if`` block of the graph code (``guards``), in ``stmt``."""
    what = ctx.text(call.func)
    found = guards_of(ctx, container, stmt, collect_nodes(ctx, container), what)
    if isinstance(found, str):
        reasons.append(found)
        return
    tests, top = found
    if not op.target.is_reader:
        test = ctx.text(tests[-1][0])
        reasons.append(
            f"{what} made under `if {test}` is not migrated yet: make it at the top level of "
            "the pipeline body"
        )
        return
    assign = stmt.body[0] if len(stmt.body) == 1 else None
    if isinstance(assign, cst.Assign) and assign.value is call and len(assign.targets) == 1:
        readers.append(ReaderUse(stmt, assign.targets[0].target, call, op, guards=tests, top=top))
        return
    fresh = cst.Name(_fresh_output(ctx, container, op.target.ndd_path))
    readers.append(ReaderUse(stmt, fresh, call, op, inline=True, guards=tests, top=top))


def _returns_several(ctx: FileContext, output: cst.BaseExpression) -> list[cst.Return] | None:
    """``output`` calls a function of the module that returns a tuple or list (the pipeline
    had one output per element: the generator would yield the tuple as one): its returns."""
    if not (isinstance(output, cst.Call) and isinstance(output.func, cst.Name)):
        return None
    name = output.func.value
    scope = ctx.scopes.get(output.func)
    bindings = list(scope.assignments[name]) if scope is not None else []
    if scope is not None and not bindings:  # a function of the module
        bindings = list(scope.globals.assignments[name])
    defs = [b.node for b in bindings if isinstance(b.node, cst.FunctionDef)]
    returns = [
        n
        for fn in defs
        for n in walk(fn.body)
        if isinstance(n, cst.Return) and not _nested(ctx, n, fn)
    ]
    if any(isinstance(r.value, (cst.Tuple, cst.List)) for r in returns):
        return returns
    return None


def _unpacked(
    ctx: FileContext,
    container: cst.CSTNode,
    output: cst.Call,
    readers: list[ReaderUse],
    sources: list[SourceUse],
) -> tuple[list[cst.Name], cst.Call] | None:
    """``return helper(...)`` whose one definition returns tuples of one length (no starred
    element): names to unpack them into, the helper's own where it returns plain names (a name
    of the batch's data may be reused), else ``output_<i>``. None for other helpers."""
    returns = _returns_several(ctx, output) or []
    values = [r.value for r in returns]
    if not all(isinstance(v, (cst.Tuple, cst.List)) for v in values):
        return None
    sizes = {len(v.elements) for v in values}  # type: ignore[union-attr]
    if len(sizes) != 1 or any(
        isinstance(e, cst.StarredElement)
        for v in values
        for e in v.elements  # type: ignore[union-attr]
    ):
        return None
    data = {t for u in [*readers, *sources] for t in names_in(u.target)}
    taken = {n.value for n in walk(container) if isinstance(n, cst.Name)} - data
    first = values[0].elements  # type: ignore[union-attr]
    names = []
    for i, e in enumerate(first):
        base = e.value.value if isinstance(e.value, cst.Name) else f"output_{i}"
        names.append(cst.Name(fresh_name(base, taken)))
    return names, output


def _several_outputs(ctx: FileContext, output: cst.BaseExpression) -> str:
    return (
        f"its outputs come from `{ctx.text(output)}`, which returns tuples of different lengths "
        "(or with a starred element, or also something else): return the outputs by name"
    )


def _inline_source(
    ctx: FileContext,
    container: cst.CSTNode,
    call: cst.Call,
    top: cst.SimpleStatementLine,
    sources: list[SourceUse],
    reasons: list[str],
) -> None:
    """An external source called inside a statement of the graph code (``return
    fn.external_source(...)``, ``fn.cast(fn.external_source(...), ...)``): analysed as if its
    batch were first bound to a new name, which replaces the call there."""
    kw = source_kwargs(call) or {}
    if "num_outputs" in kw:
        reasons.append("the outputs of a multi-output external_source are not unpacked into names")
        return
    feed = kw["name"].value if "name" in kw and "source" not in kw else None
    name = feed.evaluated_value if isinstance(feed, cst.SimpleString) else None
    base = name.lower() if isinstance(name, str) and name.isidentifier() else "source_batch"
    taken = {n.value for n in walk(container) if isinstance(n, cst.Name)}
    taken |= {t for u in sources for t in names_in(u.target)}
    target = cst.Name(fresh_name(base, taken))
    stmt = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(target)], call)])
    use = analyse_source(ctx, call, target, stmt, reasons)
    if use is not None:
        use.inline_at = top
        sources.append(use)


def chosen_outputs(
    ctx: FileContext,
    container: cst.CSTNode,
    stmt: cst.BaseStatement,
    outputs_of: Callable[[cst.BaseStatement], list[cst.BaseExpression] | None],
) -> tuple[cst.SimpleStatementLine, list[cst.BaseExpression]] | None:
    """The graph code ends with ``if cuda: return a.gpu(), b`` / ``else: return a, b`` (each
    branch, ``elif`` ones too, only the outputs statement, with as many outputs; a test on no
    data node): one outputs statement, ``return (a.gpu() if cuda else a), b``, each output a
    conditional expression where the branches differ. None for any other statement."""
    branches = _output_branches(ctx, container, stmt, outputs_of)
    if branches is None or len({len(values) for _, values in branches}) != 1:
        return None
    outputs = []
    for i in range(len(branches[-1][1])):
        value = branches[-1][1][i]
        for test, values in reversed(branches[:-1]):
            if not values[i].deep_equals(value):
                paren = {"lpar": [cst.LeftParen()], "rpar": [cst.RightParen()]}
                value = cst.IfExp(test=test, body=values[i], orelse=value, **paren)
        outputs.append(value)
    elements = [cst.Element(v) for v in outputs]
    ret = cst.Return(cst.Tuple(elements) if len(outputs) != 1 else outputs[0])
    return cst.SimpleStatementLine([ret], leading_lines=stmt.leading_lines), outputs


def branch_outputs(
    ctx: FileContext,
    container: cst.CSTNode,
    stmt: cst.BaseStatement,
    outputs_of: Callable[[cst.BaseStatement], list[cst.BaseExpression] | None],
    reasons: list[str],
) -> dict[int, list[cst.BaseExpression]] | None:
    """The graph code ends with an ``if`` on configuration (no data node in its tests) whose
    every branch, ``else`` included, ends with its outputs (``if with_masks: return images,
    masks`` / ``else: return (images,)``, other statements before them): the outputs of each
    branch, by id of its last statement. None for any other statement (a test that calls code:
    with the reason)."""
    if not isinstance(stmt, cst.If):
        return None
    data = collect_nodes(ctx, container)
    out: dict[int, list[cst.BaseExpression]] = {}
    node = stmt
    while True:
        if names_in(node.test) & data or any(
            isinstance(n, (cst.Name, cst.Attribute)) and ctx.is_fn_ref(n) for n in walk(node.test)
        ):
            return None  # an `if` on data: a conditional of the pipeline (enable_conditionals)
        if any(
            isinstance(n, (cst.Call, cst.Await, cst.NamedExpr, cst.Yield)) for n in walk(node.test)
        ):
            reasons.append(
                f"its outputs are chosen by `if {ctx.text(node.test)}`, which calls code: the "
                "generator would call it again for each batch"
            )
            return None
        if not _branch_end(node.body, outputs_of, out):
            return None
        if isinstance(node.orelse, cst.If):
            node = node.orelse
            continue
        if isinstance(node.orelse, cst.Else) and _branch_end(node.orelse.body, outputs_of, out):
            return out
        return None


def _branch_end(
    block: cst.BaseSuite,
    outputs_of: Callable[[cst.BaseStatement], list[cst.BaseExpression] | None],
    out: dict[int, list[cst.BaseExpression]],
) -> bool:
    """The branch ``block`` ends with its outputs, and gives none before: recorded in ``out``."""
    stmts = list(getattr(block, "body", ()))
    values = outputs_of(stmts[-1]) if stmts else None
    if not values or any(
        isinstance(n, cst.BaseStatement) and outputs_of(n) for s in stmts[:-1] for n in walk(s)
    ):
        return False
    out[id(stmts[-1])] = values
    return True


def _output_branches(
    ctx: FileContext,
    container: cst.CSTNode,
    stmt: cst.BaseStatement | cst.Else,
    outputs_of: Callable[[cst.BaseStatement], list[cst.BaseExpression] | None],
) -> list[tuple[cst.BaseExpression | None, list[cst.BaseExpression]]] | None:
    """(test, outputs) of each branch of ``if``/``elif``/``else`` that ends the graph code (the
    ``else`` branch's test is None), or None when it is not of that form."""
    if isinstance(stmt, cst.Else):
        only = stmt.body.body[0] if len(stmt.body.body) == 1 else None
        values = outputs_of(only) if only is not None else None
        return [(None, values)] if values else None
    if not (isinstance(stmt, cst.If) and stmt.orelse is not None and len(stmt.body.body) == 1):
        return None
    data = collect_nodes(ctx, container)
    if names_in(stmt.test) & data or any(
        isinstance(n, (cst.Name, cst.Attribute)) and ctx.is_fn_ref(n) for n in walk(stmt.test)
    ):
        return None  # an `if` on data: a conditional of the pipeline (enable_conditionals)
    values = outputs_of(stmt.body.body[0])
    rest = _output_branches(ctx, container, stmt.orelse, outputs_of)
    return [(stmt.test, values), *rest] if values and rest else None


def _outside_data(ctx: FileContext, container: cst.CSTNode) -> list[str]:
    """A graph without reader or external source that unpacks data nodes made elsewhere
    (``images, labels = plugin_reader``: a plugin's reader, or a reader of the enclosing code):
    the generator would yield pipeline-mode nodes."""
    for small in walk(container.body):
        if not isinstance(small, cst.Assign) or len(small.targets) != 1:
            continue
        if _nested(ctx, small, container):
            continue
        unpacked = isinstance(small.targets[0].target, (cst.Tuple, cst.List))
        if unpacked and not _dali_call(ctx, small.value):
            return [
                f"its data comes from `{ctx.text(small.value)}`, which is neither a reader nor an "
                "external source of the pipeline (a plugin's reader, or one made outside it)"
            ]
    return []


def _dali_call(ctx: FileContext, value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.Call) and ctx.fn_op(value.func) is not None


def _fresh_output(ctx: FileContext, container: cst.CSTNode, ndd_path: str | None) -> str:
    """A name for the outputs of a reader called inside an expression."""
    taken = {n.value for n in walk(container) if isinstance(n, cst.Name)}
    base = (ndd_path or "reader").split(".")[-1].lower()
    return fresh_name(f"{base}_batch", taken)


def _pipeline_api(ctx: FileContext, node: cst.Attribute) -> bool:
    """``Pipeline.current()`` and the like: the Pipeline class used inside graph code."""
    q = ctx.qualname(node.value)
    return bool(q) and (q in PIPELINE_CLASSES or q.startswith("nvidia.dali.pipeline.Pipeline"))


def _builds_or_runs(ctx: FileContext, node: cst.Attribute, container: cst.CSTNode) -> bool:
    """``x.build()`` or ``x.run()`` in the graph code (not in a function it defines): the
    Pipeline API, which the generator that replaces this code could not keep."""
    call = ctx.parents.get(node)
    return (
        node.attr.value in ("build", "run")
        and isinstance(call, cst.Call)
        and call.func is node
        and not call.args
        and not _nested(ctx, node, container)
    )


def _ends_data(ctx: FileContext, ret: cst.Return) -> bool:
    """A bare ``return`` under ``except StopIteration:``: the data ended (``iter_setup``)."""
    cur = ctx.parents.get(ret)
    while cur is not None and not isinstance(cur, cst.ExceptHandler):
        cur = ctx.parents.get(cur)
    return (
        ret.value is None
        and isinstance(cur, cst.ExceptHandler)
        and ctx.text(cur.type or cst.Name("")) == "StopIteration"
    )


def _nested(ctx: FileContext, node: cst.CSTNode, container: cst.CSTNode) -> bool:
    """``node`` belongs to a function defined inside the graph code (a helper, a lambda)."""
    cur = ctx.parents.get(node)
    while cur is not None and cur is not container:
        if isinstance(cur, (cst.FunctionDef, cst.Lambda)):
            return True
        cur = ctx.parents.get(cur)
    return False


def _is_outputs(ret: cst.Return, outputs_stmt: cst.BaseStatement | None) -> bool:
    return isinstance(outputs_stmt, cst.SimpleStatementLine) and any(
        s is ret for s in outputs_stmt.body
    )


def returned_values(stmt: cst.BaseStatement) -> list[cst.BaseExpression] | None:
    """The nodes ``return ...`` names (for :func:`analyse_graph`'s ``outputs_of``)."""
    one = isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
    small = stmt.body[0] if one else None  # type: ignore[attr-defined]
    return output_values(small.value) if isinstance(small, cst.Return) else None


def output_values(value: cst.BaseExpression | None) -> list[cst.BaseExpression]:
    """The nodes a ``return``/``set_outputs`` names, or [] when they are not plain nodes."""
    if value is None:
        return []
    if isinstance(value, (cst.Tuple, cst.List)):
        if any(isinstance(e, cst.StarredElement) for e in value.elements):
            return []
        return [e.value for e in value.elements]
    if isinstance(
        value, (cst.Dict, cst.DictComp, cst.ListComp, cst.GeneratorExp, cst.SimpleString)
    ):
        return []
    return [value]


def has_random(ctx: FileContext, container: cst.CSTNode) -> bool:
    """Whether the graph code calls a random operator."""
    for n in walk(
        container.body if isinstance(container, (cst.FunctionDef, cst.With)) else container
    ):
        if isinstance(n, cst.Call):
            op = ctx.fn_op(n.func)
            if op is not None and op.target.is_random:
                return True
    return False


def pipeline_count(ctx: FileContext) -> int:
    """Pipeline definitions in the module: @pipeline_def functions, Pipeline(...) constructions
    and Pipeline subclasses."""
    decorators = [
        d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
        for d in ctx.nodes_of(cst.Decorator)
    ]
    return (
        sum((ctx.qualname(target) or "").endswith("pipeline_def") for target in decorators)
        + sum(ctx.qualname(call.func) in PIPELINE_CLASSES for call in ctx.nodes_of(cst.Call))
        + sum(
            any(ctx.qualname(b.value) in PIPELINE_CLASSES for b in c.bases)
            for c in ctx.nodes_of(cst.ClassDef)
        )
    )


def pipeline_decorator(ctx: FileContext, fn: cst.FunctionDef) -> cst.Decorator | None:
    """The ``@pipeline_def`` / ``@pipeline_def(...)`` decorator of ``fn``, if it has one."""
    for d in fn.decorators:
        expr = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
        if ctx.qualname(expr) in PIPELINE_DEFS:
            return d
    return None


# -- where a pipeline object is used -----------------------------------------------------------


def follow_pipeline(
    ctx: FileContext,
    inst: Instance,
    origin: cst.CSTNode,
    flow: Flow,
    followups: list[FollowUp],
    *,
    with_handles: bool = False,
) -> None:
    """Every use of the pipeline object ``origin`` evaluates to: ``build()`` and ``run()`` (and
    with ``with_handles``, ``epoch_size()``, ``reader_meta()``, ``checkpoint()``, ``reset()``,
    see ``handles``) and framework iterators are recorded on ``inst``; any other use is a
    follow-up (a TODO at the use)."""
    found = flow.follow(origin, inst.label)
    inst.uses = [*found.reached, *(f.node for f in found.followups)]
    named = inst.assign is not None and isinstance(inst.assign.targets[0].target, cst.Name)
    inst.local = found.local and (named or _inline_in_iterator(ctx, origin))
    inst.copies = found.copies * (2 if in_loop(ctx, inst.stmt) else 1)
    followups += found.followups
    pending: list[tuple[cst.Call, str]] = []  # pipe.epoch_size(): the loader's, if one replaces it
    for use in found.uses:
        claimed = (
            n for u in inst.iterators for n in u.claimed
        )  # pipe.epoch_size() as an iterator's size=
        if any(use is n for n in claimed):
            continue
        attr = ctx.parents.get(use)
        call = ctx.parents.get(attr)
        label = _label(ctx, use, inst)
        if isinstance(attr, cst.Attribute) and attr.value is use:
            if isinstance(call, cst.Call) and call.func is attr:
                if attr.attr.value in handles.META_METHODS:
                    pending.append((call, label))
                elif not _method_use(ctx, inst, attr.attr.value, call, with_handles and inst.local):
                    hint = PIPELINE_METHOD_HINTS.get(attr.attr.value, "")
                    followups.append(
                        FollowUp(call, f"`{label}.{attr.attr.value}(...)` is not migrated", hint)
                    )
            else:
                followups.append(
                    FollowUp(
                        attr, f"`{label}.{attr.attr.value}` reads an attribute of the Pipeline"
                    )
                )
            continue
        why = (
            iterators.iterator_use(ctx, inst, use)
            if inst.local or _kept_in_attribute(ctx, inst, use)
            else iterators.iterator_hint(ctx, use)
        )
        if why is None:
            followups.append(FollowUp(use, _describe(ctx, use, label)))
        elif why:
            followups.append(why)
    for call, label in pending:
        method = call.func.attr.value  # type: ignore[attr-defined]
        if adopt_meta_call(ctx, inst, call):
            continue
        if not _method_use(ctx, inst, method, call, with_handles and inst.local):
            hint = PIPELINE_METHOD_HINTS.get(method, "")
            followups.append(FollowUp(call, f"`{label}.{method}(...)` is not migrated", hint))


def _kept_in_attribute(ctx: FileContext, inst: Instance, use: cst.CSTNode) -> bool:
    """``self.pipe = make(...)`` made once, and ``use`` reads ``self.pipe`` in the same class."""
    assign = inst.assign
    return (
        assign is not None
        and len(assign.targets) == 1
        and isinstance(assign.targets[0].target, cst.Attribute)
        and isinstance(use, cst.Attribute)
        and use.attr.value == assign.targets[0].target.attr.value
        and inst.copies == 1
    )


def _inline_in_iterator(ctx: FileContext, origin: cst.CSTNode) -> bool:
    """``origin`` (the pipeline's call) is made in the call of a framework iterator, alone or
    as the one element of its list (``DALIGenericIterator([make_pipe(...)], ...)``)."""
    parent = ctx.parents.get(origin)
    if isinstance(parent, cst.Element):
        listed = ctx.parents.get(parent)
        if not isinstance(listed, (cst.List, cst.Tuple)) or len(listed.elements) != 1:
            return False
    call = iterators._enclosing_call(ctx, origin)
    q = ctx.qualname(call.func) if call is not None else None
    return q in iterators.ITERATORS or q == iterators.DATASET


def own_uses(
    ctx: FileContext, container: cst.CSTNode, instances: list[Instance], followups: list[FollowUp]
) -> list[str]:
    """Uses of the pipeline objects (or of their factory) inside the code that defines their
    graph (``pipe.build()`` in the ``@pipeline_def`` function that ``pipe`` is made from): that
    code becomes the generator, which has no pipeline object to use. One reason per use."""
    factory = container.name.value if isinstance(container, cst.FunctionDef) else None
    said = {
        id(f.node): f.what
        for f in followups
        if isinstance(f.node, cst.Name) and f.node.value == factory
    }
    nodes = [n for inst in instances for n in inst.uses] + [f.node for f in followups]
    inside = [n for n in nodes if within(ctx, n, container)]
    inside.sort(key=lambda n: (ctx.positions[n].start.line, ctx.positions[n].start.column))
    reasons = [
        said.get(id(n))
        or f"`{ctx.text(_use_expr(ctx, n))}` uses the pipeline inside the code that defines it"
        for n in inside
    ]
    return list(dict.fromkeys(reasons))


def _use_expr(ctx: FileContext, node: cst.CSTNode) -> cst.CSTNode:
    """``pipe.build()`` for the ``pipe`` in it (``pipe`` alone when it is not called)."""
    attr = ctx.parents.get(node)
    call = ctx.parents.get(attr)
    if isinstance(attr, cst.Attribute) and attr.value is node:
        return call if isinstance(call, cst.Call) and call.func is attr else attr
    return node


def _label(ctx: FileContext, use: cst.CSTNode, inst: Instance) -> str:
    """How a TODO names the pipeline object at ``use``."""
    if isinstance(use, (cst.Name, cst.Attribute, cst.Subscript)):
        return ctx.text(use)
    if isinstance(use, cst.Call):
        return f"{ctx.text(use.func)}(...)"
    return inst.label


def _describe(ctx: FileContext, use: cst.CSTNode, label: str) -> str:
    """What the code does with the pipeline object at ``use``, for its TODO."""
    parent = ctx.parents.get(use)
    if isinstance(parent, cst.Element):  # [pipe] handed on as a list
        parent = ctx.parents.get(ctx.parents.get(parent))
        if not isinstance(parent, cst.Arg):
            return f"`{label}` is put in a container"
    holder = ctx.parents.get(parent)
    if isinstance(parent, cst.Arg) and isinstance(holder, cst.Call):
        return f"`{label}` is passed to `{ctx.text(holder.func)}`"
    if isinstance(parent, cst.Return):
        return f"`{label}` is returned"
    if isinstance(parent, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
        targets = parent.targets if isinstance(parent, cst.Assign) else [parent]
        return f"`{label}` is stored in `{', '.join(ctx.text(t.target) for t in targets)}`"
    if isinstance(parent, (cst.Element, cst.DictElement, cst.ListComp, cst.GeneratorExp)):
        return f"`{label}` is put in a container"
    return f"`{label}` is used here"


def _method_use(
    ctx: FileContext, inst: Instance, method: str, call: cst.Call, with_handles: bool
) -> bool:
    """Records ``pipe.<method>(...)`` on ``inst`` when it is migrated; False if it is not."""
    if method in DROPPED_METHODS and not call.args:
        expr = ctx.parents.get(call)
        stmt = ctx.parents.get(expr)
        if (
            isinstance(expr, cst.Expr)
            and isinstance(stmt, cst.SimpleStatementLine)
            and len(stmt.body) == 1
        ):
            inst.builds.append(stmt)
            return True
    if method in RUN_METHODS and not call.args:
        inst.runs.append(call)
        return True
    if method == "feed_input" and feeds.is_feed(call):
        expr = ctx.parents.get(call)
        if isinstance(expr, cst.Expr) and isinstance(
            ctx.parents.get(expr), cst.SimpleStatementLine
        ):
            inst.feeds.append(call)
            return True
    return with_handles and handles.record_use(ctx, inst, method, call)


def find_instances(
    ctx: FileContext,
    fn: cst.FunctionDef | cst.ClassDef,
    followups: list[FollowUp],
    *,
    pipeline_args: bool,
    with_handles: bool = False,
) -> list[Instance]:
    """The objects ``fn(...)`` creates in this file, each followed to its uses. With
    ``pipeline_args`` (``@pipeline_def``), keyword arguments that are not parameters of ``fn``
    are pipeline arguments."""
    scope = ctx.scopes.get(fn)
    refs = (
        [r for a in scope.assignments[fn.name.value] if a.node is fn for r in a.references]
        if scope
        else []
    )
    refs = in_source_order(ctx, refs)
    nodes = [r.node for r in refs if not within(ctx, r.node, fn)]  # super(Cls, self), recursion
    if isinstance(fn, cst.FunctionDef):  # the factory used by its own graph code
        what = f"`{fn.name.value}` is used inside its own definition"
        followups += [FollowUp(r.node, what) for r in refs if within(ctx, r.node, fn)]
    params = param_names(fn) if pipeline_args and isinstance(fn, cst.FunctionDef) else set()
    return instances_of(
        ctx,
        nodes,
        fn.name.value,
        params,
        followups,
        pipeline_args=pipeline_args,
        with_handles=with_handles,
    )


def instances_of(
    ctx: FileContext,
    refs: list[cst.CSTNode],
    name: str,
    params: set[str],
    followups: list[FollowUp],
    *,
    pipeline_args: bool,
    with_handles: bool = False,
) -> list[Instance]:
    """Each call of the pipeline factory ``name`` (``refs`` are references to it) creates an
    object, followed wherever it goes. ``with_handles``: see :func:`follow_pipeline`;
    checkpoint arguments are then the front end's."""
    calls = []
    for ref in refs:
        call = ctx.parents.get(ref)
        if isinstance(call, cst.Call) and call.func is ref:
            calls.append(call)
        else:
            followups.append(FollowUp(ref, f"`{name}` is used here other than by calling it"))
    flow = Flow(ctx, {id(c) for c in calls})
    instances: list[Instance] = []
    for call in calls:
        stmt = ctx.enclosing_statement(call)
        if any(a.star for a in call.args) or not isinstance(stmt, cst.SimpleStatementLine):
            why = (
                "*args/**kwargs"
                if any(a.star for a in call.args)
                else "the call is part of a compound statement"
            )
            followups.append(
                FollowUp(call, f"`{name}(...)` creates the pipeline here ({why}: not rewritten)")
            )
            continue
        # keyword arguments naming the function's own parameters go to the function
        kwargs = (
            {k: v for k, v in kwargs_of(call).items() if k not in params} if pipeline_args else {}
        )
        unsupported = check_pipeline_args(kwargs, f"at `{name}(...)`", checkpoints=with_handles)
        if unsupported:
            followups.append(FollowUp(call, "; ".join(unsupported)))
            continue
        inst = Instance(stmt, _plain_assign(stmt, call), call, kwargs, label=f"{name}(...)")
        follow_pipeline(ctx, inst, call, flow, followups, with_handles=with_handles)
        instances.append(inst)
    return instances


def _plain_assign(stmt: cst.SimpleStatementLine, call: cst.Call) -> cst.Assign | None:
    """``stmt`` is ``<target> = <call>``: its assignment."""
    small = stmt.body[0] if len(stmt.body) == 1 else None
    if isinstance(small, cst.Assign) and small.value is call and len(small.targets) == 1:
        return small
    return None
