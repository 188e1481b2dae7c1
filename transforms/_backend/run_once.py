"""Plain Python in a pipeline's body runs once, when the graph is defined; in the generator's
loop it would run for every batch. The statements that do not touch data or DALI are kept out
of the loop (a component of ``emit``).

Before::

    jpegs, labels = fn.readers.file(file_root=root)
    size = size * 2
    images = fn.resize(fn.decoders.image(jpegs), size=size)

After::

    reader = ndd.readers.File(file_root=root)
    size = size * 2
    while True:
        for jpegs, labels in reader.next_epoch(batch_size=batch_size):
            images = ndd.resize(ndd.decoders.image(jpegs), size=size)

In the loop, ``size`` would double with every batch (and ``angle = random.uniform(0, 90)`` would
draw a new angle per batch where the pipeline drew one).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import libcst as cst

from .._cst import assigned_names, free_names, walk
from .model import Refused


def run_once(
    stmts: list[cst.BaseStatement],
    touches_data: Callable[[cst.BaseStatement], bool],
    is_input: Callable[[cst.BaseStatement], bool],
) -> list[cst.BaseStatement]:
    """The statements of the loop's body (in order) that run once, before the readers are
    built: simple statements that do not touch data or DALI (``touches_data``), read no name the
    loop binds before them, bind no name another statement or an earlier reader or source
    (``is_input``) reads, and do not end the body (``return``). (``print("built")`` too: the
    pipeline printed it once.) A statement that must stay in the loop and rebinds a name it
    reads (``size = size * 2`` after the reader that reads ``size``) is refused."""
    counts = Counter(n for s in stmts for n in assigned_names(s))
    once: list[cst.BaseStatement] = []
    per_batch: set[str] = set()  # names bound by the statements that stay in the loop
    read_by_inputs: set[str] = set()
    for s in stmts:
        if is_input(s):
            read_by_inputs |= free_names(s)
            per_batch |= assigned_names(s)
            continue
        bound = assigned_names(s)
        if (
            isinstance(s, cst.SimpleStatementLine)
            and not all(isinstance(small, cst.Pass) for small in s.body)
            and not any(isinstance(n, (cst.Return, cst.Yield, cst.Global)) for n in walk(s))
            and all(counts[n] == 1 for n in bound)
            and not (free_names(s) & per_batch)
            and not touches_data(s)
        ):
            if bound & read_by_inputs:
                raise Refused(
                    f"`{sorted(bound & read_by_inputs)[0]}` is set after a reader or source "
                    "that reads it: set it before"
                )
            once.append(s)
        else:
            per_batch |= bound
    return once
