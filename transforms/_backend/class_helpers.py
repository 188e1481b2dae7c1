"""Helper methods of a ``Pipeline`` subclass that read the data (call a reader or an external
source): their code is inlined where ``define_graph`` calls them, since the back end needs the
readers in the body of the generator, not in a function of it.

Before::

    def load(self, layout):
        data = self.input(name="Reader")
        return fn.reshape(data, layout=layout)

    def define_graph(self):
        images = self.load("HWC")
        ...

After (in the merged graph function)::

        layout = "HWC"
        data = self.input(name="Reader")
        images = fn.reshape(data, layout=layout)
        ...

Only a call that is a whole statement (``x = self.load(...)`` or ``return self.load(...)``) of a
helper whose one ``return`` ends it is inlined, and only when its names (parameters and locals)
are not used anywhere else in the merged function.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import block_statements, children, free_names, is_docstring, walk
from .class_init import bound_names


@dataclass
class Inlined:
    """A call of a helper as a statement: the statements that replace it (the parameters bound,
    the helper's body, the result given to the call's targets)."""

    bindings: list[cst.BaseStatement]
    body: list[cst.BaseStatement]
    result: cst.BaseStatement | None


def helper_call(stmt: cst.BaseStatement) -> tuple[str, cst.Call] | None:
    """``x = self.h(...)`` or ``return self.h(...)``: the helper's name and the call."""
    small = (
        stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
    )
    value = None
    if isinstance(small, cst.Assign) and len(small.targets) == 1 or isinstance(small, cst.Return):
        value = small.value
    if isinstance(value, cst.Call) and _self_attr(value.func):
        return value.func.attr.value, value  # type: ignore[attr-defined]
    return None


def inline(
    stmt: cst.SimpleStatementLine, helper: cst.FunctionDef, taken: set[str]
) -> Inlined | None:
    """The statements that run ``helper`` where ``stmt`` calls it, or None when that is not
    safe: ``taken`` are the names the rest of the merged function uses."""
    body = block_statements(helper.body)
    body = body[1:] if body and is_docstring(body[0]) else body
    last = body[-1] if body else None
    ret = (
        last.body[0] if isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1 else None
    )
    if not isinstance(ret, cst.Return) or _returns(body[:-1]):
        return None
    call = helper_call(stmt)
    assert call is not None
    bound = _bind(_params(helper), call[1])
    if bound is None:
        return None
    small = stmt.body[0]
    targets: set[str] = set()
    if isinstance(small, cst.Assign):
        targets = {n.value for n in walk(small.targets[0].target) if isinstance(n, cst.Name)}
    local = set(bound) | bound_names(helper.body)
    if (local - targets) & taken:
        return None
    names = list(bound)
    for i, name in enumerate(names):  # `a = b; b = a`: a later value must not read an earlier name
        if any(name in free_names(bound[later]) for later in names[i + 1 :]):
            return None
    bindings: list[cst.BaseStatement] = [
        cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(n))], v)])
        for n, v in bound.items()
        if not (isinstance(v, cst.Name) and v.value == n)
    ]
    return Inlined(bindings, body[:-1], _result(stmt, small, ret))


def _result(
    stmt: cst.SimpleStatementLine, small: cst.BaseSmallStatement, ret: cst.Return
) -> cst.BaseStatement | None:
    """The statement that gives the helper's result to the call's targets (None: the same)."""
    value = ret.value
    if isinstance(small, cst.Return):
        return stmt.with_changes(body=[small.with_changes(value=value)], leading_lines=[])
    assert isinstance(small, cst.Assign) and value is not None
    same = cst.Module([]).code_for_node(small.targets[0].target) == cst.Module([]).code_for_node(
        value.with_changes(lpar=[], rpar=[]) if isinstance(value, cst.Tuple) else value
    )
    return (
        None
        if same
        else stmt.with_changes(body=[small.with_changes(value=value)], leading_lines=[])
    )


def _returns(stmts: list[cst.BaseStatement]) -> bool:
    """A ``return`` (or ``yield``) among ``stmts``, outside functions defined in them."""
    todo: list[cst.CSTNode] = list(stmts)
    while todo:
        node = todo.pop()
        if isinstance(node, (cst.Return, cst.Yield)):
            return True
        if not isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            todo.extend(children(node))
    return False


