"""A pipeline is migrated whole or refused with a TODO, never half: code that uses a pipeline
inside the code that defines one, odd placements of ``build()``/``run()`` (found by mutating the
fixtures) and one-line method bodies either migrate to valid code or are refused, and no fix is
dropped as "would not parse"."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from test_property import half_converted

import dali_migrate.transforms._backend.recognise as recognise
import dali_migrate.transforms.pipeline_def as pipeline_def
from dali_migrate import migrate_source
from dali_migrate.fixes import TODO_PREFIX, parses

ROOT = Path(__file__).resolve().parent.parent

#: the pipeline object used inside the function that defines it (issue's reproducer)
OWN_USE = """\
from nvidia.dali import pipeline_def, fn


@pipeline_def(batch_size=2, num_threads=1, device_id=None)
def p(data):
    jpegs, labels = fn.readers.file(file_root=data)
    images = fn.decoders.image(jpegs)
    while False:
        pipe.build()
    return images, labels


pipe = p("/data")
"""

WITH_BLOCK = """\
import nvidia.dali.fn as fn
from nvidia.dali import Pipeline, types


def show(data_dir):
    pipe = Pipeline(batch_size=32, num_threads=4, device_id=0, seed=7)
    with pipe:
        jpegs, labels = fn.readers.file(file_root=data_dir, random_shuffle=True)
        images = fn.decoders.image(jpegs, device="mixed", output_type=types.RGB)
        {graph}
        pipe.set_outputs(images, labels)
    pipe.build()
    for _ in range(3):
        images, labels = pipe.run()
        print(images.as_cpu().at(0).shape, labels.as_array())
"""

CLASS = """\
from nvidia.dali import Pipeline, ops


class TrainPipe(Pipeline):
    def __init__(self, batch_size, num_threads, device_id, data_dir):
        super().__init__(batch_size, num_threads, device_id, seed=12)
        self.input = ops.readers.File(file_root=data_dir, name="Reader")
        self.decode = ops.decoders.Image(device="mixed")

    def define_graph(self):
        jpegs, labels = self.input()
        images = self.decode(jpegs)
        {graph}
        return images, labels


