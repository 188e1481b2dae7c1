"""Per-file analysis context shared by every rule: the parsed module, its metadata, DALI name
resolution and helpers that turn CST replacements into :class:`~dali_migrate.fixes.Fix` edits."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast, overload

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import (
    BaseMetadataProvider,
    CodePosition,
    CodeRange,
    MetadataWrapper,
    PositionProvider,
    QualifiedNameSource,
    ScopeProvider,
    WhitespaceInclusivePositionProvider,
)
from libcst.metadata.position_provider import PositionProvidingCodegenState

from .catalog import Catalog, OpInfo, get_catalog
from .cst_walk import index
from .dali_wrappers import Wrapper, dotted, wrapper_targets
from .fixes import (
    TODO_PREFIX,
    Diagnostic,
    Edit,
    Fix,
    LineIndex,
    Safety,
    SourceParseError,
    fix_id,
    one_line,
)
from .partial_parse import DaliPart, dali_part, names_of, wrapped_dali_imports

NDD_MODULE = "nvidia.dali.experimental.dynamic"
FN_PREFIX = "nvidia.dali.fn."
OPS_PREFIX = "nvidia.dali.ops."
MATH_PREFIX = "nvidia.dali.math."
#: parse only the statements that can involve DALI (:func:`dali_part`); False: the whole module,
#: which must give the same result (tests/test_dali_part.py compares the two)
REDUCE_TO_DALI_PART = True
_SUPPRESS = re.compile(r"#\s*dali-migrate:\s*ignore(?:\[([A-Z0-9, ]+)\])?")

#: a type of node (``nodes_of(cst.Call)`` gives a list of calls)
_Node = TypeVar("_Node", bound=cst.CSTNode)
_Value = TypeVar("_Value")


@dataclass
class FileContext:
    """Everything a rule needs to analyse one module and propose fixes for it."""

    source: str
    path: str | None = None
    catalog: Catalog = field(default_factory=get_catalog)
    #: what the other modules of the project say about this one (dali_migrate.project.ModuleInfo)
    project: Any = None
    #: ``source`` parsed by :func:`python_tree`, when the caller has it
    tree: ast.Module | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # Only the statements that can involve DALI are parsed by libcst (the others are
        # placeholders over the same lines: see dali_part).
        self.wrapped_dali = wrapped_dali_imports(self.source, self.tree)
        if REDUCE_TO_DALI_PART:
            foreign = [
                *(self.project.foreign if self.project is not None else ()),
                *self.wrapped_dali,
            ]
            part = dali_part(self.source, foreign, self.tree)
        else:
            part = DaliPart(self.source)
        self.analysed_source = part.aligned or part.source
        self._skipped, self._skipped_text = part.skipped, part.skipped_text
        self._skipped_names: tuple[frozenset[str], frozenset[str], frozenset[str]] | None = None
        self.module = cst.parse_module(part.source)
        self._nodes: list[cst.CSTNode] = []
        self._parents: dict[cst.CSTNode, cst.CSTNode] = {}
        self._by_type: dict | None = None
        self._indent_cache: dict[cst.CSTNode, tuple[str, ...]] = {}
        self._anchor_cache: dict[cst.CSTNode, tuple[str, ...]] = {}
        self._memo: dict[Hashable, Any] = {}
        self.lines = LineIndex(self.source)
        self.dali_names = self._dali_import_names()
        #: the target of each assignment of a wrapper call (``dali = try_import_dali()``)
        self.wrappers: dict[cst.Name, Wrapper] = self._wrapper_targets()
        if self.wrappers:
            self.dali_names = self.dali_names | {n.value for n in self.wrappers}
        if self.project is not None:
            # pipelines imported from other modules are followed like DALI names
            self.dali_names = self.dali_names | frozenset(self.project.foreign)
        self.ndd = self._ndd_alias()
        self.np = self._module_alias("numpy") or "np"
        self._layout: dict | None = None
        self._names: Mapping[Any, Mapping[cst.CSTNode, object]] | None = None

    # Metadata is computed on first use, over the module parsed: the statements that can involve
    # DALI (dali_part), so its cost follows the DALI part of a file, not its length.
    def _layout_meta(self) -> dict:
        """Positions of every node of the module (both kinds: one code generation)."""
        if self._layout is None:
            syntactic, inclusive = _positions(self.module)
            self._layout = {
                PositionProvider: syntactic,
                WhitespaceInclusivePositionProvider: inclusive,
            }
        return self._layout

    def _name_meta(self) -> Mapping[Any, Mapping[cst.CSTNode, object]]:
        if self._names is None:
            wrapper = MetadataWrapper(self.module, unsafe_skip_copy=True)
            self._names = wrapper.resolve_many([ScopeProvider])
        return self._names

    @property
    def skipped_names(self) -> frozenset[str]:
        """The names of the statements left out of :attr:`module` (see :func:`dali_part`)."""
        return self._skipped_name_sets()[0]

    @property
    def skipped_reads(self) -> frozenset[str]:
        """Those of :attr:`skipped_names` that are read there."""
        return self._skipped_name_sets()[2]

    def skipped_variables(self, among: Iterable[str]) -> set[str]:
        """Which of ``among`` are variables (``ast.Name``) in the statements left out."""
        maybe = [n for n in among if re.search(rf"\b{re.escape(n)}\b", self._skipped_text)]
        return set(maybe) & self._skipped_name_sets()[1] if maybe else set()

    def _skipped_name_sets(self) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
        if self._skipped_names is None:
            self._skipped_names = names_of(self._skipped)
        return self._skipped_names

    @property
    def positions(self):
        return self._layout_meta()[PositionProvider]

    @property
    def ws_positions(self):
        return self._layout_meta()[WhitespaceInclusivePositionProvider]

    @property
    def parents(self):
        return self._parents

    @property
    def scopes(self):
        return self._name_meta()[ScopeProvider]

    def _dali_import_names(self) -> frozenset[str]:
        """Local names bound by imports of ``nvidia`` / ``nvidia.dali...`` anywhere in the file:
        a cheap filter before the (costlier) qualified-name lookup. The same walk lists every
        node of the module (:meth:`module_nodes`) and its parents, so that rules need not walk
        it again."""
        self._nodes, self._parents = index(self.module)
        names = set()
        for node in self.nodes_of(cst.Import):
            for a in node.names:
                if dotted(a.name).startswith("nvidia"):
                    names.add(a.evaluated_alias or dotted(a.name).split(".")[0])
        for imp in self.nodes_of(cst.ImportFrom):
            if (
                imp.module is not None
                and dotted(imp.module).startswith("nvidia")
                and not isinstance(imp.names, cst.ImportStar)
            ):
                for a in imp.names:
                    names.add(a.evaluated_alias or dotted(a.name))
        return frozenset(names)

    def _wrapper_targets(self) -> dict[cst.Name, Wrapper]:
        if not self.wrapped_dali:
            return {}
        return wrapper_targets(self.nodes_of(cst.Assign, cst.AnnAssign))

    def wrapper_bindings(self, name: cst.Name) -> list[Wrapper]:
        """The wrapper calls (``dali = try_import_dali()``) that may bind ``name`` where it is
        read, in source order (none for the assignment's own target)."""
        if name.value not in self.wrapped_dali or name in self.wrappers:
            return []
        scope = self.scopes.get(name)
        if scope is None:
            return []
        found = {self.wrappers[a.node] for a in scope[name.value] if a.node in self.wrappers}
        if len(found) < 2:
            return list(found)
        return sorted(found, key=lambda w: self.positions[w.statement].start.line)

    def wrapper_binding(self, name: cst.Name) -> Wrapper | None:
        """The wrapper call that binds ``name`` where it is read (``dali`` in ``dali.fn.flip``
        after ``dali = try_import_dali()``), or None: not such a name, or bound by wrapper
        calls of different modules. Other bindings of the name in the same scope (``except
        ImportError: dali = None``) are passed over, as for imports."""
        found = self.wrapper_bindings(name)
        if len({(w.module, w.followed) for w in found}) != 1:
            return None
        return found[0]

    def memo(self, key: Hashable, make: Callable[[], _Value]) -> _Value:
        """``make()``, computed once per file for ``key``: for analyses that depend only on the
        module (its nodes never change) and are asked again and again. The value is shared by
        every caller: hand out a copy of anything mutable."""
        try:
            return cast("_Value", self._memo[key])
        except KeyError:
            value = self._memo[key] = make()
            return value

    def module_nodes(self) -> list[cst.CSTNode]:
        """Every node of the module in pre-order (the order of a walk over ``children``)."""
        return self._nodes

    @overload
    def nodes_of(self, node_type: type[_Node], /) -> list[_Node]: ...
    @overload
    def nodes_of(self, *types: type) -> list[cst.CSTNode]: ...
    def nodes_of(self, *types: type) -> list[Any]:
        """The nodes of the module of exactly these types (not subclasses), in pre-order."""
        if self._by_type is None:
            by_type: dict[type, list[cst.CSTNode]] = {}
            for n in self._nodes:
                by_type.setdefault(type(n), []).append(n)
            self._by_type = by_type
        if len(types) == 1:
            return self._by_type.get(types[0], [])
        wanted = set(types)
        return [n for n in self._nodes if type(n) in wanted]

    def qualname(self, node: cst.CSTNode) -> str | None:
        """The imported dotted name an expression refers to (``nvidia.dali.fn.resize``), or None."""
        root = node
        while isinstance(root, cst.Attribute):
            root = root.value
        if not isinstance(root, cst.Name) or root.value not in self.dali_names:
            return None
        # asked of the node's scope, as libcst's QualifiedNameProvider does for every node (a
        # second pass over the module that cost as much again as the scopes)
        scope = self.scopes.get(node)
        names = scope.get_qualified_names_for(node) if scope is not None else set()
        for q in names:
            if q.source is QualifiedNameSource.IMPORT:
                return q.name
        if root.value in self.wrapped_dali:
            wrapper = self.wrapper_binding(root)
            if wrapper is not None and wrapper.followed:
                chain = dotted(cast("cst.Attribute | cst.Name", node))
                return ".".join([wrapper.module, *chain.split(".")[1:]])
        return None

    def fn_op(self, node: cst.CSTNode) -> OpInfo | None:
        q = self.qualname(node)
        if q and q.startswith(FN_PREFIX):
            return self.catalog.fn(q[len(FN_PREFIX) :])
        return None

    def is_fn_ref(self, node: cst.CSTNode) -> bool:
        q = self.qualname(node)
        return bool(q and q.startswith(FN_PREFIX))

    def _module_alias(self, module: str) -> str | None:
        for stmt in self.module.body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Import):
                        for alias in small.names:
                            if dotted(alias.name) == module:
                                return alias.evaluated_alias or module
        return None

    def _ndd_alias(self) -> str:
        for stmt in self.module.body:
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            for small in stmt.body:
                if isinstance(small, cst.Import):
                    for alias in small.names:
                        if dotted(alias.name) == NDD_MODULE and alias.evaluated_alias:
                            return alias.evaluated_alias
                elif isinstance(small, cst.ImportFrom) and small.module is not None:
                    if dotted(small.module) == "nvidia.dali.experimental" and not isinstance(
                        small.names, cst.ImportStar
                    ):
                        for alias in small.names:
                            if alias.name.value == "dynamic":
                                return alias.evaluated_alias or "dynamic"
                elif isinstance(small, (cst.Assign, cst.AnnAssign)):
                    # ``dyn = pytest.importorskip("nvidia.dali.experimental.dynamic")``
                    for target, w in self.wrappers.items():
                        if w.statement is small and w.followed and w.module == NDD_MODULE:
                            return target.value
        return "ndd"

    # -- positions and rendering -----------------------------------------------------------
    def _along_parents(self, node: cst.CSTNode, cache: dict, own: Any) -> tuple:
        """``own(n)`` of ``node`` and each of its ancestors, outermost first, memoised in
        ``cache`` (no recursion; each node's tuple is computed once)."""
        chain = []
        cur: cst.CSTNode | None = node
        while cur is not None and cur not in cache:
            chain.append(cur)
            cur = self.parents.get(cur)
        value = cache[cur] if cur is not None else ()
        for n in reversed(chain):
            value = value + own(n)
            cache[n] = value
        return value

    def _block_indent(self, n: cst.CSTNode) -> tuple[str, ...]:
        if isinstance(n, cst.IndentedBlock):
            return (n.indent if n.indent is not None else self.module.default_indent,)
        return ()

    def indents(self, node: cst.CSTNode) -> list[str]:
        """Indentation tokens of the blocks enclosing ``node``, outermost first."""
        parent = self.parents.get(node)
        if parent is None:
            return []
        return list(self._along_parents(parent, self._indent_cache, self._block_indent))

    def render(self, node: cst.CSTNode, indents: Sequence[str]) -> str:
        state = CodegenState(
            default_indent=self.module.default_indent,
            default_newline=self.module.default_newline,
        )
        state.indent_tokens = list(indents)
        node._codegen(state)
        return "".join(state.tokens)

    def expr_edit(self, old: cst.CSTNode, new: cst.CSTNode) -> Edit:
        r = self.positions[old]
        return Edit(
            self.lines.offset(r.start.line, r.start.column),
            self.lines.offset(r.end.line, r.end.column),
            self.render(new, self.indents(old)),
        )

    def stmt_span(self, stmt: cst.CSTNode) -> tuple[int, int]:
        """Offsets of a whole statement: its leading comment lines through its newline."""
        r = self.ws_positions[stmt]
        return self.lines.offset(r.start.line, r.start.column), self.lines.offset(
            r.end.line, r.end.column
        )

    def stmt_edit(self, old: cst.CSTNode, new: Iterable[cst.CSTNode]) -> Edit:
        """Replace a whole statement (leading comments and newline included) by ``new``."""
        ind = self.indents(old)
        return Edit(*self.stmt_span(old), "".join(self.render(s, ind) for s in new))

    def leading_comments(self, stmt: cst.CSTNode) -> str:
        """The comment and blank lines above a statement, as they are in the source."""
        return self.source[
            self.stmt_span(stmt)[0] : self.lines.offset(self.positions[stmt].start.line, 0)
        ]

    def text(self, node: cst.CSTNode) -> str:
        r = self.positions[node]
        return self.source[
            self.lines.offset(r.start.line, r.start.column) : self.lines.offset(
                r.end.line, r.end.column
            )
        ]

    def line_of(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line

    def first_line(self, node: cst.CSTNode) -> int:
        """The line a reader sees first: a decorated definition starts at its first decorator."""
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)) and node.decorators:
            return self.positions[node.decorators[0]].start.line
        if isinstance(node, cst.Module):
            return 1
        return self.positions[node].start.line

    def enclosing_statement(self, node: cst.CSTNode) -> cst.CSTNode:
        cur = node
        while cur is not None and not isinstance(
            cur, (cst.SimpleStatementLine, cst.BaseCompoundStatement)
        ):
            cur = self.parents.get(cur)
        return cur if cur is not None else node

    def anchor(self, node: cst.CSTNode) -> str:
        """Dotted name of the functions and classes enclosing ``node`` (part of stable fix ids)."""
        names = self._along_parents(node, self._anchor_cache, _definition_name)
        return ".".join(names) or "<module>"

    # -- making fixes and diagnostics ------------------------------------------------------
    def make_fix(
        self,
        rule: str,
        node: cst.CSTNode,
        edits: Sequence[Edit],
        message: str,
        *,
        safety: Safety = "safe",
        depends_on: Sequence[str] = (),
        includes: Sequence[str] = (),
        key: str | None = None,
        follow_ups: Sequence[str] = (),
    ) -> Fix:
        """A fix of ``node``; its id hashes ``key`` (default: the node's source text). Every line
        the edits write ends with the file's own newline."""
        edits = tuple(sorted((self.own_newlines(e) for e in edits), key=lambda e: e.start))
        start, end = edits[0].start, edits[-1].end
        original = self.source[start:end]
        replacement = edits[0].text if len(edits) == 1 else ""
        return Fix(
            id=fix_id(rule, self.anchor(node), self.text(node) if key is None else key),
            rule=rule,
            message=message,
            safety=safety,
            edits=edits,
            span=self.lines.span(start, end),
            depends_on=tuple(depends_on),
            original=original,
            replacement=replacement,
            includes=tuple(includes),
            line=self.first_line(node),
            follow_ups=tuple(follow_ups),
        )

    def own_newlines(self, edit: Edit) -> Edit:
        """``edit`` with each line break it writes (``\\n``, ``\\r\\n`` or ``\\r``, as Python
        reads them) made the file's own newline (a generated docstring's lines included)."""
        nl = self.module.default_newline
        if not any(c in edit.text for c in "\r\n") or nl == "\n" and "\r" not in edit.text:
            return edit
        return Edit(edit.start, edit.end, _NEWLINE.sub(nl, edit.text))

    def todo(self, rule: str, node: cst.CSTNode, message: str) -> Diagnostic:
        """Leave ``node`` as it is and propose a TODO marker above its statement."""
        stmt = self.enclosing_statement(node)
        first = (
            stmt.decorators[0]
            if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) and stmt.decorators
            else stmt
        )
        line = self.positions[first].start.line
        indent = "".join(self.indents(stmt))
        text = f"{indent}{TODO_PREFIX} {rule}: {one_line(message)}"
        marker = None
        if not self._has_marker_above(line, rule):
            off = self.lines.offset(line, 0)
            marker = Edit(off, off, text + self.module.default_newline)
        return Diagnostic(
            rule, message, self.first_line(node), self.positions[node].start.column, "todo", marker
        )

    def info(self, rule: str, node: cst.CSTNode, message: str) -> Diagnostic:
        return Diagnostic(
            rule, message, self.line_of(node), self.positions[node].start.column, "info"
        )

    def _line_text(self, line: int) -> str:
        if line < 1 or line > len(self.lines.starts):
            return ""
        start = self.lines.starts[line - 1]
        end = self.lines.starts[line] if line < len(self.lines.starts) else len(self.source)
        return self.source[start:end]

    def _has_marker_above(self, line: int, rule: str) -> bool:
        above = line - 1
        while above >= 1:
            t = self._line_text(above).strip()
            if not t.startswith(TODO_PREFIX):
                return False
            if t.startswith(f"{TODO_PREFIX} {rule}:"):
                return True
            above -= 1
        return False

    def suppressed(self, rule: str, line: int) -> bool:
        """``# dali-migrate: ignore`` or ``ignore[DM201]`` on the line or the line above."""
        for ln in (line, line - 1):
            m = _SUPPRESS.search(self._line_text(ln))
            if m and (m.group(1) is None or rule in {r.strip() for r in m.group(1).split(",")}):
                return True
        return False


