"""Automatic augmentations (``nvidia.dali.auto_aug``): a pipeline that uses them stays in
pipeline mode (a component of the structural rules' graph checks).

``rand_augment``, ``trivial_augment``, ``auto_augment`` and ``core.select`` choose each sample's
augmentation with ``if`` on graph nodes, which only a pipeline built with
``enable_conditionals=True`` runs; the ``@augmentation`` functions they apply are pipeline-mode
graph code. Dynamic mode has none of it, so such a pipeline, and the augmentations it reaches,
keep their pipeline-mode API (``sites.refuse_pipeline``), with the reason in its TODO.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import walk
from .kept import creation_args, reached_defs

AUTO_AUG = "nvidia.dali.auto_aug"


def auto_aug_reasons(ctx: FileContext, container: cst.CSTNode) -> list[str]:
    """Why the graph code of ``container`` cannot run in dynamic mode: the first use of
    ``nvidia.dali.auto_aug`` in it or in the code of the module it reaches (none: [])."""
    handed = creation_args(ctx, _definition(ctx, container))
    roots = [container, *handed]
    for root in [*roots, *(d for r in roots for d in reached_defs(ctx, r))]:
        for node in walk(root):
            q = auto_aug_name(ctx, node)
            if q is None:
                continue
            where = (
                ""
                if root is container
                else " (in an argument of the call that makes it)"
                if root in handed
                else f" (in `{root.name.value}`)"  # type: ignore[attr-defined]
            )
            return [f"`{ctx.text(node)}`{where} {why_kept(q)}"]
    return []


def _definition(ctx: FileContext, container: cst.CSTNode) -> cst.CSTNode:
    """What the code that makes the pipeline calls: the class of a ``define_graph`` method, or
    the function itself."""
    parent = ctx.parents.get(ctx.parents.get(container))
    return parent if isinstance(parent, cst.ClassDef) else container


#: what chooses each sample's augmentation with ``if`` (a policy, or ``core.select``)
_CHOOSING = tuple(
    f"{AUTO_AUG}.{m}" for m in ("rand_augment", "trivial_augment", "auto_augment", "core.select")
)


def why_kept(q: str) -> str:
    """Why the pipeline that uses ``q`` (a name under ``nvidia.dali.auto_aug``) stays."""
    if q.startswith(_CHOOSING):
        return (
            f"is an automatic augmentation of {AUTO_AUG}, which runs only in pipeline mode with "
            "enable_conditionals=True (it picks each sample's augmentation with `if` on graph "
            "nodes) and has no dynamic-mode counterpart: keep this pipeline in pipeline mode, or "
            "write the choice by hand: ndd operators applied per sample "
            "(`ndd.as_batch([... for s in images.tensors])`)"
        )
    return (
        f"is {AUTO_AUG} API, which builds pipeline-mode graph code and has no dynamic-mode "
        "counterpart: keep this pipeline in pipeline mode, or write the augmentations with "
        "ndd operators"
    )


def auto_aug_name(ctx: FileContext, node: cst.CSTNode) -> str | None:
    """The qualified name under ``nvidia.dali.auto_aug`` that ``node`` (a whole dotted name)
    stands for, or None."""
    if not isinstance(node, (cst.Name, cst.Attribute)) or isinstance(
        ctx.parents.get(node), cst.Attribute
    ):
        return None
    q = ctx.qualname(node)
    return q if q is not None and (q == AUTO_AUG or q.startswith(AUTO_AUG + ".")) else None
