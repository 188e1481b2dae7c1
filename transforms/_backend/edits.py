"""Removing statements of the original code without losing what surrounds them."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Edit, overlaps

from .model import Refused


def removed_stmt(ctx: FileContext, stmt: cst.BaseStatement) -> Edit:
    """Delete a statement but keep the comments above it; an emptied block gets ``pass``."""
    block = ctx.parents.get(stmt)
    siblings: Sequence[cst.CSTNode] = getattr(block, "body", ())  # the statements of the block
    owner = ctx.parents.get(block)
    if (
        _only_builds(siblings)
        and isinstance(owner, cst.For)
        and owner.body is block
        and owner.orelse is None
    ):
        return removed_stmt(ctx, owner)  # for p in pipes: p.build()
    if _only_builds(siblings) and isinstance(block, cst.IndentedBlock) and siblings[-1] is stmt:
        assert isinstance(stmt, cst.SimpleStatementLine)
        return ctx.stmt_edit(stmt, [stmt.with_changes(body=[cst.Pass()])])
    kept = ctx.leading_comments(stmt)
    if isinstance(stmt, cst.ClassDef):
        kept = "".join(line for line in kept.splitlines(keepends=True) if line.strip())
    return Edit(*ctx.stmt_span(stmt), kept)


def moved_stmt(ctx: FileContext, stmt: cst.SimpleStatementLine) -> Edit:
    """Delete a statement that another edit writes elsewhere with the comment lines above it:
    they go with it (as do the blank lines around them; blank lines alone stay)."""
    above = ctx.leading_comments(stmt)
    return Edit(*ctx.stmt_span(stmt), "" if above.strip() else above)


def _only_builds(siblings: Sequence[cst.CSTNode]) -> bool:
    """Every statement of the block is ``<something>.build()``."""
    return all(
        isinstance(s, cst.SimpleStatementLine)
        and len(s.body) == 1
        and isinstance(s.body[0], cst.Expr)
        and isinstance(s.body[0].value, cst.Call)
        and isinstance(s.body[0].value.func, cst.Attribute)
        and s.body[0].value.func.attr.value == "build"
        for s in siblings
    )


def check_disjoint(ctx: FileContext, edits: list[Edit]) -> None:
    """Refuse a fix whose edits overlap: two different rewrites of one statement (two pipelines
    made in it) would both be written, and a use site inside code another edit replaces whole
    would leave part of the old code behind. Identical edits (a use reached twice) count once."""
    widest: Edit | None = None  # of the edits so far, the one reaching furthest
    for e in sorted(set(edits), key=lambda e: (e.start, e.end)):
        if widest is not None and overlaps(widest, e):
            if (widest.start, widest.end) == (e.start, e.end):
                code = " ".join(ctx.source[e.start : e.end].split())
                code = code if len(code) <= 60 else code[:57] + "..."
                raise Refused(f"two of its pipelines are made in one statement (`{code}`)")
            raise Refused("a use of the pipeline lies inside code the migration replaces whole")
        if widest is None or e.end > widest.end:
            widest = e


def joined_imports(edits: Sequence[Edit]) -> dict[int, Edit]:
    """Where several edits insert ``import x`` lines at one point (the loaders of two
    definitions, each with its imports), one edit that inserts them all, sorted, keeping the
    blank lines around the group: by the point."""
    points: dict[int, list[Edit]] = {}
    for e in dict.fromkeys(edits):
        if (
            e.start == e.end
            and e.text.strip()
            and all(line.startswith("import ") for line in e.text.split("\n") if line.strip())
        ):
            points.setdefault(e.start, []).append(e)
    out: dict[int, Edit] = {}
    for at, group in points.items():
        if len(group) < 2:
            continue
        lines = sorted({ln.rstrip("\r") for e in group for ln in e.text.split("\n") if ln.strip()})
        nl = "\r\n" if "\r\n" in group[0].text else "\n"
        head = nl if any(e.text.startswith(("\n", "\r\n")) for e in group) else ""
        tail = nl if any(e.text.endswith(nl + nl) for e in group) else ""
        out[at] = Edit(at, at, head + nl.join(lines) + nl + tail)
    return out


def with_joined(edits: list[Edit], joined: dict[int, Edit]) -> list[Edit]:
    """``edits`` with each import insertion at a point of ``joined`` replaced by the joined one."""
    out = [joined.get(e.start, e) if e.start == e.end and e.start in joined else e for e in edits]
    return list(dict.fromkeys(out))
