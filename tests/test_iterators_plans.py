"""The epoch arithmetic of the migrated loaders against DALI's own DALIGenericIterator, over more
configurations than a program fixture per shape would cover: uneven shards, ``stick_to_shard``,
padding, ``size=``, every policy, ``len()`` before and during each epoch, and a loop that leaves
an epoch early (``break``), which DALI's iterator resumes.

Each case writes a small pipeline-mode program, migrates it with ``migrate_source`` and runs both
in this process on the same folder of numbered samples. The program fixtures
(fixtures/programs/o_iter_*) check whole migrated programs in their own processes.
"""

from __future__ import annotations

import logging
import warnings

import pytest

from dali_migrate import migrate_source

EPOCHS = 4

#: (samples, batch size, shards, shard id, pad_last_batch, stick_to_shard, policy, size,
#: last_batch_padded, break at (epoch 1), len() in the loop)
CASES = [
    (
        7,
        3,
        2,
        0,
        False,
        False,
        "FILL",
        None,
        False,
        None,
        True,
    ),  # uneven shards: every shard counted at once
    (7, 3, 2, 0, False, False, "FILL", None, False, 0, True),
    (
        10,
        4,
        1,
        0,
        False,
        False,
        "FILL",
        None,
        False,
        1,
        True,
    ),  # samples read ahead count into the next epoch
    (10, 3, 3, 1, False, True, "FILL", None, False, None, True),
    (10, 3, 3, 2, True, False, "FILL", None, False, 0, True),
    (10, 4, 1, 0, True, False, "FILL", None, False, None, False),  # the reader's epochs as they are
    (10, 4, 3, 1, False, False, "PARTIAL", None, False, None, True),
    (
        9,
        2,
        2,
        0,
        False,
        False,
        "PARTIAL",
        None,
        False,
        None,
        True,
    ),  # a shard of whole batches: empty last batch
    (9, 2, 2, 1, True, False, "PARTIAL", None, False, None, True),
    (9, 2, 2, 0, True, True, "PARTIAL", None, False, None, True),
    (10, 4, 1, 0, True, False, "PARTIAL", None, False, None, False),
    (10, 3, 2, 1, False, False, "DROP", None, False, None, True),
    (10, 3, 3, 0, True, False, "DROP", None, False, None, True),
    (7, 3, 1, 0, True, True, "DROP", None, False, None, True),
    (
        10,
        4,
        1,
        0,
        False,
        False,
        "FILL",
        10,
        False,
        1,
        True,
    ),  # size=: samples read past size count into the next epoch
    (10, 4, 1, 0, False, False, "FILL", 9, True, None, True),
    (10, 4, 2, 1, True, False, "PARTIAL", 7, False, None, True),
    (7, 3, 1, 0, False, False, "DROP", 5, True, None, True),
    (7, 3, 1, 0, False, False, "DROP", 6, False, None, False),
]

PROGRAM = """
from nvidia.dali import fn, pipeline_def
from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy


@pipeline_def(batch_size={bs}, num_threads=1, device_id=None)
def numbers(root):
    return fn.readers.numpy(
        file_root=root, name="R", num_shards={shards}, shard_id={shard}, pad_last_batch={pad},
        stick_to_shard={stick},
    )


def run(root, epochs):
    pipe = numbers(root)
    loader = DALIGenericIterator([pipe], ["x"], last_batch_policy=LastBatchPolicy.{policy}, {kw})
    out = [("len", len(loader))]
    for epoch in range(epochs):
        for i, data in enumerate(loader):
            out.append((epoch, {length}, data[0]["x"].numpy().ravel().tolist())){brk}
        loader.reset()  # ignored by DALI after a break: the next loop resumes the epoch
    return out
"""


@pytest.fixture(scope="module")
def numbers(tmp_path_factory):
    """``numbers(n)``: a folder of n .npy files whose value is their index."""
    import numpy as np

    made = {}

    def get(n: int):
        if n not in made:
            root = tmp_path_factory.mktemp(f"numbers{n}")
            for i in range(n):
                np.save(root / f"n_{i:03d}.npy", np.array([i], dtype=np.int32))
            made[n] = root
        return str(made[n])

    return get


def _program(bs, shards, shard, pad, stick, policy, size, padded, brk, with_len) -> str:
    kw = 'reader_name="R"' if size is None else f"size={size}, last_batch_padded={padded}"
    return PROGRAM.format(
        bs=bs,
        shards=shards,
        shard=shard,
        pad=pad,
        stick=stick,
        policy=policy,
        kw=kw,
        length="len(loader)" if with_len else "None",
        brk=(
            ""
            if brk is None
            else f"\n            if epoch == 1 and i == {brk}:\n                break"
        ),
    )


