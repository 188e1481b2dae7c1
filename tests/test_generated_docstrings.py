"""The docstrings written for a migrated pipeline name an output only where it is that variable,
and say what each batch is as Python writes it (a tuple of one for one output)."""

from __future__ import annotations

from dali_migrate import migrate_source

SLICED = """\
from nvidia.dali import fn, pipeline_def


@pipeline_def(batch_size=2, num_threads=1, device_id=None)
def sliced(root):
    volume = fn.readers.numpy(file_root=root)
    width = fn.shapes(volume)
    return fn.slice(volume, 0, 4, axes=[0]), width


@pipeline_def(batch_size=2, num_threads=1, device_id=None)
def moved(root):
    jpegs, labels = fn.readers.file(file_root=root)
    return jpegs.gpu(), labels[0]


@pipeline_def(batch_size=2, num_threads=1, device_id=None)
def single(root):
    volume = fn.readers.numpy(file_root=root)
    return volume


@pipeline_def(batch_size=2, num_threads=1, device_id=None)
def doubled(root):
    volume = fn.readers.numpy(file_root=root)
    return volume, volume
"""

BRANCHES = """\
from nvidia.dali import fn, pipeline_def


@pipeline_def(batch_size=2, num_threads=1, device_id=None)
def chosen(root, with_masks, flipped):
    images = fn.readers.numpy(file_root=root)
    masks = fn.readers.numpy(file_root=root + "/masks")
    if with_masks:
        return images, masks
    elif flipped:
        return fn.flip(images), masks
    else:
        return (images,)
"""

CLASS_GRAPH = """\
from nvidia.dali import ops
from nvidia.dali.pipeline import Pipeline


class Decoding(Pipeline):
    def __init__(self, root):
        super().__init__(batch_size=2, num_threads=1, device_id=None)
        self.input = ops.readers.File(file_root=root)
        self.decode = ops.decoders.Image(device="cpu")

    def define_graph(self):
        jpegs, labels = self.input()
        return self.decode(jpegs), labels


pipe = Decoding("/d")
pipe.build()
images, labels = pipe.run()
"""

KEPT_DOCSTRING = """\
from nvidia.dali import fn, pipeline_def


@pipeline_def(batch_size=2, num_threads=1, device_id=None)
def read(root):
    \"\"\"The files under root, with their labels.\"\"\"
    jpegs, labels = fn.readers.file(file_root=root, name="Reader")
    return jpegs, labels


def main(root):
    pipe = read(root)
    pipe.build()
    size = pipe.epoch_size("Reader")
    for _ in range(size // 2):
        jpegs, labels = pipe.run()
"""


def _docs(code: str) -> list[str]:
    return [line.strip() for line in migrate_source(code).code.splitlines() if '"""' in line]


def test_an_output_is_named_only_where_it_is_that_variable():
    """A slice of ``volume`` is not ``volume``, ``labels[0]`` is not ``labels``; ``jpegs.gpu()``
    holds the values of ``jpegs``; one variable returned twice is named twice."""
    docs = _docs(SLICED)
    assert docs[0].startswith('"""Yields (output, width) batches epoch after epoch'), docs
    assert docs[1].startswith('"""Yields (jpegs, output) batches epoch after epoch'), docs
    assert docs[3].startswith('"""Yields (volume, volume) batches epoch after epoch'), docs


def test_one_output_is_written_as_the_tuple_of_one_the_generator_yields():
    new = migrate_source(SLICED).code
    assert '"""Yields (volume,) batches epoch after epoch' in new, new
    assert "yield (volume,)" in new, new


def test_each_branch_names_its_own_outputs():
    docs = _docs(BRANCHES)
    assert docs[0].startswith(
        '"""Yields (images, masks) or (output, masks) or (images,) batches'
    ), docs


def test_an_operator_object_called_on_a_variable_is_not_that_variable():
    """``self.decode(jpegs)`` yields decoded images, not ``jpegs`` (nor ``self``)."""
    docs = _docs(CLASS_GRAPH)
    assert any(d.startswith('"""Yields (output, labels) batches') for d in docs), docs


def test_the_batches_of_a_function_with_its_own_docstring_are_named_too():
    """The user's docstring is kept; the generator of batches beside the reader still names
    them (it said "(output)" for any outputs)."""
    new = migrate_source(KEPT_DOCSTRING).code
    assert '"""The files under root, with their labels."""' in new, new
    assert '"""(jpegs, labels) batches epoch after epoch, without end, as Pipeline.run()' in new, (
        new
    )


DATASET = """\
import nvidia.dali.fn as fn
import nvidia.dali.plugin.tf as dali_tf
import tensorflow as tf
from nvidia.dali import pipeline_def


@pipeline_def(batch_size=4, num_threads=1, device_id=0)
def volumes(root):
    volume = fn.readers.numpy(file_root=root)
    return volume.gpu()


def make_dataset(root):
    return dali_tf.DALIDataset(
        pipeline=volumes(root, device_id=0),
        batch_size=4,
        output_shapes=SHAPES,
        output_dtypes=DTYPES,
        device_id=0,
    )
"""


def test_a_dataset_generator_of_one_output_says_whether_it_yields_a_tuple():
    """DALIDataset of one output: the generator yields the array itself for a signature of one
    shape, a tuple of one for a tuple of shapes; the docstring says which."""
    bare = migrate_source(DATASET.replace("SHAPES", "(4, 8)").replace("DTYPES", "tf.float32")).code
    assert '"""volume batches as numpy arrays, without end' in bare, bare
    tupled = migrate_source(
        DATASET.replace("SHAPES", "((4, 8),)").replace("DTYPES", "(tf.float32,)")
    ).code
    assert '"""(volume,) batches as numpy arrays, without end' in tupled, tupled
