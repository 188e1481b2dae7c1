"""The arguments of a framework iterator over a migrated pipeline (``DALIGenericIterator``,
``DALIClassificationIterator``, ``DALIRaggedIterator`` of PyTorch, Paddle and JAX): which
iterators are migrated and their positional parameters, and what each argument means for the
loader (``output_map``, ``reader_name``, ``size``, ``last_batch_padded``,
``last_batch_policy``/``fill_last_batch``, ``auto_reset``, the ragged iterator's
``output_types``), read into an ``IteratorUse`` with the reasons it cannot migrate.
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import assigned_names, free_names, sole_assignment, source_of, walk
from .iterator_use import ANY_READER, IteratorUse
from .model import Instance
from .wrappers import binding_of

#: framework of each plug-in module
FRAMEWORKS = {
    "nvidia.dali.plugin.pytorch": "torch",
    "nvidia.dali.plugin.paddle": "paddle",
    "nvidia.dali.plugin.jax": "jax",
}
_TORCH = (
    "output_map",
    "size",
    "reader_name",
    "auto_reset",
    "fill_last_batch",
    "dynamic_shape",
    "last_batch_padded",
    "last_batch_policy",
    "prepare_first_batch",
)
#: iterators migrated -> their positional parameters after ``pipelines``
ITERATORS = {
    "nvidia.dali.plugin.pytorch.DALIGenericIterator": _TORCH,
    "nvidia.dali.plugin.pytorch.DALIClassificationIterator": _TORCH[1:],
    "nvidia.dali.plugin.pytorch.DALIRaggedIterator": (*_TORCH[:3], "output_types", *_TORCH[3:]),
    "nvidia.dali.plugin.paddle.DALIGenericIterator": _TORCH,
    "nvidia.dali.plugin.paddle.DALIClassificationIterator": _TORCH[1:],
    "nvidia.dali.plugin.jax.DALIGenericIterator": (
        "output_map",
        "size",
        "reader_name",
        "auto_reset",
        "last_batch_padded",
        "last_batch_policy",
        "prepare_first_batch",
        "sharding",
        "pmap_compatible",
    ),
}
RAGGED = "nvidia.dali.plugin.pytorch.DALIRaggedIterator"
POLICY_CLASSES = tuple(
    f"nvidia.dali.plugin.{m}.LastBatchPolicy" for m in ("base_iterator", "pytorch", "paddle", "jax")
)
#: arguments left at these values change nothing
DEFAULTS = {
    "size": "-1",
    "last_batch_padded": "False",
    "fill_last_batch": "None",
    "output_types": "None",
    "sharding": "None",
    "pmap_compatible": "None",
}
#: arguments that change nothing about the batches
HARMLESS = {"prepare_first_batch", "dynamic_shape"}


def _arguments(
    call: cst.Call, params: tuple[str, ...], reasons: list[str]
) -> dict[str, cst.BaseExpression]:
    """The iterator's arguments by parameter name, without those left at their defaults."""
    args: dict[str, cst.BaseExpression] = {}
    for i, a in enumerate(call.args):
        if a.star:
            reasons.append("*args/**kwargs")
        elif a.keyword is not None:
            args[a.keyword.value] = a.value
        elif i == 0:
            args["pipelines"] = a.value
        elif i - 1 < len(params):
            args[params[i - 1]] = a.value
    return {k: v for k, v in args.items() if source_of(v) != DEFAULTS.get(k) and k not in HARMLESS}


