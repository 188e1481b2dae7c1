"""The interactive review (``dali-migrate --interactive``) and its replay (``--decisions``).

The review reads one answer per line when standard input is not a terminal, so most tests drive
it through click's CliRunner with scripted input and check the files written and the decisions
file; one test runs it in a pseudo-terminal, answering with single key presses.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from click.testing import Result as CliResult
from dependent_fixes import CHAINED, DEFINITION_FIRST, chained_rule  # noqa: F401 (a fixture)
from samples import PIPELINE

from dali_migrate import apply_fixes, migrate_source
from dali_migrate.cli import main
from dali_migrate.review import DEFAULT_DECISIONS, KEYS, PROMPT

EXIT_OK, EXIT_ERROR = 0, 2

#: three fixes, in source order: DM101 on decode, DM103 on decode, DM101 on flip
HELPER = '''\
from nvidia.dali import fn


def decode(jpegs):
    return fn.decoders.image(jpegs)[0]


def flip(images):
    return fn.flip(images, horizontal=1)
'''


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch, tmp_path):
    """An empty working directory (so the decisions file lands there), no colours."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for var in (
        "COLUMNS",
        "LINES",
        "FORCE_COLOR",
        "TTY_COMPATIBLE",
        "TTY_INTERACTIVE",
        "EDITOR",
        "VISUAL",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_COLOR", "1")


def review(*args, answers: str = "") -> CliResult:
    """``dali-migrate -i ARGS`` with ``answers`` (one a line) on standard input."""
    return CliRunner().invoke(
        main, ["-i", *map(os.fspath, args)], input=answers, catch_exceptions=False
    )


def replay(decisions: Path, *args) -> CliResult:
    return CliRunner().invoke(
        main, ["--decisions", os.fspath(decisions), *map(os.fspath, args)], catch_exceptions=False
    )


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def fix_ids(code: str) -> list[str]:
    """The ids the review asks about, in its order (the import fix is derived, never asked)."""
    return [f.id for f in migrate_source(code).fixes if f.rule != "DM100"]


def decisions() -> dict:
    return json.loads(DEFAULT_DECISIONS.read_text())


def prompts(result: CliResult) -> int:
    return result.stdout.count(PROMPT)


DECODE_FN, DECODE_DEVICE, FLIP_FN = fix_ids(HELPER)


def test_helper_fixes_are_what_the_tests_assume():
    assert [i.split(":")[:2] for i in (DECODE_FN, DECODE_DEVICE, FLIP_FN)] == [
        ["DM101", "decode"],
        ["DM103", "decode"],
        ["DM101", "flip"],
    ]


# -- every key ----------------------------------------------------------------------------------


def test_y_applies_and_n_skips():
    path = write(Path("helper.py"), HELPER)

    result = review(path, answers="y\nn\ny\n")

    assert result.exit_code == EXIT_OK, result.stderr
    assert prompts(result) == 3
    # each diff is the change on top of what was accepted before it
    assert (
        "-    return ndd.decoders.image(jpegs)[0]\n+    return ndd.decoders.image(jpegs).slice[0]"
        in result.stdout
    )
    assert path.read_text() == apply_fixes(HELPER, [DECODE_FN, FLIP_FN], todo_markers=False)
    text = path.read_text()
    assert "ndd.decoders.image(jpegs)[0]" in text
    assert "ndd.flip(images, horizontal=1)" in text
    assert "import nvidia.dali.experimental.dynamic as ndd" in text  # the import fix, recomputed
    assert decisions() == {
        "version": 1,
        "files": {
            "helper.py": {DECODE_FN: "accepted", DECODE_DEVICE: "rejected", FLIP_FN: "accepted"}
        },
    }
    assert "1 file reviewed, 1 written" in result.stdout
    assert "fixes: 2 applied, 1 skipped" in result.stdout


def test_each_fix_is_shown_with_rule_safety_message_and_diff():
    path = write(Path("helper.py"), HELPER)
    out = review(path, answers="n\nn\nn\n").stdout
    assert f"[1/3] DM101 (safe)  helper.py:5  {DECODE_FN}" in out
    assert f"[2/3] DM103 (safe)  helper.py:5  {DECODE_DEVICE}" in out
    assert "node[i] becomes node.slice[i]" in out
    assert (
        "-    return fn.decoders.image(jpegs)[0]\n+    return fn.decoders.image(jpegs).slice[0]"
        in out
    )
    assert path.read_text() == HELPER  # everything skipped: nothing written


