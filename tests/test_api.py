"""Tests of the library API: migrate_source and apply_fixes (pure functions over source text)."""

from __future__ import annotations

import pytest
from samples import PIPELINE

import dali_migrate
from dali_migrate import (
    Diagnostic,
    Fix,
    MigrateError,
    MissingDependencyError,
    Result,
    SourceParseError,
    UnknownFixError,
    apply_fixes,
    migrate_source,
)

HELPER = '''\
from nvidia.dali import fn


def decode(jpegs):
    return fn.decoders.image(jpegs, device="mixed")


def flip(images):
    return fn.flip(images, horizontal=1)
'''

REFUSED = '''\
from nvidia.dali import pipeline_def, fn


@pipeline_def(batch_size=4, num_threads=2, device_id=None)
def two(a_dir, **options):
    a, la = fn.readers.file(file_root=a_dir, **options)
    return a, la


pipe = two("/a")
pipe.build()
consume(pipe)
'''

#: a pipeline that migrates, handed to code the tool cannot see into
FOLLOW_UP = REFUSED.replace(", **options", "")

TODO_DM200 = "# TODO(dali-migrate): DM200:"

UNRELATED = '''

def unrelated(x, y=3):
    """Nothing to do with DALI."""
    return [x * i for i in range(y)]


class Config:
    size = 32

'''


def _ids(result: Result) -> list[str]:
    return [f.id for f in result.fixes]


def _non_import_ids(result: Result) -> list[str]:
    return [f.id for f in result.fixes if f.rule != "DM100"]


# -- migrate_source ---------------------------------------------------------------------------------


def test_result_shape():
    r = migrate_source(PIPELINE)
    assert isinstance(r, Result)
    assert isinstance(r.code, str)
    assert r.changed is True
    assert r.code != PIPELINE
    assert r.source == PIPELINE
    assert all(isinstance(f, Fix) for f in r.fixes)
    assert all(isinstance(d, Diagnostic) for d in r.diagnostics)
    assert r.diagnostics == []
    assert {f.rule for f in r.fixes} == {"DM100", "DM200"}
    assert set(r.applied) == set(_ids(r))
    assert len(set(_ids(r))) == len(r.fixes)


def test_migrated_code_content():
    code = migrate_source(PIPELINE).code
    assert "import nvidia.dali.experimental.dynamic as ndd" in code
    assert "reader = ndd.readers.File(file_root=data_dir)" in code
    assert "reader.next_epoch(batch_size=batch_size, capture=True)" in code
    assert "ndd.decoders.image(jpegs)" in code
    assert "ndd.resize(images, resize_x=32, resize_y=32)" in code
    assert "ndd.set_num_threads(2)" in code
    assert "next(pipe)" in code
    for gone in (
        "@pipeline_def",
        "pipe.build()",
        "pipe.run()",
        "fn.readers",
        "from nvidia.dali import",
    ):
        assert gone not in code
    compile(code, "<migrated>", "exec")


def test_fix_fields():
    r = migrate_source(PIPELINE)
    dm200 = next(f for f in r.fixes if f.rule == "DM200")
    imports = next(f for f in r.fixes if f.rule == "DM100")
    assert dm200.safety == "safe"
    assert dm200.id.startswith("DM200:simple:")
    assert dm200.edits
    assert dm200.span.start_line <= 3 <= dm200.span.end_line
    assert dm200.id in imports.depends_on
    d = dm200.to_dict()
    assert {"id", "rule", "message", "safety", "span", "depends_on"} <= set(d)
    assert r.to_dict()["changed"] is True


def test_invalid_python_raises_source_parse_error():
    with pytest.raises(SourceParseError) as info:
        migrate_source("import nvidia.dali\n\ndef broken(:\n    pass\n", path="bad.py")
    assert isinstance(info.value, MigrateError)
    msg = str(info.value)
    assert msg.startswith("bad.py:")
    assert "\n" not in msg


