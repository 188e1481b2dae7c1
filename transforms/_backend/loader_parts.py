"""The pieces every loader class is built from: what the class is being built from
(``LoaderClass``), its docstring, ``__init__``'s parameters, methods from text, the names that
become attributes, what each batch is per framework (``yield_batch``), and the imports and
runtime helpers the class needs. Used by ``loaders`` (readers) and ``source_loaders``
(external sources)."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Edit

from .._align import aligned_after, shift_continuation
from .._cst import assigned_names, fresh_name, names_in, source_of, visited, walk
from . import runtime
from .edits import joined_imports, with_joined
from .iterator_use import IteratorUse
from .layout import fit, one_line_params
from .model import Refused
from .subclass_init import method
from .subclasses import body_names, folded_next

_Node = TypeVar("_Node", bound=cst.CSTNode)


@dataclass
class LoaderBody:
    """The generator body ``emit_generator_body`` wrote, in parts."""

    doc: cst.BaseStatement
    setup: list[cst.BaseStatement]
    defs: list[cst.BaseStatement]
    comments: list[cst.EmptyLine]
    target: cst.BaseAssignTargetExpression
    epoch: cst.Call  # reader.next_epoch(...)
    ops: list[cst.BaseStatement]
    values: list[cst.BaseExpression]  # what the loop yields
    reader: str


@dataclass
class LoaderClass:
    """What the class is being built from, and the names it has taken."""

    ctx: FileContext
    use: IteratorUse
    kind: str
    body: LoaderBody
    attrs: dict[str, str] = field(default_factory=dict)  # role -> attribute name
    taken: set[str] = field(default_factory=set)  # attribute names
    local: set[str] = field(
        default_factory=set
    )  # names of the pipeline function (for fresh locals)
    shared: set[str] = field(default_factory=set)  # names __init__ binds that the batches read
    sharded: bool = False  # the reader has num_shards= (other than 1)
    padded: bool = False  # pad_last_batch=True
    moving: bool = False  # sharded, and the shard moves on each epoch (no stick_to_shard=True)
    meta: bool = False  # __init__ reads the reader's metadata
    imports: set[str] = field(default_factory=set)  # modules the class uses: "math"
    helpers: list[str] = field(default_factory=list)  # runtime definitions it needs
    #: the ``with`` block the class replaces: it sees the names of the block's scope
    block: cst.With | None = None

    def attr(self, role: str) -> str:
        if role not in self.attrs:
            self.attrs[role] = fresh_name(role, self.taken)
        return f"self.{self.attrs[role]}"


#: the body of the loader's ``reset()`` where code that also resets other objects calls it
KEPT_RESET = "# nothing to do: each pass is an epoch; kept for code that also resets DALI iterators"


def class_name(ctx: FileContext, fn_name: str) -> str:
    """``train_pipe`` -> ``TrainLoader``, ``loader_pipeline`` -> ``Loader``,
    ``create_dali_pipeline`` -> ``DaliLoader``."""
    base = fn_name
    for prefix in ("create_", "make_", "build_", "get_"):
        if base.lower().startswith(prefix):
            base = base[len(prefix) :]
            break
    for suffix in ("_pipeline", "_pipe", "_iterator", "_loader", "pipeline", "pipe"):
        if base.lower().endswith(suffix):
            base = base[: -len(suffix)]
            break
    camel = "".join(part[:1].upper() + part[1:] for part in base.split("_") if part)
    name = camel if camel.endswith("Loader") else camel + "Loader"
    taken = {n.value for n in walk(ctx.module) if isinstance(n, cst.Name)} | set(ctx.skipped_names)
    if name in taken:
        name = "Dali" + name
    if name in taken:
        raise Refused(
            f"the module already uses the name {name}, the loader class this migration writes"
        )
    return name


def class_def(
    ctx: FileContext,
    name: str,
    body: list[cst.BaseStatement],
    fn: cst.FunctionDef,
    at: cst.CSTNode | None,
) -> cst.ClassDef:
    """``class <name>:`` with the docstring and methods of ``body`` (a blank line before each
    method), where the pipeline function ``fn`` stood (its comments above it; indented as ``at``
    where the function is made up), lines wrapped."""
    blank = [cst.EmptyLine(indent=False)]
    doc, *methods = body
    cls = cst.ClassDef(
        name=cst.Name(name),
        body=cst.IndentedBlock([doc, *[m.with_changes(leading_lines=blank) for m in methods]]),
        leading_lines=list(fn.leading_lines)
        + (list(fn.decorators[0].leading_lines) if fn.decorators else []),
    )
    return fit(cls, ctx.module.default_indent, len(ctx.indents(at or fn)))


def class_doc(use: IteratorUse, kind: str) -> cst.SimpleStatementLine:
    what = "without end" if kind == "endless" else "one epoch per pass"
    if use.dropin:
        return _doc_line(f'"""Batches as {use.name} gave them; an iterator, as it was."""')
    if use.devices is not None:
        return _doc_line(f'"""One pipeline\'s batches as {use.name} gave them, {what}."""')
    return _doc_line(f'"""Batches as {use.name} gave them, {what}."""')


