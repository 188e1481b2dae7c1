"""Tests of the ``dali-migrate`` command line (click's CliRunner, in process).

The CLI prints diffs on stdout and diagnostics, errors and the summary on stderr (click >= 8.2
keeps ``result.stdout`` and ``result.stderr`` apart).
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from click.testing import Result as CliResult
from samples import PIPELINE

import dali_migrate.engine as engine
from dali_migrate import __version__
from dali_migrate.cli import cli as group
from dali_migrate.cli import main

#: a helper building part of a graph: only local rules (DM101, DM102) apply
HELPER = '''\
from nvidia.dali import fn


def decode(jpegs):
    return fn.decoders.image(jpegs, device="mixed")
'''

PLAIN = "import os\n\nprint(os.getcwd())\n"

EXIT_OK, EXIT_PENDING, EXIT_ERROR = 0, 1, 2


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch, tmp_path):
    """Run every test from an empty directory (no pyproject.toml above it changes the rules)
    with the terminal width rich sees when stderr is not a terminal (CI logs, pipes)."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
    for var in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_COLOR", "1")


def cli(*args) -> CliResult:
    result = CliRunner().invoke(main, [os.fspath(a) for a in args], catch_exceptions=False)
    return result


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, str):
        path.write_bytes(text.encode("utf-8"))
    else:
        path.write_bytes(text)
    return path


def as_json(result) -> dict:
    assert result.stdout.strip(), result.stderr
    return json.loads(result.stdout)


def stderr_lines(result) -> list[str]:
    return result.stderr.splitlines()


def temp_leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob("*") if p.name.endswith(".tmp"))


# -- --diff / --check / --write -------------------------------------------------------------------


def test_diff_is_the_default_and_leaves_the_file_alone():
    path = write(Path("simple.py"), PIPELINE)
    before = path.read_bytes()
    mtime = path.stat().st_mtime_ns

    result = cli(path)

    assert result.exit_code == EXIT_OK, result.stderr
    assert result.stdout.startswith("--- a/simple.py\n+++ b/simple.py\n")
    assert "+    reader = ndd.readers.File(file_root=data_dir)" in result.stdout
    assert "-@pipeline_def(batch_size=4, num_threads=2, device_id=None)" in result.stdout
    assert "-pipe.build()" in result.stdout
    # the diff goes to stdout only; the summary goes to stderr only
    assert "ndd.readers.File" not in result.stderr
    assert "files scanned" not in result.stdout
    assert "1 files scanned" in result.stderr
    assert "1 would change" in result.stderr
    assert path.read_bytes() == before
    assert path.stat().st_mtime_ns == mtime


def test_explicit_diff_flag_matches_default():
    path = write(Path("simple.py"), PIPELINE)
    assert cli("--diff", path).stdout == cli(path).stdout


def test_diff_applies_cleanly(tmp_path):
    """The unified diff on stdout turns the old file into what --write writes."""
    path = write(Path("simple.py"), PIPELINE)
    diff = cli(path).stdout
    expected = tmp_path / "expected.py"
    write(expected, PIPELINE)
    assert cli("--write", expected).exit_code == EXIT_OK

    old = PIPELINE.splitlines(keepends=True)
    new: list[str] = []
    lines = diff.splitlines(keepends=True)[2:]
    pos = 0
    for line in lines:
        if line.startswith("@@"):
            start = int(line.split()[1].split(",")[0][1:])
            new += old[pos : start - 1]
            pos = start - 1
        elif line.startswith(" "):
            assert old[pos] == line[1:]
            new.append(line[1:])
            pos += 1
        elif line.startswith("-"):
            assert old[pos] == line[1:]
            pos += 1
        elif line.startswith("+"):
            new.append(line[1:])
    new += old[pos:]
    assert "".join(new) == expected.read_text()


def test_check_exits_1_then_0_after_write():
    path = write(Path("simple.py"), PIPELINE)
    before = path.read_bytes()

    pending = cli("--check", path)
    assert pending.exit_code == EXIT_PENDING, pending.stderr
    assert path.read_bytes() == before  # --check never writes

    written = cli("--write", path)
    assert written.exit_code == EXIT_OK, written.stderr
    assert written.stdout == ""  # --write prints no diff
    assert "1 changed" in written.stderr
    assert path.read_bytes() != before
    assert "ndd.readers.File" in path.read_text()

    done = cli("--check", path)
    assert done.exit_code == EXIT_OK, done.stderr
    assert done.stdout == ""
    assert "0 would change" in done.stderr


def test_write_twice_is_a_fixed_point():
    path = write(Path("simple.py"), PIPELINE)
    assert cli("--write", path).exit_code == EXIT_OK
    first = path.read_bytes()
    mtime = path.stat().st_mtime_ns

    again = cli("--write", path)

    assert again.exit_code == EXIT_OK, again.stderr
    assert path.read_bytes() == first
    assert path.stat().st_mtime_ns == mtime  # not even rewritten with the same bytes
    assert "0 changed" in again.stderr


def test_check_on_file_without_changes_exits_0():
    path = write(Path("nothing.py"), "import nvidia.dali as dali\n\nprint(dali.__version__)\n")
    result = cli("--check", path)
    assert result.exit_code == EXIT_OK, result.stderr
    assert result.stdout == ""


def test_later_mode_flag_wins():
    path = write(Path("simple.py"), PIPELINE)
    before = path.read_bytes()
    result = cli("--write", "--check", path)
    assert result.exit_code == EXIT_PENDING
    assert path.read_bytes() == before


