"""Data-dependent ``if``/``else`` of ``enable_conditionals`` pipelines, lowered to per-sample
logic (a component of DM200/DM201, called by ``emit_generator_body``; not a rule of its own).

Before (``@pipeline_def(enable_conditionals=True, ...)``)::

    flip = fn.random.coin_flip()
    if flip:
        out = fn.flip(images, horizontal=1)
        out = fn.noise.gaussian(out, stddev=10.0)
    else:
        out = fn.rotate(images, angle=90)

After (in the migrated generator)::

    flip = ndd.random.coin_flip(batch_size=jpegs.batch_size, rng=rng)
    take = [i for i, p in enumerate(flip.tensors) if bool(np.asarray(p))]
    skip = [i for i, p in enumerate(flip.tensors) if not bool(np.asarray(p))]
    out_samples = [None] * flip.batch_size
    if take:
        images_take = ndd.as_batch([images.tensors[i] for i in take])
        out_take = ndd.flip(images_take, horizontal=1)
        out_take = ndd.noise.gaussian(out_take, stddev=10.0, rng=rng)
        for i, sample in zip(take, out_take.tensors):
            out_samples[i] = sample
    else:
        # pipeline mode drew the random states of this branch's operators even with no samples
        rng.advance(7)
    if skip:
        ...
    out = ndd.as_batch(out_samples)

A Batch has no truth value (``if batch:`` is always true; docs/dali-facts.md [truth]), so the predicate is read
sample by sample. Each branch runs once on the sub-batch of its samples (``ndd.as_batch`` of the
picked tensors: ``Batch.select`` with a list gives the whole batch in DALI 2.4, [select]), only when it has
samples (operators fail on empty batches); its random operators get the sub-batch's size.
A branch without samples still advances the RNG by 7 words per random call ([rng]),
and branches run in source order, so the draws keep the order of the pipeline's graph. Names a
branch assigns are merged back in sample order; a name only one branch assigns keeps its old
samples elsewhere.

``elif`` is an ``else`` holding one nested ``if``; an ``if`` on data nested in a branch is
lowered the same way on that branch's sub-batch (its own branches on sub-batches of it).
``and``/``or``/``not`` in a data predicate follow DALI 2.4, checked by running it: ``not`` is
per sample; ``a and b`` / ``a or b`` are lazy, ``b`` runs as a branch of ``a`` (on the
sub-batch of the samples ``a`` leaves open, random operators in it with that batch size and
their states drawn even when it is empty)::

    if labels[0] == 1 and fn.random.coin_flip(dtype=types.BOOL):
        ...

becomes::

    cond = labels.slice[0] == 1
    holds = [bool(np.asarray(p)) for p in cond.tensors]
    # DALI evaluates the right operand of `and` only on the samples its left operand leaves open
    rest = [i for i, h in enumerate(holds) if h]
    if rest:
        cond_rest = ndd.random.coin_flip(batch_size=len(rest), dtype=types.BOOL, rng=rng)
        for i, p in zip(rest, cond_rest.tensors):
            holds[i] = bool(np.asarray(p))
    else:
        rng.advance(7)
    take = [i for i, h in enumerate(holds) if h]
    ...

``and``/``or``/``not`` on data used as a value (``edge = a or b``, ``return images, not
flag``, ``fn.cast(a and b, ...)``, in a branch too) gave one 0-d boolean per sample in pipeline
mode, with the same lazy evaluation: the same code computes the truth of each sample, bound
before the statement (to the name it assigned, or a new one the statement reads instead)::

    edge = labels[0] < 1 or labels[0] > 6
    return images, not edge

becomes::

    cond = labels.slice[0] < 1
    holds = [bool(np.asarray(p)) for p in cond.tensors]
    rest = [i for i, h in enumerate(holds) if not h]
    if rest:
        labels_rest = ndd.as_batch([labels.tensors[i] for i in rest])
        cond_rest = labels_rest.slice[0] > 6
        for i, p in zip(rest, cond_rest.tensors):
            holds[i] = bool(np.asarray(p))
    edge = ndd.as_batch([np.array(h) for h in holds])
    truth = ndd.as_batch([np.array(not bool(np.asarray(p))) for p in edge.tensors])
    yield images, truth

An ``and``/``or``/``not`` inside an operand (``a or fn.cast(b and c, ...) == 1``) is computed
the same way first, on the samples that operand runs on. DALI itself takes only 0-d booleans on
the CPU as operands of ``and``/``or`` (``not``: any 0-d number) and raises a RuntimeError
otherwise; the migrated code takes the truth value of each sample, so it runs where the
pipeline raised, and computes the same where the pipeline ran.

Supported: ``if``/``elif``/``else`` and nested ``if`` on data, the predicate a data node, an
expression that produces one (``x > 5``), or ``and``/``or``/``not`` of those; the branches
plain assignments and expression statements of DALI operators and further ``if``s on data;
``and``/``or``/``not`` values in the statements of the pipeline function and of those branches.
Refused (the pipeline keeps its TODO): ``while`` on data (DALI rejects it too: the loop test
calls ``DataNode.__bool__``, a TypeError), conditional expressions on data (DALI rejects them the
same way), a Python value inside a data ``and``/``or`` (DALI picks the logic by its value while
tracing), data ``if`` and ``and``/``or``/``not`` inside loops, ``with``, Python ``if`` or nested
functions, other compound statements inside a branch, calls of non-DALI functions inside a
branch or a short-circuited operand (their random draws cannot be counted), a branch assigning
something that is not a data node, a name assigned by one branch only that did not exist before
the ``if``, and a function of the file called with data that branches on it (DALI converted it
and ran its ``if``/``and``/``or``/``not`` per sample, where it would now get whole batches). An
``if`` on plain Python values stays a Python ``if``.
"""

from __future__ import annotations

from .cond_logic import lower_logic
from .cond_lower import lower_branches
from .cond_reasons import branch_reasons, has_data_branches

__all__ = ["branch_reasons", "has_data_branches", "lower_branches", "lower_logic"]
