"""``__init__`` (and what ``__len__`` returns) of the loader class that ``loaders`` writes: the
parameters the batches need kept on ``self``, the pipeline's setup code and its reader (built
once, with ``max_batch_size=`` where its metadata is read), then what the configuration
(``LoaderClass.kind``) needs: the sizes read from the reader's metadata, the stream
``_batches()``, the counters, and ``self._size`` where the code read the iterator's.
"""

from __future__ import annotations

import libcst as cst

from .._cst import append_arg, assigned_names, fresh_name, kwarg, source_of
from .iterator_checks import SIZE_BUILTINS, size_parameters
from .loader_parts import LoaderClass, bound_in, method_def, renamed, stmts_of
from .model import Instance, Refused

MAX_BATCH_COMMENT = "# max_batch_size: get_metadata() before the first epoch would fix it to 1"


def init_tail(c: LoaderClass, inst: Instance, fn: cst.FunctionDef) -> tuple[list[str], str | None]:
    """What ``__init__`` adds after the reader for the configuration: the sizes read from the
    reader's metadata, the stream, the counters; and what ``__len__`` returns."""
    kind, use, reader = c.kind, c.use, c.body.reader
    meta = fresh_name("meta", c.local)
    shards = f'{meta}["number_of_shards"]'
    lines: list[str] = []
    both = kind == "partial" and c.padded and use.measured  # two keys: read once
    if c.sharded or both or kind in ("partial_stream", "drop_stream"):
        lines.append(f"{meta} = {reader}.get_metadata()")
        size, padded = f'{meta}["epoch_size"]', f'{meta}["epoch_size_padded"]'
        padded += f" // {shards}" if c.sharded else ""
    else:
        size, padded = (
            f'{reader}.get_metadata()["epoch_size"]',
            f'{reader}.get_metadata()["epoch_size_padded"]',
        )
    if kind in ("plain", "resume"):
        if not (use.measured or kind == "resume"):
            return [], None
        return _with_stream(
            c, lines + [f"{c.attr('length')} = {_ceil(c, f'{padded} / batch_size')}"]
        ), c.attr("length")
    if kind in ("partial", "partial_stream"):
        lines += _shard_lines(c, meta, size)
        largest = _ceil(c, f"{size} / {shards}") if kind == "partial_stream" else c.attr("samples")
        per_epoch = _ceil(c, f"{padded if c.padded else largest} / batch_size")
        if kind == "partial_stream" or use.measured:
            lines.append(f"{c.attr('length')} = {per_epoch}")
        return _with_stream(c, lines), c.attr("length")
    if kind in ("drop", "drop_stream"):
        per_shard = size if kind == "drop" else fresh_name("per_shard", c.local)
        if kind == "drop_stream":
            lines.append(f"{per_shard} = {size} // {shards}")
            lines.append(
                f"{c.attr('full_batches')}, {c.attr('per_epoch')} = {per_shard} // batch_size, "
                f"{_ceil(c, f'{per_shard} / batch_size')}"
            )
        else:
            lines.append(f"{c.attr('full_batches')} = {per_shard} // batch_size")
        return _with_stream(c, lines), c.attr("full_batches")
    if kind == "fill_shards":
        c.helpers.append("dali_fill_epochs")
        plan = c.attr("plan")
        return _with_stream(
            c,
            [
                f"{plan} = dali_fill_epochs({reader}.get_metadata(), batch_size)",
                f"{c.attr('todo')}, {c.attr('length')} = next({plan})",
            ],
        ), c.attr("length")
    return _counted_tail(c, inst, fn, size)


def size_lines(c: LoaderClass, inst: Instance, fn: cst.FunctionDef, tail: list[str]) -> list[str]:
    """``self._size``, which the code reads from the iterator: the samples of an epoch as
    DALI's iterator counts them (``size=``; else from the reader's shards and the policy)."""
    why = "# _size: the samples of an epoch, as DALI's iterator counted them"
    if c.use.reader_name is None:
        return [why, f"self._size = {_size_text(c, inst, fn)}"]
    read = f" = {c.body.reader}.get_metadata()"
    known = [ln[: -len(read)] for ln in tail if ln.endswith(read) and " " not in ln[: -len(read)]]
    meta = known[0] if known else fresh_name("meta", c.local)
    lines = [why] if known else [f"{meta}{read}", why]
    size, shards = f'{meta}["epoch_size"]', f'{meta}["number_of_shards"]'
    if c.use.policy == "DROP":
        value = f"{size} // {shards}"
    elif c.padded:
        value = f'{meta}["epoch_size_padded"] // {shards}'
    else:
        per_shard = _ceil(c, f"{size} / {shards}")
        value = _ceil(c, f"{per_shard} / batch_size") + " * batch_size"
    c.meta = True
    return [*lines, f"self._size = {value}"]


