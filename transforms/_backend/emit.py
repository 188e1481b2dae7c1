"""Emit: the body of the dynamic-mode generator that replaces one pipeline's graph.

The body is built in phases, one method each, one module per stage of the body: the state they
share and the setup code that stays outside the loop (``emit_state``), the readers built once
and the external sources made once (``emit_inputs``), the graph statements lowered by the local
rules (:meth:`_Emitter.lowered`, here), the endless epoch loop (``emit_loop``, in capture mode
where that is safe), and the docstring and RNG around it (:func:`emit_generator_body`).
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from dali_migrate.context import FileContext, attr_chain
from dali_migrate.fixes import TODO_PREFIX, Diagnostic

from .._cst import comment_line, fresh_name, kwarg, leading_lines, statement
from .._local import LocalEnv, LocalRule, lower
from .conditionals import lower_branches, lower_logic
from .current import CurrentReadsRule
from .docstrings import generator_doc, generator_kind
from .emit_inputs import InputPhases, first_name
from .emit_loop import CAPTURE_COMMENT as CAPTURE_COMMENT  # imported from here by other modules
from .emit_loop import LoopPhase
from .external_source import SourceUse, as_batch, fetch, wrap
from .handed import handed_todos, local_names
from .model import Graph, PipelinePlan, ReaderUse, Refused
from .random_helpers import HelperCalls, helper_edits, random_helpers
from .recognise import has_random
from .unseen import unseen_todos

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
    hoisted = e.inputs()
    if plan.dropped and hoisted:
        hoisted[0] = hoisted[0].with_changes(
            leading_lines=list(leading_lines(hoisted[0])) + plan.dropped
        )
    loop = e.loop(e.lowered())
    if plan.dropped and not hoisted:
        loop = loop.with_changes(leading_lines=[*plan.dropped, *loop.leading_lines])
    doc = e.graph.docstring
    if doc is None:
        doc = generator_doc(
            ctx, graph, generator_kind(graph, bool(e.fed)), [u.source for u in e.fed]
        )
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
    if e.fed:  # the loop is the function `run` that takes one batch per call
        run = cst.ensure_type(loop, cst.FunctionDef)
        body.append(statement(cst.Return(cst.Name(run.name.value))))
    return body, sorted(e.fired - {"DM200"})


class _Emitter(InputPhases, LoopPhase):
    """The phases of one generator body, on the state they share (``emit_state.EmitState``)."""

    # -- phase: the graph statements, lowered ------------------------------------------------------

    def lowered(self) -> list[cst.BaseStatement]:
        graph = self.graph
        iterable = [u for u in graph.sources if u.kind == "iterable"]
        if iterable and (graph.readers or len(graph.sources) > 1):
            raise Refused("an iterable external source next to a reader or another external source")
        self.data_var = cst.Name(fresh_name("data", self.taken))
        env = self._env()
        rules: list[LocalRule] = list(self.plan.lowering)
        home, roots = self.plan.helper_home or (self.ctx, [graph.container])
        self.helpers = random_helpers(home, roots[0], self.plan.helper_hosts, roots[1:])
        if self.helpers:
            rules.append(HelperCalls(self.helpers))  # in the helpers too: they pass them on
            graph.extra_edits += helper_edits(home, self.helpers, rules, self.fired)
            graph.claimed += [h.fn for h in self.helpers.values()]
        inline: dict[int, Any] = {
            id(u.call): self._inline_value(u) for u in graph.readers if u.inline or u.guards
        }
        inline |= {id(u.call): u.target for u in graph.sources if u.inline_at is not None}
        inline |= self.decided  # tests decided once, before the loop
        before: dict[int, list[cst.BaseStatement]] = {}
        for u in graph.sources:
            if u.guards:  # the batch, taken in the `if` blocks it was made in
                stmts = _source_statements(
                    self.ctx, u, self.iteration, self.data_var, self.plan.batch_size
                )
                stmts = self._parallel_todo(u, stmts)
                if u.inline_at is None:
                    inline[id(u.stmt)] = cst.FlattenSentinel(stmts)
                else:  # before the statement that calls it, which takes its batch
                    before.setdefault(id(u.inline_at), []).extend(stmts)
        if inline or before:
            rules.insert(0, _InlineReaders(inline, before))  # type: ignore[arg-type]
        if self.current:
            rules.insert(0, CurrentReadsRule(self.current))  # type: ignore[arg-type]
        self.lowered_defs = [
            self._handed_in_def(s, self._carry(s, [self._lower(s, env, rules)])[0])
            for s in self.defs
        ]
        self.lowered_setup = [self._carry(s, [self._lower(s, env, rules)])[0] for s in self.setup]
        self.lowered_once = [self._carry(s, [self._lower(s, env, rules)])[0] for s in self.once]
        out: list[cst.BaseStatement] = []
        for s in self.loop_body:
            out += self._handed_todos(s, self._carry(s, self._statement(s, env, rules)))
        return out

    def _handed_in_def(self, s: cst.BaseStatement, new: cst.BaseStatement) -> cst.BaseStatement:
        """``new`` (the helper function ``s`` became) with the TODOs of ``_handed_todos`` above
        the statements of its body that call callables the caller handed in."""
        if not isinstance(s, cst.FunctionDef):
            return new
        fn = cst.ensure_type(new, cst.FunctionDef)
        if not isinstance(s.body, cst.IndentedBlock) or not isinstance(fn.body, cst.IndentedBlock):
            return new
        body = [self._handed_todos(old, [stmt])[0] for old, stmt in zip(s.body.body, fn.body.body)]
        return fn.with_changes(body=fn.body.with_changes(body=body))

    def _handed_todos(
        self, s: cst.BaseStatement, stmts: list[cst.BaseStatement]
    ) -> list[cst.BaseStatement]:
        """``stmts`` (what ``s`` became) with a TODO above them for each callable the caller
        handed in that ``s`` calls (``handed``), and its diagnostic."""
        handed = self.graph.handed
        texts: list[str] = []
        if handed is not None and stmts:
            texts = handed_todos(s, handed, self.nodes, local_names(self.graph.body, handed))
        if stmts:  # callables whose code the tool does not see, called on data
            texts += unseen_todos(self.ctx, self.graph, s, self.nodes, self.plan.rule_id)
        self.handed_called = self.handed_called or bool(texts)
        rule = self.plan.rule_id
        for text in texts:
            self.notes.append(Diagnostic(rule, text, self.ctx.line_of(s), 0, "todo"))
        if texts:
            todos = [comment_line(f"{TODO_PREFIX} {rule}: {t}") for t in texts]
            stmts[0] = stmts[0].with_changes(leading_lines=[*leading_lines(stmts[0]), *todos])
        return stmts

    def _inline_value(self, use: ReaderUse) -> cst.BaseExpression:
        """What a reader called inside an expression becomes there: the batch of the loop (one
        reader), or the reader called for one batch (several)."""
        if use is self.lead:
            return use.target
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
        if self.lead is not None:
            self.target, batch_expr = _loop_target(self.lead, self.plan.batch_size)
            if isinstance(self.target, cst.Name) and reader_outputs(self.lead) == 1:
                self.nodes.add(self.target.value)
        elif graph.readers or not graph.sources:
            self.target, batch_expr = None, self.plan.batch_size  # no input: batches of batch_size
        else:  # the first external source's batch (one made under an `if` may not exist)
            self.target = None
            first = next((u for u in graph.sources if not u.guards), None)
            batch_expr = (
                cst.Attribute(cst.Name(first_name(first.target)), cst.Name("batch_size"))
                if first is not None
                else self.plan.batch_size
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
            out: list[cst.BaseStatement] = []
            for u in made:
                stmts = _source_statements(
                    ctx, u, self.iteration, self.data_var, self.plan.batch_size
                )
                if not out:
                    stmts[0] = stmts[0].with_changes(leading_lines=leading_lines(s))
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
        inner = first.body.body[0] if isinstance(first, cst.Try) and first.body.body else None
        if isinstance(first, cst.Try) and isinstance(
            inner, (cst.SimpleStatementLine, cst.BaseCompoundStatement)
        ):  # above the call, not the `try:`
            inner = inner.with_changes(leading_lines=[*inner.leading_lines, todo])
            body = first.body.with_changes(body=[inner, *first.body.body[1:]])
            stmts[0] = first.with_changes(body=body)
            return stmts
        stmts[0] = first.with_changes(leading_lines=[*leading_lines(first), todo])
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
            use = next(u for u in graph.readers if u.stmt is s)
            if use is self.lead:
                return []
            assert isinstance(s, cst.SimpleStatementLine)
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
        lowered = self._lower(s, env, rules)
        assert isinstance(lowered, cst.BaseStatement)  # the local rules rewrite expressions
        return [lowered]

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
        """``yield`` (``return``: fed) of ``values`` in place of ``s`` (``tuple(values[0])``
        where the outputs are a list built in the graph code)."""
        yielded: cst.BaseExpression
        if self.graph.outputs_list is not None:  # tuple(output_list): one output per element
            yielded = cst.Call(cst.Name("tuple"), [cst.Arg(values[0])])
        elif len(values) > 1:
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

    # -- phase: the RNG ------------------------------------------------------------------------------

    def rng_stmt(self) -> cst.SimpleStatementLine:
        """``rng = ndd.random.RNG(seed=seed)``, and the note that random values differ."""
        self.graph.handles["rng"] = self.rng_var
        rng_args = [kwarg("seed", self.plan.seed)] if self.plan.seed is not None else []
        rng = cst.Call(func=attr_chain(f"{self.ctx.ndd}.random.RNG"), args=rng_args)
        self.notes.append(self.ctx.info(self.plan.rule_id, self.graph.container, RNG_NOTE))
        return statement(cst.Assign([cst.AssignTarget(cst.Name(self.rng_var))], rng))


class _InlineReaders:
    """Lowering rule: a reader called inside an expression is replaced by its batch, a test
    decided before the loop by its name, an external source made under an ``if`` by the
    statements that take its batch (``before`` the statement, when it is called inside one)."""

    id = "DM200"
    node_types = (cst.BaseExpression, cst.SimpleStatementLine)

    def __init__(
        self, values: dict[int, Any], before: dict[int, list[cst.BaseStatement]] | None = None
    ) -> None:
        self.values = values
        self.before = before or {}

    def replaces(self, node: cst.CSTNode) -> bool:
        return id(node) in self.values

    def rewrite(
        self, ctx: FileContext, original: cst.CSTNode, updated: cst.CSTNode, env: LocalEnv
    ) -> Any:
        first = self.before.get(id(original))
        if first and isinstance(updated, cst.SimpleStatementLine):  # its comments go first
            moved = first[0].with_changes(leading_lines=updated.leading_lines)
            rest = updated.with_changes(leading_lines=[])
            return cst.FlattenSentinel([moved, *first[1:], rest])
        return self.values.get(id(original))


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
        batch = cst.Tuple([cst.Element(e) for e in elements])
        if len(elements) > 1:  # `for a, b in ...`
            batch = batch.with_changes(lpar=[], rpar=[])
        return batch, cst.Attribute(first, cst.Name("batch_size"))
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
