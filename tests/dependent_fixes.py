"""A test-only rule whose fixes depend on one another, and a fixture that registers it.

Few fixes of dali-migrate depend on another reviewable fix (the derived import fix, and the
rewrite of a function given ndd Batches, which depends on the fixes of its calls:
``transforms/_backend/batch_params.py``); the review and ``apply_fixes`` must handle them: DM990 renames
``old_reader`` to ``new_reader`` as one fix for the definition and one fix per call, and each
call's fix depends on the definition's.
"""

from __future__ import annotations

import re

import pytest

import dali_migrate.api as api
import dali_migrate.registry as registry
from dali_migrate.fixes import Edit
from dali_migrate.rules import FileState, Rule

#: ``main`` calls ``old_reader`` before it is defined, so in source order the first fix offered
#: is a call, which pulls in the definition
CHAINED = '''\
import nvidia.dali as dali


def main():
    return old_reader("/data/train"), old_reader("/data/val")


def old_reader(root):
    return dali.__version__, root
'''

#: the definition first: skipping it leaves nothing of the calls to offer
DEFINITION_FIRST = '''\
import nvidia.dali as dali


def old_reader(root):
    return dali.__version__, root


def main():
    return old_reader("/data/train"), old_reader("/data/val")
'''


class ChainedRename(Rule):
    """DM990 chained-rename (tests only): ``old_reader`` becomes ``new_reader``."""

    id = "DM990"
    name = "chained-rename"
    summary = "old_reader becomes new_reader (tests only)"
    structural = True

    def run(self, state: FileState) -> None:
        ctx = state.ctx
        definition = re.search(r"(?<=def )old_reader\b", ctx.source)
        if definition is None:
            return
        rename = ctx.make_fix(
            self.id,
            ctx.module,
            [Edit(definition.start(), definition.end(), "new_reader")],
            "rename the definition of old_reader to new_reader",
            key="def old_reader",
        )
        state.fixes.append(rename)
        for call in re.finditer(r"\bold_reader(?=\()", ctx.source):
            if call.start() == definition.start():
                continue
            state.fixes.append(
                ctx.make_fix(
                    self.id,
                    ctx.module,
                    [Edit(call.start(), call.end(), "new_reader")],
                    "call new_reader instead of old_reader on line "
                    f"{ctx.lines.position(call.start())[0]}",
                    depends_on=[rename.id],
                    key=ctx.source[call.start() : call.end() + 15],  # the call and its argument
                )
            )


@pytest.fixture
def chained_rule(monkeypatch):
    """Register DM990 next to the real rules for the duration of a test (in this process)."""
    rules = (*registry.all_rules(), ChainedRename)
    monkeypatch.setattr(registry, "all_rules", lambda: rules)
    monkeypatch.setattr(api, "all_rules", lambda: rules)
    return ChainedRename