def _counted_tail(
    c: LoaderClass, inst: Instance, fn: cst.FunctionDef, size: str
) -> tuple[list[str], str | None]:
    """FILL without padding over one shard, ``size=`` and an iterator that never ends."""
    kind = c.kind
    if kind == "endless":
        return _with_stream(c, []), None
    samples = c.attr("samples")
    total = _size_text(c, inst, fn) if c.use.reader_name is None else size
    if kind == "ahead":
        counts = (
            c.attr("read") if c.use.reader_name is None else f"{c.attr('read')} = {c.attr('end')}"
        )
        lines = [f"{samples} = {total}", f"{counts} = 0"]
        if c.use.measured:
            lines.append(f"{c.attr('length')} = {_ceil(c, f'{samples} / batch_size')}")
        return _with_stream(c, lines), c.attr("length")
    if kind == "drop_counted":
        local = fresh_name("size", c.local)
        return _with_stream(
            c,
            [
                f"{local} = {total}",
                f"{c.attr('full_batches')}, {c.attr('per_epoch')} = {local} // batch_size, "
                f"{_ceil(c, f'{local} / batch_size')}",
            ],
        ), c.attr("full_batches")
    lines = [f"{samples} = {total}"] if kind == "partial_counted" else []
    lines.append(f"{c.attr('length')} = {_ceil(c, f'{samples if lines else total} / batch_size')}")
    return _with_stream(c, lines), c.attr("length")


def _shard_lines(c: LoaderClass, meta: str, size: str) -> list[str]:
    """PARTIAL: the samples of the reader's shard (one shard, or one that sticks), or what the
    moving shard needs."""
    samples = c.attr("samples")
    if not c.sharded:
        return [f"{samples} = {size}"]
    if c.moving:
        return [
            f"{samples} = {size}",
            f'{c.attr("shard")}, {c.attr("num_shards")} = {meta}["shard_id"], '
            f'{meta}["number_of_shards"]',
        ]
    shard, n = fresh_name("shard", c.local), fresh_name("n", c.local)
    return [
        f'{shard}, {n} = {meta}["shard_id"], {meta}["number_of_shards"]',
        f"{samples} = {size} * ({shard} + 1) // {n} - {size} * {shard} // {n}  # this shard's "
        "samples",
    ]


def _with_stream(c: LoaderClass, lines: list[str]) -> list[str]:
    c.meta = c.meta or any("get_metadata()" in ln for ln in lines)
    if c.kind in ("plain", "partial", "drop"):
        return lines
    if c.kind == "resume":
        lines = [*lines, f"{c.attr('todo')} = 0"]
    return [*lines, f"{c.attr('batches')} = self._batches()"]


def _outer_name(c: LoaderClass, name: str) -> bool:
    """``name`` is one the class, defined where the ``with`` block was, reads from the block's
    scope as the iterator did (made in that scope; ``__init__``'s own names shadow nothing)."""
    block, ctx = c.block, c.ctx
    if block is None or not block.body.body or name in {"self", "batch_size", c.body.reader}:
        return False
    if any(name in assigned_names(s) for s in [*block.body.body, *c.body.setup]):
        return False
    scope = ctx.scopes.get(block.body.body[0])
    return scope is not None and ctx.scopes.get(c.use.call) is scope and name in scope


def _ceil(c: LoaderClass, ratio: str) -> str:
    c.imports.add("math")
    return f"math.ceil({ratio})"