def test_a_applies_this_and_the_rest_of_the_file_only():
    a = write(Path("a.py"), HELPER)
    b = write(Path("b.py"), HELPER)

    result = review(a, b, answers="n\na\nn\nn\ny\n")

    assert result.exit_code == EXIT_OK, result.stderr
    assert prompts(result) == 2 + 3  # a.py: two questions, then none; b.py: asked again
    assert a.read_text() == apply_fixes(HELPER, [DECODE_DEVICE, FLIP_FN], todo_markers=False)
    assert b.read_text() == apply_fixes(HELPER, [FLIP_FN], todo_markers=False)
    files = decisions()["files"]
    assert files["a.py"] == {DECODE_FN: "rejected", DECODE_DEVICE: "accepted", FLIP_FN: "accepted"}
    assert files["b.py"] == {DECODE_FN: "rejected", DECODE_DEVICE: "rejected", FLIP_FN: "accepted"}


def test_d_skips_the_rest_of_the_file_only():
    a = write(Path("a.py"), HELPER)
    b = write(Path("b.py"), HELPER)

    result = review(a, b, answers="y\nd\ny\ny\ny\n")

    assert result.exit_code == EXIT_OK, result.stderr
    assert prompts(result) == 2 + 3
    assert a.read_text() == apply_fixes(HELPER, [DECODE_FN], todo_markers=False)
    assert b.read_text() == apply_fixes(
        HELPER, [DECODE_FN, DECODE_DEVICE, FLIP_FN], todo_markers=False
    )
    assert decisions()["files"]["a.py"] == {
        DECODE_FN: "accepted",
        DECODE_DEVICE: "rejected",
        FLIP_FN: "rejected",
    }


def test_capital_a_applies_everything_left_in_every_file():
    a = write(Path("a.py"), HELPER)
    b = write(Path("b.py"), PIPELINE)

    result = review(a, b, answers="n\nA\n")

    assert result.exit_code == EXIT_OK, result.stderr
    assert prompts(result) == 2
    assert a.read_text() == apply_fixes(HELPER, [DECODE_DEVICE, FLIP_FN], todo_markers=False)
    assert b.read_text() == migrate_source(PIPELINE).code
    assert "2 files reviewed, 2 written" in result.stdout
    assert "fixes: 3 applied, 1 skipped" in result.stdout


def test_capital_a_on_a_project_writes_what_write_writes(tmp_path):
    """Pipelines defined in one module and run in another: the review applies the fixes with
    what the other modules said, as --write does."""
    projects = Path(__file__).resolve().parent.parent / "fixtures" / "projects"
    case = projects / "training"
    shutil.copytree(case / "old", "project")

    result = review("project", answers="A\n")

    assert result.exit_code == EXIT_OK, result.stderr
    assert prompts(result) == 1
    for expected in sorted((case / "new").rglob("*.py")):
        got = Path("project") / expected.relative_to(case / "new")
        assert got.read_text() == expected.read_text(), got


def test_q_midway_writes_what_was_accepted_and_nothing_else():
    a = write(Path("a.py"), HELPER)
    b = write(Path("b.py"), PIPELINE)

    result = review(a, b, answers="y\nn\nq\n")

    assert result.exit_code == EXIT_OK, result.stderr
    assert prompts(result) == 3
    assert a.read_text() == apply_fixes(HELPER, [DECODE_FN], todo_markers=False)
    assert b.read_bytes() == PIPELINE.encode()  # never reviewed, never written
    # what was decided is remembered; the question left open is not
    assert decisions()["files"] == {"a.py": {DECODE_FN: "accepted", DECODE_DEVICE: "rejected"}}
    assert "fixes: 1 applied, 1 skipped, 1 not decided" in result.stdout
    assert "stopped before the end" in result.stdout
    assert "b.py" not in result.stdout


def test_q_at_once_changes_nothing():
    a = write(Path("a.py"), HELPER)
    result = review(a, answers="q\n")
    assert result.exit_code == EXIT_OK
    assert a.read_bytes() == HELPER.encode()
    assert decisions()["files"] == {}


def test_end_of_input_stops_like_q():
    a = write(Path("a.py"), HELPER)
    b = write(Path("b.py"), HELPER)
    result = review(a, b, answers="n\ny\n")
    assert result.exit_code == EXIT_OK
    assert "(end of input: quitting)" in result.stdout
    assert a.read_text() == apply_fixes(HELPER, [DECODE_DEVICE], todo_markers=False)
    assert b.read_bytes() == HELPER.encode()


