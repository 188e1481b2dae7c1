"""DALI's data types by name, and whether code refers to DALI: shared by the rules that
replace operators dynamic mode lacks (DM105-DM107)."""

from __future__ import annotations

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
