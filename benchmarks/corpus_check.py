#!/usr/bin/env python
"""Ecosystem check: migrate every Python file of a folder and count what is left.

Modelled on Ruff's ecosystem check. ``PATH`` is copied (its ``*.py`` files, as the CLI finds
them) into a temporary folder of the same name and migrated there through the library, as
``dali-migrate --write PATH`` does: the cross-module plan over all files first
(:func:`dali_migrate.project.plan`), then :func:`dali_migrate.engine.process_file` per file,
default options, no configuration file. ``PATH`` itself is never written. Each file runs in a
worker process under a timeout; an exception out of the library, a timeout or a dead worker
is counted for that file and the run goes on. The copy is then migrated a second time: any
file that changes again is "not idempotent".

Per file it prints one of ``migrated`` (no pipeline-mode use left, no TODO), ``migrated with
N follow-ups`` (some of it migrated; N TODO markers left), ``not migrated`` (nothing
migrated; the reasons, shortened), ``crashed`` (in either run), ``output does not parse``,
``input not migrated`` (the tool could not read or parse it), and flags: ``SILENT``
(pipeline-mode uses left and no TODO in the file), ``unmarked N`` (N uses left that no TODO
marks, below), ``far TODOs N``, ``not idempotent``. Files without pipeline code are only
counted.

Definitions (counted on the input and on the output by this script's own ``ast`` scan):

* A *pipeline definition* is a function decorated with ``pipeline_def`` (any import spelling,
  ``nvidia.dali.pipeline_def``, ``nvidia.dali.pipeline.pipeline_def`` or
  ``nvidia.dali.pipeline.experimental.pipeline_def``, bare or called); a class that derives,
  directly or through classes of the same file, from DALI's ``Pipeline`` and defines
  ``define_graph`` itself; or a ``Pipeline(...)`` call assigned to a name or attribute that the
  module uses in ``with NAME:`` or ``NAME.set_outputs(...)`` (also ``with Pipeline(...) as
  NAME:``). Its key is its kind and its qualified name (for an object: the enclosing
  function and the name). It counts as *migrated* when the output has no definition with the
  same key.
* A *pipeline-mode use* is one expression of the module (never a comment, a string or an
  import statement):

  - a name or attribute chain that resolves, through the imports of the module, to
    ``nvidia.dali.fn...``, ``nvidia.dali.ops...``, ``pipeline_def``, ``Pipeline`` (and its
    attributes), ``nvidia.dali.plugin...`` (framework iterators, ``LastBatchPolicy``,
    ``feed_ndarray``, ``autoserialize``), ``nvidia.dali.math...``, ``nvidia.dali.auto_aug...``,
    ``nvidia.dali.data_node...`` or ``nvidia.dali.types.Constant`` / ``ScalarConstant``; one
    use per chain (``fn.decoders.image`` is one use). Other ``types`` members, ``tfrecord`` and
    ``plugin_manager`` are not uses: they keep their meaning in dynamic mode;
  - a call of a pipeline method (``build``, ``run``, ``schedule_run``, ``share_outputs``,
    ``release_outputs``, ``outputs``, ``epoch_size``, ``reader_meta``, ``reset``,
    ``feed_input``, ``set_outputs``, ``serialize``, ...) on a pipeline, or of one of the methods
    only pipelines have (``epoch_size``, ``reader_meta``, ``feed_input``, ``schedule_run``,
    ``share_outputs``, ``release_outputs``, ``set_outputs``, ...) on anything.

  Imports are resolved by scope: module level, inside functions and classes, with aliases
  (``from nvidia.dali import fn as dfn``, ``import nvidia.dali as dali``, ``from nvidia import
  dali``); a name bound to DALI and to something else in one scope counts as DALI (``try:
  import ... except ImportError: fn = None``). Wrappers count as imports: ``X =
  importlib.import_module("nvidia.dali...")``, ``pytest.importorskip(...)``,
  ``OptionalImport(...)``, ``__import__(...)`` with such a string, and ``X = f()`` where the
  name of ``f`` holds both "import" and "dali" (``try_import_dali()``) binds ``X`` to
  ``nvidia.dali``. ``Y = <DALI chain>`` makes ``Y`` an alias of an operator, ``pipeline_def``,
  ``Pipeline`` or a module (not of a value such as ``LastBatchPolicy.FILL``).

  A *pipeline* (a receiver of pipeline methods) is the value of: a call of ``Pipeline`` (or
  ``Pipeline.deserialize``), of a ``pipeline_def`` function, of a ``Pipeline`` subclass, of a
  function that returns a pipeline (factories, to a fixpoint), or of any of these defined at the
  top of another file of the tree and imported here (``from m import f``, ``m.f``; matched by
  name, so that a tree of renamed files still links);
  a name or ``self.attribute`` assigned such a value; an element of a list, tuple or
  comprehension of them (subscripts, ``for`` targets, ``append``); a name given to a framework
  iterator (first argument, ``pipelines=``, ``pipeline=``); a receiver of a method only
  pipelines have; ``self`` in a ``Pipeline`` subclass. Names are matched by their text across
  the module.
* A *TODO* is a line of the output that starts with ``# TODO(dali-migrate):``. The code it
  names: the class it names ("pipeline not migrated (class X): ..."); else the first statement
  after its block of TODO lines (its decorators and header for a
  ``def``/``class``/compound statement) when that holds a pipeline-mode use; otherwise the
  nearest line holding a fragment the TODO quotes in backquotes. Its distance is the number of
  lines from the TODO to the first use (or the quote) in that code, not counting the other TODO
  lines of its block (a quote anywhere in the statement right below counts as that
  statement); it is *far* beyond two lines, and *unanchored* when it names no code.
* A use left in the output is *marked* when a TODO block ends right above one of the statements
  that contain it (a TODO above a class marks the class; one above ``pipe = Pipeline(...)``
  marks the graph of its ``with pipe:`` block), or within the two lines above it.
  Files with unmarked uses are listed; files with uses left and no TODO at all are *silent*
  (a file that crashed is counted as a crash only).
* Reasons are the texts of the diagnostics (severity todo or error, and DM100's note that local
  rewrites were withheld), split at "; " and normalised (quoted code, names of attributes,
  operators and methods, numbers and line numbers replaced) so that the same reason counts
  together.
* A *lost comment* is a ``#`` comment of the input (not a ``# TODO(dali-migrate)`` marker) that
  the output does not hold, compared by its words (a comment the line wrapper continued on the
  next line is held), each occurrence counted (:func:`dali_migrate.comments.lost_comments`).
  The trailing comment of a line whose code the output no longer has anywhere
  (``pipe.build()  # build it``) is counted apart, as *dropped with its statement*: the policy
  drops those on purpose. The target is 0 lost comments.

Usage::

    python benchmarks/corpus_check.py PATH [--json FILE] [--compare OLD.json] [--jobs N]
                                           [--timeout S] [--out DIR] [--quiet]
"""

from __future__ import annotations

import argparse
import ast
import datetime as _dt
import json
import multiprocessing
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

TODO_PREFIX = "# TODO(dali-migrate):"

# ------------------------------------------------------------------------------------------------
# What counts as pipeline-mode API
# ------------------------------------------------------------------------------------------------

