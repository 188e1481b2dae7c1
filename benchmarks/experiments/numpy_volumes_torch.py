"""Numpy reader: arrays moved to the GPU, cast, normalized and flipped at random."""

import nvidia.dali.experimental.dynamic as ndd
from nvidia.dali import types


def volume_pipe(data_dir, *, batch_size=32, seed=5):
    """Yields (volumes) batches epoch after epoch, without end, as Pipeline.run() did."""
    reader = ndd.readers.Numpy(file_root=data_dir, random_shuffle=True, seed=9)
    rng = ndd.random.RNG(seed=seed)
    # capture=True: runs the loop as one prebuilt graph; one such loop can be active at a time
    while True:
        for (volumes,) in reader.next_epoch(batch_size=batch_size, capture=True):
            volumes = ndd.cast(volumes.gpu(), dtype=types.FLOAT)
            flip = ndd.random.coin_flip(batch_size=volumes.batch_size, probability=0.5, rng=rng)
            volumes = ndd.flip(volumes, horizontal=flip)
            volumes = ndd.normalize(volumes, mean=100.0, stddev=30.0)
            yield (volumes,)


def run(data_dir, batches, consume):
    ndd.set_num_threads(4)
    pipe = volume_pipe(data_dir)
    for _ in range(batches):
        (volumes,) = next(pipe)
        consume(volumes.torch())
