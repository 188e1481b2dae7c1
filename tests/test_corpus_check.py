"""benchmarks/corpus_check.py: the scan, the categories and totals, on tiny trees of our own."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load():
    if "corpus_check" in sys.modules:
        return sys.modules["corpus_check"]
    spec = importlib.util.spec_from_file_location(
        "corpus_check", ROOT / "benchmarks" / "corpus_check.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["corpus_check"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


cc = _load()

MIGRATABLE = """\
from nvidia.dali import pipeline_def
import nvidia.dali.fn as fn


@pipeline_def(batch_size=4, num_threads=1, device_id=None)
def flip_pipe(root):
    jpegs, labels = fn.readers.file(file_root=root)
    images = fn.decoders.image(jpegs)
    return fn.flip(images, horizontal=1), labels


pipe = flip_pipe("/data")
pipe.build()
images, labels = pipe.run()
"""

# an operator DALI does not have: never migrates, whatever the tool learns
REFUSED = """\
from nvidia.dali import pipeline_def
import nvidia.dali.fn as fn


@pipeline_def(batch_size=4, num_threads=1, device_id=None)
def odd_pipe(root):
    jpegs, labels = fn.readers.file(file_root=root)
    return fn.no_such_operator(jpegs), labels


pipe = odd_pipe("/data")
pipe.build()
out = pipe.run()
"""

# DALI imported inside a function, under aliases
INNER_IMPORT = """\
def make_loader(files):
    from nvidia.dali import fn as dfn, pipeline_def as pdef

    @pdef(batch_size=2, num_threads=1, device_id=None)
    def reader():
        data, _ = dfn.readers.file(files=files)  # fn.readers.file in a comment is no use
        return data

    loader = reader()
    loader.build()
    return loader
"""

PLAIN = "def add(a, b):\n    return a + b  # 'nvidia dali' in a comment\n"


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "tree"
    root.mkdir()
    for name, text in files.items():
        (root / name).write_text(text)
    return root


def _fake_tool(monkeypatch, rewrite):
    """Replace the migration of one file by ``rewrite(name, text) -> new text`` (or raise)."""

    def migrate_one(path: str, info) -> dict:
        p = Path(path)
        new = rewrite(p.name, p.read_text())
        status = "unchanged" if new == p.read_text() else "changed"
        p.write_text(new)
        return {"status": status, "error": None, "seconds": 0.0, "diagnostics": []}

    monkeypatch.setattr(cc, "_migrate_one", migrate_one)


# -- the scan ---------------------------------------------------------------------------------


def test_uses_resolve_through_imports_inside_functions_and_aliases():
    scan = cc.scan_module(INNER_IMPORT)
    kinds = sorted(u.kind for u in scan.uses)
    # pdef, dfn.readers.file, loader.build(); not the comment, not `files`
    assert kinds == ["fn", "method", "pipeline_def"]
    assert scan.definitions == ["pipeline_def:make_loader.reader"]


def test_shadowed_names_strings_and_comments_are_not_uses():
    code = """\
import nvidia.dali.fn as fn

def other(fn):
    return fn.readers.file  # a parameter named fn

def text():
    return "fn.readers.file(file_root=x)"

def real(x):
    return fn.flip(x)
"""
    scan = cc.scan_module(code)
    assert [(u.line, u.text) for u in scan.uses] == [(10, "fn.flip")]


def test_pipelines_followed_through_attributes_lists_factories_and_wrappers():
    code = """\
import importlib
dali = importlib.import_module("nvidia.dali")

def make(i):
    p = dali.Pipeline(batch_size=1, num_threads=1, device_id=i)
    return p

class Loader:
    def __init__(self):
        self.pipe = make(0)
        self.shards = [make(i) for i in range(2)]

    def start(self):
        self.pipe.build()
        for s in self.shards:
            s.build()
        self.shards[0].run()
        return thing.epoch_size("Reader")
"""
    scan = cc.scan_module(code)
    methods = [u.text for u in scan.uses if u.kind == "method"]
    assert methods == [
        "self.pipe.build()",
        "s.build()",
        "self.shards[0].run()",
        "thing.epoch_size()",
    ]
    assert [u.text for u in scan.uses if u.kind == "Pipeline"] == ["dali.Pipeline"]
    assert scan.definitions == []  # no graph: not a definition
    assert "make" in scan.constructors


def test_definitions_of_each_kind():
    code = """\
from nvidia.dali import Pipeline, pipeline_def, fn

class Base(Pipeline):
    pass

class Train(Base):
    def define_graph(self):
        return fn.external_source(source=[[1]])

def build():
    pipe = Pipeline(batch_size=1, num_threads=1, device_id=None)
    with pipe:
        pipe.set_outputs(fn.external_source(source=[[1]]))
    return pipe

@pipeline_def
def p():
    return fn.external_source(source=[[1]])
"""
    scan = cc.scan_module(code)
    assert sorted(scan.definitions) == ["class:Train", "object:build:pipe", "pipeline_def:p"]


def test_todo_distance_and_marked_uses():
    code = """\
