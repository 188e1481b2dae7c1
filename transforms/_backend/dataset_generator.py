"""TensorFlow: a pipeline consumed through ``DALIDataset`` becomes a generator of numpy batches
that calls the reader once per step (``tf.data`` resumes the generator on its own threads,
which a ``next_epoch()`` loop does not allow), and ``DALIDataset(...)`` becomes
``tf.data.Dataset.from_generator(lambda: <pipeline>(...), output_signature=...)``. What is
recognised, and the signature, come from ``datasets``.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Edit

from .._cst import assigned_names, kwarg, source_of
from .dataset_ops import COMMENT as OP_COMMENT
from .dataset_ops import next_element
from .dataset_shapes import SQUEEZE, squeezed
from .datasets import output_signature, tupled
from .docstrings import graph_outputs_text
from .iterator_use import IteratorUse
from .layout import fit
from .loader_init import with_max_batch_size
from .loader_parts import LoaderClass, atom_of, import_edits, imported_as, module_alias, stmt_of
from .model import Graph, Instance, Refused

PER_STEP = (
    "# reader(...) gives the next batch, across epochs; tf.data resumes this generator on its own\n"
    "# threads, which a next_epoch() loop does not allow"
)
PEERED = (
    "# from_generator calls the function {name} holds anew for each iterator, as DALIDataset\n"
    "# started a fresh pipeline, and with the dataset's batch size, as DALI ran the pipeline; it\n"
    "# takes host arrays"
)
FROM_GENERATOR = (
    "# from_generator calls {name} anew for each iterator, as DALIDataset started a fresh\n"
    "# pipeline; it takes host arrays"
)


def dataset_definition(
    ctx: FileContext,
    fn: cst.FunctionDef,
    graph: Graph,
    body: list[cst.BaseStatement],
    params: cst.Parameters,
    inst: Instance,
) -> tuple[list[cst.BaseStatement], list[Edit], str]:
    """The pipeline function as a generator of numpy batches that calls the reader once per step
    (see ``datasets``)."""
    use = inst.iterators[0]
    loop = body[-1]
    assert isinstance(loop, cst.While)
    inner: list[cst.BaseStatement] = list(cst.ensure_type(loop.body, cst.IndentedBlock).body)
    np = ctx.np
    epoch_for = inner[0] if len(graph.readers) == 1 and len(inner) == 1 else None
    single = isinstance(epoch_for, cst.For)
    if isinstance(epoch_for, cst.For):
        target: cst.BaseExpression = epoch_for.target
        if isinstance(target, cst.Tuple) and len(target.elements) == 1:
            target = target.elements[0].value
        reader = _reader_of(epoch_for)
        step = cst.parse_statement(f"{source_of(target)} = {reader}(batch_size=batch_size)\n")
        inner = [step, *cst.ensure_type(epoch_for.body, cst.IndentedBlock).body]
    *ops, last_stmt = inner
    last = cst.ensure_type(last_stmt, cst.SimpleStatementLine)
    yielded = _yielded(last)
    values = [e.value for e in yielded.elements] if isinstance(yielded, cst.Tuple) else [yielded]
    arrays = [
        cst.parse_expression(f"{np}.asarray({ctx.ndd}.as_tensor(__V__.cpu()))") for _ in values
    ]
    arrays = [
        _expression(a.visit(_Replace("__V__", atom_of(_off_gpu(v)))))
        for a, v in zip(arrays, values)
    ]
    flat = squeezed(ctx, use, len(arrays))
    arrays = [_flattened(a) if f else a for a, f in zip(arrays, flat)]
    out = (
        arrays[0]
        if len(arrays) == 1 and not tupled(ctx, use)
        else (
            cst.Tuple([cst.Element(a) for a in arrays], lpar=[], rpar=[])
            if len(arrays) > 1
            else cst.Tuple([cst.Element(arrays[0])])
        )
    )
    new_last = last.with_changes(body=[cst.Expr(cst.Yield(out))])
    if any(flat):
        lines = [cst.EmptyLine(comment=cst.Comment(t)) for t in SQUEEZE.split("\n")]
        new_last = new_last.with_changes(leading_lines=[*new_last.leading_lines, *lines])
    comments = (
        [cst.EmptyLine(comment=cst.Comment(t)) for t in PER_STEP.split("\n")] if single else []
    )
    new_loop = loop.with_changes(
        body=loop.body.with_changes(body=[*ops, new_last]), leading_lines=comments
    )
    prologue = list(body[1:-1])
    if use.peered is not None:
        _check_batch_parameter(params, prologue)
    if single:
        prologue = [with_max_batch_size(s, reader, why=False) for s in prologue]
    doc = body[0]
    if graph.docstring is None:
        names = graph_outputs_text(ctx, graph, tupled=out is not arrays[0])
        ran = "DALIDataset" if use.op is None else "the DALIIterator op"
        doc = stmt_of(f'"""{names} batches as numpy arrays, without end, as {ran} ran them."""')
    new_fn = fn.with_changes(
        decorators=[], params=params, body=fn.body.with_changes(body=[doc, *prologue, new_loop])
    )
    if fn.decorators:
        new_fn = new_fn.with_changes(
            leading_lines=list(fn.leading_lines) + list(fn.decorators[0].leading_lines)
        )
    new_fn = cst.ensure_type(
        fit(new_fn, ctx.module.default_indent, len(ctx.indents(fn))), cst.FunctionDef
    )
    c = LoaderClass(ctx, use, "tf", None)  # type: ignore[arg-type]
    module_alias(c, "tensorflow", "tensorflow")
    if use.peered is not None:  # (each branch binds the name to a partial of its definition)
        module_alias(c, "functools", "functools")
    return [new_fn], import_edits(ctx, c), fn.name.value


def _check_batch_parameter(params: cst.Parameters, prologue: list[cst.BaseStatement]) -> None:
    """The dataset calls the generator with ``batch_size=<its batch size>``: that keyword must be
    the generator's batch size, not a parameter of another meaning nor one it does not take."""
    names = {p.name.value for p in [*params.params, *params.kwonly_params]}
    renamed = any(n.startswith("pipeline_batch_size") for n in names)
    if (
        "batch_size" not in names
        or renamed
        or "batch_size" in {n for s in prologue for n in assigned_names(s)}
    ):
        raise Refused(
            "DALIDataset over a name bound to a different pipeline in each branch calls each "
            "generator with batch_size=<the dataset's batch size>, and this one takes its batch "
            "size otherwise: name its parameter batch_size"
        )


