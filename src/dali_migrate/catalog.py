"""The operator catalog: what every DALI pipeline-mode operator is called in dynamic mode (ndd).

The data (``data/catalog.json``) is generated from an installed DALI by
``scripts/gen_catalog.py``; this module only reads it, with the standard library, so it works
where DALI is not installed. Paths are relative to their module: ``fn("readers.file")`` is
``nvidia.dali.fn.readers.file``, whose ``ndd_path`` ``"readers.File"`` is
``nvidia.dali.experimental.dynamic.readers.File``; ``ops_class("FileReader")`` is
``nvidia.dali.ops.FileReader``.

Deprecated aliases (``fn.file_reader``, ``fn.coin_flip``...) are not in ndd; :attr:`OpInfo.target`
follows them to the operator users should call instead.

Operator classes DALI removed long ago are not in the generated data; :data:`REMOVED_OPS_CLASSES`
names the class that replaced each, and :meth:`Catalog.ops_class` follows it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["OpInfo", "Catalog", "get_catalog", "KINDS", "REMOVED_OPS_CLASSES"]

#: The values of :attr:`OpInfo.kind`.
KINDS = ("reader", "random", "decoder", "op")

#: ``nvidia.dali.ops`` classes DALI removed, and the class that replaced each (a path relative to
#: ``nvidia.dali.ops``). Only renames whose replacement is the same operator: before removing the
#: nvJPEG (mixed) and host (CPU) decoders in favour of ``ImageDecoder*``, DALI 0.x registered each
#: old implementation under both names (the old schema marked deprecated, "use ImageDecoder...
#: instead"), so the new name with the same ``device=`` runs the same decoder.
REMOVED_OPS_CLASSES: Mapping[str, str] = {
    "nvJPEGDecoder": "ImageDecoder",
    "nvJPEGDecoderCrop": "ImageDecoderCrop",
    "nvJPEGDecoderRandomCrop": "ImageDecoderRandomCrop",
    "nvJPEGDecoderSlice": "ImageDecoderSlice",
    "HostDecoder": "ImageDecoder",
    "HostDecoderCrop": "ImageDecoderCrop",
    "HostDecoderRandomCrop": "ImageDecoderRandomCrop",
    "HostDecoderSlice": "ImageDecoderSlice",
}


@dataclass(frozen=True)
class OpInfo:
    """One ``nvidia.dali.fn`` operator, as the catalog describes it."""

    fn_path: str  #: path relative to ``nvidia.dali.fn``, e.g. ``"readers.file"``
    ndd_path: str | None  #: path relative to ndd, e.g. ``"readers.File"``; None if ndd lacks it
    kind: str  #: one of :data:`KINDS`
    schema: str  #: DALI schema name, e.g. ``"readers__File"``
    deprecated_in: str | None  #: DALI version that deprecated the operator
    modern: str | None  #: fn path of the replacement of a deprecated operator
    inputs: tuple[int, int]  #: (min, max) number of positional data inputs
    num_outputs: int | None  #: number of outputs when the schema fixes it
    backends: tuple[str, ...]  #: sorted, e.g. ``("cpu", "mixed")``
    _table: Mapping[str, OpInfo] = field(
        default_factory=dict, repr=False, compare=False, hash=False
    )

    @property
    def target(self) -> OpInfo:
        """The operator users should call: ``modern`` followed transitively (self if none)."""
        op = self
        seen = {op.fn_path}
        while op.modern is not None and op.modern not in seen:
            nxt = self._table.get(op.modern)
            if nxt is None:
                break
            seen.add(nxt.fn_path)
            op = nxt
        return op

    @property
    def ndd_target(self) -> str | None:
        """The ndd path of :attr:`target`; None if dynamic mode has no equivalent."""
        return self.target.ndd_path

    @property
    def is_reader(self) -> bool:
        return self.kind == "reader"

    @property
    def is_random(self) -> bool:
        """Takes ``seed=`` in pipeline mode, ``rng=`` in ndd."""
        return self.kind == "random"

    @property
    def is_decoder(self) -> bool:
        return self.kind == "decoder"

    @property
    def is_deprecated(self) -> bool:
        return self.deprecated_in is not None or self.modern is not None


class Catalog:
    """Lookup tables over the catalog data; see :func:`get_catalog`."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.dali_version: str = data["dali_version"]
        table: dict[str, OpInfo] = {}
        for path, entry in data["operators"].items():
            table[path] = OpInfo(
                fn_path=path,
                ndd_path=entry["ndd"],
                kind=entry["kind"],
                schema=entry["schema"],
                deprecated_in=entry["deprecated_in"],
                modern=entry["modern"],
                inputs=(entry["inputs"][0], entry["inputs"][1]),
                num_outputs=entry["num_outputs"],
                backends=tuple(entry["backends"]),
                _table=table,
            )
        self._ops = table
        self._ops_classes: dict[str, str] = dict(data["ops_classes"])
        self._math: frozenset[str] = frozenset(data["math"])

    def fn(self, path: str) -> OpInfo | None:
        """The operator at ``nvidia.dali.fn.<path>``, e.g. ``"readers.file"``, ``"file_reader"``."""
        return self._ops.get(path)

    def ops_class(self, path: str) -> OpInfo | None:
        """The operator behind the class ``nvidia.dali.ops.<path>``, e.g. ``"FileReader"``; a class
        DALI removed (:data:`REMOVED_OPS_CLASSES`) is the operator of the class that replaced it."""
        fn_path = self._ops_classes.get(path)
        if fn_path is None and path in REMOVED_OPS_CLASSES:
            fn_path = self._ops_classes.get(REMOVED_OPS_CLASSES[path])
        return None if fn_path is None else self._ops.get(fn_path)

    def has_math(self, name: str) -> bool:
        """Whether ``nvidia.dali.math.<name>`` exists as ``ndd.math.<name>``."""
        return name in self._math

    def __iter__(self) -> Iterator[OpInfo]:
        return iter(self._ops[path] for path in sorted(self._ops))

    def __len__(self) -> int:
        return len(self._ops)

    def __repr__(self) -> str:
        return f"<Catalog DALI {self.dali_version}: {len(self._ops)} operators>"


def load_catalog_data() -> dict[str, Any]:
    """The raw JSON of the packaged catalog."""
    try:
        ref: Any = resources.files("dali_migrate") / "data" / "catalog.json"
    except TypeError:  # Python 3.10 without dali_migrate/__init__.py: not a resource package
        ref = Path(__file__).with_name("data") / "catalog.json"
    return json.loads(ref.read_text(encoding="utf-8"))


@functools.cache
def get_catalog() -> Catalog:
    """The packaged catalog (loaded once)."""
    return Catalog(load_catalog_data())
