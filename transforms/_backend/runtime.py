"""Code that migrated programs carry: the iterator plug-in copies these definitions into the
output with ``inspect.getsource`` (the output never imports dali_migrate). They are real code so
that they are linted, type-checked and tested as code: tests/test_iterators_plans.py runs the
copies against DALI's own iterator.
"""
# ruff: noqa: ANN001, ANN201, ANN202, ANN204

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the copies run next to the migrated program's own `ndd` import
    import nvidia.dali.experimental.dynamic as ndd


class DaliIteratorEpochs:
    """The epochs a DALI framework iterator (DALIGenericIterator) gave, cut from ``batches``,
    the endless stream of (ndd.Batch, ...) tuples Pipeline.run() returned, as ``plan`` says:
    for each epoch it yields (batches in the epoch, samples the last batch keeps or None for
    all, whether one more batch is read and dropped after it, what len(iterator) gave).

    ``next(epochs)`` gives the next epoch, a generator of batches. An epoch left before its last
    batch (``break``) is resumed by the next ``next(epochs)``, as the old iterator resumed it
    (it ignored reset() until the epoch was over). ``len(epochs)`` is ``len(iterator)`` during
    the current epoch (the first one before any ``next``).
    """

    def __init__(self, batches, plan):
        self.batches, self.plan = batches, plan
        self.count, self.keep, self.drop_extra, self.length = next(plan)
        self.left = self.count  # batches the current epoch has still to give
        self.epoch = None

    def __iter__(self):
        return self

    def __next__(self):
        if self.epoch is not None and self.left == 0:
            next(self.epoch, None)  # runs the finished epoch to its end (DROP: the dropped batch)
            self.count, self.keep, self.drop_extra, self.length = next(self.plan)
            self.left, self.epoch = self.count, None
        if self.epoch is None:
            self.epoch = self._epoch()
        return self.epoch

    def __len__(self):
        return self.length

    def _epoch(self):
        for i in range(self.count):
            outputs = next(self.batches)
            self.left -= 1
            if i == self.count - 1 and self.keep is not None:
                if self.keep <= 0:
                    # uneven shards: the old iterator returned tensors with 0 samples here
                    raise RuntimeError("PARTIAL leaves no sample for the last batch of this shard's epoch")
                outputs = tuple(ndd.as_batch([o.tensors[j] for j in range(self.keep)]) for o in outputs)
            yield outputs
        if self.drop_extra:
            next(self.batches)


def dali_reader_epochs(meta, batch_size, policy):
    """The epochs DALIGenericIterator(reader_name=...) gave with ``last_batch_policy`` ``policy``
    ("FILL", "PARTIAL" or "DROP") over the reader whose get_metadata() is ``meta``, as
    DaliIteratorEpochs takes them. As nvidia.dali.plugin.base_iterator does: FILL without padding
    credits the samples read ahead into the next epoch, PARTIAL trims the last batch to the
    samples left in the shard, DROP reads the incomplete last batch and drops it; with padding
    every epoch has the same length.
    """
    shards, shard, size = meta["number_of_shards"], meta["shard_id"], meta["epoch_size"]
    padded, stick = meta["pad_last_batch"], meta["stick_to_shard"]

    def shard_size(s):
        return (s + 1) * size // shards - s * size // shards

    def ceil_div(a, b):
        return -(-a // b)

    if policy == "FILL" and not padded:
        # base_iterator counts every shard at once (as if one pipeline read each): an epoch ends
        # when each shard has given its samples; what a shard read past them counts into its next
        # epoch, and the shard sizes move one shard on per epoch (unless stick_to_shard)
        sizes = [shard_size(s) for s in range(shards)]
        ahead = [0] * shards  # per shard: samples of its next epoch read in this one
        start, end = 0, ceil_div(ceil_div(size, shards), batch_size) * batch_size
        while True:
            count = ceil_div(end - start, batch_size)
            yield count, None, False, ceil_div(end, batch_size)
            read = start + count * batch_size - min(ahead)
            ahead = [a + read - n for a, n in zip(ahead, sizes)]
            start = min(ahead)
            if not stick:
                sizes = sizes[-1:] + sizes[:-1]
            end = ceil_div(max(n - a for n, a in zip(sizes, ahead)), batch_size) * batch_size
            if end == 0:  # every shard read its whole next epoch ahead: the iterator skips it
                ahead, start = [0] * shards, 0
                sizes = sizes[-1:] + sizes[:-1]
                end = ceil_div(max(sizes), batch_size) * batch_size
    while True:
        keep, drop_extra = None, False
        if policy == "DROP":
            count = size // shards // batch_size
            drop_extra = size // shards % batch_size != 0
        else:
            if padded:
                total = meta["epoch_size_padded"] // shards
            else:
                total = ceil_div(ceil_div(size, shards), batch_size) * batch_size
            count = ceil_div(total, batch_size)
            current = shard_size(shard)
            if policy == "PARTIAL" and current < count * batch_size:
                keep = current - (count - 1) * batch_size
        yield count, keep, drop_extra, count
        if not stick:
            shard = (shard + 1) % shards


def dali_size_epochs(size, batch_size, policy, last_batch_padded):
    """The epochs DALIGenericIterator(size=size) without reader_name gave with
    ``last_batch_policy`` ``policy`` ("FILL", "PARTIAL" or "DROP") and ``last_batch_padded``, as
    DaliIteratorEpochs takes them. As nvidia.dali.plugin.base_iterator does: an epoch gives
    batches until it has counted ``size`` samples; PARTIAL trims the last batch to ``size``, DROP
    reads the incomplete last batch and drops it, FILL without last_batch_padded counts the
    samples its last batch read past ``size`` into the next epoch. len(iterator) is
    ceil(size / batch_size) in every epoch (size // batch_size for DROP).
    """
    full, rest = divmod(size, batch_size)
    length = full if policy == "DROP" else full + (rest > 0)
    ahead = 0  # FILL without last_batch_padded: samples the previous epoch counted into this one
    while True:
        if policy == "DROP":
            yield full, None, rest > 0, length
            continue
        count = -(-(size - ahead) // batch_size)
        if policy == "FILL" and not last_batch_padded:
            ahead = (ahead + count * batch_size) % size
        yield count, rest if policy == "PARTIAL" and rest else None, False, length
