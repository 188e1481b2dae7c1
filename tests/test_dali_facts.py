"""The facts about DALI 2.4 that the migration relies on, each checked on the installed DALI
(CPU). ``docs/dali-facts.md`` explains each one and which rule depends on it; when a new DALI
version changes one of them, the test that fails names the rule to revisit.
"""

from __future__ import annotations

import numpy as np
import pytest

ndd = pytest.importorskip("nvidia.dali.experimental.dynamic")
pytestmark = pytest.mark.dali


@pytest.fixture(scope="module")
def numbers(tmp_path_factory):
    """10 .npy files whose value is their index."""
    root = tmp_path_factory.mktemp("numbers")
    for i in range(10):
        np.save(root / f"{i:02d}.npy", np.array([i], dtype=np.int32))
    return str(root)


def _values(batch) -> list[int]:
    return [int(np.asarray(t)[0]) for t in batch.tensors]


def test_batch_has_no_truth_value():
    """[truth] ``if batch:`` is always true: data ``if``s are lowered per sample (conditionals)."""
    b = ndd.as_batch([np.array([0]), np.array([0])])
    assert bool(b) is True


def test_select_of_several_samples_returns_the_whole_batch():
    """[select] Batch.select(list) gives the whole batch in 2.4.0: sub-batches are built from
    single samples, ``ndd.as_batch([b.tensors[i] for i in idx])`` (conditionals)."""
    b = ndd.as_batch([np.array([k]) for k in range(4)])
    assert len(b.select([1, 2]).tensors) == 4
    assert _values(ndd.as_batch([b.tensors[i] for i in (1, 2)])) == [1, 2]


def test_random_call_draws_seven_words_per_batch():
    """[rng] One random call draws one 7-word state for the whole batch: an empty branch advances
    the RNG by 7 words per call it skipped (conditionals), and the harness replays states."""
    a, b = ndd.random.RNG(seed=1), ndd.random.RNG(seed=1)
    ndd.random.uniform(batch_size=4, rng=a)
    b.advance(7)
    x = np.asarray(ndd.as_tensor(ndd.random.uniform(batch_size=2, rng=a)))
    y = np.asarray(ndd.as_tensor(ndd.random.uniform(batch_size=2, rng=b)))
    assert np.array_equal(x, y)


def test_next_epoch_chains_into_the_run_stream(numbers):
    """[epochs] ``next_epoch`` gives full batches only; the next epoch starts where the reader
    stopped, so epochs chained without end are the ``pipe.run()`` stream (every generator)."""
    reader = ndd.readers.Numpy(file_root=numbers)
    first = [_values(b) for (b,) in reader.next_epoch(batch_size=4)]
    second = [_values(b) for (b,) in reader.next_epoch(batch_size=4)]
    assert first == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]
    assert second[0] == [2, 3, 4, 5]


def test_metadata_before_the_first_epoch_needs_max_batch_size(numbers):
    """[metadata] ``get_metadata()`` before the first ``next_epoch`` fixes the batch size to 1
    unless the reader is built with ``max_batch_size`` (handles, iterators)."""
    reader = ndd.readers.Numpy(file_root=numbers)
    reader.get_metadata()
    with pytest.raises(Exception):  # noqa: B017 - DALI raises a plain RuntimeError or ValueError
        next(iter(reader.next_epoch(batch_size=4)))
    sized = ndd.readers.Numpy(file_root=numbers, max_batch_size=4)
    meta = sized.get_metadata()
    assert meta["epoch_size_padded"] == 10
    assert len(next(iter(sized.next_epoch(batch_size=4)))[0].tensors) == 4


def test_reader_without_seed_shuffles_the_same_way_every_time(numbers):
    """[seed] A shuffling ndd reader without ``seed=`` uses a fixed seed, unlike a pipeline
    without one: the migration passes the pipeline's seed on, and says so."""
    orders = [
        [
            _values(b)
            for (b,) in ndd.readers.Numpy(file_root=numbers, random_shuffle=True).next_epoch(
                batch_size=5
            )
        ]
        for _ in range(2)
    ]
    assert orders[0] == orders[1]


def test_mixed_is_not_a_device():
    """[mixed] Dynamic mode rejects ``device="mixed"``: it becomes ``"gpu"`` (DM102)."""
    with pytest.raises(ValueError, match="mixed"):
        ndd.decoders.image(ndd.as_batch([np.zeros(10, np.uint8)]), device="mixed")


def test_only_decoders_have_a_mixed_backend():
    """[mixed-backend] Pipeline mode accepts ``device="mixed"`` only for operators with a mixed
    implementation registered (the image and video decoders): so any other operator's
    ``device=<expression>`` is never ``"mixed"`` where the old code runs, and DM102 leaves it
    alone. The catalog's ``backends`` are the registry's."""
    from nvidia.dali import backend

    from dali_migrate.catalog import get_catalog

    registered = set(backend.RegisteredMixedOps())
    catalog = get_catalog()
    with_mixed = {op.schema for op in catalog if "mixed" in op.backends}
    assert with_mixed == registered
    assert catalog.fn("resize").backends == ("cpu", "gpu")
    assert {
        op.fn_path.split(".")[-1].split("_")[0] for op in catalog if "mixed" in op.backends
    } == {
        "image",
        "video",
    }


