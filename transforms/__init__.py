"""The rules of dali-migrate, one module each. ``RULES`` is the registry the engine reads."""

from __future__ import annotations

from .constants import Constants
from .fn_to_ndd import FnToNdd
from .imports import Imports
from .leftovers import Leftovers
from .mixed_device import MixedDevice
from .node_indexing import NodeIndexing
from .pipeline_class import PipelineClass
from .pipeline_def import PipelineDef
from .pipeline_object import PipelineObject
from .pipeline_uses import PipelineUses
from .python_function import PythonFunction
from .random_ops import RandomOps
from .shapes import Shapes
from .wrapped_imports import WrappedImports

#: every rule, structural ones first (they claim the code they own before local rules run)
RULES = [
    PipelineDef,
    PipelineObject,
    PipelineClass,
    PipelineUses,
    Imports,
    FnToNdd,
    MixedDevice,
    NodeIndexing,
    RandomOps,
    PythonFunction,
    Shapes,
    Constants,
    Leftovers,
    WrappedImports,
]

__all__ = ["RULES", *(rule.__name__ for rule in RULES)]
