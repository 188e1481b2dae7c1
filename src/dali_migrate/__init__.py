"""dali-migrate: migrate NVIDIA DALI pipeline-mode code to dynamic mode (``ndd``).

The library API (it never prints and never exits; errors derive from :class:`MigrateError`)::

    from dali_migrate import migrate_source, apply_fixes, migrate_paths
    result = migrate_source(code)          # fixes, diagnostics and the migrated code
    subset = apply_fixes(code, [f.id for f in result.fixes if f.rule != "DM104"])
    for file in migrate_paths(["src/"]):   # FileResult per file, in parallel, nothing written
        fixes = [f.id for f in file.result.fixes] if file.result else file.error
        print(file.path, file.status, fixes)
"""

from typing import TYPE_CHECKING

from .fixes import (
    Diagnostic,
    Edit,
    Fix,
    MigrateError,
    MissingDependencyError,
    Result,
    SourceParseError,
    Span,
    UnknownFixError,
)

if TYPE_CHECKING:
    from .api import apply_fixes, migrate_source
    from .engine import FileResult, migrate_paths
    from .harness import verify

__version__ = "0.1.0"

#: names imported when first used (libcst and the rest of the migration load in about a third
#: of a second: the command line must be able to take a Ctrl-C quietly while they do)
_LAZY = {
    "apply_fixes": "api",
    "migrate_paths": "engine",
    "migrate_source": "api",
    "FileResult": "engine",
    "verify": "harness",  # (libcst.matchers under it) neither the migration nor the CLI needs it
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "Diagnostic",
    "Edit",
    "FileResult",
    "Fix",
    "MigrateError",
    "MissingDependencyError",
    "Result",
    "SourceParseError",
    "Span",
    "UnknownFixError",
    "apply_fixes",
    "migrate_paths",
    "migrate_source",
    "verify",
    "__version__",
]