# -- --format json ---------------------------------------------------------------------------------


def test_json_output_schema():
    path = write(Path("simple.py"), PIPELINE)

    result = cli("--format", "json", path)

    assert result.exit_code == EXIT_OK, result.stderr
    doc = as_json(result)
    assert doc["version"] == __version__
    assert doc["mode"] == "diff"
    assert len(doc["files"]) == 1
    f = doc["files"][0]
    assert f["path"] == "simple.py"
    assert f["status"] == "changed"
    assert f["changed"] is True
    assert f["written"] is False
    assert f["fixes"], f
    rules = set()
    for fix in f["fixes"]:
        assert {"id", "rule", "message", "safety", "span", "depends_on"} <= set(fix), fix
        assert fix["id"].startswith(fix["rule"] + ":")
        assert fix["safety"] in ("safe", "unsafe")
        assert isinstance(fix["message"], str) and fix["message"]
        assert isinstance(fix["depends_on"], list)
        span = fix["span"]
        for end in ("start", "end"):
            assert isinstance(span[end]["line"], int) and span[end]["line"] >= 1
            assert isinstance(span[end]["column"], int) and span[end]["column"] >= 0
        assert (span["start"]["line"], span["start"]["column"]) <= (
            span["end"]["line"],
            span["end"]["column"],
        )
        rules.add(fix["rule"])
    assert rules == {"DM100", "DM200"}
    ids = {fix["id"] for fix in f["fixes"]}
    assert set(f["applied"]) <= ids
    imports = next(fix for fix in f["fixes"] if fix["rule"] == "DM100")
    structural = next(fix for fix in f["fixes"] if fix["rule"] == "DM200")
    assert structural["id"] in imports["depends_on"]
    assert isinstance(f["diagnostics"], list)

    summary = doc["summary"]
    assert summary["files_scanned"] == 1
    assert summary["files_parsed"] == 1
    assert summary["files_changed"] == 1
    assert summary["files_written"] == 0
    assert summary["errors"] == 0
    assert summary["fixes_by_rule"] == {"DM100": 1, "DM200": 1}
    # stdout held nothing but the JSON document (json.loads above); no text summary on stderr
    assert "files scanned" not in result.stderr


def test_json_with_write_reports_written():
    path = write(Path("simple.py"), PIPELINE)
    doc = as_json(cli("--format", "json", "--write", path))
    assert doc["mode"] == "write"
    assert doc["files"][0]["written"] is True
    assert doc["summary"]["files_written"] == 1
    assert "ndd" in path.read_text()


def test_json_diagnostics_schema():
    path = write(Path("passed_on.py"), PIPELINE + "consume(pipe)\n")
    doc = as_json(cli("--format", "json", path))
    diags = doc["files"][0]["diagnostics"]
    assert diags
    for d in diags:
        assert {"rule", "message", "line", "column", "severity"} <= set(d)
        assert d["severity"] in ("todo", "info", "error")
    assert any(d["rule"] == "DM200" and d["severity"] == "todo" for d in diags)
    assert doc["summary"]["diagnostics"].get("todo", 0) >= 1


# -- --select / --ignore --------------------------------------------------------------------------


def test_select_only_that_rule():
    path = write(Path("helper.py"), HELPER)
    doc = as_json(cli("--format", "json", "--select", "DM102", path))
    f = doc["files"][0]
    # device="gpu" on a pipeline-mode decoder would be as wrong as "mixed" on an ndd one: DM102
    # alone leaves the call as it is, with a TODO (DM101 and DM102 go together on one call)
    assert not [fix for fix in f["fixes"] if fix["id"] in f["applied"] and fix["rule"] != "DM100"]
    assert any(d["rule"] == "DM102" and d["severity"] == "todo" for d in f["diagnostics"])

    diff = cli("--select", "DM102", path).stdout
    assert (
        "+    # TODO(dali-migrate): DM102: migrate fn.decoders.image to dynamic mode together "
        "with its device" in diff
    )
    assert "ndd.decoders" not in diff and 'device="gpu"' not in diff


def test_select_on_pipeline_file_does_not_rewrite_the_pipeline():
    path = write(Path("simple.py"), PIPELINE)
    result = cli("--select", "DM102", path)
    assert result.exit_code == EXIT_OK
    assert result.stdout == ""


def test_select_comma_separated_and_prefixes():
    path = write(Path("helper.py"), HELPER)
    both = as_json(cli("--format", "json", "--select", "DM101,DM102", path))
    prefix = as_json(cli("--format", "json", "--select", "DM1", path))
    fixes = both["files"][0]["fixes"]
    assert any(fix["rule"] == "DM101" and "DM102" in fix["includes"] for fix in fixes)
    assert both["files"][0]["applied"] == prefix["files"][0]["applied"]


def test_ignore_dm200_changes_nothing_structural():
    path = write(Path("simple.py"), PIPELINE)

    result = cli("--ignore", "DM200", path)
    assert result.exit_code == EXIT_OK, result.stderr
    assert "-@pipeline_def" not in result.stdout
    assert "-pipe.build()" not in result.stdout
    assert "next(pipe)" not in result.stdout

    written = cli("--ignore", "DM200", "--write", path)
    assert written.exit_code == EXIT_OK
    text = path.read_text()
    assert "@pipeline_def(batch_size=4, num_threads=2, device_id=None)" in text
    assert "pipe.build()" in text
    assert "pipe.run()" in text