def _run(code: str, root: str):
    namespace: dict = {}
    exec(compile(code, "<program>", "exec"), namespace)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            return namespace["run"](root, EPOCHS)
        finally:
            logging.disable(logging.NOTSET)


@pytest.mark.dali
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(v) for v in c))
def test_loader_gives_what_dali_iterator_gave(case, numbers) -> None:
    pytest.importorskip("nvidia.dali")
    n, *rest = case
    old = _program(*rest)
    new = migrate_source(old).code
    assert "TODO" not in new and "class NumbersLoader" in new, new
    root = numbers(n)
    assert _run(new, root) == _run(old, root)


@pytest.mark.dali
@pytest.mark.parametrize(
    "policy, shards, shard, pad",
    [
        ("PARTIAL", 1, 0, False),
        ("DROP", 1, 0, False),
        ("PARTIAL", 3, 1, False),
        ("DROP", 2, 1, True),
    ],
)
def test_early_exit_where_epochs_do_not_resume_gives_a_drop_in_loader(
    policy, shards, shard, pad, numbers
) -> None:
    """A loop that leaves an epoch early, with PARTIAL or DROP: the loader is a drop-in
    iterator, which resumes that epoch in the next loop, as DALI's iterator did."""
    pytest.importorskip("nvidia.dali")
    old = _program(4, shards, shard, pad, False, policy, None, False, 1, True)
    new = migrate_source(old).code
    assert "TODO" not in new and "def __next__(self):" in new, new
    for n in (9, 10):
        root = numbers(n)
        assert _run(new, root) == _run(old, root)


DROP_IN_PROGRAM = """
import itertools

from nvidia.dali import fn, pipeline_def
from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy


@pipeline_def(batch_size=4, num_threads=1, device_id=None)
def numbers(root):
    return fn.readers.numpy(
        file_root=root, name="R", num_shards={shards}, shard_id=0, pad_last_batch={pad}
    )


def run(root, epochs):
    pipe = numbers(root)
    loader = DALIGenericIterator(
        [pipe], ["x"], reader_name="R", last_batch_policy=LastBatchPolicy.{policy},
        auto_reset={auto},
    )
    out = []
    for epoch in range(epochs):
        for _ in range(len(loader)):  # steps by hand, then a reset
            out.append((epoch, "next", next(loader)[0]["x"].numpy().ravel().tolist()))
        loader.reset()
        for data in itertools.islice(loader, 1):  # code the tool cannot read
            out.append((epoch, "islice", data[0]["x"].numpy().ravel().tolist()))
        for data in loader:  # the rest of that epoch
            out.append((epoch, "loop", data[0]["x"].numpy().ravel().tolist()))
        if not {auto}:
            loader.reset()  # else next() gets no batch
    return out
"""


@pytest.mark.dali
@pytest.mark.parametrize("policy, pad", [("FILL", True), ("PARTIAL", False), ("DROP", False)])
@pytest.mark.parametrize("auto", [False, True])
@pytest.mark.parametrize("shards", [1, 2])
def test_drop_in_loader_gives_what_dali_iterator_gave(policy, pad, auto, shards, numbers) -> None:
    """next() for len() steps, reset(), a helper that takes one batch and a loop over the rest:
    the drop-in loader ends, resets and resumes its epochs where DALI's iterator did (FILL over
    an unpadded reader with len() between loops is refused, see above)."""
    pytest.importorskip("nvidia.dali")
    old = DROP_IN_PROGRAM.format(policy=policy, auto=auto, shards=shards, pad=pad)
    new = migrate_source(old).code
    assert "TODO" not in new and "def __next__(self):" in new, new
    for n in (9, 10):
        root = numbers(n)
        assert _run(new, root) == _run(old, root)


STAYS = {
    "handed to a builtin": ("print(loader)", "in a way the tool cannot follow"),
    # a drop-in loader serves code the tool cannot read, but not a check of the object's type
    "checked with isinstance": ("isinstance(loader, object)", "in a way the tool cannot follow"),
    "handed to a helper that prints it": (
        "show(loader)\n    show(None)",
        "`print(x)` in `show()` uses `x` in a way the tool cannot follow",
    ),
    # only plain assignments may rebind the name that holds the iterator
    "rebound by a loop": (
        "for loader in [None]:\n        pass",
        "`loader` is assigned more than once",
    ),
}


@pytest.mark.dali
@pytest.mark.parametrize("policy", ["FILL", "PARTIAL", "DROP"])
def test_size_from_a_name_of_the_caller_is_given_to_the_loader(policy, numbers) -> None:
    """``size=samples``, a name the code that makes the iterator has: the loader takes it as an
    argument there, and counts its epochs as DALI's iterator did."""
    pytest.importorskip("nvidia.dali")
    old = _program(4, 1, 0, False, False, policy, None, False, None, True)
    old = old.replace('reader_name="R"', "size=samples").replace(
        "pipe = numbers", "samples = 10\n    pipe = numbers"
    )
    new = migrate_source(old).code
    assert "TODO" not in new and "NumbersLoader(root, size=samples)" in new, new
    for n in (9, 10):
        root = numbers(n)
        assert _run(new, root) == _run(old, root)


