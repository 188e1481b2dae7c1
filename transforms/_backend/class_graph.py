"""A ``Pipeline`` subclass's merged graph function (DM202): the body the merger made from
``__init__`` and ``define_graph``, parsed in a small module with the file's imports so that its
operators resolve as in the original file, and the graph the back end reads from it."""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import is_docstring, truthy, walk
from .._local import collect_nodes
from .conditionals import branch_reasons
from .list_outputs import appended_list
from .model import Graph, Refused
from .recognise import analyse_graph, output_values

_GRAPH_FN = "__dali_migrate_graph__"


def graph_function(
    ctx: FileContext,
    cls: cst.ClassDef,
    init: cst.FunctionDef,
    body_stmts: list[cst.BaseStatement],
    kwargs: dict[str, cst.Arg],
    reasons: list[str],
) -> tuple[FileContext, cst.FunctionDef, cst.Parameters, Graph, bool]:
    """The merged graph function, parsed in a small module with the file's imports, so the
    operators resolve as in the original file: that module, the function, its parameters
    (``__init__``'s less ``self``), its graph and whether conditionals are enabled. Refused with
    every reason when the graph cannot migrate."""
    params = init.params.with_changes(params=init.params.params[1:])
    doc: list[cst.BaseStatement] = []
    if isinstance(cls.body, cst.IndentedBlock) and cls.body.body and is_docstring(cls.body.body[0]):
        doc = [cls.body.body[0]]  # a one-line class body has no docstring
    fn = cst.FunctionDef(cst.Name(_GRAPH_FN), params, cst.IndentedBlock(doc + body_stmts))
    imports = _module_imports(ctx) + [
        _line("import nvidia.dali.fn"),
        _line(f"import nvidia.dali.experimental.dynamic as {ctx.ndd}"),
    ]
    mini = FileContext(cst.Module(body=[*imports, fn]).code, ctx.path, ctx.catalog)
    mini_fn = cst.ensure_type(mini.module.body[-1], cst.FunctionDef)  # `fn`, parsed again
    mini_body = cst.ensure_type(mini_fn.body, cst.IndentedBlock)
    last = mini_body.body[-1]
    ret = (
        last.body[0] if isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1 else None
    )
    outputs = output_values(ret.value) if isinstance(ret, cst.Return) else []
    appended = appended_list(mini, mini_fn, outputs)
    if appended is None:
        reasons += _list_outputs(mini_fn, outputs)
    conditionals = truthy(kwargs.get("enable_conditionals"))
    if conditionals:
        reasons += branch_reasons(mini, list(mini_body.body), collect_nodes(mini, mini_fn))
    graph = analyse_graph(
        mini, mini_fn, last if isinstance(ret, cst.Return) else None, outputs, reasons
    )
    if graph is None or reasons:
        raise Refused("; ".join(dict.fromkeys(reasons)))
    graph.outputs_list = appended
    return mini, mini_fn, params, graph, conditionals


_SEQUENCES = ("list", "tuple")


def _list_outputs(fn: cst.FunctionDef, outputs: list[cst.BaseExpression]) -> list[str]:
    """Why the outputs cannot be carried over: one name that holds a list of nodes."""
    built = outputs[0].value if len(outputs) == 1 and isinstance(outputs[0], cst.Name) else None
    if built is None or not _built_list(fn, built):
        return []
    return [
        f"its outputs are a list built in define_graph (`{built}`) other than by appending "
        f"(`{built} = [...]` once, then only `{built}.append(<output>)` statements): build it "
        "so, or return the outputs by name"
    ]


def _built_list(fn: cst.FunctionDef, name: str) -> bool:
    """``name`` holds a list (or tuple) of nodes: assigned one, or appended to."""
    seqs = (cst.List, cst.Tuple, cst.ListComp)
    for node in walk(fn.body):
        if isinstance(node, cst.Assign) and any(
            isinstance(t.target, cst.Name) and t.target.value == name for t in node.targets
        ):
            call = node.value
            func = call.func if isinstance(call, cst.Call) else None
            if isinstance(call, seqs) or (isinstance(func, cst.Name) and func.value in _SEQUENCES):
                return True
        if isinstance(node, cst.Attribute) and node.attr.value in ("append", "extend", "insert"):
            if isinstance(node.value, cst.Name) and node.value.value == name:
                return True
    return False


def _line(code: str) -> cst.SimpleStatementLine:
    return cst.ensure_type(cst.parse_statement(code), cst.SimpleStatementLine)


def _module_imports(ctx: FileContext) -> list[cst.SimpleStatementLine]:
    """The module's imports, also those inside a top-level ``try``/``if`` (``try: import
    nvidia.dali.fn as fn except ImportError: ...``), and the names it binds to DALI by a
    wrapper call (``dali = try_import_dali()``), as plain statements."""
    out: list[cst.SimpleStatementLine] = []
    wrappers = {id(w.statement) for w in ctx.wrappers.values() if w.followed}
    for stmt in ctx.module.body:
        for node in walk(stmt) if isinstance(stmt, (cst.Try, cst.If)) else [stmt]:
            if isinstance(node, cst.SimpleStatementLine) and all(
                isinstance(s, (cst.Import, cst.ImportFrom)) or id(s) in wrappers for s in node.body
            ):
                out.append(node.with_changes(leading_lines=[]))
    return out