def _flattened(array: cst.BaseExpression) -> cst.BaseExpression:
    """``array.reshape(-1)``: DALIDataset's squeeze to a one-dimension shape."""
    func = cst.Attribute(array, cst.Name("reshape"))
    return cst.Call(func, [cst.Arg(cst.UnaryOperation(cst.Minus(), cst.Integer("1")))])


def _reader_of(epoch_for: cst.For) -> str:
    """``reader`` of the generated ``for ... in reader.next_epoch(...)``."""
    epoch = cst.ensure_type(epoch_for.iter, cst.Call)
    return cst.ensure_type(cst.ensure_type(epoch.func, cst.Attribute).value, cst.Name).value


def _yielded(last: cst.SimpleStatementLine) -> cst.BaseExpression:
    """What the generated ``yield`` that ends the loop gives."""
    expr = cst.ensure_type(last.body[0], cst.Expr)
    return _expression(cst.ensure_type(expr.value, cst.Yield).value)


def _expression(node: object) -> cst.BaseExpression:
    """``node``, which the generated code (or a transformer of names) made an expression."""
    assert isinstance(node, cst.BaseExpression)
    return node


def _off_gpu(value: cst.BaseExpression) -> cst.BaseExpression:
    """``labels.gpu()`` -> ``labels``: the value goes to the host anyway (``.cpu()``)."""
    if (
        isinstance(value, cst.Call)
        and not value.args
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value == "gpu"
    ):
        return value.func.value
    return value


class _Replace(cst.CSTTransformer):
    def __init__(self, name: str, value: cst.BaseExpression) -> None:
        super().__init__()
        self.name, self.value = name, value

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return self.value if updated.value == self.name else updated


def dataset_edit(
    ctx: FileContext,
    use: IteratorUse,
    made: cst.SimpleStatementLine | cst.BaseCompoundStatement,
    call: cst.Call,
    name: str,
) -> Edit:
    """``DALIDataset(...)`` -> ``tf.data.Dataset.from_generator(lambda: <pipeline>(...),
    output_signature=...)``."""
    text = FROM_GENERATOR.format(name=name) if use.op is None else OP_COMMENT
    return _generator_edit(ctx, use, made, cst.Lambda(cst.Parameters(), call), text)


def peered_dataset_edit(ctx: FileContext, use: IteratorUse) -> Edit:
    """``DALIDataset(pipe, batch_size=n, ...)`` where each branch bound ``pipe`` to a partial of
    its definition -> ``tf.data.Dataset.from_generator(functools.partial(pipe, batch_size=n),
    output_signature=...)``: alike for every definition the name may hold."""
    pipe = use.peered
    assert isinstance(pipe, cst.BaseExpression)  # (the name the dataset took)
    size = next(
        (
            a.value
            for a in use.call.args
            if a.keyword is not None and a.keyword.value == "batch_size"
        ),
        cst.Integer("1"),
    )
    gen = cst.parse_expression("functools.partial(__P__, batch_size=__N__)")
    gen = _expression(gen.visit(_Replace("__P__", pipe.deep_clone())))
    gen = _expression(gen.visit(_Replace("__N__", size.deep_clone())))
    made = ctx.enclosing_statement(use.call)
    assert isinstance(made, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
    return _generator_edit(ctx, use, made, gen, PEERED.format(name=f"`{source_of(pipe)}`"))


def _generator_edit(
    ctx: FileContext,
    use: IteratorUse,
    made: cst.SimpleStatementLine | cst.BaseCompoundStatement,
    gen: cst.BaseExpression,
    text: str,
) -> Edit:
    """The statement ``made`` with the dataset (or the op's call) replaced by
    ``tf.data.Dataset.from_generator(gen, output_signature=...)`` (its next element, for the
    op), the comment ``text`` above it."""
    tf = imported_as(ctx, "tensorflow") or "tensorflow"
    func = cst.parse_expression(f"{tf}.data.Dataset.from_generator")
    dataset = cst.Call(
        func, [cst.Arg(gen), kwarg("output_signature", output_signature(ctx, use, tf))]
    )
    comments = [cst.EmptyLine(comment=cst.Comment(t)) for t in text.split("\n")]
    value = dataset if use.op is None else next_element(tf, dataset)
    new = made.deep_replace(use.call, value)
    new = new.with_changes(leading_lines=[*made.leading_lines, *comments])
    return ctx.stmt_edit(made, [fit(new, ctx.module.default_indent, len(ctx.indents(made)))])
