"""DM102 mixed-device: ``device="mixed"`` becomes ``device="gpu"``.

Before::

    images = fn.decoders.image(jpegs, device="mixed")

After::

    images = ndd.decoders.image(jpegs, device="gpu")

Dynamic mode rejects ``"mixed"`` (``ValueError: Invalid device type: mixed``); ``"gpu"`` selects
the same hybrid CPU/GPU decoding. Only string literals are rewritten: a device held in a variable
is reported, since the tool cannot see whether it may be ``"mixed"``.

Safety: safe.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext

from ._local import LocalEnv, LocalRule


class MixedDevice(LocalRule):
    id = "DM102"
    name = "mixed-device"
    summary = 'device="mixed" becomes device="gpu"'
    node_types = (cst.Arg,)

    def rewrite(self, ctx: FileContext, original: cst.Arg, updated: cst.Arg, env: LocalEnv):
        if original.keyword is None or original.keyword.value != "device":
            return None
        call = ctx.parents.get(original)
        if not isinstance(call, cst.Call) or not ctx.is_fn_ref(call.func):
            return None
        value = original.value
        if isinstance(value, cst.SimpleString):
            if value.evaluated_value != "mixed":
                return None
            quote = value.quote
            return updated.with_changes(value=value.with_changes(value=f"{value.prefix}{quote}gpu{quote}"))
        if isinstance(value, (cst.Name, cst.Attribute, cst.IfExp)):
            return ctx.todo(
                self.id,
                original,
                f"device={ctx.text(value)} may be \"mixed\", which dynamic mode rejects: use \"gpu\" there",
            )
        return None

    def edit(self, ctx: FileContext, original: cst.Arg, new: cst.Arg):
        return ctx.expr_edit(original.value, new.value)
