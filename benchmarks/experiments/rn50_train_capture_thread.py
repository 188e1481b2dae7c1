"""Experiment: the migrated RN50 training program with capture=True, its generator stepped in a
thread of its own (one batch per request, nothing runs ahead). DALI 2.4 allows one active
capture-mode loop per thread; this form lets several pipelines of one program keep capture mode.
"""

import queue
import threading

import nvidia.dali.experimental.dynamic as ndd
from nvidia.dali import types


class InThread:
    """Steps a generator in a thread of its own, one item per request."""

    def __init__(self, gen):
        self._requests = queue.SimpleQueue()
        self._results = queue.SimpleQueue()
        threading.Thread(target=self._serve, args=(gen,), daemon=True).start()

    def _serve(self, gen):
        while self._requests.get():
            try:
                self._results.put((next(gen), None))
            except BaseException as error:
                self._results.put((None, error))
                return

    def __iter__(self):
        return self

    def __next__(self):
        self._requests.put(True)
        item, error = self._results.get()
        if error is not None:
            raise error
        return item


def train_pipe(data_dir, *, batch_size=64, seed=12):
    reader = ndd.readers.File(file_root=data_dir, random_shuffle=True, seed=3)
    rng = ndd.random.RNG(seed=seed)
    while True:
        for jpegs, labels in reader.next_epoch(batch_size=batch_size, capture=True):
            images = ndd.decoders.image(jpegs, device="gpu", output_type=types.RGB)
            mirror = ndd.random.coin_flip(batch_size=jpegs.batch_size, probability=0.5, rng=rng)
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
            yield images, labels.gpu()


def run(data_dir, batches, consume):
    ndd.set_num_threads(8)
    pipe = InThread(train_pipe(data_dir))
    for _ in range(batches):
        images, labels = next(pipe)
        consume(ndd.as_tensor(images), ndd.as_tensor(labels))
