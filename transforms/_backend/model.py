"""The plain data the back end's stages pass on: what was recognised (a graph, its readers, the
pipeline objects and their uses) and what is planned for it."""

from __future__ import annotations

from collections.abc import Sequence
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
    #: the call is part of a larger statement (``return fn.readers.numpy(...) * 4``): ``target``
    #: is a new name, which replaces the call there
    inline: bool = False
    #: the tests of the ``if`` blocks it is made in (``guards.Guard``), outermost first, and the
    #: statement of the body that holds them
    guards: list[Any] = field(default_factory=list)
    top: cst.BaseStatement | None = None


@dataclass
class Graph:
    """The code that builds one pipeline's graph: the body of ``container`` (a function, or a
    ``with pipe:`` block), whose ``outputs_stmt`` (``return ...`` / ``pipe.set_outputs(...)``)
    names the ``outputs``."""

    container: cst.CSTNode
    docstring: cst.BaseStatement | None
    body: list[cst.BaseStatement]
    outputs_stmt: cst.SimpleStatementLine  # (or the `if` of ``branch_outputs``)
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
    #: reads of ``Pipeline.current()`` in the graph code (``current.Current``), or None
    current: Any = None
    #: ``return helper(...)`` where ``helper`` returns a tuple: the names its elements are
    #: unpacked into (``outputs`` then), and the call
    unpacked: tuple[list[cst.Name], cst.Call] | None = None
    #: the graph code ends with an ``if`` on configuration whose branches each end with their
    #: outputs (``outputs_stmt`` is that ``if``): the outputs of each, by id of that statement
    branch_outputs: dict[int, list[cst.BaseExpression]] | None = None
    #: values the caller handed in that the graph code may call (``handed.Handed``), or None
    handed: Any = None
    #: the outputs are the elements of the list this name holds, built by appending to it
    #: (``outputs`` is that name): their number is known only when the code runs
    outputs_list: str | None = None
    #: of several readers, the one a framework iterator names (``reader_name=``): a loader runs
    #: its epochs and calls the others once per batch, in lockstep as the pipeline did
    #: (``lockstep.lead_reader``); None otherwise
    lead: Any = None


@dataclass
class FollowUp:
    """A use of a migrated pipeline the tool cannot rewrite: the code stays as it is, with a TODO
    above it that says what to write there now. ``what`` says what the code does there;
    ``advice`` what to do, when the use itself tells (else the definition's general advice)."""

    node: cst.CSTNode
    what: str
    advice: str = ""


@dataclass
class Relay:
    """``return pipe`` alone in a factory (``def make(): pipe = f(); pipe.build(); return pipe``)
    whose every call is ``name = make(...)``: the pipeline reaches those names, where handles
    can follow it (the factory then returns them before the pipeline, its callers unpack them)."""

    ret: cst.Return
    callers: list[cst.Assign]


