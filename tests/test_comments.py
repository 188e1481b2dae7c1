"""Users' comments survive the migration (``dali_migrate.comments``): the measure, the policy on
deleted statements, and the guard that writes back what a fix's new text lost."""

from __future__ import annotations

from dali_migrate import migrate_source
from dali_migrate.comments import (
    comments_of,
    dropped_on_purpose,
    keep_comments,
    lost_comments,
    unexplained_losses,
)
from dali_migrate.fixes import Edit, Fix, Span, parses

SUBCLASS = """\
import nvidia.dali.ops as ops
from nvidia.dali.pipeline import Pipeline


class P(Pipeline):
    def __init__(self, batch_size, num_threads, device_id, root):
        super().__init__(batch_size, num_threads, device_id, seed=3)
        self.input = ops.readers.File(file_root=root)
        #self.rotate = ops.Rotate(angle=10)
        # flips half of the images
        self.flip = ops.Flip(horizontal=1)
        # (no other operator)

    def define_graph(self):
        jpegs, labels = self.input(name="Reader")
        images = self.flip(jpegs)
        return images, labels


pipe = P(2, 1, 0, "data")
pipe.build()  # build it
out = pipe.run()
"""


def _fix(source: str, start: int, end: int, text: str) -> Fix:
    return Fix("x", "DM999", "m", "safe", (Edit(start, end, text),), Span(1, 0, 1, 0))


def test_a_comment_continued_over_lines_is_not_lost():
    before = "x = 1  # a long comment about x\n"
    after = "# a long comment\n# about x\nx = 1\n"
    assert lost_comments(before, after) == []
    assert lost_comments(before, "x = 1\n") == ["# a long comment about x"]


def test_repeated_comments_count_each_time():
    before = "a = 1  # same\nb = 2  # same\n"
    assert lost_comments(before, "a = 1  # same\nb = 2\n") == ["# same"]
    assert lost_comments(before, before) == []


def test_the_tools_markers_are_not_users_comments():
    code = "# TODO(dali-migrate): DM205: x\nx = 1  # mine\n"
    assert [c.text for c in comments_of(code)] == ["# mine"]


def test_an_operator_objects_comments_go_above_its_call():
    out = migrate_source(SUBCLASS).code
    lines = out.splitlines()
    call = next(i for i, ln in enumerate(lines) if "ndd.flip(" in ln)
    assert lines[call - 2 : call] == [
        "            #self.rotate = ops.Rotate(angle=10)",
        "            # flips half of the images",
    ]
    assert "    # (no other operator)\n    reader = ndd.readers.File" in out


def test_the_trailing_comment_of_a_deleted_statement_is_dropped_on_purpose():
    result = migrate_source(SUBCLASS)
    assert "pipe.build()" not in result.code
    assert lost_comments(SUBCLASS, result.code) == ["# build it"]
    applied = [f for f in result.fixes if f.id in result.applied]
    assert dropped_on_purpose(SUBCLASS, applied) == ["# build it"]
    assert unexplained_losses(result) == []


def test_the_guard_puts_a_lost_comment_above_the_statement_it_was_about():
    source = "def f():\n    # the sum\n    total = a + b\n    other = 2\n"
    start = source.index("    # the sum")
    fix = _fix(source, start, len(source), "    other = 2\n    total = add(a, b)\n")
    kept = keep_comments(source, fix)
    assert kept.edits[0].text == "    other = 2\n    # the sum\n    total = add(a, b)\n"
    assert kept.replacement == kept.edits[0].text


def test_the_guard_keeps_a_comment_with_no_matching_code_where_it_stood():
    source = "x = 1\n# a note\ny = compute()\n"
    fix = _fix(source, 0, len(source), "z = 3\nw = 4\n")
    text = keep_comments(source, fix).edits[0].text
    assert "# a note\n" in text and parses(text)


def test_the_guard_leaves_a_fix_that_kept_its_comments_as_it_is():
    source = "x = 1  # one\n"
    fix = _fix(source, 0, len(source), "# one\nx = 1\n")
    assert keep_comments(source, fix) is fix


def test_files_with_cr_newlines():
    source = "# about the file\rx = 1  # one\ry = 2\r"
    assert [c.text for c in comments_of(source)] == ["# about the file", "# one"]
    fix = _fix(source, 0, len(source), "x = 1\ry = 2\r")
    text = keep_comments(source, fix).edits[0].text
    assert text == "# about the file\r# one\rx = 1\ry = 2\r"


def test_a_users_long_comment_moved_deeper_is_not_rewrapped():
    body = "    # " + "word " * 18 + "end\n"
    source = SUBCLASS.replace("        # flips half of the images\n", "    " + body)
    out = migrate_source(source).code
    assert "            # " + "word " * 18 + "end\n" in out


def test_the_guard_never_writes_a_comment_into_a_string():
    source = 's = """\nold\n"""  # c\n'
    start = source.index("old")
    fix = _fix(source, start, len(source), 'new\n"""\n')
    assert keep_comments(source, fix) is fix


def test_lines_are_counted_as_python_counts_them():
    source = 's = "a\x0cb"  # form feed\n# see\u2028below\nx = 1  # one\n'
    fix = _fix(source, 0, len(source), 's = "a\x0cb"\nx = 1\n')
    text = keep_comments(source, fix).edits[0].text
    assert text == '# form feed\ns = "a\x0cb"\n# see\u2028below\n# one\nx = 1\n'


def test_the_trailing_comment_of_a_deleted_import_is_dropped_on_purpose():
    source = "from a import b  # for b\nimport c\n"
    fix = _fix(source, 0, len(source), "import c\n")
    assert keep_comments(source, fix) is fix
    assert dropped_on_purpose(source, [fix]) == ["# for b"]
