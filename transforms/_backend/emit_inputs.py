"""Emit, the phases before the loop: the readers built once (:meth:`InputPhases.readers`) and
the external sources made once (:meth:`InputPhases.sources`)."""

from __future__ import annotations

import dataclasses

import libcst as cst

from dali_migrate.context import FileContext, attr_chain
from dali_migrate.fixes import Diagnostic

from .._align import aligned_to_bracket, shift_continuation
from .._cst import (
    append_arg,
    free_names,
    fresh_name,
    kwarg,
    names_in,
    remove_args,
    source_of,
    statement,
    truthy,
    walk,
)
from .emit_state import EmitState
from .external_source import SourceUse, unknown_source
from .guards import branch_tests, decisions, exclusive, guard_test, skeleton
from .model import ReaderUse, Refused
from .reader_choice import reader_var
from .seeds import guarded, reader_seed


class InputPhases(EmitState):
    """The readers and the external sources of the graph, made before the loop."""

    # -- phase: the readers, built once ------------------------------------------------------------

    def inputs(self) -> list[cst.BaseStatement]:
        """The tests that call code, decided once in the order the graph code reached them (as
        pipeline mode did, before it built any reader); then the readers and the external
        sources made before the loop, those made under an ``if`` in one ``if`` like the graph
        code's, where it stood (``guards.skeleton``)."""
        self.guarded: dict[int, dict[int, list[cst.BaseStatement]]] = {}  # by the `if`
        self.decided: dict[int, cst.Name] = {}  # by id of the test
        self.decisions: list[tuple[cst.BaseExpression, cst.BaseStatement]] = []
        made = self.readers() + self.sources()
        self._branch_decisions()
        order = {id(n): i for i, n in enumerate(walk(cst.IndentedBlock(self.graph.body)))}
        self.decisions.sort(key=lambda d: order.get(id(d[0]), 0))
        out: list[cst.BaseStatement] = [stmt for _, stmt in self.decisions]
        seen: set[int] = set()
        for s in made:
            if id(s) not in self.guarded:
                out.append(s)
            elif id(s) not in seen:
                seen.add(id(s))
                shaped = skeleton(s, self.guarded[id(s)], self.decided)
                out += [shaped] if shaped is not None else []
        return out

    def _branch_decisions(self) -> None:
        """The tests of the loop's ``if`` statements that call code, decided once before the
        loop as well (``if aug.wants_flip():`` drew once in pipeline mode, not per batch)."""
        defined_later = {d.name.value for d in self.defs if isinstance(d, cst.FunctionDef)}
        unsettled = self.per_batch_names | defined_later
        for chain in branch_tests(self.ctx, self.loop_body, self.nodes, unsettled):
            self.decisions += decisions(chain, self.decided, self.taken)

    def _guarded(
        self, what: cst.Call, guards: list, top: cst.BaseStatement | None
    ) -> dict[int, list[cst.BaseStatement]]:
        """Where the statements made for an input under ``guards`` (in ``top``) go, by id of the
        statement they replace; the tests that call code are decided once, before it."""
        tests = free_names(guard_test(guards))
        if tests & self.per_batch_names:
            raise Refused(
                f"{self.ctx.text(what.func)} is made under an `if` that reads "
                f"{', '.join(sorted(tests & self.per_batch_names))}, assigned for each batch"
            )
        assert top is not None
        self.decisions += decisions(guards, self.decided, self.taken)
        return self.guarded.setdefault(id(top), {})

    def readers(self) -> list[cst.BaseStatement]:
        hoisted: list[cst.BaseStatement] = []
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
            value = self._realigned(use, value, f"{var} = ")
            assign = cst.Assign([cst.AssignTarget(cst.Name(var))], value)
            # (a guarded reader's statement stays in the loop with its comments)
            lines = [] if use.inline or use.guards else list(use.stmt.leading_lines)
            made = self._carry(use.stmt, [statement(assign, leading_lines=lines)])
            if not use.guards:
                hoisted += made
                continue
            assert use.top is not None
            hoisted.append(use.top)
            self._guarded(use.call, use.guards, use.top).setdefault(id(use.stmt), []).extend(made)
        return hoisted

    def _realigned(self, use: ReaderUse, value: cst.Call, head: str) -> cst.Call:
        """The reader's call, now ``head`` + ``value``, with the lines of its arguments moved
        as far as its bracket moved, where they were aligned with it."""
        pos = self.ctx.positions
        if not aligned_to_bracket(use.call, pos) or use.stmt not in pos:
            return value
        before = pos[use.call.args[0]].start.column - pos[use.stmt].start.column
        after = len(head) + len(source_of(value.func)) + 1
        return shift_continuation(value, after - before)

    def _reader_name(self, use: ReaderUse) -> str:
        """The variable of a reader built before the loop; readers made in different branches
        of one ``if`` for the same name share one (only one of them is ever made)."""
        base = "reader" if self.single and len(self.graph.readers) == 1 else reader_var(use)
        var = next(
            (
                self.reader_vars[id(other.call)]
                for other in self.graph.readers
                if id(other.call) in self.reader_vars
                and other.guards
                and reader_var(other) == base
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
        if not self.single or plan.reader_meta or len(self.graph.readers) > 1:
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
            where = (
                self._guarded(use.call, use.guards, use.guard_top).setdefault(id(use.stmt), [])
                if use.guards
                else None
            )
            if where is not None:
                hoisted.append(use.top)
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
                var = cst.Name(fresh_name(f"{first_name(use.target)}_source", self.taken))
                source = self.plain(use.source)
                assert isinstance(source, cst.BaseExpression)
                made = statement(cst.Assign([cst.AssignTarget(var)], source))
                if where is not None:  # made where the graph code made it, under its tests
                    where.append(made)
                else:
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
        stmts: list[cst.BaseStatement] = list(cst.parse_module(code).body)
        comment = [
            cst.EmptyLine(comment=cst.Comment(line))
            for line in (
                "# as external_source: a generator function is called, an iterable iterated, and a",
                "# callable called once per batch",
            )
        ]
        stmts[0] = stmts[0].with_changes(leading_lines=comment)
        return stmts, dataclasses.replace(use, kind="iterable", source=cst.Name(var))


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


def first_name(target: cst.BaseAssignTargetExpression) -> str:
    first: cst.BaseExpression = target
    while isinstance(first, (cst.Tuple, cst.List)):
        first = first.elements[0].value
    return first.value if isinstance(first, cst.Name) else "input"


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
        unset = (
            f"; where {ctx.render(reader_seed(seed), [])} is negative or None, the order is the "
            "same in every run (it was random)"
            if guarded(seed)
            else ""
        )
        seed = reader_seed(seed)
        notes.append(
            ctx.info(
                rule_id,
                use.call,
                f"the reader now shuffles with seed={ctx.render(seed, [])}; pipeline mode derived "
                "its seed from the "
                "pipeline seed, so the shuffle order differs from the old pipeline's (each epoch "
                f"holds the same samples){unset}",
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
