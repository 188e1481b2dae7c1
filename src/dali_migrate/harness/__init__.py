"""The differential harness: ``dali-migrate verify`` proves old and new compute the same thing.

Importing this package does not import DALI: only the subprocesses that run each side do.

    from dali_migrate import verify
    report = verify("old.py", "new.py", kwargs={"data_dir": "/data"})
    assert report.ok, report.to_json()
"""

from .compare import DEFAULT_TOLERANCES, Tolerances
from .verify import PipelineReport, VerifyReport, has_gpu, verify, verify_code

__all__ = ["DEFAULT_TOLERANCES", "PipelineReport", "Tolerances", "VerifyReport", "has_gpu", "verify", "verify_code"]
