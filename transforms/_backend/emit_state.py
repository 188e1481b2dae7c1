"""The state the phases of one generator body share (:class:`EmitState`): the graph code split
into setup, helper definitions and per-batch statements, the names taken, the reads of
``Pipeline.current()`` and the comments of the statements dropped with them."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Diagnostic

from .._cst import assigned_names, children, free_names, fresh_name, leading_lines, names_in
from .._local import LocalEnv, LocalRule, collect_nodes, lower
from .current import Current, CurrentReadsRule, self_assignments
from .external_source import RAISE_REASON
from .handed import handed_data
from .lockstep import epoch_reader
from .model import Graph, PipelinePlan, Refused
from .random_helpers import RandomHelper
from .run_once import run_once


class EmitState:
    """The state the phases of one generator body share; each phase is a class of its own
    module built on this one (``emit_inputs``, ``emit_loop``), joined in ``emit._Emitter``."""

    #: set by the lowering phase (``emit._Emitter.lowered``), read by the loop
    target: cst.BaseAssignTargetExpression | None
    data_var: cst.Name

    def __init__(
        self, ctx: FileContext, graph: Graph, plan: PipelinePlan, notes: list[Diagnostic]
    ) -> None:
        self.ctx, self.graph, self.plan, self.notes = ctx, graph, plan, notes
        self.taken = names_in(graph.container).union(*(names_in(s) for s in graph.body))
        self.taken |= {n.value for n in graph.unpacked[0]} if graph.unpacked else set()
        self.rng_var = fresh_name("rng", self.taken)
        # one reader, made unconditionally (or the one a loader's epochs follow): the loop runs
        # over its epochs
        self.lead = epoch_reader(graph, plan)
        self.single = self.lead is not None
        self.nodes = collect_nodes(ctx, graph.container)
        if graph.outputs_list is not None:  # the list of the outputs: made anew for each batch
            self.nodes.add(graph.outputs_list)
        if graph.handed is not None:  # what callables the caller passed give is data too
            self.nodes = handed_data(graph.body, graph.handed, self.nodes, self._read_later)
        #: the loop calls callables the caller passed (a TODO above each call)
        self.handed_called = False
        self.fired: set[str] = set()
        self.helpers: dict[str, RandomHelper] = {}
        self.reader_vars: dict[int, str] = {}
        #: comment lines of dropped statements, by id of the statement they now go above
        self.carried: dict[int, list[cst.EmptyLine]] = {}
        self.current = self._current()  # reads of Pipeline.current() -> the generator's values
        # setup code before the first input stays outside the loop unless it builds graph nodes
        graph = self.graph
        inputs = [graph.body.index(u.top or u.stmt) for u in graph.readers]
        inputs += [graph.body.index(u.top) for u in graph.sources]
        if not inputs:  # no reader: the setup is what comes before the first graph node
            inputs = [
                next(
                    (
                        i
                        for i, s in enumerate(graph.body)
                        if not isinstance(s, cst.FunctionDef)
                        and _runs_dali(ctx, s, self.nodes, skip=self.current)
                    ),
                    len(graph.body) - 1,
                )
            ]
        self.setup = [
            s
            for s in self.graph.body[: min(inputs)]
            if not _runs_dali(ctx, s, self.nodes, skip=self.current)
        ]
        # helpers defined in the graph code are defined once, before the loop
        self.defs = [
            s for s in graph.body if isinstance(s, cst.FunctionDef) and s not in self.setup
        ]
        self.loop_body = [s for s in graph.body if s not in self.setup and s not in self.defs]
        self.once = run_once(
            self.loop_body,
            lambda s: _runs_dali(ctx, s, self.nodes, skip=self.current),
            self.is_input_stmt,
        )
        self.loop_body = [s for s in self.loop_body if not any(s is o for o in self.once)]
        self.lowered_defs: list[cst.BaseStatement] = []
        self.per_batch_names = set().union(
            *(assigned_names(s) for s in self.loop_body if not self.is_reader_stmt(s))
        )
        #: sources fed by pipe.feed_input(): the generator becomes a function of their data
        self.fed = [u for u in graph.sources if u.kind == "fed"]
        if any(u.raises for u in graph.sources) and not plan.passes:
            raise Refused(RAISE_REASON)
        if self.fed and (graph.readers or len(self.fed) != len(graph.sources)):
            raise Refused(
                "an external source fed by pipe.feed_input() next to a reader or another external "
                "source"
            )
        counted = any(u.kind in ("call1", "sample1") for u in graph.sources)
        self.iteration = cst.Name(fresh_name("iteration", self.taken)) if counted else None
        self.capture = False
        self.evaluated = False
        #: the EvalContext variable of the pipeline's GPU, once a loop runs its operators in it
        self.device_ctx: str | None = None

    def _read_later(self, i: int, nodes: set[str]) -> set[str]:
        """The names the graph code after its ``i``-th statement reads to build graph nodes
        (``nodes``: the names holding data), or gives as outputs."""
        later = self.graph.body[i + 1 :]
        return set().union(
            *(
                free_names(s)
                for s in later
                if s is self.graph.outputs_stmt or _runs_dali(self.ctx, s, nodes)
            )
        )

    def _current(self) -> dict[int, cst.BaseExpression]:
        """What each read of ``Pipeline.current()`` becomes (by id of the read), from the plan;
        the statements that only name the current pipeline leave the graph's body."""
        current: Current | None = self.graph.current
        if current is None or not (current.reads or current.aliases):
            return {}
        missing = sorted(current.attrs - set(self.plan.current))
        if missing:
            raise Refused(
                f"`Pipeline.current().{missing[0]}` reads the pipeline being built, and the "
                "generator has no value for it"
            )
        dropped = current.aliases + self_assignments(current, self.plan.current, self.ctx)
        body: list[cst.BaseStatement] = []
        lines: list[cst.EmptyLine] = []  # the comments above a dropped statement stay
        for s in self.graph.body:
            if any(s is d for d in dropped):
                lines += [line for line in leading_lines(s) if line.comment is not None]
                continue
            if lines:
                self.carried[id(s)], lines = lines, []
            body.append(s)
        self.graph = dataclasses.replace(self.graph, body=body)
        return {id(attr): self.plan.current[name] for attr, name in current.reads}

    def _carry(self, original: cst.CSTNode, new: list) -> list:
        """``new`` (what ``original`` became) with the comments carried to ``original`` above
        its first statement."""
        lines = self.carried.pop(id(original), None)
        if lines and new:
            new[0] = new[0].with_changes(leading_lines=[*lines, *new[0].leading_lines])
        elif lines:
            self.carried[id(original)] = lines
        return new

    def plain(self, node: cst.CSTNode) -> cst.CSTNode:
        """``node`` with the reads of ``Pipeline.current()`` in it replaced (code the local
        rules do not lower: the arguments of readers and sources built before the loop)."""
        if not self.current:
            return node
        rule: LocalRule = CurrentReadsRule(self.current)  # type: ignore[assignment]
        new, _ = lower(self.ctx, node, LocalEnv(), [rule])
        return new

    def is_input_stmt(self, stmt: cst.CSTNode) -> bool:
        """``stmt`` makes a reader or an external source (or holds one in its ``if`` blocks:
        its tests are read before the loop too)."""
        return (
            self.is_reader_stmt(stmt)
            or any(u.top is stmt for u in self.graph.readers if u.guards)
            or any(u.top is stmt or u.stmt is stmt for u in self.graph.sources)
        )

    def is_reader_stmt(self, stmt: cst.CSTNode) -> bool:
        """``stmt`` is a reader's own assignment (not a statement that calls it inline)."""
        return any(use.stmt is stmt and not use.inline for use in self.graph.readers)


