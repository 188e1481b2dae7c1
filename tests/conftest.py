"""Shared test fixtures: synthetic datasets generated once per test session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def make_dataset(spec: dict, root: Path) -> Path:
    """Write the synthetic data a data spec asks for under ``root``; deterministic content.

    * ``{"kind": "jpeg_folders", "classes": C, "per_class": N}``: ``class_<c>/img_<i>.jpg``, RGB
      JPEGs of varied sizes (20-60 px per side).
    * ``{"kind": "npy", "count": N, "shape": [...], "dtype": "uint8"}``: ``arr_<i>.npy``.
    """
    import numpy as np

    root.mkdir(parents=True, exist_ok=True)
    kind = spec["kind"]
    if kind == "jpeg_folders":
        from PIL import Image

        for c in range(spec["classes"]):
            folder = root / f"class_{c}"
            folder.mkdir()
            for i in range(spec["per_class"]):
                rng = np.random.default_rng(1000 * c + i)
                h, w = (int(v) for v in rng.integers(20, 61, size=2))
                yy, xx = np.mgrid[0:h, 0:w]
                img = np.stack(
                    [xx * 255 // w, yy * 255 // h, np.full((h, w), 60 * c + 10 * i)], axis=-1
                ) + rng.integers(0, 40, size=(h, w, 3))
                Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(folder / f"img_{i}.jpg", quality=90)
    elif kind == "npy":
        dtype = np.dtype(spec.get("dtype", "uint8"))
        for i in range(spec["count"]):
            rng = np.random.default_rng(i)
            np.save(root / f"arr_{i:03d}.npy", rng.integers(0, 100, size=spec["shape"]).astype(dtype))
    else:
        raise ValueError(f"unknown synthetic data kind {kind!r}")
    return root


@pytest.fixture(scope="session")
def synthetic_data(tmp_path_factory):
    """``synthetic_data(spec) -> Path``: the dataset for a data spec, generated once per session."""
    cache: dict[str, Path] = {}

    def get(spec: dict) -> Path:
        key = json.dumps({k: v for k, v in spec.items() if k in ("kind", "classes", "per_class", "count", "shape", "dtype")}, sort_keys=True)
        if key not in cache:
            cache[key] = make_dataset(spec, tmp_path_factory.mktemp("data") / "root")
        return cache[key]

    return get
