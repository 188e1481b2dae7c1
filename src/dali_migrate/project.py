"""Cross-module migration: pipelines defined in one module and built and run in another.

Before the files are migrated, a discovery pass over all the given paths (as bump-pydantic
does) finds the ``@pipeline_def`` functions defined at module level and the modules that import
them (``from .pipelines import train_pipe``). Each file then learns, through its
:class:`ModuleInfo`, what the others do with its pipelines and which imported pipelines are
migrated:

* the module that defines ``train_pipe`` migrates it only when every use in every other module
  can be followed (otherwise its TODO names the other module's reasons);
* a module that imports ``train_pipe`` rewrites ``pipe.build()`` / ``pipe.run()`` (rule DM204)
  only when the definition migrates.

Discovery reads files with the CPython parser (``ast``): it is cheap, and files that never
mention a pipeline name are not parsed at all.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from .sourcefile import SourceError, read_bytes

PIPELINE_DEF_NAMES = {"pipeline_def"}

#: the words of the reason an importing module gives where it derives a class from an imported
#: ``Pipeline`` subclass: that class stays a class (a function cannot be a base)
SUBCLASSED = "is a base class of"
_DEFINING_NAMES = (*PIPELINE_DEF_NAMES, "Pipeline")


@dataclass(frozen=True)
class ForeignPipeline:
    """A ``@pipeline_def`` function another module defines, as seen by a module importing it."""

    module: str
    name: str
    defined_in: str  # the path of the defining file
    params: tuple[str, ...]
    num_threads: str | None  # the decorator's num_threads, as source text, when it is a literal
    batch_size_given: bool  # the decorator gives batch_size (or max_batch_size)
    seed_given: bool  # the decorator gives seed
    migrated: bool = True
    #: "def" (a ``@pipeline_def`` function) or "class" (a ``Pipeline`` subclass: ``params`` are
    #: its ``__init__``'s less ``self``, ``num_threads`` what its ``super().__init__`` gets, a
    #: parameter's name or a literal, when the tool reads it; the device is the migrated
    #: function's parameter, as the class's migration handles it)
    kind: str = "def"
    #: the class's ``__init__`` parameters as written (less ``self``), for the call sites
    signature: str = ""


@dataclass
class ModuleInfo:
    """What one module needs to know about the others (and what its analysis reports back)."""

    #: pipelines defined here -> reasons their uses in other modules cannot be followed
    #: (an empty tuple: used elsewhere, every use can be followed)
    external_uses: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: local name -> pipeline imported from another module of the project
    foreign: dict[str, ForeignPipeline] = field(default_factory=dict)
    #: filled in by the analysis: reasons a foreign pipeline's uses here cannot be followed
    use_reasons: dict[str, list[str]] = field(default_factory=dict)
    #: filled in by the analysis: pipelines of this module that migrate
    migrated: set[str] = field(default_factory=set)
    #: filled in by the analysis: the imported pipeline (local name) this module makes first,
    #: once, with every use followed, when it defines none of its own (its loop may capture)
    first_made: str | None = None
    #: pipelines defined here whose loop runs in capture mode (the plan's choice, see settle)
    capture: set[str] = field(default_factory=set)
    #: the dotted names of every module of the run (:func:`module_names` of each file), and
    #: this module's: code imported from one of them is migrated in the same run
    given: frozenset[str] = frozenset()
    names: tuple[str, ...] = ()


@dataclass
class _Definition:
    path: str
    module_names: tuple[str, ...]
    pipeline: ForeignPipeline


def module_names(path: Path, roots: Iterable[Path]) -> tuple[str, ...]:
    """Every dotted name ``path`` may be imported as: ``pkg.sub.mod``, ``sub.mod``, ``mod``
    (relative to the given roots; ``__init__.py`` names its package)."""
    best: tuple[str, ...] = ()
    for root in roots:
        base = root if root.is_dir() else root.parent
        try:
            rel = path.resolve().relative_to(base.resolve())
        except ValueError:
            continue
        parts = list(rel.with_suffix("").parts)
        if parts and parts[-1] == "__init__":
            parts = parts[:-1]
        if base.name and base.name.isidentifier():
            parts = [base.name, *parts]
        names = tuple(".".join(parts[i:]) for i in range(len(parts)) if parts[i:])
        if len(names) > len(best):
            best = names
    return best or (path.stem,)


def _definitions(
    path: str, tree: ast.Module, names: tuple[str, ...], source: str
) -> list[_Definition]:
    out = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            dec_name = (
                target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
            )
            if dec_name not in PIPELINE_DEF_NAMES:
                continue
            kwargs = {k.arg: k.value for k in dec.keywords} if isinstance(dec, ast.Call) else {}
            threads = kwargs.get("num_threads")
            a = node.args
            params = tuple(p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs])
            pipeline = ForeignPipeline(
                module=names[0],
                name=node.name,
                defined_in=path,
                params=params,
                num_threads=_segment(source, threads)
                if isinstance(threads, ast.Constant)
                else None,
                batch_size_given="batch_size" in kwargs or "max_batch_size" in kwargs,
                seed_given="seed" in kwargs,
            )
            out.append(_Definition(path, names, pipeline))
    return out


#: the positional parameters of ``Pipeline.__init__`` that a subclass's call sites follow
_PIPELINE_POSITIONAL = ("batch_size", "num_threads", "device_id")


def _pipeline_classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    """The module-level classes deriving from ``Pipeline`` (through classes of the module too)
    whose hierarchy has ``define_graph``."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    found: dict[str, ast.ClassDef] = {}
    changed = True
    while changed:
        changed = False
        for name, cls in classes.items():
            if name in found:
                continue
            for base in cls.bases:
                bname = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
                if bname == "Pipeline" or bname in found:
                    found[name] = cls
                    changed = True
                    break
    return {n: c for n, c in found.items() if _method(c, classes, "define_graph") is not None}


