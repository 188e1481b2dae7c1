"""Lines the migration writes are wrapped at the line length; the user's own lines are not."""

from __future__ import annotations

import ast

import pytest

from dali_migrate import migrate_source
from dali_migrate.wrap import _meaning, wrap_new_lines

LONG_CALL = (
    "    reader = ndd.readers.File(file_root=data_dir, random_shuffle=True, shard_id=rank, "
    "num_shards=n)\n"
)


def _wrapped(body: str, limit: int = 80, source: str = "") -> str:
    return wrap_new_lines(source, "def f(data_dir, rank, n):\n" + body, limit)


def test_a_long_call_gets_its_arguments_on_one_indented_line() -> None:
    out = _wrapped(LONG_CALL)
    assert out.splitlines()[1:] == [
        "    reader = ndd.readers.File(",
        "        file_root=data_dir, random_shuffle=True, shard_id=rank, num_shards=n",
        "    )",
    ]


def test_arguments_too_long_for_one_line_go_one_per_line_with_a_trailing_comma() -> None:
    out = _wrapped(LONG_CALL, limit=60)
    assert out.splitlines()[2:7] == [
        "        file_root=data_dir,",
        "        random_shuffle=True,",
        "        shard_id=rank,",
        "        num_shards=n,",
        "    )",
    ]


def test_the_call_with_the_longest_arguments_is_split_first() -> None:
    line = (
        "    for a, b in ndd.readers.File(file_root=data_dir, random_shuffle=True, name='R')"
        ".next_epoch(batch_size=8):\n        pass\n"
    )
    out = _wrapped(line, limit=60)
    assert "    ).next_epoch(batch_size=8):" in out.splitlines()


def test_the_users_own_long_lines_are_left_alone() -> None:
    code = "def f(data_dir, rank, n):\n" + LONG_CALL
    assert wrap_new_lines(code, code, 40) == code


@pytest.mark.parametrize(
    "body",
    [
        "    z = sum(x for x in range(10000000000000000000000000000000000000000000000000000000))\n",
        "    s = f'{ndd.readers.File(file_root=data_dir, random_shuffle=True, num_shards=n)}'\n",
        "    reader = ndd.readers.File(file_root=data_dir, random_shuffle=True, \\\n"
        "        shard_id=rank, num_shards=n, initial_fill=1024, name='Reader', seed=1234567)\n",
    ],
)
def test_what_cannot_be_wrapped_keeps_its_meaning(body: str) -> None:
    code = "def f(data_dir, rank, n):\n" + body
    out = wrap_new_lines("", code, 40)
    assert ast.dump(ast.parse(out)) == ast.dump(ast.parse(code))
    assert wrap_new_lines(out, out, 40) == out


def test_comments_written_are_continued_below_and_todo_markers_stay_one_line() -> None:
    note = "    # dali-migrate: dropped prefetch_queue_depth=2: " + "word " * 20 + "\n"
    todo = "    # TODO(dali-migrate): " + "word " * 20 + "\n"
    out = _wrapped(note + todo + "    pass\n", limit=60)
    lines = out.splitlines()
    assert all(len(line) <= 60 for line in lines if "TODO" not in line)
    assert sum(line.strip().startswith("#") for line in lines) > 3
    assert todo.rstrip("\n") in lines


def test_a_long_comment_written_is_wrapped_with_the_lines_that_continue_it() -> None:
    body = (
        "            # .evaluate(): each batch is computed before it is handed on (DALI 2.4\n"
        "            # aborts at exit while an operator is still running)\n"
        "            # max_batch_size: a note of its own\n"
        "            pass\n"
    )
    out = _wrapped(body, limit=70).splitlines()[1:]
    assert out == [
        "            # .evaluate(): each batch is computed before it is handed",
        "            # on (DALI 2.4 aborts at exit while an operator is still",
        "            # running)",
        "            # max_batch_size: a note of its own",
        "            pass",
    ]


def test_crlf_files_keep_their_newline() -> None:
    code = ("def f(data_dir, rank, n):\n" + LONG_CALL).replace("\n", "\r\n")
    out = wrap_new_lines("", code, 80)
    assert out.count("\r\n") == out.count("\n") == 4


PIPELINE = """\
from nvidia.dali import fn, pipeline_def


@pipeline_def(batch_size=8, num_threads=2, device_id=None)
def pipe(root):
    jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True, name="Reader")
    return fn.decoders.image(jpegs), labels
"""


def test_migrate_source_wraps_at_the_line_length_it_is_given() -> None:
    wide = migrate_source(PIPELINE, line_length=0).code
    narrow = migrate_source(PIPELINE, line_length=60).code
    assert max(len(line) for line in wide.splitlines() if "#" not in line) > 60
    assert max(len(line) for line in narrow.splitlines() if "#" not in line) <= 60
    assert _meaning(wide) == _meaning(narrow)  # docstrings by their words
    assert migrate_source(narrow, line_length=60).code == narrow


def test_a_one_line_docstring_written_is_wrapped_and_means_the_same() -> None:
    doc = '    """Yields (images, labels) batches epoch after epoch, without end, as run()."""\n'
    code = "def f():\n" + doc
    out = wrap_new_lines("", code, 60)
    assert out.splitlines()[1:] == [
        '    """Yields (images, labels) batches epoch after epoch,',
        '    without end, as run()."""',
    ]
    assert _meaning(out) == _meaning(code)
    plain = "def f():\n    x = 1\n" + doc  # a string statement that is no docstring
    assert wrap_new_lines("", plain, 60) == plain