def test_invalid_python_without_dali_still_raises():
    with pytest.raises(SourceParseError):
        migrate_source("x = = 1\n")


@pytest.mark.parametrize(
    "code",
    [
        "",
        "\n",
        "import os\n\nprint(os.getcwd())\n",
        "def f(x):\n    return x + 1\n",
        "# a comment mentioning fn.resize and pipe.run()\n",
        "import numpy as np\nfn = np.fft\nprint(fn.fft([1, 2]))\n",
    ],
)
def test_no_dali_is_unchanged(code):
    r = migrate_source(code)
    assert r.changed is False
    assert r.code == code
    assert r.fixes == []
    assert r.applied == []
    assert r.diagnostics == []
    assert apply_fixes(code, []) == code


def test_select_and_ignore_in_the_api():
    # DM101 and DM102 on one call go together: either alone would leave code neither mode runs
    only_device = migrate_source(HELPER, select=["DM102"])
    assert 'fn.decoders.image(jpegs, device="mixed")' in only_device.code
    assert not [f for f in only_device.fixes if f.id in only_device.applied and f.rule != "DM100"]
    assert [d.rule for d in only_device.diagnostics if d.severity == "todo"] == ["DM102"]

    no_device = migrate_source(HELPER, ignore=["DM102"])
    assert 'fn.decoders.image(jpegs, device="mixed")' in no_device.code
    assert "ndd.flip(images, horizontal=1)" in no_device.code  # the other call migrates
    assert [d.rule for d in no_device.diagnostics if d.severity == "todo"] == ["DM101"]


def test_migrate_is_deterministic():
    a, b = migrate_source(PIPELINE), migrate_source(PIPELINE)
    assert a.code == b.code
    assert _ids(a) == _ids(b)


# -- apply_fixes ------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [PIPELINE, HELPER, REFUSED])
def test_apply_no_fixes_returns_code_unchanged(code):
    assert apply_fixes(code, [], todo_markers=False) == code
    assert apply_fixes(code, (), todo_markers=False) == code
    assert apply_fixes(code, iter([]), todo_markers=False) == code


def test_apply_no_fixes_still_marks_what_cannot_be_migrated():
    out = apply_fixes(REFUSED, [])
    assert out.count("# TODO(dali-migrate): DM200:") == 1
    assert (
        out.replace(next(x for x in out.splitlines(True) if "TODO(dali-migrate)" in x), "")
        == REFUSED
    )


@pytest.mark.parametrize("code", [PIPELINE, HELPER])
def test_apply_all_ids_equals_migrate(code):
    r = migrate_source(code)
    assert r.fixes
    assert apply_fixes(code, _ids(r)) == r.code
    assert apply_fixes(code, r.fixes) == r.code  # Fix objects work as well as ids
    # the import fix is derived: leaving its id out gives the same result
    assert apply_fixes(code, _non_import_ids(r)) == r.code


def test_apply_subset_recomputes_imports():
    r = migrate_source(HELPER)
    decode = [f.id for f in r.fixes if f.rule == "DM101" and "decode" in f.id]
    flip = [f.id for f in r.fixes if f.rule == "DM101" and "flip" in f.id]
    assert decode and flip
    out = apply_fixes(HELPER, flip)
    assert "import nvidia.dali.experimental.dynamic as ndd" in out
    assert 'fn.decoders.image(jpegs, device="mixed")' in out
    assert "from nvidia.dali import fn" in out  # still used by decode

    out = apply_fixes(HELPER, decode + flip)
    assert 'ndd.decoders.image(jpegs, device="gpu")' in out  # the device came with the decoder
    assert "ndd.flip(images, horizontal=1)" in out
    assert "from nvidia.dali import fn" not in out  # fn is no longer used


@pytest.mark.parametrize("bad", ["DM101:nope:0123456789", "nonsense", "DM200:simple:0000000000"])
def test_unknown_fix_id(bad):
    with pytest.raises(UnknownFixError) as info:
        apply_fixes(PIPELINE, [bad])
    assert isinstance(info.value, MigrateError)
    assert isinstance(info.value, KeyError)
    assert bad in str(info.value)


