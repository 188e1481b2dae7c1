"""Code that migrated programs carry: the loader plug-in copies these definitions into the output
with ``inspect.getsource`` (the output never imports dali_migrate), only where the configuration
in use needs them. They are real code so that they are linted and tested as code:
tests/test_iterators_plans.py runs the migrated loaders, helpers included, against DALI's own
iterator.
"""

from __future__ import annotations


def dali_fill_epochs(meta, batch_size):
    """(batches, len()) of each epoch DALIGenericIterator(reader_name=...) gave with the FILL
    policy over a sharded reader without pad_last_batch: it counts every shard at once (as if one
    pipeline read each), an epoch ends when each shard has given its samples, what a shard read
    past them counts into its next epoch, and the shard sizes move one shard on per epoch
    (unless stick_to_shard). ``meta`` is the reader's get_metadata().
    """
    shards, size, stick = meta["number_of_shards"], meta["epoch_size"], meta["stick_to_shard"]
    sizes = [(s + 1) * size // shards - s * size // shards for s in range(shards)]
    ahead = [0] * shards  # per shard: samples of its next epoch read in this one
    start, end = 0, -(-max(sizes) // batch_size) * batch_size
    while True:
        count = -(-(end - start) // batch_size)
        yield count, -(-end // batch_size)
        read = start + count * batch_size - min(ahead)
        ahead = [a + read - n for a, n in zip(ahead, sizes)]
        start = min(ahead)
        if not stick:
            sizes = sizes[-1:] + sizes[:-1]
        end = -(-max(n - a for n, a in zip(sizes, ahead)) // batch_size) * batch_size
        if end == 0:  # every shard read its whole next epoch ahead: the iterator skips it
            ahead, start = [0] * shards, 0
            sizes = sizes[-1:] + sizes[:-1]
            end = -(-max(sizes) // batch_size) * batch_size


class PerDeviceBatches:
    """A list of one batch per GPU, as DALIGenericIterator over one pipeline per GPU gave it:
    the batches of one loader per GPU side by side, one epoch per pass."""

    def __init__(self, loaders):
        self.loaders = loaders

    def __iter__(self):
        epochs = [iter(loader) for loader in self.loaders]
        for batches in zip(*epochs):
            yield list(batches)
        for epoch in epochs[1:]:  # zip stopped at the first: the others end their epoch too
            next(epoch, None)

    def __len__(self):
        return len(self.loaders[0])
