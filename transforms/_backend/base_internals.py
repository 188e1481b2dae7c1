"""What a subclass of a DALI framework iterator reads of its base (``plugin/base_iterator.py`` and
the framework plugins of the installed DALI): the TODO that keeps such a subclass names each
attribute, method and override it uses and what it becomes in a loader written without the base,
instead of a blanket "count the samples".

Before (the TODO at ``super().__init__``)::

    ...; self._counter, self._size and reset() are the DALI iterator's: count the samples instead

After::

    ...; of the DALI base it uses: __iter__ resets only an epoch that ended (`self._counter >=
    self._size`): each pass over the new loader is one epoch, so __iter__ starts one and returns
    self; ...

The model (DALI's ``_DaliBaseIterator``): ``_counter`` counts the samples handed out in this epoch
across the shard, in steps of ``batch_size`` (the padded last batch counts whole); ``_size`` is
``size=`` or, with ``reader_name``, the shard's epoch size as the policy rounds it; ``reset()``
rewinds only an epoch that ended (it warns and does nothing mid-epoch).
"""

from __future__ import annotations

import libcst as cst

from .._cst import block_statements, is_docstring, source_of, walk

#: attributes and methods of DALI's base iterator: what each holds, to say in the TODO
_MEANING = {
    "_counter": (
        "self._counter (the samples handed out in this epoch, in steps of batch_size, the last "
        "padded batch counted whole: add batch_size in __next__, set 0 where the epoch starts, "
        "for FILL to the samples the last epoch read ahead)"
    ),
    "_size": (
        "self._size (size=, or with reader_name the shard's epoch size as the policy rounds it: "
        "epoch_size // num_shards for DROP, ceil(ceil(epoch_size / num_shards) / batch_size) * "
        "batch_size for PARTIAL and FILL (FILL after the first epoch: what the shard has left, "
        "so rounded), epoch_size from reader.get_metadata())"
    ),
    "size": "self.size (the same as self._size)",
    "batch_size": "self.batch_size (the pipeline's batch_size)",
    "output_map": "self.output_map (the output_map= names, in order)",
    "_first_batch": (
        "self._first_batch (the batch the base read ahead in its __init__ and handed out, as it "
        "gave every batch, at the first __next__, while the new loader reads none ahead: its first "
        "batch is the epoch's first, built as the others are)"
    ),
    "reset": (
        "self.reset() (rewinds only an epoch that ended, mid-epoch it warns and does nothing: "
        "each pass over the new loader starts an epoch, delete it)"
    ),
}
#: said of a base attribute the subclass sets: the base goes on reading it
_SET = (
    ", which the class sets too (so does DALI's __init__: DALI's own code reads whichever was set "
    "last)"
)
#: the tests of the ``__iter__`` idiom: an ended epoch (the first), or no size known (``or``)
_ENDED = "self._counter >= self._size"
_NO_SIZE = ("self._size < 0", "self._size <= 0")


def base_uses(cls: cst.ClassDef) -> list[str]:
    """What the methods of ``cls`` read of DALI's base iterator, each said as what it holds
    and what to write instead, in the order of the table; ``[]`` where it reads none of it."""
    said: list[str] = []
    idiom = rewinding_iter(cls)
    rest = [s for s in cls.body.body if s is not idiom]
    if len(rest) != len(cls.body.body):
        said.append(
            "__iter__ resets only an epoch that ended (self._counter >= self._size): each pass "
            "over the new loader is one epoch, so __iter__ starts one and returns self"
        )
    read = {a for s in rest for a in _self_attributes(s)} - _methods(cls)
    written = _written(cls)
    for name, text in _MEANING.items():
        if name in read:
            said.append(text + (_SET if name in written else ""))
    return said


def _methods(cls: cst.ClassDef) -> set[str]:
    """The methods ``cls`` defines (its own ``reset`` is not the base's)."""
    return {s.name.value for s in cls.body.body if isinstance(s, cst.FunctionDef)}


def _written(cls: cst.ClassDef) -> set[str]:
    """The ``self.<name>`` that ``cls`` assigns or changes anywhere."""
    out: set[str] = set()
    for n in walk(cls):
        if isinstance(n, cst.Assign):
            out |= {a for t in n.targets for a in _set_attributes(t.target)}
        elif isinstance(n, (cst.AnnAssign, cst.AugAssign)):
            out |= _set_attributes(n.target)
    return out


def _set_attributes(target: cst.BaseExpression) -> set[str]:
    """The ``self.<name>`` an assignment target binds (alone or in a tuple / list)."""
    if isinstance(target, (cst.Tuple, cst.List)):
        return {a for e in target.elements for a in _set_attributes(e.value)}
    if isinstance(target, cst.StarredElement):
        return _set_attributes(target.value)
    if (
        isinstance(target, cst.Attribute)
        and isinstance(target.value, cst.Name)
        and target.value.value == "self"
    ):
        return {target.attr.value}
    return set()


def _self_attributes(node: cst.CSTNode) -> set[str]:
    """The names ``self.<name>`` read or called in ``node``."""
    return {
        n.attr.value
        for n in walk(node)
        if isinstance(n, cst.Attribute)
        and isinstance(n.value, cst.Name)
        and n.value.value == "self"
    }


def rewinding_iter(cls: cst.ClassDef) -> cst.FunctionDef | None:
    """``def __iter__(self): if <self._counter / self._size compared>: self.reset(); return
    self`` in ``cls``: the override that rewinds an ended epoch where a pass starts."""
    for s in cls.body.body:
        if not (isinstance(s, cst.FunctionDef) and s.name.value == "__iter__"):
            continue
        body = [b for b in block_statements(s.body) if not is_docstring(b)]
        if len(body) != 2 or not isinstance(body[0], cst.If) or body[0].orelse is not None:
            return None
        if not _ended_test(body[0].test):
            return None
        if _stmt_source(body[0].body) != "self.reset()" or _stmt_source(body[1]) != "return self":
            return None
        return s
    return None


def _ended_test(test: cst.BaseExpression) -> bool:
    """``self._counter >= self._size``, alone or ``or``-ed with ``self._size < 0``."""
    parts: list[cst.BaseExpression] = []
    while isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        parts.append(test.right)
        test = test.left
    texts = [" ".join(source_of(p).split()) for p in [test, *parts]]
    return texts.count(_ENDED) == 1 and all(t == _ENDED or t in _NO_SIZE for t in texts)


def _stmt_source(node: cst.CSTNode) -> str:
    """The code of ``node`` (a block of one statement, or a statement) on one line."""
    if isinstance(node, cst.IndentedBlock) and len(node.body) == 1:
        node = node.body[0]
    if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1:
        return source_of(node.body[0]).strip()
    return ""
