"""What the code of a ``with pipe:`` block does outside the pipeline, and the names it reads that
the code around it rebinds: the block ran where the ``with`` statement stood, the generator that
replaces it runs at its first ``next()`` (a component of DM201).

Plain code with an effect seen outside the block is kept where it stood, before the generator::

    with pipe:                                  src = Source()
        src = Source()                          self.length = src.n // 2
        self.length = src.n // 2       ->
        x = fn.external_source(src)             def pipe_batches():
        pipe.set_outputs(x)                         x_source = iter(src)
                                                    ...

The rule, for each top-level statement of the block that is plain code (it uses no DALI: no
``fn`` call, no data node, not the pipeline's variable; graph code runs with the batches, as
before):

- it has an effect seen outside the block when, outside the functions and lambdas it defines, it
  runs an expression statement (``print(...)``, ``os.chdir(...)``, ``outer.append(...)``),
  declares ``global``/``nonlocal``, deletes something, writes through an attribute or a
  subscript (``self.length = ...``, ``cfg["n"] = ...``), or binds a name that code outside the
  block reads (``n_batches`` read after it, with no other binding of it in between; read
  elsewhere, in a function of the module, where only the block binds it). Calls in
  the value of a plain binding (``src = Source()``) are taken to have no such effect: they run at
  the first batch, with the rest of the block's setup;
- such a statement is kept in place, with the statements of the block it reads names from
  (those before it that bind them), when these are plain code too and the code left in the
  generator binds none of the names they bind; the generator then reads those names from the
  code around it;
- otherwise the pipeline is refused, with the statement and the reason in the TODO (a framework
  iterator's loader class refuses any: its ``__init__`` runs where the iterator is made).

The generator reads the names of the code around it when it runs. A name that code binds again
after the block, or in a loop around it (``for k in ...: src = Source(k); with pipe: ...``),
becomes a parameter of the generator, passed where it is made (``def pipe_batches(src)`` /
``pipe = pipe_batches(src)``): each generator reads the value the block read. Where a function
or lambda of the block reads such a name (an external source's callable reads it when it runs,
a helper when the graph is built: the tool cannot tell which), the pipeline is refused.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst
from libcst.metadata import Scope

from dali_migrate.context import FileContext

from .._cst import assigned_names, free_names, walk, within
from .._local import collect_nodes
from .emit_state import runs_dali, walk_outside_defs
from .iterator_follow import loops_around
from .model import Refused


def kept_in_place(
    ctx: FileContext, block: cst.With, body: list[cst.BaseStatement], var: str
) -> list[cst.BaseStatement]:
    """The statements of ``body`` (the block's graph code) to keep where the block stood, in
    order; Refused where a statement with an effect outside the block cannot be kept there."""
    scope = ctx.scopes.get(block)
    nodes = collect_nodes(ctx, block)
    # each kept statement, by id: the statement with the effect it is kept for, and that effect
    why_kept: dict[int, tuple[cst.BaseStatement, str]] = {}
    for stmt in body:  # (graph code is the pipeline's, as it was: it runs with the batches)
        effect = None if _not_plain(ctx, stmt, nodes, var) else _effect(ctx, stmt, block, scope)
        if effect:
            why_kept[id(stmt)] = (stmt, effect)
        elif not isinstance(stmt, cst.SimpleStatementLine):
            _check_mixed(ctx, stmt, block, scope, nodes, var)
    kept = [s for s in body if id(s) in why_kept]
    for stmt in kept:  # what they read from statements before them comes with them
        for dep in _bound_before(body, stmt, free_names(stmt)):
            if id(dep) in why_kept:
                continue
            root, effect = why_kept[id(stmt)]
            why = _not_plain(ctx, dep, nodes, var)
            if why:
                raise Refused(_refusal(ctx, root, effect, why, dep))
            why_kept[id(dep)] = (root, effect)
            kept.append(dep)
    kept = [s for s in body if id(s) in why_kept]
    _check_left(ctx, body, kept)
    return kept


def _check_mixed(
    ctx: FileContext,
    stmt: cst.BaseStatement,
    block: cst.With,
    scope: Scope | None,
    nodes: set[str],
    var: str,
) -> None:
    """Refused where graph code (an ``if`` that makes nodes) holds a plain line whose effect is
    seen outside the block: that line would run with the batches."""
    for line in walk_outside_defs(stmt):
        if not isinstance(line, cst.SimpleStatementLine) or _not_plain(ctx, line, nodes, var):
            continue
        effect = _effect(ctx, line, block, scope)
        if effect:
            raise Refused(
                f"{_what(ctx, line, effect)}, so it must run where the block stood (the "
                "pipeline's code runs at its first batch now), but it is "
                f"part of `{_first_line(ctx, stmt)}`, which makes graph nodes: move it out of "
                "that statement, before the `with` block"
            )


def _check_left(
    ctx: FileContext, body: list[cst.BaseStatement], kept: list[cst.BaseStatement]
) -> None:
    """Refused where the code left in the generator binds a name a kept statement binds, or
    reads one that a kept statement after it binds (it read the value from before)."""
    bound = set().union(*(_bound(s) for s in kept)) if kept else set()
    for i, stmt in enumerate(body):
        if any(stmt is k for k in kept):
            continue
        clash = sorted(_bound(stmt) & bound)
        if clash:
            raise Refused(
                f"`{clash[0]}` is set by code of the `with` block that must run where the block "
                "stood (its effect is seen outside it) and again by the pipeline's code: give "
                "them different names"
            )
        later = [k for k in body[i + 1 :] if any(k is s for s in kept)]
        early = sorted(free_names(stmt) & set().union(set(), *(_bound(k) for k in later)))
        if early:
            raise Refused(
                f"the pipeline's code reads `{early[0]}` before `{_first_line(ctx, later[0])}`, "
                "which must run where the block stood (its effect is seen outside it), sets it "
                "again: give them different names"
            )


def _bound_before(
    body: list[cst.BaseStatement], stmt: cst.BaseStatement, names: set[str]
) -> list[cst.BaseStatement]:
    """The statements of ``body`` before ``stmt`` that bind one of ``names``."""
    index = next(i for i, s in enumerate(body) if s is stmt)
    return [s for s in body[:index] if _bound(s) & names]


def _bound(stmt: cst.CSTNode) -> set[str]:
    """The names a statement binds: assignments, ``for`` targets, imports, definitions,
    ``with ... as`` and ``:=``."""
    names = assigned_names(stmt)
    for n in walk_outside_defs(stmt):
        if isinstance(n, (cst.FunctionDef, cst.ClassDef)):
            names.add(n.name.value)
        elif isinstance(n, cst.NamedExpr) and isinstance(n.target, cst.Name):
            names.add(n.target.value)
        elif isinstance(n, cst.AsName) and isinstance(n.name, cst.Name):
            names.add(n.name.value)
        elif isinstance(n, cst.ImportAlias) and n.asname is None:
            names.add(cst.helpers.get_full_name_for_node_or_raise(n.name).split(".")[0])
    return names


def _effect(
    ctx: FileContext, stmt: cst.BaseStatement, block: cst.With, scope: Scope | None
) -> str | None:
    """What ``stmt`` does that code outside the block sees (None: nothing)."""
    for n in walk_outside_defs(stmt):
        if isinstance(n, cst.Expr) and not isinstance(n.value, (cst.SimpleString, cst.Ellipsis)):
            return f"runs `{ctx.text(n.value)}`"
        if isinstance(n, (cst.Global, cst.Nonlocal, cst.Del)):
            return f"runs `{ctx.text(n)}`"
        for target in _targets(n):
            if isinstance(target, (cst.Attribute, cst.Subscript)):
                return f"sets `{ctx.text(target)}`"
    declared = _declared(ctx, block)
    for name in sorted(_bound(stmt)):
        if name in declared:
            return f"sets `{name}`, declared `global` or `nonlocal`"
        if _read_outside(ctx, scope, name, block):
            return f"sets `{name}`, which code after the block reads"
    return None


def _declared(ctx: FileContext, block: cst.With) -> set[str]:
    """The names the function around ``block`` declares ``global`` or ``nonlocal`` (bindings of
    them are seen outside it)."""
    cur = ctx.parents.get(block)
    while cur is not None and not isinstance(cur, (cst.FunctionDef, cst.Module)):
        cur = ctx.parents.get(cur)
    if not isinstance(cur, cst.FunctionDef):
        return set()
    return {
        n.name.value
        for d in walk_outside_defs(cur.body)
        if isinstance(d, (cst.Global, cst.Nonlocal))
        for n in d.names
    }


def _targets(node: cst.CSTNode) -> Iterator[cst.BaseExpression]:
    """The expressions ``node`` assigns to (the elements of tuple and list targets too)."""
    if isinstance(node, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For)):
        stack: list[cst.BaseExpression] = [node.target]
    elif isinstance(node, cst.AsName) and isinstance(node.name, cst.BaseExpression):
        stack = [node.name]
    else:
        return
    while stack:
        t = stack.pop()
        if isinstance(t, (cst.Tuple, cst.List)):
            stack += [e.value for e in t.elements]
        else:
            yield t


def _read_outside(ctx: FileContext, scope: Scope | None, name: str, block: cst.With) -> bool:
    """Code outside ``block`` may read ``name`` as the block bound it in ``scope`` (unknown
    scope: it may): a read after the block with no other binding of it in between, or a read
    elsewhere (before it, in a function) where nothing outside the block binds it."""
    if scope is None:
        return True
    nodes = [n for a in scope.assignments[name] if (n := getattr(a, "node", None)) is not None]
    bindings = [n for n in nodes if not within(ctx, n, block)]
    end = _start(ctx, block, end=True)
    for ref in {id(r): r for a in scope.assignments[name] for r in a.references}.values():
        if within(ctx, ref.node, block):
            continue
        at = _start(ctx, ref.node)
        if at < end or ctx.scopes.get(ref.node) is not scope:
            if not bindings:
                return True
        elif not any(end <= _start(ctx, b) < at for b in bindings):
            return True
    return False


def _start(ctx: FileContext, node: cst.CSTNode, end: bool = False) -> tuple[int, int]:
    """Where ``node`` starts (or ends) in the source, as (line, column)."""
    r = ctx.positions[node]
    pos = r.end if end else r.start
    return pos.line, pos.column


def _not_plain(ctx: FileContext, stmt: cst.BaseStatement, nodes: set[str], var: str) -> str:
    """Why ``stmt`` cannot run outside the generator ('' where it can)."""
    if var in free_names(stmt):
        return f"it reads `{var}`, the pipeline (a generator now)"
    data = sorted(free_names(stmt) & nodes)
    if data:
        return f"it reads `{data[0]}`, which the pipeline's graph code makes"
    if runs_dali(ctx, stmt, nodes) or any(
        isinstance(n, (cst.Name, cst.Attribute)) and ctx.is_fn_ref(n) for n in walk(stmt)
    ):
        return "it runs DALI operators"
    return ""


def _refusal(
    ctx: FileContext, stmt: cst.BaseStatement, effect: str, why: str, dep: cst.BaseStatement
) -> str:
    """The TODO's reason for a statement of the block that must stay where it stood (``effect``)
    but needs ``dep``, which cannot (``why``: what it reads, or that it runs DALI)."""
    return (
        f"{_what(ctx, stmt, effect)}, so it must run where the block stood (the "
        "pipeline's code runs at its first batch now), but it needs "
        f"`{_first_line(ctx, dep)}`, which {why.removeprefix('it ')}: compute it from plain "
        "values before the `with` block"
    )


def _what(ctx: FileContext, stmt: cst.CSTNode, effect: str) -> str:
    """``stmt`` and what it does outside the block, for a TODO."""
    line = _first_line(ctx, stmt)
    if effect == f"runs `{line}`":
        return f"`{line}` in the `with` block has an effect seen outside it"
    return f"`{line}` in the `with` block {effect}"


def _first_line(ctx: FileContext, stmt: cst.CSTNode) -> str:
    return ctx.text(stmt).strip().splitlines()[0].rstrip(":")


def late_bound(ctx: FileContext, block: cst.With, gen: cst.FunctionDef) -> list[str]:
    """The names ``gen`` (defined where ``block`` stood) reads from the code around it that this
    code binds again after the block or in a loop around it, in order of first read; Refused
    where a function or lambda of the block reads one (pipeline mode may have read it late)."""
    scope = ctx.scopes.get(block)
    if scope is None:
        return []
    local = _bound(gen.body) | {
        p.name.value for n in walk(gen.body) if isinstance(n, cst.Parameters) for p in n.params
    }
    local |= {
        t.value
        for n in walk(gen.body)
        if isinstance(n, cst.CompFor)
        for t in walk(n.target)
        if isinstance(t, cst.Name)
    }
    reads = [
        n.value
        for n in walk_reads(gen.body)
        if n.value not in local and n.value in scope and scope.assignments[n.value]
    ]
    end = _start(ctx, block, end=True)
    loops = loops_around(ctx, block)
    names: list[str] = []
    for name in dict.fromkeys(reads):
        for a in scope.assignments[name]:
            node = getattr(a, "node", None)
            if node is None:
                continue
            if _start(ctx, node) >= end or any(within(ctx, node, loop) for loop in loops):
                names.append(name)
                break
    deferred = sorted(set(names) & _read_in_functions(block))
    if deferred:
        raise Refused(
            f"`{deferred[0]}` is read by a function or lambda of the `with` block, which may run "
            "with the batches (reading its value then) or where the block stood, and the code "
            "around rebinds it after the block or in a loop: to read the value it had where the "
            f"block stood, pass it as a default argument (`{deferred[0]}={deferred[0]}`)"
        )
    return names


def _read_in_functions(block: cst.With) -> set[str]:
    """The names the functions and lambdas defined in ``block`` read."""
    return {
        n.value
        for f in walk(block.body)
        if isinstance(f, (cst.FunctionDef, cst.Lambda))
        for n in walk_reads(f.body)
    }


def walk_reads(node: cst.CSTNode) -> Iterator[cst.Name]:
    """The plain names ``node`` reads, in order (attribute names and keywords are not)."""
    skip = {id(n.attr) for n in walk(node) if isinstance(n, cst.Attribute)}
    skip |= {id(n.keyword) for n in walk(node) if isinstance(n, cst.Arg) and n.keyword}
    return (n for n in walk(node) if isinstance(n, cst.Name) and id(n) not in skip)
