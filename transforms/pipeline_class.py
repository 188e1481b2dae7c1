"""DM202 pipeline-class: a ``Pipeline`` subclass with ``define_graph`` (the legacy class API,
``ops.*`` objects created in ``__init__`` and called in ``define_graph``) becomes a dynamic-mode
generator function of the same name, so ``pipe = TrainPipe(...)`` keeps working.

Before::

    class TrainPipe(Pipeline):
        def __init__(self, batch_size, num_threads, device_id, data_dir, crop):
            super().__init__(batch_size, num_threads, device_id, seed=12)
            self.input = ops.readers.File(file_root=data_dir, random_shuffle=True)
            self.decode = ops.decoders.Image(device="mixed")
            self.rrc = ops.RandomResizedCrop(device="gpu", size=crop)
            self.coin = ops.random.CoinFlip(probability=0.5)
            self.flip = ops.Flip(device="gpu")

        def define_graph(self):
            jpegs, labels = self.input(name="Reader")
            images = self.rrc(self.decode(jpegs))
            images = self.flip(images, horizontal=self.coin())
            return images, labels

    pipe = TrainPipe(64, 4, 0, "/data", 224)
    pipe.build()
    images, labels = pipe.run()

After::

    def TrainPipe(batch_size, num_threads, device_id, data_dir, crop):
        \"\"\"Yields (images, labels) batches epoch after epoch, without end, as Pipeline.run() did.\"\"\"
        ndd.set_num_threads(num_threads)
        reader = ndd.readers.File(file_root=data_dir, random_shuffle=True, seed=12)
        rng = ndd.random.RNG(seed=12)
        while True:
            for jpegs, labels in reader.next_epoch(batch_size=batch_size):
                images = ndd.random_resized_crop(ndd.decoders.image(jpegs, device="gpu"), device="gpu", size=crop, rng=rng)
                images = ndd.flip(images, horizontal=ndd.random.coin_flip(batch_size=jpegs.batch_size, probability=0.5, rng=rng), device="gpu")
                yield images, labels

    pipe = TrainPipe(64, 4, 0, "/data", 224)
    images, labels = next(pipe)

How: ``__init__`` and ``define_graph`` are merged into one graph function (each call of an
operator object becomes the operator call with the object's arguments; ``self.x`` attributes
become local names), which the back end shared with DM200 migrates. Methods are looked up
through base classes defined in the same file, so a hierarchy sharing a base ``define_graph``
migrates class by class. Anything else done with the class or its objects (other methods,
``iter_setup``/``feed_input``, attributes read from outside, subclasses elsewhere) leaves the
code as it was, with one TODO that lists the reasons.

Safety: safe. Random values differ from the old pipeline's, as for DM200.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.catalog import OpInfo
from dali_migrate.context import OPS_PREFIX, FileContext
from dali_migrate.dali_api import PIPELINE_CLASSES
from dali_migrate.fixes import TODO_PREFIX, Diagnostic, Edit
from dali_migrate.rules import FileState, Rule

from ._backend.arguments import (
    device_todo,
    dropped_comments,
    is_unset,
    pipeline_ctor_kwargs,
    set_threads_stmt,
)
from ._backend.conditionals import branch_reasons, has_data_branches
from ._backend.edits import removed_stmt
from ._backend.emit import emit_generator_body
from ._backend.model import Instance, PipelinePlan, Refused
from ._backend.recognise import analyse_graph, find_instances, output_values, pipeline_count
from ._backend.sites import propose_pipeline_fix, refuse_pipeline, run_site_edits
from ._cst import comment_line, is_docstring, truthy, walk
from ._local import collect_nodes

_GRAPH_FN = "__dali_migrate_graph__"


class PipelineClass(Rule):
    id = "DM202"
    name = "pipeline-class"
    summary = "Pipeline subclass with define_graph (ops.* objects) becomes a dynamic-mode generator function"
    structural = True

    def run(self, state: FileState) -> None:
        ctx = state.ctx
        classes = {c.name.value: c for c in ctx.nodes_of(cst.ClassDef)}
        bases = {name for c in classes.values() for name in _base_names(c)}
        # classes that others derive from migrate together with them, as one fix per family
        families: dict[str, list[tuple[cst.ClassDef, list[cst.ClassDef]]]] = {}
        for cls in classes.values():
            chain = _pipeline_chain(ctx, cls, classes)
            if chain is not None and cls.name.value not in bases:
                families.setdefault(chain[-1].name.value, []).append((cls, chain))
        for leaves in families.values():
            members = list({id(c): c for _, chain in leaves for c in chain}.values())
            state.claimed += members
            notes: list[Diagnostic] = []
            edits: list[Edit] = []
            fired: set[str] = set()
            try:
                for cls, chain in leaves:
                    cls_edits, cls_fired, instances = self._migrate(state, cls, chain, notes)
                    edits += cls_edits
                    fired |= set(cls_fired)
                    state.claimed += [i.stmt for i in instances]
            except Refused as why:
                which = f" (class {cls.name.value})" if len(members) > 1 else ""
                refuse_pipeline(state, self.id, min(members, key=ctx.first_line), why, which)
                continue
            leaf_ids = {id(c) for c, _ in leaves}
            edits += [removed_stmt(ctx, c) for c in members if id(c) not in leaf_ids]
            names = ", ".join(c.name.value for c, _ in leaves)
            message = f"migrate pipeline class {names} and its use sites to dynamic mode"
            propose_pipeline_fix(state, self.id, leaves[0][0], edits, message, sorted(fired), notes)

    def _migrate(
        self, state: FileState, cls: cst.ClassDef, chain: list[cst.ClassDef], notes: list[Diagnostic]
    ) -> tuple[list[Edit], list[str], list[Instance]]:
        ctx = state.ctx
        reasons: list[str] = []
        methods = _methods(chain)
        init, graph_fn = methods.get("__init__"), methods.get("define_graph")
        extra = sorted(set(methods) - {"__init__", "define_graph"})
        if extra:
            reasons.append(f"it defines {', '.join(extra)} (only __init__ and define_graph are migrated)")
        if init is None or graph_fn is None:
            reasons.append("it lacks __init__ or define_graph")
            raise Refused("; ".join(reasons))
        owner = next(i for i, c in enumerate(chain) if init in c.body.body)
        if any(m.name.value == "__init__" for c in chain[owner + 1 :] for m in c.body.body if isinstance(m, cst.FunctionDef)):
            reasons.append("its __init__ calls the __init__ of another class of this file")
        if cls.decorators:
            reasons.append("it has decorators")
        if list(init.params.posonly_params) or init.params.star_arg not in (cst.MaybeSentinel.DEFAULT,) or init.params.star_kwarg:
            reasons.append("__init__ takes *args, **kwargs or positional-only parameters")

        merged = _Merger(ctx, reasons)
        kwargs = merged.read_init(init)
        graph_body = merged.graph_statements(graph_fn)
        instances = find_instances(ctx, cls, reasons, pipeline_args=False)
        batch_size = kwargs.get("batch_size") or kwargs.get("max_batch_size")
        if batch_size is None or is_unset(batch_size.value):
            reasons.append("the Pipeline constructor gets no batch_size")
        if reasons:
            raise Refused("; ".join(dict.fromkeys(reasons)))
        assert batch_size is not None

        # the merged graph function, parsed in a small module with the file's imports, so the
        # operators resolve as in the original file
        params = init.params.with_changes(params=init.params.params[1:])
        doc = [cls.body.body[0]] if cls.body.body and is_docstring(cls.body.body[0]) else []
        fn = cst.FunctionDef(cst.Name(_GRAPH_FN), params, cst.IndentedBlock(doc + merged.prefix + graph_body))
        imports = [s for s in ctx.module.body if _is_import(s)] + [cst.parse_statement("import nvidia.dali.fn")]
        mini = FileContext(cst.Module(body=[*imports, fn]).code, ctx.path, ctx.catalog)
        mini_fn = mini.module.body[-1]
        last = mini_fn.body.body[-1]
        ret = last.body[0] if isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1 else None
        outputs = output_values(ret.value) if isinstance(ret, cst.Return) else []
        conditionals = truthy(kwargs.get("enable_conditionals"))
        if conditionals:
            reasons += branch_reasons(mini, list(mini_fn.body.body), collect_nodes(mini, mini_fn))
        graph = analyse_graph(mini, mini_fn, last if isinstance(ret, cst.Return) else None, outputs, reasons)
        if graph is None or reasons:
            raise Refused("; ".join(dict.fromkeys(reasons)))
        seed = kwargs.get("seed")
        mini_notes: list[Diagnostic] = []
        branches = conditionals and has_data_branches(mini, mini_fn.body, collect_nodes(mini, mini_fn))
        plan = PipelinePlan(
            rule_id=self.id,
            batch_size=batch_size.value,
            seed=None if seed is None or is_unset(seed.value) else seed.value,
            dropped=dropped_comments(ctx, [kwargs], branches=branches),
            single_use=len(instances) == 1 and len(chain) == 1 and pipeline_count(ctx) == 1,
            lowering=state.lowering,
        )
        body, fired = emit_generator_body(mini, graph, plan, mini_notes)
        # what the back end noted is about the class (the small module's lines mean nothing here)
        notes += [Diagnostic(self.id, d.message, ctx.first_line(cls), 0, d.severity) for d in mini_notes]
        leading = list(cls.leading_lines)
        todo = device_todo(mini, mini_fn, kwargs.get("device_id"))
        if todo:
            leading.append(comment_line(f"{TODO_PREFIX} {self.id}: {todo}"))
            notes.append(Diagnostic(self.id, todo, ctx.first_line(cls), 0, "todo"))
        new_fn = cst.FunctionDef(
            name=cls.name, params=params, body=cst.IndentedBlock(body), leading_lines=leading
        )
        edits: list[Edit] = [Edit(*ctx.stmt_span(cls), mini.render(new_fn, ctx.indents(cls)))]
        threads = kwargs.get("num_threads")
        for inst in instances:
            value = _call_site_value(params, inst.call, threads.value) if threads is not None else None
            if value is not None and not is_unset(value):
                # before the pipeline is created, never while another one has work in flight
                stmts = [set_threads_stmt(ctx, cst.Arg(value)).with_changes(leading_lines=inst.stmt.leading_lines)]
                stmts.append(inst.stmt.with_changes(leading_lines=[]))
                edits.append(ctx.stmt_edit(inst.stmt, stmts))
            elif threads is not None and not is_unset(threads.value):
                notes.append(
                    ctx.info(self.id, inst.stmt, "num_threads could not be followed to this call: ndd uses its default thread count")
                )
            edits += run_site_edits(ctx, inst, notes)
        return edits, fired, instances


class _Merger:
    """Turns ``__init__`` + ``define_graph`` into the statements of one graph function."""

    def __init__(self, ctx: FileContext, reasons: list[str]) -> None:
        self.ctx = ctx
        self.reasons = reasons
        self.ops: dict[str, tuple[OpInfo, cst.Call]] = {}  # self.<name> = ops.X(...)
        self.attrs: set[str] = set()  # self.<name> = <plain value>
        self.prefix: list[cst.BaseStatement] = []

    def read_init(self, init: cst.FunctionDef) -> dict[str, cst.Arg]:
        kwargs: dict[str, cst.Arg] = {}
        found = False
        body = list(init.body.body)
        if body and is_docstring(body[0]):
            body = body[1:]
        for stmt in body:
            call = _super_init(stmt)
            if call is not None:
                found = True
                args = call.args[1:] if _is_explicit_base_init(self.ctx, call) else call.args
                kwargs = pipeline_ctor_kwargs(call.with_changes(args=args), self.reasons, "the Pipeline constructor call")
                continue
            target, value = _self_assignment(stmt)
            op = self._ops_class(value.func) if target is not None and isinstance(value, cst.Call) else None
            if op is not None:
                self.ops[target] = (op, self._rewrite(value))  # its arguments may read self.<attr>
                continue
            if target is not None:
                self.attrs.add(target)
                if isinstance(value, cst.Name) and value.value == target:
                    continue  # self.size = size: the parameter already has the name
            self.prefix.append(self._rewrite(stmt))
        if not found:
            self.reasons.append("__init__ does not call the Pipeline constructor")
        return kwargs

    def graph_statements(self, fn: cst.FunctionDef) -> list[cst.BaseStatement]:
        # self.jpegs, self.labels = self.input(): attributes set while building the graph
        for node in walk(fn.body):
            if isinstance(node, cst.AssignTarget):
                self.attrs |= {
                    t.attr.value for t in walk(node.target) if _is_self_attr(t) and t.attr.value not in self.ops
                }
        if len(fn.params.params) != 1 or fn.params.kwonly_params or fn.params.star_arg not in (cst.MaybeSentinel.DEFAULT,):
            self.reasons.append("define_graph takes parameters besides self")
        body = list(fn.body.body)
        if body and is_docstring(body[0]):
            body = body[1:]
        return [self._rewrite(s) for s in body]

    def _ops_class(self, func: cst.BaseExpression):
        q = self.ctx.qualname(func)
        if q and q.startswith(OPS_PREFIX):
            op = self.ctx.catalog.ops_class(q[len(OPS_PREFIX) :])
            if op is None:
                self.reasons.append(f"{q} is not a known DALI operator class")
            return op
        return None

    def _rewrite(self, stmt: cst.CSTNode) -> cst.CSTNode:
        merger = self

        class Rewriter(cst.CSTTransformer):
            def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
                func = updated.func
                # self.decode(x) -> fn.decoders.image(x, <the object's arguments>)
                if _is_self_attr(original.func) and original.func.attr.value in merger.ops:
                    op, ctor = merger.ops[original.func.attr.value]
                    return merger._op_call(op, ctor, updated)
                # ops.Resize(...)(x) made and called in one go
                if isinstance(original.func, cst.Call):
                    op = merger._ops_class(original.func.func)
                    if op is not None:
                        return merger._op_call(op, func, updated)
                return updated

            def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
                if _is_self_attr(original):
                    name = original.attr.value
                    if name in merger.attrs:
                        return cst.Name(name)
                    if name not in merger.ops:
                        merger.reasons.append(f"self.{name} is not set in __init__")
                return updated

            def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
                return updated

        new = stmt.visit(Rewriter())
        for n in walk(new):
            if isinstance(n, cst.Name) and n.value == "self" and not isinstance(new, cst.FunctionDef):
                self.reasons.append("self is used other than to reach operators and attributes set in __init__")
                break
        return new

    def _op_call(self, op: OpInfo, ctor: cst.Call, call: cst.Call) -> cst.Call:
        if any(a.keyword is None for a in ctor.args):
            self.reasons.append(f"positional arguments to the {op.fn_path} operator object")
        call_kw = {a.keyword.value for a in call.args if a.keyword is not None}
        ctor_kw = [a for a in ctor.args if a.keyword is not None]
        clash = call_kw & {a.keyword.value for a in ctor_kw}
        if clash:
            self.reasons.append(f"{', '.join(sorted(clash))} given both when creating and when calling an operator")
        func = cst.parse_expression(f"nvidia.dali.fn.{op.fn_path}")
        inputs = [a for a in call.args if a.keyword is None]
        rest = [a for a in call.args if a.keyword is not None]
        args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in inputs + ctor_kw + rest]
        return cst.Call(func=func, args=_commas(args))


def _call_site_value(params: cst.Parameters, call: cst.Call, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """What ``expr`` (a literal, or a parameter of ``__init__``) is at ``call``."""
    if not isinstance(expr, cst.Name):
        return expr if isinstance(expr, (cst.Integer, cst.SimpleString)) else None
    names = [p.name.value for p in params.params]
    if expr.value not in names:
        return None
    index = names.index(expr.value)
    for i, a in enumerate(call.args):
        if (a.keyword is None and i == index) or (a.keyword is not None and a.keyword.value == expr.value):
            return a.value
    default = params.params[index].default
    return default if isinstance(default, (cst.Integer, cst.Name)) else None


def _commas(args: list[cst.Arg]) -> list[cst.Arg]:
    sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return [a.with_changes(comma=sep) for a in args[:-1]] + args[-1:]


def _pipeline_chain(ctx: FileContext, cls: cst.ClassDef, classes: dict) -> list[cst.ClassDef] | None:
    """``cls`` and its bases in this file up to the one deriving from ``Pipeline``, or None."""
    chain = [cls]
    seen = {cls.name.value}
    while True:
        cur = chain[-1]
        if len(cur.bases) != 1:
            if any(ctx.qualname(b.value) in PIPELINE_CLASSES for b in cur.bases):
                return chain  # multiple inheritance: refused later with a reason
            return None
        base = cur.bases[0].value
        if ctx.qualname(base) in PIPELINE_CLASSES:
            return chain
        if isinstance(base, cst.Name) and base.value in classes and base.value not in seen:
            seen.add(base.value)
            chain.append(classes[base.value])
            continue
        return None


def _base_names(cls: cst.ClassDef) -> set[str]:
    return {b.value.value for b in cls.bases if isinstance(b.value, cst.Name)}


def _methods(chain: list[cst.ClassDef]) -> dict[str, cst.FunctionDef]:
    """Methods by name, the most derived definition first (the others are shadowed)."""
    out: dict[str, cst.FunctionDef] = {}
    for c in chain:
        for stmt in c.body.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value not in out:
                out[stmt.name.value] = stmt
    return out


def _super_init(stmt: cst.BaseStatement) -> cst.Call | None:
    """``super().__init__(...)``, ``super(C, self).__init__(...)`` or ``Pipeline.__init__(self, ...)``."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)):
        return None
    call = stmt.body[0].value
    if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "__init__":
        owner = call.func.value
        if isinstance(owner, cst.Call) and isinstance(owner.func, cst.Name) and owner.func.value == "super":
            return call
        if call.args and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value == "self":
            return call
    return None


def _is_explicit_base_init(ctx: FileContext, call: cst.Call) -> bool:
    owner = call.func.value
    return not isinstance(owner, cst.Call)


def _self_assignment(stmt: cst.BaseStatement) -> tuple[str | None, cst.BaseExpression | None]:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign):
        assign = stmt.body[0]
        if len(assign.targets) == 1 and _is_self_attr(assign.targets[0].target):
            return assign.targets[0].target.attr.value, assign.value
    return None, None


def _is_self_attr(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self"


def _is_import(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body)
