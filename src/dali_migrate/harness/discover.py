"""Static look at OLD (no code runs): which pipelines it defines, their parameters, the readers
they use and which parameter each reader's path comes from, and the arguments the program
itself passes where it builds them. The harness uses this to build the same inputs for both
sides.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CallSite", "PipelineInfo", "ReaderUse", "discover"]

#: reader call name (last attribute, lower case, without ``readers.``) -> reader kind
_READER_NAMES = {
    "file": "file",
    "file_reader": "file",
    "filereader": "file",
    "numpy": "numpy",
    "numpy_reader": "numpy",
    "numpyreader": "numpy",
    "tfrecord": "tfrecord",
    "tfrecord_reader": "tfrecord",
    "tfrecordreader": "tfrecord",
    "coco": "coco",
    "coco_reader": "coco",
    "cocoreader": "coco",
    "caffe": "caffe",
    "caffe2": "caffe2",
    "mxnet": "mxnet",
    "nemo_asr": "nemo_asr",
    "video": "video",
    "video_resize": "video",
    "webdataset": "webdataset",
    "sequence": "sequence",
}
#: reader arguments that name data on disk
PATH_ARGUMENTS = (
    "file_root",
    "files",
    "file_list",
    "path",
    "index_path",
    "annotations_file",
    "manifest_filepaths",
    "filenames",
)


@dataclass
class ReaderUse:
    kind: str  # file, numpy, tfrecord, coco, ... (see _READER_NAMES)
    call: str  # as written, e.g. "fn.readers.file"
    line: int
    #: reader argument -> the pipeline parameter it comes from (when it is one, directly)
    bound: dict[str, str] = field(default_factory=dict)
    #: reader arguments given as literals (user data, not redirected)
    literal: dict[str, Any] = field(default_factory=dict)
    random_shuffle: bool = False


@dataclass
class CallSite:
    line: int
    #: parameter name -> literal value; parameters whose value is not a literal are in ``opaque``
    values: dict[str, Any] = field(default_factory=dict)
    opaque: list[str] = field(default_factory=list)
    #: opaque parameter -> its expression as written (``args.batch_size``)
    expressions: dict[str, str] = field(default_factory=dict)


@dataclass
class PipelineInfo:
    name: str
    kind: str  # "pipeline_def" | "pipeline_class" | "factory" | "base_class" | "method"
    line: int
    params: list[str]
    defaults: dict[str, Any]
    required: list[str]
    decorator_kwargs: dict[str, Any]
    readers: list[ReaderUse]
    uses_audio: bool = False
    random_ops: int = 0
    conditionals: bool = False
    call_site: CallSite | None = None
    derived: list[str] = field(default_factory=list)
    #: the keyword arguments the ``@pipeline_def(...)`` decorator gives, literal or not
    decorator_names: set[str] = field(default_factory=set)
    #: external sources fed by pipe.feed_input() (no source=): the harness cannot feed them
    fed: list[str] = field(default_factory=list)
    #: the framework iterator OLD wraps this pipeline in (DALIGenericIterator, ...), if any:
    #: {"module", "class", "args", "kwargs", "as_list"}; policies as ("LastBatchPolicy", NAME)
    iterator: dict | None = None

    @property
    def data_params(self) -> dict[str, ReaderUse]:
        """Parameters that feed a reader's path -> that reader."""
        out: dict[str, ReaderUse] = {}
        for r in self.readers:
            for param in r.bound.values():
                out.setdefault(param, r)
        return out


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _literal(node: ast.AST) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _is_pipeline_def(dec: ast.AST) -> tuple[bool, dict]:
    target = dec.func if isinstance(dec, ast.Call) else dec
    if _dotted(target).split(".")[-1] != "pipeline_def":
        return False, {}
    kwargs = {}
    if isinstance(dec, ast.Call):
        for kw in dec.keywords:
            ok, value = _literal(kw.value)
            if kw.arg and ok:
                kwargs[kw.arg] = value
    return True, kwargs


def _reader_kind(call: ast.Call) -> str | None:
    name = _dotted(call.func)
    if not name:
        return None
    parts = name.split(".")
    last = parts[-1].lower()
    if len(parts) >= 2 and parts[-2] == "readers":
        return _READER_NAMES.get(last, last)
    if last.endswith("_reader") or (last.endswith("reader") and parts[0] in ("ops", "dali")):
        return _READER_NAMES.get(last, last.removesuffix("_reader"))
    return None