def test_question_mark_explains_the_rule_and_asks_again():
    path = write(Path("helper.py"), HELPER)

    result = review(path, answers="?\ny\nq\n")

    assert result.exit_code == EXIT_OK, result.stderr
    out = result.stdout
    explained = out[out.index(PROMPT + "?") :]
    assert explained.startswith(PROMPT + "?\nDM101 fn-to-ndd (safe)\n")
    assert "Before (``fixtures/DM101/" in explained and "After (``fixtures/DM101/" in explained
    assert "ndd.flip(images, horizontal=1)" in explained
    assert prompts(result) == 3  # the same fix was asked again, then the next one
    assert path.read_text() == apply_fixes(HELPER, [DECODE_FN], todo_markers=False)


def test_unknown_answer_lists_the_keys_and_asks_again():
    path = write(Path("helper.py"), HELPER)
    result = review(path, answers="yes\ny\nq\n")
    assert "unknown answer 'yes'" in result.stdout
    for key, meaning in KEYS.items():
        assert f"  {key}  {meaning}" in result.stdout
    assert path.read_text() == apply_fixes(HELPER, [DECODE_FN], todo_markers=False)


# -- e: the editor ---------------------------------------------------------------------------------


def _editor(monkeypatch, tmp_path, body: str) -> Path:
    """Point $EDITOR at a Python script whose ``body`` edits the file at ``path`` and may keep
    what it was given in ``seen``."""
    script = tmp_path / "editor.py"
    seen = tmp_path / "seen.py"
    script.write_text(
        "import sys\nfrom pathlib import Path\n"
        f"path = Path(sys.argv[1])\nseen = Path({str(seen)!r})\n"
        "seen.write_bytes(path.read_bytes())\n" + body
    )
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")
    return seen


def test_e_applies_what_the_reviewer_saved(monkeypatch, tmp_path):
    seen = _editor(
        monkeypatch,
        tmp_path,
        "path.write_text(path.read_text().replace('def flip', '# checked by hand\\ndef flip'))\n",
    )
    path = write(Path("helper.py"), HELPER)

    result = review(path, answers="e\ny\n")

    assert result.exit_code == EXIT_OK, result.stderr
    # the editor was given the file with the fix (and its import) applied
    assert seen.read_text() == apply_fixes(HELPER, [DECODE_FN], todo_markers=False)
    text = path.read_text()
    assert "# checked by hand\ndef flip" in text  # the hand edit is kept
    assert "ndd.decoders.image(jpegs" in text
    assert (
        "ndd.flip(images, horizontal=1)" in text
    )  # a later fix, found again in the edited text by id
    assert text.count("import nvidia.dali.experimental.dynamic as ndd") == 1
    compile(text, "helper.py", "exec")
    files = decisions()["files"]["helper.py"]
    assert files[DECODE_FN] == "accepted" and files[FLIP_FN] == "accepted"
    # DM103 only rewrites indexing of fn nodes: once the call is ndd, the edited file no longer has that fix
    assert f"{DECODE_DEVICE} is left out" in result.stdout
    assert DECODE_DEVICE not in files


def test_e_saved_unchanged_is_the_same_as_y(monkeypatch, tmp_path):
    _editor(monkeypatch, tmp_path, "")
    path = write(Path("helper.py"), HELPER)
    result = review(path, answers="e\nn\nn\n")
    assert result.exit_code == EXIT_OK, result.stderr
    assert path.read_text() == apply_fixes(HELPER, [DECODE_FN], todo_markers=False)


@pytest.mark.parametrize(
    "body, reason",
    [
        ("sys.exit(3)\n", "exited with status 3"),
        ("path.write_text('def broken(:\\n')\n", "not valid Python"),
    ],
)
def test_e_that_fails_takes_nothing_and_asks_again(monkeypatch, tmp_path, body, reason):
    _editor(monkeypatch, tmp_path, body)
    path = write(Path("helper.py"), HELPER)

    result = review(path, answers="e\nn\ny\nq\n")

    assert result.exit_code == EXIT_OK
    assert reason in result.stderr
    assert "nothing was taken from the editor" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert prompts(result) == 4  # the fix was asked again after the failed edit
    assert path.read_text() == apply_fixes(HELPER, [DECODE_DEVICE], todo_markers=False)


def test_e_without_an_editor_says_so():
    path = write(Path("helper.py"), HELPER)
    result = review(path, answers="e\nq\n")
    assert "no editor: set $EDITOR" in result.stderr
    assert path.read_bytes() == HELPER.encode()