PIPELINE_CLASSES = {"nvidia.dali.Pipeline", "nvidia.dali.pipeline.Pipeline"}
PIPELINE_DEFS = {
    "nvidia.dali.pipeline_def",
    "nvidia.dali.pipeline.pipeline_def",
    "nvidia.dali.pipeline.experimental.pipeline_def",
}
#: qualified-name prefix -> kind of use
USE_PREFIXES: tuple[tuple[str, str], ...] = (
    ("nvidia.dali.fn", "fn"),
    ("nvidia.dali.ops", "ops"),
    ("nvidia.dali.plugin.", "plugin"),
    ("nvidia.dali.math", "math"),
    ("nvidia.dali.auto_aug", "auto_aug"),
    ("nvidia.dali.data_node", "data_node"),
    ("nvidia.dali.types.Constant", "constant"),
    ("nvidia.dali.types.ScalarConstant", "constant"),
)
#: kinds of DALI names that ``name = <chain>`` makes an alias of (others are values)
ALIAS_KINDS = {"fn", "ops", "pipeline_def", "Pipeline", "math", "auto_aug"}
#: methods of a pipeline object (a use when called on a pipeline)
PIPE_METHODS = {
    "build",
    "run",
    "schedule_run",
    "share_outputs",
    "release_outputs",
    "outputs",
    "epoch_size",
    "reader_meta",
    "reset",
    "feed_input",
    "set_outputs",
    "serialize",
    "save_graph_to_dot_file",
    "executor_statistics",
    "iter_setup",
    "define_graph",
    "deserialize_and_build",
    "checkpoint",
    "empty",
    "enable_api_check",
}
#: methods only pipelines have (a use on any receiver)
DISTINCT_METHODS = {
    "epoch_size",
    "reader_meta",
    "feed_input",
    "schedule_run",
    "share_outputs",
    "release_outputs",
    "set_outputs",
    "save_graph_to_dot_file",
    "executor_statistics",
    "deserialize_and_build",
}
#: what ``from nvidia.dali import *`` binds (of what matters here)
STAR_NAMES = ("fn", "ops", "types", "pipeline_def", "Pipeline", "math", "plugin")
_WRAPPER_FUNCS = re.compile(
    r"^(import_module|importorskip|__import__|OptionalImport|LazyImport|lazy_import)$"
)


def use_kind(qual: str) -> str | None:
    """The kind of pipeline-mode use a qualified name is, or None."""
    for prefix, kind in USE_PREFIXES:
        if qual == prefix.rstrip(".") or qual.startswith(
            prefix if prefix.endswith(".") else prefix + "."
        ):
            return kind
    if qual in PIPELINE_DEFS:
        return "pipeline_def"
    if any(qual == c or qual.startswith(c + ".") for c in PIPELINE_CLASSES):
        return "Pipeline"
    return None


# ------------------------------------------------------------------------------------------------
# Scopes and import resolution
# ------------------------------------------------------------------------------------------------


@dataclass
class _Scope:
    kind: str  # module, function, class
    parent: _Scope | None
    dali: dict[str, str] = field(default_factory=dict)
    other: set[str] = field(default_factory=set)

    def resolve(self, name: str) -> str | None:
        scope: _Scope | None = self
        first = True
        while scope is not None:
            if scope.kind == "class" and not first:
                scope = scope.parent
                continue
            if name in scope.dali:
                return scope.dali[name]
            if name in scope.other:
                return None
            first, scope = False, scope.parent
        return None


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of attributes on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _import_bindings(node: ast.Import | ast.ImportFrom) -> list[tuple[str, str | None]]:
    """(local name, qualified DALI name or None) for each name an import binds."""
    out: list[tuple[str, str | None]] = []
    if isinstance(node, ast.Import):
        for a in node.names:
            if a.asname:
                out.append((a.asname, a.name if _is_dali(a.name) else None))
            else:
                top = a.name.split(".")[0]
                out.append((top, top if top == "nvidia" and _is_dali(a.name) else None))
        return out
    module = node.module or ""
    for a in node.names:
        qual = f"{module}.{a.name}" if not node.level else None
        if a.name == "*":
            if not node.level and module == "nvidia.dali":
                out += [(n, f"nvidia.dali.{n}") for n in STAR_NAMES]
            continue
        out.append((a.asname or a.name, qual if qual and _is_dali(qual) else None))
    return out


def _is_dali(qual: str) -> bool:
    return qual == "nvidia.dali" or qual.startswith("nvidia.dali.")


def _wrapper_import(value: ast.AST) -> str | None:
    """The DALI module a wrapper call imports (``importlib.import_module("nvidia.dali.fn")``,
    ``try_import_dali()``), or None."""
    if not isinstance(value, ast.Call):
        return None
    name = dotted(value.func)
    last = name.split(".")[-1] if name else ""
    strings = [
        a.value for a in value.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
    ]
    if _WRAPPER_FUNCS.match(last) and strings and _is_dali(strings[0]):
        return strings[0]
    low = last.lower()
    if "import" in low and "dali" in low:
        return strings[0] if strings and _is_dali(strings[0]) else "nvidia.dali"
    return None


# ------------------------------------------------------------------------------------------------
# The scan of one module
# ------------------------------------------------------------------------------------------------


@dataclass
class Use:
    line: int
    kind: str
    text: str
    tops: tuple[int, ...]  # first lines (decorators included) of the statements around it


@dataclass
class _Call:
    receiver: ast.expr
    method: str
    line: int
    tops: tuple[int, ...]
    cls: str | None
    func: str


@dataclass
class _Raw:
    """What one walk of a module collects; resolved afterwards (bindings are scope-wide)."""

    chains: list = field(default_factory=list)  # (node, scope, text, tops)
    calls: list[_Call] = field(default_factory=list)
    assigns: list = field(default_factory=list)  # (target, value, func qualname)
    loops: list = field(default_factory=list)  # (target, iterable)
    withs: list = field(default_factory=list)  # (context expr, as-target or None, func qualname)
    appends: list = field(default_factory=list)  # (list text, element)
    returns: list = field(default_factory=list)  # (func qualname, value)
    plain_calls: list = field(default_factory=list)  # (call node, scope)
    functions: list = field(default_factory=list)  # (qualname, node, enclosing scope)
    classes: list = field(default_factory=list)  # (qualname, node, enclosing scope)
    aliases: list = field(default_factory=list)  # (scope, name, chain text)
    stmts: dict[int, int] = field(default_factory=dict)  # first line -> last line of its header
    imported: set[str] = field(default_factory=set)  # names bound by imports of other modules
    #: id of an assigned value or a with-context -> first line of its statement
    tops_of: dict[int, int] = field(default_factory=dict)


