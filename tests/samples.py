"""Sample programs shared by the CLI and API tests."""

#: the canonical pipeline-mode program the tool migrates whole (DM200)
PIPELINE = '''\
from nvidia.dali import pipeline_def, fn

@pipeline_def(batch_size=4, num_threads=2, device_id=None)
def simple(data_dir):
    jpegs, labels = fn.readers.file(file_root=data_dir)
    images = fn.decoders.image(jpegs)
    images = fn.resize(images, resize_x=32, resize_y=32)
    return images, labels

pipe = simple("/data")
pipe.build()
for _ in range(3):
    images, labels = pipe.run()
    print(images.as_array().shape)
'''
