"""dali-migrate: migrate NVIDIA DALI pipeline-mode code to dynamic mode (``ndd``).

The library API (it never prints and never exits; errors derive from :class:`MigrateError`)::

    from dali_migrate import migrate_source, apply_fixes, migrate_paths
    result = migrate_source(code)          # fixes, diagnostics and the migrated code
    subset = apply_fixes(code, [f.id for f in result.fixes if f.rule != "DM104"])
    for file in migrate_paths(["src/"]):   # FileResult per file, in parallel, nothing written
        print(file.path, file.status, [f.id for f in file.result.fixes] if file.result else file.error)
"""

from .api import apply_fixes, migrate_paths, migrate_source
from .engine import FileResult
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

__version__ = "0.1.0"


def __getattr__(name: str):
    # the harness (and libcst.matchers under it) is imported when first used: the migration
    # alone, and the CLI's start-up, do not need it
    if name == "verify":
        from .harness import verify

        return verify
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

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