# -- remembered decisions -------------------------------------------------------------------------


def test_second_run_does_not_ask_about_what_was_rejected():
    path = write(Path("helper.py"), HELPER)
    review(path, answers="n\ny\nn\n")
    after_first = path.read_text()

    again = review(path, answers="")

    assert again.exit_code == EXIT_OK, again.stderr
    assert prompts(again) == 0
    assert "2 skipped as decided in an earlier review" in again.stdout
    assert path.read_text() == after_first


def test_rejections_survive_unrelated_edits_of_the_file():
    path = write(Path("helper.py"), HELPER)
    review(path, answers="n\nn\nn\n")
    # change code that none of the fixes touches: the ids, and so the decisions, still hold
    edited = HELPER.replace(
        "def flip(images):", "def mirror(x):\n    return x[::-1]\n\n\ndef flip(images):"
    )
    path.write_text(edited)

    again = review(path, answers="")

    assert prompts(again) == 0
    assert "3 skipped as decided in an earlier review" in again.stdout
    assert path.read_text() == edited


def test_decisions_are_replayed_without_questions(tmp_path):
    first = write(Path("one") / "src" / "helper.py", HELPER).resolve()
    second = write(Path("two") / "src" / "helper.py", HELPER).resolve()
    os.chdir("one")
    review(Path("src") / "helper.py", answers="y\nn\ny\n")
    store = Path.cwd() / DEFAULT_DECISIONS
    os.chdir("../two")

    result = replay(store, "src")

    assert result.exit_code == EXIT_OK, result.stderr
    assert prompts(result) == 0
    assert second.read_bytes() == first.read_bytes()
    assert "src/helper.py: 2 applied, 1 skipped" in result.stdout
    assert "1 file replayed, 1 written" in result.stdout
    assert not DEFAULT_DECISIONS.exists()  # a replay reads the decisions, it does not write any


def test_replay_leaves_undecided_fixes_alone():
    Path("d.json").write_text(
        json.dumps({"version": 1, "files": {"helper.py": {FLIP_FN: "accepted"}}})
    )
    path = write(Path("helper.py"), HELPER)
    result = replay(Path("d.json"), path)
    assert result.exit_code == EXIT_OK, result.stderr
    assert path.read_text() == apply_fixes(HELPER, [FLIP_FN], todo_markers=False)
    assert "helper.py: 1 applied, 0 skipped, 2 not decided" in result.stdout


def test_interactive_with_a_decisions_file_uses_it():
    path = write(Path("helper.py"), HELPER)
    Path("mine.json").write_text(
        json.dumps({"version": 1, "files": {"helper.py": {DECODE_FN: "rejected"}}})
    )
    result = CliRunner().invoke(
        main, ["-i", "--decisions", "mine.json", "helper.py"], input="y\ny\n"
    )
    assert result.exit_code == EXIT_OK, result.stderr
    assert prompts(result) == 2
    assert path.read_text() == apply_fixes(HELPER, [DECODE_DEVICE, FLIP_FN], todo_markers=False)
    assert json.loads(Path("mine.json").read_text())["files"]["helper.py"] == {
        DECODE_FN: "rejected",
        DECODE_DEVICE: "accepted",
        FLIP_FN: "accepted",
    }
    assert not DEFAULT_DECISIONS.exists()


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "no such decisions file"),
        ("{not json", "not a decisions file"),
        ('{"version": 7, "files": {}}', "not a decisions file of version 1"),
        ('{"version": 1, "files": {"a.py": {"X": "maybe"}}}', "not a decisions file"),
    ],
)
def test_bad_decisions_file_is_one_error_line(content, message):
    path = write(Path("helper.py"), HELPER)
    if content is not None:
        Path("d.json").write_text(content)
    result = replay(Path("d.json"), path)
    assert result.exit_code == EXIT_ERROR
    assert result.stderr.startswith("error: d.json: ")
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert path.read_bytes() == HELPER.encode()


# -- dependencies ------------------------------------------------------------------------------------


def test_a_fix_is_offered_with_the_fixes_it_needs(chained_rule):
    path = write(Path("chained.py"), CHAINED)
    fixes = migrate_source(CHAINED).fixes
    calls = [f for f in fixes if f.rule == "DM990" and f.depends_on]
    (definition,) = [f for f in fixes if f.rule == "DM990" and not f.depends_on]

    result = review(path, answers="y\ny\n")

    assert result.exit_code == EXIT_OK, result.stderr
    assert prompts(result) == 2  # the first call pulled the definition in
    assert f"pulls in {definition.id}: rename the definition" in result.stdout
    assert path.read_text() == CHAINED.replace("old_reader", "new_reader")
    assert set(decisions()["files"]["chained.py"]) == {definition.id, *(c.id for c in calls)}


