"""Per-file analysis context shared by every rule: the parsed module, its metadata, DALI name
resolution and helpers that turn CST replacements into :class:`~dali_migrate.fixes.Fix` edits."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import (
    MetadataWrapper,
    ParentNodeProvider,
    PositionProvider,
    QualifiedNameProvider,
    QualifiedNameSource,
    ScopeProvider,
    WhitespaceInclusivePositionProvider,
)

from .catalog import Catalog, OpInfo, get_catalog
from .fixes import TODO_PREFIX, Diagnostic, Edit, Fix, LineIndex, Safety, fix_id

NDD_MODULE = "nvidia.dali.experimental.dynamic"
FN_PREFIX = "nvidia.dali.fn."
OPS_PREFIX = "nvidia.dali.ops."
MATH_PREFIX = "nvidia.dali.math."
_SUPPRESS = re.compile(r"#\s*dali-migrate:\s*ignore(?:\[([A-Z0-9, ]+)\])?")


@dataclass
class FileContext:
    """Everything a rule needs to analyse one module and propose fixes for it."""

    source: str
    path: str | None = None
    catalog: Catalog = field(default_factory=get_catalog)

    def __post_init__(self) -> None:
        self.wrapper = MetadataWrapper(cst.parse_module(self.source), unsafe_skip_copy=True)
        self.module = self.wrapper.module
        self.lines = LineIndex(self.source)
        self._meta = self.wrapper.resolve_many(
            [
                PositionProvider,
                WhitespaceInclusivePositionProvider,
                ParentNodeProvider,
                QualifiedNameProvider,
                ScopeProvider,
            ]
        )
        self.positions = self._meta[PositionProvider]
        self.ws_positions = self._meta[WhitespaceInclusivePositionProvider]
        self.parents = self._meta[ParentNodeProvider]
        self.qualnames = self._meta[QualifiedNameProvider]
        self.scopes = self._meta[ScopeProvider]
        self.dali_names = self._dali_import_names()
        self.ndd = self._ndd_alias()
        self.np = self._module_alias("numpy") or "np"

    # -- name resolution -------------------------------------------------------------------
    def _dali_import_names(self) -> frozenset[str]:
        """Local names bound by imports of ``nvidia`` / ``nvidia.dali...`` anywhere in the file:
        a cheap filter before the (costlier) qualified-name lookup."""
        names = set()

        class V(cst.CSTVisitor):
            def visit_Import(self, node: cst.Import) -> None:
                for a in node.names:
                    if dotted(a.name).startswith("nvidia"):
                        names.add(a.asname.name.value if a.asname else dotted(a.name).split(".")[0])

            def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
                if node.module is not None and dotted(node.module).startswith("nvidia") and not isinstance(
                    node.names, cst.ImportStar
                ):
                    for a in node.names:
                        names.add(a.asname.name.value if a.asname else dotted(a.name))

        self.module.visit(V())
        return frozenset(names)

    def qualname(self, node: cst.CSTNode) -> str | None:
        """The imported dotted name an expression refers to (``nvidia.dali.fn.resize``), or None."""
        root = node
        while isinstance(root, cst.Attribute):
            root = root.value
        if not isinstance(root, cst.Name) or root.value not in self.dali_names:
            return None
        names = self.qualnames.get(node) or set()
        if callable(names):  # libcst hands out lazily computed values
            names = names()
        for q in names:
            if q.source is QualifiedNameSource.IMPORT:
                return q.name
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
                                return alias.asname.name.value if alias.asname else module
        return None

    def _ndd_alias(self) -> str:
        for stmt in self.module.body:
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            for small in stmt.body:
                if isinstance(small, cst.Import):
                    for alias in small.names:
                        if dotted(alias.name) == NDD_MODULE and alias.asname:
                            return alias.asname.name.value
                elif isinstance(small, cst.ImportFrom) and small.module is not None:
                    if dotted(small.module) == "nvidia.dali.experimental" and not isinstance(
                        small.names, cst.ImportStar
                    ):
                        for alias in small.names:
                            if alias.name.value == "dynamic":
                                return alias.asname.name.value if alias.asname else "dynamic"
        return "ndd"

    # -- positions and rendering -----------------------------------------------------------
    def indents(self, node: cst.CSTNode) -> list[str]:
        """Indentation tokens of the blocks enclosing ``node``, outermost first."""
        tokens = []
        cur = self.parents.get(node)
        while cur is not None:
            if isinstance(cur, cst.IndentedBlock):
                tokens.append(cur.indent if cur.indent is not None else self.module.default_indent)
            cur = self.parents.get(cur)
        return list(reversed(tokens))

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

    def stmt_edit(self, old: cst.CSTNode, new: Iterable[cst.CSTNode]) -> Edit:
        """Replace a whole statement (leading comments and newline included) by ``new``."""
        r = self.ws_positions[old]
        ind = self.indents(old)
        return Edit(
            self.lines.offset(r.start.line, r.start.column),
            self.lines.offset(r.end.line, r.end.column),
            "".join(self.render(s, ind) for s in new),
        )

    def text(self, node: cst.CSTNode) -> str:
        r = self.positions[node]
        return self.source[
            self.lines.offset(r.start.line, r.start.column) : self.lines.offset(r.end.line, r.end.column)
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
        while cur is not None and not isinstance(cur, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            cur = self.parents.get(cur)
        return cur if cur is not None else node

    def anchor(self, node: cst.CSTNode) -> str:
        """Dotted name of the functions and classes enclosing ``node`` (part of stable fix ids)."""
        names = []
        cur = node
        while cur is not None:
            if isinstance(cur, (cst.FunctionDef, cst.ClassDef)):
                names.append(cur.name.value)
            cur = self.parents.get(cur)
        return ".".join(reversed(names)) or "<module>"

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
    ) -> Fix:
        """A fix of ``node``; its id hashes ``key`` (default: the node's source text)."""
        edits = tuple(sorted(edits, key=lambda e: e.start))
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
        )

    def todo(self, rule: str, node: cst.CSTNode, message: str) -> Diagnostic:
        """Leave ``node`` as it is and propose a TODO marker above its statement."""
        stmt = self.enclosing_statement(node)
        first = stmt.decorators[0] if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) and stmt.decorators else stmt
        line = self.positions[first].start.line
        indent = "".join(self.indents(stmt))
        text = f"{indent}{TODO_PREFIX} {rule}: {message}"
        marker = None
        if not self._has_marker_above(line, rule):
            off = self.lines.offset(line, 0)
            marker = Edit(off, off, text + self.module.default_newline)
        return Diagnostic(rule, message, self.first_line(node), self.positions[node].start.column, "todo", marker)

    def info(self, rule: str, node: cst.CSTNode, message: str) -> Diagnostic:
        return Diagnostic(rule, message, self.line_of(node), self.positions[node].start.column, "info")

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


def dotted(node: cst.BaseExpression | cst.Name | cst.Attribute) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{dotted(node.value)}.{node.attr.value}"
    return ""


def attr_chain(path: str) -> cst.BaseExpression:
    """``"ndd.readers.File"`` -> the Attribute expression."""
    parts = path.split(".")
    expr: cst.BaseExpression = cst.Name(parts[0])
    for p in parts[1:]:
        expr = cst.Attribute(value=expr, attr=cst.Name(p))
    return expr
