"""``self`` in the code of a ``with pipe:`` block made in a method, when that code moves into the
loader class of a framework iterator (a component of DM201).

The loader class is defined where the block was, and its code runs in the class's methods,
where ``self`` is the loader: ``file_root=self.root`` would read the loader's attribute (an
AttributeError, or a wrong value where the loader has one of that name: ``batch_size``,
``reader``, ``rng``, ``ctx``). What the block read from the method's object is read where the
block stood, as the pipeline read it when its graph was defined, into names the class reads.

Before::

    class Data:
        def loader(self):
            pipe = Pipeline(batch_size=self.batch_size, num_threads=2, device_id=None)
            with pipe:
                jpegs, labels = fn.readers.file(file_root=self.root, name="Reader")
                images = fn.resize(fn.decoders.image(jpegs), size=self.size)
                pipe.set_outputs(images, labels)
            pipe.build()
            return DALIGenericIterator([pipe], ["data", "label"], reader_name="Reader")

After::

    class Data:
        def loader(self):
            ndd.set_num_threads(2)
            # what the pipeline read from `self`, read here as it was (in Loader, self is the loader)
            root = self.root
            size = self.size

            class Loader:
                def __init__(self, batch_size=self.batch_size):
                    self.reader = ndd.readers.File(file_root=root, max_batch_size=batch_size)
                ...
                def _epoch_batches(self):
                    for jpegs, labels in self.reader.next_epoch(batch_size=self.batch_size):
                        images = ndd.resize(ndd.decoders.image(jpegs), size=size)
                        ...

``self`` itself (passed to a function) is read into ``owner``. The loader is not made (its
iterator keeps a TODO) where the block's code sets an attribute of ``self`` or binds ``self``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeGuard, TypeVar

import libcst as cst

from .._cst import comment_line, fresh_name, statement, walk

_Node = TypeVar("_Node", bound=cst.CSTNode)

#: the comment above the names read from ``self`` where the block stood
COMMENT = "# read from `self` here, as the pipeline did: in {cls}, `self` is the loader"


@dataclass
class OuterReads:
    """What the block's code reads from ``self``: attribute -> the name it is read into (``""``
    for ``self`` itself), in the order the code first reads them; named by :meth:`bind`, once
    the code the class is made of is written."""

    names: dict[str, str] = field(default_factory=dict)

    def bind(self, taken: set[str]) -> None:
        """Names for what is read, fresh in ``taken`` (which gets them)."""
        for attr in self.names:
            self.names[attr] = fresh_name(attr or "owner", taken)

    def statements(self, cls: str, read: set[str]) -> list[cst.SimpleStatementLine]:
        """``root = self.root`` for each that the class ``cls`` reads (``read``: its names;
        ``owner = self``), under the comment that says why."""
        out: list[cst.SimpleStatementLine] = []
        for attr, name in self.names.items():
            if name not in read:
                continue
            value: cst.BaseExpression = cst.Name("self")
            if attr:
                value = cst.Attribute(value, cst.Name(attr))
            out.append(statement(cst.Assign([cst.AssignTarget(cst.Name(name))], value)))
        if out:
            out[0] = out[0].with_changes(leading_lines=[comment_line(COMMENT.format(cls=cls))])
        return out

    def rebound(self, node: _Node) -> _Node:
        """``node`` (generated from the block's code) with ``self.x`` and ``self`` read through
        the names ``statements`` binds."""
        if not self.names:
            return node
        new = node.visit(_Rebind(self.names))
        assert isinstance(new, type(node))
        return new


def self_reads(roots: Sequence[cst.CSTNode]) -> tuple[list[str], OuterReads]:
    """Why the loader class cannot take the code of ``roots`` (the block, the statements before
    it that move with it) over ``self``, and what it reads from ``self``."""
    reads = OuterReads()
    stores = _stored_attributes(roots)
    if _binds_self(roots):
        return [
            "the pipeline's code binds `self` itself (rename it): in the loader class, `self` is "
            "the loader"
        ], reads
    if stores:
        return [
            f"the pipeline's code sets `self.{stores[0]}` (bind a plain name there instead): in "
            "the loader class, `self` is the loader, and the attribute would be set on each batch"
        ], reads
    skip = {id(n.value) for r in roots for n in walk(r) if _is_self_attr(n)} | _not_reads(roots)
    for root in roots:
        for n in walk(root):
            if _is_self_attr(n):
                key = n.attr.value
            elif isinstance(n, cst.Name) and n.value == "self" and id(n) not in skip:
                key = ""
            else:
                continue
            reads.names.setdefault(key, "")
    return [], reads


def _is_self_attr(node: cst.CSTNode) -> TypeGuard[cst.Attribute]:
    return (
        isinstance(node, cst.Attribute)
        and isinstance(node.value, cst.Name)
        and node.value.value == "self"
    )


def _binds_self(roots: Sequence[cst.CSTNode]) -> bool:
    """The code binds the name ``self`` (a parameter, a definition, an assignment to it)."""
    for n in (n for r in roots for n in walk(r)):
        if isinstance(n, (cst.Param, cst.FunctionDef, cst.ClassDef)) and n.name.value == "self":
            return True
        if any(_names_bound(t) for t in _targets(n)):
            return True
    return False


def _names_bound(target: cst.CSTNode) -> bool:
    """``self`` is bound by the target (itself, or an element of an unpacking)."""
    if isinstance(target, cst.Name):
        return target.value == "self"
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_names_bound(e.value) for e in target.elements)
    if isinstance(target, cst.StarredElement):
        return _names_bound(target.value)
    return False


def _targets(n: cst.CSTNode) -> list[cst.CSTNode]:
    """What ``n`` assigns to, if it assigns."""
    if isinstance(n, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor)):
        return [n.target]
    if isinstance(n, (cst.NamedExpr, cst.Del)):
        return [n.target]
    if isinstance(n, cst.AsName):
        return [n.name]
    return []


def _not_reads(roots: Sequence[cst.CSTNode]) -> set[int]:
    """The ids of names that are not reads: attribute names and keywords."""
    out: set[int] = set()
    for n in (n for r in roots for n in walk(r)):
        if isinstance(n, cst.Attribute):
            out.add(id(n.attr))
        elif isinstance(n, cst.Arg) and n.keyword is not None:
            out.add(id(n.keyword))
    return out


def _stored_attributes(roots: Sequence[cst.CSTNode]) -> list[str]:
    """Attributes of ``self`` the code assigns, augments, deletes or loops into (``self.x[i] = v``
    included: the block ran once, the loader's code runs per batch)."""
    targets = [t for r in roots for n in walk(r) for t in _targets(n)]
    return [n.attr.value for t in targets for n in walk(t) if _is_self_attr(n)]


class _Rebind(cst.CSTTransformer):
    def __init__(self, names: dict[str, str]) -> None:
        self.names = names
        self.skip: set[int] = set()  # attribute names and keywords: not reads

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.skip.add(id(node.attr))
        if _is_self_attr(node) and node.attr.value in self.names:  # read as a whole
            self.skip.add(id(node.value))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.skip.add(id(node.keyword))

    def leave_Attribute(
        self, original: cst.Attribute, updated: cst.Attribute
    ) -> cst.BaseExpression:
        if _is_self_attr(original) and original.attr.value in self.names:
            return cst.Name(self.names[original.attr.value], lpar=updated.lpar, rpar=updated.rpar)
        return updated

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        if original.value == "self" and "" in self.names and id(original) not in self.skip:
            return updated.with_changes(value=self.names[""])
        return updated
