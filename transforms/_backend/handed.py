"""Callables the caller hands to a pipeline and the graph calls: a parameter of an
``@pipeline_def`` function (DM200), or one ``__init__`` keeps (``self.transforms = transforms``,
DM202), that the graph code calls on data (``self.transforms(jpegs)``), calls for its data
(``self.dataset_reader()``), or whose elements it calls (``for t in self.transforms_list:
out.append(t(jpegs))``).

The tool cannot see what the caller passes (often something made in another module), so the
generator calls it as written and a TODO above the statement says what it must be now: pipeline
mode called it once, to build the graph, on graph nodes; the generator calls it once per batch, on
``ndd.Batch``::

    def __init__(self, transforms, batch_size):    def Pipe(transforms, batch_size):
        super().__init__(batch_size, 2, 0)             ...
        self.input = ops.FileReader(file_root=R)       while True:
        self.transforms = transforms          ->           for jpegs, labels in reader.next_epoch(...):
                                                               # TODO(dali-migrate): DM202: `transforms` ...
    def define_graph(self):                                    images = transforms(jpegs)
        jpegs, labels = self.input()                           yield images.evaluate(), labels
        return self.transforms(jpegs), labels
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from .._cst import assigned_names, free_names, walk
from .class_calls import is_self_attr
from .class_init import bound_names


@dataclass
class Handed:
    """The values the caller handed in that the graph code reads, by their name in the generator
    (the parameter of ``__init__`` each came from as value), the call that makes the pipeline,
    as the TODOs name it (``Pipe(...)``), and its batch size."""

    names: dict[str, str]
    maker: str
    #: the pipeline's batch size, as code (``batch_size``)
    batch: str


def handed_values(init: cst.FunctionDef, code: list[cst.FunctionDef]) -> dict[str, str]:
    """``self.<name> = <param>`` in ``__init__`` (``param`` one of its parameters, never bound
    again there), the one assignment of ``self.<name>`` in ``code`` (the class's methods that
    are merged), and ``name`` bound by none of them: name -> param."""
    params = init.params
    names = {p.name.value for p in [*params.params, *params.kwonly_params]}
    rebound = bound_names(init.body)
    set_count: dict[str, int] = {}
    for fn in code:
        for n in walk(fn.body):
            if isinstance(n, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign)):
                for t in walk(n.target):
                    if is_self_attr(t):
                        set_count[t.attr.value] = set_count.get(t.attr.value, 0) + 1
    local = set().union(*(bound_names(fn.body) for fn in code))
    out: dict[str, str] = {}
    for n in walk(init.body):
        if not (isinstance(n, cst.Assign) and len(n.targets) == 1):
            continue
        target, value = n.targets[0].target, n.value
        if is_self_attr(target) and isinstance(value, cst.Name) and value.value in names:
            name = target.attr.value
            if set_count.get(name) == 1 and value.value not in rebound and name not in local:
                out[name] = value.value
    return out


def handed_data(
    stmts: list[cst.BaseStatement],
    handed: Handed,
    nodes: set[str],
    read_later: Callable[[int, set[str]], set[str]],
) -> set[str]:
    """``nodes`` (names holding data) with the names that get data from handed-in callables:
    what one returns when called on what the graph code computes (``images = augment(images)``:
    an argument reads a name the graph code binds, :func:`local_names`), and what one called
    without arguments returns when graph code after it (``read_later``: the names statements
    after the ``i``-th read, given the data names) reads it (``images, labels = source()``)."""
    nodes = set(nodes)
    local = local_names(stmts, handed)
    changed = True
    while changed:
        changed = False
        for i, stmt in enumerate(stmts):
            for assign, calls in _assignments(stmt, handed):
                bound = _bound(assign)
                if bound <= nodes:
                    continue
                if any(_on_data(c, local) for c, _ in calls) or (
                    all(not c.args for c, _ in calls) and bound & read_later(i, nodes)
                ):
                    nodes |= bound
                    changed = True
    return nodes


def local_names(stmts: list[cst.BaseStatement], handed: Handed) -> set[str]:
    """The names the graph code binds (its data among them), less the handed-in values."""
    return set().union(*(assigned_names(s) for s in stmts)) - set(handed.names)


def _on_data(call: cst.Call, local: set[str]) -> bool:
    return any(free_names(a.value) & local for a in call.args)


def _bound(assign: cst.Assign) -> set[str]:
    return {n.value for t in assign.targets for n in walk(t.target) if isinstance(n, cst.Name)}


def handed_todos(stmt: cst.CSTNode, handed: Handed, nodes: set[str], local: set[str]) -> list[str]:
    """What the TODOs above ``stmt`` (a statement of the loop's body, before lowering) say: one
    per handed-in value it calls on what the graph code computes (``local``: the names it binds,
    :func:`local_names`; its nodes are ndd.Batch now), whose elements it calls so, or that gives
    it data (``nodes``: the names holding data, :func:`handed_data`)."""
    out: list[str] = []
    for call, element in _calls(stmt, handed):
        func = cst.ensure_type(call.func, cst.Name).value
        if _on_data(call, local):
            text = _elements_called(element, handed) if element else _called(func, handed, True)
        elif not call.args and not element and _gives_data(stmt, call, nodes):
            text = _called(func, handed, False)
        else:
            continue
        if text not in out:
            out.append(text)
    return out


def _calls(stmt: cst.CSTNode, handed: Handed) -> list[tuple[cst.Call, str | None]]:
    """The calls in ``stmt`` of handed-in values, each with None, or of the elements of one
    (``for t in views: t(x)``), each with the handed-in value's name."""
    elements = {
        n.target.value: n.iter.value
        for n in walk(stmt)
        if isinstance(n, cst.For)
        and isinstance(n.target, cst.Name)
        and isinstance(n.iter, cst.Name)
        and n.iter.value in handed.names
    }
    out: list[tuple[cst.Call, str | None]] = []
    for call in (n for n in walk(stmt) if isinstance(n, cst.Call)):
        if isinstance(call.func, cst.Name) and call.func.value in handed.names:
            out.append((call, None))
        elif isinstance(call.func, cst.Name) and call.func.value in elements:
            out.append((call, elements[call.func.value]))
    return out


def _assignments(
    stmt: cst.CSTNode, handed: Handed
) -> list[tuple[cst.Assign, list[tuple[cst.Call, str | None]]]]:
    """The assignments in ``stmt`` whose value calls handed-in values (or their elements)."""
    calls = _calls(stmt, handed)
    out = []
    for n in walk(stmt):
        if isinstance(n, cst.Assign):
            inside = {id(c) for c in walk(n.value) if isinstance(c, cst.Call)}
            mine = [(c, e) for c, e in calls if id(c) in inside]
            if mine:
                out.append((n, mine))
    return out


def _gives_data(stmt: cst.CSTNode, call: cst.Call, nodes: set[str]) -> bool:
    """``call`` is the value of an assignment in ``stmt`` that binds data names."""
    for n in walk(stmt):
        if isinstance(n, cst.Assign) and any(c is call for c in walk(n.value)):
            if _bound(n) & nodes:
                return True
    return False


def _given(name: str, handed: Handed) -> str:
    param = handed.names[name]
    via = f" as `{param}`" if param != name else ""
    return f"`{name}` (given by the caller of {handed.maker}{via})"


def _called(name: str, handed: Handed, on_data: bool) -> str:
    if on_data:
        return (
            f"{_given(name, handed)} is called here on ndd.Batch, once per batch (pipeline "
            "mode called it once, on graph nodes, to build the graph): pass a callable that "
            "takes and returns ndd.Batch, its operators migrated to ndd"
        )
    return (
        f"{_given(name, handed)} made the pipeline's data (its reader) and is called here once "
        "per batch now: pass a callable that returns the next batch as ndd.Batch at each call, "
        f"its reader built once (ndd.readers.<Reader>(..., max_batch_size={handed.batch})) and "
        f"called with batch_size={handed.batch}, its operators migrated to ndd"
    )


def _elements_called(name: str, handed: Handed) -> str:
    return (
        f"the elements of {_given(name, handed)} are called here on ndd.Batch, once per batch "
        "(pipeline mode called them once, on graph nodes, to build the graph): pass callables "
        "that take and return ndd.Batch, their operators migrated to ndd"
    )
