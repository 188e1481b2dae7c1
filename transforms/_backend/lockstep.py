"""Several readers under one framework iterator (an image reader and a label reader, as in
segmentation pipelines): DALI's iterator sized each epoch by the reader that ``reader_name=``
names; every ``pipe.run()`` ran each reader once. The loader does the same: its epoch loop runs
over ``next_epoch()`` of that reader (the *lead*), and calls each other reader once per batch, so
they stay in lockstep whatever their own epoch sizes are.

Before::

    images = fn.readers.numpy(files=images, name="ReaderX")
    labels = fn.readers.numpy(files=labels, name="ReaderY")
    ...
    DALIGenericIterator([pipe], ["image", "label"], reader_name="ReaderX")

After (in the loader's ``__iter__``)::

    for (images,) in self.images_reader.next_epoch(batch_size=self.batch_size):
        labels = self.labels_reader(batch_size=self.batch_size)
"""

from __future__ import annotations

import libcst as cst

from .iterator_use import ANY_READER, IteratorUse
from .model import Graph, PipelinePlan, ReaderUse


def lead_reader(graph: Graph, use: IteratorUse) -> ReaderUse | None:
    """The reader whose epochs the loader runs: the one reader made unconditionally, or, of
    several such readers (and no external source), the one ``reader_name=`` names literally."""
    if graph.sources or any(r.guards for r in graph.readers):
        return None
    if len(graph.readers) == 1:
        return graph.readers[0]
    wanted = use.reader_name
    if wanted is None or wanted is ANY_READER or use.size is not None or use.size_reader:
        return None
    named = [r for r in graph.readers if _name(r) == wanted]
    return named[0] if len(named) == 1 else None


def epoch_reader(graph: Graph, plan: PipelinePlan) -> ReaderUse | None:
    """The reader whose ``next_epoch()`` the emitted loop runs over, or None (the readers are
    called once per batch, without end)."""
    if len(graph.readers) == 1 and not graph.readers[0].guards:
        return graph.readers[0]
    if plan.passes and graph.lead is not None:
        return graph.lead
    return None


def _name(reader: ReaderUse) -> str | None:
    value = next(
        (a.value for a in reader.call.args if a.keyword is not None and a.keyword.value == "name"),
        None,
    )
    text = value.evaluated_value if isinstance(value, cst.SimpleString) else None
    return text if isinstance(text, str) else None
