"""What the tool writes always parses, uses the file's own newlines, and a bad or hostile input is
one file's one-line error, never the end of the run (inputs found by fuzzing and by attacks on
the command line)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from samples import PIPELINE

import dali_migrate.api as api
import dali_migrate.engine as engine
from dali_migrate import Diagnostic, Edit, Fix, SourceParseError, Span, migrate_source
from dali_migrate.fixes import TODO_PREFIX, parses

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: a data `and` in a loop, written over two lines: the pipeline is refused with a reason that
#: quotes it
AND_OVER_TWO_LINES = """\
from nvidia.dali import pipeline_def, fn

@pipeline_def(batch_size=2, num_threads=1, device_id=0, enable_conditionals=True)
def p(rounds=2):
    a = fn.random.coin_flip()
    b = fn.random.coin_flip()
    for _ in range(rounds):
        a = (a
             and b)
    return a

pipe = p()
pipe.build()
out, = pipe.run()
"""


def _run_python(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter (for inputs that used to crash the process itself)."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env
    )


# -- every TODO, comment and message is one line; markers are parse-checked ------------------------


def test_todo_that_quotes_code_over_two_lines_is_one_comment_line():
    result = migrate_source(AND_OVER_TWO_LINES)
    assert parses(result.code)
    todos = [ln for ln in result.code.splitlines() if TODO_PREFIX in ln]
    assert len(todos) == 1 and "`a and b`" in todos[0], result.code
    assert all("\n" not in d.message for d in result.diagnostics)
    assert migrate_source(result.code).code == result.code


def test_messages_are_one_line_whatever_made_them():
    d = Diagnostic("DM200", "`x\n        and y` is\r\nnot\u2029supported", 3)
    assert d.message == "`x and y` is not supported"
    f = Fix("DM101:f:1", "DM101", "a\nb", "safe", (Edit(0, 1, "x"),), Span(1, 0, 1, 1))
    assert f.message == "a b"


def test_a_marker_that_would_not_parse_is_not_written(monkeypatch):
    """The parse check covers TODO markers as it covers fixes: a marker whose text is not one
    comment line is dropped and reported as its rule's internal error."""
    real = api._analyse

    def with_bad_marker(*args, **kwargs):
        analysis = real(*args, **kwargs)
        analysis.diagnostics.append(
            Diagnostic("DM999", "made up", 1, 0, "todo", Edit(0, 0, "# TODO\nbroken(\n"))
        )
        return analysis

    monkeypatch.setattr(api, "_analyse", with_bad_marker)
    result = migrate_source(PIPELINE)
    assert parses(result.code) and "broken(" not in result.code
    assert "ndd" in result.code  # the migration itself is kept
    errors = [d for d in result.diagnostics if d.severity == "error"]
    assert [d.rule for d in errors] == ["DM999"] and "would not parse" in errors[0].message


@pytest.mark.parametrize("joined", [False, True], ids=["own-line", "joined-to-the-import"])
def test_todo_marker_stays_above_its_statement_where_the_import_goes(joined):
    """The ndd import is inserted where the marker goes: the marker used to land above the
    import, away from its statement, and was added again on the next run."""
    sep = "; " if joined else "\n"
    code = f"from nvidia.dali import fn{sep}x = fn.no_such_operator(1)\n"
    code += "\ndef helper(y):\n    return fn.flip(y)\n"
    result = migrate_source(code)
    lines = result.code.splitlines()
    todo = next(i for i, ln in enumerate(lines) if ln.startswith(TODO_PREFIX))
    assert "fn.no_such_operator(1)" in lines[todo + 1]
    assert "import nvidia.dali.experimental.dynamic as ndd" in lines[:todo]
    assert migrate_source(result.code).code == result.code


# -- newlines -----------------------------------------------------------------------------------


def _newlines(text: str) -> set[str]:
    return set(re.findall(r"\r\n|\r|\n", text))


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
@pytest.mark.parametrize("final", [True, False])
def test_output_uses_the_file_newline_everywhere(newline, final):
    """A generated docstring of several lines used to bring its own \\n into a CRLF file."""
    source = (ROOT / "examples" / "torch_loader.py").read_text().replace("\n", newline)
    if not final:
        source = source.rstrip(newline)
    result = migrate_source(source)
    assert result.changed and '"""' in result.code
    assert _newlines(result.code) == {newline}
    assert all(_newlines(e.text) <= {newline} for f in result.fixes for e in f.edits)
    assert migrate_source(result.code).code == result.code


