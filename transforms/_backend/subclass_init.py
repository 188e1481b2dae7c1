"""The ``__init__`` of a framework-iterator subclass that takes the pipeline and hands it on to
``super().__init__`` (the shape of MLPerf-style loaders): read as the iterator call it stands for,
with the arguments the one call of the subclass gives in place of its parameters.

Before::

    class DaliGenericIterator(DALIGenericIterator):
        def __init__(self, pipe, reader_name, mode="train"):
            lbp = LastBatchPolicy.FILL if mode == "train" else LastBatchPolicy.PARTIAL
            super().__init__(pipelines=[pipe], reader_name=reader_name, output_map=["image"],
                             auto_reset=True, last_batch_policy=lbp)

    loader = DaliGenericIterator(pipe, reader_name="Reader", mode="val")

is read as ``DALIGenericIterator(pipelines=[pipe], reader_name="Reader", output_map=["image"],
auto_reset=True, last_batch_policy=LastBatchPolicy.PARTIAL)``. The body may only bind local
names before that call (``lbp = ...``); a parameter the iterator's arguments read must be given a
literal (or keep a literal default), and ``a if <literal> == <literal> else b`` is decided here.
Anything else is a reason, and the subclass stays with a TODO.
"""

from __future__ import annotations

import ast
from typing import cast

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import free_names, source_of, walk
from .base_internals import base_uses
from .flow_sites import enclosing_class
from .iterator_args import HARMLESS
from .wrappers import LITERALS, binding_of

#: comparisons decided between two literals
_COMPARE = {
    cst.Equal: lambda a, b: a == b,
    cst.NotEqual: lambda a, b: a != b,
    cst.Is: lambda a, b: a is b,
    cst.IsNot: lambda a, b: a is not b,
}