def analyse_iterator(
    ctx: FileContext, inst: Instance, call: cst.Call, q: str, reasons: list[str]
) -> IteratorUse | None:
    """The iterator ``call`` (of qualified name ``q``) over the pipeline ``inst`` as an
    ``IteratorUse``, what it cannot carry over in ``reasons``; None when its output names are
    not known."""
    args = _arguments(call, ITERATORS[q], reasons)
    framework = FRAMEWORKS[q.rsplit(".", 1)[0]]
    pipes = args.pop("pipelines", None)
    if isinstance(pipes, (cst.List, cst.Tuple)) and len(pipes.elements) != 1:
        reasons.append(
            "a list of several pipelines (one per GPU) is not migrated: by hand, run one process "
            "per GPU (e.g. torchrun) that builds one pipeline with shard_id=<rank>, "
            "num_shards=<world size> and device_id=<local rank> and wraps it alone "
            "(DALIGenericIterator([pipe], ...)), which dali-migrate then migrates; each process's "
            "batch is what data[rank] was"
        )
    for key in ("sharding", "pmap_compatible"):
        if key in args:
            reasons.append(f"{key}= (batches assembled over several devices) is not migrated")
    output_map = _output_map(args.pop("output_map", None), q, reasons)
    sparse_lists = (
        _output_types(ctx, args.pop("output_types", None), reasons) if q == RAGGED else set()
    )
    reader_name = _reader_name(args.pop("reader_name", None), reasons)
    size, size_reader = None, None
    claimed: list[cst.CSTNode] = []
    size_binding = None
    if "size" in args:
        given_size = args.pop("size")
        size_binding = size_statement(ctx, given_size, inst.variable, call)
        if size_binding is not None:  # pipe_size = int(pipe.epoch_size("R") / n): the value
            given_size = cst.ensure_type(size_binding.body[0], cst.Assign).value
        size, size_reader, claimed = _size(ctx, inst, given_size, reasons)
        if reader_name is not None:
            reasons.append(
                "size= and reader_name= are given together (DALI's iterator refuses that)"
            )
    padded = _flag(args.pop("last_batch_padded", None), "last_batch_padded", reasons)
    if padded and reader_name is not None:
        reasons.append(
            "last_batch_padded= is given with reader_name= (DALI's iterator refuses that)"
        )
    policy, binding, choice = _read_policy(ctx, call, args, reasons)
    others = [choice[2]] if choice is not None else []
    if framework == "jax" and "PARTIAL" in (policy, *others):
        reasons.append("JAX's iterator has no PARTIAL policy (DALI refuses it)")
    if q == RAGGED and size is not None and "PARTIAL" in (policy, *others):
        reasons.append(
            "DALIRaggedIterator with size= and PARTIAL fails in DALI 2.4 (no _output_categories)"
        )
    auto_reset = args.pop("auto_reset", None)
    for key in args:
        reasons.append(f"{key}= is not migrated")
    if reader_name is None and size is None and size_reader is None:
        # without reader_name and size the iterator forces FILL, unpadded: it never ends an epoch
        policy, padded, choice = "FILL", False, None
    if output_map is None:
        return None
    use = IteratorUse(call, framework, output_map, reader_name, policy, size, size_reader, padded)
    use.auto_reset = auto_reset is not None and not (
        isinstance(auto_reset, cst.Name) and auto_reset.value in ("False", "None")
    )
    use.claimed, use.sparse_lists, use.policy_binding = claimed, sparse_lists, binding
    use.size_binding = size_binding
    use.policy_choice = choice
    if size is not None and pipe_attribute(size, inst.variable) is not None:
        use.size_attr = pipe_attribute(size, inst.variable)
    return use


def _read_policy(
    ctx: FileContext, call: cst.Call, args: dict[str, cst.BaseExpression], reasons: list[str]
) -> tuple[str, cst.BaseStatement | None, tuple[cst.BaseExpression, str, str] | None]:
    """``last_batch_policy=``/``fill_last_batch=`` (taken from ``args``): the policy, the
    statement that binds the name given (it goes with the iterator) and, for a policy chosen at
    run time, ``policy_choice``."""
    given = args.pop("last_batch_policy", None)
    binding: cst.BaseStatement | None = policy_binding(ctx, given)
    if binding is not None:  # policy = LastBatchPolicy.X, read only here
        line = cst.ensure_type(binding, cst.SimpleStatementLine)
        given = cst.ensure_type(line.body[0], cst.Assign).value
    elif (branches := branch_binding(ctx, given)) is not None:  # if t: policy = A / else: = B
        binding, given = branches
    fill = args.pop("fill_last_batch", None)
    choice = policy_choice(ctx, call, given, binding) if fill is None else None
    policy = choice[1] if choice is not None else _policy(ctx, given, fill, reasons)
    return policy, binding, choice


def pipe_attribute(expr: cst.BaseExpression, pipe: str | None) -> str | None:
    """``pipe.size``: the attribute of the pipeline object ``expr`` is (else None)."""
    if (
        isinstance(expr, cst.Attribute)
        and isinstance(expr.value, cst.Name)
        and pipe is not None
        and expr.value.value == pipe
    ):
        return expr.attr.value
    return None


