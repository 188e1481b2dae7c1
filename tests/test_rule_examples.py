"""The before/after of every rule is one of its fixture pairs, word for word.

What ``--explain`` (and the review's ``?``) prints is the rule module's docstring. It shows its
example as two blocks that name the fixture they are copied from::

    Before (``fixtures/DM200/canonical.in.py``)::
    After (``fixtures/DM200/canonical.out.py``)::

and the text of each block must equal that file. The fixture tests prove that the rule turns the
one file into the other, so the printed example is what the rule does. The docstring carries the
text itself (not a path read at run time) because ``fixtures/`` is not installed with the package.

``DALI_MIGRATE_REGEN=1`` rewrites the blocks from the files (after the fixtures were regenerated:
review the diff before committing).
"""

from __future__ import annotations

import inspect
import os
import re
from pathlib import Path

import pytest

from dali_migrate.registry import all_rules
from dali_migrate.report import rule_explanation
from dali_migrate.rules import Rule

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
HEADER = re.compile(r"^(?P<side>Before|After) \(``fixtures/(?P<path>[^`]+)``\)::$")
INDENT = "    "


def _block_end(lines: list[str], start: int) -> int:
    """The index after the indented block that starts at ``lines[start]`` (blank lines inside
    it belong to it; trailing ones do not)."""
    end = start
    for i in range(start, len(lines)):
        if lines[i].startswith(INDENT):
            end = i + 1
        elif lines[i].strip():
            break
    return end


def example_blocks(doc: str) -> dict[str, tuple[str, str]]:
    """``{"Before": (path under fixtures/, text), "After": ...}`` of a rule's documentation."""
    lines = doc.splitlines()
    blocks: dict[str, tuple[str, str]] = {}
    for i, line in enumerate(lines):
        found = HEADER.match(line)
        if not found:
            continue
        assert found["side"] not in blocks, f"two {found['side']} blocks"
        assert i + 1 < len(lines) and not lines[i + 1], "a blank line must follow the header"
        body = lines[i + 2 : _block_end(lines, i + 2)]
        text = "".join(f"{x[len(INDENT) :]}\n" for x in body)
        blocks[found["side"]] = (found["path"], text)
    return blocks


def paired_output(before: str) -> str:
    """The expected output of a fixture input: ``<case>.out.py`` of ``<case>.in.py``, or the
    same file under ``new/`` for a file under a project's ``old/``."""
    if before.endswith(".in.py"):
        return before[: -len(".in.py")] + ".out.py"
    assert before.startswith("projects/") and "/old/" in before, before
    return before.replace("/old/", "/new/", 1)


def _rule_id(rule: type[Rule]) -> str:
    return rule.id


RULES = list(all_rules())


@pytest.mark.parametrize("rule", RULES, ids=_rule_id)
def test_explanation_shows_a_fixture_pair_verbatim(rule: type[Rule]):
    if os.environ.get("DALI_MIGRATE_REGEN"):
        _regenerate(rule)
    blocks = example_blocks(rule_explanation(rule))
    assert set(blocks) == {"Before", "After"}, (
        f"{rule.id}: its module docstring needs a 'Before (``fixtures/...in.py``)::' and an "
        "'After (``fixtures/...out.py``)::' block"
    )
    (before, before_text), (after, after_text) = blocks["Before"], blocks["After"]
    assert before.startswith(f"{rule.id}/") or before.startswith("projects/"), before
    assert after == paired_output(before), f"{rule.id}: After must show the output of {before}"
    assert before_text == (FIXTURES / before).read_text(), f"{rule.id}: Before != {before}"
    assert after_text == (FIXTURES / after).read_text(), f"{rule.id}: After != {after}"


def test_blocks_are_read_as_written():
    doc = "Title.\n\nBefore (``fixtures/DM1/x.in.py``)::\n\n    a\n\n        b\n\nProse.\n"
    assert example_blocks(doc) == {"Before": ("DM1/x.in.py", "a\n\n    b\n")}
    assert paired_output("DM1/x.in.py") == "DM1/x.out.py"
    assert paired_output("projects/p/old/m.py") == "projects/p/new/m.py"


# -- DALI_MIGRATE_REGEN=1 ----------------------------------------------------------------------


def _as_docstring_block(text: str) -> list[str]:
    """The lines of a docstring block that reads as ``text``: indented, with the escapes a
    triple-quoted (not raw) string needs."""
    escaped = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return [f"{INDENT}{x}" if x else "" for x in escaped.splitlines()]


def _regenerate(rule: type[Rule]) -> None:
    """Rewrite the Before/After blocks of the rule's module from the fixture files they name."""
    module = inspect.getmodule(rule)
    assert module is not None and module.__file__
    path = Path(module.__file__)
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        found = HEADER.match(lines[i])
        if found and i + 1 < len(lines) and not lines[i + 1]:
            new = _as_docstring_block((FIXTURES / found["path"]).read_text())
            lines[i + 2 : _block_end(lines, i + 2)] = new
            i += len(new) + 1
        i += 1
    path.write_text("\n".join(lines) + "\n")