def method(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    """The method ``name`` defined in the body of ``cls``."""
    for s in cls.body.body:
        if isinstance(s, cst.FunctionDef) and s.name.value == name:
            return s
    return None


def own_init(cls: cst.ClassDef) -> cst.FunctionDef | None:
    """The ``__init__`` of ``cls``, unless it only hands what it is given to its base
    (``def __init__(self, *args, **kwargs): super().__init__(*args, **kwargs)``, DALI's Lightning
    tutorial): that one does what none would."""
    init = method(cls, "__init__")
    if init is None or init.decorators or not isinstance(init.body, cst.IndentedBlock):
        return init
    p = init.params
    star = p.star_arg.name.value if isinstance(p.star_arg, cst.Param) else None
    kw = p.star_kwarg.name.value if p.star_kwarg is not None else None
    stmts = [s for s in init.body.body if not _is_doc(s)]
    call = _super_init(stmts[0]) if len(stmts) == 1 else None
    if (
        len(p.params) != 1
        or p.params[0].default is not None
        or p.kwonly_params
        or p.posonly_params
        or (star is None and kw is None)
        or call is None
    ):
        return init
    handed = [(a.star, a.value.value if isinstance(a.value, cst.Name) else None) for a in call.args]
    wanted = ([("*", star)] if star else []) + ([("**", kw)] if kw else [])
    return None if handed == wanted else init


def init_reasons(cls: cst.ClassDef) -> list[str]:
    """Why the ``__init__`` of ``cls`` is not only local names and one ``super().__init__(...)``."""
    init = own_init(cls)
    name = cls.name.value
    if init is None:
        return []
    params = init.params
    if (
        params.star_arg is not cst.MaybeSentinel.DEFAULT
        or params.star_kwarg
        or params.kwonly_params
    ):
        return [f"{name}.__init__ takes *args, **kwargs or keyword-only parameters"]
    if init.decorators or not isinstance(init.body, cst.IndentedBlock):
        return [f"{name}.__init__ is decorated or on one line"]
    stmts = [s for s in init.body.body if not _is_doc(s)]
    if not stmts or _super_init(stmts[-1]) is None:
        return [f"{name}.__init__ does not end with super().__init__(...)"]
    bound: set[str] = set()
    for s in stmts[:-1]:
        target = _local_assign(s)
        if target is None or target in bound or target in {p.name.value for p in params.params}:
            return [f"{name}.__init__ does more than bind local names before super().__init__"]
        bound.add(target)
    if "self" in free_names(init.body):
        return [f"{name}.__init__ uses self other than through super().__init__"]
    return []


def resolved_call(
    cls: cst.ClassDef, call: cst.Call, ref: cst.CSTNode, base: cst.BaseExpression
) -> cst.Call | str:
    """``base(...)`` with the arguments of ``super().__init__`` in ``cls.__init__``, its local
    names and parameters followed to what ``call`` (the one call making ``cls``, ``ref`` the
    pipeline it is given) gives; a reason when a parameter they read is not given a literal.
    The arguments are nodes of the module (the iterator's analysis asks their scopes)."""
    init = own_init(cls)
    assert init is not None and isinstance(init.body, cst.IndentedBlock)  # (init_reasons)
    stmts = [s for s in init.body.body if not _is_doc(s)]
    given = _given(call, init, ref)
    if isinstance(given, str):
        return given
    values = _Values({p.name.value: given.get(p.name.value) for p in init.params.params[1:]})
    for s in stmts[:-1]:
        small = cst.ensure_type(cst.ensure_type(s, cst.SimpleStatementLine).body[0], cst.Assign)
        target = cst.ensure_type(small.targets[0].target, cst.Name).value
        values[target] = _followed(small.value, values)
    sup = _super_init(stmts[-1])
    assert sup is not None  # (init_reasons)
    args = []
    for a in sup.args:
        value = _followed(a.value, values)
        if _is_pipeline(value, ref, values):
            args.append(a.with_changes(value=cst.List([cst.Element(cast(Expr, ref))])))
            continue
        unknown = sorted(free_names(value) & set(values)) if value is not None else ["?"]
        if unknown and not (a.keyword is not None and a.keyword.value in HARMLESS):
            name = unknown[0] if value is not None else source_of(a.value)
            return (
                f"`{name}` is not given a literal where {cls.name.value} is made "
                f"(it decides {_what(a)} of the iterator)"
            )
        if value is not None:
            args.append(a.with_changes(value=value))
    return cst.Call(base.deep_clone(), args=args)


def _followed(expr: cst.BaseExpression | None, values: _Values) -> cst.BaseExpression | None:
    """``expr`` followed through the names of ``__init__`` (to what binds them) and through
    ``a if <test> else b`` whose test is decided by literals; None where a name has no known
    value."""
    while expr is not None:
        if isinstance(expr, cst.Name) and expr.value in values:
            if expr.value in values.params:  # what the call gives (code of its own scope)
                return values[expr.value]
            expr = values[expr.value]
        elif isinstance(expr, cst.IfExp):
            test = _literal_test(expr.test, values)
            if test is None:
                return expr
            expr = expr.body if test else expr.orelse
        else:
            return expr
    return None


def _is_pipeline(
    value: cst.BaseExpression | None,
    ref: cst.CSTNode,
    values: _Values,
) -> bool:
    """``value`` is the pipeline or a list of it alone (``[pipe]``)."""
    if isinstance(value, (cst.List, cst.Tuple)) and len(value.elements) == 1:
        value = _followed(value.elements[0].value, values)
    return value is ref


def _what(arg: cst.Arg) -> str:
    return f"{arg.keyword.value}=" if arg.keyword is not None else "an argument"


def _given(
    call: cst.Call, init: cst.FunctionDef, ref: cst.CSTNode
) -> dict[str, cst.BaseExpression] | str:
    """The parameters of ``__init__`` the call (or a default) gives a literal, and the one it
    gives the pipeline ``ref``."""
    names = [p.name.value for p in init.params.params[1:]]
    out = {p.name.value: p.default for p in init.params.params[1:] if p.default is not None}
    for i, a in enumerate(call.args):
        if a.star:
            return "it is made with *args or **kwargs"
        key = a.keyword.value if a.keyword is not None else (names[i] if i < len(names) else None)
        if key is None or key not in names:
            return "it is made with arguments its __init__ does not take"
        out[key] = a.value
    return {k: v for k, v in out.items() if v is ref or _is_literal(v)}


def _is_literal(v: cst.BaseExpression) -> bool:
    if isinstance(v, cst.Name):
        return v.value in _CONSTS
    return isinstance(v, LITERALS) and not any(
        isinstance(n, cst.Name) and n.value == "self" for n in walk(v)
    )


Expr = cst.BaseExpression
_CONSTS = ("True", "False", "None")


class _Values(dict[str, "cst.BaseExpression | None"]):
    """The names of ``__init__``: what binds each (None: not known); ``params``: its parameters,
    bound by the call to code of the caller's scope."""

    def __init__(self, params: dict[str, cst.BaseExpression | None]) -> None:
        super().__init__(params)
        self.params = frozenset(params)


def _literal_test(test: cst.BaseExpression, values: _Values) -> bool | None:
    """The value of a test of literals (``mode == "train"``), or None."""
    if isinstance(test, cst.Name) and test.value not in _CONSTS:
        followed = _followed(test, values)
        return _literal_test(followed, values) if followed is not None else None
    if isinstance(test, cst.Name):
        return test.value == "True"
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return None
    op = test.comparisons[0].operator
    fn = next((f for t, f in _COMPARE.items() if isinstance(op, t)), None)
    left = _literal(_followed(test.left, values))
    right = _literal(_followed(test.comparisons[0].comparator, values))
    if fn is None or left is _UNKNOWN or right is _UNKNOWN:
        return None
    return bool(fn(left, right))


_UNKNOWN = object()


def _literal(expr: cst.BaseExpression | None) -> object:
    if isinstance(expr, (cst.SimpleString, cst.Integer)) or (
        isinstance(expr, cst.Name) and expr.value in _CONSTS
    ):
        return ast.literal_eval(source_of(expr))
    return _UNKNOWN


def _is_doc(s: cst.CSTNode) -> bool:
    return (
        isinstance(s, cst.SimpleStatementLine)
        and len(s.body) == 1
        and isinstance(s.body[0], cst.Expr)
        and isinstance(s.body[0].value, cst.SimpleString)
    )


def _local_assign(s: cst.CSTNode) -> str | None:
    """``name = <expression without calls>``: the name."""
    if not (isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1):
        return None
    small = s.body[0]
    if not (
        isinstance(small, cst.Assign)
        and len(small.targets) == 1
        and isinstance(small.targets[0].target, cst.Name)
    ):
        return None
    if any(isinstance(n, (cst.Call, cst.Lambda, cst.NamedExpr)) for n in walk(small.value)):
        return None
    return small.targets[0].target.value


def _super_init(s: cst.CSTNode) -> cst.Call | None:
    """The call of ``super().__init__(...)`` that the statement ``s`` is."""
    if not (isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1):
        return None
    small = s.body[0]
    call = small.value if isinstance(small, cst.Expr) else None
    if (
        isinstance(call, cst.Call)
        and isinstance(call.func, cst.Attribute)
        and call.func.attr.value == "__init__"
        and isinstance(call.func.value, cst.Call)
        and isinstance(call.func.value.func, cst.Name)
        and call.func.value.func.value == "super"
        and not call.func.value.args
    ):
        return call
    return None


def handed_to_base(ctx: FileContext, call: cst.Call) -> tuple[str, str, str, list[str]] | None:
    """``call`` is ``super().__init__(...)`` in a class of this module that subclasses a DALI
    framework iterator (the class builds its pipeline itself and hands it on): (the class, the
    iterator it subclasses, the policy argument's text or "", what the class reads of the base
    (``base_internals``))."""
    if _super_init(cst.SimpleStatementLine([cst.Expr(call)])) is None:
        return None
    cls = enclosing_class(ctx, call)
    if cls is None:
        return None
    bases = [ctx.qualname(b.value) or "" for b in cls.bases]
    base = next((b for b in bases if b.startswith("nvidia.dali.plugin.")), None)
    if base is None:
        return None
    policy = next(
        (
            ctx.text(a.value)
            for a in call.args
            if a.keyword is not None
            and a.keyword.value == "last_batch_policy"
            and (ctx.qualname(a.value) or "").startswith("nvidia.dali.plugin.")
        ),
        "",
    )
    return cls.name.value, base.rsplit(".", 1)[-1], policy, base_uses(cls)


def base_advice(cls: str, base: str, policy: str, uses: list[str]) -> tuple[str, str]:
    """The TODO at ``super().__init__(pipe, ...)`` of ``handed_to_base``: what it is, what to
    write."""
    cut = f" as last_batch_policy={policy} did" if policy else " as its last_batch_policy did"
    return (
        f"{cls} hands the pipeline to `super().__init__` ({base}), which runs only a Pipeline: "
        f"{cls} is not migrated",
        f"write {cls} without the {base} base: build the reader once in __init__ (with "
        "max_batch_size= to read its get_metadata()), make __iter__ start one epoch of "
        "reader.next_epoch(batch_size=...) that runs the operators on each batch, and "
        f"__next__ return what it returned, built from the outputs as {base} gave them "
        f"(output.torch() for data[0][name]), ending the epoch{cut}"
        + (f"; the TODO at `class {cls}` says what it uses of the base" if uses else ""),
    )


def rebound_iterator_advice(ctx: FileContext, ref: cst.CSTNode) -> str:
    """What to write where ``ref``, a name bound to this pipeline or another (one per branch), is
    handed to a framework iterator (DALI's, or a subclass of it defined here); "" elsewhere."""
    node = ctx.parents.get(ref)
    if isinstance(node, cst.Element):  # [pipe]
        node = ctx.parents.get(ctx.parents.get(node))
    call = ctx.parents.get(node) if isinstance(node, cst.Arg) else None
    if not isinstance(call, cst.Call):
        return ""
    q = ctx.qualname(call.func) or ""
    made = q.rsplit(".", 1)[-1] if q.startswith("nvidia.dali.plugin.") else None
    cls = (
        getattr(binding_of(ctx, call.func), "node", None)
        if isinstance(call.func, cst.Name)
        else None
    )
    if made is None and isinstance(cls, cst.ClassDef):
        if any((ctx.qualname(b.value) or "").startswith("nvidia.dali.plugin.") for b in cls.bases):
            made = cls.name.value
    if made is None:
        return ""
    what = f"{made} is not migrated over a name that holds a different pipeline in each branch"
    if q.endswith(".DALIDataset"):
        return f"{what}: {_dataset_advice(ctx, call)}"
    return (
        f"{what}: make the {made} where each pipeline is made (in each branch, with that branch's "
        "arguments), so that each becomes a loader, or write one loader class per pipeline whose "
        f"__iter__ runs one epoch of reader.next_epoch(batch_size=...) and yields what {made} gave"
    )


def _dataset_advice(ctx: FileContext, call: cst.Call) -> str:
    """What to write for a DALIDataset over a name bound to a different pipeline in each branch;
    DALI ran the pipeline with the dataset's own ``batch_size``."""
    given = next(
        (a.value for a in call.args if a.keyword is not None and a.keyword.value == "batch_size"),
        None,
    )
    told = f"`{ctx.text(given)}`" if given is not None else "1, its default"
    return (
        "make the DALIDataset in each branch, over the pipeline made there (with that branch's "
        "output_dtypes), so that each migrates to tf.data.Dataset.from_generator. DALI ran each "
        f"pipeline with the DALIDataset's batch_size ({told}) as its max_batch_size, whatever "
        "the pipeline was made with: make each pipeline with that batch size"
    )
