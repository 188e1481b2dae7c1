"""dali-migrate: migrate NVIDIA DALI pipeline-mode code to dynamic mode (``ndd``).

The library API::

    from dali_migrate import migrate_source, apply_fixes
    result = migrate_source(code)          # fixes, diagnostics and the migrated code
    subset = apply_fixes(code, [f.id for f in result.fixes if f.rule != "DM104"])
"""

from .api import apply_fixes, migrate_source
from .harness import verify
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

__all__ = [
    "Diagnostic",
    "Edit",
    "Fix",
    "MigrateError",
    "MissingDependencyError",
    "Result",
    "SourceParseError",
    "Span",
    "UnknownFixError",
    "apply_fixes",
    "migrate_source",
    "verify",
    "__version__",
]
