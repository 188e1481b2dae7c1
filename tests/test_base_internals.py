"""What a DALI-iterator subclass reads of its base (transforms/_backend/base_internals.py): the
``__iter__`` that rewinds an ended epoch is recognised only in its exact shapes, since the
migration drops it."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from dali_migrate.transforms._backend.base_internals import base_uses, rewinding_iter


def _cls(body: str) -> cst.ClassDef:
    src = "class It(DALIGenericIterator):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    return cst.ensure_type(cst.parse_module(src).body[0], cst.ClassDef)


@pytest.mark.parametrize(
    "test",
    [
        "self._counter >= self._size",
        "self._counter >= self._size or self._size < 0",
        "self._size < 0 or self._counter >= self._size",
    ],
)
def test_rewinding_iter_shapes(test: str) -> None:
    cls = _cls(f"def __iter__(self):\n    if {test}:\n        self.reset()\n    return self\n")
    assert rewinding_iter(cls) is not None


@pytest.mark.parametrize(
    "body",
    [
        # mid-epoch only: DALI warns and ignores it, but this is not the idiom
        "if self._counter < self._size:\n    self.reset()\nreturn self\n",
        # no epoch test at all: resets at every pass
        "if self._size < 0:\n    self.reset()\nreturn self\n",
        # does more than rewind
        "if self._counter >= self._size:\n    self.reset()\n    self.epoch += 1\nreturn self\n",
        "if self._counter >= self._size:\n    self.reset()\nreturn iter(self.batches)\n",
        "if self._counter >= self._size:\n    self.reset()\nelse:\n    log()\nreturn self\n",
    ],
)
def test_other_iters_are_not_the_idiom(body: str) -> None:
    cls = _cls("def __iter__(self):\n" + textwrap.indent(body, "    "))
    assert rewinding_iter(cls) is None


def test_base_uses_names_reads_not_own_methods() -> None:
    cls = _cls(
        """
        def reset(self):
            self.pos = 0

        def __next__(self):
            self.reset()
            return super().__next__()[0][self.output_map[0]], self._counter
        """
    )
    said = base_uses(cls)
    assert [s.split(" (")[0] for s in said] == ["self._counter", "self.output_map"]


def test_base_uses_says_what_the_class_sets_too() -> None:
    cls = _cls(
        "def __init__(self, pipe, size):\n    super().__init__(pipe)\n    self._size = size\n"
    )
    (said,) = base_uses(cls)
    assert said.startswith("self._size (") and "whichever was set last" in said
