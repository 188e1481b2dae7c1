"""DM206 wrapped-import: pipeline-mode API reached through a name that a call, not an import,
bound to DALI gets a TODO where it is used.

Before::

    from .utils import try_import_dali

    dali = try_import_dali()

    class TrainPipe(dali.Pipeline):
        def __init__(self, batch_size, num_threads, device_id):
            super().__init__(batch_size, num_threads, device_id)
            self.decode = dali.ops.ImageDecoder(device="mixed")

After::

    from .utils import try_import_dali

    dali = try_import_dali()

    # TODO(dali-migrate): DM206: `dali.Pipeline`: pipeline-mode API reached through `dali =
    # try_import_dali(...)`, which the tool does not follow: migrate it to ndd by hand, ...
    class TrainPipe(dali.Pipeline):
        def __init__(self, batch_size, num_threads, device_id):
            super().__init__(batch_size, num_threads, device_id)
            # TODO(dali-migrate): DM206: `dali.ops.ImageDecoder`: pipeline-mode API reached ...
            self.decode = dali.ops.ImageDecoder(device="mixed")

Such a call usually stands for an optional dependency (the module must import without DALI), so
the tool cannot add ``import nvidia.dali.experimental.dynamic as ndd`` at the top; it marks every
statement that uses pipeline-mode API through the name instead, so the file is never left
silently unmigrated. Other uses (``dali.types.FLOAT``) are not pipeline-mode API.

Safety: safe (it only writes comments).
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import GlobalScope

from dali_migrate.context import FileContext
from dali_migrate.rules import FileState, Rule

#: what follows ``nvidia.dali.`` in pipeline-mode API
_PIPELINE_API = (
    "fn.",
    "ops.",
    "math.",
    "plugin.",
    "pipeline.",
    "Pipeline",
    "pipeline_def",
    "types.Constant",
)
_ADVICE = "which the tool does not follow: migrate it to ndd by hand, or import DALI and run again"


class WrappedImports(Rule):
    id = "DM206"
    name = "wrapped-import"
    summary = "pipeline-mode API reached through a wrapper-imported DALI module gets a TODO"
    last = True

    def run(self, state: FileState) -> None:
        ctx = state.ctx
        if not ctx.wrapped_dali:
            return
        found: dict[int, tuple[cst.CSTNode, str, list[str]]] = {}
        for node in ctx.nodes_of(cst.Name):
            bound = ctx.wrapped_dali.get(node.value)
            if bound is None or not _reads_module_name(ctx, node):
                continue
            call, module = bound
            chain = _chain(ctx, node)
            qualified = ".".join([module, *chain.split(".")[1:]])
            if not any(qualified.startswith(f"nvidia.dali.{p}") for p in _PIPELINE_API):
                continue
            stmt = ctx.enclosing_statement(node)
            found.setdefault(id(stmt), (node, call, []))[2].append(chain)
        for node, call, chains in found.values():
            uses = ", ".join(f"`{c}`" for c in dict.fromkeys(chains))
            name = chains[0].partition(".")[0]
            message = f"{uses}: pipeline-mode API reached through `{name} = {call}`, {_ADVICE}"
            state.diagnostics.append(ctx.todo(self.id, node, message))


def _reads_module_name(ctx: FileContext, node: cst.Name) -> bool:
    """``node`` reads the module-level name, not a local of the same name or an attribute."""
    parent = ctx.parents.get(node)
    if isinstance(parent, cst.Attribute) and parent.attr is node:
        return False
    scope = ctx.scopes.get(node)
    if scope is None or all(a.node is not node for a in scope.accesses[node.value]):
        return False  # not a read (the assignment's own target, a keyword, ...)
    return all(isinstance(a.scope, GlobalScope) for a in scope[node.value])


def _chain(ctx: FileContext, node: cst.Name) -> str:
    """The dotted name ``node`` starts: ``dali.ops.Resize``."""
    parts = [node.value]
    cur: cst.CSTNode = node
    parent = ctx.parents.get(cur)
    while isinstance(parent, cst.Attribute) and parent.value is cur:
        parts.append(parent.attr.value)
        cur, parent = parent, ctx.parents.get(parent)
    return ".".join(parts)
