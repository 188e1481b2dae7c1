"""RN50-style training input: GPU JPEG decoding, random resized crop, flip, normalize to fp16."""

from nvidia.dali import fn, pipeline_def, types


@pipeline_def(batch_size=64, num_threads=8, device_id=0, seed=12)
def train_pipe(data_dir):
    jpegs, labels = fn.readers.file(file_root=data_dir, random_shuffle=True, seed=3, name="Reader")
    images = fn.decoders.image(jpegs, device="mixed", output_type=types.RGB)
    mirror = fn.random.coin_flip(probability=0.5)
    images = fn.random_resized_crop(images, size=(224, 224), random_area=[0.25, 1.0])
    images = fn.crop_mirror_normalize(
        images,
        dtype=types.FLOAT16,
        output_layout="CHW",
        mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
        std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
        mirror=mirror,
    )
    return images, labels.gpu()


def run(data_dir, batches, consume):
    pipe = train_pipe(data_dir)
    pipe.build()
    for _ in range(batches):
        images, labels = pipe.run()
        consume(images.as_tensor(), labels.as_tensor())
