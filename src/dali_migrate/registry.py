"""The one place ``dali_migrate`` reaches into ``transforms/``: the list of rules."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from .rules import Rule


@lru_cache(maxsize=1)
def all_rules() -> tuple[type[Rule], ...]:
    from dali_migrate.transforms import RULES

    return tuple(RULES)


def derived_rules() -> list[type[Rule]]:
    """The rules whose fix is derived from the others' (they declare :meth:`Rule.finalize`)."""
    return [r for r in all_rules() if r.is_derived()]


def derived_rule_of(fix_id: str) -> type[Rule] | None:
    """The derived rule whose fix ``fix_id`` names (None: a fix of another rule)."""
    return next((r for r in derived_rules() if fix_id.startswith(r.id + ":")), None)


def is_derived_fix(fix_id: str) -> bool:
    """Whether ``fix_id`` names a fix of a derived rule (made for the others, never chosen)."""
    return derived_rule_of(fix_id) is not None


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

    Derived rules (the import rule) stay on whenever anything is selected, unless ignored
    explicitly: the other rules' output does not run without them.
    """
    rules = list(all_rules())
    if select:
        rules = [r for r in rules if _matches(r, select) or r.is_derived()]
    if ignore:
        rules = [
            r
            for r in rules
            if not (
                r.id in ignore or r.name in ignore or (not r.is_derived() and _matches(r, ignore))
            )
        ]
    return rules


def unknown_rules(patterns: Sequence[str]) -> list[str]:
    return [p for p in patterns if not any(r.id.startswith(p) or r.name == p for r in all_rules())]