class _Walker(ast.NodeVisitor):
    def __init__(self) -> None:
        self.module = _Scope("module", None)
        self.scope = self.module
        self.names: list[str] = []  # qualname parts
        self.kinds: list[str] = []  # "class"/"function" per part
        self.tops: list[int] = []
        self.raw = _Raw()

    # -- helpers --
    def _qual(self) -> str:
        return ".".join(self.names) or "<module>"

    def _func(self) -> str:
        return self._qual()

    def _cls(self) -> str | None:
        for i in range(len(self.kinds) - 1, -1, -1):
            if self.kinds[i] == "class":
                return ".".join(self.names[: i + 1])
        return None

    def visit(self, node: ast.AST):
        if not isinstance(node, ast.stmt):
            return super().visit(node)
        decorators = getattr(node, "decorator_list", None) or []
        top = min([node.lineno, *(d.lineno for d in decorators)])
        body = getattr(node, "body", None)
        header_end = node.end_lineno or node.lineno
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
            header_end = max(node.lineno, body[0].lineno - 1)
        self.raw.stmts.setdefault(top, header_end)
        self.tops.append(top)
        try:
            return super().visit(node)
        finally:
            self.tops.pop()

    def _enter(self, kind: str, name: str, scope_kind: str, body: Callable[[], None]) -> None:
        outer = self.scope
        self.scope = _Scope(scope_kind, outer)
        self.names.append(name)
        self.kinds.append(kind)
        try:
            body()
        finally:
            self.scope = outer
            self.names.pop()
            self.kinds.pop()

    # -- bindings --
    def visit_Import(self, node: ast.Import) -> None:
        self._bind_imports(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self._bind_imports(node)

    def _bind_imports(self, node) -> None:
        for name, qual in _import_bindings(node):
            if qual:
                self.scope.dali[name] = qual
            else:
                self.scope.other.add(name)
                self.raw.imported.add(name)

    def visit_FunctionDef(self, node) -> None:
        for d in node.decorator_list:
            self.visit(d)
        args = node.args
        for default in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
            self.visit(default)
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if a is not None and a.annotation is not None:
                self.visit(a.annotation)
        if node.returns is not None:
            self.visit(node.returns)
        self.scope.other.add(node.name)
        self.raw.functions.append((".".join([*self.names, node.name]), node, self.scope))

        def body() -> None:
            for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if a is not None:
                    self.scope.other.add(a.arg)
            for stmt in node.body:
                self.visit(stmt)

        self._enter("function", node.name, "function", body)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for default in [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]:
            self.visit(default)
        outer = self.scope
        self.scope = _Scope("function", outer)
        a = node.args
        for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
            if arg is not None:
                self.scope.other.add(arg.arg)
        self.visit(node.body)
        self.scope = outer

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for expr in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(expr)
        self.scope.other.add(node.name)
        self.raw.classes.append((".".join([*self.names, node.name]), node, self.scope))

        def body() -> None:
            for stmt in node.body:
                self.visit(stmt)

        self._enter("class", node.name, "class", body)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Store):
            self.scope.other.add(node.id)
        elif isinstance(node.ctx, ast.Load):
            self.raw.chains.append((node, self.scope, node.id, tuple(self.tops)))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        text = dotted(node)
        if text is None:
            self.generic_visit(node)
        elif isinstance(node.ctx, ast.Load):
            self.raw.chains.append((node, self.scope, text, tuple(self.tops)))

    # -- what the pipeline tracking needs --
    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._assign(target, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._assign(node.target, node.value)
        self.generic_visit(node)

    def _assign(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)):
            for t, v in zip(target.elts, value.elts, strict=False):
                self._assign(t, v)
            return
        self.raw.assigns.append((target, value, self._func()))
        self.raw.tops_of[id(value)] = self.tops[-1]
        if isinstance(target, ast.Name):
            wrapped = _wrapper_import(value)
            if wrapped:
                self.scope.dali[target.id] = wrapped
            elif dotted(value):
                self.raw.aliases.append((self.scope, target.id, dotted(value)))

    def visit_For(self, node) -> None:
        self.raw.loops.append((node.target, node.iter))
        self.generic_visit(node)

    visit_AsyncFor = visit_For

    def visit_comprehension(self, node: ast.comprehension) -> None:
        self.raw.loops.append((node.target, node.iter))
        # comprehension targets bind in their own scope: not bound here
        self.visit(node.iter)
        for cond in node.ifs:
            self.visit(cond)

    def visit_With(self, node) -> None:
        for item in node.items:
            self.raw.withs.append((item.context_expr, item.optional_vars, self._func()))
            self.raw.tops_of[id(item.context_expr)] = self.tops[-1]
        self.generic_visit(node)

    visit_AsyncWith = visit_With

    def visit_Return(self, node: ast.Return) -> None:
        if node.value is not None:
            self.raw.returns.append((self._func(), node.value))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr in PIPE_METHODS:
                self.raw.calls.append(
                    _Call(
                        func.value,
                        func.attr,
                        node.lineno,
                        tuple(self.tops),
                        self._cls(),
                        self._func(),
                    )
                )
            if func.attr == "append" and len(node.args) == 1 and dotted(func.value):
                self.raw.appends.append((dotted(func.value), node.args[0]))
        self.raw.plain_calls.append((node, self.scope))
        self.generic_visit(node)


# ------------------------------------------------------------------------------------------------
# Resolving what the walk collected
# ------------------------------------------------------------------------------------------------


@dataclass
class ModuleScan:
    """Pipeline definitions and pipeline-mode uses of one module."""

    uses: list[Use]
    definitions: list[str]  # "kind:qualname" keys
    constructors: set[str]  # names whose call gives a pipeline (for the other files)
    stmts: dict[int, int]  # first line of a statement -> last line of its header
    graph_blocks: dict[int, int] = field(default_factory=dict)  # see _Resolver.graph_blocks


