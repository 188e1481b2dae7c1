"""Emit, the loop phase: the endless epoch loop (:meth:`LoopPhase.loop`, in capture mode where
that is safe, else with its outputs evaluated before the yield) and the context of the
pipeline's GPU it runs in where that is not the current device."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from dali_migrate.context import attr_chain

from .._cst import free_names, fresh_name, kwarg, leading_lines, names_in, statement, visited, walk
from .devices import move_cpu_operands
from .emit_state import EmitState
from .model import Graph
from .tail_yields import bound_yields, has_yield, yielded

#: what capture mode means for the code around the generator, written above the loop
CAPTURE_COMMENT = (
    "# capture=True: runs the loop as one prebuilt graph; one such loop can be active at a time"
)
#: why the outputs of an eager loop are evaluated (docs/dali-facts/capture-and-exit.md)
EVALUATE_COMMENT = (
    "# .evaluate(): each batch is computed before it is handed on, as pipe.run() did (DALI 2.4\n"
    "# aborts at exit while an operator is still running)"
)
#: the same, where another pipeline of the module took the one capture loop
ELSEWHERE_COMMENT = (
    "# no capture: another pipeline's capture loop is active; evaluated before the yield, as\n"
    "# pipe.run() did (DALI 2.4 aborts at exit while an operator is still running)"
)


class LoopPhase(EmitState):
    """The loop over batches, and the device context around it."""

    # -- phase: the endless epoch loop ---------------------------------------------------------------

    def loop(self, lowered: list[cst.BaseStatement]) -> cst.BaseCompoundStatement:
        graph, plan = self.graph, self.plan
        # capture mode rejects the moved operands on its second step (DALI 2.4, seen on an H200)
        lowered, moved = move_cpu_operands(lowered, self.nodes)
        if self.single:
            self.capture = (
                plan.single_use
                and not moved
                and not plan.checkpointing
                and not self.handed_called  # code the caller passed: what it runs is not known
                and _capturable(graph, lowered)
            )
            plan.captured = self.capture
        if not self.capture:
            evaluated = _Evaluated(self._computed_already())
            lowered = [visited(s, evaluated) for s in lowered]
            self.evaluated = evaluated.wrapped > 0
        if plan.device is not None and free_names(plan.device) & self.per_batch_names:
            plan.device = None  # set per batch: the front end keeps its TODO
        if self.fed:  # one batch per call, of the data feed_input() gave
            params = cst.Parameters([cst.Param(cst.Name(u.source.value)) for u in self.fed])
            name = fresh_name("run", self.taken)
            run = cst.FunctionDef(cst.Name(name), params, cst.IndentedBlock(lowered))
            if plan.device is not None:  # the return leaves the context: nothing stays in it
                run = run.with_changes(body=cst.IndentedBlock([self._in_device(lowered)]))
            return run
        if plan.device is not None and (not self.single or plan.device_turns):
            lowered = self._until_yield_in_device(lowered, apart=plan.device_turns)
        iterable = [u for u in graph.sources if u.kind == "iterable"]
        if iterable:
            loop: cst.BaseCompoundStatement = cst.For(
                target=self.data_var, iter=iterable[0].source, body=cst.IndentedBlock(body=lowered)
            )
            if iterable[0].cycle:  # cycle=True/"quiet": DALI starts the source over when it ends
                loop = cst.While(test=cst.Name("True"), body=cst.IndentedBlock(body=[loop]))
            return self._comment(loop)
        body: list[cst.BaseStatement] = lowered
        if self.single:
            epoch_args = [kwarg("batch_size", plan.batch_size)]
            if plan.device is not None and not plan.device_turns:
                # the epoch runs in the context (its operators on its GPU, a capture loop's
                # graph too): the same object every epoch, as capture mode requires
                epoch_args.append(kwarg("ctx", cst.Name(self._device_ctx())))
            if self.capture:
                epoch_args.append(kwarg("capture", cst.Name("True")))
            assert self.lead is not None
            reader = cst.Name(self.reader_vars[id(self.lead.call)])
            next_epoch = cst.Call(
                func=cst.Attribute(reader, cst.Name("next_epoch")), args=epoch_args
            )
            assert self.target is not None
            body = [
                cst.For(target=self.target, iter=next_epoch, body=cst.IndentedBlock(body=lowered))
            ]
        return self._comment(cst.While(test=cst.Name("True"), body=cst.IndentedBlock(body=body)))

    # -- the pipeline's GPU, where it is not the current device -------------------------------------

    def _device_ctx(self) -> str:
        if self.device_ctx is None:
            self.device_ctx = fresh_name("ctx", self.taken)
            self.plan.device_applied = True
        return self.device_ctx

    def device_stmt(self) -> cst.With:
        """``ctx``: the default ``EvalContext`` of the pipeline's GPU, taken once under
        ``with ndd.Device("gpu", <device_id>):``. Not a new ``EvalContext(device_id=...)``: an
        epoch keeps its context entered while the generator is suspended, and DALI's context
        stack fails when two loops holding different contexts take turns; the default context
        of a device is one object, which every loop on that GPU then shares."""
        assert self.device_ctx is not None and self.plan.device is not None
        ndd = self.ctx.ndd
        gpu = [cst.Arg(cst.SimpleString('"gpu"')), cst.Arg(self.plan.device)]
        device = cst.Call(attr_chain(f"{ndd}.Device"), gpu)
        default = cst.Call(attr_chain(f"{ndd}.EvalContext.default"))
        take = statement(cst.Assign([cst.AssignTarget(cst.Name(self.device_ctx))], default))
        lines = [cst.EmptyLine(comment=cst.Comment(_SHARED_CONTEXT))]
        return cst.With([cst.WithItem(device)], cst.IndentedBlock([take]), leading_lines=lines)

    def _in_device(self, stmts: list[cst.BaseStatement]) -> cst.With:
        """``with ctx:`` around ``stmts``: the operators they call run on the pipeline's GPU."""
        item = cst.WithItem(cst.Name(self._device_ctx()))
        return cst.With(items=[item], body=cst.IndentedBlock(stmts))

    def _until_yield_in_device(
        self, stmts: list[cst.BaseStatement], apart: bool = False
    ) -> list[cst.BaseStatement]:
        """The statements before the loop's yield in ``with ctx:``, the yield after it, so that
        the context is not left entered while the consumer runs; a yield that still calls
        operators computes its value in the context first (``outputs = ...``; ``apart``: each
        such output in a name of its own, the yield keeping one value per output), as do yields
        ending the branches of an ``if`` (``tail_yields``). Unchanged where the loop's first
        statement that yields has another shape (the front end keeps its TODO)."""
        at = next((i for i, s in enumerate(stmts) if has_yield(s)), None)
        if at is None:
            return stmts
        stmt, value = stmts[at], yielded(stmts[at])
        inside, after = list(stmts[:at]), list(stmts[at + 1 :])
        if value is None:  # yields ending the branches of an `if`
            outputs = cst.Name(fresh_name("outputs", self.taken))
            branched = bound_yields(stmt, outputs)
            if branched is None:
                self.taken.discard(outputs.value)
                return stmts
            inside.append(branched[0])
            stmt = statement(cst.Expr(cst.Yield(outputs)))
            after = [*branched[1], *after]
        elif not all(_computed(e) for e in _elements(value)):
            assert isinstance(stmt, cst.SimpleStatementLine)
            if apart:
                inside, stmt = self._outputs_apart(stmt, _elements(value), inside)
            else:
                batch = cst.Name(fresh_name("outputs", self.taken))
                assign = cst.Assign([cst.AssignTarget(batch)], value)
                inside.append(stmt.with_changes(body=[assign]))
                stmt = stmt.with_changes(body=[cst.Expr(cst.Yield(batch))], leading_lines=[])
        if not inside:  # the yield is the loop's first statement: nothing runs before it
            return stmts
        first = inside[0]
        block = self._in_device([first.with_changes(leading_lines=[]), *inside[1:]])
        lines = list(leading_lines(first))
        if apart:
            lines.append(cst.EmptyLine(comment=cst.Comment(_TURNS)))
        return [block.with_changes(leading_lines=lines), stmt, *after]

    def _outputs_apart(
        self,
        stmt: cst.SimpleStatementLine,
        values: Sequence[cst.BaseExpression],
        inside: list[cst.BaseStatement],
    ) -> tuple[list[cst.BaseStatement], cst.SimpleStatementLine]:
        """``yield a, ndd.cast(b).evaluate()`` -> ``output = ndd.cast(b).evaluate()`` (in the
        context) and ``yield a, output``."""
        kept: list[cst.BaseExpression] = []
        for v in values:
            if _computed(v):
                kept.append(v)
                continue
            name = cst.Name(fresh_name("output", self.taken))
            inside.append(statement(cst.Assign([cst.AssignTarget(name)], v)))
            kept.append(name)
        value = kept[0] if len(kept) == 1 else cst.Tuple([cst.Element(v) for v in kept], [], [])
        yielded_ = cst.Expr(cst.Yield(value))
        return inside, stmt.with_changes(body=[yielded_], leading_lines=[])

    def _comment(self, loop: cst.BaseCompoundStatement) -> cst.BaseCompoundStatement:
        """What the loop's form means: capture mode, or outputs evaluated before the yield."""
        text = ""
        if self.capture:
            text = CAPTURE_COMMENT
        elif self.evaluated:
            text = ELSEWHERE_COMMENT if self.plan.capture_elsewhere else EVALUATE_COMMENT
        lines = [cst.EmptyLine(comment=cst.Comment(t)) for t in text.split("\n") if t]
        return loop.with_changes(leading_lines=[*loop.leading_lines, *lines])

    def _computed_already(self) -> set[str]:
        """Names whose batches are computed when they are bound (reader and source outputs)."""
        names = set()
        for use in [*self.graph.readers, *self.graph.sources]:
            names |= names_in(use.target)
        if self.target is not None:
            names |= names_in(self.target)
        if self.graph.unpacked is not None:  # computed by the helper that returns them
            names -= {n.value for n in self.graph.unpacked[0]}
        return names