def test_ignore_dm200_does_not_half_migrate_the_pipeline():
    """The pipeline stays a pipeline: no ndd operator may end up inside its graph."""
    path = write(Path("simple.py"), PIPELINE)
    result = cli("--ignore", "DM200", "--write", path)
    assert result.exit_code == EXIT_OK
    assert path.read_bytes() == PIPELINE.encode()


def test_ignore_other_rule_keeps_the_rest():
    path = write(Path("helper.py"), HELPER)
    doc = as_json(cli("--format", "json", "--ignore", "DM102", path))
    f = doc["files"][0]
    assert "DM102" not in {fix["rule"] for fix in f["fixes"]}
    # ndd rejects device="mixed": without DM102, DM101 leaves that call with a TODO
    assert not [fix for fix in f["fixes"] if fix["id"] in f["applied"] and fix["rule"] == "DM101"]
    assert any(d["rule"] == "DM101" and d["severity"] == "todo" for d in f["diagnostics"])


@pytest.mark.parametrize("option", ["--select", "--ignore"])
@pytest.mark.parametrize("rule", ["DM999", "XX", "DM102,DM777"])
def test_unknown_rule_is_a_usage_error(option, rule):
    path = write(Path("simple.py"), PIPELINE)
    before = path.read_bytes()
    result = cli("--write", option, rule, path)
    assert result.exit_code == EXIT_ERROR
    assert "unknown rule" in result.stderr
    assert result.stdout == ""
    assert path.read_bytes() == before


# -- directories --------------------------------------------------------------------------------


def _tree(root: Path) -> None:
    write(root / "top.py", PIPELINE)
    write(root / "pkg" / "__init__.py", "")
    write(root / "pkg" / "deep" / "deeper" / "nested.py", PIPELINE)
    write(root / "pkg" / "plain.py", PLAIN)
    write(root / "pkg" / "helper.py", HELPER)
    write(root / "pkg" / "notes.txt", PIPELINE)  # not *.py
    write(root / ".hidden" / "h.py", PIPELINE)
    write(root / ".venv" / "lib" / "v.py", PIPELINE)
    write(root / "env" / "pyvenv.cfg", "home = /usr/bin\n")
    write(root / "env" / "lib" / "e.py", PIPELINE)
    write(root / "pkg" / "__pycache__" / "c.py", PIPELINE)
    write(root / "tests" / "test_x.py", PIPELINE)


def test_directory_recursion_and_default_skips():
    root = Path("proj")
    _tree(root)

    doc = as_json(cli("--format", "json", root))

    paths = sorted(f["path"] for f in doc["files"])
    assert paths == sorted(
        os.path.join("proj", p)
        for p in ("top.py", "pkg/deep/deeper/nested.py", "pkg/helper.py", "tests/test_x.py")
    )
    s = doc["summary"]
    # scanned: the 4 DALI files + __init__.py + plain.py (skipped, not parsed)
    assert s["files_scanned"] == 6
    assert s["files_parsed"] == 4
    assert s["files_changed"] == 4
    assert s["errors"] == 0


def test_directory_write_only_touches_dali_files():
    root = Path("proj")
    _tree(root)
    untouched = {
        p: p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and p.name not in ("top.py", "nested.py", "helper.py", "test_x.py")
    }
    result = cli("--write", root)
    assert result.exit_code == EXIT_OK, result.stderr
    for p, data in untouched.items():
        assert p.read_bytes() == data, p
    assert "ndd" in (root / "top.py").read_text()
    assert "ndd" in (root / "pkg" / "deep" / "deeper" / "nested.py").read_text()
    assert "4 changed" in result.stderr
    assert temp_leftovers(root) == []


@pytest.mark.parametrize(
    "pattern, gone",
    [
        ("tests/*", {"tests/test_x.py"}),
        ("tests", {"tests/test_x.py"}),
        ("pkg/deep", {"pkg/deep/deeper/nested.py"}),
        ("helper.py", {"pkg/helper.py"}),
        ("*/helper.py", {"pkg/helper.py"}),
        ("test_*.py", {"tests/test_x.py"}),
    ],
)
def test_exclude_glob(pattern, gone):
    root = Path("proj")
    _tree(root)
    everything = {"top.py", "pkg/deep/deeper/nested.py", "pkg/helper.py", "tests/test_x.py"}

    doc = as_json(cli("--format", "json", "--exclude", pattern, root))

    got = {os.path.relpath(f["path"], "proj").replace(os.sep, "/") for f in doc["files"]}
    assert got == everything - gone


def test_exclude_repeatable():
    root = Path("proj")
    _tree(root)
    doc = as_json(cli("--format", "json", "--exclude", "tests/*", "--exclude", "pkg/*", root))
    assert [f["path"] for f in doc["files"]] == [os.path.join("proj", "top.py")]


def test_files_without_dali_are_skipped_not_parsed():
    write(Path("a.py"), PLAIN)
    write(Path("b.py"), "x = 1\n")
    write(Path("c.py"), "def broken(:\n")  # not parsed, so not an error either
    result = cli("--format", "json", ".")
    assert result.exit_code == EXIT_OK
    doc = as_json(result)
    assert doc["files"] == []
    assert doc["summary"]["files_scanned"] == 3
    assert doc["summary"]["files_parsed"] == 0
    assert doc["summary"]["errors"] == 0


def test_text_summary_counts_for_a_directory():
    _tree(Path("proj"))
    result = cli("proj")
    assert result.exit_code == EXIT_OK
    assert "6 files scanned, 4 parsed, 4 would change" in result.stderr


# -- bad inputs ------------------------------------------------------------------------------------


