"""DM206: names a call binds to DALI (a wrapper import) are found, and only pipeline-mode API
reached through them is marked."""

from __future__ import annotations

from dali_migrate.api import migrate_source
from dali_migrate.context import wrapped_dali_imports


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
    }


def test_only_pipeline_mode_api_is_marked_and_nothing_else_changes() -> None:
    source = (
        "dali = try_import_dali()\n"
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