class _Evaluated(cst.CSTTransformer):
    """``yield a, b`` -> ``yield a.evaluate(), b`` for each output an operator computes (the
    yields and returns of the loop body, not of functions defined in it)."""

    def __init__(self, computed: set[str]) -> None:
        super().__init__()
        self.computed = computed
        self.wrapped = 0

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def leave_Yield(self, original: cst.Yield, updated: cst.Yield) -> cst.Yield:
        # the loop's own `yield <outputs>` (pipeline code that yields is refused): no `yield from`
        value = updated.value
        return (
            updated.with_changes(value=self._values(value))
            if isinstance(value, cst.BaseExpression)
            else updated
        )

    def leave_Return(self, original: cst.Return, updated: cst.Return) -> cst.Return:
        return (
            updated.with_changes(value=self._values(updated.value))
            if updated.value is not None
            else updated
        )

    def _values(self, value: cst.BaseExpression) -> cst.BaseExpression:
        if _is_tuple_call(value):  # the outputs are a list: each element evaluated
            each = cst.Name("output")
            self.wrapped += 1
            element = cst.Call(cst.Attribute(each, cst.Name("evaluate")))
            loop = cst.CompFor(each, cst.ensure_type(value, cst.Call).args[0].value)
            return value.with_changes(
                args=[cst.Arg(cst.GeneratorExp(element, loop, lpar=[], rpar=[]))]
            )
        if isinstance(value, cst.Tuple):
            return value.with_changes(
                elements=[e.with_changes(value=self._one(e.value)) for e in value.elements]
            )
        return self._one(value)

    def _one(self, value: cst.BaseExpression) -> cst.BaseExpression:
        if isinstance(value, cst.Name) and value.value in self.computed:
            return value
        if isinstance(value, _LOOSE) and not value.lpar:  # `.evaluate()` must bind to all of it
            value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        self.wrapped += 1
        return cst.Call(cst.Attribute(value, cst.Name("evaluate")))