class _Resolver:
    def __init__(self, raw: _Raw, tree_constructors: set[str]) -> None:
        self.raw = raw
        for scope, name, text in raw.aliases:  # after the walk: every import is bound by now
            qual = self.qual_in(scope, text)
            # an operator, a pipeline API or a module; not a value such as LastBatchPolicy.FILL
            if qual and (use_kind(qual) in ALIAS_KINDS or qual.count(".") < 2):
                scope.dali.setdefault(name, qual)
        self.pipeline_classes = self._pipeline_classes(tree_constructors)
        self.pipeline_defs = self._pipeline_defs()
        self.tree_ctors = set(tree_constructors)
        self.ctors = {q.split(".")[-1] for q in self.pipeline_defs | self.pipeline_classes}
        self.call_scopes = {id(node): scope for node, scope in raw.plain_calls}
        self.vars: set[str] = set()
        self.lists: set[str] = set()
        self.factories: set[str] = set()

    @staticmethod
    def qual_in(scope: _Scope, text: str) -> str | None:
        root, _, rest = text.partition(".")
        qual = scope.resolve(root)
        if qual is None:
            return None
        return f"{qual}.{rest}" if rest else qual

    def expr_qual(self, node: ast.AST, scope: _Scope) -> str | None:
        text = dotted(node)
        return self.qual_in(scope, text) if text else None

    def _pipeline_classes(self, tree_constructors: set[str]) -> set[str]:
        found: set[str] = set()
        changed = True
        while changed:
            changed = False
            for qual, node, scope in self.raw.classes:
                if qual in found:
                    continue
                for base in node.bases:
                    bq = self.expr_qual(base, scope)
                    text = dotted(base) or ""
                    last = text.split(".")[-1]
                    local = {q.split(".")[-1] for q in found}
                    imported = text.split(".")[0] in self.raw.imported
                    if (
                        (bq and bq in PIPELINE_CLASSES)
                        or last in local
                        or (last in tree_constructors and imported)
                    ):
                        found.add(qual)
                        changed = True
                        break
        return found

    def _pipeline_defs(self) -> set[str]:
        out = set()
        for qual, node, scope in self.raw.functions:
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                if self.expr_qual(target, scope) in PIPELINE_DEFS:
                    out.add(qual)
        return out

    # -- pipelines as values --
    def is_pipeline(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Call):
            func = node.func
            scope = self.call_scopes.get(id(node))
            q = self.expr_qual(func, scope) if scope is not None else None
            if q and any(q == c or q.startswith(c + ".") for c in PIPELINE_CLASSES):
                return True
            return self._constructor(func)
        text = dotted(node)
        if text is not None:
            return text in self.vars
        if isinstance(node, ast.Subscript):
            return (dotted(node.value) or "") in self.lists
        return False

    def _constructor(self, func: ast.expr) -> bool:
        """A call of ``func`` gives a pipeline: a definition or factory of this module, or one
        of another module of the tree, imported (``from m import f``, ``m.f``)."""
        if isinstance(func, ast.Name):
            name, via = func.id, func.id
        elif isinstance(func, ast.Attribute):
            name, via = func.attr, (dotted(func.value) or "").split(".")[0]
        else:
            return False
        if name in self.ctors or name in self.factories:
            return True
        return name in self.tree_ctors and via in self.raw.imported

    def is_list(self, node: ast.AST) -> bool:
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return any(self.is_pipeline(e) for e in node.elts)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            return self.is_pipeline(node.elt)
        return (dotted(node) or "") in self.lists

    def track(self) -> None:
        """Pipelines as values, to a fixpoint: assignments, loops, lists, factories."""
        for _ in range(8):
            before = (len(self.vars), len(self.lists), len(self.factories))
            self._track_once()
            if (len(self.vars), len(self.lists), len(self.factories)) == before:
                return

    def _track_once(self) -> None:
        for target, value, _func in self.raw.assigns:
            text = dotted(target)
            if text is None:
                continue
            if self.is_pipeline(value):
                self.vars.add(text)
            if self.is_list(value):
                self.lists.add(text)
        for target, iterable in self.raw.loops:
            if dotted(target) and self.is_list(iterable):
                self.vars.add(dotted(target))
        for ctx, as_target, _func in self.raw.withs:
            if as_target is not None and dotted(as_target) and self.is_pipeline(ctx):
                self.vars.add(dotted(as_target))
        for list_text, element in self.raw.appends:
            if self.is_pipeline(element):
                self.lists.add(list_text)
        for func, value in self.raw.returns:
            if self.is_pipeline(value):
                self.factories.add(func.split(".")[-1])
        for node, scope in self.raw.plain_calls:
            q = self.expr_qual(node.func, scope) or ""
            if use_kind(q) == "plugin" and re.search(r"Iterator|Dataset", q.split(".")[-1]):
                self._iterator_arguments(node)
        for call in self.raw.calls:
            receiver = dotted(call.receiver)
            if call.method in DISTINCT_METHODS and receiver and receiver != "self":
                self.vars.add(receiver)  # (self: only in a Pipeline subclass, see uses())

    def _iterator_arguments(self, node: ast.Call) -> None:
        given = node.args[:1] + [
            k.value for k in node.keywords if k.arg in ("pipelines", "pipeline")
        ]
        for arg in given:
            items = arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg]
            for item in items:
                text = dotted(item)
                if text:
                    self.vars.add(text)
                    if item is arg:
                        self.lists.add(text)

    # -- results --
    def uses(self) -> list[Use]:
        out = []
        for node, scope, text, tops in self.raw.chains:
            kind = use_kind(self.qual_in(scope, text) or "")
            if kind:
                out.append(Use(node.lineno, kind, text, tops))
        for call in self.raw.calls:
            receiver = call.receiver
            on_self = (
                isinstance(receiver, ast.Name)
                and receiver.id == "self"
                and call.cls in self.pipeline_classes
            )
            if call.method in DISTINCT_METHODS or on_self or self.is_pipeline(receiver):
                out.append(
                    Use(
                        call.line,
                        "method",
                        f"{ast.unparse(receiver)}.{call.method}()",
                        call.tops,
                    )
                )
        return sorted(out, key=lambda u: u.line)

    def definitions(self) -> list[str]:
        out = [f"pipeline_def:{q}" for q in sorted(self.pipeline_defs)]
        for qual, node, _scope in self.raw.classes:
            own = {
                n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            }
            if qual in self.pipeline_classes and "define_graph" in own:
                out.append(f"class:{qual}")
        graphs = {dotted(ctx) for ctx, _t, _f in self.raw.withs}
        graphs |= {dotted(c.receiver) for c in self.raw.calls if c.method == "set_outputs"}
        for target, value, func in self.raw.assigns:
            text = dotted(target)
            if text and text in graphs and self._constructs_pipeline(value):
                out.append(f"object:{func}:{text}")
        for ctx, as_target, func in self.raw.withs:
            if as_target is not None and dotted(as_target) and self._constructs_pipeline(ctx):
                out.append(f"object:{func}:{dotted(as_target)}")
        return out

    def graph_blocks(self) -> dict[int, int]:
        """First line of each ``with NAME:`` block -> first line of the statement that assigns
        ``NAME = Pipeline(...)`` (a TODO above the assignment marks the block's graph too)."""
        made: dict[str, int] = {}
        for target, value, _func in self.raw.assigns:
            if dotted(target) and self._constructs_pipeline(value):
                made[dotted(target)] = self.raw.tops_of[id(value)]
        blocks = {}
        for ctx, _as, _func in self.raw.withs:
            if dotted(ctx) in made:
                blocks[self.raw.tops_of[id(ctx)]] = made[dotted(ctx)]
        return blocks

    def _constructs_pipeline(self, value: ast.AST) -> bool:
        if not isinstance(value, ast.Call):
            return False
        scope = self.call_scopes.get(id(value))
        return scope is not None and self.expr_qual(value.func, scope) in PIPELINE_CLASSES


def scan_module(source: str, tree_constructors: Iterable[str] = ()) -> ModuleScan:
    """Scan one module (raises SyntaxError/ValueError when it does not parse).
    ``tree_constructors``: names other files of the tree build pipelines with."""
    tree = ast.parse(source)
    walker = _Walker()
    walker.visit(tree)
    resolver = _Resolver(walker.raw, set(tree_constructors))
    resolver.track()
    top_level = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    exported = (resolver.ctors | resolver.factories) & top_level
    return ModuleScan(
        uses=resolver.uses(),
        definitions=resolver.definitions(),
        constructors={n for n in exported if not n.startswith("__")},
        stmts=walker.raw.stmts,
        graph_blocks=resolver.graph_blocks(),
    )


def scan_tree(
    sources: dict[str, str], before: dict[str, ModuleScan | str] | None = None
) -> dict[str, ModuleScan | str]:
    """Scan every module of a tree: first what each defines, then each with what the others
    define. A module that does not parse maps to the error text. ``before``: the scans of the
    tree's input, when ``sources`` is its output: what the other modules defined there still
    makes pipelines here (a module left as it was, over a definition migrated into a function,
    keeps pipeline-mode uses)."""
    first: dict[str, ModuleScan | str] = {}
    for name, text in sources.items():
        try:
            first[name] = scan_module(text)
        except (SyntaxError, ValueError, RecursionError) as e:
            first[name] = f"{type(e).__name__}: {e}"
    out: dict[str, ModuleScan | str] = {}
    for name, text in sources.items():
        if isinstance(first[name], str):
            out[name] = first[name]
            continue
        others = set()
        for scans in (first, before or {}):
            for other, scan in scans.items():
                if other != name and isinstance(scan, ModuleScan):
                    others |= scan.constructors
        out[name] = scan_module(text, others) if others else first[name]
    return out


# ------------------------------------------------------------------------------------------------
# TODO markers: where they sit, what they name, which uses they mark
# ------------------------------------------------------------------------------------------------


@dataclass
class Todo:
    line: int
    text: str
    distance: int | None  # None: names no code


def _is_marker(line: str) -> bool:
    return line.strip().startswith(TODO_PREFIX)


def split_lines(text: str) -> list[str]:
    """Lines as the parser counts them (``str.splitlines`` also splits at form feeds)."""
    return re.split(r"\r\n|\r|\n", text)


def marker_lines(text: str) -> set[int]:
    return {i for i, line in enumerate(split_lines(text), 1) if _is_marker(line)}


def _quotes(text: str) -> list[str]:
    """The code fragments a TODO quotes in backquotes, cut before ``(...)``."""
    out = []
    for frag in re.findall(r"`([^`]+)`", text):
        frag = frag.split("\n")[0].split("(")[0].strip()
        if len(frag) >= 2:
            out.append(frag)
    return out


