"""Top-1 accuracy of a model on the validation set."""

import sys

import nvidia.dali as dali
import nvidia.dali.fn as fn

from .augment import decode, normalize


@dali.pipeline_def
def val_pipeline(file_list, size=256, crop=224):
    jpegs, labels = fn.readers.file(file_list=file_list, pad_last_batch=True)
    images = decode(jpegs)
    images = fn.resize(images, resize_shorter=size)
    return normalize(images, crop), labels


def evaluate(model, file_list, samples):
    pipe = val_pipeline(
        file_list, batch_size=50, num_threads=4, device_id=0, prefetch_queue_depth=2
    )
    pipe.build()
    correct = 0
    for _ in range(samples // 50):
        images, labels = pipe.run()
        predictions = model(images.as_tensor())
        correct += int((predictions == labels.as_cpu().as_array()).sum())
    return correct / samples


if __name__ == "__main__":
    print(evaluate(lambda x: 0, sys.argv[1], 1000))