def test_unknown_fix_id_among_good_ones():
    r = migrate_source(PIPELINE)
    with pytest.raises(UnknownFixError):
        apply_fixes(PIPELINE, _ids(r) + ["DM103:x:y"])


def test_fix_from_another_source_is_unknown():
    other = migrate_source(HELPER).fixes
    with pytest.raises(UnknownFixError):
        apply_fixes(PIPELINE, [f for f in other if f.rule != "DM100"])


def test_missing_dependency_is_refused():
    r = migrate_source(PIPELINE)
    dependent = [
        f
        for f in r.fixes
        if f.rule != "DM100" and any(not d.startswith("DM100:") for d in f.depends_on)
    ]
    for f in dependent:
        with pytest.raises(MissingDependencyError):
            apply_fixes(PIPELINE, [f.id])
    assert issubclass(MissingDependencyError, MigrateError)


def test_apply_fixes_invalid_python():
    with pytest.raises(SourceParseError):
        apply_fixes("def broken(:\n", [])


# -- stable ids -------------------------------------------------------------------------------------


def _with_unrelated_code(code: str) -> str:
    """Add a function and a class between the imports and the first definition."""
    head, sep, tail = code.partition("\n\n")
    assert sep
    return head + "\n" + UNRELATED + tail


@pytest.mark.parametrize("code", [PIPELINE, HELPER])
def test_fix_ids_stable_when_unrelated_code_is_added(code):
    before = migrate_source(code)
    edited = _with_unrelated_code(code)
    assert "def unrelated" in edited
    after = migrate_source(edited)
    assert _non_import_ids(before) == _non_import_ids(after)
    # and the old ids still select the same fixes in the edited file
    assert apply_fixes(edited, _non_import_ids(before)) == after.code


@pytest.mark.parametrize("code", [PIPELINE, HELPER])
def test_fix_ids_stable_when_a_docstring_is_added_at_the_very_top(code):
    before = migrate_source(code)
    after = migrate_source('"""A module docstring."""\n' + code)
    assert _non_import_ids(before) == _non_import_ids(after)


@pytest.mark.parametrize("code", [PIPELINE, HELPER])
def test_import_fix_id_stable_when_unrelated_code_is_added(code):
    before = migrate_source(code)
    after = migrate_source(_with_unrelated_code(code))
    assert _ids(before) == _ids(after)


def test_identical_calls_get_distinct_ids():
    code = (
        "from nvidia.dali import fn\n\n\n"
        "def two(images):\n"
        "    a = fn.flip(images)\n"
        "    b = fn.flip(images)\n"
        "    return a, b\n"
    )
    r = migrate_source(code)
    ids = _ids(r)
    assert len(ids) == len(set(ids))
    flips = [f for f in r.fixes if f.rule == "DM101"]
    assert len(flips) == 2
    # each one alone can be applied
    first = apply_fixes(code, [flips[0].id])
    assert first.count("ndd.flip(images)") == 1


# -- fixed point ------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [PIPELINE, HELPER])
def test_migrating_the_output_again_changes_nothing(code):
    once = migrate_source(code)
    twice = migrate_source(once.code)
    assert twice.changed is False
    assert twice.code == once.code
    assert twice.applied == []


def test_fixed_point_with_crlf_and_unrelated_code():
    code = _with_unrelated_code(PIPELINE).replace("\n", "\r\n")
    once = migrate_source(code)
    assert once.changed
    assert "\n" not in once.code.replace("\r\n", "")  # newline style kept
    assert migrate_source(once.code).changed is False


# -- pipelines that cannot be migrated --------------------------------------------------------------


