"""Readers made on the branches of one ``if`` on configuration, one per branch
(``if train: r = fn.readers.file(..., random_shuffle=True) else: r = fn.readers.file(...)``):
pipeline mode built exactly one of them, and the generator builds that one into one variable
(:func:`reader_var`), so the uses that read the pipeline's reader (``pipe.epoch_size("Reader")``,
``pipe.reader_meta()``) read that variable, as they read the one reader of a pipeline."""

from __future__ import annotations

import libcst as cst

from .model import ReaderUse


def reader_var(use: ReaderUse) -> str:
    """``images_reader`` for ``images, labels = fn.readers.file(...)`` (or ``images =
    fn.readers.file(...)[0]``); ``numpy_reader`` when the outputs have no plain name."""
    target: cst.BaseExpression = use.target
    small = use.stmt.body[0] if use.inline and len(use.stmt.body) == 1 else None
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
    if isinstance(target, (cst.Tuple, cst.List)) and target.elements:
        target = target.elements[0].value
    if isinstance(target, cst.Name):
        return f"{target.value}_reader"
    return (use.op.target.ndd_path or "reader").split(".")[-1].lower() + "_reader"


def chosen_one(readers: list[ReaderUse]) -> bool:
    """``readers`` (two or more) are made one per branch of one ``if``/``elif``/``else`` chain
    that ends with ``else``, directly in each branch, for the same variable: exactly one of
    them exists, in :func:`reader_var` of the first."""
    if len(readers) < 2 or not all(u.guards and u.top is readers[0].top for u in readers):
        return False
    if len({reader_var(u) for u in readers}) != 1:
        return False
    branches: list[cst.CSTNode] = []
    chain: cst.CSTNode | None = readers[0].top
    while isinstance(chain, cst.If):
        branches.append(chain.body)
        chain = chain.orelse.body if isinstance(chain.orelse, cst.Else) else chain.orelse
    if chain is None:
        return False  # no `else`: none may be made
    branches.append(chain)
    held = [[u for u in readers if any(u.stmt is s for s in _statements(b))] for b in branches]
    return all(len(h) == 1 for h in held) and sum(map(len, held)) == len(readers)


def _statements(block: cst.CSTNode) -> list[cst.CSTNode]:
    return list(getattr(block, "body", ()))