pipe = TrainPipe(4, 2, 0, "/data")
pipe.build()
images, labels = pipe.run()
"""

#: the shapes that made DM201/DM202 write a fix that did not parse (dropped as an internal error)
ODD_PLACES = {
    "build": "pipe.build()",
    "if-build": "if flag:\n            pipe.build()",
    "one-line-if": "if flag: pipe.build()",
    "joined": "flag = 1; pipe.build()",
    "try-run": "try:\n            pipe.run()\n        except Exception:\n            pass",
    "while-false": "while False:\n            pipe.build()",
    "stored": "other = pipe",
}


def _refused(code: str, rule: str) -> str:
    result = migrate_source(code)
    errors = [d.message for d in result.diagnostics if d.severity == "error"]
    assert errors == [], errors
    assert parses(result.code) and half_converted(result.code) == []
    assert f"{TODO_PREFIX} {rule}: pipeline not migrated" in result.code, result.code
    assert migrate_source(result.code).code == result.code
    return result.code


def test_the_pipeline_used_inside_its_own_definition_is_refused_not_half_converted():
    out = _refused(OWN_USE, "DM200")
    # the whole definition stays as it was, with one TODO that names the use
    assert out == OWN_USE.replace(
        "@pipeline_def",
        f"{TODO_PREFIX} DM200: pipeline not migrated: `pipe.build()` builds or runs a pipeline "
        "inside the code that defines one\n@pipeline_def",
    )


def test_a_use_inside_the_definition_that_is_not_a_call_is_refused_too():
    code = OWN_USE.replace("    while False:\n        pipe.build()\n", "    print(pipe)\n")
    out = _refused(code, "DM200")
    assert "`pipe` uses the pipeline inside the code that defines it" in out


def test_the_factory_called_inside_its_own_definition_is_refused():
    code = OWN_USE.replace("    while False:\n        pipe.build()\n", "    other = p\n")
    out = _refused(code, "DM200")
    assert "`p` is used inside its own definition" in out


def test_overlapping_edits_refuse_the_pipeline(monkeypatch):
    """The safety net under the checks above: a use site inside the code the fix replaces whole
    (which once left the old body after the generator) refuses the pipeline."""
    monkeypatch.setattr(pipeline_def, "own_uses", lambda *args: [])
    monkeypatch.setattr(recognise, "_builds_or_runs", lambda *args: False)
    code = OWN_USE.replace("    while False:\n        pipe.build()\n", "    print(pipe.run())\n")
    out = _refused(code, "DM200")
    assert "lies inside code the migration replaces whole" in out


@pytest.mark.parametrize("shape", sorted(ODD_PLACES))
def test_with_block_using_the_pipeline_is_refused(shape):
    _refused(WITH_BLOCK.replace("{graph}", ODD_PLACES[shape]), "DM201")


@pytest.mark.parametrize("shape", sorted(ODD_PLACES))
def test_define_graph_using_the_pipeline_is_refused(shape):
    _refused(CLASS.replace("{graph}", ODD_PLACES[shape]), "DM202")


def test_one_line_define_graph_migrates():
    """``def define_graph(self): a; b; return c`` once crashed DM202 (its one-line body was put
    in an indented block as it was)."""
    code = CLASS.replace(
        "    def define_graph(self):\n        jpegs, labels = self.input()\n"
        "        images = self.decode(jpegs)\n        {graph}\n        return images, labels\n",
        "    def define_graph(self): jpegs, labels = self.input(); images = self.decode(jpegs); "
        "return images, labels\n",
    )
    result = migrate_source(code)
    assert result.changed and [d for d in result.diagnostics if d.severity == "error"] == []
    tree = ast.parse(result.code)
    (gen,) = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert gen.name == "TrainPipe"
    assert "images = ndd.decoders.image(jpegs" in result.code
    assert half_converted(result.code) == [] and TODO_PREFIX not in result.code
    assert migrate_source(result.code).code == result.code


def test_one_line_init_migrates():
    code = CLASS.replace("{graph}", "pass").replace(
        "    def __init__(self, batch_size, num_threads, device_id, data_dir):\n"
        "        super().__init__(batch_size, num_threads, device_id, seed=12)\n"
        '        self.input = ops.readers.File(file_root=data_dir, name="Reader")\n'
        '        self.decode = ops.decoders.Image(device="mixed")\n',
        "    def __init__(self, batch_size, num_threads, device_id, data_dir): "
        "super().__init__(batch_size, num_threads, device_id, seed=12); "
        'self.input = ops.readers.File(file_root=data_dir); self.decode = ops.decoders.Image()\n',
    )
    result = migrate_source(code)
    assert result.changed and [d for d in result.diagnostics if d.severity == "error"] == []
    assert "reader = ndd.readers.File(file_root=data_dir)" in result.code
    assert migrate_source(result.code).code == result.code


HIERARCHY = (ROOT / "fixtures" / "DM202" / "hierarchy.in.py").read_text()
BASE_INIT = "    def __init__(self, batch_size, num_threads, device_id, root,"
TRAIN_INIT = "    def __init__(self, root, crop, **kwargs):\n"


@pytest.mark.parametrize(
    "where, text",
    [
        # one-line `if` in a base's __init__: its suite was put in a block as it was (a crash)
        ("base-init", "        if flag: val.build()\n"),
        # in the body of the base class, which the family's fix deletes (would not parse)
        ("base-body", "    val.build()\n"),
        # in a sibling's __init__: refused there, removed by the other's fix (not a fixed point)
        ("sibling-init", "        val.build()\n"),
    ],
)
def test_a_class_family_using_its_pipeline_is_refused(where, text):
    if where == "base-init":
        head, _, rest = HIERARCHY.partition(BASE_INIT)
        line_end = rest.index("\n") + 1
        code = head + BASE_INIT + rest[:line_end] + text + rest[line_end:]
    elif where == "base-body":
        header = "class CommonPipe(Pipeline):\n"
        code = HIERARCHY.replace(header, header + text)
    else:
        code = HIERARCHY.replace(TRAIN_INIT, TRAIN_INIT + text)
    assert code != HIERARCHY
    _refused(code, "DM202")


def test_one_line_if_in_init_stays_one_line():
    code = CLASS.replace("{graph}", "pass").replace(
        "seed=12)\n", "seed=12)\n        if data_dir: x = 1\n", 1
    )
    result = migrate_source(code)
    assert "\n    if data_dir: x = 1\n    reader = ndd.readers.File(" in result.code, result.code
    assert migrate_source(result.code).code == result.code


def test_one_line_iter_setup_migrates_as_its_indented_form():
    """``def iter_setup(self): self.feed_input(...)`` was refused ("self.feed_input is not set in
    __init__"): its one-line suite went into the loop as it was, its feed not rewritten."""
    indented = (ROOT / "fixtures" / "DM202" / "iter_setup.in.py").read_text()
    head = "    def iter_setup(self):\n        self.feed_input("
    assert head in indented
    one_line = indented.replace(head, "    def iter_setup(self): self.feed_input(")
    result = migrate_source(one_line)
    assert "feed_input" not in result.code and TODO_PREFIX in result.code  # the run()'s TODO only
    assert result.code == migrate_source(indented).code
