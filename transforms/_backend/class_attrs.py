"""Attributes of a ``Pipeline`` subclass that become local names of the merged graph function
(DM202) and need another name there: a local name of the merged code (a parameter of a base's
``__init__``, a variable) is spelled the same and holds another value.

Before (the bases' ``__init__`` inlined)::

    input_shape = flags.val_input_shape      # the base's parameter, given by the subclass
    self.input_shape = flags.input_shape
    self.crop = ops.Crop(crop=input_shape)

After (``self.input_shape`` would have overwritten the parameter that ``crop`` reads)::

    input_shape = flags.val_input_shape
    self_input_shape = flags.input_shape
    ... ndd.crop(x, crop=input_shape)

An attribute only ever set to the name it is spelled as (``self.size = size``), or whose name
``__init__`` reads only in the value it gives it (``self.dataset = iter(dataset)``), keeps the
name.
"""

from __future__ import annotations

import libcst as cst

from .._cst import fresh_name, walk
from .class_calls import is_self_attr


def renamed_attrs(
    attrs: set[str], init: cst.FunctionDef, local_names: set[str], taken: set[str]
) -> dict[str, str]:
    """The attributes of ``attrs`` that take another local name (old -> new): those spelled as a
    parameter or variable of the merged ``__init__`` (``local_names``: its names) that its code
    reads elsewhere than in the value given to the attribute (``self.x = x.lower()`` can become
    ``x = x.lower()``). ``taken``: the names the merged code uses, which gets the new ones."""
    out: dict[str, str] = {}
    for name in sorted(attrs & local_names):
        if _read_apart(init.body, name) and not _identity_only(init, name):
            out[name] = fresh_name(f"self_{name}", taken)
    return out


def _read_apart(node: cst.CSTNode, name: str) -> bool:
    """``name`` is read in ``node`` outside the statements that set ``self.<name>``."""
    if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
        targets = node.targets if isinstance(node, cst.Assign) else [node]
        if any(_names_attr(t.target, name) for t in targets):
            return False
        if isinstance(node, cst.Assign):  # a plain `name = ...` binds it: only its value reads
            return node.value is not None and _read_apart(node.value, name)
    if isinstance(node, cst.Attribute):
        return _read_apart(node.value, name)
    if isinstance(node, cst.Name):
        return node.value == name
    if isinstance(node, (cst.FunctionDef, cst.Lambda)):
        return False  # (their parameters shadow it; the tool reads nested code elsewhere)
    return any(_read_apart(c, name) for c in node.children)


def _identity_only(init: cst.FunctionDef, name: str) -> bool:
    """Every statement of ``init`` that sets ``self.<name>`` is ``self.<name> = <name>``."""
    for node in walk(init.body):
        if isinstance(node, (cst.AugAssign, cst.AnnAssign)) and _names_attr(node.target, name):
            return False
        if isinstance(node, cst.Assign) and any(_names_attr(t.target, name) for t in node.targets):
            if len(node.targets) != 1 or not (
                is_self_attr(node.targets[0].target)
                and isinstance(node.value, cst.Name)
                and node.value.value == name
            ):
                return False
    return True


def _names_attr(target: cst.CSTNode, name: str) -> bool:
    return any(is_self_attr(n) and n.attr.value == name for n in walk(target))
