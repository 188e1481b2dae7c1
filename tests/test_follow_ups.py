"""Follow-ups: uses of a migrated pipeline the tool cannot rewrite keep their code, with a TODO
next to them; and the DM205 safety net for pipeline-mode API no rule migrated."""

from __future__ import annotations

import ast

from dali_migrate import migrate_source

TODO = "# TODO(dali-migrate):"

PIPE = '''\
from nvidia.dali import fn, pipeline_def


@pipeline_def(batch_size=4, num_threads=2, device_id=None)
def numbers(root):
    return fn.readers.numpy(file_root=root)

'''


def test_todo_inside_brackets_sits_on_the_line_of_the_use():
    code = PIPE + (
        "pipe = numbers('/d')\npipe.build()\ntotal = (\n    1,\n    pipe.epoch_size('Reader'),\n)\n"
    )
    out = migrate_source(code).code
    lines = out.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.strip().startswith("pipe.epoch_size"))
    assert lines[i - 1].strip().startswith(TODO)
    assert lines[i - 1].startswith("    ")  # indented like the line it is about
    ast.parse(out)
    assert migrate_source(out).code == out


def test_todo_is_not_put_inside_a_multiline_string():
    code = PIPE + 'pipe = numbers("/d")\nreport(f"""size:\n{pipe.epoch_size()}""")\n'
    out = migrate_source(code).code
    ast.parse(out)
    lines = out.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("report("))
    assert lines[i - 1].startswith(TODO)


def test_leftovers_marks_what_nothing_else_migrated_once():
    code = (
        "from nvidia.dali.plugin.pytorch import DALIGenericIterator\n"
        "from pipes import make_pipe\n\n"
        "def loader(root) -> DALIGenericIterator:\n"
        "    pipe = make_pipe(root)\n"
        "    pipe.build()\n"
        "    return DALIGenericIterator([pipe], ['data'], reader_name='Reader')\n"
    )
    r = migrate_source(code)
    lines = r.code.splitlines()
    # the iterator once (not on the annotated def), and the build() of the pipeline it runs
    (i,) = [k for k, ln in enumerate(lines) if TODO in ln and "a framework iterator" in ln]
    assert "DM205" in lines[i] and "DALIGenericIterator" in lines[i]
    assert lines[i + 1].strip().startswith("return DALIGenericIterator(")
    (b,) = [k for k, ln in enumerate(lines) if TODO in ln and k != i]
    assert "`pipe.build()`" in lines[b] and lines[b + 1].strip() == "pipe.build()"
    assert migrate_source(r.code).code == r.code


def test_leftovers_says_nothing_where_a_pipeline_refusal_already_did():
    code = (
        "from nvidia.dali import fn, pipeline_def\n\n\n"
        "@pipeline_def(batch_size=4, num_threads=2, device_id=None)\n"
        "def numbers(root, **options):\n"
        "    return fn.readers.numpy(file_root=root, **options)\n"
    )
    r = migrate_source(code)
    assert [d.rule for d in r.diagnostics if d.severity == "todo"] == ["DM200"]


def test_a_bytes_reader_name_does_not_key_the_metadata():
    # pipe.epoch_size() without a name gave {name: size}: a bytes name= is no name to key it by
    code = (
        "from nvidia.dali import fn, pipeline_def\n\n\n"
        "@pipeline_def(batch_size=4, num_threads=2, device_id=None)\n"
        "def numbers(root):\n"
        '    return fn.readers.numpy(file_root=root, name=b"Reader")\n\n\n'
        "pipe = numbers('/d')\npipe.build()\nsizes = pipe.epoch_size()\n"
    )
    out = migrate_source(code).code
    assert "b'Reader'" not in out
    lines = out.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("sizes = "))
    assert lines[i - 1].startswith(TODO) and "no name=" in lines[i - 1]
