"""A framework-iterator subclass that builds its pipeline in its own ``__init__`` and hands it to
``super().__init__(pipe, ...)``: the class stays (its ``__next__`` converts the batches as it
did) without its DALI base, over the loader the pipeline becomes, which is its own iterator as
DALI's was (``loaders``: the drop-in loader, with ``reset()``, ``__iter__``, ``__next__`` and
``__len__``).

Before::

    class ImageLoader(DALIClassificationIterator):
        def __init__(self, data_dir, batch_size=64):
            pipe = Pipeline(batch_size=batch_size, num_threads=4, device_id=0)
            with pipe:
                ...
                pipe.set_outputs(images, labels)
            pipe.build()
            super().__init__(pipe, reader_name="Reader", auto_reset=True)

        def __iter__(self):
            if self._counter >= self._size or self._size < 0:
                self.reset()
            return self

        def __next__(self):
            data = super().__next__()
            return data[0]["data"], data[0]["label"]

After::

    class ImageLoader:
        def __init__(self, data_dir, batch_size=64):
            ndd.set_num_threads(4)

            class Loader:
                ...  # reset(), __iter__, __next__, __len__ as DALI's iterator

            self._loader = Loader()

        def __iter__(self):
            self._loader.reset()
            return self

        def __next__(self):
            data = next(self._loader)
            return data[0]["data"], data[0]["label"]

        def __len__(self):
            return len(self._loader)

        def reset(self):
            self._loader.reset()

Where the class reads anything else of its base (``self._counter``, ``self._size``, ...) it keeps
its TODO (``subclass_init.base_advice``).
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Edit

from .._cst import walk
from .base_internals import rewinding_iter
from .flow_sites import enclosing_class
from .subclass_init import _super_init, method

#: the attribute of the class that holds the loader
HOLDER = "_loader"
#: the attributes DALI's iterators set on themselves (``plugin/base_iterator.py`` and the
#: framework plugins, DALI 2.4): a class that sets one changes what DALI's own code read
BASE_STATE = frozenset(
    [
        "_auto_reset",
        "_counter",
        "_counter_per_gpu",
        "_enable_checkpointing",
        "_ever_consumed",
        "_ever_scheduled",
        "_first_batch",
        "_initial_checkpoints",
        "_is_stick_to_shard",
        "_last_batch_padded",
        "_last_batch_policy",
        "_num_gpus",
        "_output_categories",
        "_output_tags",
        "_outputs_types",
        "_pipes",
        "_pmap_compatible",
        "_prepare_first_batch",
        "_reader_name",
        "_shard_sizes_per_gpu",
        "_shard_sizes_per_gpu_initial",
        "_sharding",
        "_shards_id",
        "_shards_num",
        "_size",
        "_size_no_pad",
        "batch_size",
        "output_map",
        "size",
    ]
)
#: what DALI's base gave that the class gets back from the loader, where it defines none
_GIVEN = {
    "__iter__": ["self._loader.reset()", "return self"],
    "__next__": ["return next(self._loader)"],
    "__len__": ["return len(self._loader)"],
    "reset": ["self._loader.reset()"],
}


def built_subclass(ctx: FileContext, call: cst.Call, bases: tuple[str, ...]) -> cst.ClassDef | None:
    """The class whose ``__init__`` ends with ``call`` (``super().__init__(...)``), that has one
    base, a framework iterator of ``bases``, reads nothing of it but ``super().__next__()`` and
    the rewinding ``__iter__`` (``base_internals``) and sets none of its state; None
    otherwise."""
    if _super_init(cst.SimpleStatementLine([cst.Expr(call)])) is None:
        return None
    cls = enclosing_class(ctx, call)
    init = method(cls, "__init__") if cls is not None else None
    if cls is None or init is None or len(cls.bases) != 1 or cls.keywords:
        return None
    if (ctx.qualname(cls.bases[0].value) or "") not in bases:
        return None
    body = init.body.body if isinstance(init.body, cst.IndentedBlock) else ()
    if not body or _super_init(body[-1]) is not call:
        return None
    idiom = rewinding_iter(cls)
    rest = [s for s in cls.body.body if s is not idiom]
    written = _self_attrs(cls, read=False)
    if _base_reads(rest, cls) or written & BASE_STATE or HOLDER in written | _self_attrs(cls):
        return None
    nexts = [cst.ensure_type(c.func, cst.Attribute).value for c in super_next_calls(cls)]
    allowed = {id(cst.ensure_type(call.func, cst.Attribute).value), *map(id, nexts)}
    if any(_is_super(n) and id(n) not in allowed for n in walk(cls)):
        return None
    return cls


def _base_reads(stmts: Sequence[cst.CSTNode], cls: cst.ClassDef) -> set[str]:
    """``self.<name>`` the statements read that the class neither sets nor defines."""
    own = {s.name.value for s in cls.body.body if isinstance(s, cst.FunctionDef)}
    read = {a for s in stmts for a in _self_attrs(s)}
    return read - own - _self_attrs(cls, read=False)


def _self_attrs(node: cst.CSTNode, read: bool = True) -> set[str]:
    """The ``self.<name>`` that ``node`` reads (or, ``read=False``, assigns)."""
    out: set[str] = set()
    for n in walk(node):
        if isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name):
            if n.value.value == "self":
                out.add(n.attr.value)
    if read:
        return out
    targets = [
        t
        for n in walk(node)
        if isinstance(n, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign))
        for t in walk(n.target)
    ]
    return {
        t.attr.value
        for t in targets
        if isinstance(t, cst.Attribute)
        and isinstance(t.value, cst.Name)
        and t.value.value == "self"
    }


def _is_super(node: cst.CSTNode) -> bool:
    """``node`` is a call of ``super(...)``."""
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Name)
        and node.func.value == "super"
    )


def super_next_calls(cls: cst.ClassDef) -> list[cst.Call]:
    """The ``super().__next__()`` calls in the methods of ``cls``."""
    return [
        n
        for n in walk(cls)
        if isinstance(n, cst.Call)
        and not n.args
        and isinstance(n.func, cst.Attribute)
        and n.func.attr.value == "__next__"
        and isinstance(n.func.value, cst.Call)
        and isinstance(n.func.value.func, cst.Name)
        and n.func.value.func.value == "super"
        and not n.func.value.args
    ]


def class_edits(ctx: FileContext, cls: cst.ClassDef) -> list[Edit]:
    """The class without its DALI base, over ``self._loader`` (made by ``loader``): its
    ``super().__next__()`` take from the loader, its rewinding ``__iter__`` rewinds the loader (an
    ended epoch only, as DALI's reset() did), and what it does not define of DALI's iterator
    protocol it gets from the loader (``self._loader``, set where ``super().__init__`` was)."""
    r = ctx.positions[cls.name]
    bases = ctx.positions[cls.bases[-1]]
    start = ctx.lines.offset(r.end.line, r.end.column)
    end = ctx.lines.offset(bases.end.line, bases.end.column)
    close = ctx.source.index(")", end) + 1
    edits = [Edit(start, close, "")]
    holder = cst.Attribute(cst.Name("self"), cst.Name(HOLDER))
    for call in super_next_calls(cls):
        edits.append(ctx.expr_edit(call, cst.Call(cst.Name("next"), [cst.Arg(holder)])))
    idiom = rewinding_iter(cls)
    if idiom is not None:
        test = next(s for s in idiom.body.body if isinstance(s, cst.If))
        line = _line("self._loader.reset()  # only an ended epoch, as DALI's reset()")
        edits.append(ctx.stmt_edit(test, [line.with_changes(leading_lines=test.leading_lines)]))
    own = {s.name.value for s in cls.body.body if isinstance(s, cst.FunctionDef)}
    added = [_method(n, lines) for n, lines in _GIVEN.items() if n not in own]
    if added:
        last = cls.body.body[-1]
        end = ctx.stmt_span(last)[1]
        ind = ctx.indents(last)
        edits.append(Edit(end, end, "".join("\n" + ctx.render(m, ind) for m in added)))
    return edits


def _line(code: str) -> cst.SimpleStatementLine:
    return cst.ensure_type(cst.parse_statement(code), cst.SimpleStatementLine)


def _method(name: str, lines: list[str]) -> cst.FunctionDef:
    body = "".join(f"    {line}\n" for line in lines)
    return cst.ensure_type(cst.parse_statement(f"def {name}(self):\n{body}"), cst.FunctionDef)


def holder_statement(loader: cst.BaseExpression) -> cst.SimpleStatementLine:
    """``self._loader = <loader>``: where ``super().__init__(pipe, ...)`` was."""
    target = cst.Attribute(cst.Name("self"), cst.Name(HOLDER))
    return cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(target)], loader)])
