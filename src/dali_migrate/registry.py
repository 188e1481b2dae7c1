"""The one place ``dali_migrate`` reaches into ``transforms/``: the list of rules."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from .rules import Rule


@lru_cache(maxsize=1)
def all_rules() -> tuple[type[Rule], ...]:
    from dali_migrate.transforms import RULES

    return tuple(RULES)


def import_rule_id() -> str:
    return "DM100"


def rule_ids() -> list[str]:
    return [r.id for r in all_rules()]


def get_rule(rule_id: str) -> type[Rule] | None:
    for r in all_rules():
        if r.id == rule_id or r.name == rule_id:
            return r
    return None


def _matches(rule: type[Rule], patterns: Sequence[str]) -> bool:
    return any(rule.id.startswith(p) or rule.name == p for p in patterns)


def rules_for(select: Sequence[str] | None, ignore: Sequence[str] | None) -> list[type[Rule]]:
    """Rules enabled by ``select``/``ignore`` (ids, id prefixes such as ``DM1``, or names).

    The import rule stays on whenever anything is selected, unless ignored explicitly: the other
    rules' output does not run without it.
    """
    rules = list(all_rules())
    if select:
        rules = [r for r in rules if _matches(r, select) or r.id == import_rule_id()]
    if ignore:
        rules = [
            r
            for r in rules
            if not (
                r.id in ignore
                or r.name in ignore
                or (r.id != import_rule_id() and _matches(r, ignore))
            )
        ]
    return rules


def unknown_rules(patterns: Sequence[str]) -> list[str]:
    return [p for p in patterns if not any(r.id.startswith(p) or r.name == p for r in all_rules())]
