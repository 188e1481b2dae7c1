"""A ``Pipeline`` subclass as one graph function: the plug-in of the back end for the legacy
class API (``ops.*`` objects made in ``__init__``, called in ``define_graph``).

``__init__`` and ``define_graph`` become one function body: each call of an operator object is
the operator call with the object's arguments, ``self.x`` attributes are local names, and the
class's own helper methods that ``define_graph`` calls (``self.augment(images)``) are functions
defined in the body. An operator object made in one branch of an ``if`` in ``__init__`` is
called under the same condition::

    if dali_cpu:                                        if dali_cpu:
        self.decode = ops.ImageDecoder(device="cpu")        images = fn.decoders.image(jpegs, device="cpu")
    else:                                        ->     else:
        self.decode = ops.ImageDecoder(device="mixed")      images = fn.decoders.image(jpegs, device="mixed")
    ...
    images = self.decode(jpegs)

What cannot be merged is appended to ``reasons``.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.catalog import OpInfo
from dali_migrate.context import FN_PREFIX, MATH_PREFIX, FileContext

from .._cst import block_statements, free_names, is_docstring, leading_lines, walk
from .arguments import pipeline_ctor_kwargs
from .class_attrs import renamed_attrs
from .class_calls import IfPath, OpCalls, Variant, is_self_attr
from .class_helpers import factory_ctor, helper_call, inline
from .class_init import bound_names, plain_names
from .handed import handed_values
from .iter_setup import EXTERNAL_SOURCE, fed_nodes, inline_block
from .op_arguments import data_names
from .op_flags import flag_statement, value_reads

#: methods a Pipeline subclass defines that the merged function has no place for
NOT_MERGED: dict[str, str] = {}
#: methods merged into the loop of the graph function
LOOP_METHODS = ("iter_setup",)


class Merger(OpCalls):
    """Turns ``__init__`` + ``define_graph`` (+ helper methods) into one graph function body."""

    def __init__(
        self, ctx: FileContext, reasons: list[str], methods: dict[str, cst.FunctionDef]
    ) -> None:
        self.ctx = ctx
        self.reasons = reasons
        self.methods = methods
        self.ops: dict[str, list[Variant]] = {}  # self.<name> = ops.X(...)
        self.attrs: set[str] = set()  # self.<name> = <plain value>
        self.renamed: dict[str, str] = {}
        self.helpers: dict[str, cst.FunctionDef] = {}
        self.inlined: set[str] = set()  # helpers whose code replaced their calls
        # self.<name> = <func>(...) that is not an operator object
        self.made_by: dict[str, cst.BaseExpression] = {}
        self.factories: set[str] = set()  # functions of the module that made operator objects
        self.local_names: set[str] = set()  # the names the code merged binds
        self.kwargs: dict[str, cst.Arg] = {}
        self.found_super = False
        # the comments of ``self.<name> = ops.X(...)``: they go above the first call of it
        self.notes: dict[str, list[cst.EmptyLine]] = {}
        self.data: set[str] = set()  # names that hold data nodes in the graph's code
        self.flags: set[str] = set()  # attributes set to an operator object or a plain value
        # self.<name> = <a parameter of __init__>, set once (``handed``): the parameter's name
        self.handed: dict[str, str] = {}

    # -- reading ------------------------------------------------------------------------------------

    def merge(self, init: cst.FunctionDef, graph_fn: cst.FunctionDef) -> list[cst.BaseStatement]:
        """The body of the graph function: ``__init__``'s code, the helper methods, then
        ``define_graph``'s code."""
        if (
            len(graph_fn.params.params) != 1
            or graph_fn.params.kwonly_params
            or graph_fn.params.star_arg not in (cst.MaybeSentinel.DEFAULT,)
        ):
            self.reasons.append("define_graph takes parameters besides self")
        self.local_names = bound_names(init) | bound_names(graph_fn) | plain_names(init.params)
        self._collect(init, ())
        self._rebound_after_ops(_block(init), set())
        self.helpers = self._called_helpers(graph_fn, init)
        for fn in [init, graph_fn, *self.helpers.values()]:
            self._collect_attrs(fn)
        self.handed = handed_values(init, [init, graph_fn, *self.helpers.values()])
        merged = [init, graph_fn, *self.helpers.values()]
        taken = self.local_names | self.attrs | set(self.ops) | set(self.helpers)
        taken |= set().union(*(plain_names(fn) for fn in merged))
        names = bound_names(init) | plain_names(init.params)
        self.renamed = renamed_attrs(self.attrs - set(self.handed), init, names, taken)
        self.ops = {name: _effective(variants) for name, variants in self.ops.items()}
        self.data = data_names([graph_fn, *self.helpers.values()], self._makes_node)
        mixed = {name for name in self.ops if name in self.attrs}
        reads = value_reads([init, graph_fn, *self.helpers.values()], mixed)
        self.flags = set(reads)
        for name in sorted(n for n, tested in reads.items() if not tested):
            self.reasons.append(
                f"self.{name} holds an operator object or another value and is read as a value "
                "(only tests such as `is None` carry over)"
            )
        for name in sorted(self.flags & self.local_names):
            self.reasons.append(
                f"self.{name} holds an operator object or another value, and a local variable "
                "has its name"
            )
        prefix = self._init_block(_body(init), top=True)
        # comment lines that end __init__: above the graph's code, which follows it
        self.notes.setdefault("", []).extend(_footer_comments(init))
        if not self.found_super:
            self.reasons.append("__init__ does not call the Pipeline constructor")
        body = self._with_feeds(_body(graph_fn), self.methods.get("iter_setup"))
        body = self._inline_readers(init, body)
        inlined = graph_fn.with_changes(body=cst.IndentedBlock(body=body))
        self.helpers = self._called_helpers(inlined, init)
        helpers = [self._helper(fn) for fn in self.helpers.values()]
        graph = [s for stmt in body for s in self._graph_statement(stmt)]
        rest = self.notes.pop("", [])
        if rest and graph:
            graph[0] = graph[0].with_changes(leading_lines=[*rest, *leading_lines(graph[0])])
        if self._called_helpers(init):  # __init__ calls them: defined before its code
            return helpers + prefix + graph
        return prefix + helpers + graph

    def _inline_readers(
        self, init: cst.FunctionDef, body: list[cst.BaseStatement]
    ) -> list[cst.BaseStatement]:
        """``define_graph``'s statements with the calls of helpers that read the data replaced
        by their code (the readers must be in the body of the generator)."""
        data = {name for name, fn in self.helpers.items() if self._reads_data(fn, set())}
        out: list[cst.BaseStatement] = []
        for i, stmt in enumerate(body):
            call = helper_call(stmt)
            if call is None or call[0] not in data:
                out.append(stmt)
                continue
            assert isinstance(stmt, cst.SimpleStatementLine)  # helper_call found one
            others = [f for n, f in self.helpers.items() if n != call[0]]
            rest = [init, *out, *body[i + 1 :], *others]
            taken = set().union(*(plain_names(n) for n in rest)) | self.attrs | set(self.helpers)
            done = inline(stmt, self.helpers[call[0]], taken)
            if done is None:
                out.append(stmt)
                continue
            self.inlined.add(call[0])
            code = self._inline_readers(init, done.body)
            code = done.bindings + code + ([done.result] if done.result is not None else [])
            if code:
                code[0] = code[0].with_changes(leading_lines=leading_lines(stmt))
            out += code
        return out

    def _reads_data(self, fn: cst.FunctionDef, seen: set[str]) -> bool:
        """``fn`` calls a reader or an external source (or a helper that does)."""
        for node in walk(fn.body):
            if not isinstance(node, cst.Call):
                continue
            if is_self_attr(node.func):
                name = node.func.attr.value
                if any(_reads(v.op) for v in self.ops.get(name, [])):
                    return True
                helper = self.helpers.get(name)
                if helper is not None and name not in seen:
                    if self._reads_data(helper, seen | {name}):
                        return True
            op = self.ctx.fn_op(node.func)
            if op is not None and _reads(op.target):
                return True
        return False

    def _with_feeds(
        self, body: list[cst.BaseStatement], setup: cst.FunctionDef | None
    ) -> list[cst.BaseStatement]:
        """``define_graph``'s statements with the external sources ``iter_setup`` feeds replaced
        by its code (see ``iter_setup``)."""
        if setup is None:
            return body
        fed = fed_nodes(setup)
        sources = [i for i, s in enumerate(body) if self._source_read(s, fed or [])]
        if fed is None or len(sources) != len(fed):
            self.reasons.append(
                "iter_setup feeds something else than the external sources define_graph reads"
            )
            return body
        block = inline_block(setup, self.ctx.ndd)
        blocks = block if isinstance(block, list) else [block]
        return (
            body[: sources[0]]
            + blocks
            + [s for i, s in enumerate(body) if i > sources[0] and i not in sources]
        )

    def _source_read(self, stmt: cst.BaseStatement, fed: list[str]) -> bool:
        """``self.jpegs = self.input()`` of an external source object, for a fed ``jpegs``."""
        target, value = _self_assignment(stmt)
        if (
            target not in fed
            or not (isinstance(value, cst.Call) and is_self_attr(value.func))
            or value.args
        ):
            return False
        variants = self.ops.get(value.func.attr.value, [])
        return bool(variants) and all(v.op.fn_path == EXTERNAL_SOURCE for v in variants)

    def _collect(self, node: cst.FunctionDef | cst.If | cst.Else, path: IfPath) -> None:
        """Operator objects and attributes ``__init__`` sets, with the ``if``s around them."""
        for stmt in _block(node):
            if isinstance(stmt, cst.If):
                self._collect(stmt, (*path, (stmt, True)))
                if stmt.orelse is not None:
                    self._collect_else(stmt, stmt.orelse, path)
                continue
            target, value = _self_assignment(stmt)
            made = self._made_op(value) if target is not None else None
            if target is not None and made is not None:
                self.ops.setdefault(target, []).append(Variant(path, *made))
            elif target is not None:
                self.attrs.add(target)
                if isinstance(value, cst.Call):
                    self.made_by.setdefault(target, value.func)

    def _rebound_after_ops(self, stmts: list[cst.BaseStatement], read: set[str]) -> set[str]:
        """The operator objects' arguments are evaluated where the object is called in the
        generator, after all of ``__init__``: a name ``__init__`` sets again after an object
        read it would give the call the later value (silently)."""
        for stmt in stmts:
            if isinstance(stmt, cst.If):  # each branch starts from what came before the if
                other = stmt.orelse
                branches = [_block(stmt)]
                branches += [[other]] if isinstance(other, cst.If) else []  # elif
                branches += [_block(other)] if isinstance(other, cst.Else) else []
                read = read.union(*(self._rebound_after_ops(b, read) for b in branches))
                continue
            target, value = _self_assignment(stmt)
            made = self._made_op(value, quiet=True) if target is not None else None
            rebound = _local_targets(stmt) & read
            if rebound and made is None:
                self.reasons.append(
                    f"`{sorted(rebound)[0]}` is set again in __init__ after an operator object "
                    "reads it (the object would see the later value): give the second value "
                    "another name"
                )
            if made is not None:
                read = read | set().union(*(free_names(a.value) for a in made[1].args))
        return read

    def _made_op(
        self, value: cst.BaseExpression | None, quiet: bool = False
    ) -> tuple[OpInfo, cst.Call] | None:
        """The operator and the arguments of an operator object ``value`` makes: ``ops.X(...)``,
        or a call of a function of this file that returns one."""
        if not isinstance(value, cst.Call):
            return None
        op = self._ops_class(value.func, quiet)
        if op is not None:
            return op, value
        made = factory_ctor(self.ctx.module, value)
        op = self._ops_class(made[0].func, quiet) if made is not None else None
        if op is None or made is None:
            return None
        if made[2] & self.local_names:  # its globals must mean the same in the merged function
            return None
        self.factories.add(cst.ensure_type(value.func, cst.Name).value)  # as factory_ctor found
        return op, made[1]

    def _collect_else(self, owner: cst.If, orelse: cst.If | cst.Else, path: IfPath) -> None:
        inner = (*path, (owner, False))
        if isinstance(orelse, cst.If):  # elif
            self._collect(orelse, (*inner, (orelse, True)))
            if orelse.orelse is not None:
                self._collect_else(orelse, orelse.orelse, inner)
        else:
            self._collect(orelse, inner)

    def _collect_attrs(self, fn: cst.FunctionDef) -> None:
        """``self.jpegs, self.labels = self.input()``: attributes set while building the graph."""
        for node in walk(fn.body):
            if isinstance(node, cst.AssignTarget):
                self.attrs |= {
                    t.attr.value
                    for t in walk(node.target)
                    if is_self_attr(t) and t.attr.value not in self.ops
                }

    def _called_helpers(self, *roots: cst.FunctionDef) -> dict[str, cst.FunctionDef]:
        """The methods ``roots`` call through ``self`` (and those they call)."""
        found: dict[str, cst.FunctionDef] = {}
        todo = list(roots)
        while todo:
            for n in walk(todo.pop()):
                if is_self_attr(n) and n.attr.value in self.methods and n.attr.value not in found:
                    name = n.attr.value
                    if name in ("__init__", "define_graph", *LOOP_METHODS) or name in NOT_MERGED:
                        continue
                    found[name] = self.methods[name]
                    todo.append(self.methods[name])
        return found

    # -- writing ------------------------------------------------------------------------------------

    def _init_block(
        self, stmts: list[cst.BaseStatement], top: bool = False
    ) -> list[cst.BaseStatement]:
        """``__init__``'s statements without the Pipeline constructor call and the operator
        objects, ``self.x`` made local names. The comments of a statement left out go above the
        next one kept (an operator object's, above its first call)."""
        out: list[cst.BaseStatement] = []
        pending: list[cst.EmptyLine] = []
        for stmt in stmts:
            kept = self._init_statement(stmt, top)
            if kept is None:
                pending += _comment_lines(stmt)
                continue
            if isinstance(kept, cst.RemovalSentinel):  # its comments wait for its first call
                continue
            if pending:
                kept = kept.with_changes(leading_lines=[*pending, *leading_lines(kept)])
                pending = []
            out.append(kept)
        if pending:  # nothing follows in the block: above the code of the graph
            self.notes.setdefault("", []).extend(pending)
        return out

    def _init_statement(
        self, stmt: cst.BaseStatement, top: bool
    ) -> cst.BaseStatement | cst.RemovalSentinel | None:
        """A statement of ``__init__`` as the graph function has it: None when it has no place
        there, ``REMOVE`` for an operator object (made where it is called)."""
        call = _super_init(stmt) if top else None
        if call is not None:
            self.found_super = True
            owner = cst.ensure_type(call.func, cst.Attribute).value  # `<owner>.__init__`
            args = call.args[1:] if not isinstance(owner, cst.Call) else call.args
            # seed=12 + self.rank (the others stay the nodes of the file, which notes quote)
            args = [self._rewrite_as(a, cst.Arg) if _uses_self(a) else a for a in args]
            self.kwargs = pipeline_ctor_kwargs(
                call.with_changes(args=args), self.reasons, "the Pipeline constructor call"
            )
            return None
        target, value = _self_assignment(stmt)
        if target is not None and target in self.ops and not self._plain(stmt):
            if target in self.flags:  # tested: True says that the object was made
                # `self.<target> = <call>` (_self_assignment), the call making an object
                assert isinstance(stmt, cst.SimpleStatementLine) and isinstance(value, cst.Call)
                made = cst.Module([]).code_for_node(value.func)
                return flag_statement(stmt, target, made)
            self.notes.setdefault(target, []).extend(_comment_lines(stmt))
            return cst.RemovalSentinel.REMOVE
        if (
            target is not None
            and isinstance(value, cst.Name)
            and value.value == target
            and target not in self.renamed
        ):
            return None  # self.size = size: the parameter already has the name
        if isinstance(stmt, cst.If):
            return self._init_if(stmt)
        return self._rewrite_stmt(stmt)

    def _plain(self, stmt: cst.BaseStatement) -> bool:
        target, value = _self_assignment(stmt)
        return self._made_op(value, quiet=True) is None

    def _init_if(self, stmt: cst.If) -> cst.If | None:
        """An ``if`` of ``__init__`` without its operator objects (None when nothing is left)."""
        body = self._init_block(block_statements(stmt.body))
        orelse: cst.If | cst.Else | None = None
        if isinstance(stmt.orelse, cst.If):
            orelse = self._init_if(stmt.orelse)
        elif isinstance(stmt.orelse, cst.Else):
            rest = self._init_block(block_statements(stmt.orelse.body))
            kept = _indented(stmt.orelse.body, rest)
            orelse = stmt.orelse.with_changes(body=kept) if rest else None
        if not body and orelse is None:
            return None
        block = _indented(stmt.body, body or [cst.SimpleStatementLine([cst.Pass()])])
        return stmt.with_changes(test=self._rewrite(stmt.test), body=block, orelse=orelse)

    def _helper(self, fn: cst.FunctionDef) -> cst.FunctionDef:
        """A helper method as a function of the graph body (without ``self``)."""
        params = fn.params.params
        decorators = [
            d
            for d in fn.decorators
            if not (isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod")
        ]
        if decorators:
            self.reasons.append(f"method {fn.name.value} has decorators")
        is_static = len(decorators) != len(fn.decorators)
        new = fn.with_changes(
            decorators=[],
            params=fn.params.with_changes(params=params if is_static else params[1:]),
            leading_lines=[],
        )
        return self._rewrite_as(new, cst.FunctionDef)

    def _graph_statement(self, stmt: cst.BaseStatement) -> list[cst.BaseStatement]:
        """A statement of ``define_graph`` (with the comments of the operator objects it is the
        first to call above it); ``x = self.op(...)`` of an operator object made under
        conditions becomes an ``if`` with the call made under each."""
        out = self._graph_code(stmt)
        notes = [
            line
            for n in walk(stmt)
            if isinstance(n, cst.Call) and is_self_attr(n.func)
            for line in self.notes.pop(n.func.attr.value, [])
        ]
        if notes and out:
            out[0] = out[0].with_changes(leading_lines=[*leading_lines(out[0]), *notes])
        return out

    def _graph_code(self, stmt: cst.BaseStatement) -> list[cst.BaseStatement]:
        if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
            small = stmt.body[0]
            value = small.value if isinstance(small, (cst.Assign, cst.Expr)) else None
            if isinstance(value, cst.Call) and is_self_attr(value.func):
                variants = self.ops.get(value.func.attr.value, [])
                if len(variants) > 1 or (variants and variants[0].path):
                    tree = self._branches(stmt, small, value, variants, 0)
                    if tree is not None:
                        return [tree.with_changes(leading_lines=stmt.leading_lines)]
        return [self._rewrite_stmt(stmt)]

    def _branches(
        self,
        stmt: cst.SimpleStatementLine,
        small: cst.BaseSmallStatement,
        call: cst.Call,
        variants: list[Variant],
        depth: int,
    ) -> cst.If | None:
        """The ``if`` that makes ``call`` with the operator object of each branch (None when the
        branches do not form one tree of ``if``s)."""
        if not variants or any(len(v.path) <= depth for v in variants):
            return None
        node = variants[0].path[depth][0]
        if any(v.path[depth][0] is not node for v in variants):
            return None
        in_body = [v for v in variants if v.path[depth][1]]
        in_else = [v for v in variants if not v.path[depth][1]]
        body = self._branch_body(stmt, small, call, in_body, depth + 1)
        if body is None:
            return None
        orelse: cst.If | cst.Else | None = None
        if in_else:
            inner = self._branch_body(stmt, small, call, in_else, depth + 1)
            if inner is None:
                return None
            single = inner[0] if len(inner) == 1 and isinstance(inner[0], cst.If) else None
            orelse = single if single is not None else cst.Else(cst.IndentedBlock(inner))
        test = self._rewrite_expr(node.test)
        return cst.If(test, cst.IndentedBlock(body), orelse=orelse)

    def _branch_body(
        self,
        stmt: cst.SimpleStatementLine,
        small: cst.BaseSmallStatement,
        call: cst.Call,
        variants: list[Variant],
        depth: int,
    ) -> list[cst.BaseStatement] | None:
        if not variants:
            return [cst.SimpleStatementLine([cst.Pass()])]
        if len(variants) == 1 and len(variants[0].path) == depth:
            v = variants[0]
            # its arguments, self.x made x
            args = self._rewrite_as(call.with_changes(func=cst.Name("_")), cst.Call)
            new_call = self._op_call(v.op, self._rewrite_as(v.ctor, cst.Call), args)
            return [stmt.with_changes(body=[small.with_changes(value=new_call)], leading_lines=[])]
        tree = self._branches(stmt, small, call, variants, depth)
        return [tree] if tree is not None else None

    def _makes_node(self, call: cst.Call) -> bool:
        """``call`` gives data nodes: it calls an operator object or a DALI operator."""
        if is_self_attr(call.func):
            return call.func.attr.value in self.ops
        q = self.ctx.qualname(call.func)
        return bool(q and q.startswith((FN_PREFIX, MATH_PREFIX)))


def _reads(op: OpInfo) -> bool:
    return op.is_reader or op.fn_path == EXTERNAL_SOURCE


def _effective(variants: list[Variant]) -> list[Variant]:
    """The objects an attribute may hold when the graph is defined: an object made without
    condition replaces those made before it."""
    last = max((i for i, v in enumerate(variants) if not v.path), default=None)
    return variants if last is None else variants[last:]


def _indented(block: cst.BaseSuite, body: list[cst.BaseStatement]) -> cst.BaseSuite:
    """``block`` holding the statements ``body``: still on one line where it was, when they are
    simple statements."""
    if not isinstance(block, cst.SimpleStatementSuite):
        return block.with_changes(body=body)
    if all(isinstance(s, cst.SimpleStatementLine) for s in body):
        smalls = [small for s in body if isinstance(s, cst.SimpleStatementLine) for small in s.body]
        return block.with_changes(body=smalls)
    return cst.IndentedBlock(body=body)


def _body(fn: cst.FunctionDef) -> list[cst.BaseStatement]:
    body = block_statements(fn.body)
    return body[1:] if body and is_docstring(body[0]) else body


def _local_targets(stmt: cst.CSTNode) -> set[str]:
    """Local names a statement binds (``size = ...``, ``a, b = ...``; not ``self.size``)."""
    out: set[str] = set()
    for n in walk(stmt):
        if isinstance(n, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For)):
            targets = (
                n.target.elements if isinstance(n.target, (cst.Tuple, cst.List)) else [n.target]
            )
            out |= {
                t.value
                for t in (e.value if isinstance(e, cst.BaseElement) else e for e in targets)
                if isinstance(t, cst.Name)
            }
    return out


