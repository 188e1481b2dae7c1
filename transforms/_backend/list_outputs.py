"""Outputs gathered in a list (DM202): ``define_graph`` makes an empty list, appends one node per
view to it (in a loop over a value known only when it runs) and returns the list. The
generator builds the same list for each batch and yields its elements as the tuple
``Pipeline.run()`` returned::

    output_list = []                                output_list = []
    for t in self.transforms_list:                  for t in transforms_list:
        output_list.append(t(jpegs))        ->          output_list.append(t(jpegs))
    output_list.append(labels)                      output_list.append(labels)
    return output_list                              yield tuple(output.evaluate() for output in output_list)

Their number is known only when the code runs, so what needs it (a framework iterator's
``output_map``) is not migrated.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import walk


def appended_list(
    ctx: FileContext, fn: cst.FunctionDef, outputs: list[cst.BaseExpression]
) -> str | None:
    """The name of the list the graph function ``fn`` returns as its outputs (``outputs``:
    what its final ``return`` names), when it is bound once, at the top of the body, to a list
    display without ``*``, and read only by ``<name>.append(<one node>)`` statements and that
    ``return``. None for any other outputs."""
    if len(outputs) != 1 or not isinstance(outputs[0], cst.Name):
        return None
    name = outputs[0].value
    body = fn.body.body
    made = [s for s in body if _makes_list(s, name)]
    if len(made) != 1:
        return None
    target = cst.ensure_type(made[0], cst.SimpleStatementLine).body[0]
    for node in walk(fn.body):
        if not (isinstance(node, cst.Name) and node.value == name) or node is outputs[0]:
            continue
        if any(node is t.target for t in cst.ensure_type(target, cst.Assign).targets):
            continue
        if not _appends(ctx, node, fn):
            return None
    return name


def _makes_list(stmt: cst.BaseStatement | cst.BaseSmallStatement, name: str) -> bool:
    """``<name> = [...]`` (one target, no starred element)."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1):
        return False
    small = stmt.body[0]
    return (
        isinstance(small, cst.Assign)
        and len(small.targets) == 1
        and isinstance(small.targets[0].target, cst.Name)
        and small.targets[0].target.value == name
        and isinstance(small.value, cst.List)
        and not any(isinstance(e, cst.StarredElement) for e in small.value.elements)
    )


def _appends(ctx: FileContext, node: cst.Name, fn: cst.FunctionDef) -> bool:
    """``node`` is ``<node>.append(<x>)``, a statement of its own, outside nested functions."""
    attr = ctx.parents.get(node)
    call = ctx.parents.get(attr) if attr is not None else None
    expr = ctx.parents.get(call) if call is not None else None
    if not (
        isinstance(attr, cst.Attribute)
        and attr.value is node
        and attr.attr.value == "append"
        and isinstance(call, cst.Call)
        and call.func is attr
        and len(call.args) == 1
        and call.args[0].keyword is None
        and not call.args[0].star
        and isinstance(expr, cst.Expr)
    ):
        return False
    cur = ctx.parents.get(expr)
    while cur is not None and not isinstance(cur, cst.FunctionDef):
        if isinstance(cur, cst.Lambda):
            return False
        cur = ctx.parents.get(cur)
    return cur is fn
