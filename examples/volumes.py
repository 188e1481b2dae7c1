"""Statistics over a folder of .npy volumes."""

import numpy as np
from nvidia.dali import fn, pipeline_def, types


@pipeline_def(batch_size=4, num_threads=2, device_id=None)
def volume_pipeline(root):
    volume = fn.readers.numpy(file_root=root, file_filter="*.npy")
    volume = fn.cast(volume, dtype=types.FLOAT) / 255.0
    first_slice = volume[0]
    return volume * 2 - 1, first_slice


pipe = volume_pipeline("/data/volumes")
pipe.build()
means = []
for _ in range(10):
    volumes, slices = pipe.run()
    means.append(np.mean(volumes.as_array()))
    print(len(slices), slices.at(0).shape)
print("mean", np.mean(means))
