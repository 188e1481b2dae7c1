"""Where the wrapped iterators of a module become drop-in loaders (``wrapped_iterators``,
``wrapped_loader``): every pipeline definition of the module migrated, none was left, and the fix
goes with those that migrated them; an info note at each wrapper says how its callers use it."""

from __future__ import annotations

import libcst as cst

from dali_migrate.fixes import Edit
from dali_migrate.rules import FileState

from .recognise import pipeline_count
from .wrapped_iterators import wrap_site
from .wrapped_loader import loader_fix

#: the rules that migrate a pipeline definition of the module
_DEFINITIONS = ("DM200", "DM201", "DM202")

_KEPT = (
    "a pipeline definition of this module is not migrated, so this iterator is kept: callers "
    "of the migrated ones hand it their generator of batches (no build()); once every "
    "definition migrates it becomes a drop-in loader over them, or replace it with one that "
    "takes next() of each and converts the outputs (.torch())"
)
_CALLERS = (
    "{cls} wraps a drop-in loader over the pipelines its callers hand it: they pass what the "
    "migrated definition returns (its generator of batches, a list of them for several GPUs), "
    "with no build()"
)


def wrapped_loaders(state: FileState) -> list[Edit]:
    """Proposes the loader fix where the module has wrapped iterators and every pipeline
    definition of it migrated; the edits it makes (no TODO goes on their code)."""
    ctx = state.ctx
    defined = [f for f in state.fixes if f.rule in _DEFINITIONS]
    if not defined:
        return []
    sites = [s for s in (wrap_site(ctx, c) for c in ctx.nodes_of(cst.Call)) if s]
    if not sites:
        return []
    if state.refused_pipeline or len(defined) < pipeline_count(ctx):
        for site in sites:  # its callers here may hand it a migrated generator already
            state.diagnostics.append(ctx.todo(defined[0].rule, site.call, _KEPT))
        return []
    fix = loader_fix(ctx, defined[0].rule, sites, [f.id for f in defined])
    state.fixes.append(fix)
    for site in sites:
        cls = _class_name(state, site.call)
        state.diagnostics.append(ctx.info(fix.rule, site.call, _CALLERS.format(cls=cls)))
    return list(fix.edits)


def _class_name(state: FileState, node: cst.CSTNode) -> str:
    cur = state.ctx.parents.get(node)
    while cur is not None and not isinstance(cur, cst.ClassDef):
        cur = state.ctx.parents.get(cur)
    return f"`{cur.name.value}`" if isinstance(cur, cst.ClassDef) else "the function"
