"""DM206 wrapped-import: pipeline-mode API reached through a name that a call, not an import,
bound to DALI, where the tool cannot follow that name, gets a TODO where it is used.

Most such names are followed as the module they stand for (``dali = try_import_dali()``,
``fn = importlib.import_module("nvidia.dali.fn")``, ``pytest.importorskip(...)``,
``OptionalImport("nvidia.dali")``: see ``wrapper_module`` in ``dali_migrate.context``) and
migrate as if ``import nvidia.dali as dali`` had been written. This rule marks the others: a
callee whose name says it imports DALI but not that it returns the ``nvidia.dali`` package
(``import_dali_lazily()``), and a name bound by wrapper calls of different modules.

Before (``fixtures/DM206/unfollowed_wrapper.in.py``)::

    \"\"\"A helper whose name says it imports DALI, but not that it returns the nvidia.dali package:
    the tool does not follow it and marks each pipeline-mode use.\"\"\"
    from .compat import import_dali_lazily
    from .registry import load_pipeline_module

    dali = import_dali_lazily()
    pipes = load_pipeline_module()


    def augment(images):
        return dali.fn.flip(images, horizontal=1)


    def layout():
        return dali.types.NHWC


    def build(root, batch):
        pipe = dali.Pipeline(batch_size=batch, num_threads=2, device_id=None)
        with pipe:
            jpegs, labels = dali.fn.readers.file(file_root=root)
            pipe.set_outputs(dali.fn.decoders.image(jpegs), labels)
        return pipe

After (``fixtures/DM206/unfollowed_wrapper.out.py``)::

    \"\"\"A helper whose name says it imports DALI, but not that it returns the nvidia.dali package:
    the tool does not follow it and marks each pipeline-mode use.\"\"\"
    from .compat import import_dali_lazily
    from .registry import load_pipeline_module

    dali = import_dali_lazily()
    pipes = load_pipeline_module()


    def augment(images):
        # TODO(dali-migrate): DM206: `dali.fn.flip`: pipeline-mode API reached through `dali = import_dali_lazily(...)`, which the tool does not follow: migrate it to ndd by hand, or import DALI and run again
        return dali.fn.flip(images, horizontal=1)


    def layout():
        return dali.types.NHWC


    def build(root, batch):
        # TODO(dali-migrate): DM206: `dali.Pipeline`: pipeline-mode API reached through `dali = import_dali_lazily(...)`, which the tool does not follow: migrate it to ndd by hand, or import DALI and run again
        pipe = dali.Pipeline(batch_size=batch, num_threads=2, device_id=None)
        with pipe:
            # TODO(dali-migrate): DM206: `dali.fn.readers.file`: pipeline-mode API reached through `dali = import_dali_lazily(...)`, which the tool does not follow: migrate it to ndd by hand, or import DALI and run again
            jpegs, labels = dali.fn.readers.file(file_root=root)
            # TODO(dali-migrate): DM206: `dali.fn.decoders.image`: pipeline-mode API reached through `dali = import_dali_lazily(...)`, which the tool does not follow: migrate it to ndd by hand, or import DALI and run again
            pipe.set_outputs(dali.fn.decoders.image(jpegs), labels)
        return pipe

Other uses (``dali.types.FLOAT``) are not pipeline-mode API.

Safety: safe (it only writes comments).
"""  # noqa: E501 (the example is the fixture as the rule writes it)

from __future__ import annotations

import libcst as cst

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
        if not ctx.wrappers:
            return
        found: dict[int, tuple[cst.CSTNode, str, list[str]]] = {}
        for node in ctx.nodes_of(cst.Name):
            if node.value not in ctx.wrapped_dali or _is_attribute_name(ctx, node):
                continue
            bound = ctx.wrapper_bindings(node)
            followed = ctx.wrapper_binding(node)
            if not bound or followed is not None and followed.followed:
                continue  # not such a name, or followed as the module it stands for
            chain = _chain(ctx, node)
            rest = chain.split(".")[1:]
            reached = [w for w in bound if _pipeline_api(".".join([w.module, *rest]))]
            if not reached:
                continue
            stmt = ctx.enclosing_statement(node)
            found.setdefault(id(stmt), (node, reached[0].call, []))[2].append(chain)
        for site, call, chains in found.values():
            uses = ", ".join(f"`{c}`" for c in dict.fromkeys(chains))
            name = chains[0].partition(".")[0]
            message = f"{uses}: pipeline-mode API reached through `{name} = {call}`, {_ADVICE}"
            state.diagnostics.append(ctx.todo(self.id, site, message))


def _pipeline_api(qualified: str) -> bool:
    return any(qualified.startswith(f"nvidia.dali.{p}") for p in _PIPELINE_API)


def _is_attribute_name(ctx: FileContext, node: cst.Name) -> bool:
    parent = ctx.parents.get(node)
    return isinstance(parent, cst.Attribute) and parent.attr is node


def _chain(ctx: FileContext, node: cst.Name) -> str:
    """The dotted name ``node`` starts: ``dali.ops.Resize``."""
    parts = [node.value]
    cur: cst.CSTNode = node
    parent = ctx.parents.get(cur)
    while isinstance(parent, cst.Attribute) and parent.value is cur:
        parts.append(parent.attr.value)
        cur, parent = parent, ctx.parents.get(parent)
    return ".".join(parts)
