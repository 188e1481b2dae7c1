"""What a framework iterator over a pipeline is: its configuration and everything the code
does with it (the record the follower fills and the loader is written from)."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

#: reader_name= given as a variable: the name of the pipeline's one reader
ANY_READER = "<the pipeline's reader>"


@dataclass
class IteratorUse:
    """``DALIGenericIterator([pipe], ...)``: its configuration and everything done with it."""

    call: cst.Call
    framework: str  # "torch", "paddle" or "jax"
    output_map: list[str]
    reader_name: str | None
    policy: str  # "FILL", "PARTIAL" or "DROP"
    #: size= without reader_name: the expression, or the reader name of ``pipe.epoch_size("name")``
    size: cst.BaseExpression | None = None
    size_reader: str | None = None
    last_batch_padded: bool = False
    auto_reset: bool = False
    sparse_lists: set[int] = field(
        default_factory=set
    )  # DALIRaggedIterator SPARSE_LIST_TAG outputs
    claimed: list[cst.CSTNode] = field(
        default_factory=list
    )  # pipeline references the iterator owns
    loops: list[cst.For] = field(default_factory=list)
    early_exit: bool = False  # a loop over the iterator can leave an epoch before its end
    lens: list[tuple[cst.CSTNode, str]] = field(
        default_factory=list
    )  # len(it): node, "loop"/"first"/"other"
    resets: list[cst.SimpleStatementLine] = field(default_factory=list)
    #: ``pipe.epoch_size()`` / ``reader_meta()`` after the iterator is made: the loader's reader
    #: answers them (``reader_attr``: its attribute, set when the class is written)
    meta_calls: list[cst.Call] = field(default_factory=list)
    reader_attr: str | None = None
    meta_reader: str | None = None  # the reader's name= (keys epoch_size() without a name)
    #: ``it = it.reset()``: the name (or ``self`` attribute) holding the iterator takes what
    #: reset() returned (None); each stays as written over a drop-in loader, whose reset() does
    #: what DALI's did and returns None
    rebinds: list[cst.SimpleStatementLine] = field(default_factory=list)
    #: resets in code that also gets other values (they stay; the loader's reset() does nothing)
    kept_resets: list[cst.SimpleStatementLine] = field(default_factory=list)
    #: how many iterators the code that makes this one makes (a factory called twice: 2); each
    #: becomes a loader, and only one of them may run a capture loop
    copies: int = 1
    #: ``it._size`` reads (the samples of an epoch, as DALI's iterator counts them)
    size_reads: list[cst.Attribute] = field(default_factory=list)
    #: ``next(it)`` calls (code that pulls batches), and the name or ``self.x`` holding the iterator
    pulls: list[cst.Call] = field(default_factory=list)
    holder: cst.BaseExpression | None = None
    #: returned by a Lightning ``*_dataloader()`` hook: iterated once per epoch, sized with len()
    hooked: bool = False
    #: a subclass defined here whose ``__next__`` converts each batch (``subclasses``)
    subclass: cst.ClassDef | None = None
    #: a subclass defined here that builds the pipeline in its ``__init__`` and hands it to
    #: ``super().__init__`` (``call``): the class stays, over the loader (``built_subclass``)
    built_in: cst.ClassDef | None = None
    #: ``policy = LastBatchPolicy.X`` that only gives the iterator its policy: it goes with it
    #: (or the ``if``/``else`` that binds it on each branch, ``policy_choice``)
    policy_binding: cst.BaseStatement | None = None
    #: ``pipe_size = <size with pipe.epoch_size()>`` read only by ``size=``: goes with the iterator
    size_binding: cst.BaseStatement | None = None
    #: ``last_batch_policy=A if test else B`` (or a name bound to it): (test, A, B); ``policy`` is
    #: A, and one loader class is written per policy, the test choosing where the loader is made
    policy_choice: tuple[cst.BaseExpression, str, str] | None = None
    policy_names: tuple[str, str] | None = None  # the two loader classes written for it
    #: type annotations naming that subclass (they name the loader instead)
    annotations: list[cst.CSTNode] = field(default_factory=list)
    #: DALIDataset: its (output_shapes or None, output_dtypes) (``datasets``)
    signature: tuple | None = None
    #: the ``DALIIterator()`` op's call instead: the statement that made the op (``dataset_ops``)
    op: cst.SimpleStatementLine | None = None
    #: the name the consumer (DALIDataset, a framework iterator) takes, where it holds this
    #: pipeline or a peer's (one per branch): each branch binds it to ``functools.partial`` of
    #: its definition or loader class (``branch_peers``)
    peered: cst.CSTNode | None = None
    #: made in a wrapper class (``wrappers``): the wrapper's call, the pipeline passed to it and
    #: the ``__init__`` parameter that takes it
    wrapper: tuple | None = None
    #: the pipeline is kept in ``self.<attr>`` and the iterator made over it in another method:
    #: the reference (``self.pipe``) the iterator reads; the loader is made where the pipeline
    #: was, and the iterator's call becomes that reference
    kept_in: cst.Attribute | None = None
    #: where code the tool cannot read takes the iterator: returned by a function no code of
    #: this module calls (a library's ``get_loader()``), ``iter(it)``, an argument of a call
    #: into another module. That code may loop over it, take ``len()``, ``next()`` or
    #: ``reset()`` it: the loader is then a drop-in iterator (``dropin``), and every use of it
    #: stays as written
    opaque: list[cst.CSTNode] = field(default_factory=list)
    #: ``size=`` reads names only the code that makes the iterator has (``size=len(files)``):
    #: the loader takes it as this keyword parameter, given where the loader is made
    size_param: str | None = None
    #: over a list of pipelines, one per GPU (``DALIGenericIterator(pipes, ...)`` where
    #: ``pipes = [make(device_id=i, ...) for i in range(n)]``): the list's name as the iterator
    #: reads it. Each pipeline becomes a loader where it is made, and the iterator gives their
    #: batches side by side (``per_device``)
    devices: cst.Name | None = None
    #: ``size=pipe.<attr>``: the attribute of the pipeline object it reads, and what it is in the
    #: generator's code (set by the front end: a property of the class, or an attribute its
    #: ``__init__`` sets), computed in the loader's ``__init__``
    size_attr: str | None = None
    size_value: cst.BaseExpression | None = None
    #: a Pipeline subclass fed in ``iter_setup``: how many batches ahead of the iterator DALI ran
    #: it (1 without ``exec_pipelined``, else ``prefetch_queue_depth``), None where unknown
    ahead: int | None = None

    @property
    def site(self) -> cst.Call:
        """The call that makes the iterator where the pipeline is (the wrapper's, if any)."""
        return self.wrapper[0] if self.wrapper is not None else self.call

    @property
    def name(self) -> str:
        if self.subclass is not None:
            return self.subclass.name.value
        base = self.built_in.bases[0].value if self.built_in is not None else None
        if isinstance(base, (cst.Name, cst.Attribute)):  # (the base it hands the pipeline to)
            return base.attr.value if isinstance(base, cst.Attribute) else base.value
        func = self.call.func
        return (
            func.attr.value
            if isinstance(func, cst.Attribute)
            else getattr(func, "value", "the iterator")
        )

    @property
    def dropin(self) -> bool:
        """The loader is its own iterator, as DALI's was (``opaque``)."""
        return bool(self.opaque)

    @property
    def measured(self) -> bool:
        """Code takes ``len()`` of the loader: a ``len()`` found, a Lightning hook's caller, or
        the class built over it (``built_in``), whose own ``__len__`` asks the loader's."""
        return bool(self.lens) or self.hooked or self.built_in is not None

    @property
    def sized(self) -> bool:
        """The iterator has epochs (reader_name= or size=)."""
        return self.reader_name is not None or self.size is not None or self.size_reader is not None
