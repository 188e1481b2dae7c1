"""The helpers the iterator migration emits (``DaliIteratorEpochs`` with the plans
``dali_reader_epochs`` / ``dali_size_epochs``) against DALI's own DALIGenericIterator, on the
same reader: every batch of every epoch, ``len()`` before and during each epoch, and a loop that
leaves an epoch early (``break``), which DALI's iterator resumes.

The program fixtures (fixtures/programs/o_iter_*) check whole migrated programs; these cover the
policy arithmetic over more shapes (uneven shards, ``stick_to_shard``, padding, ``size=``) than a
fixture per shape would.
"""

from __future__ import annotations

import logging
import warnings

import pytest

from dali_migrate.transforms._backend.iterators import EPOCHS_CLASS, READER_PLAN, SIZE_PLAN, helper_source

EPOCHS = 4

#: (samples, batch size, shards, shard id, pad_last_batch, stick_to_shard, policy, size, last_batch_padded, break at)
CASES = [
    (7, 3, 2, 0, False, False, "FILL", None, False, None),  # uneven shards: every shard counted at once
    (7, 3, 2, 0, False, False, "FILL", None, False, 0),
    (10, 4, 1, 0, False, False, "FILL", None, False, 1),
    (10, 3, 3, 1, False, True, "FILL", None, False, None),
    (10, 3, 3, 2, True, False, "FILL", None, False, 0),
    (10, 4, 3, 1, False, False, "PARTIAL", None, False, 0),
    (10, 4, 1, 0, True, False, "PARTIAL", None, False, None),
    (10, 3, 2, 1, False, False, "DROP", None, False, 0),
    (7, 3, 1, 0, True, True, "DROP", None, False, None),
    (10, 4, 1, 0, False, False, "FILL", 10, False, 1),  # size=: samples read past size count into the next epoch
    (10, 4, 1, 0, False, False, "FILL", 9, True, None),
    (10, 4, 2, 1, True, False, "PARTIAL", 7, False, 0),
    (7, 3, 1, 0, False, False, "DROP", 5, True, 0),
    (7, 3, 1, 0, False, False, "DROP", 6, False, None),
]


@pytest.fixture(scope="module")
def numbers(tmp_path_factory):
    """``numbers(n)``: a folder of n .npy files whose value is their index."""
    import numpy as np

    made = {}

    def get(n: int):
        if n not in made:
            root = tmp_path_factory.mktemp(f"numbers{n}")
            for i in range(n):
                np.save(root / f"n_{i:03d}.npy", np.array([i], dtype=np.int32))
            made[n] = root
        return str(made[n])

    return get


def _old(root, bs, shards, shard, pad, stick, policy, size, padded, brk):
    from nvidia.dali import fn, pipeline_def
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

    @pipeline_def(batch_size=bs, num_threads=1, device_id=None)
    def pipe_fn():
        return fn.readers.numpy(
            file_root=root, name="R", num_shards=shards, shard_id=shard, pad_last_batch=pad, stick_to_shard=stick
        )

    kw = {"reader_name": "R"} if size is None else {"size": size, "last_batch_padded": padded}
    loader = DALIGenericIterator([pipe_fn()], ["x"], last_batch_policy=getattr(LastBatchPolicy, policy), **kw)
    out = [("len", len(loader))]
    for epoch in range(EPOCHS):
        for i, data in enumerate(loader):
            out.append((epoch, len(loader), data[0]["x"].numpy().ravel().tolist()))
            if epoch == 1 and i == brk:
                break
        loader.reset()  # ignored by DALI after a break: the next loop resumes the epoch
    return out


def _new(root, bs, shards, shard, pad, stick, policy, size, padded, brk):
    import numpy as np
    import nvidia.dali.experimental.dynamic as ndd

    helpers = {"ndd": ndd}
    for source in map(helper_source, (EPOCHS_CLASS, READER_PLAN, SIZE_PLAN)):
        exec(source, helpers)
    reader = ndd.readers.Numpy(
        file_root=root, num_shards=shards, shard_id=shard, pad_last_batch=pad, stick_to_shard=stick, max_batch_size=bs
    )

    def batches():
        while True:
            for (x,) in reader.next_epoch(batch_size=bs):
                yield (x,)

    if size is None:
        plan = helpers["dali_reader_epochs"](reader.get_metadata(), bs, policy)
    else:
        plan = helpers["dali_size_epochs"](size, bs, policy, padded)
    epochs = helpers["DaliIteratorEpochs"](batches(), plan)
    out = [("len", len(epochs))]
    for epoch in range(EPOCHS):
        for i, (x,) in enumerate(next(epochs)):
            out.append((epoch, len(epochs), np.asarray(ndd.as_tensor(x)).ravel().tolist()))
            if epoch == 1 and i == brk:
                break
    return out


@pytest.mark.dali
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(v) for v in c))
def test_helpers_give_what_dali_iterator_gave(case, numbers) -> None:
    pytest.importorskip("nvidia.dali")
    n, *rest = case
    root = numbers(n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            old = _old(root, *rest)
        finally:
            logging.disable(logging.NOTSET)
    assert _new(root, *rest) == old