def _build_on_gpu(make) -> None:
    """Build a one-operator pipeline on GPU 0 whose input is a batch of bytes."""
    from nvidia.dali import fn, pipeline_def

    @pipeline_def(batch_size=1, num_threads=1, device_id=0)
    def pipe():
        data = fn.external_source(source=lambda: [np.zeros(16, np.uint8)], batch=True)
        return make(data)

    pipe().build()


@pytest.mark.gpu
def test_pipeline_mode_builds_mixed_only_for_decoders():
    """[mixed-backend] On a GPU machine (without one, DALI stops before it looks at backends):
    ``fn.resize(x, device="mixed")`` cannot build, ``fn.decoders.image(x, device="mixed")`` can.
    Run there with ``python3 -m pytest -m gpu tests/test_dali_facts.py -rA``."""
    from nvidia.dali import fn

    from dali_migrate.harness.verify import has_gpu

    if not has_gpu():
        pytest.skip("no GPU visible")
    _build_on_gpu(lambda x: fn.decoders.image(x, device="mixed"))
    _build_on_gpu(lambda x: fn.resize(x, device="cpu", size=8))  # builds: only the device differs
    with pytest.raises(RuntimeError):
        _build_on_gpu(lambda x: fn.resize(x, device="mixed", size=8))


@pytest.mark.filterwarnings("ignore:capture=True was specified")
def test_epochs_run_in_the_context_given(numbers):
    """[device_id] ``next_epoch(ctx=...)`` takes the pipeline's ``EvalContext`` (the same object
    every epoch in capture mode); ``EvalContext.default()`` of the current device is the one
    context every loop without ``ctx=`` runs in (DM200, DM201, DM202)."""
    ctx = ndd.EvalContext.default()
    assert ctx is ndd.EvalContext.default() is ndd.EvalContext.current()
    reader = ndd.readers.Numpy(file_root=numbers)
    epochs = [[_values(b) for (b,) in reader.next_epoch(5, ctx, capture=True)] for _ in range(2)]
    assert epochs == [[[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]] * 2


_TURNS = """
import sys
import nvidia.dali.experimental.dynamic as ndd

def turns(contexts):
    def loop(ctx):
        reader = ndd.readers.Numpy(file_root=sys.argv[1])
        while True:
            for (b,) in reader.next_epoch(batch_size=4, ctx=ctx):
                yield b

    a, b = loop(contexts[0]), loop(contexts[1])
    for _ in range(4):  # past the end of the first epoch of each
        next(a), next(b)

def apart(contexts):
    def loop(ctx):
        reader = ndd.readers.Numpy(file_root=sys.argv[1])
        while True:
            for (b,) in reader.next_epoch(batch_size=4):
                with ctx:  # entered around the operators only
                    b = b * 2
                yield b.evaluate()

    a, b = loop(contexts[0]), loop(contexts[1])
    for _ in range(4):
        next(a), next(b)

shared = ndd.EvalContext.default()
turns([shared, shared])
print("shared: ran", flush=True)
apart([ndd.EvalContext(), ndd.EvalContext()])
print("apart: ran", flush=True)
turns([ndd.EvalContext(), ndd.EvalContext()])
print("own: ran", flush=True)
"""


def test_loops_taking_turns_share_one_context(numbers):
    """[device_id] An epoch keeps its context entered while its generator is suspended, and the
    context stack is LIFO: two loops holding different ``EvalContext`` objects that take turns
    fail at the first epoch's end (an assertion in DALI; in a process of its own, as it leaves
    the stack broken); holding the same one (a device's default context) they run, and so do
    loops that enter their own contexts around their operators only (one loader per GPU, their
    batches side by side). So a pipeline's ``device_id`` becomes that device's
    ``EvalContext.default()``."""
    import subprocess
    import sys

    command = [sys.executable, "-c", _TURNS, numbers]
    run = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert run.stdout == "shared: ran\napart: ran\n" and "AssertionError" in run.stderr, run.stderr


def test_as_batch_of_a_batch_is_that_batch():
    """[as_batch] ``ndd.as_batch`` of a Batch returns it: fed data may already be a Batch."""
    b = ndd.as_batch([np.zeros(2)], layout="X")
    assert ndd.as_batch(b) is b


def test_op_without_input_needs_batch_size():
    """[batch_size] An operator with no data input returns one sample unless given
    ``batch_size``: random operators get the batch size of the batch they go with (DM104)."""
    assert isinstance(ndd.random.uniform(), ndd.Tensor)
    assert ndd.random.uniform(batch_size=3).batch_size == 3


def _legacy_flip(made: dict, called: dict):
    """Builds and runs a pipeline calling ``ops.Flip(**made)`` with ``**called`` on one 1x2x1
    image (values given as the string "node" become data nodes); the flipped row, or the error."""
    from nvidia.dali import fn, ops
    from nvidia.dali.pipeline import Pipeline

    def values(kwargs):
        return {
            k: fn.constant(idata=v, shape=[]) if isinstance(v, list) else v
            for k, v in kwargs.items()
        }

    image = np.array([[[1], [2]]], dtype=np.uint8)
    pipe = Pipeline(batch_size=1, num_threads=1, device_id=None)
    try:
        with pipe:
            flip = ops.Flip(vertical=0, **values(made))
            pipe.set_outputs(
                flip(fn.external_source(source=lambda: [image], batch=True), **values(called))
            )
        pipe.build()
        (out,) = pipe.run()
        return np.array(out[0]).ravel().tolist()
    except (ValueError, RuntimeError) as e:
        return type(e).__name__


def test_an_argument_of_an_operator_object_and_of_its_call():
    """[ops-twice] Given to the object and to its call, an argument fails when both values are
    not None (two scalars, or a data node and a scalar); None in either place is "not given"
    (DM202 merges the two into the one that is not None)."""
    assert _legacy_flip({"horizontal": 0}, {"horizontal": 1}) == "ValueError"
    assert _legacy_flip({"horizontal": 0}, {"horizontal": [1]}) == "RuntimeError"
    assert _legacy_flip({"horizontal": None}, {"horizontal": [1]}) == [2, 1]
    assert _legacy_flip({"horizontal": 0}, {"horizontal": None}) == [1, 2]
    assert _legacy_flip({"horizontal": None}, {"horizontal": None}) == [2, 1]  # the default
    image = ndd.as_batch([np.array([[[1], [2]]], dtype=np.uint8)])
    flipped = ndd.flip(image, horizontal=None, vertical=0)
    assert np.asarray(flipped.tensors[0]).ravel().tolist() == [2, 1]


def test_python_function_batch_processing():
    """[pyfunc-batch] batch_processing=True: one list of numpy arrays per input, a tuple of lists
    back for several outputs, [] for num_outputs=0 (DM105)."""
    from nvidia.dali import fn, pipeline_def

    samples = [np.full((i + 1, 2), i, dtype=np.uint8) for i in range(3)]
    seen, calls = [], []

    def both(xs, ys):
        seen.append(
            [(type(x), x.dtype, x.shape, x.flags.writeable, x.flags.c_contiguous) for x in xs]
        )
        return [x + y for x, y in zip(xs, ys)], [x[:1] for x in xs]

    @pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def pipe_fn():
        x = fn.external_source(source=lambda: samples, batch=True)
        added, firsts = fn.python_function(
            x, x, function=both, batch_processing=True, num_outputs=2
        )
        nothing = fn.python_function(x, function=calls.append, batch_processing=True, num_outputs=0)
        assert nothing == []
        return added, firsts

    pipe = pipe_fn()
    pipe.build()
    added, firsts = pipe.run()
    batch = ndd.as_batch(samples)
    lists = [np.asarray(t) for t in batch.tensors]
    assert seen[0] == [
        (type(x), x.dtype, x.shape, x.flags.writeable, x.flags.c_contiguous) for x in lists
    ]
    new_added, new_firsts = [ndd.as_batch(o) for o in both(lists, lists)]
    for old, new in ((added, new_added), (firsts, new_firsts)):
        for i in range(3):
            assert np.array_equal(np.array(old[i]), np.asarray(new.tensors[i]))
    assert calls and all(len(c) == 3 for c in calls)  # the whole batch at once


def _even(info):
    return np.array(info.idx_in_batch % 2 == 0)


def _index(info):  # out of range of a 2-element table where the sample is odd
    return np.array(0 if info.idx_in_batch % 2 == 0 else 9, dtype=np.int32)


def _count(info):
    return np.array(info.idx_in_batch, dtype=np.int32)


def test_logical_operators_are_lazy_per_sample_booleans():
    """[logical] With conditionals, ``a and b`` runs ``b`` only on the samples ``a`` leaves
    open and gives one 0-d bool per sample; ``not`` takes a number; ``and`` refuses one
    (conditionals.py computes the same values sample by sample)."""
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(enable_conditionals=True, batch_size=4, num_threads=1, device_id=None)
    def logic():
        even = fn.external_source(source=_even, batch=False)
        index = fn.external_source(source=_index, batch=False)
        count = fn.external_source(source=_count, batch=False)
        table = types.Constant(np.array([True, False]), device="cpu")
        return even and table[index], not count

    @pipeline_def(enable_conditionals=True, batch_size=4, num_threads=1, device_id=None)
    def numbers():
        even = fn.external_source(source=_even, batch=False)
        count = fn.external_source(source=_count, batch=False)
        return even and count

    pipe = logic()
    pipe.build()
    both, negated = pipe.run()
    assert [np.asarray(t).tolist() for t in both] == [True, False, True, False]
    assert [np.asarray(t).shape for t in both] == [()] * 4
    assert [np.asarray(t).tolist() for t in negated] == [True, False, False, False]
    assert both.dtype == types.BOOL and negated.dtype == types.BOOL
    pipe = numbers()
    pipe.build()
    with pytest.raises(RuntimeError, match="of `bool` type"):
        pipe.run()