def _doc_line(text: str) -> cst.SimpleStatementLine:
    return cst.ensure_type(stmt_of(text), cst.SimpleStatementLine)  # a string on its own line


def init_params(fn: cst.FunctionDef, params: cst.Parameters) -> cst.Parameters:
    """``(self, <the pipeline's parameters>, batch_size=<default>)``: batch_size (and seed)
    become plain parameters unless a parameter before them has a default they lack."""
    self_param = cst.Param(cst.Name("self"))
    original = fn.params
    plain = not original.kwonly_params and isinstance(original.star_arg, cst.MaybeSentinel)
    added = list(params.kwonly_params)
    defaults = any(p.default is not None for p in params.params)
    if plain and (not defaults or all(p.default is not None for p in added)):
        return one_line_params(
            params.with_changes(
                params=[self_param, *params.params, *added],
                kwonly_params=[],
                star_arg=cst.MaybeSentinel.DEFAULT,
            )
        )
    return one_line_params(params.with_changes(params=[self_param, *params.params]))


def method_def(
    name: str, lines: list[str], body: list[cst.BaseStatement] | None = None
) -> cst.FunctionDef:
    text = f"def {name}(self):\n" + "".join(f"    {ln}\n" for ln in lines)
    fn = cst.parse_statement(text)
    assert isinstance(fn, cst.FunctionDef)
    return fn if body is None else fn.with_changes(body=fn.body.with_changes(body=body))


def stmt_of(text: str) -> cst.BaseStatement:
    return cst.parse_statement(text + "\n")


def stmts_of(text: str) -> list[cst.BaseStatement]:
    return list(cst.parse_module(text + "\n").body)


class ToSelf(cst.CSTTransformer):
    """``name`` -> ``self.name`` for the names given (not attribute or keyword names)."""

    def __init__(self, names: set[str]) -> None:
        super().__init__()
        self.names, self.skip = names, 0

    def visit_Attribute_attr(self, node: cst.Attribute) -> None:
        self.skip += 1

    def leave_Attribute_attr(self, node: cst.Attribute) -> None:
        self.skip -= 1

    def visit_Arg_keyword(self, node: cst.Arg) -> None:
        self.skip += 1

    def leave_Arg_keyword(self, node: cst.Arg) -> None:
        self.skip -= 1

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        if self.skip or updated.value not in self.names:
            return updated
        return cst.Attribute(cst.Name("self"), cst.Name(updated.value))

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        """A call's argument lines aligned with its bracket move with it (``x = f(a,`` ->
        ``self.x = f(a,``)."""
        old, new = original.value, updated.value
        if not (isinstance(old, cst.Call) and isinstance(new, cst.Call)):
            return updated
        head = _head(original)
        delta = _head(updated) + len(source_of(new.func)) - head - len(source_of(old.func))
        if delta == 0 or not aligned_after(old, head):
            return updated
        return updated.with_changes(value=shift_continuation(new, delta))


def _head(assign: cst.Assign) -> int:
    """The columns of ``a = b = `` before an assignment's value."""
    return sum(len(source_of(t)) for t in assign.targets)


def renamed(node: _Node, names: set[str]) -> _Node:
    """``node`` (a statement) with ``self.<name>`` for each read of ``names``."""
    return visited(node, ToSelf(names)) if names else node


# -- what each batch is, per framework -----------------------------------------------------------