@pytest.mark.parametrize("shape", STAYS, ids=list(STAYS))
def test_shapes_that_stay_get_a_todo(shape: str) -> None:
    """Uses the loader cannot take keep the iterator, with a TODO that says why (no crash)."""
    extra, why = STAYS[shape]
    old = _program(4, 1, 0, False, False, "FILL", None, False, None, True)
    old = "def show(x):\n    print(x)\n\n" + old.replace(
        "    return out\n", f"    {extra}\n    return out\n"
    )
    result = migrate_source(old)
    assert why in result.code or any(why in d.message for d in result.diagnostics), result.code


@pytest.mark.dali
def test_reset_in_a_helper_that_also_gets_other_values_stays(numbers) -> None:
    """A helper that loops over whatever it gets and resets it, called with the iterator and
    with something else: its reset() stays, and the loader has a reset() that does nothing
    (deleting it would break the other caller)."""
    old = _program(4, 1, 0, False, False, "FILL", None, False, None, False)
    helper = (
        "\n\ndef drain(it):\n    for _ in it:\n        pass\n    it.reset()\n"
        "\n\nclass Batches(list):\n    def reset(self):\n        pass\n"
    )
    old = old.replace(
        "    return out\n", "    drain(loader)\n    drain(Batches())\n    return out\n"
    )
    old += helper  # after run(): the len() before run()'s first loop stays the first use
    new = migrate_source(old).code
    assert "TODO" not in new and "class NumbersLoader" in new, new
    assert "    it.reset()\n" in new and "    def reset(self):\n" in new, new
    root = numbers(10)
    assert _run(new, root) == _run(old, root)


@pytest.mark.dali
def test_name_rebound_to_something_else_keeps_its_uses(numbers) -> None:
    """The name that holds the iterator is assigned again (another loader of the program's own):
    the code that uses it stays as written, resets included, and the loader has a reset() that
    does nothing."""
    old = _program(4, 1, 0, False, False, "PARTIAL", None, False, None, True)
    old = old.replace(
        "    return out\n",
        "    loader = Batches()\n    for _ in loader:\n        pass\n    loader.reset()\n"
        "    return out\n",
    )
    old += "\n\nclass Batches(list):\n    def reset(self):\n        pass\n"
    new = migrate_source(old).code
    assert "TODO" not in new and "class NumbersLoader" in new, new
    assert new.count("    loader.reset()") == 2 and "    def reset(self):\n" in new, new
    root = numbers(10)
    assert _run(new, root) == _run(old, root)


SOURCE_PROGRAM = """
import numpy as np
from nvidia.dali import fn, pipeline_def
from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy


class Counting:
    def __init__(self, batches):
        self.batches = batches

    def __iter__(self):
        self.i = 0
        return self

    def __next__(self):
        if self.batches is not None and self.i >= self.batches:
            raise StopIteration
        self.i += 1
        return [np.array([self.i * 3 + k], dtype=np.int32) for k in range(3)]


source = Counting({batches})


@pipeline_def(batch_size=3, num_threads=1, device_id=None)
def counted():
    return fn.external_source(source=source)


def run(root, epochs):
    loader = DALIGenericIterator(
        [counted()], ["x"], size={size}, last_batch_policy=LastBatchPolicy.{policy}
    )
    out = []
    for epoch in range(epochs):
        for i, data in enumerate(loader):
            out.append((epoch, i, data[0]["x"].numpy().ravel().tolist()))
    return out
"""


@pytest.mark.dali
@pytest.mark.parametrize("policy", ["FILL", "PARTIAL", "DROP"])
@pytest.mark.parametrize("batches, size", [(None, 7), (None, 9), (3, 7), (2, 9)])
def test_size_over_an_external_source_counts_as_dali_did(policy, batches, size) -> None:
    """``size=`` over a pipeline fed by an iterable gone over once: each epoch takes the batches
    that reach ``size`` samples (FILL: the overshoot counts into the next; PARTIAL: cut; DROP:
    the incomplete one read, not given), and once the source ends every epoch is empty."""
    pytest.importorskip("nvidia.dali")
    old = SOURCE_PROGRAM.format(batches=batches, size=size, policy=policy)
    new = migrate_source(old).code
    assert "TODO" not in new and "class CountedLoader" in new, new
    assert _run(new, "") == _run(old, "")