def _method(
    cls: ast.ClassDef, classes: dict[str, ast.ClassDef], name: str
) -> tuple[ast.ClassDef, ast.FunctionDef] | None:
    """The class of ``cls``'s hierarchy (in the module) that defines method ``name``, and it."""
    seen: set[str] = set()
    todo = [cls]
    while todo:
        c = todo.pop(0)
        if c.name in seen:
            continue
        seen.add(c.name)
        for node in c.body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return c, node
        todo += [classes[b.id] for b in c.bases if isinstance(b, ast.Name) and b.id in classes]
    return None


def _pipeline_call_args(owner: ast.ClassDef, init: ast.FunctionDef) -> dict[str, ast.expr]:
    """What ``init`` (of ``owner``, a direct subclass of ``Pipeline``) hands the Pipeline
    constructor (``super().__init__(...)``, ``Pipeline.__init__(self, ...)``), by name."""
    if not any(
        (b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "")) == "Pipeline"
        for b in owner.bases
    ):
        return {}
    for node in ast.walk(init):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "__init__"
        ):
            continue
        target = node.func.value
        args = list(node.args)
        if isinstance(target, ast.Call) and getattr(target.func, "id", None) == "super":
            pass
        elif (target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")) == (
            "Pipeline"
        ):
            args = args[1:]  # self
        else:
            continue
        out = dict(zip(_PIPELINE_POSITIONAL, args))
        out.update((k.arg, k.value) for k in node.keywords if k.arg)
        return out
    return {}


def _class_definitions(
    path: str, tree: ast.Module, names: tuple[str, ...], source: str
) -> list[_Definition]:
    """The ``Pipeline`` subclasses of the module, as their call sites in other modules see them."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    out = []
    for name, cls in _pipeline_classes(tree).items():
        found = _method(cls, classes, "__init__")
        params: tuple[str, ...] = ()
        signature = ""
        given: dict[str, ast.expr] = {}
        if found is not None:
            owner, init = found
            a = init.args
            every = [*a.posonlyargs, *a.args]
            params = tuple(p.arg for p in [*every[1:], *a.kwonlyargs])
            signature = _signature(init)
            given = _pipeline_call_args(owner, init)

        pipeline = ForeignPipeline(
            module=names[0],
            name=name,
            defined_in=path,
            params=params,
            num_threads=_given_text(given, params, source, "num_threads"),
            batch_size_given=True,
            seed_given=True,
            kind="class",
            signature=signature,
        )
        out.append(_Definition(path, names, pipeline))
    return out


def _given_text(
    given: dict[str, ast.expr], params: tuple[str, ...], source: str, key: str
) -> str | None:
    """What the Pipeline constructor gets as ``key``: a parameter's name or a literal."""
    node = given.get(key)
    if isinstance(node, ast.Name) and node.id in params:
        return node.id
    return _segment(source, node) if isinstance(node, ast.Constant) else None


