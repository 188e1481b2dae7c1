"""Adapters: how to build both sides of a migration the harness cannot map by name (written by
hand or by an agent: a class instead of a generator, other names, other arguments).

An adapter is a small Python file::

    NAME = "train"                      # optional: the name in the report (default: file stem)
    KWARGS = {"size": [28, 28]}         # optional: default arguments (literals); ``data_dir``
                                        # gets a synthetic dataset for OLD's first reader unless
                                        # given here or with --kwargs

    def build_old(old, **kwargs):       # old: the OLD module -> a Pipeline (built or not)
        return old.train_pipe(kwargs["data_dir"], size=tuple(kwargs["size"]))

    def new_batches(new, **kwargs):     # new: the NEW module -> batches of output tuples
        return new.TrainLoader(kwargs["data_dir"], size=tuple(kwargs["size"]))

``new_batches`` may return a generator or iterator, an iterable (iterated again when it ends,
epoch after epoch, as ``pipe.run()`` continues), or a callable returning one batch. Each batch
is a tuple of outputs in the order of OLD's outputs (``ndd.Batch``, ``ndd.Tensor``, numpy,
torch, or a list of per-sample arrays). Both modules are the harness's copies (lowered to CPU
on a machine without a GPU; the adapter itself is lowered too). Randomness needs nothing from
the adapter: whatever RNG the new code uses is recorded and replayed into OLD.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

__all__ = ["AdapterInfo", "load_adapter_info"]


@dataclass
class AdapterInfo:
    name: str
    kwargs: dict[str, Any] = field(default_factory=dict)


def load_adapter_info(source: str, default_name: str) -> AdapterInfo:
    """Check an adapter statically and read NAME/KWARGS."""
    tree = ast.parse(source)
    functions = {
        n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    missing = [f for f in ("build_old", "new_batches") if f not in functions]
    if missing:
        raise ValueError(
            f"the adapter defines no {' and no '.join(missing)}() (see "
            "dali_migrate.harness.adapters)"
        )
    info = AdapterInfo(default_name)
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            target = node.targets[0].id
            if target in ("NAME", "KWARGS"):
                try:
                    value = ast.literal_eval(node.value)
                except ValueError as e:
                    raise ValueError(f"the adapter's {target} must be a literal") from e
                if target == "NAME":
                    info.name = str(value)
                else:
                    info.kwargs = dict(value)
    return info