def _definition_name(n: cst.CSTNode) -> tuple[str, ...]:
    return (n.name.value,) if isinstance(n, (cst.FunctionDef, cst.ClassDef)) else ()


class _Computed:
    __slots__ = ("_computed",)

    def __init__(self) -> None:
        self._computed: dict = {}


@dataclass(frozen=False)
class _BothPositionsState(PositionProvidingCodegenState):
    """One code generation recording what PositionProvider and WhitespaceInclusivePositionProvider
    each record in their own pass: the whitespace-inclusive range of every node, and the
    syntactic one (the same unless the node records a narrower one)."""

    inclusive: dict = field(default_factory=dict)

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self._stack.pop()
        rng = CodeRange(start, CodePosition(self.line, self.column))
        self.inclusive[node] = rng
        computed = self.provider._computed
        if node not in computed:
            computed[node] = rng


def _positions(module: cst.Module) -> tuple[dict, dict]:
    """(PositionProvider's, WhitespaceInclusivePositionProvider's) ranges of ``module``."""
    holder = _Computed()
    state = _BothPositionsState(
        default_indent=module.default_indent,
        default_newline=module.default_newline,
        # the state reads and writes only the provider's _computed mapping
        provider=cast("BaseMetadataProvider[CodeRange]", holder),
    )
    module._codegen(state)
    return holder._computed, state.inclusive


