"""TensorFlow's ``DALIIterator()`` op over a migrated pipeline (a component of DM200): the op's
tensors become the next element of a one-shot iterator over the same
``tf.data.Dataset.from_generator`` that ``DALIDataset`` migrates to (``datasets``).

Before::

    daliop = dali_tf.DALIIterator()
    pipe = train_pipeline(root, batch_size=BATCH, device_id=0)
    with tf.device("/gpu:0"):
        images, labels = daliop(pipeline=pipe, shapes=[(BATCH, 224, 224, 3), (BATCH, 1)],
                                dtypes=[tf.float32, tf.int32], device_id=0)

After::

    with tf.device("/gpu:0"):
        # the DALIIterator op's tensors: the next batch of a pipeline of its own each time the
        # graph runs; from_generator takes host arrays
        images, labels = tf.compat.v1.data.make_one_shot_iterator(tf.data.Dataset.from_generator(
            lambda: train_pipeline(root, batch_size=BATCH),
            output_signature=(tf.TensorSpec((BATCH, 224, 224, 3), tf.float32),
                              tf.TensorSpec((BATCH, 1), tf.int32)),
        )).get_next()

Why: ``dali_tf.DALIIterator()`` returns DALI's op; each call of it adds an op with a pipeline of
its own to the graph, whose tensors are the pipeline's next batch each time the graph runs. A
one-shot iterator's ``get_next()`` over ``from_generator`` is the same: one generator per op, the
next element per run. The op is recognised where a name bound once to ``DALIIterator()`` is
called once, outside loops; that assignment goes with it. Where one graph may run the call
more than once, it stays: in a decorated function (a ``tf.function`` keeps the op, and its
pipeline, across calls) or in a function this module calls in a loop (eagerly, each call took
the next batch of the same pipeline, where a new one-shot iterator would start again).
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import sole_assignment

OP = "nvidia.dali.plugin.tf.DALIIterator"
COMMENT = (
    "# the DALIIterator op's tensors: the next batch of a pipeline of its own each time the\n"
    "# graph runs; from_generator takes host arrays"
)


def op_statement(ctx: FileContext, call: cst.Call) -> cst.SimpleStatementLine | None:
    """``daliop = dali_tf.DALIIterator()``, where ``call`` is ``daliop(...)``, the name's one
    binding and its one use; None for any other call."""
    if not isinstance(call.func, cst.Name):
        return None
    scope = ctx.scopes.get(call.func)
    if scope is None:
        return None
    bindings = list(scope.assignments[call.func.value])
    if len(bindings) != 1:
        return None
    uses = list(bindings[0].references)  # (in nested functions too)
    if len(uses) != 1 or uses[0].node is not call.func:
        return None
    target = ctx.parents.get(bindings[0].node)
    assign = ctx.parents.get(target) if isinstance(target, cst.AssignTarget) else None
    if not isinstance(assign, cst.Assign) or sole_assignment(ctx, assign.value) is not assign:
        return None
    made = assign.value
    if not (isinstance(made, cst.Call) and not made.args and ctx.qualname(made.func) == OP):
        return None
    stmt = ctx.parents.get(assign)
    return stmt if isinstance(stmt, cst.SimpleStatementLine) else None


def holds_op(ctx: FileContext, call: cst.Call) -> bool:
    """``call`` calls a name, or an attribute ``x.<attr>``, that some assignment of the module
    binds to ``DALIIterator()`` (an op :func:`op_statement` does not take: bound or called more
    than once, kept on ``self``)."""
    func = call.func
    if isinstance(func, cst.Name):
        key: tuple[type, str] = (cst.Name, func.value)
    elif isinstance(func, cst.Attribute):
        key = (cst.Attribute, func.attr.value)
    else:
        return False
    for assign in ctx.nodes_of(cst.Assign):
        made = assign.value
        if not (isinstance(made, cst.Call) and ctx.qualname(made.func) == OP):
            continue
        for t in assign.targets:
            target = t.target
            name = target.attr if isinstance(target, cst.Attribute) else target
            if isinstance(name, cst.Name) and (type(target), name.value) == key:
                return True
    return False


def in_loop(ctx: FileContext, node: cst.CSTNode) -> bool:
    """``node`` runs in a loop or comprehension of its function (or of the module)."""
    cur = ctx.parents.get(node)
    while cur is not None and not isinstance(cur, (cst.FunctionDef, cst.Module, cst.Lambda)):
        if isinstance(cur, (cst.For, cst.While, cst.CompFor)):
            return True
        cur = ctx.parents.get(cur)
    return False


def op_reasons(ctx: FileContext, call: cst.Call) -> list[str]:
    """Why the op's call may run more than once for one graph: in a ``@tf.function`` (or any
    decorated function: its graph keeps the op's pipeline across calls), or in a function this
    module calls in a loop (eagerly, each call took the next batch of the same pipeline; a
    one-shot iterator would start again)."""
    fn = ctx.parents.get(call)
    while fn is not None and not isinstance(fn, cst.FunctionDef):
        fn = ctx.parents.get(fn)
    if fn is None:
        return []
    if fn.decorators:
        return ["the op is called in a decorated function (a tf.function's graph keeps it)"]
    name = fn.name.value
    for other in ctx.nodes_of(cst.Call):
        func = other.func
        called = func.attr if isinstance(func, cst.Attribute) else func
        if isinstance(called, cst.Name) and called.value == name and in_loop(ctx, other):
            return [
                f"{name}() is called in a loop (eagerly, each call of the op gave the next batch "
                "of the same pipeline)"
            ]
    return []


def next_element(tf: str, dataset: cst.BaseExpression) -> cst.Call:
    """``tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()``."""
    make = cst.parse_expression(f"{tf}.compat.v1.data.make_one_shot_iterator")
    iterator = cst.Call(make, [cst.Arg(dataset)])
    return cst.Call(cst.Attribute(iterator, cst.Name("get_next")), [])