@pytest.mark.dali
def test_source_loader_keeps_a_reset_for_code_that_resets_other_values() -> None:
    """A helper that resets whatever it loops over, given the iterator over external sources and
    something else: the loader has a reset() that does nothing (it had none: AttributeError)."""
    pytest.importorskip("nvidia.dali")
    old = SOURCE_PROGRAM.format(batches=3, size=7, policy="FILL").replace(", size=7", "")
    old = old.replace(
        "    return out\n", "    drain(loader)\n    drain(Batches())\n    return out\n"
    )
    old += (
        "\n\ndef drain(it):\n    for _ in it:\n        pass\n    it.reset()\n"
        "\n\nclass Batches(list):\n    def reset(self):\n        pass\n"
    )
    new = migrate_source(old).code
    assert "TODO" not in new and new.count("    def reset(self):\n") == 2, new
    assert _run(new, "") == _run(old, "")


@pytest.mark.dali
def test_rebound_name_pulled_with_next_gets_a_drop_in_loader(numbers) -> None:
    """``next(loader)`` on a name assigned again later: the loader is a drop-in iterator and
    every use stays as written (``loader = iter(...)`` and len() of the loader's own name would
    rewrite uses that also see the other value)."""
    old = _program(4, 1, 0, False, False, "PARTIAL", None, False, None, False)
    old = old.replace(
        "        for i, data in enumerate(loader):\n"
        "            out.append((epoch, None, data[0][\"x\"].numpy().ravel().tolist()))\n"
        "        loader.reset()  # ignored by DALI after a break: the next loop resumes the epoch\n",
        "        while True:\n"
        "            try:\n"
        "                data = next(loader)\n"
        "            except StopIteration:\n"
        "                break\n"
        "            out.append((epoch, len(loader), data[0][\"x\"].numpy().ravel().tolist()))\n",
    )
    old = old.replace(
        "    return out\n", "    loader = Batches()\n    out.append(len(loader))\n    return out\n"
    )
    old += "\n\nclass Batches(list):\n    pass\n"
    assert "next(loader)" in old
    new = migrate_source(old).code
    assert "TODO" not in new and "def __next__(self):" in new and "iter(" not in new, new
    root = numbers(10)
    assert _run(new, root) == _run(old, root)


#: one pipeline per shard in one iterator: (samples, batch size, shards, pad_last_batch,
#: stick_to_shard, policy)
PER_DEVICE_CASES = [
    (7, 3, 2, False, False, "FILL"),  # uneven shards: every shard counted at once
    (10, 3, 3, False, False, "FILL"),
    (10, 3, 3, False, True, "FILL"),
    (10, 3, 3, True, False, "FILL"),  # the readers' epochs as they are
    (9, 2, 2, False, False, "PARTIAL"),  # a shard of whole batches: empty last batch
    (10, 4, 3, False, False, "PARTIAL"),
    (9, 2, 2, True, False, "PARTIAL"),
    (9, 2, 2, True, True, "PARTIAL"),
    (10, 3, 2, False, False, "DROP"),
    (10, 3, 3, True, False, "DROP"),
    (7, 3, 2, False, True, "DROP"),
]

PER_DEVICE_PROGRAM = """
from nvidia.dali import fn, pipeline_def
from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy


@pipeline_def(batch_size={bs}, num_threads=1, device_id=None)
def numbers(root, shard):
    return fn.readers.numpy(
        file_root=root, name="R", num_shards={shards}, shard_id=shard, pad_last_batch={pad},
        stick_to_shard={stick},
    )


def run(root, epochs):
    pipes = [numbers(root, s) for s in range({shards})]
    loader = DALIGenericIterator(
        pipes, ["x"], reader_name="R", last_batch_policy=LastBatchPolicy.{policy}
    )
    out = [("len", len(loader))]
    for epoch in range(epochs):
        for i, data in enumerate(loader):
            out.append((epoch, len(loader), [d["x"].numpy().ravel().tolist() for d in data]))
        loader.reset()
    return out
"""


@pytest.mark.dali
@pytest.mark.parametrize("case", PER_DEVICE_CASES, ids=lambda c: "-".join(str(v) for v in c))
def test_loaders_per_device_give_what_dali_iterator_gave(case, numbers) -> None:
    """DALIGenericIterator over one pipeline per shard: one loader per pipeline, side by side
    (``PerDeviceBatches``), gives every shard's batches as DALI's iterator did, epoch by epoch."""
    pytest.importorskip("nvidia.dali")
    n, bs, shards, pad, stick, policy = case
    old = PER_DEVICE_PROGRAM.format(bs=bs, shards=shards, pad=pad, stick=stick, policy=policy)
    new = migrate_source(old).code
    assert "TODO" not in new and "PerDeviceBatches(pipes)" in new, new
    root = numbers(n)
    assert _run(new, root) == _run(old, root)
