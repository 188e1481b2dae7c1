"""Shared test fixtures: synthetic datasets generated once per test session.

The generator lives in the harness (``dali_migrate.harness.datasets``), which also makes the data
``dali-migrate verify`` feeds the pipelines it checks; one copy for both.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dali_migrate.harness.datasets import make_dataset as _make_dataset

#: the spec keys that decide a dataset's content (the rest of a data.json is about the test)
DATA_KEYS = ("kind", "classes", "per_class", "count", "shape", "dtype")


def make_dataset(spec: dict, root: Path) -> Path:
    """Write the synthetic data a data spec asks for under ``root``; returns ``root``.
    The kinds are documented in ``dali_migrate.harness.datasets``."""
    return _make_dataset(spec, root).root


@pytest.fixture(scope="session")
def synthetic_data(tmp_path_factory):
    """``synthetic_data(spec) -> Path``: the dataset for a data spec, generated once per session."""
    cache: dict[str, Path] = {}

    def get(spec: dict) -> Path:
        key = json.dumps({k: v for k, v in spec.items() if k in DATA_KEYS}, sort_keys=True)
        if key not in cache:
            cache[key] = make_dataset(spec, tmp_path_factory.mktemp("data") / "root")
        return cache[key]

    return get
