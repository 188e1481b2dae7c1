"""Names a call binds to DALI (a wrapper import) are found and followed as the module they stand
for; DM206 marks the pipeline-mode API reached through those the tool does not follow."""

from __future__ import annotations

import sys

import libcst as cst
import pytest

from dali_migrate.api import migrate_source
from dali_migrate.context import FileContext
from dali_migrate.partial_parse import wrapped_dali_imports, wrapper_module


def test_wrapper_calls_and_named_imports_are_found() -> None:
    source = (
        "import importlib, pytest\n"
        "dali = try_import_dali()\n"
        "fn = importlib.import_module('nvidia.dali.fn')\n"
        "dyn = pytest.importorskip('nvidia.dali.experimental.dynamic')\n"
        "np = importlib.import_module('numpy')\n"
        "def f():\n    local = try_import_dali()\n"
    )
    found = wrapped_dali_imports(source)
    assert {k: v[1] for k, v in found.items()} == {
        "dali": "nvidia.dali",
        "fn": "nvidia.dali.fn",
        "dyn": "nvidia.dali.experimental.dynamic",
        "local": "nvidia.dali",
    }


def test_only_pipeline_mode_api_is_marked_and_nothing_else_changes() -> None:
    # the name says it imports DALI, but not which module: not followed, marked
    source = (
        "dali = import_dali_lazily()\n"
        "FLOAT = dali.types.FLOAT\n"
        "def pipe(root):\n"
        "    return dali.fn.readers.file(file_root=root)\n"
        "def dyn(x):\n"
        "    return dali.experimental.dynamic.flip(x)\n"
    )
    out = migrate_source(source).code
    todos = [line.strip() for line in out.splitlines() if "TODO(dali-migrate)" in line]
    assert len(todos) == 1 and "DM206" in todos[0] and "`dali.fn.readers.file`" in todos[0]
    assert [line for line in out.splitlines() if "TODO" not in line] == source.splitlines()
    assert migrate_source(out).code == out


@pytest.mark.parametrize(
    ("func", "first", "module"),
    [
        ("import_module", "nvidia.dali.fn", "nvidia.dali.fn"),
        ("importorskip", "nvidia.dali", "nvidia.dali"),
        ("OptionalImport", "nvidia.dali.plugin.pytorch", "nvidia.dali.plugin.pytorch"),
        ("import_module", "numpy", None),
        ("import_module", "nvidia.dalix", None),
        ("get_version", "nvidia.dali", None),  # no "import" in the name: not an import
        ("__import__", "nvidia.dali", None),  # returns the top package
        ("try_import_dali", None, "nvidia.dali"),
        ("tryImportDALI", None, "nvidia.dali"),
        ("import_nvidia_dali", None, "nvidia.dali"),
        ("try_import_dali", "nvidia.dali.fn", "nvidia.dali.fn"),
        ("try_import_dali", "2.4", None),
        ("import_dali_tf", None, None),  # some other module of DALI
        ("dali_import", None, None),
    ],
)
def test_which_calls_are_followed(func: str, first: str | None, module: str | None) -> None:
    assert wrapper_module(func, first) == module


def _qualnames(source: str) -> dict[str, str | None]:
    ctx = FileContext(source)
    return {
        ctx.text(n): ctx.qualname(n)
        for n in ctx.nodes_of(cst.Attribute)
        if not isinstance(ctx.parents.get(n), cst.Attribute)
    }


def test_followed_names_resolve_as_imports_in_every_scope() -> None:
    source = (
        "import importlib\n"
        "from pytest import importorskip\n"
        "dali = try_import_dali()\n"
        "class P(dali.Pipeline):\n"
        "    def f(self):\n"
        "        return dali.ops.Flip()\n"
        "def g():\n"
        "    fn = importlib.import_module('nvidia.dali.fn')\n"
        "    return fn.decoders.image\n"
        "def h():\n"
        "    plug: object = importorskip('nvidia.dali.plugin.pytorch')\n"
        "    return plug.DALIGenericIterator\n"
    )
    assert _qualnames(source) == {
        "dali.Pipeline": "nvidia.dali.Pipeline",
        "dali.ops.Flip": "nvidia.dali.ops.Flip",
        "importlib.import_module": None,
        "fn.decoders.image": "nvidia.dali.fn.decoders.image",
        "plug.DALIGenericIterator": "nvidia.dali.plugin.pytorch.DALIGenericIterator",
    }


def test_shadowed_or_ambiguous_names_are_not_followed() -> None:
    source = (
        "import importlib\n"
        "dali = try_import_dali()\n"
        "def shadowed(dali):\n"
        "    return dali.fn.flip\n"
        "def two():\n"
        "    m = importlib.import_module('nvidia.dali.fn')\n"
        "    if m:\n"
        "        m = importlib.import_module('nvidia.dali.ops')\n"
        "    return m.flip\n"
        "def fallback():\n"
        "    try:\n"
        "        f = importlib.import_module('nvidia.dali.fn')\n"
        "    except ImportError:\n"
        "        f = None\n"
        "    return f.flip\n"
    )
    names = _qualnames(source)
    assert names["dali.fn.flip"] is None
    assert names["m.flip"] is None
    assert names["f.flip"] == "nvidia.dali.fn.flip"  # the fallback binding is passed over


_OPTIONAL = {
    "wrapper named for DALI": (
        "def try_import_dali():\n"
        "    try:\n"
        "        import nvidia.dali as dali\n"
        "    except ImportError:\n"
        "        return None\n"
        "    return dali\n"
        "dali = try_import_dali()\n"
        "def flip(x):\n"
        "    return dali.fn.flip(x, horizontal=1)\n",
        "dali = try_import_dali()\ntry:\n    import nvidia.dali.experimental.dynamic as ndd\n",
    ),
    "try block": (
        "try:\n"
        "    import nvidia.dali.fn as fn\n"
        "except ImportError:\n"
        "    fn = None\n"
        "def flip(x):\n"
        "    return fn.flip(x, horizontal=1)\n",
        # `fn = None` still binds fn: its import stays
        "    import nvidia.dali.fn as fn\n    import nvidia.dali.experimental.dynamic as ndd\n",
    ),
    "local import": (
        "import math\n"
        "def flip(x):\n"
        "    from nvidia.dali import fn\n"
        "    return fn.flip(x, horizontal=math.floor(1.5))\n",
        "def flip(x):\n    import nvidia.dali.experimental.dynamic as ndd\n",
    ),
}


@pytest.mark.parametrize("case", sorted(_OPTIONAL))
def test_ndd_is_imported_the_way_dali_was(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    source, placed = _OPTIONAL[case]
    out = migrate_source(source).code
    assert placed in out and "ndd.flip(" in out
    # the migrated module still imports where DALI is not installed
    for name in [m for m in sys.modules if m == "nvidia" or m.startswith("nvidia.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "nvidia", None)  # import nvidia... raises ImportError
    exec(compile(out, "<migrated>", "exec"), {"__name__": "migrated"})


def test_the_harness_keeps_wrapper_imports_when_it_strips_entry_points() -> None:
    from dali_migrate.harness.lower import strip_entry_points

    source = (
        "def try_import_dali():\n"
        "    import nvidia.dali\n"
        "    return nvidia.dali\n"
        "def main():\n"
        "    return 1\n"
        "dali = try_import_dali()\n"
        "result = main()\n"
    )
    kept = strip_entry_points(source)
    assert "dali = try_import_dali()" in kept and "result = main()" not in kept