def yield_batch(
    c: LoaderClass, values: list[cst.BaseExpression], trim: str | None
) -> list[cst.BaseStatement]:
    """``yield [{"data": images.torch(), ...}]`` (PyTorch, Paddle: one dict per pipeline in a
    list) or ``yield {"images": jax.dlpack.from_dlpack(ndd.as_tensor(images)), ...}`` (JAX), each
    output cut to ``[:trim]`` for PARTIAL."""
    use = c.use
    if len(values) != len(use.output_map):
        raise Refused(
            f"{use.name}'s output_map names {len(use.output_map)} outputs, the pipeline has "
            f"{len(values)}"
        )
    elements = []
    for k, (key, value) in enumerate(zip(use.output_map, values)):
        converted = converted_output(c, value, k in use.sparse_lists)
        if trim is not None:
            converted = cst.Subscript(
                converted, [cst.SubscriptElement(cst.Slice(None, cst.Name(trim)))]
            )
        elements.append(cst.DictElement(cst.SimpleString(quoted_key(key)), converted))
    batch: cst.BaseExpression = cst.Dict(elements)
    if use.framework != "jax" and use.devices is None:  # (one per GPU: the list is made later)
        batch = cst.List([cst.Element(batch)])
    if use.subclass is not None and method(use.subclass, "__next__") is not None:
        # its __next__ converts the batch: that code yields
        bound, reads = body_names(use.subclass)
        clash = (bound | reads) & (c.local | c.shared)
        if clash:
            raise Refused(
                f"{use.name}.__next__ uses `{sorted(clash)[0]}`, a name of the pipeline's code too"
            )
        return folded_next(use.subclass, batch, use.output_map)
    return [cst.SimpleStatementLine([cst.Expr(cst.Yield(batch))])]


def quoted_key(key: str) -> str:
    return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'


def converted_output(c: LoaderClass, value: cst.BaseExpression, sparse: bool) -> cst.BaseExpression:
    ndd = c.ctx.ndd
    if c.use.framework == "torch":
        if sparse:  # DALIRaggedIterator's SPARSE_LIST_TAG: one tensor per sample
            sample = cst.Name(fresh_name("sample", c.local))
            return cst.ListComp(
                cst.Call(cst.Attribute(sample, cst.Name("torch"))),
                cst.CompFor(target=sample, iter=cst.Attribute(atom_of(value), cst.Name("tensors"))),
            )
        return cst.Call(cst.Attribute(atom_of(value), cst.Name("torch")))
    dense = cst.Call(cst.Attribute(cst.Name(ndd), cst.Name("as_tensor")), [cst.Arg(value)])
    if c.use.framework == "jax":
        module = module_alias(c, "jax", "jax.dlpack")
        func = cst.Attribute(
            cst.Attribute(cst.Name(module), cst.Name("dlpack")), cst.Name("from_dlpack")
        )
    else:
        func = cst.Attribute(cst.Name(module_alias(c, "paddle", "paddle")), cst.Name("from_dlpack"))
    return cst.Call(func, [cst.Arg(dense)])


def atom_of(value: cst.BaseExpression) -> cst.BaseExpression:
    """``value`` as the object of an attribute (in parentheses where it needs them)."""
    if isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) or value.lpar:
        return value
    return value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def module_alias(c: LoaderClass, name: str, statement: str) -> str:
    """The name the module ``name`` is imported as here; imported (``import <statement>``) by
    the fix when it is not."""
    alias = imported_as(c.ctx, name)
    if alias is not None:
        return alias
    if name in module_names_of(c.ctx) and not _bound_to_module_only(c.ctx, name):
        raise Refused(f"the module uses the name {name} for something else than the {name} module")
    c.imports.add(statement)
    return name


def _bound_to_module_only(ctx: FileContext, name: str) -> bool:
    """Every binding of ``name`` in the module is ``import <name>`` or ``import <name>.x``
    (inside a function, say): the name means the module wherever it is read."""
    if name in ctx.skipped_names:
        return False  # read or bound in code not parsed
    scopes = {id(s): s for s in ctx.scopes.values() if s is not None}.values()
    found = False
    for scope in scopes:
        for a in scope.assignments[name]:
            found = True
            node = getattr(a, "node", None)
            if not isinstance(node, cst.Import) or not all(
                al.asname is None or source_of(al.name) == name
                for al in node.names
                if (al.evaluated_alias if al.asname else source_of(al.name).split(".")[0]) == name
            ):
                return False
    return found


def imported_as(ctx: FileContext, module: str) -> str | None:
    for stmt in ctx.module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    dotted = source_of(alias.name)
                    if dotted == module and alias.asname is not None:
                        return alias.evaluated_alias
                    if alias.asname is None and dotted.split(".")[0] == module:
                        return module
    return None