def _make_bad(kind: str, directory: Path, monkeypatch) -> Path:
    """Create one bad input of ``kind`` in ``directory``; returns its path."""
    if kind == "syntax":
        return write(directory / "x.py", "import nvidia.dali\n\ndef broken(:\n    pass\n")
    if kind == "utf8":
        return write(directory / "x.py", b"import nvidia.dali\nname = '\xff\xfe caf\xe9'\n")
    if kind == "binary":
        return write(directory / "x.py", b"import nvidia.dali\n\x00\x01\x02\x00binary\n")
    if kind == "dangling":
        link = directory / "x.py"
        os.symlink(directory / "missing-target.py", link)
        return link
    if kind == "vanished":
        victim = write(directory / "x.py", PIPELINE)
        original = engine.discover

        def discover_then_delete(paths, exclude=()):
            found = original(paths, exclude)
            assert victim in found or Path(victim) in found
            victim.unlink()
            return found

        monkeypatch.setattr(engine, "discover", discover_then_delete)
        return victim
    if kind == "ghost":
        ghost = directory / "x.py"  # never existed; discovery "found" it anyway
        original = engine.discover
        monkeypatch.setattr(
            engine, "discover", lambda paths, exclude=(): original(paths, exclude) + [ghost]
        )
        return ghost
    raise AssertionError(kind)


#: the shapes of the lines the CLI writes to stderr
RECORD = re.compile(r"^(error: \S|fixes: |diagnostics: |\d+ files scanned, |\S+:\d+:\d+: DM\d+ )")

BAD_KINDS = ["syntax", "utf8", "binary", "dangling", "vanished", "ghost"]
REASONS = {
    "syntax": "not valid Python",
    "utf8": "UTF-8",
    "binary": "binary",
    "dangling": "dangling symlink",
    "vanished": "vanished",
    "ghost": "vanished",
}


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_bad_input_is_reported_and_the_rest_is_written(kind, monkeypatch):
    good = write(Path("d") / "good.py", PIPELINE)
    bad = _make_bad(kind, Path("d"), monkeypatch)
    bad_bytes = bad.read_bytes() if bad.exists() and kind != "vanished" else None

    result = cli("--format", "json", "--write", "-j", "1", "d")

    assert result.exit_code == EXIT_ERROR, result.stderr
    doc = as_json(result)
    by_path = {f["path"]: f for f in doc["files"]}
    assert by_path[str(good)]["written"] is True
    assert "ndd.readers.File" in good.read_text()
    err = by_path[str(bad)]
    assert err["status"] == "error"
    assert err["written"] is False
    msg = err["error"]
    assert re.match(rf"{re.escape(str(bad))}:(\d+:\d+:)? ", msg), msg
    assert REASONS[kind] in msg
    assert "\n" not in msg and "\r" not in msg
    assert doc["summary"]["errors"] == 1
    assert doc["summary"]["files_written"] == 1
    if kind in ("vanished", "ghost"):
        assert not os.path.lexists(bad)  # nothing was recreated
    elif bad_bytes is not None:
        assert bad.read_bytes() == bad_bytes  # never touched
    assert temp_leftovers(Path("d")) == []


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_bad_input_text_report_is_one_line(kind, monkeypatch):
    write(Path("d") / "good.py", PIPELINE)
    bad = _make_bad(kind, Path("d"), monkeypatch)

    result = cli("--write", "-j", "1", "d")

    assert result.exit_code == EXIT_ERROR
    lines = stderr_lines(result)
    mentioning = [ln for ln in lines if str(bad) in ln]
    assert len(mentioning) == 1, result.stderr
    (line,) = mentioning
    assert re.match(rf"error: {re.escape(str(bad))}:(\d+:\d+:)? ", line), line
    assert REASONS[kind] in line
    # every stderr line is a whole record: nothing was wrapped onto a continuation line
    for ln in lines:
        assert RECORD.match(ln), f"continuation line {ln!r} in:\n{result.stderr}"
    assert "2 files scanned" in result.stderr
    assert "1 changed" in result.stderr
    assert "1 errors" in result.stderr
    assert "ndd" in (Path("d") / "good.py").read_text()


def test_error_line_with_a_long_path_is_not_wrapped():
    deep = Path("a-rather-long-directory-name") / "and-another-one-below-it" / "and-one-more"
    write(deep / "good.py", PIPELINE)
    bad = deep / "x.py"
    os.symlink("nowhere.py", bad)

    result = cli("a-rather-long-directory-name")

    assert result.exit_code == EXIT_ERROR
    assert f"error: {bad}: dangling symlink" in stderr_lines(result)


def test_path_with_brackets_is_printed_verbatim():
    bad = write(Path("[x]") / "bad.py", "import nvidia.dali\ndef broken(:\n")
    result = cli(bad)
    assert result.exit_code == EXIT_ERROR
    assert f"error: {bad}:2:11: not valid Python: invalid syntax" in result.stderr


def test_path_with_closing_markup_tag_does_not_abort_the_run():
    write(Path("d") / "[" / "]bad.py", "import nvidia.dali\ndef broken(:\n")
    good = write(Path("d") / "z_good.py", PIPELINE)
    result = cli("--write", "d")
    assert result.exit_code == EXIT_ERROR
    assert "internal error" not in result.stderr
    assert "ndd" in good.read_text()
    assert "2 files scanned" in result.stderr


