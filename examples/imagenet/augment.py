"""Augmentations shared by the training and validation pipelines."""

from nvidia.dali import fn, types

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


def normalize(images, crop, mirror=0):
    """Crop, optionally mirror, and normalize to float CHW."""
    return fn.crop_mirror_normalize(
        images,
        crop=(crop, crop),
        mirror=mirror,
        dtype=types.FLOAT,
        output_layout="CHW",
        mean=MEAN,
        std=STD,
    )


def decode(jpegs):
    # hybrid decoding: the CPU parses, the GPU decodes
    return fn.decoders.image(jpegs, device="mixed", output_type=types.RGB)