@dataclass
class Instance:
    """``pipe = train_pipe(...)``: one pipeline object and what is done with it."""

    stmt: cst.SimpleStatementLine
    #: the statement when it is ``<target> = <call>``
    assign: cst.Assign | None
    call: cst.Call
    kwargs: dict[str, cst.Arg]
    #: how TODOs name the object when no variable does (``train_pipe(...)``)
    label: str = "the pipeline"
    #: only held by local names of one scope (reader handles and iterators need that)
    local: bool = True
    #: how many objects this creation may make when the program runs (capture needs one)
    copies: int = 1
    #: other pipeline definitions (``FunctionDef``) whose objects share this one's use sites
    peers: list[cst.CSTNode] = field(default_factory=list)
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
    #: pipeline arguments the call keeps (a TODO says why they are not migrated)
    keep_args: set[str] = field(default_factory=set)
    #: ``pipe.feed_input(...)`` calls, and the statements of those a ``run()`` consumes
    feeds: list[cst.Call] = field(default_factory=list)
    feed_stmts: list[cst.BaseStatement] = field(default_factory=list)
    #: what a ``run()`` becomes when not ``next(pipe)`` (id of the run call -> the new call)
    run_calls: dict[int, cst.BaseExpression] = field(default_factory=dict)
    #: the call's arguments the local rules rewrote (id of the original ``Arg`` -> the new one):
    #: what it hands the generator runs in dynamic mode now (``site_args.py``)
    lowered: dict[int, cst.Arg] = field(default_factory=dict)
    #: follow-up TODOs about the creation statement itself, written with its new code
    todo_lines: list[cst.EmptyLine] = field(default_factory=list)
    #: every expression found to hold the object (``pipe`` in ``pipe.run()``), followed or not
    uses: list[cst.CSTNode] = field(default_factory=list)
    #: not ``local``, but only because factories hand it on (``relays``), each to local names
    relayed: bool = False
    relays: list[Relay] = field(default_factory=list)
    #: the names each factory caller binds to the handles, by id of its ``Assign``
    relay_names: dict[int, list[str]] = field(default_factory=dict)
    #: made by calling a parameter (or name) that the definition was passed to as a value
    through_value: bool = False
    #: there, the other definitions that may be called (none: the call always runs this one)
    value_peers: int = 0
    #: and it reaches that call through a function's parameter
    value_param: bool = False
    #: what the call's ``**kwargs``/``*args`` hand it, where the tool can read it all
    #: (``star_keys.Unpacked``); the call passes them on as they are
    unpacked: Any = None

    @property
    def followed(self) -> bool:
        """Held by local names of one scope, or kept in ``self.<attr>`` and only wrapped by
        framework iterators made over it in other methods, or one per GPU in a list only
        wrapped by one iterator (the loader is made in its place)."""
        return self.local or (
            bool(self.iterators)
            and all(
                getattr(u, "kept_in", None) is not None or getattr(u, "devices", None) is not None
                for u in self.iterators
            )
        )

    @property
    def variable(self) -> str | None:
        """The local name the pipeline object is bound to, or None (an attribute, unnamed)."""
        target = self.assign.targets[0].target if self.assign is not None else None
        return target.value if isinstance(target, cst.Name) else None

    @property
    def name(self) -> str:
        """The variable the pipeline object is bound to (for local instances)."""
        assert self.assign is not None
        target = self.assign.targets[0].target
        assert isinstance(target, cst.Name)
        return target.value


@dataclass
class PipelinePlan:
    """What the generator that replaces one graph is to be: the front end decides it, the
        emitter carries it out.

        ``batch_size`` and ``seed`` are the expressions to use inside the generator. ``single_use``:
        this is the module's only pipeline and it is instantiated once (a condition of capture mode);
    ``capture_elsewhere``: it could have been, but another pipeline of the module runs captured.
    ``captured``: set by the emitter, the loop it wrote runs in capture mode.
        ``reader_meta``: the readers' metadata is read (they get ``max_batch_size``);
        ``checkpointing``: their state is (``enable_checkpointing=True``, no capture mode).
        ``dropped``: comments on pipeline arguments dynamic mode has no use for. ``lowering``: the
        local rules (instances) that rewrite the graph code, in registry order. ``device``: the
        pipeline's GPU (its ``device_id``, as an expression valid in the generator) where it is not
        the current one; the emitter runs the operators in that device's default ``ndd.EvalContext`` and
        sets ``device_applied`` when the loop's shape let it."""

    rule_id: str
    batch_size: cst.BaseExpression
    seed: cst.BaseExpression | None
    dropped: list[cst.EmptyLine]
    single_use: bool = False
    capture_elsewhere: bool = False
    captured: bool = False
    reader_meta: bool = False
    checkpointing: bool = False
    lowering: list[Any] = field(default_factory=list)
    #: other pipelines' graph code that may call this one's helpers with random operators
    #: (the front end migrates them together, or none)
    helper_hosts: list[cst.CSTNode] = field(default_factory=list)
    #: a class's graph, built in a small module: the file and the classes whose methods call the
    #: file's helpers (they take the RNG as a ``@pipeline_def``'s do); None: the graph's own
    helper_home: tuple[Any, Sequence[cst.CSTNode]] | None = None
    device: cst.BaseExpression | None = None
    device_applied: bool = False
    #: the loops of several GPUs take turns in one thread (one loader per GPU, their batches
    #: given side by side): the device's context is entered around each batch's operators, not
    #: held by the epoch (DALI's context stack fails when loops holding different ones alternate)
    device_turns: bool = False
    #: a loader class runs the generator's code once per epoch (a source may end each pass)
    passes: bool = False
    #: what each attribute of ``Pipeline.current()`` the graph code reads is in the generator
    #: (``batch_size`` -> the batch size parameter); a read not given here is refused
    current: dict[str, cst.BaseExpression] = field(default_factory=dict)