def test_latin1_file_with_cookie_is_migrated_and_keeps_its_encoding():
    source = "# -*- coding: latin-1 -*-\n# caf\u00e9 \u00fcber\n" + PIPELINE
    path = write(Path("lat.py"), source.encode("latin-1"))

    result = cli("--write", path)

    assert result.exit_code == EXIT_OK, result.stderr
    data = path.read_bytes()
    assert data.startswith(b"# -*- coding: latin-1 -*-\n# caf\xe9 \xfcber\n")
    assert "caf\u00e9".encode("utf-8") not in data
    text = data.decode("latin-1")
    assert "ndd.readers.File" in text
    assert cli("--check", path).exit_code == EXIT_OK


def test_latin1_file_next_to_bad_files():
    source = "# -*- coding: latin-1 -*-\n# caf\u00e9\n" + PIPELINE
    lat = write(Path("d") / "lat.py", source.encode("latin-1"))
    write(Path("d") / "bad.py", b"import nvidia.dali\nx = '\xff'\n")
    result = cli("--write", "d")
    assert result.exit_code == EXIT_ERROR
    assert lat.read_bytes().startswith(b"# -*- coding: latin-1 -*-\n# caf\xe9\n")
    assert b"ndd.readers.File" in lat.read_bytes()


def test_read_only_file_is_one_error_line_and_the_others_are_written():
    ro = write(Path("ro.py"), PIPELINE)
    ro.chmod(0o444)
    good = write(Path("good.py"), PIPELINE)
    result = cli("--write", "-j", "1", "good.py", "ro.py")
    assert result.exit_code == EXIT_ERROR
    assert "error: ro.py: read-only file (not written)" in stderr_lines(result)
    assert ro.read_text() == PIPELINE and stat.S_IMODE(ro.stat().st_mode) == 0o444
    assert "ndd" in good.read_text()


def test_odd_cookies_are_one_line_each_and_a_cp1252_file_is_still_migrated():
    cp_text = "# -*- coding: cp1252 -*-\n# caf\u00e9 \u20ac\n" + PIPELINE
    cp = write(Path("d") / "z_cp.py", cp_text.encode("cp1252"))
    odd = {}
    for cookie in ("undefined", "punycode", "idna", "unicode_escape", "utf-16", "no-such-codec"):
        name = "a_" + cookie.replace("-", "_") + ".py"
        odd[name] = write(Path("d") / name, f"# -*- coding: {cookie} -*-\n{PIPELINE}".encode())
    before = {name: p.read_bytes() for name, p in odd.items()}
    result = cli("--write", "d")
    assert result.exit_code == EXIT_ERROR, result.stderr
    errors = [ln for ln in stderr_lines(result) if ln.startswith("error: ")]
    assert sorted(ln.split(":")[1].strip().split("/")[-1] for ln in errors) == sorted(odd)
    assert all(len(ln) < 200 for ln in errors), errors
    assert "internal error" not in result.stderr
    assert b"ndd.readers.File" in cp.read_bytes() and b"caf\xe9 \x80" in cp.read_bytes()
    assert {name: p.read_bytes() for name, p in odd.items()} == before


@pytest.mark.parametrize(
    "args", [["nope.py"], ["--write", "nope_dir"], ["--check", "ok.py", "nope.py"]]
)
def test_nonexistent_path_argument_is_a_usage_error(args):
    ok = write(Path("ok.py"), PIPELINE)
    before = ok.read_bytes()
    result = cli(*args)
    assert result.exit_code == EXIT_ERROR
    assert "does not exist" in result.stderr
    assert "nope" in result.stderr
    assert ok.read_bytes() == before


def test_no_path_is_a_usage_error():
    result = cli()
    assert result.exit_code == EXIT_ERROR
    assert "no PATH" in result.stderr


def test_explicit_dangling_symlink_argument_is_reported_not_usage_error():
    os.symlink("gone.py", "link.py")
    result = cli("link.py")
    assert result.exit_code == EXIT_ERROR
    assert "link.py: dangling symlink" in result.stderr


# -- byte fidelity of --write ----------------------------------------------------------------------


def test_bom_and_crlf_survive_write():
    data = b"\xef\xbb\xbf" + PIPELINE.replace("\n", "\r\n").encode("utf-8")
    path = write(Path("bom.py"), data)

    result = cli("--write", path)

    assert result.exit_code == EXIT_OK, result.stderr
    out = path.read_bytes()
    assert out != data
    assert out.startswith(b"\xef\xbb\xbf")
    assert out.count(b"\xef\xbb\xbf") == 1
    assert b"ndd.readers.File" in out
    assert out.count(b"\n") == out.count(b"\r\n") > 5
    assert b"\r\r" not in out
    assert cli("--check", path).exit_code == EXIT_OK


def test_crlf_diff_shows_the_change():
    path = write(Path("crlf.py"), PIPELINE.replace("\n", "\r\n").encode())
    result = cli(path)
    assert result.exit_code == EXIT_OK
    assert "ndd.readers.File" in result.stdout


def test_mode_bits_are_kept():
    path = write(Path("exe.py"), PIPELINE)
    path.chmod(0o754)
    result = cli("--write", path)
    assert result.exit_code == EXIT_OK, result.stderr
    assert "ndd" in path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o754


def test_write_through_symlink_keeps_the_link():
    target = write(Path("real.py"), PIPELINE)
    os.symlink("real.py", "link.py")
    result = cli("--write", "link.py")
    assert result.exit_code == EXIT_OK, result.stderr
    assert os.path.islink("link.py")
    assert "ndd" in target.read_text()