def _size_text(c: LoaderClass, inst: Instance, fn: cst.FunctionDef) -> str:
    """The iterator's ``size=`` as ``__init__`` computes it: ``pipe.epoch_size("R")`` is the
    reader's padded epoch size, and a name the caller also gave to the pipeline is the parameter
    it gave it to (``size=pipe.epoch_size("Reader") // world_size`` with ``num_shards=world_size``
    is ``... // num_shards``)."""
    size = c.use.size
    assert size is not None
    if c.use.size_param is not None:  # computed where the loader is made
        return c.use.size_param
    given, _ = size_parameters(c.use, inst, fn)
    meta = f'{c.body.reader}.get_metadata()["epoch_size_padded"]'

    class Rewrite(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            func = original.func
            if isinstance(func, cst.Attribute) and any(func.value is n for n in c.use.claimed):
                return cst.parse_expression(meta)
            return updated

    new = _expression(size.visit(Rewrite()))
    missing = []

    class Names(cst.CSTTransformer):
        def visit_Attribute_attr(self, node: cst.Attribute) -> None:
            self.skip = True

        def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
            if getattr(self, "skip", False):
                self.skip = False
                return updated
            if updated.value in given:
                return updated.with_changes(value=given[updated.value])
            if updated.value not in SIZE_BUILTINS and updated.value != c.body.reader:
                if not _outer_name(c, updated.value):
                    missing.append(updated.value)
            return updated

    new = _expression(new.visit(Names()))
    text = source_of(new)
    if missing or "\n" in text:
        raise Refused(
            f"size={source_of(size)} uses `{missing[0] if missing else text}`, which the loader does "
            "not have"
        )
    return text


def with_max_batch_size(
    stmt: cst.BaseStatement, reader: str, why: bool = True
) -> cst.BaseStatement:
    """``reader = ndd.readers.X(...)`` with ``max_batch_size=batch_size`` and the comment that
    says why: get_metadata() before the first next_epoch() would fix the batch size to 1."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Assign)):
        return stmt
    assign = stmt.body[0]
    target = assign.targets[0].target
    if not (
        isinstance(target, cst.Name)
        and target.value == reader
        and isinstance(assign.value, cst.Call)
    ):
        return stmt
    call = assign.value
    comment = [cst.EmptyLine(comment=cst.Comment(MAX_BATCH_COMMENT))] if why else []
    if any(a.keyword is not None and a.keyword.value == "max_batch_size" for a in call.args):
        return stmt.with_changes(leading_lines=[*stmt.leading_lines, *comment])
    new = append_arg(list(call.args), kwarg("max_batch_size", cst.Name("batch_size")))
    return stmt.with_changes(
        body=[assign.with_changes(value=call.with_changes(args=new))],
        leading_lines=[*stmt.leading_lines, *comment],
    )


def init_method(
    c: LoaderClass, params: cst.Parameters, param_names: list[str], tail: list[str]
) -> cst.FunctionDef:
    """``__init__``: the parameters the batches need kept on self, the setup code and the
    reader (built once), then ``tail``."""
    kept = [p for p in param_names if p in c.shared]
    lines = []
    together = f"{', '.join('self.' + p for p in kept)} = {', '.join(kept)}"
    if kept and len(together) <= 80:
        lines.append(together)
    else:  # one per line where they would not fit on one
        lines += [f"self.{p} = {p}" for p in kept]
    setup = list(c.body.setup)
    if c.meta:
        setup = [with_max_batch_size(s, c.body.reader) for s in setup]
    shared_setup = c.shared & bound_in([*c.body.setup])
    body = [*stmts_of("\n".join(lines))] if lines else []
    body += [_renamed(s, shared_setup) for s in setup]
    body += [_renamed(s, shared_setup) for s in (stmts_of("\n".join(tail)) if tail else [])]
    fn = method_def("__init__", ["pass"], body)
    return fn.with_changes(params=params)


def _renamed(stmt: cst.BaseStatement, names: set[str]) -> cst.BaseStatement:
    """``stmt`` with ``names`` read through ``self`` (a statement stays a statement)."""
    new = renamed(stmt, names)
    assert isinstance(new, cst.BaseStatement)
    return new


def _expression(node: object) -> cst.BaseExpression:
    """What a transformer that replaces names and calls made of an expression: an expression."""
    assert isinstance(node, cst.BaseExpression)
    return node