class _Body(ast.NodeVisitor):
    def __init__(self, params: set[str]) -> None:
        self.params = params
        self.readers: list[ReaderUse] = []
        self.audio = False
        self.random_ops = 0
        #: external sources with no source, fed by pipe.feed_input() (their name= or "?")
        self.fed: list[str] = []

    def visit_Call(self, node: ast.Call) -> None:
        kind = _reader_kind(node)
        name = _dotted(node.func)
        if name.split(".")[-1] in ("external_source", "ExternalSource") and not node.args:
            given = {kw.arg: kw.value for kw in node.keywords}
            if "source" not in given:
                fed = given.get("name")
                value = fed.value if isinstance(fed, ast.Constant) else None
                self.fed.append(value if isinstance(value, str) else "?")
        if kind:
            use = ReaderUse(kind, name, node.lineno)
            for kw in node.keywords:
                if kw.arg in PATH_ARGUMENTS:
                    if isinstance(kw.value, ast.Name) and kw.value.id in self.params:
                        use.bound[kw.arg] = kw.value.id
                    else:
                        ok, value = _literal(kw.value)
                        if ok:
                            use.literal[kw.arg] = value
                        else:  # an expression over a parameter: os.path.join(data_dir, "train")
                            names = {n.id for n in ast.walk(kw.value) if isinstance(n, ast.Name)}
                            for p in sorted(names & self.params):
                                use.bound.setdefault(kw.arg, p)
                if kw.arg == "random_shuffle":
                    use.random_shuffle = not (
                        isinstance(kw.value, ast.Constant) and not kw.value.value
                    )
            self.readers.append(use)
        if "audio" in name.split(".")[-1].lower() or name.endswith("decoders.audio"):
            self.audio = True
        last = name.split(".")[-1]
        if (
            ".random." in f".{name}."
            or last in ("coin_flip", "uniform", "normal_distribution")
            or "random" in last.lower()
        ):
            self.random_ops += 1
        self.generic_visit(node)


def _params(
    fn: ast.FunctionDef | ast.AsyncFunctionDef, skip_self: bool = False
) -> tuple[list[str], dict[str, Any], list[str]]:
    args = fn.args
    positional = args.posonlyargs + args.args
    if skip_self and positional:
        positional = positional[1:]
    names = [a.arg for a in positional] + [a.arg for a in args.kwonlyargs]
    defaults: dict[str, Any] = {}
    for a, d in zip(positional[len(positional) - len(args.defaults) :], args.defaults):
        defaults[a.arg] = _literal(d)[1]
    for a, kd in zip(args.kwonlyargs, args.kw_defaults):
        if kd is not None:  # None: a keyword-only argument without a default
            defaults[a.arg] = _literal(kd)[1]
    required = [n for n in names if n not in defaults]
    return names, defaults, required


def _call_site(tree: ast.Module, info: PipelineInfo) -> CallSite | None:
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == info.name
        ):
            continue
        site = CallSite(node.lineno)
        given = [(name, arg) for name, arg in zip(info.params, node.args)]
        stop = next((i for i, (_, a) in enumerate(given) if isinstance(a, ast.Starred)), None)
        given = given[:stop] + [(kw.arg, kw.value) for kw in node.keywords if kw.arg is not None]
        for name, arg in given:
            ok, value = _literal(arg)
            if ok:
                site.values[name] = value
            else:
                site.opaque.append(name)
                site.expressions[name] = ast.unparse(arg)
        return site
    return None


def _builds_pipeline(node: ast.AST) -> str | None:
    """The name a function assigns a ``Pipeline(...)`` to and returns, if it does."""
    assigned = set()
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Assign)
            and isinstance(sub.value, ast.Call)
            and _dotted(sub.value.func).split(".")[-1] == "Pipeline"
        ):
            assigned |= {t.id for t in sub.targets if isinstance(t, ast.Name)}
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Return)
            and isinstance(sub.value, ast.Name)
            and sub.value.id in assigned
        ):
            return sub.value.id
    return None