def _signature(init: ast.FunctionDef) -> str:
    """``init``'s parameters as source, less the first (``self``)."""
    a = init.args
    every = [*a.posonlyargs, *a.args]
    copy = ast.arguments(
        posonlyargs=a.posonlyargs[1:],
        args=a.args[1:] if not a.posonlyargs else a.args,
        vararg=a.vararg,
        kwonlyargs=a.kwonlyargs,
        kw_defaults=a.kw_defaults,
        kwarg=a.kwarg,
        defaults=a.defaults[max(0, len(a.defaults) - (len(every) - 1)) :],
    )
    return ast.unparse(copy)


def _segment(source: str, node: ast.expr) -> str | None:
    """The source text of a one-line expression (``ast.get_source_segment`` splits the whole
    source on each call)."""
    if node.lineno != node.end_lineno:
        return ast.get_source_segment(source, node)
    start = 0
    for _ in range(node.lineno - 1):
        match = _LINE_END.search(source, start)
        assert match is not None  # the node's line is a line of source
        start = match.end()
    end = _LINE_END.search(source, start)
    line = source[start : end.start() if end else len(source)]
    return line.encode()[node.col_offset : node.end_col_offset].decode()


_LINE_END = re.compile(r"\r\n|\r|\n")


def _statements(body: list) -> Iterable[ast.stmt]:
    """Every statement under ``body``, nested blocks included (expressions are not entered:
    imports are statements)."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        for field_name in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(node, field_name, None)
            if isinstance(block, list):
                stack.extend(reversed(block))


def _imports(
    tree: ast.Module, own_names: tuple[str, ...], is_package: bool
) -> list[tuple[str, str, str]]:
    """(module, name, local alias) for each ``from module import name`` (relative ones resolved)."""
    out = []
    package = own_names[0].split(".") if is_package else own_names[0].split(".")[:-1]
    for node in _statements(tree.body):
        if not isinstance(node, ast.ImportFrom):
            continue
        module = node.module or ""
        if node.level:
            base = (
                package[: len(package) - (node.level - 1)] if node.level - 1 <= len(package) else []
            )
            module = ".".join([*base, module] if module else base)
        for alias in node.names:
            out.append((module, alias.name, alias.asname or alias.name))
    return out


def discover(
    files: list[Path],
    roots: list[Path],
    read: Callable[[Path], str | None],
    dali_files: set[str],
) -> dict[str, ModuleInfo]:
    """Links between the files: ``path -> ModuleInfo`` for the files that define a pipeline used
    elsewhere or import one. ``dali_files`` are the paths that mention DALI (only they can define
    pipelines); ``read`` returns a file's text, or None when it cannot be read or parsed."""
    trees: dict[str, tuple[ast.Module, str] | None] = {}

    def parse(p: Path, text: str | None = None) -> tuple[ast.Module, str] | None:
        key = str(p)
        if key not in trees:
            text = read(p) if text is None else text
            try:
                trees[key] = (ast.parse(text), text) if text is not None else None
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                trees[key] = None
        return trees[key]

    definitions: list[_Definition] = []
    known_names: dict[str, tuple[str, ...]] = {}

    def names_of(p: Path) -> tuple[str, ...]:  # computed for the files parsed only
        if str(p) not in known_names:
            known_names[str(p)] = module_names(p, roots)
        return known_names[str(p)]

    for p in files:
        if str(p) in dali_files:
            text = read(p)
            if text is None or not any(name in text for name in _DEFINING_NAMES):
                continue  # defines no pipeline: not parsed
            parsed = parse(p, text)
            if parsed is not None:
                definitions += _definitions(str(p), parsed[0], names_of(p), parsed[1])
                definitions += _class_definitions(str(p), parsed[0], names_of(p), parsed[1])
    if not definitions:
        return {}
    by_module: dict[tuple[str, str], _Definition | None] = {}
    for d in definitions:
        for m in d.module_names:
            key = (m, d.pipeline.name)
            by_module[key] = (
                None if key in by_module and by_module[key] is not d else d
            )  # ambiguous -> None
    wanted = {d.pipeline.name.encode() for d in definitions}
    infos: dict[str, ModuleInfo] = {}
    for p in files:
        try:
            raw = read_bytes(p)  # never blocks on a FIFO
        except SourceError:
            continue
        if not any(w in raw for w in wanted):  # (faster than one regex of them all)
            continue
        parsed = parse(p)
        if parsed is None:
            continue
        for module, name, alias in _imports(parsed[0], names_of(p), p.name == "__init__.py"):
            found = by_module.get((module, name))
            if found is None or found.path == str(p):
                continue
            seen = found.pipeline  # a class's TODOs name its module as this one imports it
            seen = replace(seen, module=module) if seen.kind == "class" else seen
            infos.setdefault(str(p), ModuleInfo()).foreign[alias] = seen
            infos.setdefault(found.path, ModuleInfo()).external_uses.setdefault(name, ())
    return infos


