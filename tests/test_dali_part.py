"""The codemod parses only the part of a module that can involve DALI (context.dali_part):
the other top-level statements become placeholders over the same lines. These tests pin what
is kept, that positions do not move, and that the migration of every fixture, with unrelated
code woven in, is the same as when the whole module is parsed."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from dali_migrate import context, migrate_source
from dali_migrate.context import dali_part, names_of

ROOT = Path(__file__).resolve().parent.parent

MODULE = '''"""A training script."""
import os
from nvidia.dali import fn, pipeline_def

BATCH = 16; UNUSED = 3


def unrelated(a):
    return a + 1


class Base:
    pass


@pipeline_def(batch_size=BATCH)
def files():
    return fn.readers.file(file_root=os.getcwd())


class Loader(Base):
    def make(self):
        return files()


def other():
    return unrelated(2)


pipe = files()
print(pipe)
'''


def kept_lines(source: str) -> list[int]:
    reduced = dali_part(source).source
    return [
        i
        for i, (a, b) in enumerate(zip(source.splitlines(), reduced.splitlines()), 1)
        if a == b and a.strip()
    ]


def test_keeps_dali_statements_their_users_and_what_they_use():
    reduced, skipped_stmts, _, _ = dali_part(MODULE)
    skipped = names_of(skipped_stmts)[0]
    assert reduced.count("\n") == MODULE.count("\n")
    kept = {MODULE.splitlines()[i - 1] for i in kept_lines(MODULE)}
    # imports, the docstring, the pipeline, a statement on the same line as a constant it uses,
    # a base class of a class that uses the pipeline, and statements that use what it binds
    for line in [
        '"""A training script."""',
        "import os",
        "BATCH = 16; UNUSED = 3",
        "class Base:",
        "def files():",
        "class Loader(Base):",
        "pipe = files()",
        "print(pipe)",
    ]:
        assert line in kept
    assert "def unrelated(a):" not in kept and "def other():" not in kept
    assert {"unrelated", "other"} <= skipped
    compile(reduced, "<reduced>", "exec")


def test_placeholders_keep_every_line_and_column():
    source = MODULE.replace("\n", "\r\n") + "x = '\x0c form feed \u2028 not a newline'\n"
    part = dali_part(source)
    reduced = part.source
    assert len(re.findall(r"\r\n|\r|\n", reduced)) == len(re.findall(r"\r\n|\r|\n", source))
    # the aligned text keeps every character offset too (the import fix-up splices edits into it)
    assert len(part.aligned) == len(source)
    newlines = [m.start() for m in re.finditer(r"\r\n|\r|\n", source)]
    assert [m.start() for m in re.finditer(r"\r\n|\r|\n", part.aligned)] == newlines
    assert ast.dump(ast.parse(part.aligned)).count("Name(") == ast.dump(ast.parse(reduced)).count(
        "Name("
    )
    tree, original = ast.parse(reduced), ast.parse(source)
    kept = {(s.lineno, s.col_offset, s.end_lineno, s.end_col_offset) for s in tree.body}
    assert {
        (s.lineno, s.col_offset, s.end_lineno, s.end_col_offset)
        for s in original.body
        if ast.unparse(s).startswith(("pipe", "print", "class Loader"))
    } <= kept


def test_placeholder_never_becomes_a_docstring():
    source = "def pad():\n    pass\nimport nvidia.dali.fn as fn\nx = fn.cast\n"
    reduced = dali_part(source).source
    assert ast.get_docstring(ast.parse(reduced)) is None
    assert reduced.splitlines()[:2] == ['f"""', '"""']


def test_files_that_do_not_parse_or_are_all_dali_come_back_whole():
    broken = "def broken(:\n  pass\nx = 1\n"
    assert dali_part(broken) == (broken, (), "", "")
    whole = "from nvidia.dali import fn\nx = fn.cast\n"
    assert dali_part(whole).source == whole


def test_a_star_import_from_dali_keeps_the_whole_module():
    source = "def pad():\n    pass\nfrom nvidia.dali.fn import *\nx = readers.file(file_root='.')\n"
    assert dali_part(source).source == source


def test_a_global_written_in_a_function_is_followed():
    source = (
        "from nvidia.dali import pipeline_def\n@pipeline_def\ndef p():\n    pass\n"
        "def setup():\n    global pipe\n    pipe = p()\n"
        "def later():\n    return pipe.run()\n"
    )
    reduced = dali_part(source).source
    assert "pipe.run()" in reduced and "global pipe" in reduced


def test_a_statement_kept_first_for_its_names_still_passes_them_on():
    """``images, labels = out`` binds names the pipeline function also uses, so it is kept as
    soon as the function is; it holds DALI values too (``out`` is a run's outputs), so the
    statements that read ``images`` after it are kept as well."""
    source = (
        "from nvidia.dali import fn, pipeline_def\n"
        "@pipeline_def\ndef p():\n    images, labels = fn.readers.file(file_root='.')\n"
        "    return images, labels\n"
        "pipe = p(batch_size=2, num_threads=1, device_id=0)\n"
        "out = pipe.run()\n"
        "images, labels = out\n"
        "print(images.is_dense_tensor())\n"
    )
    part = dali_part(source)
    assert not part.skipped
    assert "print(images.is_dense_tensor())" not in migrate_source(source).code


# Unrelated code woven between the top-level statements of every fixture: functions, classes,
# constants, a module-level ``_`` and names the migration likes to introduce.
PADDING = '''

def _padding_helper(values, reader=None, rng=None):
    """Unrelated code."""
    total = 0
    for v in values:
        total += v * 2
    return total


class PaddingTable:
    rows = [(1, "a"), (2, "b")]

    def lookup(self, key):
        return dict(self.rows).get(key)


batches = [x * x for x in range(4)]
_ = PaddingTable()
scale = np.float32(2) if "np" in globals() else 2  # numpy used (or not) outside the DALI part
'''


def _weave(source: str) -> str:
    """``source`` with PADDING after its first import and between its top-level statements."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    cut_after = sorted(
        {
            s.end_lineno
            for s in tree.body[:-1]
            if isinstance(s, (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom))
        }
    )
    out, prev = [], 0
    for end in cut_after[:4]:
        out += lines[prev:end]
        out.append(PADDING)
        prev = end
    return "".join(out + lines[prev:])


def _fixture_inputs() -> list[Path]:
    rule = sorted((ROOT / "fixtures").glob("DM*/*.in.py"))
    programs = sorted((ROOT / "fixtures" / "programs").glob("*/old.py"))
    return rule + programs


@pytest.mark.parametrize("path", _fixture_inputs(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_migration_is_the_same_as_with_the_whole_module(path, monkeypatch):
    source = path.read_text()
    try:
        padded = _weave(source)
    except SyntaxError:
        pytest.skip("fixture is not valid Python on purpose")
    assert dali_part(padded).skipped, "the woven-in code should have been left out of the parse"
    reduced = migrate_source(padded)
    monkeypatch.setattr(context, "REDUCE_TO_DALI_PART", False)
    whole = migrate_source(padded)
    assert reduced.code == whole.code
    assert [(d.rule, d.line, d.message) for d in reduced.diagnostics] == [
        (d.rule, d.line, d.message) for d in whole.diagnostics
    ]