def todos(text: str, scan: ModuleScan) -> list[Todo]:
    """Each TODO marker of ``text`` with its distance to the code it names."""
    lines = split_lines(text)
    markers = marker_lines(text)
    use_lines = sorted({u.line for u in scan.uses})
    out = []
    for t in sorted(markers):
        body = lines[t - 1].strip()[len(TODO_PREFIX) :].strip()
        code = t + 1
        while code <= len(lines) and (
            not lines[code - 1].strip() or lines[code - 1].strip().startswith("#")
        ):
            code += 1
        end = scan.stmts.get(code, code)
        hit = _named_class(lines, body, t)
        if hit is None:
            hit = next((ln for ln in use_lines if code <= ln <= end), None)
        if hit is None:
            hit = _quoted_line(lines, body, t, code, end, markers)
        if hit is not None and code <= hit <= end:
            hit = code  # in the statement right below: a wrapped statement is one piece of code
        if hit is None:
            distance = None
        elif hit > t:  # the other TODO lines of its block do not count
            distance = hit - t - len([m for m in markers if t < m < hit])
        else:
            distance = t - hit
        out.append(Todo(t, body, distance))
    return out


def _named_class(lines: list[str], body: str, t: int) -> int | None:
    """The line of ``class X`` nearest to the TODO at ``t`` when its text names it
    ("pipeline not migrated (class X): ..."), else None."""
    m = re.search(r"\(class (\w+)\)", body)
    if not m:
        return None
    header = re.compile(rf"^\s*class {m.group(1)}\b")
    found = [i for i, line in enumerate(lines, 1) if header.match(line)]
    return min(found, key=lambda ln: (abs(ln - t), ln)) if found else None


def _quoted_line(
    lines: list[str], body: str, t: int, code: int, end: int, markers: set[int]
) -> int | None:
    """The line nearest to the TODO at ``t`` (the statement below it first) that holds a code
    fragment the TODO quotes."""
    frags = _quotes(body)
    if not frags:
        return None
    candidates = [
        ln
        for ln in range(1, len(lines) + 1)
        if ln not in markers and not lines[ln - 1].lstrip().startswith("#")
    ]
    for ln in range(code, end + 1):
        if ln <= len(lines) and any(f in lines[ln - 1] for f in frags):
            return ln
    found = [ln for ln in candidates if any(f in lines[ln - 1] for f in frags)]
    return min(found, key=lambda ln: (abs(ln - t), ln)) if found else None


def unmarked(
    uses: Sequence[Use], markers: set[int], blocks: dict[int, int] | None = None
) -> list[Use]:
    """Uses that no TODO marks: none right above a statement around them (for the graph of a
    ``with pipe:`` block, right above ``pipe = Pipeline(...)``), nor in the two lines above
    them."""
    blocks = blocks or {}
    out = []
    for u in uses:
        tops = [*u.tops, *(blocks[t] for t in u.tops if t in blocks)]
        if any(top - 1 in markers for top in tops):
            continue
        if u.line - 1 in markers or u.line - 2 in markers:
            continue
        out.append(u)
    return out


# ------------------------------------------------------------------------------------------------
# Running the migration: a copy of the tree, worker processes, a timeout per file
# ------------------------------------------------------------------------------------------------


class _Timeout(BaseException):
    """Raised by the alarm in a task (a BaseException: the engine's ``except Exception`` that
    turns a rule's bug into an error result must not swallow it)."""


def _on_alarm(signum, frame):  # pragma: no cover - runs only when a file hangs
    raise _Timeout()


def _guarded(payload: tuple[Callable, tuple, float]):
    """Run ``func(*args)`` under a timer (in the main thread of a process only)."""
    func, args, timeout = payload
    armed, previous = False, None
    try:
        previous = signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        armed = True
    except (ValueError, AttributeError, OSError):
        pass  # not the main thread, or no SIGALRM: the pool's own wait still bounds it
    try:
        return func(*args)
    except _Timeout:
        return {"status": "timeout", "error": f"no result after {timeout:g} s"}
    except Exception as e:
        return {"status": "crash", "error": f"{type(e).__name__}: {e}"}
    finally:
        if armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


def run_tasks(func: Callable, tasks: Sequence[tuple], jobs: int, timeout: float) -> list:
    """``func(*task)`` for each task, each under ``timeout``; in ``jobs`` worker processes
    (in this process when ``jobs`` is 1). A task whose worker does not answer (hung in native
    code, or died) gets a timeout result, and the pool is replaced for the tasks left."""
    if jobs <= 1 or len(tasks) <= 1:
        return [_guarded((func, t, timeout)) for t in tasks]
    ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else None)
    results: dict[int, object] = {}
    pending = list(range(len(tasks)))
    while pending:
        pool = ctx.Pool(min(jobs, len(pending)))
        waiting = [(i, pool.apply_async(_guarded, ((func, tasks[i], timeout),))) for i in pending]
        pending, hung = [], False
        for i, job in waiting:
            if hung and not job.ready():
                pending.append(i)
                continue
            try:
                results[i] = job.get(timeout + 10 if not hung else 0)
            except multiprocessing.TimeoutError:
                results[i] = {
                    "status": "timeout",
                    "error": f"no result after {timeout:g} s (worker hung or died)",
                }
                hung = True
        if hung:
            pool.terminate()
        else:
            pool.close()
        pool.join()
    return [results[i] for i in range(len(tasks))]


def _migrate_one(path: str, info) -> dict:
    """One file as ``dali-migrate --write`` handles it (in the copy)."""
    from dali_migrate.engine import Options, process_file

    start = time.perf_counter()
    fr = process_file(path, Options(mode="write"), info)
    out = {
        "status": fr.status,
        "error": fr.error,
        "seconds": time.perf_counter() - start,
        "diagnostics": [],
    }
    if (
        fr.status == "error"
        and fr.error
        and ("internal error" in fr.error or "too deeply nested" in fr.error)
    ):
        out["status"] = "crash"
    if fr.result is not None:
        out["diagnostics"] = [d.to_dict() for d in fr.result.diagnostics]
    return out


def _plan_one(text: str, path: str, info) -> dict:
    """One in-memory migration of the cross-module plan (what the engine does in its pool)."""
    from dali_migrate import migrate_source

    migrate_source(text, path=path, project=info)
    return {"status": "ok", "use_reasons": info.use_reasons, "migrated": info.migrated}


def migrate_tree(root: Path, jobs: int, timeout: float) -> dict[str, dict]:
    """Migrate every Python file under ``root`` in place, as ``dali-migrate --write root``.
    Returns, per path relative to ``root``, the outcome (status, error, diagnostics, seconds)."""
    from dali_migrate.engine import discover
    from dali_migrate.project import plan
    from dali_migrate.sourcefile import mentions_dali

    files = discover([root])
    dali = {str(p) for p in files if _mentions_dali(p, mentions_dali)}

    def migrate(items: list) -> None:
        answers = run_tasks(
            _plan_one, [(text, path, info) for text, path, info in items], jobs, timeout
        )
        for (_text, _path, info), answer in zip(items, answers, strict=True):
            if isinstance(answer, dict) and answer.get("status") == "ok":
                info.use_reasons, info.migrated = answer["use_reasons"], answer["migrated"]
            else:
                info.migrated.clear()

    links = plan(files, [root], dali, migrate)
    todo = [str(p) for p in files if str(p) in dali or str(p) in links]
    answers = run_tasks(_migrate_one, [(p, links.get(p)) for p in todo], jobs, timeout)
    out = {Path(p).relative_to(root).as_posix(): a for p, a in zip(todo, answers, strict=True)}
    for p in files:
        out.setdefault(
            p.relative_to(root).as_posix(), {"status": "skipped", "diagnostics": [], "seconds": 0.0}
        )
    return out


def _mentions_dali(path: Path, test: Callable[[bytes], bool]) -> bool:
    try:
        return test(path.read_bytes())
    except OSError:
        return True  # process_file reports it


