"""The library API as a refactoring bot uses it: migrate a tree, inspect the fixes by stable
id, apply a chosen subset, and get exceptions (never prints, never exits) when the choice is bad.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dependent_fixes import CHAINED, chained_rule  # noqa: F401 (a fixture)
from samples import PIPELINE

import dali_migrate
from dali_migrate import (
    FileResult,
    Fix,
    MigrateError,
    MissingDependencyError,
    Span,
    UnknownFixError,
    apply_fixes,
    migrate_paths,
    migrate_source,
)
from dali_migrate.fixes import splice

HELPER = '''\
from nvidia.dali import fn


def decode(jpegs):
    return fn.decoders.image(jpegs, device="mixed")


def unrelated(values):
    """Nothing to do with DALI."""
    return sorted(values)


def flip(images):
    return fn.flip(images, horizontal=1)
'''

PLAIN = "import os\n\nprint(os.getcwd())\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def ids(code: str) -> list[str]:
    return [f.id for f in migrate_source(code).fixes]


# -- migrate_paths ----------------------------------------------------------------------------------


def _project(root: Path) -> dict[str, str]:
    files = {
        "train.py": PIPELINE,
        "pkg/helper.py": HELPER,
        "pkg/plain.py": PLAIN,
        "pkg/broken.py": "import nvidia.dali\ndef broken(:\n",
    }
    for name, text in files.items():
        write(root / name, text)
    return files


def test_migrate_paths_reports_every_file_and_writes_nothing(tmp_path):
    files = _project(tmp_path)

    results = list(migrate_paths([tmp_path], jobs=1))

    assert all(isinstance(r, FileResult) for r in results)
    by_name = {Path(r.path).relative_to(tmp_path).as_posix(): r for r in results}
    assert set(by_name) == set(files)
    assert by_name["pkg/plain.py"].status == "skipped"
    broken = by_name["pkg/broken.py"]
    assert broken.status == "error" and broken.result is None
    assert broken.error.startswith(f"{broken.path}:") and ": not valid Python: " in broken.error
    for name in ("train.py", "pkg/helper.py"):
        r = by_name[name]
        assert r.status == "changed"
        assert r.written is False
        # the same result the source-level API gives for the file
        expected = migrate_source(files[name], path=r.path)
        assert r.result.code == expected.code
        assert [f.id for f in r.result.fixes] == [f.id for f in expected.fixes]
        assert r.diff.startswith(f"--- a/{r.path}\n")
    for name, text in files.items():
        assert (tmp_path / name).read_text() == text  # nothing written


def test_migrate_paths_write_true_writes(tmp_path):
    _project(tmp_path)
    results = {Path(r.path).name: r for r in migrate_paths(tmp_path, write=True, jobs=1)}
    assert results["train.py"].written is True
    assert (tmp_path / "train.py").read_text() == migrate_source(PIPELINE).code
    assert (tmp_path / "pkg" / "plain.py").read_text() == PLAIN


def test_migrate_paths_in_parallel_gives_the_same_results(tmp_path):
    for i in range(10):
        write(tmp_path / f"m{i:02d}.py", PIPELINE.replace("simple", f"pipe_{i}"))
    write(tmp_path / "helper.py", HELPER)
    assert dali_migrate.engine.PARALLEL_THRESHOLD <= 11

    one = list(migrate_paths(tmp_path, jobs=1))
    two = list(migrate_paths(tmp_path, jobs=2))

    assert [r.path for r in one] == [r.path for r in two]
    assert [r.result.code for r in one] == [r.result.code for r in two]
    assert [[f.id for f in r.result.fixes] for r in one] == [
        [f.id for f in r.result.fixes] for r in two
    ]


def test_migrate_paths_select_ignore_unsafe_exclude(tmp_path):
    _project(tmp_path)
    only_device = {
        Path(r.path).name: r
        for r in migrate_paths(tmp_path, select=["DM102"], exclude=["train.py"], jobs=1)
    }
    assert "train.py" not in only_device
    helper = only_device["helper.py"].result
    # DM102 alone does not touch a decoder call (DM101 and DM102 go together): a TODO says so
    assert not [f for f in helper.fixes if f.id in helper.applied and f.rule != "DM100"]
    assert 'fn.decoders.image(jpegs, device="mixed")' in helper.code
    assert any(d.rule == "DM102" and d.severity == "todo" for d in helper.diagnostics)


def test_migrate_paths_missing_path_raises_at_the_call(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        migrate_paths([tmp_path / "nope"])  # not even iterated
    assert "nope" in str(info.value)


def test_the_api_never_prints(tmp_path, capsys):
    _project(tmp_path)
    for r in migrate_paths(tmp_path, jobs=1):
        if r.result is not None:
            apply_fixes(
                r.result.source, [f.id for f in r.result.fixes][:1], path=r.path, project=r.project
            )
    with pytest.raises(MigrateError):
        apply_fixes(PIPELINE, ["DM999:nothing:0"])
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


# -- the fields of a fix ------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [PIPELINE, HELPER])
def test_fix_fields_describe_the_change(code):
    result = migrate_source(code)
    assert result.fixes
    for fix in result.fixes:
        assert isinstance(fix, Fix)
        assert fix.id.startswith(fix.rule + ":")
        assert fix.safety in ("safe", "unsafe")
        assert fix.message and "\n" not in fix.message
        assert isinstance(fix.depends_on, tuple)
        assert isinstance(fix.span, Span)
        # span and replacement say everything: the text in the span becomes the replacement
        lines = code.splitlines(keepends=True)
        start = sum(map(len, lines[: fix.span.start_line - 1])) + fix.span.start_col
        end = sum(map(len, lines[: fix.span.end_line - 1])) + fix.span.end_col
        assert code[start:end] == fix.original
        assert code[:start] + fix.replacement + code[end:] == splice(code, fix.edits)


def test_a_fix_of_several_edits_has_its_whole_replacement():
    dm200 = next(f for f in migrate_source(PIPELINE).fixes if f.rule == "DM200")
    assert len(dm200.edits) > 1
    assert "reader = ndd.readers.File(file_root=data_dir)" in dm200.replacement
    assert "next(pipe)" in dm200.replacement
    assert dm200.to_dict()["replacement"] == dm200.replacement


# -- stable ids ---------------------------------------------------------------------------------------


def test_ids_do_not_change_when_an_unrelated_function_is_edited():
    before = ids(HELPER)
    edited = HELPER.replace(
        "    return sorted(values)\n",
        "    values = [v for v in values if v]\n    return sorted(values, reverse=True)\n",
    )
    assert edited != HELPER

    after = migrate_source(edited)

    assert [f.id for f in after.fixes] == before
    # and the ids chosen on the old text select the same fixes in the new one
    chosen = [i for i in before if i.startswith("DM101:flip:")]
    assert apply_fixes(edited, chosen) == edited.replace("fn.flip(", "ndd.flip(").replace(
        "from nvidia.dali import fn\n",
        "from nvidia.dali import fn\nimport nvidia.dali.experimental.dynamic as ndd\n",
    )


def test_editing_the_code_a_fix_replaces_changes_that_id_only():
    before = ids(HELPER)
    edited = HELPER.replace("fn.flip(images, horizontal=1)", "fn.rotate(images, angle=90)")
    after = ids(edited)
    gone = [i for i in before if i not in after]
    assert len(gone) == 1 and gone[0].startswith("DM101:flip:")
    assert [i for i in before if ":decode:" in i] == [i for i in after if ":decode:" in i]


def test_ids_do_not_change_when_lines_move():
    moved = "\n\n# a new comment block\n# pushing everything down\n" + HELPER
    assert ids(moved) == ids(HELPER)


# -- apply_fixes: subsets and their dependencies ----------------------------------------------------------


def _chained(code: str):
    fixes = migrate_source(code).fixes
    definition = next(f for f in fixes if f.rule == "DM990" and not f.depends_on)
    calls = [f for f in fixes if f.rule == "DM990" and f.depends_on]
    return definition, calls


def test_a_subset_missing_a_dependency_is_refused(chained_rule):
    definition, calls = _chained(CHAINED)
    assert len(calls) == 2 and all(c.depends_on == (definition.id,) for c in calls)

    for chosen in ([calls[0]], [calls[0].id, calls[1].id], calls):
        with pytest.raises(MissingDependencyError) as info:
            apply_fixes(CHAINED, chosen)
        message = str(info.value)
        assert definition.id in message and "\n" not in message
        assert isinstance(info.value, MigrateError)


def test_a_subset_with_its_dependencies_applies(chained_rule):
    definition, calls = _chained(CHAINED)
    out = apply_fixes(CHAINED, [calls[1], definition])
    assert out == CHAINED.replace("def old_reader", "def new_reader").replace(
        'old_reader("/data/val")', 'new_reader("/data/val")'
    )
    # a dependency alone is a valid subset
    assert apply_fixes(CHAINED, [definition.id]) == CHAINED.replace(
        "def old_reader", "def new_reader"
    )
    assert apply_fixes(CHAINED, [definition, *calls]) == CHAINED.replace("old_reader", "new_reader")


def test_unknown_id_in_a_subset(chained_rule):
    definition, _ = _chained(CHAINED)
    with pytest.raises(UnknownFixError) as info:
        apply_fixes(CHAINED, [definition.id, "DM990:<module>:0000000000"])
    assert "DM990:<module>:0000000000" in str(info.value)


def test_apply_fixes_takes_the_select_the_fixes_were_found_with():
    found = migrate_source(HELPER, select=["DM102"])
    device = [f.id for f in found.fixes if f.rule == "DM102"]
    assert apply_fixes(HELPER, device, select=["DM102"]) == found.code


def test_public_api_names():
    for name in ("migrate_source", "apply_fixes", "migrate_paths", "FileResult", "MigrateError"):
        assert name in dali_migrate.__all__
        assert getattr(dali_migrate, name).__doc__


def test_readme_bot_example_runs(tmp_path, monkeypatch, capsys):
    """The README's bot example, run as written against a small tree: it changes the pipeline
    file too, and says what it selected."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    start = readme.index("<!-- bot example -->")
    code = readme[
        readme.index("```python\n", start) + len("```python\n") : readme.index(
            "```", readme.index("```python\n", start) + 10
        )
    ]
    assert len(code.strip().splitlines()) <= 12
    write(tmp_path / "src" / "helper.py", HELPER)
    write(tmp_path / "src" / "train.py", PIPELINE)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    # the bot's policy in the example: every safe fix, i.e. what migrate_source applies
    assert (tmp_path / "src" / "helper.py").read_text() == migrate_source(HELPER).code
    assert (tmp_path / "src" / "train.py").read_text() == migrate_source(PIPELINE).code != PIPELINE
    printed = capsys.readouterr().out.splitlines()
    assert [line.split(" <- ")[0] for line in printed] == ["src/helper.py", "src/train.py"]
    assert "DM200 " in printed[1] and "DM100 " in printed[1]


def test_the_import_fix_alone_is_refused_not_a_silent_no_op():
    """Chosen without the fixes it updates the imports for, the DM100 fix changed nothing and
    said nothing (a bot selecting DM1* on a pipeline file)."""
    found = migrate_source(PIPELINE).fixes
    imports = next(f for f in found if f.rule == "DM100")
    assert imports.depends_on
    for chosen in ([imports.id], [imports]):
        with pytest.raises(MissingDependencyError) as info:
            apply_fixes(PIPELINE, chosen)
        assert imports.depends_on[0] in str(info.value) and "\n" not in str(info.value)
    assert apply_fixes(PIPELINE, [f.id for f in found]) == migrate_source(PIPELINE).code
    with pytest.raises(UnknownFixError):
        apply_fixes(PIPELINE, ["DM100:<module>:0000000000"])


def test_the_import_fix_with_some_of_its_fixes_is_recomputed_for_them():
    code = HELPER
    found = migrate_source(code).fixes
    imports = next(f for f in found if f.rule == "DM100")
    flip = next(f for f in found if f.rule == "DM101" and "flip" in f.message)
    assert flip.id in imports.depends_on
    assert apply_fixes(code, [flip.id, imports.id]) == apply_fixes(code, [flip.id])