def _output_map(om: cst.BaseExpression | None, q: str, reasons: list[str]) -> list[str] | None:
    if om is None:
        if q.endswith("DALIClassificationIterator"):
            return ["data", "label"]
        reasons.append("no output_map")
        return None
    items = om.elements if isinstance(om, (cst.List, cst.Tuple)) else None
    if items is None or not all(isinstance(e.value, cst.SimpleString) for e in items):
        reasons.append("output_map is not a list of string literals")
        return None
    values = [e.value.evaluated_value for e in items if isinstance(e.value, cst.SimpleString)]
    names = [n for n in values if isinstance(n, str)]
    if len(names) != len(values) or len(set(names)) != len(names):
        reasons.append("output_map is not a list of distinct names")
        return None
    return names


def _reader_name(rn: cst.BaseExpression | None, reasons: list[str]) -> str | None:
    if rn is None or (isinstance(rn, cst.Name) and rn.value == "None"):
        return None
    name = rn.evaluated_value if isinstance(rn, cst.SimpleString) else None
    if isinstance(name, str):  # (a bytes literal names no reader)
        return name
    if isinstance(rn, (cst.Name, cst.Attribute)):
        # DALI's iterator fails unless reader_name names a reader of the pipeline: a variable
        # there names the pipeline's one reader (checked where the reader is known)
        return ANY_READER
    reasons.append("reader_name is not a string literal or a variable")
    return None


def _flag(value: cst.BaseExpression | None, name: str, reasons: list[str]) -> bool:
    if value is None:
        return False
    if isinstance(value, cst.Name) and value.value in ("True", "False"):
        return value.value == "True"
    reasons.append(f"{name} is not True or False")
    return False


def _read_once(
    ctx: FileContext, name: cst.BaseExpression | None
) -> tuple[cst.Assign, cst.SimpleStatementLine] | None:
    """``name = value`` alone on its line in the scope of ``name``, the one binding of ``name``,
    which is read only at ``name``: the assignment and its statement."""
    if not isinstance(name, cst.Name):
        return None
    binding = binding_of(ctx, name)
    scope = ctx.scopes.get(name)
    target = getattr(binding, "node", None)
    if scope is None or target is None or len(scope.accesses[name]) != 1:
        return None
    assign = ctx.parents.get(ctx.parents.get(target))
    stmt = ctx.parents.get(assign)
    if (
        isinstance(assign, cst.Assign)
        and sole_assignment(ctx, assign.value) is assign
        and isinstance(stmt, cst.SimpleStatementLine)
        and ctx.scopes.get(stmt) is scope
    ):
        return assign, stmt
    return None


def policy_binding(
    ctx: FileContext, name: cst.BaseExpression | None
) -> cst.SimpleStatementLine | None:
    """``name = LastBatchPolicy.<X>`` (or ``... if <test> else ...``, which the policy's reason
    names), alone on its line, the one binding of ``name`` (the policy given to the iterator as
    ``name``), which nothing else reads: the statement."""
    found = _read_once(ctx, name)
    if found is None:
        return None
    assign, stmt = found
    if not isinstance(assign.value, (cst.Attribute, cst.IfExp)):
        return None
    if isinstance(assign.value, cst.IfExp):  # chosen at run time: the reason names it
        return stmt
    q = ctx.qualname(assign.value) or ""
    return stmt if any(q.startswith(c + ".") for c in POLICY_CLASSES) else None


def size_statement(
    ctx: FileContext, name: cst.BaseExpression, pipe: str | None, call: cst.Call
) -> cst.SimpleStatementLine | None:
    """``pipe_size = <an expression with pipe.epoch_size("R")>``, alone on its line, the one
    binding of ``name`` (the ``size=`` given), read only there, in the block of the iterator's
    statement, with nothing between the two binding a name it reads: the statement (its value
    is the size, as if written in the call; the statement goes with the iterator)."""
    found = _read_once(ctx, name)
    if found is None:
        return None
    assign, stmt = found
    if not any(isinstance(n, cst.Call) and _is_epoch_size(n, pipe) for n in walk(assign.value)):
        return None
    block = ctx.parents.get(stmt)
    site = ctx.enclosing_statement(call)
    siblings = list(getattr(block, "body", ()))
    if stmt not in siblings or site not in siblings or siblings.index(site) < siblings.index(stmt):
        return None
    read = free_names(assign.value)
    between = siblings[siblings.index(stmt) + 1 : siblings.index(site)]
    return None if any(assigned_names(s) & read for s in between) else stmt