def test_write_leaves_no_temp_files():
    d = Path("d")
    for i in range(3):
        write(d / f"p{i}.py", PIPELINE)
    write(d / "plain.py", PLAIN)
    write(d / "bad.py", "import nvidia.dali\ndef broken(:\n")
    names_before = sorted(p.name for p in d.iterdir())

    result = cli("--write", "-j", "1", d)

    assert result.exit_code == EXIT_ERROR
    assert sorted(p.name for p in d.iterdir()) == names_before
    assert temp_leftovers(Path(".")) == []
    assert not [p for p in d.iterdir() if p.name.startswith(".")]


# -- suppression comments --------------------------------------------------------------------------


def test_ignore_comment_above_pipeline_def_prevents_dm200():
    source = PIPELINE.replace("\n@pipeline_def", "\n# dali-migrate: ignore\n@pipeline_def")
    path = write(Path("s.py"), source)
    doc = as_json(cli("--format", "json", path))
    fixes = doc["files"][0]["fixes"] if doc["files"] else []
    assert "DM200" not in {f["rule"] for f in fixes}
    result = cli("--write", path)
    assert result.exit_code == EXIT_OK
    assert path.read_text() == source


def test_ignore_comment_above_pipeline_def_without_blank_line():
    source = PIPELINE.replace("fn\n\n@pipeline_def", "fn\n# dali-migrate: ignore\n@pipeline_def")
    assert source != PIPELINE
    path = write(Path("s.py"), source)
    result = cli("--write", path)
    assert result.exit_code == EXIT_OK
    assert path.read_text() == source


def test_ignore_rule_comment_on_mixed_device_line():
    source = (
        "from nvidia.dali import fn\n\n\n"
        "def decode(jpegs):\n"
        '    return fn.decoders.image(jpegs, device="mixed")  # dali-migrate: ignore[DM102]\n\n\n'
        "def decode_too(jpegs):\n"
        '    return fn.decoders.image(jpegs, device="mixed")\n'
    )
    path = write(Path("h.py"), source)

    result = cli("--write", path)

    assert result.exit_code == EXIT_OK, result.stderr
    lines = path.read_text().splitlines()
    # the suppressed call stays pipeline mode (with a TODO): ndd would reject "mixed"
    assert (
        '    return fn.decoders.image(jpegs, device="mixed")  # dali-migrate: ignore[DM102]'
        in lines
    )
    assert '    return ndd.decoders.image(jpegs, device="gpu")' in lines


def test_ignore_comment_for_another_rule_does_not_suppress():
    source = HELPER.replace('device="mixed")', 'device="mixed")  # dali-migrate: ignore[DM103]')
    path = write(Path("h.py"), source)
    assert cli("--write", path).exit_code == EXIT_OK
    assert 'device="gpu"' in path.read_text()


# -- pyproject.toml --------------------------------------------------------------------------------


def test_pyproject_select_is_honoured():
    Path("pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.dali-migrate]\nselect = ["DM101", "DM102"]\n'
    )
    helper = write(Path("src") / "helper.py", HELPER)
    simple = write(Path("src") / "simple.py", PIPELINE)

    doc = as_json(cli("--format", "json", "src"))

    assert set(doc["summary"]["fixes_by_rule"]) <= {"DM101", "DM100"}
    assert doc["summary"]["fixes_by_rule"].get("DM101") == 1

    assert cli("--write", "src").exit_code == EXIT_OK
    assert 'ndd.decoders.image(jpegs, device="gpu")' in helper.read_text()
    assert simple.read_text() == PIPELINE  # DM200 is not selected: the pipeline is left alone


def test_pyproject_in_a_parent_directory_is_found():
    Path("pyproject.toml").write_text('[tool.dali-migrate]\nselect = ["DM102"]\n')
    sub = Path("pkg") / "sub"
    sub.mkdir(parents=True)
    write(sub / "helper.py", HELPER)
    os.chdir(sub)
    doc = as_json(cli("--format", "json", "helper.py"))
    assert set(doc["summary"]["fixes_by_rule"]) <= {"DM102", "DM100"}


def test_pyproject_select_as_a_string():
    Path("pyproject.toml").write_text('[tool.dali-migrate]\nselect = "DM102"\n')
    write(Path("helper.py"), HELPER)
    result = cli("--format", "json", "helper.py")
    assert result.exit_code == EXIT_OK, result.stderr
    assert set(as_json(result)["summary"]["fixes_by_rule"]) <= {"DM102", "DM100"}


def test_pyproject_exclude_as_a_string_does_not_exclude_everything():
    Path("pyproject.toml").write_text('[tool.dali-migrate]\nexclude = "gen/*"\n')
    write(Path("gen") / "a.py", PIPELINE)
    write(Path("b.py"), PIPELINE)
    result = cli("--check", ".")
    # today: "0 files scanned", exit 0 -- a CI check that silently checks nothing
    assert result.exit_code == EXIT_PENDING, result.stderr
    assert "1 files scanned" in result.stderr


def test_broken_pyproject_is_reported_as_such():
    Path("pyproject.toml").write_text("[tool.dali-migrate\n")
    write(Path("b.py"), PIPELINE)
    result = cli(".")
    assert result.exit_code == EXIT_ERROR
    assert "pyproject.toml" in result.stderr
    assert "internal error" not in result.stderr


def test_command_line_select_overrides_pyproject():
    Path("pyproject.toml").write_text('[tool.dali-migrate]\nselect = ["DM102"]\n')
    write(Path("simple.py"), PIPELINE)
    doc = as_json(cli("--format", "json", "--select", "DM200", "simple.py"))
    assert doc["summary"]["fixes_by_rule"].get("DM200") == 1