def _block(node: cst.FunctionDef | cst.If | cst.Else) -> list[cst.BaseStatement]:
    return _body(node) if isinstance(node, cst.FunctionDef) else block_statements(node.body)


def _super_init(stmt: cst.BaseStatement) -> cst.Call | None:
    """``super().__init__(...)``, ``super(C, self).__init__(...)`` or ``Pipeline.__init__(self, ...)``."""
    if not (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
    ):
        return None
    call = stmt.body[0].value
    if (
        isinstance(call, cst.Call)
        and isinstance(call.func, cst.Attribute)
        and call.func.attr.value == "__init__"
    ):
        owner = call.func.value
        if (
            isinstance(owner, cst.Call)
            and isinstance(owner.func, cst.Name)
            and owner.func.value == "super"
        ):
            return call
        if (
            call.args
            and isinstance(call.args[0].value, cst.Name)
            and call.args[0].value.value == "self"
        ):
            return call
    return None


def _self_assignment(stmt: cst.CSTNode) -> tuple[str | None, cst.BaseExpression | None]:
    if (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Assign)
    ):
        assign = stmt.body[0]
        if len(assign.targets) == 1 and is_self_attr(assign.targets[0].target):
            return assign.targets[0].target.attr.value, assign.value
    return None, None


def _uses_self(node: cst.CSTNode) -> bool:
    return any(isinstance(n, cst.Name) and n.value == "self" for n in walk(node))


def _footer_comments(fn: cst.FunctionDef) -> list[cst.EmptyLine]:
    footer = fn.body.footer if isinstance(fn.body, cst.IndentedBlock) else []
    return [ln for ln in footer if ln.comment is not None]


def _comment_lines(stmt: cst.BaseStatement) -> list[cst.EmptyLine]:
    """The comment lines above ``stmt`` and its trailing comment, as lines."""
    lines = [ln for ln in leading_lines(stmt) if ln.comment is not None]
    tail = getattr(stmt, "trailing_whitespace", None)
    if tail is not None and tail.comment is not None:
        lines.append(cst.EmptyLine(comment=tail.comment))
    return lines