def branch_binding(
    ctx: FileContext, name: cst.BaseExpression | None
) -> tuple[cst.If, cst.IfExp] | None:
    """``if t: name = A`` / ``else: name = B``, each branch that one assignment, the only
    bindings of ``name``, which nothing else reads: the ``if`` and ``A if t else B``."""
    scope = ctx.scopes.get(name) if isinstance(name, cst.Name) else None
    if scope is None or not isinstance(name, cst.Name) or len(scope.accesses[name]) != 1:
        return None
    values = []
    for a in scope.assignments[name.value]:
        assign = ctx.parents.get(ctx.parents.get(a.node))
        line = ctx.parents.get(assign)
        block = ctx.parents.get(line)
        if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
            return None
        if not isinstance(line, cst.SimpleStatementLine) or len(getattr(block, "body", ())) != 1:
            return None
        values.append((ctx.parents.get(block), assign.value))
    if len(values) != 2:
        return None
    owners = {id(o): o for o, _ in values}
    stmt = next((o for o in owners.values() if isinstance(o, cst.If)), None)
    if stmt is None or not isinstance(stmt.orelse, cst.Else):
        return None
    body = next((v for o, v in values if o is stmt), None)
    orelse = next((v for o, v in values if o is stmt.orelse), None)
    if body is None or orelse is None:
        return None
    return stmt, cst.IfExp(stmt.test, body, orelse)


def _literal_policy(ctx: FileContext, p: cst.BaseExpression) -> str | None:
    """``LastBatchPolicy.FILL``/``PARTIAL``/``DROP``: the policy's name (else None)."""
    q = ctx.qualname(p) if isinstance(p, cst.Attribute) else None
    for c in POLICY_CLASSES:
        if q and q.startswith(c + ".") and q[len(c) + 1 :] in ("FILL", "PARTIAL", "DROP"):
            return q[len(c) + 1 :]
    return None


def policy_choice(
    ctx: FileContext,
    call: cst.Call,
    p: cst.BaseExpression | None,
    binding: cst.BaseStatement | None,
) -> tuple[cst.BaseExpression, str, str] | None:
    """``LastBatchPolicy.A if test else LastBatchPolicy.B``, as the iterator's argument or bound
    on the statement just above the iterator's: (test, A, B). The test moves to where the loader
    is made, so it may call nothing (a call could see or change what the arguments read)."""
    if not isinstance(p, cst.IfExp) or any(isinstance(n, cst.Call) for n in walk(p.test)):
        return None
    a, b = _literal_policy(ctx, p.body), _literal_policy(ctx, p.orelse)
    if a is None or b is None or a == b:
        return None
    if binding is not None:
        block = ctx.parents.get(binding)
        body = list(getattr(block, "body", ()))
        made = ctx.enclosing_statement(call)
        at = next((i for i, s in enumerate(body) if s is binding), -1)
        if at < 0 or at + 1 >= len(body) or body[at + 1] is not made:
            return None
    return p.test, a, b


def _policy(
    ctx: FileContext,
    p: cst.BaseExpression | None,
    fill: cst.BaseExpression | None,
    reasons: list[str],
) -> str:
    policy = "FILL"
    if p is not None:
        pq = ctx.qualname(p) if isinstance(p, cst.Attribute) else None
        match = [pq[len(c) + 1 :] for c in POLICY_CLASSES if pq and pq.startswith(c + ".")]
        if isinstance(p, cst.IfExp):
            reasons.append(
                f"last_batch_policy is chosen at run time (`{' '.join(source_of(p).split())}`): "
                "one loader class per policy is written only for a choice between two "
                "LastBatchPolicy members by a test that calls nothing, made in the iterator's "
                "call or on the line above it"
            )
        elif not match or match[0] not in ("FILL", "PARTIAL", "DROP"):
            reasons.append("last_batch_policy is not LastBatchPolicy.FILL/PARTIAL/DROP")
        else:
            policy = match[0]
    if fill is not None:
        if isinstance(fill, cst.Name) and fill.value in ("True", "False"):
            policy = "FILL" if fill.value == "True" else "PARTIAL"
        else:
            reasons.append("fill_last_batch is not True, False or None")
    return policy