def test_skipping_a_needed_fix_skips_what_needs_it(chained_rule):
    path = write(Path("chained.py"), DEFINITION_FIRST)
    fixes = migrate_source(DEFINITION_FIRST).fixes
    calls = [f for f in fixes if f.rule == "DM990" and f.depends_on]
    (definition,) = [f for f in fixes if f.rule == "DM990" and not f.depends_on]
    assert len(calls) == 2

    result = review(path, answers="n\n")

    assert result.exit_code == EXIT_OK, result.stderr
    assert prompts(result) == 1  # the definition; then the calls cannot be offered
    for call in calls:
        assert f"needed by {call.id}: skipping this fix skips it too" in result.stdout
        assert (
            f"{call.id} is not applied: needs {definition.id}, which was skipped" in result.stdout
        )
    assert "2 not offered (they need a skipped fix)" in result.stdout
    assert path.read_bytes() == DEFINITION_FIRST.encode()
    # what was not offered is not remembered as rejected: it is asked about once its need is met
    assert decisions()["files"]["chained.py"] == {definition.id: "rejected"}


def test_skipping_a_fix_keeps_what_it_pulled_in_undecided(chained_rule):
    path = write(Path("chained.py"), CHAINED)
    first_call, second_call = [f for f in migrate_source(CHAINED).fixes if f.depends_on]

    result = review(path, answers="n\ny\n")

    assert result.exit_code == EXIT_OK, result.stderr
    assert prompts(result) == 2  # the second call came with the definition: nothing else to ask
    assert path.read_text() == CHAINED.replace("def old_reader", "def new_reader").replace(
        'old_reader("/data/val")', 'new_reader("/data/val")'
    )
    assert decisions()["files"]["chained.py"][first_call.id] == "rejected"


# -- errors and files ---------------------------------------------------------------------------------


def test_a_file_that_changed_during_the_review_is_not_overwritten(monkeypatch, tmp_path):
    # the "editor" also changes the file on disk, as another program might during a review
    _editor(
        monkeypatch,
        tmp_path,
        "Path('helper.py').write_text('# changed meanwhile\\n' + Path('helper.py').read_text())\n",
    )
    path = write(Path("helper.py"), HELPER)

    result = review(path, answers="e\ny\n")

    assert result.exit_code == EXIT_ERROR
    assert "helper.py: file changed on disk since it was read; not overwritten" in result.stderr
    assert path.read_text() == "# changed meanwhile\n" + HELPER
    assert "helper.py" not in decisions()["files"]


def test_unparsable_file_is_reported_and_the_others_reviewed():
    bad = write(Path("a_bad.py"), "import nvidia.dali\ndef broken(:\n")
    good = write(Path("b_good.py"), HELPER)
    result = review(bad, good, answers="y\ny\ny\n")
    assert result.exit_code == EXIT_ERROR
    assert re.search(r"error: a_bad.py:\d+:\d+: not valid Python", result.stderr)
    assert good.read_text() == migrate_source(HELPER).code
    assert "1 errors" in result.stdout


def test_crlf_and_encoding_are_kept():
    source = "# -*- coding: latin-1 -*-\n# caf\u00e9\n" + HELPER
    path = write(Path("helper.py"), source.replace("\n", "\r\n").encode("latin-1"))
    result = review(path, answers="y\ny\ny\n")
    assert result.exit_code == EXIT_OK, result.stderr
    data = path.read_bytes()
    assert data.startswith(b"# -*- coding: latin-1 -*-\r\n# caf\xe9\r\n")
    assert data.count(b"\n") == data.count(b"\r\n")
    assert b"ndd.flip(images, horizontal=1)" in data


def test_diagnostics_are_shown_but_no_todo_marker_is_written():
    code = HELPER.replace(
        "fn.decoders.image(jpegs)[0]", "fn.decoders.image(jpegs, device=cfg.device())[0]"
    )
    path = write(Path("helper.py"), code)
    result = review(path, answers="y\ny\ny\n")
    assert result.exit_code == EXIT_OK, result.stderr
    assert (
        "helper.py:5:" in result.stdout
        and ": DM102 todo: device=cfg.device() may be" in result.stdout
    )
    text = path.read_text()
    assert text == apply_fixes(code, fix_ids(code), todo_markers=False)
    assert "TODO(dali-migrate)" not in text  # the review writes the accepted fixes only


