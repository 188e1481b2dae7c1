"""The rules of dali-migrate, one module each. ``RULES`` is the registry the engine reads."""

from __future__ import annotations

from .fn_to_ndd import FnToNdd
from .imports import Imports
from .mixed_device import MixedDevice
from .node_indexing import NodeIndexing
from .pipeline_class import PipelineClass
from .pipeline_def import PipelineDef
from .python_function import PythonFunction
from .pipeline_object import PipelineObject
from .random_ops import RandomOps
from .shapes import Shapes
from .constants import Constants

#: every rule, structural ones first (they claim the code they own before local rules run)
RULES = [PipelineDef, PipelineObject, PipelineClass, Imports, FnToNdd, MixedDevice, NodeIndexing, RandomOps, PythonFunction, Shapes, Constants]

__all__ = ["RULES", "FnToNdd", "Imports", "MixedDevice", "NodeIndexing", "PipelineClass", "PipelineDef", "PipelineObject", "RandomOps", "PythonFunction", "Shapes", "Constants"]
