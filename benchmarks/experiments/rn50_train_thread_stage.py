"""Experiment: a background Python thread with its own EvalContext reads and decodes into a
bounded queue; the consumer's thread runs the augmentation (its own default context)."""

import queue
import threading

import nvidia.dali.experimental.dynamic as ndd
from nvidia.dali import types


def train_pipe(data_dir, *, batch_size=64, seed=12, depth=2):
    reader = ndd.readers.File(file_root=data_dir, random_shuffle=True, seed=3)
    rng = ndd.random.RNG(seed=seed)
    ready = queue.Queue(maxsize=depth)

    def decode_stage():
        with ndd.EvalContext(num_threads=6, device_id=0):
            while True:
                for jpegs, labels in reader.next_epoch(batch_size=batch_size):
                    images = ndd.decoders.image(
                        jpegs, device="gpu", output_type=types.RGB
                    ).evaluate()
                    ready.put((images, labels))

    threading.Thread(target=decode_stage, daemon=True).start()
    while True:
        images, labels = ready.get()
        mirror = ndd.random.coin_flip(batch_size=batch_size, probability=0.5, rng=rng)
        images = ndd.random_resized_crop(images, size=(224, 224), random_area=[0.25, 1.0], rng=rng)
        images = ndd.crop_mirror_normalize(
            images,
            dtype=types.FLOAT16,
            output_layout="CHW",
            mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
            std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
            mirror=mirror,
        )
        yield images, labels.gpu()


def run(data_dir, batches, consume):
    ndd.set_num_threads(2)
    pipe = train_pipe(data_dir)
    for _ in range(batches):
        images, labels = next(pipe)
        consume(ndd.as_tensor(images), ndd.as_tensor(labels))
