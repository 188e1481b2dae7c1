"""Numpy reader: arrays moved to the GPU, cast, normalized and flipped at random."""

from nvidia.dali import fn, pipeline_def, types


@pipeline_def(batch_size=32, num_threads=4, device_id=0, seed=5)
def volume_pipe(data_dir):
    volumes = fn.readers.numpy(file_root=data_dir, random_shuffle=True, seed=9, name="Reader")
    volumes = fn.cast(volumes.gpu(), dtype=types.FLOAT)
    flip = fn.random.coin_flip(probability=0.5)
    volumes = fn.flip(volumes, horizontal=flip)
    volumes = fn.normalize(volumes, mean=100.0, stddev=30.0)
    return volumes


def run(data_dir, batches, consume):
    pipe = volume_pipe(data_dir)
    pipe.build()
    for _ in range(batches):
        (volumes,) = pipe.run()
        consume(volumes.as_tensor())
