"""The plain data the back end's stages pass on: what was recognised (a graph, its readers, the
pipeline objects and their uses) and what is planned for it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from dali_migrate.catalog import OpInfo
from dali_migrate.fixes import Edit


class Refused(Exception):
    """The pipeline cannot be migrated safely; the message says why."""


@dataclass
class ReaderUse:
    """``jpegs, labels = fn.readers.file(...)``: a reader in the graph code."""

    stmt: cst.SimpleStatementLine
    target: cst.BaseAssignTargetExpression
    call: cst.Call
    op: OpInfo


@dataclass
class Graph:
    """The code that builds one pipeline's graph: the body of ``container`` (a function, or a
    ``with pipe:`` block), whose ``outputs_stmt`` (``return ...`` / ``pipe.set_outputs(...)``)
    names the ``outputs``."""

    container: cst.CSTNode
    docstring: cst.BaseStatement | None
    body: list[cst.BaseStatement]
    outputs_stmt: cst.SimpleStatementLine
    outputs: list[cst.BaseExpression]
    readers: list[ReaderUse]
    #: external sources (``external_source.SourceUse``)
    sources: list[Any] = field(default_factory=list)
    #: filled by the emitter: edits outside the graph code that belong to the same fix
    #: (helpers that now take the RNG), and the nodes they cover (claimed by the rule)
    extra_edits: list[Edit] = field(default_factory=list)
    claimed: list[cst.CSTNode] = field(default_factory=list)
    #: filled by the emitter: "readers" (the reader variables) and "rng" (the RNG's), for the
    #: code that needs a handle on them (``handles``)
    handles: dict[str, Any] = field(default_factory=dict)


@dataclass
class Instance:
    """``pipe = train_pipe(...)``: one pipeline object and what is done with it."""

    stmt: cst.SimpleStatementLine
    assign: cst.Assign
    call: cst.Call
    kwargs: dict[str, cst.Arg]
    builds: list[cst.SimpleStatementLine] = field(default_factory=list)
    runs: list[cst.Call] = field(default_factory=list)
    device_todo: str | None = None
    #: framework iterators over the pipeline (``iterators.IteratorUse``)
    iterators: list[Any] = field(default_factory=list)
    #: ``pipe.epoch_size()``/``reader_meta()`` and ``pipe.checkpoint()`` calls, ``pipe.reset()``
    #: statements (recorded with ``handles``)
    meta_calls: list[cst.Call] = field(default_factory=list)
    checkpoints: list[cst.Call] = field(default_factory=list)
    resets: list[cst.SimpleStatementLine] = field(default_factory=list)
    #: the names the call site binds to the handles the migrated function returns, in order
    handle_names: dict[str, str] = field(default_factory=dict)
    #: the name= of the pipeline's reader (the key of ``pipe.epoch_size()`` without a name)
    reader_name: str | None = None

    @property
    def name(self) -> str:
        """The variable the pipeline object is bound to."""
        target = self.assign.targets[0].target
        assert isinstance(target, cst.Name)
        return target.value


@dataclass
class PipelinePlan:
    """What the generator that replaces one graph is to be: the front end decides it, the
    emitter carries it out.

    ``batch_size`` and ``seed`` are the expressions to use inside the generator. ``single_use``:
    this is the module's only pipeline and it is instantiated once (a condition of capture mode).
    ``reader_meta``: the readers' metadata is read (they get ``max_batch_size``);
    ``checkpointing``: their state is (``enable_checkpointing=True``, no capture mode).
    ``dropped``: comments on pipeline arguments dynamic mode has no use for. ``lowering``: the
    local rules (instances) that rewrite the graph code, in registry order."""

    rule_id: str
    batch_size: cst.BaseExpression
    seed: cst.BaseExpression | None
    dropped: list[cst.EmptyLine]
    single_use: bool = False
    reader_meta: bool = False
    checkpointing: bool = False
    lowering: list[Any] = field(default_factory=list)