@pytest.mark.parametrize(
    "extra",
    [["--check"], ["--diff"], ["--format", "json"], ["--format", "sarif"], ["--device", "cpu"]],
)
def test_review_does_not_combine_with_other_modes(extra):
    path = write(Path("helper.py"), HELPER)
    result = CliRunner().invoke(main, ["-i", *extra, "helper.py"], input="y\n")
    assert result.exit_code == EXIT_ERROR
    assert "cannot be combined with --interactive" in result.stderr
    assert path.read_bytes() == HELPER.encode()


# -- a real terminal ------------------------------------------------------------------------------------


def _controlling_terminal() -> None:
    """In the child: a new session whose controlling terminal is the pty on stdin, as in a shell
    (so Ctrl-C sends SIGINT)."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """A child process on a pseudo-terminal; what it prints is collected as it comes."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        self.master, slave = pty.openpty()
        env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "EDITOR", "VISUAL")}
        env.update(TERM="xterm-256color", COLUMNS="100", LINES="40")
        self.proc = subprocess.Popen(
            args,
            cwd=cwd,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            preexec_fn=_controlling_terminal,
        )
        os.close(slave)
        self.output = bytearray()

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return False
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # EIO: the child closed the terminal
            return False
        self.output += chunk
        return bool(chunk)

    def wait_for(self, text: bytes, count: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while self.output.count(text) < count:
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(left):
                raise AssertionError(
                    f"waited for {count}x {text!r}; got:\n{bytes(self.output[-2000:])!r}"
                )

    def press(self, key: str) -> None:
        os.write(self.master, key.encode())

    def finish(self, timeout: float = 120) -> int:
        while self._read(timeout):
            pass
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"still running; it printed:\n{bytes(self.output[-2000:])!r}"
            ) from None
        finally:
            os.close(self.master)


def test_review_in_a_pseudo_terminal_takes_single_key_presses():
    path = write(Path("helper.py"), HELPER)
    term = Terminal([sys.executable, "-m", "dali_migrate", "-i", "helper.py"], Path.cwd())
    try:
        for n, key in enumerate("ynq", start=1):
            term.wait_for(PROMPT.encode(), n)
            term.press(key)  # one key, no Enter
        code = term.finish()
    except BaseException:
        term.proc.kill()
        raise
    shown = bytes(term.output).decode("utf-8", "replace")

    assert code == EXIT_OK, shown
    assert path.read_text() == apply_fixes(HELPER, [DECODE_FN], todo_markers=False)
    assert decisions()["files"]["helper.py"] == {DECODE_FN: "accepted", DECODE_DEVICE: "rejected"}
    # the diff is highlighted: removed and added lines carry colour escapes
    assert "\x1b[" in shown
    removed = shown.index("-    return fn.decoders.image(jpegs)[0]")
    assert "\x1b[" in shown[removed - 20 : removed]
    assert "stopped before the end" in shown


def test_ctrl_c_in_a_terminal_leaves_the_file_under_review_untouched():
    path = write(Path("helper.py"), HELPER)
    term = Terminal([sys.executable, "-m", "dali_migrate", "-i", "helper.py"], Path.cwd())
    try:
        term.wait_for(PROMPT.encode(), 1)
        term.press("y")
        term.wait_for(PROMPT.encode(), 2)
        term.press("\x03")  # Ctrl-C: the terminal sends SIGINT
        code = term.finish()
    except BaseException:
        term.proc.kill()
        raise
    shown = bytes(term.output).decode("utf-8", "replace")

    assert code == 130, shown
    assert "interrupted" in shown
    assert (
        path.read_bytes() == HELPER.encode()
    )  # the file's fixes were not all decided: not written
    assert "Traceback" not in shown


@pytest.mark.parametrize("order", [["-i", "--write"], ["--write", "-i"]])
def test_write_beside_interactive_is_what_interactive_does(order):
    """``-i`` writes what is accepted; ``--write`` next to it asks for nothing more."""
    path = write(Path("helper.py"), HELPER)
    result = CliRunner().invoke(main, [*order, "helper.py"], input="y\nn\ny\n")
    assert result.exit_code == EXIT_OK, result.stderr
    accepted = fix_ids(HELPER)[0::2]
    assert path.read_text() == apply_fixes(HELPER, accepted, todo_markers=False)