def walk_outside_defs(
    node: cst.CSTNode, skip: dict[int, cst.BaseExpression] | None = None
) -> Iterator[cst.CSTNode]:
    """The nodes of ``node`` outside the lambdas and functions it defines (and outside the
    nodes whose ids ``skip`` holds)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if skip and id(n) in skip:
            continue
        yield n
        if n is node or not isinstance(n, (cst.Lambda, cst.FunctionDef)):
            stack.extend(reversed(children(n)))


def _runs_dali(
    ctx: FileContext,
    stmt: cst.CSTNode,
    nodes: set[str],
    seen: frozenset[str] = frozenset(),
    skip: dict[int, cst.BaseExpression] | None = None,
) -> bool:
    """Whether running a statement runs DALI or reads a name holding a data node (code in the
    lambdas and functions it defines runs later: it does not count; a function of the module it
    calls does; reads of ``Pipeline.current()``, by id in ``skip``, are plain values)."""
    helpers = {s.name.value: s for s in ctx.module.body if isinstance(s, cst.FunctionDef)}
    for n in walk_outside_defs(stmt, skip):
        called = n.func.value if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) else None
        if called in helpers and called not in seen:
            if _runs_dali(ctx, helpers[called].body, set(), seen | {called}):
                return True
        if isinstance(n, (cst.Name, cst.Attribute)) and (
            ctx.is_fn_ref(n) or (isinstance(n, cst.Name) and n.value in nodes)
        ):
            return True
        q = ctx.qualname(n) if isinstance(n, (cst.Name, cst.Attribute)) else None
        if q and q.startswith("nvidia.dali") and not _plain_value(q):
            return True
    return False


#: DALI modules whose members are plain Python values in both modes (no graph node)
_PLAIN_MODULES = ("nvidia.dali.types", "nvidia.dali.tfrecord")


def _plain_value(qualname: str) -> bool:
    """``qualname`` names a value that builds no graph node: a type, an enum member, a TFRecord
    feature (``types.FLOAT``, ``tfrec.FixedLenFeature(...)``), not ``types.Constant``."""
    if qualname in ("nvidia.dali.types.Constant", "nvidia.dali.types.ScalarConstant"):
        return False
    return any(qualname == m or qualname.startswith(m + ".") for m in _PLAIN_MODULES)


#: whether running a statement runs DALI or reads a data node (for the modules beside this one)
runs_dali = _runs_dali