def test_unmigratable_pipeline_gets_one_todo_above_the_decorator():
    r = migrate_source(REFUSED)
    assert r.changed
    lines = r.code.splitlines()
    markers = [i for i, ln in enumerate(lines) if ln.startswith(TODO_DM200)]
    assert len(markers) == 1, r.code
    (i,) = markers
    assert lines[i + 1].startswith("@pipeline_def(")
    assert "takes **kwargs" in lines[i]
    # nothing else changed: the marker line is the whole difference
    assert "\n".join(lines[:i] + lines[i + 1 :]) + "\n" == REFUSED
    todo = [d for d in r.diagnostics if d.rule == "DM200"]
    assert len(todo) == 1 and todo[0].severity == "todo"
    assert not [f for f in r.fixes if f.id in r.applied]  # no fix applied, just the marker


def test_unmigratable_pipeline_todo_is_not_added_twice():
    once = migrate_source(REFUSED)
    twice = migrate_source(once.code)
    assert twice.code == once.code
    assert twice.changed is False
    assert twice.code.count(TODO_DM200) == 1
    # still diagnosed (the pipeline is still there), only the marker is not repeated
    assert any(d.rule == "DM200" for d in twice.diagnostics)


def test_unmigratable_pipeline_keeps_its_helpers_in_pipeline_mode():
    """The code that builds a refused pipeline's graph (its body and the functions it calls)
    keeps its fn.* calls, so the pipeline still runs, with a TODO that says whose graph it
    builds; unrelated code of the file migrates."""
    helper = 'def decode(jpegs):\n    return fn.decoders.image(jpegs, device="mixed")\n'
    unrelated = 'def flip(x):\n    return fn.flip(x, horizontal=1)\n'
    code = (
        REFUSED.replace("    return a, la", "    return decode(a), la")
        + "\n\n"
        + helper
        + "\n\n"
        + unrelated
    )
    r = migrate_source(code)
    assert 'fn.decoders.image(jpegs, device="mixed")' in r.code
    assert "return ndd.flip(x, horizontal=1)" in r.code
    assert r.code.count(TODO_DM200) == 2  # the pipeline's, and the kept helper's
    kept = r.code.index("pipeline-mode API kept for")
    assert r.code.index("def decode(jpegs):") < kept < r.code.index("fn.decoders.image(")


def test_follow_up_todo_sits_at_the_use_and_comes_with_the_fix():
    """A use the tool cannot follow keeps its code, with a TODO above it that says what the
    pipeline object is now; the TODO is written only when the pipeline's fix is."""
    r = migrate_source(FOLLOW_UP)
    lines = r.code.splitlines()
    (i,) = [k for k, ln in enumerate(lines) if ln.startswith(TODO_DM200)]
    assert lines[i + 1] == "consume(pipe)"
    assert (
        "`pipe` is passed to `consume`" in lines[i] and "generator of (a, la) batches" in lines[i]
    )
    (fix,) = [f for f in r.fixes if f.rule == "DM200"]
    assert fix.follow_ups and "consume" in fix.follow_ups[0]
    assert fix.to_dict()["follow_ups"] == list(fix.follow_ups)
    assert TODO_DM200 not in apply_fixes(FOLLOW_UP, [])  # without the fix, nothing to follow up


def test_unmigratable_pipeline_indented_todo():
    code = (
        "from nvidia.dali import pipeline_def, fn\n\n\n"
        "def factory(a_dir, b_dir):\n"
        "    @pipeline_def(batch_size=4, num_threads=2, device_id=None)\n"
        "    def two():\n"
        "        a, la = fn.readers.file(file_root=a_dir)\n"
        "        b, lb = fn.readers.file(file_root=b_dir)\n"
        "        return a, b\n\n"
        "    return two()\n"
    )
    r = migrate_source(code)
    once = r.code
    assert once.count(TODO_DM200) <= 1
    assert migrate_source(once).code == once
    compile(once, "<todo>", "exec")


def test_public_names():
    for name in dali_migrate.__all__:
        assert hasattr(dali_migrate, name), name