def module_names_of(ctx: FileContext) -> set[str]:
    """The names the module uses or binds (not the dotted paths of its imports)."""
    names = set(ctx.skipped_names)
    for stmt in ctx.module.body:
        if isinstance(stmt, cst.SimpleStatementLine) and all(
            isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
        ):
            names |= bound_in([stmt])
        else:
            names |= {n.value for n in walk(stmt) if isinstance(n, cst.Name)}
    return names


def import_edits(ctx: FileContext, c: LoaderClass) -> list[Edit]:
    """``import <module>`` for what the class uses and the module does not import, where isort
    would put it among the module's imports (the standard library first)."""
    imports = [
        s
        for s in ctx.module.body
        if isinstance(s, cst.SimpleStatementLine)
        and all(isinstance(x, (cst.Import, cst.ImportFrom)) for x in s.body)
        and _first_module(s) != "__future__"
    ]
    edits = []
    for module in sorted(c.imports):
        if module == "math" and imported_as(ctx, "math") == "math":
            continue
        if module == "math" and "math" in module_names_of(ctx):
            raise Refused("the module uses the name math for something else than the math module")
        if not imports:
            raise Refused(f"the loader needs `import {module}` and the module has no import block")
        edits.append(_import_edit(ctx, imports, module))
    return with_joined(edits, joined_imports(edits))  # (two at one point: one insertion)


def _first_module(stmt: cst.SimpleStatementLine) -> str:
    small = stmt.body[0]
    if isinstance(small, cst.ImportFrom):
        return source_of(small.module) if small.module is not None else ""
    return source_of(cst.ensure_type(small, cst.Import).names[0].name)  # an import block's


def _import_key(module: str) -> tuple[int, str]:
    return (0 if module.split(".")[0] in sys.stdlib_module_names else 1, module)


def _import_edit(ctx: FileContext, imports: list[cst.SimpleStatementLine], module: str) -> Edit:
    nl = ctx.module.default_newline
    key = _import_key(module)
    after = next((i for i, s in enumerate(imports) if _import_key(_first_module(s)) > key), None)
    if after is None:
        end = ctx.stmt_span(imports[-1])[1]
        last = _import_key(_first_module(imports[-1]))[0]
        gap = nl if key[0] == 1 and last == 0 else ""  # the first third-party import: a group
        return Edit(end, end, f"{gap}import {module}{nl}")
    before = imports[after - 1] if after else None
    if key[0] == 0 and _import_key(_first_module(imports[after]))[0] == 1:
        if before is not None:  # the last of the standard library's imports
            end = ctx.stmt_span(before)[1]
            return Edit(end, end, f"import {module}{nl}")
        start = ctx.lines.offset(ctx.positions[imports[after]].start.line, 0)
        return Edit(start, start, f"import {module}{nl}{nl}")
    start = ctx.lines.offset(ctx.positions[imports[after]].start.line, 0)
    return Edit(start, start, f"import {module}{nl}")


def runtime_helpers(ctx: FileContext, c: LoaderClass) -> list[cst.BaseStatement]:
    """The runtime definitions the class needs, each once per module."""
    done = getattr(ctx, "_dali_loader_helpers", None)
    if done is None:
        done = ctx._dali_loader_helpers = set()  # type: ignore[attr-defined]
    out: list[cst.BaseStatement] = []
    for name in c.helpers:
        if name in done:
            continue
        if name in module_names_of(ctx):
            raise Refused(
                f"the module already uses the name {name}, a helper this migration writes"
            )
        done.add(name)
        node = cst.parse_module(inspect.getsource(getattr(runtime, name))).body[0]
        out.append(node.with_changes(leading_lines=[cst.EmptyLine(indent=False)] * 2))
    return out


def bound_in(stmts: Sequence[cst.CSTNode]) -> set[str]:
    """Every name the statements bind: assignments, loop and comprehension targets, parameters,
    imports, definitions, ``with ... as`` and ``except ... as``."""
    out: set[str] = set()
    for s in stmts:
        out |= assigned_names(s)
        for n in walk(s):
            if isinstance(n, (cst.Param, cst.FunctionDef, cst.ClassDef)):
                out.add(n.name.value)
            elif isinstance(n, (cst.CompFor, cst.NamedExpr)):
                out |= names_in(n.target)
            elif isinstance(n, (cst.AsName,)):
                out |= names_in(n.name)
            elif isinstance(n, cst.ImportAlias):
                out.add(
                    n.evaluated_alias
                    if n.evaluated_alias is not None
                    else cst.Module([]).code_for_node(n.name).split(".")[0]
                )
    return out