import nvidia.dali.fn as fn
# TODO(dali-migrate): DM1: about the next line
# TODO(dali-migrate): DM2: stacked on the same line
x = fn.flip(1)

# TODO(dali-migrate): DM3: `y.run` is far below
a = 1
b = 2
c = 3
y.run()
# TODO(dali-migrate): DM4: names nothing
d = 4

def f():
    return fn.rotate(1)
"""
    scan = cc.scan_module(code)
    found = {t.text.split(":")[0]: t.distance for t in cc.todos(code, scan)}
    assert found == {"DM1": 1, "DM2": 1, "DM3": 4, "DM4": None}  # a block counts as one line
    loose = cc.unmarked(scan.uses, cc.marker_lines(code))
    assert [u.text for u in loose] == ["fn.rotate"]


def test_a_todo_above_a_wrapped_statement_is_next_to_what_it_names():
    code = """\
import nvidia.dali.experimental.dynamic as ndd
# TODO(dali-migrate): DM200: `source_cb` ran in worker processes
large = ndd.as_batch(
    [
        source_cb(i)
        for i in range(4)
    ]
)
"""
    scan = cc.scan_module(code)
    assert [t.distance for t in cc.todos(code, scan)] == [1]


def test_a_todo_that_names_a_class_is_measured_to_that_class():
    code = """\
from nvidia.dali import Pipeline

# TODO(dali-migrate): DM202: pipeline not migrated (class Child): it defines helper
class Base(Pipeline):
    pass


class Child(Base):
    def define_graph(self):
        return self.helper()
"""
    scan = cc.scan_module(code)
    assert [t.distance for t in cc.todos(code, scan)] == [5]


def test_a_todo_above_a_pipeline_object_marks_its_graph_block():
    code = """\
from nvidia.dali import Pipeline, fn

def make():
    # TODO(dali-migrate): DM201: not migrated
    pipe = Pipeline(batch_size=1, num_threads=1, device_id=None)
    with pipe:
        pipe.set_outputs(fn.external_source(source=[[1]]))
    other = fn.flip(1)
    return pipe