def _size(
    ctx: FileContext, inst: Instance, expr: cst.BaseExpression, reasons: list[str]
) -> tuple[cst.BaseExpression | None, str | None, list[cst.CSTNode]]:
    """``size=``: an expression of names the loader's caller has, in which ``pipe.epoch_size("R")``
    (of this pipeline) may appear once and becomes the reader's ``epoch_size_padded``:
    (the expression, the reader name or None, the pipeline references the iterator claims)."""
    pipe = inst.variable
    calls = [n for n in walk(expr) if isinstance(n, cst.Call) and _is_epoch_size(n, pipe)]
    names = [n for n in walk(expr) if isinstance(n, cst.Name) and n.value == pipe]
    if not calls and pipe_attribute(expr, pipe) is not None:
        # size=pipe.size: an attribute of the pipeline, which the front end may resolve
        return expr, None, [cst.ensure_type(expr, cst.Attribute).value]
    if len(calls) > 1 or len(names) != len(calls):
        reasons.append(
            f"size={source_of(expr)} is not migrated (only an expression with at most one "
            f'{pipe}.epoch_size("<reader '
            'name>")): give the reader a name and pass reader_name= instead'
        )
        return None, None, []
    if calls:
        func = cst.ensure_type(calls[0].func, cst.Attribute)
        reader = cst.ensure_type(calls[0].args[0].value, cst.SimpleString).evaluated_value
        assert isinstance(reader, str)  # (_is_epoch_size)
        return expr, reader, [func.value]
    if isinstance(expr, cst.Integer) and int(expr.value, 0) <= 0:
        reasons.append(f"size={source_of(expr)} is not a positive size")
    return expr, None, []


def _is_epoch_size(call: cst.Call, pipe: str | None) -> bool:
    return (
        isinstance(call.func, cst.Attribute)
        and isinstance(call.func.value, cst.Name)
        and call.func.value.value == pipe
        and call.func.attr.value == "epoch_size"
        and len(call.args) == 1
        and not call.args[0].star
        and (call.args[0].keyword is None or call.args[0].keyword.value == "name")
        and isinstance(call.args[0].value, cst.SimpleString)
        and isinstance(call.args[0].value.evaluated_value, str)
    )


RAGGED_TAGS = {
    "DENSE_TAG": "dense",
    "SPARSE_LIST_TAG": "sparse_list",
    "SPARSE_COO_TAG": "sparse_coo",
}


def _output_types(
    ctx: FileContext, expr: cst.BaseExpression | None, reasons: list[str]
) -> set[int]:
    """DALIRaggedIterator's ``output_types``: the indices of the SPARSE_LIST_TAG outputs; dense
    outputs read like DALIGenericIterator's, SPARSE_COO_TAG is a reason."""
    if expr is None:
        return set()
    items = expr.elements if isinstance(expr, (cst.List, cst.Tuple)) else None
    tags: list[str | bytes | None] = []
    for e in items or ():
        v = e.value
        if isinstance(v, cst.SimpleString):
            tags.append(v.evaluated_value)
        elif (
            isinstance(v, cst.Attribute)
            and (ctx.qualname(v) or "").startswith(RAGGED + ".")
            and (v.attr.value in RAGGED_TAGS)
        ):
            tags.append(RAGGED_TAGS[v.attr.value])
        else:
            tags.append(None)
    if items is None or not all(t in ("dense", "sparse_list", "sparse_coo") for t in tags):
        reasons.append("output_types is not a list of DALIRaggedIterator tags")
    elif "sparse_coo" in tags:
        reasons.append(
            "DALIRaggedIterator's SPARSE_COO_TAG output is not migrated: by hand, build the torch "
            "sparse COO tensor from the samples of the ndd.Batch ([t.torch() for t in "
            "batch.tensors])"
        )
    return {k for k, t in enumerate(tags) if t == "sparse_list"}
