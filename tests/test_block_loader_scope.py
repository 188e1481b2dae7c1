"""The code of a ``with pipe:`` block that moves into a generated loader class or generator, and
the functions it calls: ``self`` of the method the block was made in
(transforms/_backend/outer_self.py), and random helpers defined in the function around the
pipeline (transforms/_backend/random_helpers.py)."""

from __future__ import annotations

import textwrap

import libcst as cst

from dali_migrate import migrate_source
from dali_migrate.transforms._backend.outer_self import self_reads

HEADER = """\
from nvidia.dali import fn, types
from nvidia.dali.pipeline import Pipeline
from nvidia.dali.plugin.pytorch import DALIGenericIterator
"""


def _migrated(body: str) -> tuple[str, list[str]]:
    result = migrate_source(HEADER + textwrap.dedent(body))
    return result.code, [d.message for d in result.diagnostics if d.severity == "todo"]


def _flat(code: str) -> str:
    """``code`` with calls that were wrapped over lines joined (no newline, no indentation)."""
    return " ".join(code.split()).replace("( ", "(").replace(", )", ")").replace(" )", ")")


def _class(code: str, name: str = "Loader") -> cst.ClassDef:
    found = [
        n
        for n in _walk(cst.parse_module(code))
        if isinstance(n, cst.ClassDef) and n.name.value == name
    ]
    assert len(found) == 1, code
    return found[0]


def _walk(node: cst.CSTNode):
    yield node
    for child in node.children:
        yield from _walk(child)


def _self_attrs(node: cst.CSTNode) -> set[str]:
    """The attributes read as ``self.x`` in ``node``."""
    return {
        n.attr.value
        for n in _walk(node)
        if isinstance(n, cst.Attribute)
        and isinstance(n.value, cst.Name)
        and n.value.value == "self"
    }


METHOD = """
class Clips:
    def __init__(self, root, rank, length):
        self.root, self.rank, self.length = root, rank, length

    def loader(self):
        pipe = Pipeline(batch_size=4, num_threads=2, device_id=self.rank, seed=self.rank)
        with pipe:
            frames, labels = fn.readers.file(file_root=self.root, name="Reader")
            frames = fn.decoders.image(frames, device="mixed")
            frames = fn.resize(frames, size=self.length)
            pipe.set_outputs(frames, labels)
        pipe.build()
        return DALIGenericIterator([pipe], ["frames", "labels"], reader_name="Reader")
"""


def test_what_the_block_read_from_self_is_read_where_it_stood() -> None:
    """``self.length`` would be the loader's own ``length`` (its number of batches) inside the
    class, silently; ``self.root`` an AttributeError; ``self.rank`` (seed and device) the same."""
    code, todos = _migrated(METHOD)
    assert todos == []
    loader = _class(code)
    assert {"root", "rank"}.isdisjoint(_self_attrs(loader))
    lines = [ln.strip() for ln in code.splitlines()]
    assert "root = self.root" in lines and "length = self.length" in lines
    assert "rank = self.rank" in lines
    assert lines.index("root = self.root") < lines.index("class Loader:")
    text = cst.Module([]).code_for_node(loader)
    assert "size=length)" in text and "file_root=root" in text
    assert 'ndd.Device("gpu", rank)' in text
    assert "self.length = " in text  # the loader's own, which the block's code must not read


def test_self_itself_is_read_into_owner() -> None:
    code, todos = _migrated(
        """
        def sized(owner, images):
            return fn.resize(images, size=owner.size)

        class Data:
            def loader(self, root):
                pipe = Pipeline(batch_size=4, num_threads=2, device_id=None)
                with pipe:
                    jpegs, labels = fn.readers.file(file_root=root, name="Reader")
                    pipe.set_outputs(sized(self, fn.decoders.image(jpegs)), labels)
                pipe.build()
                return DALIGenericIterator([pipe], ["x", "y"], reader_name="Reader")
        """
    )
    assert todos == []
    assert "owner = self" in [ln.strip() for ln in code.splitlines()]
    assert "sized(owner, ndd.decoders.image(jpegs))" in _flat(code)


def test_a_block_that_sets_an_attribute_of_self_keeps_the_iterator() -> None:
    code, todos = _migrated(
        """
        class Data:
            def loader(self, root):
                pipe = Pipeline(batch_size=4, num_threads=2, device_id=None)
                with pipe:
                    data = fn.readers.numpy(file_root=root, name="Reader")
                    self.doubled = data * 2
                    pipe.set_outputs(self.doubled)
                pipe.build()
                return DALIGenericIterator([pipe], ["x"], reader_name="Reader")
        """
    )
    assert "class Loader" not in code
    assert any("sets `self.doubled`" in t for t in todos), todos


def test_a_batch_size_of_the_block_other_than_the_pipelines_keeps_the_iterator() -> None:
    """The class's ``batch_size`` is the pipeline's (here twice the one the block reads)."""
    code, todos = _migrated(
        """
        def loader(root, batch_size):
            pipe = Pipeline(batch_size=2 * batch_size, num_threads=2, device_id=None, seed=1)
            with pipe:
                data = fn.readers.numpy(file_root=root, name="Reader")
                pipe.set_outputs(data, fn.random.uniform(range=(0, 1), shape=[batch_size]))
            pipe.build()
            return DALIGenericIterator([pipe], ["x", "n"], reader_name="Reader")
        """
    )
    assert "class Loader" not in code
    assert any("not the name batch_size" in t for t in todos), todos