#: expressions that `.evaluate()` written after them would bind to a part of
_LOOSE = (
    cst.BinaryOperation,
    cst.UnaryOperation,
    cst.Comparison,
    cst.BooleanOperation,
    cst.IfExp,
)


def _is_tuple_call(value: cst.BaseExpression) -> bool:
    """``tuple(<name>)``: what the loop yields where the outputs are a list it builds."""
    return (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Name)
        and value.func.value == "tuple"
        and len(value.args) == 1
        and isinstance(value.args[0].value, cst.Name)
    )


def _capturable(graph: Graph, lowered: list[cst.BaseStatement]) -> bool:
    """Whether the epoch loop can run in capture mode (``next_epoch(..., capture=True)``).

    Measured on an H200 (benchmarks/results/), capture mode closes the gap between dynamic mode
    and the pipeline; in DALI 2.4 it holds only when every step calls the same operators with
    batches of the same size (no per-sample Python: ``as_batch`` or a skipped random draw), the
    loop is the only capture-mode loop of the program (a suspended capture loop stays active, so
    a second pipeline in the same thread raises "Only one capture-mode loop can be active at a
    time"), and nothing checkpoints the reader. So: one reader, no external source, a module with
    a single pipeline instantiated once, and a body of operator calls."""
    if len(graph.readers) != 1 or graph.sources:
        return False
    if any(
        isinstance(n, cst.Name) and n.value in ("as_batch", "advance")
        for s in lowered
        for n in walk(s)
    ):
        return False
    return not any(
        a.keyword is not None and a.keyword.value == "enable_checkpointing"
        for a in graph.readers[0].call.args
    )


_TURNS = "# its GPU's context for the operators only: loaders of several GPUs take turns"
_SHARED_CONTEXT = "# DALI's context of that GPU, one for all its loops (they may take turns)"


def _elements(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The values a yield gives: the elements of a tuple, else the one value."""
    return [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]


def _computed(value: cst.BaseExpression) -> bool:
    """A batch bound to a name, or its ``.evaluate()``: nothing left to run on a device."""
    if isinstance(value, cst.Call) and not value.args and isinstance(value.func, cst.Attribute):
        value = value.func.value if value.func.attr.value == "evaluate" else value
    return isinstance(value, cst.Name)