def settle(
    infos: dict[str, ModuleInfo],
    analyse: Callable[[list[tuple[str, ModuleInfo]]], None],
) -> dict[str, ModuleInfo]:
    """Decide what migrates across modules. ``analyse([(path, info), ...])`` migrates the files
    in memory, each with its ``info`` (filling ``use_reasons`` / ``migrated``), in any order.
    First every importing module reports what it cannot follow (assuming the definitions
    migrate); then each defining module learns those reasons and reports what migrates; then
    importing modules learn which of their imports are migrated.

    Capture mode across modules (DALI 2.4 lets one capture loop be active at a time): the
    pipeline an importing module makes first runs captured when that module makes no pipeline
    of its own and no other module imports it."""
    reasons: dict[tuple[str, str], list[str]] = {}
    importers = [(path, info) for path, info in infos.items() if info.foreign]
    analyse(importers)
    for path, info in importers:
        for alias, fp in info.foreign.items():
            found = [f"in {Path(path).name}: {r}" for r in info.use_reasons.get(alias, [])]
            reasons.setdefault((fp.defined_in, fp.name), []).extend(found)
    migrated: set[tuple[str, str]] = set()
    definers = [(path, info) for path, info in infos.items() if info.external_uses]
    for path, info in definers:
        info.external_uses = {
            name: tuple(reasons.get((path, name), ())) for name in info.external_uses
        }
    for fp in _captured(importers):
        infos[fp.defined_in].capture.add(fp.name)
    analyse(definers)
    for path, info in definers:
        migrated |= {(path, name) for name in info.migrated}
    for info in infos.values():
        info.foreign = {
            a: replace(fp, migrated=(fp.defined_in, fp.name) in migrated)
            for a, fp in info.foreign.items()
        }
        info.use_reasons.clear()
        info.migrated.clear()
        info.first_made = None
    return infos


def _captured(importers: list[tuple[str, ModuleInfo]]) -> list[ForeignPipeline]:
    """The imported pipelines whose loops may run in capture mode: each importing module's
    ``first_made``, when no other module imports the same pipeline."""
    importing: dict[tuple[str, str], int] = {}
    for _, info in importers:
        for key in {(fp.defined_in, fp.name) for fp in info.foreign.values()}:
            importing[key] = importing.get(key, 0) + 1
    chosen = [
        info.foreign[info.first_made] for _, info in importers if info.first_made in info.foreign
    ]
    return [fp for fp in chosen if importing[(fp.defined_in, fp.name)] == 1]


def plan(
    files: list[Path],
    roots: list[Path],
    dali_files: set[str],
    migrate: Callable[[list[tuple[str, str, ModuleInfo]]], object],
) -> dict[str, ModuleInfo]:
    """Discover the links between ``files`` and settle what migrates across modules; every
    file of ``dali_files`` gets a :class:`ModuleInfo` (most only learn the modules of the run).
    ``migrate([(text, path, info), ...])`` runs the migrations in memory; the analysis reports
    through each ``info``, and a migration that fails must leave its ``info.migrated`` empty.
    Files that cannot be read or parsed take no part."""
    from .sourcefile import read_source

    def read(p: Path) -> str | None:
        try:
            return read_source(p).text
        except SourceError:
            return None

    infos = discover(files, roots, read, dali_files)
    names = {str(p): module_names(p, roots) for p in files}
    given = frozenset(n for forms in names.values() for n in forms)
    for path, info in infos.items():
        info.given, info.names = given, names.get(path, ())

    def analyse(items: list[tuple[str, ModuleInfo]]) -> None:
        texts = [(read(Path(path)), path, info) for path, info in items]
        migrate([(text, path, info) for text, path, info in texts if text is not None])

    links = settle(infos, analyse)
    for p in files:  # every module that may be migrated learns which modules the run holds
        if str(p) in dali_files and str(p) not in links:
            links[str(p)] = ModuleInfo(given=given, names=names[str(p)])
    return links


def linked(info: ModuleInfo | None) -> bool:
    """``info`` links its module to others: it defines a pipeline they use or uses theirs."""
    return info is not None and bool(info.foreign or info.external_uses)
