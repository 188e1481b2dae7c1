"""What the pipeline-mode API is, by name: the one table the codemod, the project discovery and
the harness share. Operators (readers, random operators, aliases) are in the generated catalog
(:mod:`dali_migrate.catalog`); this module names the rest.
"""

from __future__ import annotations

NDD_MODULE = "nvidia.dali.experimental.dynamic"

#: the qualified names of the ``pipeline_def`` decorator
PIPELINE_DEFS = frozenset(
    {
        "nvidia.dali.pipeline_def",
        "nvidia.dali.pipeline.pipeline_def",
        "nvidia.dali.pipeline.experimental.pipeline_def",
        "nvidia.dali.experimental.pipeline_def",
    }
)
#: the qualified names of the ``Pipeline`` class
PIPELINE_CLASSES = frozenset({"nvidia.dali.Pipeline", "nvidia.dali.pipeline.Pipeline"})

#: the positional parameters of ``Pipeline.__init__`` (DALI 2.4), in order
PIPELINE_POSITIONAL = (
    "batch_size",
    "num_threads",
    "device_id",
    "seed",
    "exec_pipelined",
    "prefetch_queue_depth",
    "exec_async",
    "bytes_per_sample",
    "set_affinity",
    "max_streams",
    "default_cuda_stream_priority",
)


def is_pipeline_def(dotted: str | None) -> bool:
    """``dotted`` (a qualified name, or a name as written where imports are not resolved) names
    the ``pipeline_def`` decorator."""
    if not dotted:
        return False
    return dotted in PIPELINE_DEFS or dotted.split(".")[-1] == "pipeline_def"


def is_pipeline_class(dotted: str | None) -> bool:
    """``dotted`` (as :func:`is_pipeline_def`) names the ``Pipeline`` class."""
    if not dotted:
        return False
    return dotted in PIPELINE_CLASSES or dotted.split(".")[-1] == "Pipeline"
