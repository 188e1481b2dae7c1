"""The cost of choosing and applying fixes grows with their number, not its square (a list of
33,333 ``fn.flip`` calls took 14 minutes)."""

from __future__ import annotations

import dali_migrate.fixes as fixes
from dali_migrate import Edit, Fix, Span
from dali_migrate.fixes import apply_edits_checked, drop_nested, select_consistent


def _fix(i: int, start: int, end: int, text: str = "x") -> Fix:
    return Fix(
        f"DM101:f:{i}", "DM101", "m", "safe", (Edit(start, end, text),), Span(1, start, 1, end)
    )


def test_dropping_nested_fixes_is_not_quadratic(monkeypatch):
    calls = 0
    real = fixes._contains

    def counting(outer, inner):
        nonlocal calls
        calls += 1
        return real(outer, inner)

    monkeypatch.setattr(fixes, "_contains", counting)
    n = 3000
    local = [_fix(i, 10 * i + 1, 10 * i + 5) for i in range(n)]
    structural = _fix(n, 0, 10 * 100)  # holds the first 100 local fixes
    kept = drop_nested([structural, *local])
    assert len(kept) == 1 + n - 100
    assert calls < 10 * n


def test_choosing_consistent_fixes_is_not_quadratic(monkeypatch):
    calls = 0
    real = fixes.overlaps

    def counting(a, b):
        nonlocal calls
        calls += 1
        return real(a, b)

    monkeypatch.setattr(fixes, "overlaps", counting)
    n = 3000
    many = [_fix(i, 10 * i, 10 * i + 5) for i in range(n)] + [_fix(n, 12, 25), _fix(n + 1, 7, 7)]
    taken, skipped = select_consistent(many)
    assert [f.id for f in skipped] == [f"DM101:f:{n}"]
    assert len(taken) == n + 1
    assert calls < 10 * n


def test_a_broken_fix_among_many_costs_a_few_parses(monkeypatch):
    calls = 0
    real = fixes.parses

    def counting(code):
        nonlocal calls
        calls += 1
        return real(code)

    monkeypatch.setattr(fixes, "parses", counting)
    n = 2000
    source = "".join(f"x{i} = 1\n" for i in range(n))
    offsets = [source.index(f"x{i} =") for i in range(n)]
    many = [_fix(i, o, o + len(f"x{i}"), f"y{i}") for i, o in enumerate(offsets)]
    many[1234] = _fix(1234, offsets[1234], offsets[1234] + 5, "y(")
    code, applied, dropped = apply_edits_checked(source, many)
    assert [f.id for f in dropped] == ["DM101:f:1234"] and len(applied) == n - 1
    assert "x1234 = 1\n" in code and "y1235 = 1\n" in code
    assert calls < 40


def _calls_to_migrate(code: str) -> int:
    """Python function calls made while migrating ``code``: a measure of work, not of time."""
    import sys

    from dali_migrate import migrate_source

    count = 0

    def profile(frame, event, arg):
        nonlocal count
        if event == "call":
            count += 1

    sys.setprofile(profile)
    try:
        migrate_source(code)
    finally:
        sys.setprofile(None)
    return count


def test_one_long_line_costs_about_linear_time_in_its_length():
    """A single line of N ``fn.flip(x)`` calls (30,000 characters took 16-22 s): twice the line,
    about twice the work, never four times."""
    header = "from nvidia.dali import fn\n\nx = fn.external_source()\n"

    def line(n: int) -> str:
        return header + "y = [" + ", ".join(["fn.flip(x)"] * n) + "]\n"

    small, large = _calls_to_migrate(line(150)), _calls_to_migrate(line(300))
    assert large < 2.6 * small, (small, large)