def copy_tree(src: Path, dst: Path) -> list[str]:
    """Copy the Python files the CLI would find under ``src`` to ``dst`` (same relative paths),
    writable whatever the originals' modes (the tool refuses read-only files); returns those
    paths."""
    from dali_migrate.engine import discover

    rels = []
    base = src if src.is_dir() else src.parent
    for p in discover([src]):
        rel = p.relative_to(base)
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(p, dst / rel)
        (dst / rel).chmod((dst / rel).stat().st_mode | 0o200)
        rels.append(rel.as_posix())
    return rels


def read_text(path: Path) -> str:
    from dali_migrate.sourcefile import SourceError, read_source

    try:
        return read_source(path).text
    except SourceError:
        return path.read_bytes().decode("utf-8", errors="replace")


# ------------------------------------------------------------------------------------------------
# Reasons
# ------------------------------------------------------------------------------------------------

_PREFIX = re.compile(r"^pipeline not migrated(?: \(class \w+\))?: ")


def split_reasons(message: str) -> list[str]:
    """A diagnostic's reasons: its text after "pipeline not migrated: ", cut at "; " outside
    backquotes and brackets (not before what to do about the reason: "; migrate it by hand")."""
    text = _PREFIX.sub("", message.strip())
    parts, depth, quoted, start = [], 0, False, 0
    for i, ch in enumerate(text):
        if ch == "`":
            quoted = not quoted
        elif not quoted and ch in "([{":
            depth += 1
        elif not quoted and ch in ")]}":
            depth = max(0, depth - 1)
        elif not quoted and depth == 0 and text.startswith("; ", i):
            parts.append(text[start:i])
            start = i + 2
    parts.append(text[start:])
    out: list[str] = []
    for part in (p.strip() for p in parts if p.strip()):
        if out and _CONTINUATION.match(part):  # "...; migrate it by hand: ..." is the same reason
            out[-1] += "; " + part
        else:
            out.append(part)
    return out


#: a part after "; " that goes on with the reason before it (what to do about it)
_CONTINUATION = re.compile(r"^(migrate|make|use|pass|drop|give|keep|compute|convert|iterate) ")


_NORMALIZE: tuple[tuple[str, str], ...] = (
    (r"`[^`]*`", "`_`"),
    (r'"[^"]*"', '"_"'),
    (r"\s*\((?:iterator at )?line \d+\)", ""),
    (r"\bline \d+", "line N"),
    (r"\bself\.\w+", "self.X"),
    (r"\b(?:nvidia\.dali\.)?(?:fn|ops)(?:\.\w+)+", "OP"),
    (r"\bsource=\S+", "source=X"),
    (r"\bsize=\S+(?: // \w+)? is not migrated", "size=X is not migrated"),
    (r"\bor [\w.]+\.epoch_size\(", "or P.epoch_size("),
    (r"\bit defines [\w, ]+ \(only", "it defines M (only"),
    (r"\d+(?:\.\d+)*", "N"),
    (r"\s+", " "),
)


def normalize_reason(reason: str) -> str:
    """The reason with quoted code, attribute, operator and method names and numbers replaced,
    so that the same reason in different files counts together."""
    for pattern, repl in _NORMALIZE:
        reason = re.sub(pattern, repl, reason)
    return reason.strip()


def file_reasons(diagnostics: Sequence[dict]) -> list[tuple[str, str]]:
    """(rule, reason) for the diagnostics that explain code left as it was."""
    out = []
    for d in diagnostics:
        withheld = d.get("rule") == "DM100" and "withheld" in d.get("message", "")
        if d.get("severity") in ("todo", "error") or withheld:
            out += [(d.get("rule", "?"), r) for r in split_reasons(d.get("message", ""))]
    return out


def shorten(text: str, width: int = 110) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


# ------------------------------------------------------------------------------------------------
# Per file and in total
# ------------------------------------------------------------------------------------------------

CATEGORIES = (
    "migrated",
    "migrated with follow-ups",
    "not migrated",
    "crashed",
    "output does not parse",
    "input not migrated",
    "no pipeline code",
)


@dataclass
class FileRecord:
    file: str
    category: str
    status: str
    error: str | None = None
    uses_before: int = 0
    uses_left: int = 0
    uses_before_by_kind: dict[str, int] = field(default_factory=dict)
    uses_left_by_kind: dict[str, int] = field(default_factory=dict)
    definitions: int = 0
    definitions_migrated: int = 0
    definitions_left: list[str] = field(default_factory=list)
    todos: int = 0
    todos_far: int = 0
    todos_unanchored: int = 0
    far_todos: list[str] = field(default_factory=list)
    unmarked_uses: int = 0
    unmarked: list[str] = field(default_factory=list)
    silent: bool = False
    output_parses: bool = True
    idempotent: bool = True
    reasons: list[str] = field(default_factory=list)
    seconds: float = 0.0
    comments_lost: list[str] = field(default_factory=list)
    comments_dropped: list[str] = field(default_factory=list)

    def label(self) -> str:
        if self.category == "migrated with follow-ups":
            return f"migrated with {self.todos} follow-up{'s' if self.todos != 1 else ''}"
        return self.category

    def flags(self) -> list[str]:
        out = []
        if self.silent:
            out.append("SILENT")
        if self.unmarked_uses:
            out.append(f"unmarked {self.unmarked_uses}")
        if self.todos_far or self.todos_unanchored:
            out.append(f"far TODOs {self.todos_far + self.todos_unanchored}")
        if not self.idempotent:
            out.append("not idempotent")
        if self.comments_lost:
            out.append(f"comments lost {len(self.comments_lost)}")
        return out


def _definitions_left(before: list[str], after: list[str]) -> list[str]:
    left, pool = [], Counter(after)
    for key in before:
        if pool[key] > 0:
            pool[key] -= 1
            left.append(key)
    return left


def build_record(
    rel: str, scans: tuple, texts: tuple[str, str], runs: tuple[dict, dict]
) -> FileRecord:
    """The record of one file from its scans (input, output), texts and the two runs."""
    scan_in, scan_out = scans
    first, second = runs
    rec = FileRecord(
        rel, "", first["status"], first.get("error"), seconds=round(first.get("seconds", 0.0), 3)
    )
    rec.idempotent = second["status"] != "changed"
    if second["status"] in ("crash", "timeout") and first["status"] not in ("crash", "timeout"):
        rec.status, rec.error = second["status"], f"second run: {second.get('error')}"
    # every occurrence (the reasons are counted); shown once each
    rec.reasons = [f"{rule}: {r}" for rule, r in file_reasons(first.get("diagnostics", []))]
    if isinstance(scan_in, ModuleScan):
        rec.uses_before = len(scan_in.uses)
        rec.uses_before_by_kind = dict(Counter(u.kind for u in scan_in.uses))
        rec.definitions = len(scan_in.definitions)
    if first["status"] not in ("crash", "timeout", "error"):
        rec.comments_lost, rec.comments_dropped = comment_losses(*texts)
    if isinstance(scan_out, ModuleScan):
        _fill_output(rec, scan_in, scan_out, texts[1])
    else:
        rec.output_parses = False
        rec.uses_left, rec.uses_left_by_kind = rec.uses_before, dict(rec.uses_before_by_kind)
        rec.todos = len(marker_lines(texts[1]))
    rec.category = _category(rec, isinstance(scan_in, ModuleScan))
    if rec.category == "crashed":  # counted as a crash, not as code the tool left unmarked
        rec.silent, rec.unmarked_uses, rec.unmarked = False, 0, []
    return rec