"""
    scan = cc.scan_module(code)
    loose = cc.unmarked(scan.uses, cc.marker_lines(code), scan.graph_blocks)
    assert [u.text for u in loose] == ["fn.flip"]


def test_reasons_split_and_normalised():
    message = (
        "pipeline not migrated: `pipe` is passed on or stored at line 12; self.decode is not "
        "set in __init__; external_source without source= is fed by pipe.feed_input(); "
        "migrate it by hand"
    )
    parts = cc.split_reasons(message)
    assert len(parts) == 3
    assert [cc.normalize_reason(p) for p in parts] == [
        "`_` is passed on or stored at line N",
        "self.X is not set in __init__",
        "external_source without source= is fed by pipe.feed_input(); migrate it by hand",
    ]
    other = "pipeline not migrated: `train` is passed on or stored at line 7"
    assert cc.normalize_reason(cc.split_reasons(other)[0]) == cc.normalize_reason(parts[0])


# -- whole runs -------------------------------------------------------------------------------


@pytest.mark.parametrize("jobs", [1])
def test_check_with_the_real_tool(tmp_path, jobs):
    root = _tree(tmp_path, {"good.py": MIGRATABLE, "refused.py": REFUSED, "plain.py": PLAIN})
    before = {p.name: p.read_text() for p in root.iterdir()}
    report = cc.check(root, jobs=jobs, timeout=60)
    assert {p.name: p.read_text() for p in root.iterdir()} == before  # PATH is never written
    files, t = report["files"], report["totals"]
    assert files["good.py"]["category"] == "migrated"
    assert files["good.py"]["uses_left"] == 0 and files["good.py"]["definitions_migrated"] == 1
    assert files["refused.py"]["category"] == "not migrated"
    assert files["refused.py"]["uses_left"] == files["refused.py"]["uses_before"] == 5
    assert files["plain.py"]["category"] == "no pipeline code"
    assert t["files"] == 3 and t["files_with_pipeline_code"] == 2
    assert (t["definitions"], t["definitions_migrated"]) == (2, 1)
    assert (t["uses_before"], t["uses_left"]) == (11, 5)
    assert t["crashes"] == t["outputs_not_parsing"] == t["outputs_not_idempotent"] == 0
    assert t["clean_files"] == 1 and t["todos"] >= 1
    assert t["comments_lost"] == 0
    assert any(r["reason"] == "OP is not a known DALI operator" for r in report["reasons"])
    text = cc.format_report(report)
    assert "good.py: migrated" in text and "refused.py: not migrated" in text


def test_comments_lost_and_dropped_with_their_statement():
    before = "x = f()  # why f\n# about y\ny = 2\npipe.build()  # build it\n"
    after = "# why\n# f\nx = g()\ny = 2\n"
    lost, dropped = cc.comment_losses(before, after)
    assert (lost, dropped) == (["# about y"], ["# build it"])
    rec = cc.FileRecord("a.py", "migrated", "ok", comments_lost=lost)
    assert "comments lost 1" in rec.flags()
    assert cc.totals([rec])["comments_lost"] == 1
    assert cc.totals([rec])["criteria"]["comments of the input lost = 0"] == [1, False]


def test_read_only_corpus_is_measured(tmp_path):
    """A corpus kept read-only (as a shared one is) is copied writable: the tool refuses to write
    read-only files, which would count every file as not migrated."""
    root = _tree(tmp_path, {"good.py": MIGRATABLE})
    (root / "good.py").chmod(0o444)
    report = cc.check(root, jobs=1, timeout=60)
    assert report["files"]["good.py"]["category"] == "migrated"


def test_silent_crash_unparsable_and_not_idempotent(tmp_path, monkeypatch):
    root = _tree(
        tmp_path,
        {
            "inner.py": INNER_IMPORT,
            "boom.py": REFUSED,
            "broken.py": MIGRATABLE,
            "again.py": REFUSED,
        },
    )

    def rewrite(name: str, text: str) -> str:
        if name == "boom.py":
            raise RuntimeError("a bug in a rule")
        if name == "broken.py":
            return text.replace("def flip_pipe(root):", "def flip_pipe(root)")
        if name == "again.py":  # a TODO more each run, far from what it names
            return "# TODO(dali-migrate): DM9: see `pipe.run`\n" + text
        return text  # inner.py: left as it is, no TODO

    _fake_tool(monkeypatch, rewrite)
    report = cc.check(root, jobs=1, timeout=60)
    files, t = report["files"], report["totals"]
    assert files["inner.py"]["category"] == "not migrated" and files["inner.py"]["silent"]
    assert files["inner.py"]["unmarked_uses"] == 3
    assert files["boom.py"]["category"] == "crashed"
    assert "RuntimeError: a bug in a rule" in files["boom.py"]["error"]
    assert files["broken.py"]["category"] == "output does not parse"
    assert files["again.py"]["idempotent"] is False
    assert files["again.py"]["todos_far"] == 1 and files["again.py"]["category"] == "not migrated"
    assert t["silent_files"] == ["inner.py"]
    assert (t["crashes"], t["outputs_not_parsing"], t["outputs_not_idempotent"]) == (1, 1, 1)
    criteria = t["criteria"]
    assert criteria["crashes = 0"] == [1, False]
    assert criteria["files with pipeline code left and no TODO = 0"] == [1, False]


def test_a_file_that_hangs_is_counted_and_the_run_goes_on(tmp_path, monkeypatch):
    root = _tree(tmp_path, {"slow.py": REFUSED, "good.py": MIGRATABLE})

    def rewrite(name: str, text: str) -> str:
        if name == "slow.py":
            time.sleep(30)
        return text

    _fake_tool(monkeypatch, rewrite)
    report = cc.check(root, jobs=1, timeout=0.5)
    assert report["files"]["slow.py"]["status"] == "timeout"
    assert report["files"]["slow.py"]["category"] == "crashed"
    assert report["files"]["good.py"]["category"] == "not migrated"  # the fake changed nothing
    assert report["totals"]["timeouts"] == 1


def test_compare_prints_deltas_and_files_that_changed(tmp_path, monkeypatch):
    root = _tree(tmp_path, {"good.py": MIGRATABLE, "inner.py": INNER_IMPORT})
    _fake_tool(monkeypatch, lambda name, text: text)
    old = json.loads(json.dumps(cc.check(root, jobs=1, timeout=60)))

    def rewrite(name: str, text: str) -> str:
        lines = text.splitlines(keepends=True)
        if name == "inner.py" and "TODO" not in text:
            lines.insert(3, "    # TODO(dali-migrate): DM200: not migrated\n")
        return "".join(lines)

    _fake_tool(monkeypatch, rewrite)
    new = cc.check(root, jobs=1, timeout=60)
    text = cc.compare(old, new)
    assert "todos: 0 -> 1  (+1)" in text
    assert "inner.py: not migrated [SILENT, unmarked 3] -> not migrated [unmarked 1]" in text
    assert "silent files: 1 fewer ['inner.py']" in text


def test_a_module_left_over_a_class_migrated_in_another_keeps_its_uses():
    """The class another module defined became a function in the output: a module that still
    builds and runs what it makes has pipeline-mode uses left (never "migrated")."""
    pipes_in = (
        "from nvidia.dali.pipeline import Pipeline\n\n\n"
        "class P(Pipeline):\n"
        "    def define_graph(self):\n"
        "        return []\n"
    )
    pipes_out = "def P(batch_size):\n    while True:\n        yield ()\n"
    user = "from pipes import P\n\n\ndef f():\n    p = P(2)\n    p.build()\n    return p.run()\n"
    before = cc.scan_tree({"pipes.py": pipes_in, "user.py": user})
    after = cc.scan_tree({"pipes.py": pipes_out, "user.py": user}, before)
    scan = after["user.py"]
    assert isinstance(scan, cc.ModuleScan)
    assert sorted(u.text for u in scan.uses) == ["p.build()", "p.run()"]