def discover(code: str) -> list[PipelineInfo]:
    """The pipelines OLD defines: ``@pipeline_def`` functions, ``Pipeline`` subclasses (also
    through intermediate base classes) and factory functions that build a ``Pipeline`` and return
    it. Base classes other pipeline classes derive from, without an ``__init__`` of their own,
    are listed with ``kind="base_class"``; ``@pipeline_def`` methods with ``kind="method"``."""
    tree = ast.parse(code)
    found: list[PipelineInfo] = []
    pipeline_classes, derived_from = _pipeline_classes(tree)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            info = _function_info(node)
            if info is not None:
                found.append(info)
        elif isinstance(node, ast.ClassDef) and node.name in pipeline_classes:
            found.append(_class_info(node, derived_from, pipeline_classes))
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and any(
                    _is_pipeline_def(d)[0] for d in item.decorator_list
                ):
                    found.append(
                        PipelineInfo(
                            f"{node.name}.{item.name}", "method", item.lineno, [], {}, [], {}, []
                        )
                    )
    for info in found:
        info.call_site = _call_site(tree, info)
    _attach_iterators(tree, found)
    return found


def _body_of(node: ast.FunctionDef | ast.AsyncFunctionDef, names: list[str]) -> _Body:
    body = _Body(set(names))
    for stmt in node.body:
        body.visit(stmt)
    return body


