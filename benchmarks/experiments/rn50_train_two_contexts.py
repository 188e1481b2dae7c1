"""Experiment: decoding runs in its own EvalContext (own worker thread, thread pool and CUDA
stream), one batch ahead of the augmentation, which runs in a second context: the two stages
overlap as the pipeline executor overlaps its stages."""

import nvidia.dali.experimental.dynamic as ndd
import torch
from nvidia.dali import types


def train_pipe(data_dir, *, batch_size=64, seed=12):
    decode_ctx = ndd.EvalContext(num_threads=6, device_id=0, cuda_stream=torch.cuda.Stream())
    augment_ctx = ndd.EvalContext(num_threads=2, device_id=0, cuda_stream=torch.cuda.Stream())
    reader = ndd.readers.File(file_root=data_dir, random_shuffle=True, seed=3)
    rng = ndd.random.RNG(seed=seed)

    def decoded():
        while True:
            for jpegs, labels in reader.next_epoch(batch_size=batch_size, ctx=decode_ctx):
                with decode_ctx:
                    yield ndd.decoders.image(jpegs, device="gpu", output_type=types.RGB), labels

    source = decoded()
    ahead = next(source)
    while True:
        images, labels = ahead
        ahead = next(source)
        with augment_ctx:
            mirror = ndd.random.coin_flip(batch_size=batch_size, probability=0.5, rng=rng)
            images = ndd.random_resized_crop(
                images, size=(224, 224), random_area=[0.25, 1.0], rng=rng
            )
            images = ndd.crop_mirror_normalize(
                images,
                dtype=types.FLOAT16,
                output_layout="CHW",
                mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
                mirror=mirror,
            )
            labels = labels.gpu()
        yield images, labels


def run(data_dir, batches, consume):
    pipe = train_pipe(data_dir)
    for _ in range(batches):
        images, labels = next(pipe)
        consume(ndd.as_tensor(images), ndd.as_tensor(labels))
