"""The drop-in loader class that replaces a wrapped PyTorch framework iterator with ``size=``
(``wrapped_iterators`` says where), and the fix that writes it: the class once per kind of
iterator, above the first class that uses it, and each wrapped call made a call of it with the
same arguments. The loader reads nothing of the pipeline but its batches, so one class serves
every migrated definition of the module.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import libcst as cst

from dali_migrate.context import FileContext
from dali_migrate.fixes import Edit, Fix

from .._cst import fresh_name, names_in
from .wrapped_iterators import WrapSite

_TEMPLATE = '''\
class {name}:
    """DALI's {iterator} with size=, over what the migrated definitions return
    (a generator of batches, or a list of them, one per GPU): the first batch is taken here,
    as DALI's iterator took it; each epoch is `size` samples, the batch that reaches them
    handed out whole and what it read past them counted in the next epoch (FILL); reset()
    after the end of an epoch starts the next one."""

    def __init__(self, pipelines, {params}size):
        self._pipes = list(pipelines) if isinstance(pipelines, (list, tuple)) else [pipelines]
        if size <= 0:
            raise ValueError("size must be positive: the migrated pipelines never end an epoch")
        self._size = int(size)
        self.output_map = {output_map}
        self._counter = 0
        self._consumed = False
        outputs = [self._outputs(pipe) for pipe in self._pipes]
        self.batch_size = outputs[0][0].batch_size
        self._first = self._take(outputs)

    @staticmethod
    def _outputs(pipe):
        batch = next(pipe)
        return tuple(batch) if isinstance(batch, (tuple, list)) else (batch,)

    def _take(self, outputs):
        data = []
        for outs in outputs:
            if len(outs) != len(self.output_map):
                raise ValueError("output_map names one output of the pipeline each")
            if any(out.batch_size != self.batch_size for out in outs):
                raise AssertionError("Variable batch size is not supported with size=")
            data.append({{key: out.torch() for key, out in zip(self.output_map, outs)}})
        self._counter += len(self._pipes) * self.batch_size
        return data

    def __next__(self):
        self._consumed = True
        if self._first is not None:
            data, self._first = self._first, None
            return data
        if self._counter >= self._size:
            raise StopIteration
        return self._take([self._outputs(pipe) for pipe in self._pipes])

    def next(self):
        return self.__next__()

    def __iter__(self):
        if self._counter != 0 and self._consumed:
            self.reset()
        return self

    def reset(self):
        if self._counter >= self._size:  # mid-epoch, DALI's reset() did nothing either
            self._counter %= self._size

    @property
    def size(self):
        return self._size

    def __len__(self):
        return -(-self._size // (len(self._pipes) * self.batch_size))
'''


def loader_fix(
    ctx: FileContext, rule: str, sites: Sequence[WrapSite], depends_on: Sequence[str]
) -> Fix:
    """The fix that writes the loader classes and makes each wrapped call one of them."""
    taken = names_in(ctx.module)
    names: dict[tuple[str, ...] | None, str] = {}
    edits: list[Edit] = []
    for site in sites:
        if site.fixed not in names:
            base = "ClassificationLoader" if site.fixed is not None else "GenericLoader"
            names[site.fixed] = fresh_name(base, taken, "Dali" + base)
        new = site.call.with_changes(func=cst.Name(names[site.fixed]))
        edits.append(ctx.expr_edit(site.call, new))
    first = min(
        (_top_statement(ctx, s.call) for s in sites), key=lambda n: ctx.positions[n].start.line
    )
    start = ctx.stmt_span(first)[0]
    text = "".join("\n\n" + _class_text(name, fixed) for fixed, name in names.items())
    edits.append(Edit(start, start, text))
    message = (
        "the framework iterators this module's classes wrap over the pipelines their callers "
        "hand them become drop-in loaders over the migrated definitions' generators"
    )
    return ctx.make_fix(rule, first, edits, message, depends_on=depends_on, key="wrapped-loader")


def _class_text(name: str, fixed: tuple[str, ...] | None) -> str:
    iterator = "DALIClassificationIterator" if fixed is not None else "DALIGenericIterator"
    return _TEMPLATE.format(
        name=name,
        iterator=iterator,
        params="" if fixed is not None else "output_map, ",
        output_map=json.dumps(list(fixed)) if fixed is not None else "list(output_map)",
    )


def _top_statement(ctx: FileContext, node: cst.CSTNode) -> cst.CSTNode:
    """The statement of the module's body ``node`` is in."""
    cur: cst.CSTNode = node
    while ctx.parents.get(cur) is not ctx.module:
        cur = ctx.parents[cur]
    return cur