def _fill_output(rec: FileRecord, scan_in, scan_out: ModuleScan, text: str) -> None:
    rec.uses_left = len(scan_out.uses)
    rec.uses_left_by_kind = dict(Counter(u.kind for u in scan_out.uses))
    before = scan_in.definitions if isinstance(scan_in, ModuleScan) else []
    rec.definitions_left = _definitions_left(before, scan_out.definitions)
    rec.definitions_migrated = len(before) - len(rec.definitions_left)
    found = todos(text, scan_out)
    rec.todos = len(found)
    far = [t for t in found if t.distance is None or t.distance > 2]
    rec.todos_far = len([t for t in far if t.distance is not None])
    rec.todos_unanchored = len(far) - rec.todos_far
    rec.far_todos = [f"line {t.line} ({_away(t)}): {shorten(t.text, 90)}" for t in far]
    loose = unmarked(scan_out.uses, marker_lines(text), scan_out.graph_blocks)
    rec.unmarked_uses = len(loose)
    rec.unmarked = [f"{u.line}: {u.text}" for u in loose]
    rec.silent = rec.uses_left > 0 and rec.todos == 0


def comment_losses(before: str, after: str) -> tuple[list[str], list[str]]:
    """The comments of ``before`` that ``after`` lost: (lost, dropped with their statement)."""
    from dali_migrate.comments import comments_of, lost_comments

    code = {" ".join(line.split()) for line in split_lines(after)}
    lines = split_lines(before)
    deleted = Counter(
        c.text
        for c in comments_of(before)
        if c.trailing and " ".join(lines[c.line].split("#", 1)[0].split()) not in code
    )
    lost, dropped = [], []
    for text in lost_comments(before, after):
        if deleted[text] > 0:
            deleted[text] -= 1
            dropped.append(text)
        else:
            lost.append(text)
    return lost, dropped


def _away(todo: Todo) -> str:
    return "names no code" if todo.distance is None else f"{todo.distance} lines away"


def _category(rec: FileRecord, input_parsed: bool) -> str:
    if rec.status in ("crash", "timeout"):
        return "crashed"
    if rec.status == "error" or not input_parsed:
        return "input not migrated"
    if not rec.output_parses:
        return "output does not parse"
    if rec.uses_before == 0 and rec.definitions == 0 and rec.todos == 0:
        return "no pipeline code"
    if rec.uses_left == 0 and rec.todos == 0:
        return "migrated"
    progress = rec.uses_left < rec.uses_before or rec.definitions_migrated > 0
    return "migrated with follow-ups" if progress else "not migrated"


def _pct(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 1) if whole else 0.0


def group_reasons(records: Sequence[FileRecord]) -> list[dict]:
    """Reasons normalised and counted (occurrences and files), most frequent first."""
    count: Counter = Counter()
    files: dict[str, set[str]] = {}
    rules: dict[str, set[str]] = {}
    example: dict[str, str] = {}
    for rec in records:
        for item in rec.reasons:
            rule, _, reason = item.partition(": ")
            key = normalize_reason(reason)
            count[key] += 1
            files.setdefault(key, set()).add(rec.file)
            rules.setdefault(key, set()).add(rule)
            example.setdefault(key, reason)
    return [
        {
            "reason": key,
            "count": n,
            "files": len(files[key]),
            "rules": sorted(rules[key]),
            "example": shorten(example[key], 200),
        }
        for key, n in sorted(count.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


def totals(records: Sequence[FileRecord]) -> dict:
    code = [r for r in records if r.category != "no pipeline code"]
    kinds_before: Counter = Counter()
    kinds_left: Counter = Counter()
    for r in records:
        kinds_before.update(r.uses_before_by_kind)
        kinds_left.update(r.uses_left_by_kind)
    defs = sum(r.definitions for r in records)
    defs_migrated = sum(r.definitions_migrated for r in records)
    before = sum(r.uses_before for r in records)
    left = sum(r.uses_left for r in records)
    todo_count = sum(r.todos for r in records)
    far = sum(r.todos_far + r.todos_unanchored for r in records)
    clean = [r for r in code if r.category == "migrated"]
    out = {
        "files": len(records),
        "files_with_pipeline_code": len(code),
        "categories": {c: sum(1 for r in records if r.category == c) for c in CATEGORIES},
        "definitions": defs,
        "definitions_migrated": defs_migrated,
        "definitions_migrated_pct": _pct(defs_migrated, defs),
        "uses_before": before,
        "uses_left": left,
        "uses_migrated": before - left,
        "uses_migrated_pct": _pct(before - left, before),
        "uses_before_by_kind": dict(sorted(kinds_before.items())),
        "uses_left_by_kind": dict(sorted(kinds_left.items())),
        "todos": todo_count,
        "todos_far": sum(r.todos_far for r in records),
        "todos_unanchored": sum(r.todos_unanchored for r in records),
        "files_with_todos": sum(1 for r in records if r.todos),
        "crashes": sum(1 for r in records if r.status in ("crash", "timeout")),
        "timeouts": sum(1 for r in records if r.status == "timeout"),
        "outputs_not_parsing": sum(1 for r in records if not r.output_parses),
        "outputs_not_idempotent": sum(1 for r in records if not r.idempotent),
        "silent_files": sorted(r.file for r in records if r.silent),
        "unmarked_files": sorted(r.file for r in records if r.unmarked_uses),
        "unmarked_uses": sum(r.unmarked_uses for r in records),
        "comments_lost": sum(len(r.comments_lost) for r in records),
        "comments_lost_files": sorted(r.file for r in records if r.comments_lost),
        "comments_dropped_with_statement": sum(len(r.comments_dropped) for r in records),
        "clean_files": len(clean),
        "clean_files_pct": _pct(len(clean), len(code)),
    }
    out["criteria"] = _criteria(out, far)
    return out


def _criteria(t: dict, far: int) -> dict:
    """The targets of the issue this check was written for, met or not."""
    checked = (
        t["files"] - t["categories"]["no pipeline code"] - t["categories"]["input not migrated"]
    )
    return {
        "definitions migrated >= 80 %": [
            t["definitions_migrated_pct"],
            t["definitions_migrated_pct"] >= 80,
        ],
        "files clean (no pipeline API, no TODO) >= 50 %": [
            t["clean_files_pct"],
            t["clean_files_pct"] >= 50,
        ],
        "TODOs more than two lines from what they name = 0": [far, far == 0],
        "crashes = 0": [t["crashes"], t["crashes"] == 0],
        "comments of the input lost = 0": [
            t.get("comments_lost", 0),
            t.get("comments_lost", 0) == 0,
        ],
        "files with pipeline code left and no TODO = 0": [
            len(t["silent_files"]),
            not t["silent_files"],
        ],
        "outputs that parse = 100 %": [
            _pct(checked - t["outputs_not_parsing"], checked),
            t["outputs_not_parsing"] == 0,
        ],
        "outputs a second run leaves unchanged = 100 %": [
            _pct(checked - t["outputs_not_idempotent"], checked),
            t["outputs_not_idempotent"] == 0,
        ],
    }


# ------------------------------------------------------------------------------------------------
# The check, its report and the comparison of two runs
# ------------------------------------------------------------------------------------------------


def check(
    path: str | os.PathLike[str], jobs: int = 0, timeout: float = 60.0, keep: str | None = None
) -> dict:
    """Migrate a copy of ``path`` twice and measure it; ``path`` is never written. ``keep``: a
    folder to leave the migrated copy in (it must not exist)."""
    src = Path(path)
    if not src.exists():
        raise FileNotFoundError(f"{src}: no such file or folder")
    jobs = jobs or os.cpu_count() or 1
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="corpus-check-") as tmp:
        root = Path(tmp) / (src.resolve().name if src.is_dir() else "tree")
        root.mkdir()
        rels = copy_tree(src, root)
        inputs = {rel: read_text(root / rel) for rel in rels}
        first = migrate_tree(root, jobs, timeout)
        outputs = {rel: read_text(root / rel) for rel in rels}
        second = migrate_tree(root, jobs, timeout)
        if keep:
            shutil.copytree(root, keep)  # after the second run: the same text, or that is counted
    scans_in = scan_tree(inputs)
    scans_out = scan_tree(outputs, scans_in)
    skipped = {"status": "skipped", "diagnostics": []}
    records = [
        build_record(
            rel,
            (scans_in[rel], scans_out[rel]),
            (inputs[rel], outputs[rel]),
            (first.get(rel, skipped), second.get(rel, skipped)),
        )
        for rel in rels
    ]
    return {
        "meta": _meta(src, jobs, timeout, time.perf_counter() - start),
        "totals": totals(records),
        "reasons": group_reasons(records),
        "files": {r.file: asdict(r) for r in records},
    }


def _meta(src: Path, jobs: int, timeout: float, seconds: float) -> dict:
    import platform
    import subprocess

    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).parent,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    from dali_migrate import __version__

    return {
        "path": str(src),
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "commit": commit,
        "dali_migrate": __version__,
        "python": platform.python_version(),
        "jobs": jobs,
        "timeout_s": timeout,
        "seconds": round(seconds, 1),
    }


