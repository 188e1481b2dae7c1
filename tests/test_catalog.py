"""Tests for dali_migrate.catalog and the committed catalog data (scripts/gen_catalog.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from dali_migrate.catalog import (
    KINDS,
    REMOVED_OPS_CLASSES,
    Catalog,
    OpInfo,
    get_catalog,
    load_catalog_data,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
GENERATOR = REPO_ROOT / "scripts" / "gen_catalog.py"
COMMITTED = REPO_ROOT / "src" / "dali_migrate" / "data" / "catalog.json"
PINNED_DALI = "2.4.0"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return get_catalog()


# ---------------------------------------------------------------------------------------------
# Loader
# ---------------------------------------------------------------------------------------------


def test_committed_version_is_pinned(catalog: Catalog) -> None:
    assert catalog.dali_version == PINNED_DALI
    assert json.loads(COMMITTED.read_text(encoding="utf-8"))["dali_version"] == PINNED_DALI


def test_get_catalog_is_cached() -> None:
    assert get_catalog() is get_catalog()


def test_committed_file_is_canonical_json() -> None:
    text = COMMITTED.read_text(encoding="utf-8")
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=1) + "\n"
    assert load_catalog_data()["generated_by"] == "scripts/gen_catalog.py"


def test_readers_file(catalog: Catalog) -> None:
    op = catalog.fn("readers.file")
    assert isinstance(op, OpInfo)
    assert op.ndd_path == "readers.File"
    assert op.kind == "reader" and op.is_reader and not op.is_random
    assert op.schema == "readers__File"
    assert op.deprecated_in is None and op.modern is None
    assert op.target is op and op.ndd_target == "readers.File"
    assert op.inputs == (0, 0)
    assert op.num_outputs == 2
    assert op.backends == ("cpu",)


def test_file_reader_alias_targets_readers_file(catalog: Catalog) -> None:
    op = catalog.fn("file_reader")
    assert op is not None
    assert op.ndd_path is None
    assert op.is_reader
    assert op.deprecated_in == "1.0"
    assert op.modern == "readers.file"
    assert op.target.fn_path == "readers.file"
    assert op.ndd_target == "readers.File"


def test_image_decoder_targets_decoders_image(catalog: Catalog) -> None:
    op = catalog.fn("image_decoder")
    assert op is not None and op.ndd_path is None and op.kind == "decoder"
    assert op.target.fn_path == "decoders.image"
    assert op.ndd_target == "decoders.image"
    modern = catalog.fn("decoders.image")
    assert modern is not None
    assert modern.ndd_path == "decoders.image"
    assert modern.backends == ("cpu", "mixed")
    assert modern.inputs == (1, 1)


def test_coin_flip_is_random(catalog: Catalog) -> None:
    op = catalog.fn("coin_flip")
    assert op is not None and op.is_random and op.ndd_path is None
    assert op.modern == "random.coin_flip"
    assert op.ndd_target == "random.coin_flip"
    modern = catalog.fn("random.coin_flip")
    assert modern is not None and modern.is_random and modern.ndd_path == "random.coin_flip"


@pytest.mark.parametrize(
    "path",
    [
        "decoders.image_random_crop",
        "random_resized_crop",
        "noise.gaussian",
        "random_bbox_crop",
        "batch_permutation",
        "jitter",
        "image_decoder_random_crop",
        "uniform",
        "random.uniform",
    ],
)
def test_random_ops(catalog: Catalog, path: str) -> None:
    op = catalog.fn(path)
    assert op is not None and op.is_random, path


def test_missing_ops(catalog: Catalog) -> None:
    shapes = catalog.fn("shapes")
    assert shapes is not None
    assert shapes.ndd_path is None and shapes.ndd_target is None
    assert shapes.deprecated_in is not None and shapes.modern is None
    for path in ("python_function", "dl_tensor_python_function", "external_source", "constant"):
        op = catalog.fn(path)
        assert op is not None and op.ndd_path is None and op.target is op, path
    # deprecated reader whose modern name has no ndd counterpart either
    seq = catalog.fn("sequence_reader")
    assert seq is not None and seq.target.fn_path == "readers.sequence"
    assert seq.ndd_target is None


def test_unknown_paths(catalog: Catalog) -> None:
    assert catalog.fn("no_such_op") is None
    assert catalog.fn("hidden.file_reader") is None  # hidden duplicates are left out
    assert catalog.ops_class("NoSuchClass") is None
    assert not catalog.has_math("no_such_function")


def test_ops_classes(catalog: Catalog) -> None:
    legacy = catalog.ops_class("FileReader")
    assert legacy is not None and legacy.fn_path == "file_reader"
    assert legacy.ndd_target == "readers.File"
    modern = catalog.ops_class("readers.File")
    assert modern is not None and modern.fn_path == "readers.file"
    assert modern.ndd_path == "readers.File"
    expected = {
        "ImageDecoder": "image_decoder",
        "decoders.Image": "decoders.image",
        "Uniform": "uniform",
        "random.Uniform": "random.uniform",
        "CoinFlip": "coin_flip",
        "CropMirrorNormalize": "crop_mirror_normalize",
        "ExternalSource": "external_source",
    }
    for cls, fn_path in expected.items():
        op = catalog.ops_class(cls)
        assert op is not None and op.fn_path == fn_path, cls
    assert catalog.ops_class("Uniform").ndd_target == "random.uniform"  # type: ignore[union-attr]


def test_math(catalog: Catalog) -> None:
    for name in ("abs", "sqrt", "clamp", "max", "min", "pow", "atan2"):
        assert catalog.has_math(name), name


def test_entries_are_consistent(catalog: Catalog) -> None:
    ops = list(catalog)
    assert [op.fn_path for op in ops] == sorted(op.fn_path for op in ops)
    for op in ops:
        assert op.kind in KINDS
        assert 0 <= op.inputs[0] <= op.inputs[1]
        assert op.backends and list(op.backends) == sorted(op.backends)
        assert op.num_outputs is None or op.num_outputs >= 1
        if op.modern is not None:
            assert catalog.fn(op.modern) is not None, op.fn_path
        if op.ndd_path is not None and op.is_reader:
            assert op.ndd_path.split(".")[-1][0].isupper(), op.fn_path  # readers are classes
    ndd_paths = [op.ndd_path for op in ops if op.ndd_path is not None]
    assert len(ndd_paths) == len(set(ndd_paths))


def test_counts_match_semantics_report(catalog: Catalog) -> None:
    """The operator counts of DALI 2.4.0, established by probing its fn and ndd modules."""
    ops = list(catalog)
    assert len(ops) == 172  # 199 fn callables less 27 fn.hidden duplicates
    present = Counter(op.kind for op in ops if op.ndd_path is not None)
    missing = Counter(op.kind for op in ops if op.ndd_path is None)
    assert sum(present.values()) == 136
    assert sum(missing.values()) == 36
    assert present == {"op": 95, "decoder": 10, "random": 18, "reader": 13}
    assert missing == {"op": 13, "decoder": 6, "random": 5, "reader": 12}
    assert sum(1 for op in ops if op.ndd_path is None and op.deprecated_in is not None) == 31
    not_deprecated_missing = {
        op.fn_path for op in ops if op.ndd_path is None and op.deprecated_in is None
    }
    assert not_deprecated_missing == {
        "external_source",
        "python_function",
        "dl_tensor_python_function",
        "constant",
        "experimental.inputs.video",
    }
    # the modern name of every missing deprecated alias is in ndd, except these three
    no_modern = {
        op.fn_path
        for op in ops
        if op.ndd_path is None and op.deprecated_in is not None and op.ndd_target is None
    }
    assert no_modern == {"readers.sequence", "sequence_reader", "shapes"}


# ---------------------------------------------------------------------------------------------
# Drift: the committed file must be what the generator makes from the installed DALI
# ---------------------------------------------------------------------------------------------


@pytest.mark.dali
def test_committed_catalog_matches_installed_dali(tmp_path: Path) -> None:
    dali = pytest.importorskip("nvidia.dali")
    if dali.__version__ != PINNED_DALI:
        pytest.skip(f"catalog is pinned to DALI {PINNED_DALI}, installed {dali.__version__}")
    out = tmp_path / "catalog.json"
    result = subprocess.run(
        [sys.executable, str(GENERATOR), "--output", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr, result.stderr
    assert out.read_bytes() == COMMITTED.read_bytes(), (
        "src/dali_migrate/data/catalog.json is stale: run scripts/gen_catalog.py"
    )


@pytest.mark.dali
def test_generator_refuses_other_pinned_version(tmp_path: Path) -> None:
    pytest.importorskip("nvidia.dali")
    out = tmp_path / "catalog.json"
    data = json.loads(COMMITTED.read_text(encoding="utf-8"))
    data["dali_version"] = "0.0.1"
    stale = json.dumps(data, sort_keys=True, indent=1) + "\n"
    out.write_text(stale, encoding="utf-8")
    for extra in ([], ["--check"]):
        result = subprocess.run(
            [sys.executable, str(GENERATOR), "--output", str(out), *extra],
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
            timeout=600,
        )
        assert result.returncode == 2, result.stderr
        assert "--force" in result.stderr
    assert out.read_text(encoding="utf-8") == stale  # untouched


@pytest.mark.dali
def test_generator_check_reports_stale_file(tmp_path: Path) -> None:
    pytest.importorskip("nvidia.dali")
    out = tmp_path / "catalog.json"
    data = json.loads(COMMITTED.read_text(encoding="utf-8"))
    data["operators"]["readers.file"]["ndd"] = "readers.Wrong"
    out.write_text(json.dumps(data, sort_keys=True, indent=1) + "\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(GENERATOR), "--output", str(out), "--check"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=600,
    )
    assert result.returncode == 1, result.stderr
    assert "readers.file" in result.stderr


def test_removed_ops_classes_are_the_classes_that_replaced_them(catalog: Catalog) -> None:
    """ops.nvJPEGDecoder and the other removed decoder classes are the ImageDecoder* operator that
    replaced each; the old names are not in the generated data, the new ones are."""
    classes = load_catalog_data()["ops_classes"]
    for old, new in REMOVED_OPS_CLASSES.items():
        assert old not in classes and new in classes
        assert catalog.ops_class(old) == catalog.ops_class(new)
    decoder = catalog.ops_class("nvJPEGDecoder")
    assert decoder is not None and decoder.ndd_target == "decoders.image"
    assert catalog.ops_class("NoSuchDecoder") is None
