"""Recognise: the graph code of a pipeline definition, and the definitions of a module.

A front end (``@pipeline_def`` function, ``with pipe:`` block, ``Pipeline`` subclass) hands the
statements that build a graph to :func:`analyse_graph`; what cannot be carried over is appended
to ``reasons``. The references to the object or its factory go to ``instances.instances_of``,
which follows every use of the objects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

import libcst as cst

from dali_migrate.catalog import OpInfo
from dali_migrate.context import FileContext
from dali_migrate.dali_api import PIPELINE_CLASSES, PIPELINE_DEFS

from .._cst import fresh_name, is_docstring, names_in, nested, walk, within
from .._local import collect_nodes
from ..fn_to_ndd import HANDED_OFF
from .auto_aug import auto_aug_reasons
from .current import Current, is_current_call, record_current
from .external_source import SourceUse, analyse_source, source_kwargs
from .guards import Guard, guards_of
from .model import Graph, ReaderUse
from .output_count import (
    built_at_run_time,
    returns_several,
    sequence_built,
    several_outputs,
    unpacked_outputs,
)

#: a statement of a block: a line or a compound statement, or one of a one-line suite (``def
#: f(): return x``)
_Statement: TypeAlias = "cst.BaseStatement | cst.BaseSmallStatement"

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
        if branched is not None:  # each branch of the final `if` yields its own
            last_if = cst.ensure_type(container.body.body[-1], cst.If)
            outputs_stmt, outputs = last_if, next(iter(branched.values()))
    # the statements that give the outputs of the branches of the final `if`
    ends = [n for n in walk(body_end) if id(n) in branched] if branched and body_end else []
    ends += [body_end] if chosen is not None and body_end is not None else []
    for node in walk(container.body):
        if isinstance(node, cst.Call):
            _inputs_and_ops(ctx, container, node, readers, sources, reasons)
        elif isinstance(node, cst.Return) and any(within(ctx, node, e) for e in ends):
            continue  # the outputs of one branch of the final `if`
        else:
            _node_reasons(ctx, container, node, outputs_stmt, current, current_ok, reasons)
    body: list[_Statement] = list(container.body.body)
    if chosen is not None:
        body[-1] = chosen[0]
    docstring, body = _docstring_split(container, body)
    if outputs_stmt is None or not body or body[-1] is not outputs_stmt:
        reasons.append("its outputs are not given by one statement at the end")
        return None
    if not outputs:
        reasons.append("its outputs are not a node or a tuple/list of nodes")
        return None
    reasons += [built_at_run_time(ctx, o) for o in outputs if sequence_built(o)]
    every = [o for values in branched.values() for o in values] if branched else outputs
    several = [o for o in every if returns_several(ctx, o) is not None]
    unpacked = None
    if len(outputs) == 1 and several and not branched:
        unpacked = unpacked_outputs(ctx, container, outputs[0], readers, sources)  # type: ignore[arg-type]
        outputs = list(unpacked[0]) if unpacked is not None else outputs
    if unpacked is None:
        reasons += [several_outputs(ctx, o) for o in several]
    defined = isinstance(container, cst.With) or pipeline_decorator(ctx, container) is not None
    if defined and not readers and not sources:  # (subclasses are fed through iter_setup)
        reasons += _outside_data(ctx, container)
    reasons += auto_aug_reasons(ctx, container)
    if reasons:
        return None
    assert isinstance(outputs_stmt, (cst.SimpleStatementLine, cst.If))
    graph = Graph(
        container,
        docstring,
        _indented(body),
        outputs_stmt,  # type: ignore[arg-type]  # the final `if` of branch_outputs too
        outputs,
        readers,
        sources,
    )
    graph.current = current
    graph.unpacked = unpacked
    graph.branch_outputs = branched
    return graph


def _docstring_split(
    container: cst.FunctionDef | cst.With, body: list[_Statement]
) -> tuple[cst.BaseStatement | None, list[_Statement]]:
    """A function's docstring (None for a ``with`` block, or none written) and the statements
    after it."""
    first = body[0] if body else None
    if (
        isinstance(first, cst.BaseStatement)
        and isinstance(container, cst.FunctionDef)
        and is_docstring(first)
    ):
        return first, body[1:]
    return None, body


def _indented(body: list[_Statement]) -> list[cst.BaseStatement]:
    """``body`` that ends with its outputs statement (a line or an ``if``): the statements of
    an indented block, never those of a one-line suite."""
    statements = [s for s in body if isinstance(s, cst.BaseStatement)]
    assert len(statements) == len(body)
    return statements


def _node_reasons(
    ctx: FileContext,
    container: cst.FunctionDef | cst.With,
    node: cst.CSTNode,
    outputs_stmt: cst.BaseStatement | None,
    current: Current,
    current_ok: bool,
    reasons: list[str],
) -> None:
    """Why one node of the graph code (not a call) cannot be carried over, appended to
    ``reasons``: a return before the end, a yield, a class, the API of the pipeline being built.
    Reads of ``Pipeline.current()`` are recorded on ``current`` where ``current_ok``."""
    if (
        isinstance(node, cst.Return)
        and not _is_outputs(node, outputs_stmt)
        and not nested(ctx, node, container)
    ):
        if not _ends_data(ctx, node):
            reasons.append("the pipeline returns before its last statement")
    elif isinstance(node, (cst.Yield, cst.Await)) and not nested(ctx, node, container):
        reasons.append("the pipeline code yields or awaits")
    elif isinstance(node, cst.ClassDef):
        reasons.append("class definitions in the pipeline body")
    elif isinstance(node, cst.Attribute) and _pipeline_api(ctx, node):
        call = is_current_call(ctx, node) if current_ok else None
        why = record_current(ctx, container, call, current) if call is not None else None
        if call is not None:
            if why is not None:
                reasons.append(why)
            return
        reasons.append(
            f"`{ctx.text(node)}` reads the pipeline being built, which dynamic mode has no "
            "counterpart of"
        )
    elif isinstance(node, cst.Attribute) and _builds_or_runs(ctx, node, container):
        built = ctx.text(ctx.parents[node])
        reasons.append(f"`{built}` builds or runs a pipeline inside the code that defines one")


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
        elif not at_top and op.target.is_reader:
            _guarded(ctx, container, node, op, top, readers, reasons)
        elif not at_top:
            _guarded_source(ctx, container, node, top, sources, reasons)
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


def _guards(
    ctx: FileContext,
    container: cst.CSTNode,
    call: cst.Call,
    stmt: cst.SimpleStatementLine,
    reasons: list[str],
) -> tuple[list[Guard], cst.BaseStatement] | None:
    """The tests ``call`` (in ``stmt``) is made under (``guards.guards_of``); None, with the
    reason added to ``reasons``, where they cannot be carried over."""
    what = ctx.text(call.func)
    found = guards_of(ctx, container, stmt, collect_nodes(ctx, container), what)
    if isinstance(found, str):
        reasons.append(found)
        return None
    return found


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
    found = _guards(ctx, container, call, stmt, reasons)
    if found is None:
        return
    tests, top = found
    assign = stmt.body[0] if len(stmt.body) == 1 else None
    if isinstance(assign, cst.Assign) and assign.value is call and len(assign.targets) == 1:
        readers.append(ReaderUse(stmt, assign.targets[0].target, call, op, guards=tests, top=top))
        return
    fresh = cst.Name(_fresh_output(ctx, container, op.target.ndd_path))
    readers.append(ReaderUse(stmt, fresh, call, op, inline=True, guards=tests, top=top))


def _guarded_source(
    ctx: FileContext,
    container: cst.CSTNode,
    call: cst.Call,
    stmt: cst.SimpleStatementLine,
    sources: list[SourceUse],
    reasons: list[str],
) -> None:
    """An external source made in an ``if`` block of the graph code (``guards``), in ``stmt``:
    made before the loop under the same tests, its batch taken under them in the loop."""
    found = _guards(ctx, container, call, stmt, reasons)
    if found is None:
        return
    what = ctx.text(call.func)
    tests, top = found
    test = ctx.text(tests[-1][0])
    kw = source_kwargs(call)
    if kw is not None and "source" not in kw:
        reasons.append(
            f"{what} under `if {test}` has no source=: its data is fed by name from outside "
            "(pipe.feed_input(), or a server such as Triton running the serialized pipeline), "
            "which dynamic mode has no counterpart of on one branch: keep that branch in "
            "pipeline mode, or pass the data to the generator as an argument"
        )
        return
    assign = stmt.body[0] if len(stmt.body) == 1 else None
    use: SourceUse | None = None
    if isinstance(assign, cst.Assign) and assign.value is call and len(assign.targets) == 1:
        use = analyse_source(ctx, call, assign.targets[0].target, stmt, reasons)
    else:  # called inside the statement: bound to a name of its own first
        found_here: list[SourceUse] = []
        _inline_source(ctx, container, call, stmt, found_here, reasons)
        use = found_here[0] if found_here else None
    if use is not None and use.kind in _GUARDED_KINDS:
        reasons.append(_GUARDED_KINDS[use.kind].format(f"{what} under `if {test}`"))
    elif use is not None:
        use.guards, use.guard_top = tests, top
        sources.append(use)


#: why an external source of a kind cannot be made under an ``if`` (what it is fills in)
_GUARDED_KINDS = {
    "iterable": (
        "{} is iterated, which the generator can only do in its own loop, over a source that "
        "always exists: give source= a function that returns one batch per call"
    ),
    "either": (
        "{}: the tool cannot tell whether its source is iterated or called (bind it to a "
        "function, generator or class defined in this file)"
    ),
}


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
    stmt: _Statement,
    outputs_of: Callable[[cst.BaseStatement], list[cst.BaseExpression] | None],
) -> tuple[cst.SimpleStatementLine, list[cst.BaseExpression]] | None:
    """The graph code ends with ``if cuda: return a.gpu(), b`` / ``else: return a, b`` (each
    branch, ``elif`` ones too, only the outputs statement, with as many outputs; a test on no
    data node): one outputs statement, ``return (a.gpu() if cuda else a), b``, each output a
    conditional expression where the branches differ. None for any other statement."""
    if not isinstance(stmt, cst.If):
        return None
    branches = _output_branches(ctx, container, stmt, outputs_of)
    if branches is None or len({len(values) for _, values in branches}) != 1:
        return None
    outputs = []
    for i in range(len(branches[-1][1])):
        value = branches[-1][1][i]
        for test, values in reversed(branches[:-1]):
            assert test is not None  # only the last branch (the `else`) has no test
            if not values[i].deep_equals(value):
                value = cst.IfExp(
                    test=test,
                    body=values[i],
                    orelse=value,
                    lpar=[cst.LeftParen()],
                    rpar=[cst.RightParen()],
                )
        outputs.append(value)
    elements = [cst.Element(v) for v in outputs]
    ret = cst.Return(cst.Tuple(elements) if len(outputs) != 1 else outputs[0])
    return cst.SimpleStatementLine([ret], leading_lines=stmt.leading_lines), outputs


def branch_outputs(
    ctx: FileContext,
    container: cst.CSTNode,
    stmt: _Statement,
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
        values = outputs_of(only) if isinstance(only, cst.BaseStatement) else None
        return [(None, values)] if values else None
    if not (isinstance(stmt, cst.If) and stmt.orelse is not None and len(stmt.body.body) == 1):
        return None
    data = collect_nodes(ctx, container)
    if names_in(stmt.test) & data or any(
        isinstance(n, (cst.Name, cst.Attribute)) and ctx.is_fn_ref(n) for n in walk(stmt.test)
    ):
        return None  # an `if` on data: a conditional of the pipeline (enable_conditionals)
    first = stmt.body.body[0]
    values = outputs_of(first) if isinstance(first, cst.BaseStatement) else None
    rest = _output_branches(ctx, container, stmt.orelse, outputs_of)
    return [(stmt.test, values), *rest] if values and rest else None


def _outside_data(ctx: FileContext, container: cst.FunctionDef | cst.With) -> list[str]:
    """A graph without reader or external source that unpacks data nodes made elsewhere
    (``images, labels = plugin_reader``: a plugin's reader, or a reader of the enclosing code):
    the generator would yield pipeline-mode nodes."""
    for small in walk(container.body):
        if not isinstance(small, cst.Assign) or len(small.targets) != 1:
            continue
        if nested(ctx, small, container):
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
    return q is not None and (
        q in PIPELINE_CLASSES or q.startswith("nvidia.dali.pipeline.Pipeline")
    )


def _builds_or_runs(ctx: FileContext, node: cst.Attribute, container: cst.CSTNode) -> bool:
    """``x.build()`` or ``x.run()`` in the graph code (not in a function it defines): the
    Pipeline API, which the generator that replaces this code could not keep."""
    call = ctx.parents.get(node)
    return (
        node.attr.value in ("build", "run")
        and isinstance(call, cst.Call)
        and call.func is node
        and not call.args
        and not nested(ctx, node, container)
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
