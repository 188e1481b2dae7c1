"""What the README promises a first-time user about setting up and running the tests."""

from __future__ import annotations

import re
from pathlib import Path

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def test_setup_says_how_to_get_the_cpu_torch_wheel_and_how_long_the_suite_takes():
    setup = _section("Set up")
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in setup
    assert re.search(r"suite takes about \d+ to \d+ minutes", setup)


def test_exit_codes_of_the_command_line_are_all_documented():
    cli = _section("Command line")
    for code in ("**0**", "**1**", "**2**", "**130**", "**141**"):
        assert code in cli
    assert "dali-migrate verify OLD.py NEW.py" in cli and "`--device cpu`" in cli
