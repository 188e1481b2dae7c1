"""Emit: the body of the dynamic-mode generator that replaces one pipeline's graph.

The body is built in phases, one method each: setup code that stays outside the loop, the
readers built once (:meth:`_Emitter.readers`), external sources made once
(:meth:`_Emitter.sources`), the graph statements lowered by the local rules
(:meth:`_Emitter.lowered`), the endless epoch loop (:meth:`_Emitter.loop`, in capture mode where
that is safe), and the docstring and RNG around it (:func:`emit_generator_body`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import libcst as cst

from dali_migrate.context import FileContext, attr_chain
from dali_migrate.fixes import TODO_PREFIX, Diagnostic

from .._cst import (
    append_arg,
    assigned_names,
    comment_line,
    free_names,
    fresh_name,
    kwarg,
    names_in,
    remove_args,
    statement,
    truthy,
    walk,
)
from .._local import LocalEnv, LocalRule, collect_nodes, lower
from .conditionals import lower_branches, lower_logic
from .current import Current, CurrentReadsRule, self_assignments
from .devices import move_cpu_operands
from .docstrings import generator_doc
from .external_source import RAISE_REASON, SourceUse, as_batch, fetch, unknown_source, wrap
from .guards import exclusive, guard_test, skeleton
from .model import Graph, PipelinePlan, ReaderUse, Refused
from .random_helpers import HelperCalls, helper_edits, random_helpers
from .recognise import has_random
from .run_once import run_once

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
RNG_NOTE = (
    "random operators now draw from an ndd.random.RNG: their values differ from the "
    "old pipeline's (dali-migrate verify aligns the streams to compare the rest)"
)


def emit_generator_body(
    ctx: FileContext, graph: Graph, plan: PipelinePlan, notes: list[Diagnostic]
) -> tuple[list[cst.BaseStatement], list[str]]:
    """The body of the generator that replaces ``graph``: setup code, the readers built once,
    one RNG, and an endless loop over batches that yields the outputs. The reader and RNG
    variables go to ``graph.handles``. Returns the statements and the ids of the local rules
    that rewrote something."""
    e = _Emitter(ctx, graph, plan, notes)
    hoisted = e.readers() + e.sources()
    if plan.dropped and hoisted:
        hoisted[0] = hoisted[0].with_changes(
            leading_lines=list(hoisted[0].leading_lines) + plan.dropped
        )
    loop = e.loop(e.lowered())
    if plan.dropped and not hoisted:
        loop = loop.with_changes(leading_lines=[*plan.dropped, *loop.leading_lines])
    doc = e.graph.docstring
    if doc is None:
        ends = e.graph.sources or any(
            isinstance(n, cst.Return) and n.value is None for s in e.graph.body for n in walk(s)
        )
        kind = "fed" if e.fed else "sourced" if ends else "endless"
        doc = generator_doc(ctx, graph.outputs, kind, [u.source for u in e.fed])
    body: list[cst.BaseStatement] = [doc]
    body += e.lowered_setup + e.lowered_once + hoisted
    if has_random(ctx, graph.container) or e.helpers or any(has_random(ctx, s) for s in graph.body):
        body.append(e.rng_stmt())
    if e.iteration is not None:
        body.append(statement(cst.Assign([cst.AssignTarget(e.iteration)], cst.Integer("0"))))
    body += e.lowered_defs
    if e.device_ctx is not None:
        body.append(e.device_stmt())
    body.append(loop)
    if e.fed:
        body.append(statement(cst.Return(cst.Name(loop.name.value))))  # type: ignore[attr-defined]
    return body, sorted(e.fired - {"DM200"})


class _Emitter:
    """The state the phases of one generator body share."""

    def __init__(
        self, ctx: FileContext, graph: Graph, plan: PipelinePlan, notes: list[Diagnostic]
    ) -> None:
        self.ctx, self.graph, self.plan, self.notes = ctx, graph, plan, notes
        self.taken = names_in(graph.container).union(*(names_in(s) for s in graph.body))
        self.taken |= {n.value for n in graph.unpacked[0]} if graph.unpacked else set()
        self.rng_var = fresh_name("rng", self.taken)
        # one reader, made unconditionally: the loop runs over its epochs
        self.single = len(graph.readers) == 1 and not graph.readers[0].guards
        self.nodes = collect_nodes(ctx, graph.container)
        self.fired: set[str] = set()
        self.helpers: dict[str, object] = {}
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
                lines += [line for line in s.leading_lines if line.comment is not None]
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
        """``stmt`` makes a reader or an external source."""
        return self.is_reader_stmt(stmt) or any(
            u.top is stmt or u.stmt is stmt for u in self.graph.sources
        )

    def is_reader_stmt(self, stmt: cst.CSTNode) -> bool:
        """``stmt`` is a reader's own assignment (not a statement that calls it inline)."""
        return any(use.stmt is stmt and not use.inline for use in self.graph.readers)

    # -- phase: the readers, built once ------------------------------------------------------------

    def readers(self) -> list[cst.BaseStatement]:
        hoisted: list[cst.BaseStatement] = []
        guarded: dict[int, dict[int, list[cst.BaseStatement]]] = {}  # by the `if` holding them
        for use in self.graph.readers:
            depends = free_names(use.call) & self.per_batch_names
            if depends:
                raise Refused(
                    f"the arguments of {self.ctx.text(use.call.func)} depend on per-batch code "
                    f"({', '.join(sorted(depends))})"
                )
            var = self._reader_name(use)
            cls = attr_chain(f"{self.ctx.ndd}.{use.op.target.ndd_path}")
            call = self.plain(use.call)
            assert isinstance(call, cst.Call)
            value = call.with_changes(func=cls, args=self._reader_args(use, list(call.args)))
            assign = cst.Assign([cst.AssignTarget(cst.Name(var))], value)
            # (a guarded reader's statement stays in the loop with its comments)
            lines = [] if use.inline or use.guards else list(use.stmt.leading_lines)
            made = self._carry(use.stmt, [statement(assign, leading_lines=lines)])
            if not use.guards:
                hoisted += made
                continue
            assert use.top is not None
            if id(use.top) not in guarded:  # one `if` like the graph code's, where it stood
                guarded[id(use.top)] = {}
                hoisted.append(use.top)
            guarded[id(use.top)].setdefault(id(use.stmt), []).extend(made)
        return [
            (skeleton(s, guarded[id(s)]) or s) if id(s) in guarded else s  # type: ignore[misc]
            for s in hoisted
        ]

    def _reader_name(self, use: ReaderUse) -> str:
        """The variable of a reader built before the loop; readers made in different branches
        of one ``if`` for the same name share one (only one of them is ever made)."""
        if use.guards:
            tests = free_names(guard_test(use.guards))
            if tests & self.per_batch_names:
                raise Refused(
                    f"{self.ctx.text(use.call.func)} is made under an `if` that reads "
                    f"{', '.join(sorted(tests & self.per_batch_names))}, assigned for each batch"
                )
        base = "reader" if self.single else _reader_var(use)
        var = next(
            (
                self.reader_vars[id(other.call)]
                for other in self.graph.readers
                if id(other.call) in self.reader_vars
                and other.guards
                and _reader_var(other) == base
                and exclusive(use.guards, other.guards)
            ),
            None,
        )
        if var is None:
            var = fresh_name(base, self.taken)
            self.graph.handles.setdefault("readers", []).append(var)
        self.reader_vars[id(use.call)] = var
        return var

    def _reader_args(self, use: ReaderUse, args: list[cst.Arg]) -> list[cst.Arg]:
        plan = self.plan
        args = remove_args(args, {"name"})
        args = _reader_seed(self.ctx, use, args, plan.seed, plan.rule_id, self.notes)
        if not self.single or plan.reader_meta:
            args = append_arg(args, kwarg("max_batch_size", plan.batch_size))
        enabled = any(
            a.keyword and a.keyword.value == "enable_checkpointing" and truthy(a) for a in args
        )
        if plan.checkpointing and not enabled:
            args = remove_args(args, {"enable_checkpointing"})
            args = append_arg(args, kwarg("enable_checkpointing", cst.Name("True")))
        return args

    # -- phase: external sources, made once --------------------------------------------------------

    def sources(self) -> list[cst.BaseStatement]:
        hoisted: list[cst.BaseStatement] = []
        sources: list[SourceUse] = []
        for use in self.graph.sources:
            if use.kind == "either":
                stmts, use = self._either(use)
                hoisted += stmts
            elif use.kind != "iterable" and not isinstance(use.source, cst.Name):
                # the source object is made once, as when the graph was defined
                depends = free_names(use.source) & self.per_batch_names
                if depends:
                    raise Refused(
                        f"the source of {self.ctx.text(use.call.func)} depends on per-batch code "
                        f"({', '.join(sorted(depends))})"
                    )
                var = cst.Name(fresh_name(f"{_first_name(use.target)}_source", self.taken))
                source = self.plain(use.source)
                assert isinstance(source, cst.BaseExpression)
                made = statement(cst.Assign([cst.AssignTarget(var)], source))
                hoisted += self._carry(use.stmt, [made])
                use = dataclasses.replace(use, source=var)
            sources.append(use)
        # shares the lists and dict the front end reads after emitting
        self.graph = dataclasses.replace(self.graph, sources=sources)
        return hoisted

    def _either(self, use: SourceUse) -> tuple[list[cst.BaseStatement], SourceUse]:
        """A source that may be an iterable or a callable: what DALI decides at run time, written
        before the loop, which then iterates the batches."""
        text = self.ctx.text(use.source)
        if self.graph.readers or len(self.graph.sources) > 1:
            raise Refused(unknown_source(text, ", next to a reader or another external source"))
        depends = free_names(use.source) & self.per_batch_names
        if depends:
            raise Refused(
                f"the source of {self.ctx.text(use.call.func)} depends on per-batch code "
                f"({', '.join(sorted(depends))})"
            )
        if "inspect" in names_in(self.ctx.module) and not _imports_inspect(self.ctx.module):
            raise Refused(unknown_source(text))  # `inspect` names something else here
        var = fresh_name("batches", self.taken)
        code = (
            f"{var} = {text}() if inspect.isgeneratorfunction({text}) else {text}\n"
            f"try:\n    {var} = iter({var})\nexcept TypeError:\n    {var} = iter({var}, None)\n"
        )
        stmts = list(cst.parse_module(code).body)
        comment = [
            cst.EmptyLine(comment=cst.Comment(line))
            for line in (
                "# as external_source: a generator function is called, an iterable iterated, and a",
                "# callable called once per batch",
            )
        ]
        stmts[0] = stmts[0].with_changes(leading_lines=comment)
        return stmts, dataclasses.replace(use, kind="iterable", source=cst.Name(var))

    # -- phase: the graph statements, lowered ------------------------------------------------------

    def lowered(self) -> list[cst.BaseStatement]:
        graph = self.graph
        iterable = [u for u in graph.sources if u.kind == "iterable"]
        if iterable and (graph.readers or len(graph.sources) > 1):
            raise Refused("an iterable external source next to a reader or another external source")
        self.data_var = cst.Name(fresh_name("data", self.taken))
        env = self._env()
        rules: list[LocalRule] = list(self.plan.lowering)
        self.helpers = random_helpers(self.ctx, graph.container, self.plan.helper_hosts)
        if self.helpers:
            graph.extra_edits += helper_edits(self.ctx, self.helpers, rules, self.fired)
            graph.claimed += [h.fn for h in self.helpers.values()]
            rules.append(HelperCalls(self.helpers))
        inline = {id(u.call): self._inline_value(u) for u in graph.readers if u.inline or u.guards}
        inline |= {id(u.call): u.target for u in graph.sources if u.inline_at is not None}
        if inline:
            rules.insert(0, _InlineReaders(inline))  # type: ignore[arg-type]
        if self.current:
            rules.insert(0, CurrentReadsRule(self.current))  # type: ignore[arg-type]
        self.lowered_defs = [self._carry(s, [self._lower(s, env, rules)])[0] for s in self.defs]
        self.lowered_setup = [self._carry(s, [self._lower(s, env, rules)])[0] for s in self.setup]
        self.lowered_once = [self._carry(s, [self._lower(s, env, rules)])[0] for s in self.once]
        out: list[cst.BaseStatement] = []
        for s in self.loop_body:
            out += self._carry(s, self._statement(s, env, rules))
        return out

    def _inline_value(self, use: ReaderUse) -> cst.BaseExpression:
        """What a reader called inside an expression becomes there: the batch of the loop (one
        reader), or the reader called for one batch (several)."""
        if self.single:
            return use.target  # type: ignore[return-value]
        return cst.Call(
            cst.Name(self.reader_vars[id(use.call)]),
            args=[kwarg("batch_size", self.plan.batch_size)],
        )

    def _env(self) -> LocalEnv:
        """What the local rules may rely on inside the loop: the batch size, the RNG, the data."""
        graph = self.graph
        for use in graph.sources:
            target = use.target
            for t in (
                [target] if isinstance(target, cst.Name) else [e.value for e in target.elements]
            ):
                self.nodes.add(t.value)
        if self.single:
            self.target, batch_expr = _loop_target(graph.readers[0], self.plan.batch_size)
            if isinstance(self.target, cst.Name) and reader_outputs(graph.readers[0]) == 1:
                self.nodes.add(self.target.value)
        elif graph.readers or not graph.sources:
            self.target, batch_expr = None, self.plan.batch_size  # no input: batches of batch_size
        else:  # the first external source's batch
            self.target = None
            batch_expr = cst.Attribute(
                cst.Name(_first_name(graph.sources[0].target)), cst.Name("batch_size")
            )
        for use in graph.readers:
            if isinstance(use.target, cst.Name) and reader_outputs(use) == 1:
                self.nodes.add(use.target.value)
        return LocalEnv(batch_size=batch_expr, rng=cst.Name(self.rng_var), nodes=self.nodes)

    def _statement(
        self, s: cst.BaseStatement, env: LocalEnv, rules: list[LocalRule]
    ) -> list[cst.BaseStatement]:
        """One statement of the graph code, as it runs once per batch."""
        ctx, graph = self.ctx, self.graph
        source = next((u for u in graph.sources if u.stmt is s), None)
        if source is not None:
            return self._parallel_todo(
                source,
                _source_statements(
                    ctx, source, self.iteration, self.data_var, self.plan.batch_size
                ),
            )
        made = [u for u in graph.sources if u.inline_at is s]
        if made:  # the batches of the sources called in it first, bound to their names
            out = []
            for u in made:
                stmts = _source_statements(
                    ctx, u, self.iteration, self.data_var, self.plan.batch_size
                )
                if not out:
                    stmts[0] = stmts[0].with_changes(leading_lines=s.leading_lines)
                out += self._parallel_todo(u, stmts)
            rest = self._statement_rest(s, env, rules)
            if rest:  # its comments went above the sources' statements
                rest[0] = rest[0].with_changes(leading_lines=[])
            return out + rest
        return self._statement_rest(s, env, rules)

    def _parallel_todo(
        self, use: SourceUse, stmts: list[cst.BaseStatement]
    ) -> list[cst.BaseStatement]:
        """``stmts`` (what fetches the batch of ``use``) with the TODO of a source that ran in
        worker processes (``parallel=True``) above them, and its diagnostic."""
        if not use.parallel:
            return stmts
        source = use.source.func if isinstance(use.source, cst.Call) else use.source
        text = (
            f"external_source(parallel=True) ran `{self.ctx.render(source, [])}` in worker "
            "processes; the generator calls it here, in its own thread: the same batches, made "
            "more slowly (for the speed, compute the samples in a worker pool, e.g. "
            f"concurrent.futures, and pass them to {self.ctx.ndd}.as_batch)"
        )
        rule = self.plan.rule_id
        self.notes.append(Diagnostic(rule, text, self.ctx.line_of(use.call), 0, "todo"))
        todo = comment_line(f"{TODO_PREFIX} {rule}: {text}")
        first = stmts[0]
        stmts[0] = first.with_changes(leading_lines=[*first.leading_lines, todo])
        return stmts

    def _statement_rest(
        self, s: cst.BaseStatement, env: LocalEnv, rules: list[LocalRule]
    ) -> list[cst.BaseStatement]:
        """A statement of the graph code that makes no external source itself, after the values
        of its `and`/`or`/`not` on data (enable_conditionals), computed per sample."""
        logic = lower_logic(self.ctx, s, env, lambda n, e: self._lower(n, e, rules), self.taken)
        return (
            logic.before
            if logic.whole
            else logic.before + self._statement_itself(s, logic.env, rules)
        )

    def _statement_itself(
        self, s: cst.BaseStatement, env: LocalEnv, rules: list[LocalRule]
    ) -> list[cst.BaseStatement]:
        """What ``_statement_rest`` writes for the statement itself."""
        ctx, graph = self.ctx, self.graph
        if self.is_reader_stmt(s):
            if self.single:
                return []
            assert isinstance(s, cst.SimpleStatementLine)
            use = next(u for u in graph.readers if u.stmt is s)
            call = cst.Call(
                cst.Name(self.reader_vars[id(use.call)]),
                args=[kwarg("batch_size", self.plan.batch_size)],
            )
            return [s.with_changes(body=[s.body[0].with_changes(value=call)], leading_lines=[])]
        if s is graph.outputs_stmt and isinstance(s, cst.If):
            return [self._branches(s, env, rules)]
        if s is graph.outputs_stmt:
            return self._yield(s, env, rules)
        if isinstance(s, cst.BaseCompoundStatement):
            # an `if` on data nodes (enable_conditionals) becomes per-sample code
            branched = lower_branches(
                ctx, s, env, lambda n, e: self._lower(n, e, rules), self.taken
            )
            if branched is not None:
                return branched
        return [self._lower(s, env, rules)]

    def _branches(self, s: cst.If, env: LocalEnv, rules: list[LocalRule]) -> cst.If:
        """The ``if`` on configuration that ends the graph code, each branch yielding its own
        outputs (``graph.branch_outputs``)."""
        test = self._lower(s.test, env, rules)
        assert isinstance(test, cst.BaseExpression)
        orelse = s.orelse
        if isinstance(orelse, cst.If):
            orelse = self._branches(orelse, env, rules)
        elif isinstance(orelse, cst.Else):
            block = orelse.body.with_changes(body=self._branch(orelse.body, env, rules))
            orelse = orelse.with_changes(body=block)
        body = s.body.with_changes(body=self._branch(s.body, env, rules))
        return s.with_changes(test=test, body=body, orelse=orelse)

    def _branch(
        self, block: cst.BaseSuite, env: LocalEnv, rules: list[LocalRule]
    ) -> list[cst.BaseStatement]:
        stmts = list(getattr(block, "body", ()))
        out: list[cst.BaseStatement] = []
        for st in stmts[:-1]:
            out += self._statement_rest(st, env, rules)
        last = stmts[-1]
        assert self.graph.branch_outputs is not None and isinstance(last, cst.SimpleStatementLine)
        values = [self._lower(v, env, rules) for v in self.graph.branch_outputs[id(last)]]
        return out + self._yielded(last, values)

    def _yield(
        self, s: cst.SimpleStatementLine, env: LocalEnv, rules: list[LocalRule]
    ) -> list[cst.BaseStatement]:
        if self.graph.unpacked is not None:  # images, labels = helper(...); yield images, labels
            names, call = self.graph.unpacked
            target = cst.Tuple([cst.Element(n) for n in names], lpar=[], rpar=[])
            value = self._lower(call, env, rules)
            assert isinstance(value, cst.BaseExpression)
            unpack = statement(cst.Assign([cst.AssignTarget(target)], value))
            s = s.with_changes(leading_lines=[])
            rest = self._yielded(s, list(names))
            return [unpack.with_changes(leading_lines=self.graph.outputs_stmt.leading_lines), *rest]
        return self._yielded(s, [self._lower(v, env, rules) for v in self.graph.outputs])

    def _yielded(self, s: cst.SimpleStatementLine, values: list) -> list[cst.BaseStatement]:
        """``yield`` (``return``: fed) of ``values`` in place of ``s``."""
        if len(values) > 1:
            yielded = cst.Tuple([cst.Element(v) for v in values], lpar=[], rpar=[])
        else:
            yielded = cst.Tuple([cst.Element(values[0])])
        result = cst.Return(yielded) if self.fed else cst.Expr(cst.Yield(yielded))
        out: list[cst.BaseStatement] = [s.with_changes(body=[result])]
        if self.iteration is not None:
            out.append(statement(cst.AugAssign(self.iteration, cst.AddAssign(), cst.Integer("1"))))
        return out

    def _lower(self, node: cst.CSTNode, env: LocalEnv, rules: list[LocalRule]) -> cst.CSTNode:
        new, diags = lower(self.ctx, node, env, rules, self.fired)
        if diags:
            raise Refused("; ".join(dict.fromkeys(d.message for d in diags)))
        return new

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
                and _capturable(graph, lowered)
            )
            plan.captured = self.capture
        if not self.capture:
            evaluated = _Evaluated(self._computed_already())
            lowered = [s.visit(evaluated) for s in lowered]
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
        if plan.device is not None and not self.single:
            lowered = self._until_yield_in_device(lowered)
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
            if plan.device is not None:
                # the epoch runs in the context (its operators on its GPU, a capture loop's
                # graph too): the same object every epoch, as capture mode requires
                epoch_args.append(kwarg("ctx", cst.Name(self._device_ctx())))
            if self.capture:
                epoch_args.append(kwarg("capture", cst.Name("True")))
            reader = cst.Name(self.reader_vars[id(graph.readers[0].call)])
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

    def _until_yield_in_device(self, stmts: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        """The statements before the loop's yield in ``with ctx:``, the yield after it, so that
        the context is not left entered while the consumer runs; a yield that still calls
        operators computes its value in the context first (``batch = ...``). Unchanged where the
        loop has no yield of its own at its top (the front end keeps its TODO)."""
        at = next((i for i, s in enumerate(stmts) if _yielded(s) is not None), None)
        if at is None or any(
            isinstance(n, cst.Yield) for s in stmts[:at] for n in _walk_outside_defs(s)
        ):
            return stmts
        stmt, yielded = stmts[at], _yielded(stmts[at])
        assert isinstance(stmt, cst.SimpleStatementLine) and yielded is not None
        values = yielded.elements if isinstance(yielded, cst.Tuple) else [cst.Element(yielded)]
        inside = list(stmts[:at])
        if not all(_computed(e.value) for e in values):
            batch = cst.Name(fresh_name("outputs", self.taken))
            inside.append(stmt.with_changes(body=[cst.Assign([cst.AssignTarget(batch)], yielded)]))
            stmt = stmt.with_changes(body=[cst.Expr(cst.Yield(batch))], leading_lines=[])
        first = inside[0]
        block = self._in_device([first.with_changes(leading_lines=[]), *inside[1:]])
        return [block.with_changes(leading_lines=first.leading_lines), stmt, *stmts[at + 1 :]]

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

    # -- phase: the RNG ------------------------------------------------------------------------------

    def rng_stmt(self) -> cst.SimpleStatementLine:
        """``rng = ndd.random.RNG(seed=seed)``, and the note that random values differ."""
        self.graph.handles["rng"] = self.rng_var
        rng_args = [kwarg("seed", self.plan.seed)] if self.plan.seed is not None else []
        rng = cst.Call(func=attr_chain(f"{self.ctx.ndd}.random.RNG"), args=rng_args)
        self.notes.append(self.ctx.info(self.plan.rule_id, self.graph.container, RNG_NOTE))
        return statement(cst.Assign([cst.AssignTarget(cst.Name(self.rng_var))], rng))


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
        return (
            updated.with_changes(value=self._values(updated.value))
            if updated.value is not None
            else updated
        )

    def leave_Return(self, original: cst.Return, updated: cst.Return) -> cst.Return:
        return (
            updated.with_changes(value=self._values(updated.value))
            if updated.value is not None
            else updated
        )

    def _values(self, value: cst.BaseExpression) -> cst.BaseExpression:
        if isinstance(value, cst.Tuple):
            return value.with_changes(
                elements=[e.with_changes(value=self._one(e.value)) for e in value.elements]
            )
        return self._one(value)

    def _one(self, value: cst.BaseExpression) -> cst.BaseExpression:
        if isinstance(value, cst.Name) and value.value in self.computed:
            return value
        if isinstance(
            value, (cst.BinaryOperation, cst.UnaryOperation, cst.Comparison, cst.BooleanOperation)
        ):
            value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        self.wrapped += 1
        return cst.Call(cst.Attribute(value, cst.Name("evaluate")))


class _InlineReaders:
    """Lowering rule: a reader called inside an expression is replaced by its batch."""

    id = "DM200"
    node_types = (cst.Call,)

    def __init__(self, values: dict[int, cst.BaseExpression]) -> None:
        self.values = values

    def replaces(self, node: cst.CSTNode) -> bool:
        return id(node) in self.values

    def rewrite(
        self, ctx: FileContext, original: cst.CSTNode, updated: cst.CSTNode, env: LocalEnv
    ) -> cst.CSTNode | None:
        return self.values.get(id(original))


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


_SHARED_CONTEXT = "# DALI's context of that GPU, one for all its loops (they may take turns)"


def _yielded(stmt: cst.CSTNode) -> cst.BaseExpression | None:
    """What ``yield <value>`` (a statement of its own) yields."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        small = stmt.body[0]
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Yield):
            value = small.value.value
            return value if isinstance(value, cst.BaseExpression) else None
    return None


def _computed(value: cst.BaseExpression) -> bool:
    """A batch bound to a name, or its ``.evaluate()``: nothing left to run on a device."""
    if isinstance(value, cst.Call) and not value.args and isinstance(value.func, cst.Attribute):
        value = value.func.value if value.func.attr.value == "evaluate" else value
    return isinstance(value, cst.Name)


def _imports_inspect(module: cst.Module) -> bool:
    return any(
        isinstance(s, cst.SimpleStatementLine)
        and isinstance(s.body[0], cst.Import)
        and any(
            a.asname is None and isinstance(a.name, cst.Name) and a.name.value == "inspect"
            for a in s.body[0].names
        )
        for s in module.body
    )


def _first_name(target: cst.BaseAssignTargetExpression) -> str:
    while isinstance(target, (cst.Tuple, cst.List)):
        target = target.elements[0].value
    return target.value if isinstance(target, cst.Name) else "input"


def _source_statements(
    ctx: FileContext,
    use: SourceUse,
    iteration: cst.Name | None,
    data: cst.Name,
    batch_size: cst.BaseExpression,
) -> list[cst.BaseStatement]:
    """``x = fn.external_source(source=...)`` in the loop: the batch the source gives now."""
    assign = use.stmt.body[0]
    if use.kind == "fed":
        return [
            use.stmt.with_changes(
                body=[assign.with_changes(value=as_batch(ctx.ndd, use.source, use.as_batch_args))]
            )
        ]
    if use.kind == "iterable":
        return [use.stmt.with_changes(body=[assign.with_changes(value=wrap(ctx.ndd, use, data))])]
    call = fetch(use, iteration, batch_size)
    if not use.stops:
        return [use.stmt.with_changes(body=[assign.with_changes(value=wrap(ctx.ndd, use, call))])]
    # pipeline mode ended the run when the source raised StopIteration; so does the generator
    guarded = cst.Try(
        body=cst.IndentedBlock([statement(cst.Assign([cst.AssignTarget(data)], call))]),
        handlers=[
            cst.ExceptHandler(
                body=cst.IndentedBlock([statement(cst.Return())]), type=cst.Name("StopIteration")
            )
        ],
        leading_lines=use.stmt.leading_lines,
    )
    kept = use.stmt.with_changes(
        body=[assign.with_changes(value=wrap(ctx.ndd, use, data))], leading_lines=[]
    )
    return [guarded, kept]


def _reader_var(use: ReaderUse) -> str:
    """``images_reader`` for ``images, labels = fn.readers.file(...)`` (or ``images =
    fn.readers.file(...)[0]``); ``numpy_reader`` when the outputs have no plain name."""
    target = use.target
    small = use.stmt.body[0] if use.inline and len(use.stmt.body) == 1 else None
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
    if isinstance(target, (cst.Tuple, cst.List)) and target.elements:
        target = target.elements[0].value
    if isinstance(target, cst.Name):
        return f"{target.value}_reader"
    return (use.op.target.ndd_path or "reader").split(".")[-1].lower() + "_reader"


def _reader_seed(
    ctx: FileContext,
    use: ReaderUse,
    args: list[cst.Arg],
    seed: cst.BaseExpression | None,
    rule_id: str,
    notes: list[Diagnostic],
) -> list[cst.Arg]:
    """A shuffling reader without its own seed gets the pipeline's: an ndd reader without a
    seed shuffles the same way in every run."""
    shuffles = any(
        a.keyword and a.keyword.value in ("random_shuffle", "shuffle_after_epoch") and truthy(a)
        for a in args
    )
    if not shuffles or any(a.keyword and a.keyword.value == "seed" for a in args):
        return args
    if seed is not None:
        notes.append(
            ctx.info(
                rule_id,
                use.call,
                f"the reader now shuffles with seed={ctx.render(seed, [])}; pipeline mode derived "
                "its seed from the "
                "pipeline seed, so the shuffle order differs from the old pipeline's (each epoch "
                "holds the same samples)",
            )
        )
        return append_arg(args, kwarg("seed", seed))
    notes.append(
        ctx.info(
            rule_id,
            use.call,
            "the pipeline had no seed, so its shuffle order was random each run; the ndd "
            "reader without seed= shuffles the same way every run",
        )
    )
    return args


def _loop_target(
    use: ReaderUse, batch_size: cst.BaseExpression
) -> tuple[cst.BaseAssignTargetExpression, cst.BaseExpression]:
    """How ``for ... in reader.next_epoch(...)`` unpacks a batch like the old code unpacked the
    reader node, and an expression for the size of the current batch."""
    target = use.target
    op = use.op.target
    if isinstance(target, (cst.Tuple, cst.List)):
        elements = [e.value for e in target.elements]
        if not all(isinstance(e, cst.Name) for e in elements):
            raise Refused("the reader's outputs are not unpacked into plain names")
        first = elements[0]
        bare = {"lpar": [], "rpar": []} if len(elements) > 1 else {}
        return cst.Tuple([cst.Element(e) for e in elements], **bare), cst.Attribute(
            first, cst.Name("batch_size")
        )
    if not isinstance(target, cst.Name):
        raise Refused("the reader's outputs are not assigned to plain names")
    if op.fn_path == "readers.tfrecord":
        # ndd's TFRecord reader yields a dict keyed by feature, as the pipeline node did
        return target, batch_size
    outputs = reader_outputs(use)
    if outputs == 1:
        return cst.Tuple([cst.Element(target)]), cst.Attribute(target, cst.Name("batch_size"))
    if outputs and outputs > 1:
        first_output = cst.Subscript(
            value=target, slice=[cst.SubscriptElement(cst.Index(cst.Integer("0")))]
        )
        return target, cst.Attribute(first_output, cst.Name("batch_size"))
    raise Refused(
        f"the number of outputs of {op.fn_path} depends on its arguments: unpack them into names"
    )


def reader_outputs(use: ReaderUse) -> int | None:
    """How many outputs the reader has: the catalog's number, or for the webdataset reader one
    per element of a literal ``ext=`` list (a string: one); None when it is not known."""
    if use.op.target.num_outputs is not None:
        return use.op.target.num_outputs
    if use.op.target.fn_path == "readers.webdataset":
        ext = next((a.value for a in use.call.args if a.keyword and a.keyword.value == "ext"), None)
        if isinstance(ext, (cst.List, cst.Tuple)) and not any(
            isinstance(e, cst.StarredElement) for e in ext.elements
        ):
            return len(ext.elements)
        if isinstance(ext, (cst.SimpleString, cst.ConcatenatedString)):
            return 1
    return None


def _walk_outside_defs(
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
            stack.extend(reversed(n.children))


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
    for n in _walk_outside_defs(stmt, skip):
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
