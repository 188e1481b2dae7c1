"""Train a classifier on an ImageNet-style folder tree."""

import argparse

from nvidia.dali import fn, pipeline_def


@pipeline_def(batch_size=256, num_threads=8, device_id=0, seed=1234)
def train_pipeline(data_dir, crop=224):
    jpegs, labels = fn.readers.file(file_root=data_dir, random_shuffle=True, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, device="mixed", random_area=[0.08, 1.0])
    images = fn.resize(images, resize_x=crop, resize_y=crop)
    mirror = fn.random.coin_flip(probability=0.5)
    images = fn.crop_mirror_normalize(images, mirror=mirror, output_layout="CHW")
    return images, labels.gpu()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("data_dir")
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()

    pipe = train_pipeline(args.data_dir)
    pipe.build()
    for step in range(args.steps):
        images, labels = pipe.run()
        if step % 10 == 0:
            print(step, images.as_tensor().shape(), labels.as_cpu().at(0))


if __name__ == "__main__":
    main()
