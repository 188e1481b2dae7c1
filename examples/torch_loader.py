"""Feeding PyTorch through DALIGenericIterator (PARTIAL): migrates to a small loader class."""

from nvidia.dali import fn, pipeline_def
from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy


@pipeline_def(batch_size=64, num_threads=4, device_id=0)
def loader_pipeline(root):
    jpegs, labels = fn.readers.file(file_root=root, name="Reader")
    images = fn.decoders.image(jpegs, device="mixed")
    images = fn.resize(images, size=(128, 128))
    return images, labels


pipe = loader_pipeline("/data/train")
loader = DALIGenericIterator(
    [pipe], ["data", "label"], reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL
)
for batch in loader:
    data, label = batch[0]["data"], batch[0]["label"]