def test_comment_lines_at_the_end_of_a_file_survive_wrapping() -> None:
    # libcst 1.9 renders these three comment lines (deeper than the module, shallower than the
    # block) as one: wrapping must not go through such a rendering
    tail = "if x:\n    for a in b:\n        f()\n    g()\n   # one\n   # two\n   # three\n"
    out = _wrapped(LONG_CALL + tail)
    assert out.endswith("   # one\n   # two\n   # three\n")
    assert "    reader = ndd.readers.File(\n" in out


def test_migrating_a_file_ending_in_such_comments_keeps_every_comment() -> None:
    code = (
        "from nvidia.dali import pipeline_def, fn\n\n"
        "@pipeline_def(batch_size=2, num_threads=1, device_id=None)\n"
        "def pipe_with_a_rather_long_name_that_makes_the_emitted_lines_long_enough():\n"
        "    return fn.random.uniform(range=[0, 1], shape=[2, 3], dtype=None, seed=1234567)\n\n"
        "if __name__ == '__main__':\n"
        "    for i in range(2):\n"
        "        pipe = pipe_with_a_rather_long_name_that_makes_the_emitted_lines_long_enough()\n"
        "        pipe.build()\n"
        "        print(pipe.run())\n"
        "   # first\n   # second\n   # third"
    )
    out = migrate_source(code, line_length=60).code
    assert out.rstrip("\n").endswith("   # first\n   # second\n   # third")


def test_lowering_to_cpu_keeps_the_comment_lines_that_end_a_file() -> None:
    from dali_migrate.harness.lower import lower_to_cpu

    code = 'if x:\n    f(device="gpu")\n   # one\n   # two\n'
    out = lower_to_cpu(code)
    assert out.code == 'if x:\n    f(device="cpu")\n   # one\n   # two\n'


ODD_MODULE = '''import nvidia.dali.experimental.dynamic as ndd
def f(data_dir, rank, n):
    reader = ndd.readers.File(file_root=data_dir, random_shuffle=True, shard_id=rank, num_shards=n)
    a = 1; b = ndd.readers.File(file_root=data_dir, random_shuffle=True, shard_id=rank, num_shards=n)
    if a: c = ndd.readers.File(file_root=data_dir, random_shuffle=True, shard_id=rank, num_shards=n)
    s = g("""multi
line string""", ndd.readers.File(file_root=data_dir, random_shuffle=True, shard_id=rank, name="R"))
    t = h(x,  # a comment
          ndd.readers.File(file_root=data_dir, random_shuffle=True, shard_id=rank, num_shards=n))
    u = ["élément"] + [ndd.readers.File(file_root=data_dir, random_shuffle=True, shard_id=rank)]
    for x in ndd.readers.File(file_root=data_dir, random_shuffle=True, shard_id=rank).next_epoch():
        pass
    w = k(a,
  b, ndd.readers.File(file_root=data_dir, random_shuffle=True, shard_id=rank, num_shards=n))
@decorator(argument_one=1, argument_two=2, argument_three=3, argument_four=4, argument_five=5)
class C:
    def m(self, alpha_parameter, beta_parameter, gamma_parameter, delta_parameter, epsilon=None):
        return [y for y in range(100000000000000000000) if y % 3 == 0 and y % 5 == 0 and y % 7]
x = {"key_one": 1, "key_two": 2, "key_three": 3, "key_four": 4, "key_five": 5, "key_six": 6}
# a comment at the end, long enough to be wrapped by the comment wrapper at the smaller limits
'''

#: every long line in a simple statement alone on its lines: wrapped one statement at a time
PLAIN_MODULE = '''import nvidia.dali.experimental.dynamic as ndd
def f(data_dir, rank, n):
    reader = ndd.readers.File(file_root=data_dir, random_shuffle=True, shard_id=rank, num_shards=n)
    while True:
        for jpegs, labels in reader:
            images = ndd.decoders.image(jpegs, device="mixed", output_type=types.RGB, hw_decoder_load=0.65)
            images = ndd.resize(images, resize_x=224, resize_y=224, interp_type=types.INTERP_LINEAR)  # why
            s = g("""multi
            line string""", ndd.readers.File(file_root=data_dir, random_shuffle=True, shard_id=rank, name="R"))
            yield ndd.crop_mirror_normalize(images, crop=(224, 224), mean=[0.485 * 255, 0.456 * 255], std=[58.4, 57.1])
x = {"key_one": 1, "key_two": 2, "key_three": 3, "key_four": 4, "key_five": 5, "key_six": 6}
'''


@pytest.mark.parametrize(
    "code",
    [
        PLAIN_MODULE,
        PLAIN_MODULE.replace("\n", "\r\n"),
        PLAIN_MODULE.replace("    ", "\t"),
        ODD_MODULE,
        ODD_MODULE.replace("\n", "\r\n"),
        ODD_MODULE.replace("    ", "\t"),
        ODD_MODULE.rstrip("\n"),
        ODD_MODULE.replace("\n", "\r\n", 1),  # a newline of another kind further down
        ODD_MODULE.replace("x = {", "\x0cx = {"),  # a line break that Python does not count
    ],
    ids=["plain", "plain-crlf", "plain-tabs"]
    + ["lf", "crlf", "tabs", "no-final-newline", "mixed-newlines", "form-feed"],
)
@pytest.mark.parametrize("limit", [30, 44, 60, 72, 90, 104])
def test_wrapping_statement_by_statement_is_wrapping_the_whole_module(
    code: str, limit: int
) -> None:
    from dali_migrate.cst_text import split_trailing_comments
    from dali_migrate.wrap import _code_lines, _long_new_lines, _wrap_module

    head, tail = split_trailing_comments(code)
    lines = _code_lines(_long_new_lines(set(), code, limit), head)
    whole = _wrap_module(set(), head, tail, lines, limit, code)
    assert wrap_new_lines("", code, limit) == whole
