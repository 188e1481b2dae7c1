"""Where a pipeline object goes: from the call that creates it to every use, through the places
real code keeps it.

Followed: local names (also assigned more than once, by several calls of the same definition),
instance attributes (``self.pipe = make(...)`` in one method, ``self.pipe.run()`` in another),
factories (``def make(): p = pipe_fn(...); p.build(); return p`` and their callers; where
the factory only relays it, ``Found.relays``, reader handles follow it there too), lists of
per-GPU pipelines (``[make(i) for i in range(n)]``, ``pipes.append(make(i))``, ``for p in pipes``,
``pipes[0]``), lists and tuples of pipelines of several definitions (``[a(), b()]``: the other
definitions are *peers*, migrated with this one or not at all; also a name bound to a peer's
pipeline in one branch and built after the ``if``, see :mod:`.branch_peers`), unpacking
(``a, b = f(), g()``, ``loader, pipe = factory()``), parameters of functions of the same file
and of ``__init__`` of its classes (where every call passes a pipeline there). Each use found
there is recorded on the :class:`~.model.Instance`; a use the tool cannot follow becomes a
:class:`~.model.FollowUp` (a TODO next to it), never a silent leftover.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import libcst as cst

from dali_migrate.context import FileContext

from .._cst import in_source_order, within
from .branch_peers import PeerOf, branch_peers, consumer_site, peer_use_advice, shared_use
from .flow_sites import (
    arguments_for,
    called_code,
    enclosing_class,
    enclosing_function,
    made_by,
    parameter,
    references,
    relay_of,
    self_attribute,
    stored_only,
    unpacked_target,
)
from .model import FollowUp, Relay
from .reaching import reaching
from .subclass_init import rebound_iterator_advice

#: how deep factories and parameters are followed (a factory calling a factory...)
MAX_DEPTH = 4


@dataclass
class Found:
    """What following one pipeline object found: ``uses`` are expressions holding the object
    (``pipe`` in ``pipe.run()``), in source order; ``followups`` the uses that cannot be followed."""

    uses: list[cst.CSTNode] = field(default_factory=list)
    followups: list[FollowUp] = field(default_factory=list)
    #: every expression found to evaluate to the object (``uses``, and the names and arguments
    #: it went through on the way)
    reached: list[cst.CSTNode] = field(default_factory=list)
    #: True when the object is only ever held by local names of one scope (the simple case that
    #: reader handles and framework iterators need)
    local: bool = True
    #: how many objects the origin may create when the program runs (factories called from
    #: several places, lists: more than one); capture mode needs exactly one
    copies: int = 1
    #: the other pipeline definitions whose objects share the code followed (``[a(), b()]``, a
    #: helper given ``a()`` here and ``b()`` there): migrated together with this one, or not at all
    peers: list[cst.CSTNode] = field(default_factory=list)
    #: False when the object is held other than by local names, except by simple factories
    #: (``relays``): handles can follow it through those
    relayed: bool = True
    relays: list[Relay] = field(default_factory=list)
    #: ``pipe`` in ``DALIDataset(pipe, ...)`` or ``DALIGenericIterator([pipe], ...)`` where
    #: ``pipe`` holds this pipeline or a peer's (one per branch): each branch binds it to a
    #: partial of the generator (or loader class), which the consumer's replacement calls
    peer_consumers: list[cst.CSTNode] = field(default_factory=list)

    def not_local(self) -> None:
        self.local = self.relayed = False


class Flow:
    """Follows the objects created by ``origins`` (calls of one pipeline definition, or the name
    a ``Pipeline(...)`` is bound to). ``known``: ids of expressions that hold such an object, so
    that a name bound by two of them (``pipe = f(a)`` ... ``pipe = f(b)``) is followed."""

    def __init__(
        self,
        ctx: FileContext,
        known: set[int],
        ignore: tuple[cst.CSTNode, ...] = (),
        peer_of: PeerOf | None = None,
    ) -> None:
        self.ctx = ctx
        self.known = set(known)
        self.peer_of = peer_of
        self.ignore = {id(n) for n in ignore}
        self.seen: set[int] = set()
        #: ids of the binding nodes (names, parameters) followed so far
        self.bindings: set[int] = set()
        #: ids of ``pipe`` in ``return pipe`` where ``pipe`` holds this pipeline or a peer's
        #: (one per branch): followed, but only uses alike for every peer's are kept
        self.peered: set[int] = set()

    def follow(self, origin: cst.CSTNode, label: str) -> Found:
        """Everything done with the object ``origin`` evaluates to; ``label`` names it in TODOs."""
        found = Found()
        self._value(origin, label, found, depth=0)
        found.uses.sort(
            key=lambda n: (self.ctx.positions[n].start.line, self.ctx.positions[n].start.column)
        )
        return found

    # -- an expression that evaluates to the object -------------------------------------------------

    def _value(self, expr: cst.CSTNode, label: str, found: Found, depth: int) -> None:
        if id(expr) in self.peered:
            self.peered.discard(id(expr))
            self._peered_value(expr, label, found, depth)
            return
        if id(expr) in self.seen or id(expr) in self.ignore:
            return
        self.seen.add(id(expr))
        found.reached.append(expr)
        ctx = self.ctx
        parent = ctx.parents.get(expr)
        if isinstance(parent, cst.Attribute) and parent.value is expr:
            found.uses.append(expr)  # pipe.build(), pipe.run(), pipe.epoch_size(), ...
        elif isinstance(parent, cst.Assign) and parent.value is expr and len(parent.targets) == 1:
            self._bound(parent.targets[0].target, expr, label, found, depth)
        elif isinstance(parent, cst.Return) and depth < MAX_DEPTH:
            found.local = False
            relay = relay_of(ctx, parent) if depth == 0 else None
            if relay is None:
                found.relayed = False
            else:
                found.relays.append(relay)
            self._returned(parent, expr, label, found, depth)
        elif isinstance(parent, cst.Element) and self._unpacked(parent, expr, label, found, depth):
            pass
        elif (
            isinstance(parent, cst.Element)
            and self._in_list(parent, label, found, depth)
            or (
                isinstance(parent, (cst.ListComp, cst.GeneratorExp))
                and parent.elt is expr
                and self._comprehension(parent, label, found, depth)
            )
            or isinstance(parent, cst.Arg)
            and self._appended(parent, label, found, depth)
        ):
            found.not_local()
        elif isinstance(parent, cst.Arg) and self._argument(parent, expr, label, found, depth):
            pass
        else:
            found.uses.append(expr)  # handed to code the caller judges (iterators) or a TODO

    def _bound(
        self,
        target: cst.BaseAssignTargetExpression,
        expr: cst.CSTNode,
        label: str,
        found: Found,
        depth: int,
    ) -> None:
        if isinstance(target, cst.Name):
            for ref in self._name_refs(target, found):
                self._value(ref, target.value, found, depth)
        elif self_attribute(self.ctx, target) is not None:
            self.known.add(id(expr))  # self.pipe = pipe: the store holds it
            found.not_local()
            for ref in self._attribute_refs(target, found):  # type: ignore[arg-type]
                self._value(ref, self.ctx.text(target), found, depth)
        else:
            found.followups.append(
                FollowUp(expr, f"the pipeline is stored in `{self.ctx.text(target)}`")
            )

    # -- names -----------------------------------------------------------------------------------------

    def _name_refs(self, target: cst.Name | cst.Param, found: Found) -> Iterator[cst.CSTNode]:
        """Reads of the name ``target`` binds (an assignment target, a ``for`` target or a
        parameter) that can only hold a pipeline object (or None)."""
        ctx = self.ctx
        name = target.name if isinstance(target, cst.Param) else target
        self.bindings.add(id(target))
        scope = ctx.scopes.get(name)
        if scope is None:
            return
        for assignment in scope.assignments[name.value]:
            if assignment.node is not target:
                continue
            for ref in in_source_order(ctx, assignment.references):
                holders = reaching(ctx, ref)
                if not any(h is assignment for h in holders):
                    continue  # straight-line code: a later binding of the name holds it here
                if all(self._holds_pipe(r) for r in holders) or self._peer_use(
                    ref.node, holders, found
                ):
                    yield ref.node
                elif id(ref.node) not in self.seen:
                    self.seen.add(id(ref.node))
                    found.followups.append(
                        FollowUp(
                            ref.node,
                            f"`{name.value}` may hold the pipeline or something else here",
                            rebound_iterator_advice(ctx, ref.node),
                        )
                    )

    def _peer_use(self, node: cst.CSTNode, holders: list, found: Found) -> bool:
        """``node`` holds this pipeline or a peer's (one per branch; the peers migrate with this
        one): True where it is followed, a use alike for each (``pipe.build()``, ``pipe.run()``)
        or ``return pipe`` (its callers' uses are held to the same rule); any other use gets
        its TODO here."""
        if self.peer_of is None:
            return False
        peers = branch_peers(self.ctx, holders, self._holds_pipe, self.peer_of)
        if peers is None:
            return False
        found.peers += peers
        ret = self.ctx.parents.get(node)
        if shared_use(self.ctx, node):
            return True
        if isinstance(ret, cst.Return) and ret.value is node:
            self.peered.add(id(node))
            return True
        if consumer_site(self.ctx, node):
            found.peer_consumers.append(node)
            return True
        if id(node) not in self.seen:
            self.seen.add(id(node))
            self._peer_followup(node, found)
        return False

    def _peer_followup(self, node: cst.CSTNode, found: Found) -> None:
        what, advice = peer_use_advice(self.ctx, node, rebound_iterator_advice(self.ctx, node))
        found.followups.append(FollowUp(node, what, advice))

    def _peered_value(self, expr: cst.CSTNode, label: str, found: Found, depth: int) -> None:
        """``return pipe`` where ``pipe`` holds this pipeline or a peer's: followed to the
        factory's callers, keeping only the uses alike for each; the others, and a factory
        no call of this file takes the pipeline from, get their TODO."""
        sub = Found()
        self._value(expr, label, sub, depth)
        found.reached += sub.reached
        found.followups += sub.followups
        found.peers += sub.peers
        found.copies *= sub.copies
        found.not_local()  # reader handles do not follow a peer's pipeline through the factory
        for use in sub.uses:
            if shared_use(self.ctx, use):
                found.uses.append(use)
            else:
                self._peer_followup(use, found)
        if not sub.uses and not sub.followups:
            what, advice = peer_use_advice(self.ctx, expr, "")
            found.followups.append(
                FollowUp(expr, f"{what}, returned to no caller in this file", advice)
            )

    def _holds_pipe(self, assignment: object) -> bool:
        """The binding ``assignment`` (a libcst scope assignment) holds a pipeline or None."""
        node = getattr(assignment, "node", None)
        if id(node) in self.bindings:
            return True
        parent = self.ctx.parents.get(node) if node is not None else None
        if isinstance(parent, cst.AssignTarget):
            value = self.ctx.parents.get(parent)
            if isinstance(value, cst.Assign):
                return id(value.value) in self.known or _is_none(value.value)
        if isinstance(parent, (cst.For, cst.CompFor)):  # for p in pipes
            return id(parent.iter) in self.known
        return False

    # -- instance attributes -------------------------------------------------------------------------

    def _attribute_refs(self, target: cst.Attribute, found: Found) -> Iterator[cst.CSTNode]:
        """Reads of ``self.<attr>`` in the methods of the class whose method binds ``target``;
        uses of ``.<attr>`` elsewhere in the module may be this pipeline too: TODOs."""
        ctx = self.ctx
        cls = enclosing_class(ctx, target)
        attr = target.attr.value
        stores = [a for a in ctx.nodes_of(cst.AssignTarget) if _attr_name(a.target) == attr]
        clean = cls is not None and all(
            within(ctx, s, cls)
            and (id(ctx.parents[s].value) in self.known or _is_none(ctx.parents[s].value))
            for s in stores
        )
        for node in ctx.nodes_of(cst.Attribute):
            if (
                node.attr.value != attr
                or any(s.target is node for s in stores)
                or id(node) in self.seen
            ):
                continue
            if isinstance(ctx.enclosing_statement(node), cst.SimpleStatementLine) and _in_import(
                ctx, node
            ):
                continue  # import nvidia.dali.pipeline
            if clean and within(ctx, node, cls) and self_attribute(ctx, node) is not None:
                yield node
            else:
                self.seen.add(id(node))
                found.followups.append(
                    FollowUp(node, f"`{ctx.text(node)}` may hold the pipeline here")
                )

    # -- factories ---------------------------------------------------------------------------------------

    def _returned(
        self, ret: cst.Return, expr: cst.CSTNode, label: str, found: Found, depth: int
    ) -> None:
        """``return pipe`` in a factory: each call of the factory holds the pipeline."""
        ctx = self.ctx
        fn = enclosing_function(ctx, ret)
        if fn is None:
            found.followups.append(FollowUp(expr, "the pipeline is returned here"))
            return
        calls = list(self._calls_of(fn, found))
        found.copies *= max(sum(2 if in_loop(ctx, c) else 1 for c in calls), 1)
        for call in calls:
            self.known.add(id(call))
        for call in calls:
            self._value(call, f"{fn.name.value}(...)", found, depth + 1)

    def _calls_of(self, fn: cst.FunctionDef, found: Found) -> Iterator[cst.Call]:
        """The calls of a function (``make(...)``) or method (``self.make(...)``) in this file;
        any other reference is a TODO, since what it is handed to cannot be seen."""
        ctx = self.ctx
        for ref in references(ctx, fn):
            call = ctx.parents.get(ref)
            if isinstance(call, cst.Call) and call.func is ref and not within(ctx, ref, fn):
                yield call
            elif id(ref) not in self.seen:
                self.seen.add(id(ref))
                found.followups.append(
                    FollowUp(ref, f"`{fn.name.value}` (which returns the pipeline) is used here")
                )

    # -- lists of pipelines ----------------------------------------------------------------------------

    def _in_list(self, element: cst.Element, label: str, found: Found, depth: int) -> bool:
        """``[make(i) for i in ...]`` is followed by the caller (a comprehension); ``[a, b]``
        or ``(a, b)`` assigned to a name: each element read from it holds a pipeline."""
        lst = self.ctx.parents.get(element)
        holder = self.ctx.parents.get(lst)
        if not (
            isinstance(lst, (cst.List, cst.Tuple))
            and isinstance(holder, cst.Assign)
            and holder.value is lst
            and len(holder.targets) == 1
            and isinstance(holder.targets[0].target, cst.Name)
        ):
            return False
        peers = self._pipelines([e.value for e in lst.elements])
        if peers is None:
            return False  # other things in the list too: its uses are not followed
        found.peers += peers
        self.known.add(id(lst))
        found.copies = 2
        self._list(lst, label, found, depth)
        return True

    def _unpacked(
        self, element: cst.Element, expr: cst.CSTNode, label: str, found: Found, depth: int
    ) -> bool:
        """``a, b = make(x), make(y)`` (or ``[...]``): the pipeline is bound to the name in its
        place; from a factory's ``return loader, pipe``, to that place in each ``x, y = f()``."""
        lst = self.ctx.parents.get(element)
        holder = self.ctx.parents.get(lst)
        if not isinstance(lst, (cst.List, cst.Tuple)):
            return False
        index = [e is element for e in lst.elements].index(True)
        if isinstance(holder, cst.Return) and depth < MAX_DEPTH:
            fn = enclosing_function(self.ctx, holder)
            if fn is None or any(isinstance(e, cst.StarredElement) for e in lst.elements):
                return False
            found.not_local()
            calls = list(self._calls_of(fn, found))
            found.copies *= max(sum(2 if in_loop(self.ctx, c) else 1 for c in calls), 1)
            for call in calls:
                target = unpacked_target(self.ctx, call, len(lst.elements), index)
                if target is None:
                    found.followups.append(
                        FollowUp(call, f"`{fn.name.value}(...)` returns the pipeline here")
                    )
                else:
                    self._bound(target, call, label, found, depth + 1)
            return True
        target = unpacked_target(self.ctx, lst, len(lst.elements), index)
        if target is None:
            return False
        self._bound(target, expr, label, found, depth)
        return True

    def _comprehension(
        self, comp: cst.ListComp | cst.GeneratorExp, label: str, found: Found, depth: int
    ) -> bool:
        """``pipes = [make(i) for i in range(n)]``."""
        holder = self.ctx.parents.get(comp)
        if not (
            isinstance(comp, cst.ListComp)
            and isinstance(holder, cst.Assign)
            and holder.value is comp
        ):
            return False
        self.known.add(id(comp))
        found.copies = 2
        self._list(comp, label, found, depth)
        return True

    def _appended(self, arg: cst.Arg, label: str, found: Found, depth: int) -> bool:
        """``pipes.append(make(i))`` where ``pipes = []`` is a local list."""
        ctx = self.ctx
        call = ctx.parents.get(arg)
        func = call.func if isinstance(call, cst.Call) else None
        if not (
            isinstance(func, cst.Attribute)
            and func.attr.value == "append"
            and isinstance(func.value, cst.Name)
        ):
            return False
        scope = ctx.scopes.get(func.value)
        bindings = list(scope.assignments[func.value.value]) if scope is not None else []
        inits = [ctx.parents.get(ctx.parents.get(a.node)) for a in bindings]
        if not bindings or not all(
            isinstance(i, cst.Assign) and isinstance(i.value, cst.List) for i in inits
        ):
            return False
        found.copies = 2
        for init in inits:
            if id(init.value) not in self.known:
                self.known.add(id(init.value))
                self._list(init.value, label, found, depth)
        return True

    def _list(self, lst: cst.CSTNode, label: str, found: Found, depth: int) -> None:
        """A list of pipelines, bound by an assignment: its elements are followed."""
        holder = self.ctx.parents.get(lst)
        assert isinstance(holder, cst.Assign)
        target = holder.targets[0].target
        refs = self._name_refs(target, found) if isinstance(target, cst.Name) else iter(())
        for ref in refs:
            if not _is_append(self.ctx, ref):
                self._element_uses(ref, label, found, depth)

    def _element_uses(self, ref: cst.CSTNode, label: str, found: Found, depth: int) -> None:
        ctx = self.ctx
        parent = ctx.parents.get(ref)
        if (
            isinstance(parent, (cst.For, cst.CompFor))
            and parent.iter is ref
            and isinstance(parent.target, cst.Name)
        ):
            self.known.add(id(ref))
            for r in self._name_refs(parent.target, found):
                self._value(r, parent.target.value, found, depth)
        elif isinstance(parent, cst.Subscript) and parent.value is ref:
            self.known.add(id(parent))
            self._value(parent, ctx.text(parent), found, depth)
        elif isinstance(parent, cst.Arg) and (
            _call_name(ctx, parent) == "len" or self._enumerated(parent, label, found, depth)
        ):
            return
        elif isinstance(parent, cst.Return) and parent.value is ref and depth < MAX_DEPTH:
            self._returned_list(parent, ref, label, found, depth)
        else:
            found.uses.append(ref)  # e.g. DALIGenericIterator(pipes, ...): the caller judges

    def _enumerated(self, arg: cst.Arg, label: str, found: Found, depth: int) -> bool:
        """``for i, p in enumerate(pipes)``: ``p`` holds a pipeline."""
        ctx = self.ctx
        call = ctx.parents.get(arg)
        loop = ctx.parents.get(call)
        if not (
            _call_name(ctx, arg) == "enumerate"
            and isinstance(call, cst.Call)
            and len(call.args) == 1
            and isinstance(loop, (cst.For, cst.CompFor))
            and loop.iter is call
            and isinstance(loop.target, cst.Tuple)
            and len(loop.target.elements) == 2
            and isinstance(loop.target.elements[1].value, cst.Name)
        ):
            return False
        target = loop.target.elements[1].value
        self.bindings.add(id(target))
        for r in self._name_refs(target, found):
            self._value(r, target.value, found, depth)
        return True

    def _returned_list(
        self, ret: cst.Return, ref: cst.CSTNode, label: str, found: Found, depth: int
    ) -> None:
        """``return pipes`` in a factory of a list of pipelines: each ``name = make_all(...)``
        holds such a list."""
        ctx = self.ctx
        fn = enclosing_function(ctx, ret)
        if fn is None:
            found.followups.append(FollowUp(ref, "the list of pipelines is returned here"))
            return
        for call in self._calls_of(fn, found):
            holder = ctx.parents.get(call)
            if (
                isinstance(holder, cst.Assign)
                and holder.value is call
                and len(holder.targets) == 1
                and isinstance(holder.targets[0].target, cst.Name)
            ):
                self.known.add(id(call))
                for r in self._name_refs(holder.targets[0].target, found):
                    if not _is_append(ctx, r):
                        self._element_uses(r, label, found, depth + 1)
            else:
                found.followups.append(
                    FollowUp(call, f"{fn.name.value}(...) returns a list of pipelines here")
                )

    # -- arguments -----------------------------------------------------------------------------------

    def _argument(
        self, arg: cst.Arg, expr: cst.CSTNode, label: str, found: Found, depth: int
    ) -> bool:
        """``helper(pipe)`` where ``helper`` is a function of this module (or of the function
        around the call), or ``Wrapper(pipe)`` where ``Wrapper`` is a class of the module: the
        parameter (of ``__init__``) is followed, when every call passes a pipeline there (of
        this definition, or of another one migrated with it: a peer)."""
        ctx = self.ctx
        call = ctx.parents.get(arg)
        if (
            not (isinstance(call, cst.Call) and isinstance(call.func, cst.Name))
            or depth >= MAX_DEPTH
        ):
            return False
        code = called_code(ctx, call.func)
        owner, fn = code if code is not None else (None, None)
        skip = 1 if owner is not fn else 0
        param = parameter(fn, call, arg, skip) if fn is not None else None
        if owner is None or fn is None or param is None:
            return False
        if owner is not fn and not stored_only(ctx, fn, param):
            return False  # __init__ does more with it (a framework iterator): the caller judges
        self.known.add(id(expr))
        peers = self._pipelines(arguments_for(ctx, owner, fn, param))
        if peers is None:
            return False  # a helper called from several places may get something else there
        found.peers += peers
        for ref in self._name_refs(param, found):
            self._value(ref, param.name.value, found, depth + 1)
        return True

    def _pipelines(self, exprs: list[cst.CSTNode | None]) -> list[cst.CSTNode] | None:
        """Each of ``exprs`` holds a pipeline: of this definition, or of a peer (the peers
        are returned); None when one of them may hold something else."""
        peers: list[cst.CSTNode] = []
        for expr in exprs:
            if expr is not None and id(expr) in self.known:
                continue
            made = made_by(self.ctx, expr) if expr is not None else None
            if made is not None and id(made) in self.known:
                continue
            peer = self.peer_of(made) if self.peer_of is not None and made is not None else None
            if peer is None:
                return None
            peers.append(peer)
        return peers


# -- small helpers -------------------------------------------------------------------------------------


def _is_none(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _attr_name(node: cst.CSTNode) -> str | None:
    return node.attr.value if isinstance(node, cst.Attribute) else None


def in_loop(ctx: FileContext, node: cst.CSTNode) -> bool:
    """``node`` runs in a loop of its function (or comprehension)."""
    cur = ctx.parents.get(node)
    while cur is not None and not isinstance(cur, (cst.FunctionDef, cst.ClassDef, cst.Module)):
        if isinstance(cur, (cst.For, cst.While, cst.CompFor)):
            return True
        cur = ctx.parents.get(cur)
    return False


def _in_import(ctx: FileContext, node: cst.CSTNode) -> bool:
    stmt = ctx.enclosing_statement(node)
    return any(isinstance(s, (cst.Import, cst.ImportFrom)) for s in getattr(stmt, "body", ()))


def _is_append(ctx: FileContext, ref: cst.CSTNode) -> bool:
    """``ref.append(...)``: filling the list, not using it."""
    attr = ctx.parents.get(ref)
    return isinstance(attr, cst.Attribute) and attr.value is ref and attr.attr.value == "append"


def _call_name(ctx: FileContext, arg: cst.Arg) -> str | None:
    call = ctx.parents.get(arg)
    return (
        call.func.value if isinstance(call, cst.Call) and isinstance(call.func, cst.Name) else None
    )