def test_diff_splits_lines_where_python_does_and_marks_a_missing_final_newline(tmp_path):
    old = "s = 'a\u2029b'\r\nx = 1"
    new = "s = 'a\u2029b'\r\nx = 2"
    diff = engine.unified_diff("m.py", old, new)
    assert "-x = 1\n\\ No newline at end of file\n+x = 2\n\\ No newline at end of file\n" in diff
    assert " s = 'a\u2029b'\r\n" in diff  # one line, not two
    (tmp_path / "m.py").write_bytes(old.encode())
    (tmp_path / "p.diff").write_bytes(diff.encode())
    done = subprocess.run(["patch", "-s", "-p1", "-i", "p.diff"], cwd=tmp_path, capture_output=True)
    if done.returncode == 127:  # pragma: no cover - no patch(1)
        return
    assert (tmp_path / "m.py").read_bytes() == new.encode()


# -- syntax errors and nesting --------------------------------------------------------------------


def test_syntax_error_is_reported_at_its_line_with_the_path_prefix(tmp_path):
    code = "from nvidia.dali import fn\n\n\ndef p(:\n    pass\n"
    with pytest.raises(SourceParseError) as info:
        migrate_source(code, path="p.py")
    assert str(info.value) == "p.py:4:6: not valid Python: invalid syntax"
    assert (info.value.line, info.value.column) == (4, 6)
    path = tmp_path / "p.py"
    path.write_text(code)
    (fr,) = engine.run([path], engine.Options(jobs=1))
    assert fr.status == "error" and fr.error == f"{path}:4:6: not valid Python: invalid syntax"


#: shapes that nest 8,000 levels deep: CPython refuses some, libcst's native parser crashed the
#: whole process on others (``and`` chains: a segmentation fault), Python-side walks raised
#: RecursionError on the rest
DEEP = {
    "parens": "x = " + "(" * 8000 + "fn.flip(1)" + ")" * 8000 + "\n",
    "and": "def h(y):\n    return y" + " and fn.flip(y)" * 8000 + "\n",
    "plus": "def h(y):\n    return y" + " + fn.flip(y)" * 8000 + "\n",
    "unary": "def h(y):\n    return " + "-" * 8000 + "fn.flip(y)\n",
    "attribute": "def h(y):\n    return fn.flip(y)" + ".a" * 8000 + "\n",
}


def test_deep_nesting_is_one_line_error_not_a_crash():
    code = """
from dali_migrate import SourceParseError, migrate_source
from test_robustness import DEEP
for name, body in DEEP.items():
    try:
        migrate_source("from nvidia.dali import fn\\n" + body, path=name + ".py")
    except SourceParseError as e:
        assert "\\n" not in str(e) and str(e).startswith(name + ".py:"), str(e)
        print(name, "refused:", e.reason, "at", e.line)
    else:
        raise AssertionError(name + " was analysed")
"""
    done = _run_python(code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(done.stdout.splitlines()) == len(DEEP), done.stdout
    assert "parens refused: not valid Python: too many nested parentheses" in done.stdout
    assert (
        "and refused: too deeply nested to analyse (8007 levels; at most 1000 are) at 3"
        in done.stdout
    )


@pytest.mark.parametrize(
    "body",
    [
        "def h(x):\n    return " + "{1: " * 100 + "fn.flip(x)" + "}" * 100 + "\n",
        "x = " + "{1: " * 100 + "fn.flip(1)" + "}" * 100 + "\n",
        "def h(y):\n    return y" + " + fn.flip(y)" * 300 + "\n",
    ],
    ids=["dict-in-function", "dict-at-module-level", "long-sum"],
)
def test_a_hundred_levels_migrate_and_stay_fixed(body):
    """Nesting that walks past the default recursion limit is analysed on a deeper stack."""
    code = "from nvidia.dali import fn\n" + body
    limit = sys.getrecursionlimit()
    result = migrate_source(code)
    assert sys.getrecursionlimit() == limit
    assert "ndd.flip(" in result.code and parses(result.code)
    assert not [d for d in result.diagnostics if d.severity == "error"]
    assert migrate_source(result.code).code == result.code


@pytest.mark.parametrize("shape", ["and", "attribute"])
def test_too_deep_file_is_that_file_error_and_the_run_goes_on(tmp_path, shape):
    """``attribute``: CPython's own parser raises RecursionError; the file also names
    pipeline_def, so the cross-module discovery parses it too."""
    deep = tmp_path / "a_deep.py"
    deep.write_text("from nvidia.dali import fn, pipeline_def\n" + DEEP[shape])
    good = tmp_path / "b_good.py"
    good.write_text(PIPELINE)
    code = f"""
from dali_migrate.engine import Options, run
for fr in run([{str(tmp_path)!r}], Options(jobs=1)):
    print(fr.status, fr.error or "")
"""
    done = _run_python(code)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"error {deep}:") and "too deeply nested" in lines[0]
    assert lines[1] == "changed "


