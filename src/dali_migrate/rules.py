"""The rule interface every transform implements, and the per-file state rules share."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import libcst as cst

from .context import FileContext
from .fixes import Diagnostic, Edit, Fix, Safety


@dataclass
class FileState:
    """What the rules found in one file so far. Structural rules run first and *claim* the
    subtrees they own (migrated or refused), so local rules never touch them on their own."""

    ctx: FileContext
    fixes: list[Fix] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    claimed: list[cst.CSTNode] = field(default_factory=list)
    #: those of ``claimed`` left in pipeline mode (pipelines not migrated, what they call)
    kept: list[cst.CSTNode] = field(default_factory=list)
    #: True when a pipeline of this file was left unmigrated: then local rewrites outside
    #: migrated pipelines are withheld, so no file ends up half pipeline mode, half dynamic mode.
    refused_pipeline: bool = False
    #: ids of the structural fixes; the import fix depends on them
    structural: list[str] = field(default_factory=list)
    #: every composable rule (instances, registry order, selected or not): structural rules
    #: rewrite the code they generate with them
    lowering: list[Rule] = field(default_factory=list)
    #: checks that need what every structural rule claimed, run once they all ran
    deferred: list[Callable[[FileState], None]] = field(default_factory=list)


class Rule:
    """A transform. Subclasses set the class attributes and implement :meth:`run`.

    The docstring of the rule's module is its documentation, which ``dali-migrate --explain
    DMxxx`` prints: what it rewrites, a before/after, and when its fix is unsafe. The
    before/after is one of the rule's fixture pairs, copied word for word under headers that
    name the files (``tests/test_rule_examples.py`` holds the copies equal to the files).
    """

    id: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    safety: ClassVar[Safety] = "safe"
    #: structural rules run before local ones and claim what they own
    structural: ClassVar[bool] = False
    #: rewrites single nodes; structural rules compose these over the code they generate
    composable: ClassVar[bool] = False
    #: runs after every other rule and sees what they proposed (e.g. to mark what is left)
    last: ClassVar[bool] = False

    #: the message of the fix :meth:`finalize` makes (derived rules only)
    finalize_message: ClassVar[str] = ""

    def run(self, state: FileState) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def finalize(self, ctx: FileContext, new_code: str, taken: Sequence[Edit] = ()) -> list[Edit]:
        """Declared by a *derived* rule: one whose fix is not proposed by :meth:`run` but made
        after the other fixes are chosen, for whichever of them are applied (and so recomputed
        for every subset). ``new_code`` is ``ctx.analysed_source`` with the chosen edits; the
        edits returned apply to ``ctx.source`` (none: nothing to change). Their fix depends on
        every applied fix; ``taken``: the chosen edits (code a derived edit must not land in). A
        derived rule is on whenever any rule is selected, unless ignored by
        its id or name, and is not run with the local rules.
        """
        raise NotImplementedError  # pragma: no cover - only derived rules declare it

    @classmethod
    def is_derived(cls) -> bool:
        """Whether the rule declares :meth:`finalize`."""
        return cls.finalize is not Rule.finalize