def format_report(report: dict, quiet: bool = False) -> str:
    out = [
        f"corpus check of {report['meta']['path']} (commit {report['meta']['commit'] or '?'}, "
        f"{report['meta']['seconds']} s)",
        "",
    ]
    if not quiet:
        out += _format_files(report["files"].values())
    out += _format_totals(report["totals"], report["reasons"])
    return "\n".join(out) + "\n"


def _format_files(records: Iterable[dict]) -> list[str]:
    out = []
    for r in records:
        rec = FileRecord(**r)
        if rec.category == "no pipeline code":
            continue
        head = (
            f"{rec.file}: {rec.label()}  uses {rec.uses_before} -> {rec.uses_left}, "
            f"definitions {rec.definitions_migrated}/{rec.definitions}"
        )
        flags = rec.flags()
        out.append(head + (f"  [{', '.join(flags)}]" if flags else ""))
        if rec.error:
            out.append(f"    error: {shorten(rec.error)}")
        out += [f"    comment lost: {shorten(c, 100)}" for c in rec.comments_lost]
        if rec.category in ("not migrated", "migrated with follow-ups"):
            reasons = list(dict.fromkeys(rec.reasons))
            out += [f"    - {shorten(reason)}" for reason in reasons[:6]]
            if len(reasons) > 6:
                out.append(f"    - ... {len(reasons) - 6} more")
    return out + [""] if out else out


def _format_totals(t: dict, reasons: list[dict]) -> list[str]:
    cats = ", ".join(f"{n} {c}" for c, n in t["categories"].items() if n)
    out = [
        f"files: {t['files']} ({t['files_with_pipeline_code']} with pipeline code): {cats}",
        f"pipeline definitions: {t['definitions_migrated']} of {t['definitions']} migrated "
        f"({t['definitions_migrated_pct']} %)",
        f"pipeline-mode uses: {t['uses_before']} before, {t['uses_left']} left, "
        f"{t['uses_migrated']} migrated ({t['uses_migrated_pct']} %)",
        "  by kind (before -> left): "
        + ", ".join(
            f"{k} {n} -> {t['uses_left_by_kind'].get(k, 0)}"
            for k, n in t["uses_before_by_kind"].items()
        ),
        f"TODOs: {t['todos']} in {t['files_with_todos']} files; {t['todos_far']} more than two "
        f"lines from the code they name, {t['todos_unanchored']} naming no code",
        f"crashes: {t['crashes']} (timeouts {t['timeouts']}); outputs that do not parse: "
        f"{t['outputs_not_parsing']}; changed by a second run: {t['outputs_not_idempotent']}",
        f"clean files (no pipeline-mode API, no TODO): {t['clean_files']} "
        f"({t['clean_files_pct']} % of files with pipeline code)",
        f"silent files (pipeline-mode API left, no TODO): {len(t['silent_files'])}",
    ]
    out += [f"  {name}" for name in t["silent_files"]]
    out.append(
        f"files with uses no TODO marks: {len(t['unmarked_files'])} ({t['unmarked_uses']} uses)"
    )
    out.append(
        f"comments lost: {t.get('comments_lost', 0)} in {len(t.get('comments_lost_files', []))} "
        f"files; {t.get('comments_dropped_with_statement', 0)} trailing comments dropped with "
        "the statement they ended"
    )
    out += ["", "reasons (occurrences, files):"]
    out += [f"  {r['count']:4d} {r['files']:3d}  {shorten(r['reason'], 150)}" for r in reasons]
    out += ["", "targets:"]
    out += [
        f"  [{'x' if ok else ' '}] {name}: {value}" for name, (value, ok) in t["criteria"].items()
    ]
    return out


def _numbers(d: dict, prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            out[name] = value
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            out[name] = len(value)
        elif isinstance(value, dict) and key != "criteria":
            out.update(_numbers(value, name + "."))
    return out


def _state(rec: FileRecord) -> str:
    flags = rec.flags()
    return rec.label() + (f" [{', '.join(flags)}]" if flags else "")


def compare(old: dict, new: dict) -> str:
    """The deltas of every total, and the files whose category or flags changed."""
    lines = [
        f"compared with {old['meta'].get('commit') or '?'} ({old['meta'].get('date', '?')})",
        "",
    ]
    a, b = _numbers(old["totals"]), _numbers(new["totals"])
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key, 0), b.get(key, 0)
        mark = "" if x == y else f"  ({'+' if y > x else ''}{round(y - x, 1)})"
        lines.append(f"  {key}: {x} -> {y}{mark}")
    lines += ["", "files that changed:"]
    changed = 0
    for name in sorted(set(old["files"]) | set(new["files"])):
        o, n = old["files"].get(name), new["files"].get(name)
        if o is None or n is None:
            lines.append(
                f"  {name}: {'only in the new run' if o is None else 'only in the old run'}"
            )
            changed += 1
            continue
        ro, rn = FileRecord(**o), FileRecord(**n)
        if (ro.label(), ro.flags()) != (rn.label(), rn.flags()):
            changed += 1
            lines.append(
                f"  {name}: {_state(ro)} -> {_state(rn)}  (uses left {ro.uses_left} -> "
                f"{rn.uses_left})"
            )
    if not changed:
        lines.append("  none")
    for title, key in (
        ("silent files", "silent_files"),
        ("files with unmarked uses", "unmarked_files"),
    ):
        gone = sorted(set(old["totals"][key]) - set(new["totals"][key]))
        came = sorted(set(new["totals"][key]) - set(old["totals"][key]))
        if gone or came:
            lines.append(f"{title}: {len(gone)} fewer {gone or ''}, {len(came)} new {came or ''}")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", help="folder (or file) of Python code; never written")
    ap.add_argument("--json", metavar="FILE", help="write the whole result as JSON")
    ap.add_argument(
        "--compare", metavar="OLD.json", help="print the deltas against an earlier --json"
    )
    ap.add_argument(
        "--jobs", "-j", type=int, default=0, help="worker processes (default: one per core)"
    )
    ap.add_argument(
        "--timeout", type=float, default=60.0, help="seconds per file and run (default 60)"
    )
    ap.add_argument("--out", metavar="DIR", help="keep the migrated copy in DIR (must not exist)")
    ap.add_argument("--quiet", "-q", action="store_true", help="totals only")
    args = ap.parse_args(argv)
    old = None
    if args.compare:
        with open(args.compare, encoding="utf-8") as fh:
            old = json.load(fh)
    report = check(args.path, jobs=args.jobs, timeout=args.timeout, keep=args.out)
    sys.stdout.write(format_report(report, quiet=args.quiet))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=1, sort_keys=False)
            fh.write("\n")
    if old is not None:
        sys.stdout.write("\n" + compare(old, report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
