"""Helpers shared by the rules that replace operators dynamic mode lacks (DM105-DM107)."""

from __future__ import annotations

import ast

import libcst as cst

from dali_migrate.context import FileContext

TYPES_PREFIX = "nvidia.dali.types."

#: DALI data types by their ``types`` name -> (ndd dtype name, numpy dtype name, kind)
DTYPES = {
    "BOOL": ("bool", "bool_", "b"),
    "INT8": ("int8", "int8", "i"),
    "INT16": ("int16", "int16", "i"),
    "INT32": ("int32", "int32", "i"),
    "INT64": ("int64", "int64", "i"),
    "UINT8": ("uint8", "uint8", "u"),
    "UINT16": ("uint16", "uint16", "u"),
    "UINT32": ("uint32", "uint32", "u"),
    "UINT64": ("uint64", "uint64", "u"),
    "FLOAT16": ("float16", "float16", "f"),
    "FLOAT": ("float32", "float32", "f"),
    "FLOAT64": ("float64", "float64", "f"),
}


def dali_dtype(ctx: FileContext, expr: cst.BaseExpression) -> str | None:
    """``types.FLOAT`` / ``types.DALIDataType.FLOAT`` -> ``"FLOAT"``; None if not a literal DALI type."""
    q = ctx.qualname(expr)
    if not q or not q.startswith(TYPES_PREFIX):
        return None
    name = q[len(TYPES_PREFIX) :]
    if name.startswith("DALIDataType."):
        name = name[len("DALIDataType.") :]
    return name if name in DTYPES else None


def literal(node: cst.CSTNode):
    """The Python value of a literal expression (numbers, strings, lists, tuples), or raises ValueError."""
    code = cst.Module(body=[]).code_for_node(node)
    return ast.literal_eval(code.strip())


def kwargs_of(call: cst.Call) -> dict[str, cst.Arg]:
    return {a.keyword.value: a for a in call.args if a.keyword is not None}


def positional(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None]


def has_star(call: cst.Call) -> bool:
    return any(a.star for a in call.args)


def mentions_dali(ctx: FileContext, node: cst.CSTNode) -> bool:
    """Whether ``node`` refers to any name bound by a DALI import."""
    found = False

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            nonlocal found
            if n.value in ctx.dali_names or n.value == ctx.ndd:
                found = True

    node.visit(V())
    return found


def names_in(node: cst.CSTNode) -> set[str]:
    out: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            out.add(n.value)

    node.visit(V())
    return out


def fresh(taken: set[str], candidates: list[str]) -> str:
    for c in candidates:
        if c not in taken:
            taken.add(c)
            return c
    i = 0
    while f"{candidates[0]}{i}" in taken:
        i += 1
    taken.add(f"{candidates[0]}{i}")
    return f"{candidates[0]}{i}"


def parse_expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)
