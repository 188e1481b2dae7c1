"""The differential harness: ``dali-migrate verify`` proves old and new compute the same thing.

Importing this package does not import DALI: only the subprocesses that run each side do.

    from dali_migrate import verify
    report = verify("old.py", "new.py", kwargs={"data_dir": "/data"})
    assert report.ok, report.to_json()
    report = verify_program("legacy/train.py", "train.py", args=["--epochs", "1"])  # whole programs
"""

from .compare import DEFAULT_TOLERANCES, Tolerances
from .program import verify_program
from .verify import (
    InputError,
    PipelineReport,
    VerifyDependencyError,
    VerifyOptions,
    VerifyReport,
    has_gpu,
    verify,
    verify_code,
)

__all__ = [
    "DEFAULT_TOLERANCES",
    "InputError",
    "PipelineReport",
    "Tolerances",
    "VerifyDependencyError",
    "VerifyOptions",
    "VerifyReport",
    "has_gpu",
    "verify",
    "verify_code",
    "verify_program",
]