def test_pyproject_exclude_and_unknown_rule():
    Path("pyproject.toml").write_text('[tool.dali-migrate]\nexclude = ["gen/*"]\n')
    write(Path("gen") / "a.py", PIPELINE)
    write(Path("b.py"), PIPELINE)
    doc = as_json(cli("--format", "json", "."))
    assert [f["path"] for f in doc["files"]] == ["b.py"]

    Path("pyproject.toml").write_text('[tool.dali-migrate]\nignore = ["DM42"]\n')
    result = cli(".")
    assert result.exit_code == EXIT_ERROR
    assert "DM42" in result.stderr


# -- parallelism -----------------------------------------------------------------------------------


def _many(d: Path, n: int = 12) -> None:
    for i in range(n):
        src = PIPELINE.replace("simple", f"pipe_{i}").replace("resize_x=32", f"resize_x={32 + i}")
        write(d / f"m{i:02d}.py", src)
    write(d / "helper.py", HELPER)
    write(d / "plain.py", PLAIN)
    write(d / "bad.py", "import nvidia.dali\ndef broken(:\n")


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_jobs_2_matches_jobs_1(fmt):
    d = Path("many")
    _many(d)
    assert engine.PARALLEL_THRESHOLD <= 12

    one = cli("--format", fmt, "-j", "1", d)
    two = cli("--format", fmt, "-j", "2", d)

    assert one.exit_code == two.exit_code == EXIT_ERROR  # bad.py
    assert one.stdout == two.stdout
    assert one.stderr == two.stderr
    assert one.stdout.count("ndd.readers.File") >= 12 or fmt == "json"


def test_jobs_2_write_matches_jobs_1(tmp_path):
    a, b = Path("a"), Path("b")
    _many(a)
    _many(b)
    assert cli("--write", "-j", "1", a).exit_code == EXIT_ERROR
    assert cli("--write", "-j", "2", b).exit_code == EXIT_ERROR
    for p in sorted(a.iterdir()):
        assert p.read_bytes() == (b / p.name).read_bytes(), p.name
    assert temp_leftovers(b) == []


# -- informational options -------------------------------------------------------------------------


def test_explain():
    result = cli("--explain", "DM200")
    assert result.exit_code == EXIT_OK
    assert result.stdout.startswith("DM200 pipeline-def (safe)")
    assert "@pipeline_def" in result.stdout
    # the before/after is the rule's fixture pair, word for word (tests/test_rule_examples.py)
    assert "Before (``fixtures/DM200/canonical.in.py``)::" in result.stdout
    assert "After (``fixtures/DM200/canonical.out.py``)::" in result.stdout
    assert "ndd.readers.File" in result.stdout
    assert "reader.next_epoch(batch_size=batch_size, capture=True)" in result.stdout


def test_explain_by_name_and_unknown():
    assert "DM102" in cli("--explain", "mixed-device").stdout
    bad = cli("--explain", "DM999")
    assert bad.exit_code == EXIT_ERROR
    assert "unknown rule" in bad.stderr


def test_list_rules():
    result = cli("--list-rules")
    assert result.exit_code == EXIT_OK
    ids = [line.split()[0] for line in result.stdout.splitlines() if line.strip()]
    assert set(ids) >= {"DM100", "DM101", "DM102", "DM103", "DM104", "DM200"}
    assert len(ids) == len(set(ids))


def test_version():
    for flag in ("--version", "-V"):
        result = cli(flag)
        assert result.exit_code == EXIT_OK
        assert result.stdout.strip() == f"dali-migrate, version {__version__}"


def test_help_mentions_exit_codes():
    for flag in ("--help", "-h"):
        result = cli(flag)
        assert result.exit_code == EXIT_OK
        out = " ".join(result.stdout.split())
        assert "Exit codes:" in out
        assert "0 nothing to do" in out
        assert "1 --check found pending changes" in out
        assert "2 usage error" in out
        assert "[tool.dali-migrate]" in out