def _params(helper: cst.FunctionDef) -> tuple[list[cst.Param], list[cst.Param]] | None:
    """The parameters a call binds (without ``self``), positional and keyword-only; None for
    ``*args``, ``**kwargs``."""
    p = helper.params
    if p.posonly_params or isinstance(p.star_arg, cst.Param) or p.star_kwarg:
        return None
    static = any(
        isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod"
        for d in helper.decorators
    )
    return (list(p.params) if static else list(p.params[1:])), list(p.kwonly_params)


def _bind(
    params: tuple[list[cst.Param], list[cst.Param]] | None, call: cst.Call
) -> dict[str, cst.BaseExpression] | None:
    """The value of each parameter at ``call``, in the order of the parameters."""
    if params is None:
        return None
    positional, kwonly = params
    names = [p.name.value for p in positional + kwonly]
    values: dict[str, cst.BaseExpression] = {}
    for i, arg in enumerate(call.args):
        if arg.star:
            return None
        if arg.keyword is None:
            name = positional[i].name.value if i < len(positional) else None
        else:
            name = arg.keyword.value
        if name is None or name not in names or name in values:
            return None
        values[name] = arg.value
    for p in positional + kwonly:
        if p.name.value not in values:
            if p.default is None:
                return None
            values[p.name.value] = p.default
    return {n: values[n] for n in names}


def _self_attr(node: cst.CSTNode) -> bool:
    return (
        isinstance(node, cst.Attribute)
        and isinstance(node.value, cst.Name)
        and node.value.value == "self"
    )


def factory_ctor(module: cst.Module, call: cst.Call) -> tuple[cst.Call, cst.Call, set[str]] | None:
    """``make_reader(files=f, seed=s)`` where ``make_reader`` is a function of the module whose
    body is one ``return ops.X(...)``: the operator object it makes, as written in the function
    and with the call's values in place of the parameters, and the other names it reads (None
    when ``call`` is not that)."""
    if not isinstance(call.func, cst.Name):
        return None
    fn = next(
        (
            s
            for s in module.body
            if isinstance(s, cst.FunctionDef) and s.name.value == call.func.value
        ),
        None,
    )
    if fn is None or fn.decorators:
        return None
    body = block_statements(fn.body)
    body = body[1:] if body and is_docstring(body[0]) else body
    stmt = body[0] if len(body) == 1 else None
    ret = (
        stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
    )
    if not (isinstance(ret, cst.Return) and isinstance(ret.value, cst.Call)):
        return None
    p = fn.params
    params = (
        None
        if p.posonly_params or isinstance(p.star_arg, cst.Param) or p.star_kwarg
        else (list(p.params), list(p.kwonly_params))
    )
    bound = _bind(params, call)
    if bound is None:
        return None
    others = free_names(ret.value) - set(bound)
    return ret.value, ret.value.visit(_Substitute(bound)), others  # type: ignore[return-value]


class _Substitute(cst.CSTTransformer):
    """Names of parameters replaced by their values (in parentheses where they are not atoms)."""

    def __init__(self, values: dict[str, cst.BaseExpression]) -> None:
        super().__init__()
        self.values = values

    def leave_Attribute(
        self, original: cst.Attribute, updated: cst.Attribute
    ) -> cst.BaseExpression:
        return updated.with_changes(attr=original.attr)  # `x.name`: not a use of a name `name`

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)  # keywords are not names either

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        value = self.values.get(original.value)
        if value is None:
            return updated
        atom = isinstance(
            value,
            (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.BaseNumber, cst.BaseString),
        )
        return (
            value if atom else value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        )


def undefined_root(ctx: FileContext, expr: cst.BaseExpression) -> str | None:
    """The name ``expr`` (``ops.FileReader``) starts from when nothing in the file binds it (no
    import, assignment, definition or star import, not a builtin), else None."""
    root = expr
    while isinstance(root, cst.Attribute):
        root = root.value
    if not isinstance(root, cst.Name) or root.value in ctx.skipped_names:
        return None
    scope = ctx.scopes.get(root)
    if scope is None or scope[root.value] or _STAR_IMPORT.search(ctx.source):
        return None
    return root.value


_STAR_IMPORT = re.compile(r"^\s*from\s+\S+\s+import\s+\*", re.MULTILINE)