def test_self_reads_in_order_skipping_keywords_and_attribute_names() -> None:
    block = cst.parse_module(
        "x = f(self.b, key=self)\ny = g(self=1, other=obj.self) + self.a + self.b\n"
    )
    why, reads = self_reads([block])
    assert why == []
    assert list(reads.names) == ["b", "", "a"]


def test_self_reads_refuses_code_that_binds_self() -> None:
    why, _ = self_reads([cst.parse_module("for self in items:\n    pass\n")])
    assert why and "binds `self`" in why[0]
    why, _ = self_reads([cst.parse_module("self.seen[0] = 1\n")])
    assert why and "sets `self.seen`" in why[0]


# -- random helpers defined around the pipeline ----------------------------------------------------

NESTED = """
def loader(root, batch_size):
    def gray(img, prob):
        keep = fn.random.coin_flip(probability=1 - prob)
        return fn.hsv(img, saturation=fn.cast(keep, dtype=types.FLOAT))

    pipe = Pipeline(batch_size=batch_size, num_threads=2, device_id=None, seed=5)
    with pipe:
        jpegs, labels = fn.readers.file(file_root=root, name="Reader")
        pipe.set_outputs(gray(fn.decoders.image(jpegs), 0.1), labels)
    pipe.build()
    return {use}
"""


def test_a_nested_helper_draws_from_the_loaders_rng() -> None:
    code, todos = _migrated(
        NESTED.format(use='DALIGenericIterator([pipe], ["x", "y"], reader_name="Reader")')
    )
    assert todos == []
    assert "def gray(img, prob, *, rng, batch_size):" in code
    assert "rng=rng)" in code  # the helper's draw
    assert "0.1, rng=self.rng, batch_size=jpegs.batch_size)" in _flat(code)  # the loader's call


def test_a_nested_helper_draws_from_the_generators_rng() -> None:
    code, _ = _migrated(NESTED.format(use="pipe.run()"))
    assert "def gray(img, prob, *, rng, batch_size):" in code
    assert "0.1, rng=rng, batch_size=jpegs.batch_size)" in _flat(code)


def test_a_pipeline_def_beside_a_nested_helper() -> None:
    code = migrate_source(
        textwrap.dedent(
            """
            from nvidia.dali import fn, pipeline_def

            def factory(root):
                def jitter(x):
                    return x + fn.random.uniform(range=(-1, 1))

                @pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=2)
                def noisy():
                    return jitter(fn.readers.numpy(file_root=root))

                return noisy()
            """
        )
    ).code
    assert "def jitter(x, *, rng, batch_size):" in code
    assert "rng=rng, batch_size=numpy_batch.batch_size)" in _flat(code)


def test_a_helper_reading_an_rng_of_its_own_keeps_the_pipeline() -> None:
    """The parameter ``rng`` it would gain would hide the numpy generator it reads; refused, the
    helper keeps its pipeline-mode API with the pipeline."""
    code, todos = _migrated(
        """
        import numpy as np

        def preview(root):
            rng = np.random.default_rng(0)

            def jitter(img):
                return img + fn.random.uniform(range=(-1.0, 1.0)) * float(rng.random())

            pipe = Pipeline(batch_size=2, num_threads=2, device_id=None, seed=3)
            with pipe:
                pipe.set_outputs(jitter(fn.readers.numpy(file_root=root)))
            pipe.build()
            return pipe.run()
        """
    )
    assert any("reads `rng` from around it" in t for t in todos), todos
    assert "return img + fn.random.uniform(range=(-1.0, 1.0)) * float(rng.random())" in code


def test_a_tf_dataset_made_in_a_method_keeps_self() -> None:
    """TensorFlow's DALIDataset becomes a generator function defined where the block was, not a
    class: ``self`` there is the method's, read as it is."""
    result = migrate_source(
        textwrap.dedent(
            """
            import nvidia.dali.plugin.tf as dali_tf
            import tensorflow as tf
            from nvidia.dali import fn
            from nvidia.dali.pipeline import Pipeline

            class Data:
                def dataset(self):
                    pipe = Pipeline(batch_size=4, num_threads=2, device_id=0)
                    with pipe:
                        jpegs, labels = fn.readers.file(file_root=self.root, name="Reader")
                        images = fn.resize(fn.decoders.image(jpegs), size=(16, 16))
                        pipe.set_outputs(images, labels)
                    return dali_tf.DALIDataset(
                        pipeline=pipe, batch_size=4, output_shapes=((4, 16, 16, 3), (4, 1)),
                        output_dtypes=(tf.uint8, tf.int32), device_id=0,
                    )
            """
        )
    )
    assert "ndd.readers.File(file_root=self.root, max_batch_size=batch_size)" in result.code
    assert "root = self.root" not in result.code
