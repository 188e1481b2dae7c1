"""``--format sarif``: a SARIF 2.1.0 log that validates against the OASIS schema (shipped in
tests/data, see the README there), whose fixes rebuild the migrated code; and the pre-commit hook.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from click.testing import CliRunner
from samples import PIPELINE

from dali_migrate import __version__, migrate_source
from dali_migrate.cli import main
from dali_migrate.registry import all_rules

DATA = Path(__file__).resolve().parent / "data"
REPO = Path(__file__).resolve().parent.parent

HELPER = '''\
from nvidia.dali import fn


def decode(jpegs, cfg):
    # caf\u00e9 \u2014 non-ASCII before the fix on the next line shifts byte offsets, not columns
    return fn.decoders.image(jpegs, device="mixed"), fn.decoders.image(jpegs, device=cfg.dev())  # \u00e9\u00e9
'''


@pytest.fixture(scope="module")
def validator():
    schema = json.loads((DATA / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


@pytest.fixture(autouse=True)
def _work(monkeypatch, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("NO_COLOR", "1")


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def sarif(*args) -> tuple[int, dict]:
    result = CliRunner().invoke(
        main, ["--format", "sarif", "-j", "1", *map(os.fspath, args)], catch_exceptions=False
    )
    assert result.stdout.strip(), result.stderr
    return result.exit_code, json.loads(result.stdout)


def apply_sarif_fixes(source: str, results: list[dict], uri: str) -> str:
    """Apply every replacement of every result for ``uri``, as a SARIF consumer would:
    1-based lines and columns counted in code points (the run's ``columnKind``)."""
    lines = source.splitlines(keepends=True) + [""]
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(line: int, column: int) -> int:
        return starts[line - 1] + column - 1

    edits = []
    for r in results:
        for fix in r.get("fixes", []):
            for change in fix["artifactChanges"]:
                if change["artifactLocation"]["uri"] != uri:
                    continue
                for rep in change["replacements"]:
                    region = rep["deletedRegion"]
                    start = offset(region["startLine"], region["startColumn"])
                    end = offset(region["endLine"], region["endColumn"])
                    edits.append((start, end, rep.get("insertedContent", {}).get("text", "")))
    out, pos = [], 0
    for start, end, text in sorted(edits):
        assert start >= pos, "overlapping replacements"
        out += [source[pos:start], text]
        pos = end
    return "".join(out + [source[pos:]])


# -- validation ---------------------------------------------------------------------------------------


def _tree() -> None:
    write(Path("simple.py"), PIPELINE)
    write(Path("pkg") / "helper.py", HELPER)
    write(Path("with space") / "crlf.py", PIPELINE.replace("\n", "\r\n"))
    write(Path("bad.py"), "import nvidia.dali\ndef broken(:\n")
    write(Path("plain.py"), "print(1)\n")


@pytest.mark.parametrize("mode", ["--diff", "--check", "--write"])
def test_sarif_validates_against_the_2_1_0_schema(validator, mode):
    _tree()
    code, log = sarif(mode, ".")
    assert code == 2  # bad.py
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:10])
    assert log["version"] == "2.1.0"
    (run,) = log["runs"]
    assert run["tool"]["driver"]["name"] == "dali-migrate"
    assert run["tool"]["driver"]["version"] == __version__


def test_the_validator_rejects_a_broken_log(validator):
    """The schema check is not vacuous: a log missing what SARIF requires fails it."""
    write(Path("simple.py"), PIPELINE)
    _, log = sarif("simple.py")
    assert validator.is_valid(log)
    del log["runs"][0]["results"][0]["message"]
    assert not validator.is_valid(log)
    _, log = sarif("simple.py")
    log["runs"][0]["results"][0]["fixes"][0]["artifactChanges"][0]["replacements"] = []
    assert not validator.is_valid(log)


# -- content --------------------------------------------------------------------------------------------


def test_one_result_per_fix_and_diagnostic_with_rule_metadata():
    write(Path("helper.py"), HELPER)
    migrated = migrate_source(HELPER, path="helper.py")
    _, log = sarif("helper.py")
    (run,) = log["runs"]

    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [r.id for r in all_rules()]
    for r in run["results"]:
        assert rules[r["ruleIndex"]]["id"] == r["ruleId"]

    fixes = [r for r in run["results"] if "fixId" in r["properties"]]
    assert [r["properties"]["fixId"] for r in fixes] == [f.id for f in migrated.fixes]
    for r, fix in zip(fixes, migrated.fixes):
        assert r["message"]["text"] == fix.message
        assert r["partialFingerprints"] == {"fixId/v1": fix.id}
        assert r["properties"]["safety"] == fix.safety
        assert r["properties"]["dependsOn"] == list(fix.depends_on)
        region = r["locations"][0]["physicalLocation"]["region"]
        assert (region["startLine"], region["startColumn"]) == (
            fix.span.start_line,
            fix.span.start_col + 1,
        )
    diagnostics = [r for r in run["results"] if "severity" in r["properties"]]
    assert len(diagnostics) == len(migrated.diagnostics) >= 1
    todo = next(r for r in diagnostics if r["properties"]["severity"] == "todo")
    assert todo["level"] == "warning"
    assert "cfg.dev()" in todo["message"]["text"]