def attr_chain(path: str) -> cst.BaseExpression:
    """``"ndd.readers.File"`` -> the Attribute expression."""
    parts = path.split(".")
    expr: cst.BaseExpression = cst.Name(parts[0])
    for p in parts[1:]:
        expr = cst.Attribute(value=expr, attr=cst.Name(p))
    return expr


# -- parsing guards -----------------------------------------------------------------------------
def python_tree(source: str, path: str | None = None) -> ast.Module:
    """``source`` parsed by CPython's own parser (many times faster than libcst, and the
    judge of what is valid Python); :class:`~dali_migrate.fixes.SourceParseError` with
    CPython's line and column when it is not, or when it nests past the parser's limits."""
    name = path or "<string>"
    try:
        return ast.parse(source)
    except SyntaxError as e:
        line, col = e.lineno or 1, max((e.offset or 1) - 1, 0)
        reason = f"not valid Python: {e.msg}"
    except ValueError as e:  # e.g. "source code string cannot contain null bytes"
        line, col, reason = 1, 0, f"not valid Python: {e}"
    except (RecursionError, MemoryError):
        line, col, reason = 1, 0, "too deeply nested to analyse"
    raise SourceParseError(f"{name}:{line}:{col}: {reason}", line=line, column=col, reason=reason)


def nesting(tree: ast.AST) -> tuple[int, ast.AST]:
    """How deep ``tree`` nests, and where (its deepest node with a position): the depth of the
    libcst tree it becomes and of the recursion every walk of it needs, roughly (an
    ``and``/``or`` of n operands is n nested nodes for libcst, one for :mod:`ast`). No
    recursion here."""
    deepest, where = 0, tree
    stack: list[tuple[ast.AST, int, ast.AST]] = [(tree, 0, tree)]  # node, depth, located node
    while stack:
        node, depth, located = stack.pop()
        if hasattr(node, "lineno"):
            located = node
        if depth > deepest:
            deepest, where = depth, located
        if isinstance(node, ast.BoolOp):
            depth += len(node.values) - 1
        stack.extend((child, depth + 1, located) for child in ast.iter_child_nodes(node))
    return deepest, where


_NEWLINE = re.compile(r"\r\n|\r|\n")
