"""TODO markers name the code they are about, never a line of the input: every marker inserted
above shifts the lines below it, so "line 13" was wrong in the written file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dali_migrate import migrate_source
from dali_migrate.fixes import TODO_PREFIX

ROOT = Path(__file__).resolve().parent.parent
OUTPUTS = sorted((ROOT / "fixtures").glob("DM*/*.out.py"))
LINE_NUMBER = re.compile(r"\b(?:at|on) line \d+|\bline \d+\b")

HELPER_USED_OUTSIDE = """\
from nvidia.dali import fn, pipeline_def


def augment(x):
    return x * fn.random.coin_flip(probability=0.5)


@pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
def p(root):
    data = fn.readers.numpy(file_root=root)
    return augment(data)


def main():
    print(augment)
    pipe = p("/data")
    pipe.build()
    out = pipe.run()
"""

ITERATOR_IN_ANOTHER_SCOPE = """\
from nvidia.dali import fn, pipeline_def
from nvidia.dali.plugin.pytorch import DALIGenericIterator


@pipeline_def(batch_size=2, num_threads=1, device_id=None)
def p(root):
    jpegs, labels = fn.readers.file(file_root=root, name="Reader")
    return fn.decoders.image(jpegs), labels


pipe = p("/data")
it = DALIGenericIterator([pipe], ["images", "labels"], reader_name="Reader")


def evaluate():
    for batch in it:
        print(batch)
"""

UNSUPPORTED_AT_CALL = """\
from nvidia.dali import fn, pipeline_def


class Data:
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def p(self, root):
        return fn.readers.numpy(file_root=root)

    def first(self):
        pipe = self.p("/data", enable_checkpointing=True)
        pipe.build()
        return pipe.run()
"""


def _todos(code: str) -> list[str]:
    return [ln.strip() for ln in code.splitlines() if ln.strip().startswith(TODO_PREFIX)]


@pytest.mark.parametrize("path", OUTPUTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_fixture_todo_gives_a_line_number(path: Path):
    assert [t for t in _todos(path.read_text()) if LINE_NUMBER.search(t)] == []


@pytest.mark.parametrize(
    "code, expected",
    [
        (
            HELPER_USED_OUTSIDE,
            "helper `augment` with random operators is also used outside this pipeline, "
            "in `main()`",
        ),
        (ITERATOR_IN_ANOTHER_SCOPE, "`it` is used in another scope, in `evaluate()`"),
        (UNSUPPORTED_AT_CALL, "enable_checkpointing (at `self.p(...)`): checkpointing"),
    ],
    ids=["helper", "iterator-scope", "call-argument"],
)
def test_todo_names_the_code_it_is_about(code: str, expected: str):
    todos = _todos(migrate_source(code).code)
    assert any(expected in t for t in todos), todos
    assert [t for t in todos if LINE_NUMBER.search(t)] == []


NAMED_OUTPUTS = """\
from nvidia.dali import fn, pipeline_def


@pipeline_def(batch_size=2, num_threads=1, device_id=None)
def resized(root):
    j, l = fn.readers.file(file_root=root)
    return fn.resize(fn.decoders.image(j), size=[8, 8]), l


@pipeline_def(batch_size=2, num_threads=1, device_id=None)
def decoded(root):
    j, l = fn.readers.file(file_root=root)
    images = fn.decoders.image(j)
    return images, l


a = resized("/d")
b = decoded("/d")
"""


def test_generated_docstrings_name_the_outputs_not_intermediates():
    """Issue 17 item 13: "Yields (j, l) batches" was written for a function yielding resized
    images (decoded from ``j``); such an output is "output", a named one keeps its name."""
    docs = [
        line.strip() for line in migrate_source(NAMED_OUTPUTS).code.splitlines() if '"""' in line
    ]
    assert docs[0].startswith('"""Yields (output, l) batches'), docs
    assert docs[1].startswith('"""Yields (images, l) batches'), docs


def test_set_num_threads_is_written_once_per_scope():
    """Issue 17 item 13: two pipelines with num_threads=1 in one module, one call."""
    assert migrate_source(NAMED_OUTPUTS).code.count("ndd.set_num_threads(1)") == 1