def test_internal_error_whose_message_cannot_be_made_is_one_line(monkeypatch, tmp_path):
    """A KeyError's message is the repr of its key: a deep libcst node's repr recursed."""

    class Unprintable(KeyError):
        def __str__(self) -> str:
            raise RecursionError("maximum recursion depth exceeded")

    def boom(*args, **kwargs):
        raise Unprintable("x")

    monkeypatch.setattr(engine, "_migrate", boom)
    path = tmp_path / "p.py"
    path.write_text(PIPELINE)
    fr = engine.process_file(str(path), engine.Options())
    assert fr.status == "error"
    assert fr.error == f"{path}: internal error: Unprintable: (its message could not be made)"


# -- files that are not regular files -------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_given_on_the_command_line_does_not_block_the_run(tmp_path):
    (tmp_path / "pipes.py").write_text(PIPELINE)
    (tmp_path / "train.py").write_text(
        "from pipes import simple\npipe = simple('/d')\npipe.build()\n"
    )
    os.mkfifo(tmp_path / "x.py")
    done = subprocess.run(
        [sys.executable, "-m", "dali_migrate", "--diff", ".", "x.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, NO_COLOR="1"),
    )
    assert done.returncode == 2, done.stderr
    assert "error: x.py: not a regular file" in done.stderr.splitlines()
    assert "+++ b/pipes.py" in done.stdout and "+++ b/train.py" in done.stdout


# -- interruptions, broken pipes and dead parents --------------------------------------------------


def _tree(root: Path, n: int) -> None:
    for i in range(n):
        (root / f"m{i:03d}.py").write_text(
            PIPELINE.replace("def simple", f"def simple{i}").replace("simple(", f"simple{i}(")
        )


def test_output_read_by_a_closed_pipe_ends_quietly(tmp_path):
    """``dali-migrate --diff src | head``: the reader goes away; no 'internal error'."""
    _tree(tmp_path, 3)
    proc = subprocess.Popen(
        [sys.executable, "-m", "dali_migrate", "--diff", "-j", "1", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # before the first diff is written: its write fails with EPIPE
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141, err
    assert err == b""


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="POSIX process groups")
def test_ctrl_c_during_a_parallel_run_prints_no_traceback(tmp_path):
    """The terminal sends SIGINT to every process of the group: the workers leave it to the
    parent, which says once what happened."""
    _tree(tmp_path, 200)
    proc = subprocess.Popen(
        [sys.executable, "-m", "dali_migrate", "--diff", "-j", "2", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout.readline().startswith(b"--- ")  # the workers are at work
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err.decode()
    assert b"Traceback" not in err and b"KeyboardInterrupt" not in err, err.decode()
    assert err.decode().strip().splitlines() == [
        "interrupted: files already written are complete; the others are untouched"
    ]


def _state(pid: int) -> str | None:
    """The process state letter of ``pid`` (``Z``: ended, not reaped), None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_workers_end_when_their_parent_is_killed():
    code = """
import time
from dali_migrate.engine import worker_pool
pool = worker_pool(2)
futures = [pool.submit(time.sleep, 3600) for _ in range(2)]
while len(pool._processes) < 2:
    time.sleep(0.05)
print(*pool._processes, flush=True)
time.sleep(3600)
"""
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        workers = [int(p) for p in parent.stdout.readline().split()]
        assert len(workers) == 2 and all(_state(w) not in (None, "Z") for w in workers)
    finally:
        parent.kill()  # SIGKILL: no clean-up of its own runs
        parent.wait()
    deadline = time.monotonic() + 60
    while any(_state(w) not in (None, "Z") for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [_state(w) for w in workers if _state(w) not in (None, "Z")] == []


def test_workers_ignore_sigint_and_run_the_watchdog():
    from dali_migrate.engine import worker_pool

    with worker_pool(1) as pool:
        ignored, threads = pool.submit(_probe_worker).result(timeout=120)
    assert ignored and "dali-migrate-watchdog" in threads


def _probe_worker():
    import threading

    return signal.getsignal(signal.SIGINT) == signal.SIG_IGN, [
        t.name for t in threading.enumerate()
    ]


def test_ctrl_c_while_the_modules_load_is_one_line():
    """A Ctrl-C in the first third of a second (imports) printed a traceback from inside an
    import; the console script and ``python -m`` guard their imports."""
    code = (
        "import os, signal, sys, time\n"
        "sys.argv = ['/usr/bin/dali-migrate']\n"
        "import dali_migrate.cli\n"
        "assert signal.getsignal(signal.SIGINT).__name__ == '_interrupted_while_loading'\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "time.sleep(30)\n"
    )
    done = _run_python(code)
    assert done.returncode == 130, done.stderr
    assert done.stderr == "interrupted: nothing was written\n"
    lib = _run_python(
        "import signal, dali_migrate.cli\nprint(signal.getsignal(signal.SIGINT).__name__)"
    )
    assert lib.stdout.strip() == "default_int_handler"  # imported as a library: SIGINT untouched


def test_a_compound_statement_in_a_nested_data_if_is_refused_not_a_crash():
    """TypeError: 'IndentedBlock' object is not iterable, out of _conditionals._assigned."""
    code = """\
from nvidia.dali import pipeline_def, fn

@pipeline_def(batch_size=2, num_threads=1, device_id=0, enable_conditionals=True)
def p():
    x = fn.random.uniform()
    a = fn.random.coin_flip()
    b = fn.random.coin_flip()
    if a:
        if b:
            for _ in range(2):
                x = x + 1
        else:
            x = x - 1
    else:
        x = x - 1
    return x

pipe = p()
pipe.build()
out = pipe.run()
"""
    result = migrate_source(code)
    assert result.code.startswith(
        "from nvidia.dali import pipeline_def, fn\n\n" + TODO_PREFIX + " DM200: "
    )
    assert migrate_source(result.code).code == result.code


def test_a_bytes_string_first_in_a_pipeline_returning_handles_is_no_crash():
    """TypeError: startswith first arg must be bytes, out of docstrings.is_generated_doc."""
    code = """\
from nvidia.dali import fn, pipeline_def

@pipeline_def(batch_size=2, num_threads=1, device_id=0)
def p(data_dir):
    b"doc"
    jpegs, labels = fn.readers.file(file_root=data_dir, name="Reader")
    return jpegs, labels

pipe = p("/data")
pipe.build()
print(pipe.epoch_size("Reader"))
out = pipe.run()
"""
    result = migrate_source(code)
    assert 'b"doc"' in result.code and "ndd.readers.File(" in result.code


FIXED_POINT_SHAPES = {
    "crlf-annotated": (
        "from nvidia.dali import fn\r\n\r\ndef h(x):\r\n    x: 'fn.DataNode' = fn.foo(x)\r\n"
        "    return x\r\n"
    ),
    "crlf-annotated-module": "from nvidia.dali import fn\r\nx = 1\r\nx: 'fn.DataNode' = fn.foo(x)",
    "cr-while-false": (
        "from nvidia.dali import fn, pipeline_def\r"
        "@pipeline_def(batch_size=2, num_threads=1, device_id=0)\r"
        "def p():\r    jpegs, labels = fn.readers.file(file_root='/d')\r    return jpegs\r"
        "pipe = p()\r"
        "while False: pipe.build(); out = pipe.run()\r"
    ),
    "crlf-docstring-no-final-newline": (ROOT / "examples" / "torch_loader.py")
    .read_text()
    .replace("\n", "\r\n")
    .rstrip(),
}


@pytest.mark.parametrize("name", sorted(FIXED_POINT_SHAPES))
def test_a_second_run_changes_nothing(name):
    first = migrate_source(FIXED_POINT_SHAPES[name])
    assert first.changed and parses(first.code)
    assert migrate_source(first.code).code == first.code
