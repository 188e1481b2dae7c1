"""Validation input: GPU JPEG decoding, resize of the shorter side, center crop, normalize."""

from nvidia.dali import fn, pipeline_def, types


@pipeline_def(batch_size=64, num_threads=8, device_id=0)
def val_pipe(data_dir):
    jpegs, labels = fn.readers.file(file_root=data_dir, name="Reader")
    images = fn.decoders.image(jpegs, device="mixed", output_type=types.RGB)
    images = fn.resize(images, resize_shorter=256)
    images = fn.crop_mirror_normalize(
        images,
        crop=(224, 224),
        dtype=types.FLOAT,
        output_layout="CHW",
        mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
        std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
    )
    return images, labels.gpu()


def run(data_dir, batches, consume):
    pipe = val_pipe(data_dir)
    pipe.build()
    for _ in range(batches):
        images, labels = pipe.run()
        consume(images.as_tensor(), labels.as_tensor())