def _pipeline_classes(
    tree: ast.Module,
) -> tuple[dict[str, ast.ClassDef], dict[str, list[str]]]:
    """The module's ``Pipeline`` subclasses (also through other classes of the module), and for
    each base class the pipeline classes that derive from it directly."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    pipeline_classes: dict[str, ast.ClassDef] = {}
    changed = True
    while changed:
        changed = False
        for name, cls in classes.items():
            if name in pipeline_classes:
                continue
            bases = [_dotted(b).split(".")[-1] for b in cls.bases]
            if "Pipeline" in bases or any(b in pipeline_classes for b in bases):
                pipeline_classes[name] = cls
                changed = True
    derived_from: dict[str, list[str]] = {}
    for name, cls in pipeline_classes.items():
        for b in cls.bases:
            derived_from.setdefault(_dotted(b).split(".")[-1], []).append(name)
    return pipeline_classes, derived_from


def _function_info(node: ast.FunctionDef | ast.AsyncFunctionDef) -> PipelineInfo | None:
    """A ``@pipeline_def`` function or a factory that returns a ``Pipeline``; None otherwise."""
    is_def = False
    names_given: set[str] = set()
    for dec in node.decorator_list:
        is_def, kwargs = _is_pipeline_def(dec)
        if is_def:
            if isinstance(dec, ast.Call):
                names_given = {kw.arg for kw in dec.keywords if kw.arg}
            break
    names, defaults, required = _params(node)
    if is_def:
        body = _body_of(node, names)
        return PipelineInfo(
            node.name,
            "pipeline_def",
            node.lineno,
            names,
            defaults,
            required,
            kwargs,
            body.readers,
            body.audio,
            body.random_ops,
            bool(kwargs.get("enable_conditionals")),
            decorator_names=names_given,
            fed=body.fed,
        )
    if _builds_pipeline(node):
        body = _body_of(node, names)
        return PipelineInfo(
            node.name,
            "factory",
            node.lineno,
            names,
            defaults,
            required,
            {},
            body.readers,
            body.audio,
            body.random_ops,
        )
    return None


def _class_info(
    node: ast.ClassDef, derived_from: dict[str, list[str]], classes: dict[str, ast.ClassDef]
) -> PipelineInfo:
    """A ``Pipeline`` subclass: a base class of others when it has no ``__init__`` of its own
    (one that has none and derives from a class of the module takes that class's)."""
    init = _own_init(node)
    inherited = _inherited_init(node, classes) if init is None else None
    used = init or inherited
    names, defaults, required = _params(used, skip_self=True) if used else ([], {}, [])
    body = _Body(set(names))
    body.visit(node)
    if inherited is not None:  # the readers its base's __init__ makes
        body.visit(inherited)
    kind = "base_class" if used is None and node.name in derived_from else "pipeline_class"
    info = PipelineInfo(
        node.name,
        kind,
        node.lineno,
        names,
        defaults,
        required,
        {},
        body.readers,
        body.audio,
        body.random_ops,
    )
    if kind == "base_class":
        info.derived = derived_from[node.name]
    return info


def _own_init(node: ast.ClassDef) -> ast.FunctionDef | None:
    return next(
        (s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"),
        None,
    )


def _inherited_init(
    node: ast.ClassDef, classes: dict[str, ast.ClassDef], seen: frozenset[str] = frozenset()
) -> ast.FunctionDef | None:
    """The ``__init__`` a class without one gets from its first base in the module that has one
    (Python's order for single inheritance)."""
    for base in node.bases:
        name = _dotted(base).split(".")[-1]
        cls = classes.get(name)
        if cls is None or name in seen:
            continue
        found = _own_init(cls) or _inherited_init(cls, classes, seen | {node.name})
        if found is not None:
            return found
    return None


_ITERATORS = ("DALIGenericIterator", "DALIClassificationIterator", "DALIRaggedIterator")


def _iterator_value(node: ast.AST) -> tuple[bool, Any]:
    if isinstance(node, ast.Attribute) and _dotted(node.value).split(".")[-1] == "LastBatchPolicy":
        return True, ("LastBatchPolicy", node.attr)
    return _literal(node)


def _attach_iterators(tree: ast.Module, found: list[PipelineInfo]) -> None:
    """Find ``it = DALIGenericIterator([pipe], ...)`` over ``pipe = <pipeline>(...)``."""
    imported: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                imported[a.asname or a.name] = node.module
    made_by: dict[str, str] = {}
    names = {i.name for i in found}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
        ):
            if node.value.func.id in names:
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        made_by[t.id] = node.value.func.id
    by_name = {i.name: i for i in found}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        dotted = _dotted(node.func)
        cls = dotted.split(".")[-1]
        if cls not in _ITERATORS:
            continue
        module = imported.get(cls) if "." not in dotted else ".".join(dotted.split(".")[:-1])
        if not module or not module.startswith("nvidia.dali.plugin"):
            continue
        args = list(node.args)
        kwargs = {kw.arg: kw.value for kw in node.keywords if kw.arg}
        pipes = args.pop(0) if args else kwargs.pop("pipelines", None)
        if pipes is None:
            continue
        as_list = isinstance(pipes, (ast.List, ast.Tuple))
        target = pipes.elts[0] if isinstance(pipes, (ast.List, ast.Tuple)) and pipes.elts else pipes
        if not isinstance(target, ast.Name) or target.id not in made_by:
            continue
        values, ok = [], True
        for arg in args:
            good, v = _iterator_value(arg)
            ok &= good
            values.append(v)
        kw_values = {}
        for k, v in kwargs.items():
            good, value = _iterator_value(v)
            ok &= good
            kw_values[k] = value
        info = by_name[made_by[target.id]]
        if ok and info.iterator is None:
            info.iterator = {
                "module": module,
                "class": cls,
                "args": values,
                "kwargs": kw_values,
                "as_list": as_list,
            }


def _option_dest(call: ast.Call) -> str | None:
    """The attribute ``parser.add_argument(...)`` stores its value in, as argparse derives it."""
    for kw in call.keywords:
        if kw.arg == "dest" and isinstance(kw.value, ast.Constant):
            return str(kw.value.value)
    flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    long = [f for f in flags if f.startswith("--")]
    short = [f for f in flags if f.startswith("-") and not f.startswith("--")]
    name = long[0][2:] if long else short[0][1:] if short else flags[0] if flags else None
    return name.replace("-", "_") if name else None


def _option_default(call: ast.Call) -> tuple[bool, Any]:
    """(found, the value argparse gives when the option is not on the command line)."""
    default = next((kw.value for kw in call.keywords if kw.arg == "default"), None)
    if default is None:
        return False, None
    ok, value = _literal(default)
    if not ok:
        return False, None
    kind = next((kw.value for kw in call.keywords if kw.arg == "type"), None)
    converters = {"int": int, "float": float, "str": str}
    if isinstance(value, str) and isinstance(kind, ast.Name) and kind.id in converters:
        try:  # argparse runs string defaults through type=
            value = converters[kind.id](value)
        except ValueError:
            return False, None
    return True, value


def argparse_defaults(code: str) -> dict[str, Any]:
    """The literal defaults of the command-line options the module declares with argparse
    (``add_argument``), by destination: ``{"batch_size": 64}`` for
    ``parser.add_argument("--batch-size", type=int, default=64)``."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    found: dict[str, Any] = {}
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            continue
        dest = _option_dest(node)
        ok, value = _option_default(node)
        if dest and ok:
            found.setdefault(dest, value)
    return found


def inline_pipelines(code: str) -> list[int]:
    """Lines of ``with pipe:`` blocks and ``Pipeline(...)`` built outside a function the harness
    could call (they need an adapter)."""
    tree = ast.parse(code)
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _dotted(node.func).split(".")[-1] == "Pipeline":
            lines.append(node.lineno)
    return lines
