"""What ``pip install .`` ships: every package of the source tree is listed in pyproject.toml
(setuptools installs only the listed ones, and a missing one fails only once installed)."""

from __future__ import annotations

from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent


def _declared() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return set(config["tool"]["setuptools"]["packages"])


def _on_disk() -> set[str]:
    found = set()
    for base, prefix in (
        (ROOT / "src" / "dali_migrate", "dali_migrate"),
        (ROOT / "transforms", "dali_migrate.transforms"),
    ):
        for module in base.rglob("*.py"):  # a folder of modules is a package, __init__.py or not
            rel = module.parent.relative_to(base).parts
            found.add(".".join([prefix, *rel]))
    return found


def test_every_package_is_installed() -> None:
    assert _on_disk() - _declared() == set()


def test_no_package_is_declared_that_does_not_exist() -> None:
    assert _declared() - _on_disk() == set()
