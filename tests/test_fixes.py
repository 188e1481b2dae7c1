"""The fix engine: edits, subsets, rollback of fixes whose result does not parse, ids."""

from __future__ import annotations

from dali_migrate import api
from dali_migrate.fixes import (
    Edit,
    Fix,
    LineIndex,
    Span,
    apply_edits_checked,
    drop_nested,
    fix_id,
    select_consistent,
    splice,
    uniquify,
)


def _fix(fid: str, *edits: Edit, rule: str = "DM999") -> Fix:
    return Fix(fid, rule, "msg", "safe", tuple(edits), Span(1, 0, 1, 0))


def test_splice_applies_in_offset_order():
    assert splice("abcdef", [Edit(4, 5, "E"), Edit(0, 1, "A"), Edit(2, 2, "+")]) == "Ab+cdEf"


def test_line_index_round_trip_with_crlf():
    src = "a = 1\r\nbb = 2\r\n\r\nc = 3\n"
    idx = LineIndex(src)
    for off in range(len(src)):
        line, col = idx.position(off)
        assert idx.offset(line, col) == off
    assert idx.offset(2, 0) == src.index("bb")


def test_fix_that_would_not_parse_is_dropped_and_others_kept():
    src = "x = 1\ny = 2\n"
    good = _fix("good", Edit(4, 5, "10"))
    bad = _fix("bad", Edit(10, 11, "(("))
    code, applied, dropped = apply_edits_checked(src, [good, bad])
    assert code == "x = 10\ny = 2\n"
    assert [f.id for f in applied] == ["good"]
    assert [f.id for f in dropped] == ["bad"]


def test_overlapping_fixes_keep_the_first():
    a = _fix("a", Edit(0, 5, "x"))
    b = _fix("b", Edit(3, 8, "y"))
    c = _fix("c", Edit(8, 9, "z"))
    taken, skipped = select_consistent([a, b, c])
    assert [f.id for f in taken] == ["a", "c"]
    assert [f.id for f in skipped] == ["b"]


def test_an_edit_two_fixes_both_need_is_shared_and_applied_once():
    src = "x = 1\ny = 2\n"
    imp = Edit(0, 0, "import math\n")
    a = _fix("a", imp, Edit(4, 5, "math.pi"))
    b = _fix("b", imp, Edit(10, 11, "math.e"))
    clash = _fix("clash", Edit(0, 0, "import os\n"))  # another text at the same point
    taken, skipped = select_consistent([a, b, clash])
    assert [f.id for f in taken] == ["a", "b"]
    assert [f.id for f in skipped] == ["clash"]
    code, applied, _ = apply_edits_checked(src, taken)
    assert code == "import math\nx = math.pi\ny = math.e\n"
    assert splice(src, [*b.edits]) == "import math\nx = 1\ny = math.e\n"


def test_fix_inside_a_larger_fix_is_absorbed():
    outer = _fix("outer", Edit(0, 50, "new"))
    inner = _fix("inner", Edit(10, 12, "x"))
    elsewhere = _fix("elsewhere", Edit(60, 61, "y"))
    assert [f.id for f in drop_nested([outer, inner, elsewhere])] == ["outer", "elsewhere"]


def test_ids_ignore_whitespace_and_repeat_with_ordinals():
    assert fix_id("DM101", "f", "fn.resize( x )") == fix_id("DM101", "f", "fn.resize(  x  )")
    assert fix_id("DM101", "f", "fn.resize") != fix_id("DM101", "g", "fn.resize")
    a = _fix("DM101:f:1", Edit(0, 1, "a"))
    b = _fix("DM101:f:1", Edit(5, 6, "b"))
    assert [f.id for f in uniquify([b, a])] == ["DM101:f:1", "DM101:f:1#2"]


def test_broken_rule_output_becomes_an_internal_error_not_a_write(monkeypatch):
    """A rule whose fix would not parse: the fix is dropped and reported as that rule's error."""
    src = "from nvidia.dali import fn\n\n\ndef f(x):\n    return fn.flip(x)\n"
    real = api._analyse

    def broken(*args, **kwargs):
        analysis = real(*args, **kwargs)
        f = analysis.fixes[0]
        analysis.fixes[0] = Fix(
            f.id,
            f.rule,
            f.message,
            f.safety,
            (Edit(f.edits[0].start, f.edits[0].end, "ndd.flip(("),),
            f.span,
        )
        return analysis

    monkeypatch.setattr(api, "_analyse", broken)
    result = api.migrate_source(src)
    assert result.code == src
    errors = [d for d in result.diagnostics if d.severity == "error"]
    assert errors and errors[0].rule == "DM101" and "would not parse" in errors[0].message