def test_fixes_rebuild_the_migrated_code():
    """Applying every replacement of the log to the original text gives what --diff shows:
    regions and columns are right, with CRLF and non-ASCII text too."""
    sources = {
        "simple.py": PIPELINE,
        "helper.py": HELPER,
        "crlf.py": HELPER.replace("\n", "\r\n"),
    }
    for name, text in sources.items():
        write(Path(name), text)
    _, log = sarif(".")
    results = log["runs"][0]["results"]
    for name, text in sources.items():
        assert apply_sarif_fixes(text, results, name) == migrate_source(text, path=name).code, name


def test_uris_are_relative_to_srcroot_and_escaped():
    write(Path("with space") / "a#b.py", PIPELINE)
    _, log = sarif(".")
    (run,) = log["runs"]
    location = run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": "with%20space/a%23b.py", "uriBaseId": "SRCROOT"}
    assert run["originalUriBaseIds"]["SRCROOT"]["uri"] == Path.cwd().resolve().as_uri() + "/"
    assert run["columnKind"] == "unicodeCodePoints"


@pytest.mark.skipif(sys.platform in ("darwin", "win32"), reason="names must be valid Unicode there")
def test_a_file_name_that_is_not_utf8_is_percent_encoded_byte_by_byte(validator):
    """Its str holds a surrogate, which made the whole SARIF log fail to encode."""
    bad = os.fsdecode(b"bad\xff.py")
    write(Path(bad), PIPELINE)
    write(Path("good.py"), PIPELINE)
    code, log = sarif(".")
    assert code == 0
    validator.validate(log)
    results = log["runs"][0]["results"]
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results}
    assert uris == {"bad%FF.py", "good.py"}


def test_absolute_paths_are_file_uris(tmp_path):
    path = write(tmp_path / "abs.py", PIPELINE)
    _, log = sarif(path.resolve())
    uri = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"][
        "uri"
    ]
    assert uri == path.resolve().as_uri()


def test_files_that_cannot_be_processed_are_notifications():
    write(Path("bad.py"), "import nvidia.dali\ndef broken(:\n")
    code, log = sarif("bad.py")
    assert code == 2
    (invocation,) = log["runs"][0]["invocations"]
    assert invocation["executionSuccessful"] is False
    (note,) = invocation["toolExecutionNotifications"]
    assert note["level"] == "error"
    text = note["message"]["text"]
    assert text.startswith("bad.py:") and ": not valid Python" in text
    assert log["runs"][0]["results"] == []


def test_write_marks_fixes_written():
    write(Path("simple.py"), PIPELINE)
    _, log = sarif("--write", "simple.py")
    assert all(
        r["properties"]["written"] for r in log["runs"][0]["results"] if "fixId" in r["properties"]
    )
    _, log = sarif("--check", "simple.py")  # written already: nothing left
    assert log["runs"][0]["results"] == []


# -- pre-commit ---------------------------------------------------------------------------------------


def test_pre_commit_hook_runs_dali_migrate_check():
    (hook,) = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "dali-migrate"
    assert hook["language"] == "python"
    assert hook["types"] == ["python"]
    assert hook["entry"].split() == ["dali-migrate", "--check"]
    # what pre-commit runs: the entry followed by the staged file names
    write(Path("simple.py"), PIPELINE)
    write(Path("done.py"), migrate_source(PIPELINE).code)
    entry = [sys.executable, "-m", "dali_migrate", *hook["entry"].split()[1:]]
    pending = subprocess.run(
        [*entry, "simple.py", "done.py"], capture_output=True, text=True, timeout=120
    )
    assert pending.returncode == 1, pending.stderr
    assert "+++ b/simple.py" in pending.stdout and "done.py" not in pending.stdout
    clean = subprocess.run([*entry, "done.py"], capture_output=True, text=True, timeout=120)
    assert clean.returncode == 0, clean.stderr
