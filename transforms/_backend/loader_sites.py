"""Where the loader class that ``loaders`` writes takes the pipeline's place: the pipeline's
creation gives way to ``ndd.set_num_threads`` (its ``num_threads``, once per scope) and the TODO
about a dropped ``device_id``, ``pipe.build()`` goes, the iterator's construction becomes the
loader made from the pipeline's arguments (in a wrapper, a subclass, or where a kept pipeline
was made), ``pipe.epoch_size()`` reads the loader's reader, and ``reset()`` goes (or, for code
that pulls batches with ``next()``, starts a new pass).
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Edit

from .._cst import fresh_name, kwarg, source_of, walk
from .arguments import device_message, set_threads_stmt
from .built_subclass import class_edits, holder_statement
from .dataset_generator import dataset_edit, peered_dataset_edit
from .edits import removed_stmt
from .handles import metadata_value
from .iterator_checks import made_elsewhere
from .iterator_use import IteratorUse
from .layout import fit
from .model import Instance
from .per_device import devices_call
from .sites import batch_size_named, device_todo_line, enclosing_blocks, kept_args


def loader_site_edits(
    ctx: FileContext,
    inst: Instance,
    name: str,
    rule_id: str,
    threads_default: cst.Arg | None,
    params: set[str],
    notes: list,
    threads_set: set[tuple[int, str]],
    args: list[cst.Arg] | None = None,
    todo_where_made: bool = False,
) -> list[Edit]:
    """The pipeline's creation gives way to ``ndd.set_num_threads`` (its ``num_threads``), its
    ``build()`` goes, the iterator becomes the loader made from the pipeline's arguments (or
    ``args``), and ``reset()`` goes (or, for code that pulls with ``next()``, starts a new
    pass). ``todo_where_made``: the TODO about a dropped device_id goes above the loader's
    construction, not the pipeline's (the class written between them would part it from both)."""
    use = inst.iterators[0]
    made = ctx.enclosing_statement(use.call)
    # (every node of a module's body has an enclosing statement)
    assert isinstance(made, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
    depth = len(ctx.indents(made))
    together = made is inst.stmt  # @data_iterator: one call made both
    kept = made_elsewhere(ctx, inst, use) or use.devices is not None  # made where the pipeline was
    moved = todo_where_made and inst.device_todo is not None and not (together or kept)
    pre = _creation(
        ctx, inst, rule_id, threads_default, notes, threads_set, todo=not moved
    )  # what stays of the pipeline
    meta = [_meta_edit(ctx, use, call) for call in use.meta_calls]
    keep = batch_size_named(kept_args(inst, params) if args is None else args)
    if use.size_param is not None and use.size is not None:  # computed here, as it was
        keep = [*keep, kwarg(use.size_param, use.size.deep_clone())]
    made_loader = cst.Call(cst.Name(name), args=_one_line(keep))
    builds = [removed_stmt(ctx, b) for b in inst.builds]
    if use.peered is not None:  # each branch binds a partial, which the consumer's place calls
        resets = [] if use.dropin else [_dropped(ctx, r) for r in use.resets]
        return [
            _partial_edit(ctx, inst, pre, made_loader),
            *builds,
            _peered_site(ctx, use, made),
        ] + (resets)
    edits = meta if together or kept else [_creation_edit(ctx, inst, pre), *meta]
    edits += builds
    for binding in (use.policy_binding, use.size_binding):
        if binding is not None:
            edits.append(removed_stmt(ctx, binding))
    if kept:
        return edits + _kept_edits(ctx, inst, use, pre, made_loader)
    if use.framework == "tf":
        op = [removed_stmt(ctx, use.op)] if use.op is not None else []
        return edits + op + [dataset_edit(ctx, use, made, made_loader, name)]
    loader: cst.BaseExpression = made_loader
    if use.policy_choice is not None:
        loader = _chosen(ctx, use, made_loader)
    if use.wrapper is not None:  # the loader is made where the pipeline was passed to the wrapper
        edits.append(_wrapper_edit(ctx, use, made_loader))
        loader = cst.Name(use.wrapper[2])
    new: list[cst.CSTNode]
    if use.built_in is not None:  # the class stays, over the loader
        new = [holder_statement(loader).with_changes(leading_lines=made.leading_lines)]
        edits += class_edits(ctx, use.built_in)
    elif use.dropin:  # every use stays as written
        new = [made.deep_replace(use.call, loader)]
    elif use.pulls:
        holder, fresh = _pull_holders(ctx, use)
        edits += [ctx.expr_edit(node, fresh.deep_clone()) for node, _ in use.lens]
        new = [
            made.with_changes(body=[cst.Assign([cst.AssignTarget(fresh)], loader)]),
            _again(holder, fresh),
        ]
        edits += [
            ctx.stmt_edit(r, [_again(holder, fresh).with_changes(leading_lines=r.leading_lines)])
            for r in use.resets
        ]
    else:
        new = [made.deep_replace(use.call, loader)]
        if use.subclass is not None and _follows(
            ctx, made, use.subclass
        ):  # no gap where the class was
            new[0] = new[0].with_changes(
                leading_lines=[ln for ln in made.leading_lines if ln.comment is not None]
            )
        edits += [_dropped(ctx, r) for r in use.resets]
    if use.subclass is not None:  # its conversion moved into the loader
        edits.append(removed_stmt(ctx, use.subclass))
    edits += [ctx.expr_edit(a, cst.Name(name)) for a in use.annotations]  # -> the loader
    if together and pre:
        new = [*pre, new[0].with_changes(leading_lines=[]), *new[1:]]
    device = inst.kwargs.get("device_id")
    if moved and device is not None:  # (the loader runs its operators now)
        inst.device_todo = device_message(source_of(device.value), name)
    if moved:
        todo = device_todo_line(ctx, inst, rule_id, notes, at=made)
        first = new[0]
        assert isinstance(first, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
        new[0] = first.with_changes(leading_lines=[*first.leading_lines, todo])
    edits.append(ctx.stmt_edit(made, [fit(s, ctx.module.default_indent, depth) for s in new]))
    return edits


def _chosen(ctx: FileContext, use: IteratorUse, made: cst.Call) -> cst.BaseExpression:
    """``DropLoader(...) if test else PartialLoader(...)``: the loader of the policy the test
    chooses (``policy_choice``), as DALI's iterator took it."""
    assert use.policy_choice is not None and use.policy_names is not None
    other = made.with_changes(func=cst.Name(use.policy_names[1]))
    loader = cst.IfExp(use.policy_choice[0].deep_clone(), made, other)
    bare = isinstance(ctx.parents.get(use.call), (cst.Assign, cst.Return, cst.Arg))
    if bare or use.built_in is not None:  # (a statement's value is parenthesized where split)
        return loader
    return loader.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _meta_edit(ctx: FileContext, use: IteratorUse, call: cst.Call) -> Edit:
    """``pipe.epoch_size("Reader")`` -> ``loader.reader.get_metadata()["epoch_size_padded"]``
    (``reader_meta``: the whole dictionary; without a name: ``{name: value}``, as the
    pipeline gave)."""
    assert use.holder is not None and use.reader_attr is not None
    reader = cst.Attribute(use.holder.deep_clone(), cst.Name(use.reader_attr))
    key = cst.parse_expression(use.meta_reader) if use.meta_reader is not None else None
    return ctx.expr_edit(call, metadata_value(reader, call, key))


def _kept_edits(
    ctx: FileContext, inst: Instance, use: IteratorUse, pre: list, loader: cst.Call
) -> list[Edit]:
    """``self.pipe = make(...)`` becomes ``self.pipe = Loader(...)``, the iterator made over it
    elsewhere becomes ``self.pipe``, and the iterator's ``reset()`` calls go. A list of
    pipelines, one per GPU: ``pipes = [Loader(...) for ...]``, the iterator
    ``PerDeviceBatches(pipes)``."""
    stmt = inst.stmt.deep_replace(inst.call, loader)
    if pre:
        stmt = stmt.with_changes(leading_lines=[])
    depth = len(ctx.indents(inst.stmt))
    new = [fit(s, ctx.module.default_indent, depth) for s in [*pre, stmt]]
    edits = [ctx.stmt_edit(inst.stmt, new)]
    made = use.kept_in.deep_clone() if use.kept_in is not None else devices_call(use)
    edits.append(ctx.expr_edit(use.call, made))
    return edits + [_dropped(ctx, r) for r in use.resets]


def _wrapper_edit(ctx: FileContext, use: IteratorUse, loader: cst.Call) -> Edit:
    assert use.wrapper is not None
    outer, ref, _ = use.wrapper
    stmt = ctx.enclosing_statement(outer)
    new = fit(stmt.deep_replace(ref, loader), ctx.module.default_indent, len(ctx.indents(stmt)))
    return ctx.stmt_edit(stmt, [new])


def _follows(ctx: FileContext, stmt: cst.CSTNode, before: cst.CSTNode) -> bool:
    block = ctx.parents.get(stmt)
    body = list(getattr(block, "body", ()))
    return stmt in body and body.index(stmt) > 0 and body[body.index(stmt) - 1] is before


def _one_line(args: list[cst.Arg]) -> list[cst.Arg]:
    """The arguments on one line (``fit`` splits the call again where it is too long), unless a
    comment sits between them."""
    if "#" in "".join(source_of(cst.Call(cst.Name("f"), args=[a])) for a in args):
        return args
    out = [
        a.with_changes(
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
            whitespace_after_arg=cst.SimpleWhitespace(""),
        )
        for a in args
    ]
    if out:
        out[-1] = out[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return out


def _creation(
    ctx: FileContext,
    inst: Instance,
    rule_id: str,
    threads_default: cst.Arg | None,
    notes: list,
    threads_set: set[tuple[int, str]],
    todo: bool = True,
) -> list[cst.BaseStatement | cst.EmptyLine]:
    """What stays where the pipeline was made: ``ndd.set_num_threads`` (once per scope) and the
    TODO about a dropped device_id (``todo``), with the comments above it."""
    threads = inst.kwargs.get("num_threads", threads_default)
    if threads is not None:
        text = source_of(threads.value)
        blocks = enclosing_blocks(ctx, inst.stmt)
        threads = None if any((b, text) in threads_set for b in blocks) else threads
        threads_set.add((blocks[0], text))
    lines = [device_todo_line(ctx, inst, rule_id, notes)] if inst.device_todo and todo else []
    if threads is None:
        return [cst.EmptyLine(), *lines] if lines else []  # (an empty line first: only the TODO)
    lines = [*inst.stmt.leading_lines, *lines]
    return [set_threads_stmt(ctx, threads).with_changes(leading_lines=lines)]


def _creation_edit(ctx: FileContext, inst: Instance, pre: list) -> Edit:
    if not pre:
        return _dropped(ctx, inst.stmt)
    if isinstance(pre[0], cst.EmptyLine):  # only the TODO
        text = ctx.leading_comments(inst.stmt) + "".join(
            ctx.render(t, ctx.indents(inst.stmt)) for t in pre[1:]
        )
        return Edit(*ctx.stmt_span(inst.stmt), text)
    return ctx.stmt_edit(inst.stmt, pre)


def _partial_edit(ctx: FileContext, inst: Instance, pre: list, made: cst.Call) -> Edit:
    """``pipe = make(...)`` -> ``pipe = functools.partial(make, ...)`` (after what stays of the
    pipeline's creation, ``pre``): the arguments are taken where the pipeline was made."""
    partial = made.with_changes(
        func=cst.parse_expression("functools.partial"), args=[cst.Arg(made.func), *made.args]
    )
    stmt = cst.ensure_type(inst.stmt.deep_replace(inst.call, partial), cst.SimpleStatementLine)
    if pre and isinstance(pre[0], cst.EmptyLine):  # only the TODO
        new = [stmt.with_changes(leading_lines=[*stmt.leading_lines, *pre])]
    else:
        new = [*pre, stmt.with_changes(leading_lines=[])] if pre else [stmt]
    depth = len(ctx.indents(inst.stmt))
    return ctx.stmt_edit(inst.stmt, [fit(s, ctx.module.default_indent, depth) for s in new])


def _peered_site(
    ctx: FileContext, use: IteratorUse, made: cst.SimpleStatementLine | cst.BaseCompoundStatement
) -> Edit:
    """Where the consumer of a name bound in each branch was: ``from_generator`` over it (a
    DALIDataset), or the loader its partial makes (``loader = pipe()``, alike for every
    definition)."""
    if use.framework == "tf":
        return peered_dataset_edit(ctx, use)
    pipe = use.peered
    assert isinstance(pipe, cst.BaseExpression)  # (the name the iterator took)
    new = made.deep_replace(use.call, cst.Call(pipe.deep_clone()))
    return ctx.stmt_edit(made, [fit(new, ctx.module.default_indent, len(ctx.indents(made)))])


def _dropped(ctx: FileContext, stmt: cst.SimpleStatementLine) -> Edit:
    """The statement removed; ``pass`` where it was alone in its block."""
    block = ctx.parents.get(stmt)
    if isinstance(block, cst.IndentedBlock) and len(block.body) == 1:
        return ctx.stmt_edit(stmt, [stmt.with_changes(body=[cst.Pass()])])
    return removed_stmt(ctx, stmt)


def _pull_holders(
    ctx: FileContext, use: IteratorUse
) -> tuple[cst.BaseAssignTargetExpression, cst.BaseAssignTargetExpression]:
    """Where the iterator was kept (``self._iterator``), and a fresh place next to it for the
    loader (``self._loader``)."""
    # (the target of the assignment that kept it: a name or an attribute of self)
    holder = use.holder
    assert isinstance(holder, cst.BaseAssignTargetExpression)
    if isinstance(holder, cst.Attribute):
        cls = ctx.parents.get(holder)
        while cls is not None and not isinstance(cls, cst.ClassDef):
            cls = ctx.parents.get(cls)
        taken = {n.attr.value for n in walk(cls or ctx.module) if isinstance(n, cst.Attribute)}
        base = "_loader" if holder.attr.value.startswith("_") else "loader"
        return holder, holder.with_changes(attr=cst.Name(fresh_name(base, taken)))
    scope_names = {n.value for n in walk(ctx.module) if isinstance(n, cst.Name)}
    return holder, cst.Name(fresh_name("loader", scope_names))


def _again(
    holder: cst.BaseAssignTargetExpression, loader: cst.BaseExpression
) -> cst.SimpleStatementLine:
    """``holder = iter(loader)``: a new pass over the loader, as reset() started a new epoch."""
    call = cst.Call(cst.Name("iter"), [cst.Arg(loader.deep_clone())])
    return cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(holder.deep_clone())], call)])