def test_python_dash_m():
    proc = subprocess.run(
        [sys.executable, "-m", "dali_migrate", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage: dali-migrate ")
    assert "Exit codes" in proc.stdout


def test_python_dash_m_runs_a_migration():
    write(Path("simple.py"), PIPELINE)
    proc = subprocess.run(
        [sys.executable, "-m", "dali_migrate", "--check", "simple.py"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == EXIT_PENDING, proc.stderr
    assert "ndd.readers.File" in proc.stdout
    assert "1 files scanned" in proc.stderr


# -- dali-migrate as a group: the migration by default, verify as a subcommand ---------------------


def run_group(*args) -> CliResult:
    argv = [os.fspath(a) for a in args]
    return CliRunner().invoke(group, argv, catch_exceptions=False, prog_name="dali-migrate")


@pytest.mark.parametrize(
    "args",
    [
        ["--diff", "simple.py"],
        ["simple.py"],
        ["--check", "simple.py"],
        ["--explain", "DM200"],
        ["--list-rules"],
        ["--version"],
        ["--format", "json", "simple.py"],
        ["-j", "1", "--select", "DM1", "simple.py"],
    ],
)
def test_the_group_runs_the_migration_by_default(args):
    write(Path("simple.py"), PIPELINE)
    direct, grouped = cli(*args), run_group(*args)
    assert grouped.exit_code == direct.exit_code
    assert (grouped.stdout, grouped.stderr) == (direct.stdout, direct.stderr)


def test_usage_errors_of_the_default_command_read_as_before():
    result = run_group("--write", "--verify", "--check", "nope.py")
    assert result.exit_code == EXIT_ERROR
    assert "Usage: dali-migrate [OPTIONS] [PATHS]..." in result.stderr
    assert "dali-migrate dali-migrate" not in result.stderr
    assert run_group().exit_code == EXIT_ERROR


def test_help_lists_verify_and_verify_has_its_own_help():
    top = run_group("--help")
    assert top.exit_code == EXIT_OK
    assert top.stdout.startswith("Usage: dali-migrate [OPTIONS] [PATHS]...")
    commands = top.stdout[top.stdout.index("Commands:") :]
    assert re.search(r"^\s+verify\s+Prove that NEW computes", commands, re.M)
    sub = run_group("verify", "--help")
    assert sub.exit_code == EXIT_OK
    assert sub.stdout.startswith("Usage: dali-migrate verify [OPTIONS] OLD NEW")
    assert "--kwargs" in sub.stdout


def test_verify_subcommand_runs_the_harness_command(monkeypatch):
    from dali_migrate.harness import cli as harness_cli

    seen = {}

    def fake(old, new, **kwargs):
        seen["args"] = (old, new)

    monkeypatch.setattr(harness_cli.verify_command, "callback", fake)
    write(Path("a.py"), PIPELINE)
    write(Path("b.py"), PIPELINE)
    result = run_group("verify", "a.py", "b.py")
    assert result.exit_code == EXIT_OK, result.stderr
    assert seen == {"args": ("a.py", "b.py")}


def test_console_script_is_the_group():
    proc = subprocess.run(
        [sys.executable, "-m", "dali_migrate", "verify", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage: dali-migrate verify ")


# -- --device cpu, --verify without the extra ------------------------------------------------------

GPU_PIPELINE = PIPELINE.replace(
    "fn.decoders.image(jpegs)", 'fn.decoders.image(jpegs, device="mixed")'
).replace("device_id=None", "device_id=0")


def test_device_cpu_makes_the_migrated_program_run_on_the_cpu():
    path = write(Path("train.py"), GPU_PIPELINE)
    plain = cli("--diff", path)
    assert 'device="gpu"' in plain.stdout  # mixed becomes gpu in dynamic mode
    result = cli("--write", "--device", "cpu", path)
    assert result.exit_code == EXIT_OK, result.stderr
    text = path.read_text()
    assert 'ndd.decoders.image(jpegs, device="cpu")' in text
    assert '"gpu"' not in text and '"mixed"' not in text
    assert "train.py:1:0: device info: lowered to CPU (--device cpu): " in result.stderr
    assert cli("--check", "--device", "cpu", path).exit_code == EXIT_OK
    assert cli("--check", path).exit_code == EXIT_OK  # and it stays as it is without the option


def test_device_cpu_lowers_an_already_migrated_file_too():
    done = "import nvidia.dali.experimental.dynamic as ndd\n\nx = ndd.flip(y).gpu()\n"
    path = write(Path("done.py"), done)
    result = cli("--diff", "--device", "cpu", path)
    assert result.exit_code == EXIT_OK
    assert "+x = ndd.flip(y)\n" in result.stdout


def test_device_cpu_needs_neither_dali_nor_numpy():
    write(Path("train.py"), GPU_PIPELINE)
    code = (
        "import sys; sys.modules['numpy'] = None; sys.modules['nvidia'] = None\n"
        "from dali_migrate.cli import entry\n"
        "sys.argv = ['dali-migrate', '--diff', '--device', 'cpu', 'train.py']\n"
        "entry()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert 'ndd.decoders.image(jpegs, device="cpu")' in proc.stdout
    assert "Traceback" not in proc.stderr


def test_write_verify_without_the_extra_says_what_to_install(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec

    def no_numpy(name, *args):
        return None if name == "numpy" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", no_numpy)
    path = write(Path("train.py"), PIPELINE)
    result = cli("--write", "--verify", path)
    assert result.exit_code == EXIT_ERROR
    assert "pip install 'dali-migrate[verify]'" in result.stderr
    assert "Traceback" not in result.stderr
    assert path.read_text() == PIPELINE


def test_check_fails_while_a_todo_marker_remains(tmp_path: Path) -> None:
    """The migration is done when --check passes: a file that nothing would change but that
    still holds a TODO marker (a use the tool could not follow) keeps --check failing."""
    target = tmp_path / "a.py"
    target.write_text(
        "from nvidia.dali import fn, pipeline_def\n\n\n"
        "@pipeline_def(batch_size=2, num_threads=1, device_id=None)\n"
        "def p(root):\n"
        "    jpegs, labels = fn.readers.file(file_root=root)\n"
        "    return jpegs, labels\n\n\n"
        "pipes = {'train': p('/data')}\n"
    )
    runner = CliRunner()
    assert runner.invoke(main, ["--write", "--no-progress", str(target)]).exit_code == 0
    assert "# TODO(dali-migrate)" in target.read_text()
    check = runner.invoke(main, ["--check", "--no-progress", str(target)])
    assert check.exit_code == 1, check.output
    assert "1 TODO(dali-migrate) marker left after migrating in 1 file" in " ".join(
        check.output.split()
    )
    lines = [line for line in target.read_text().splitlines() if "TODO(dali-migrate)" not in line]
    target.write_text("\n".join(lines).replace("pipes = {'train': p('/data')}", "") + "\n")
    assert runner.invoke(main, ["--check", "--no-progress", str(target)]).exit_code == 0
