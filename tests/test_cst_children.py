"""transforms._cst.children reads a node's fields in libcst's visiting order instead of rebuilding
the node; it must give exactly what libcst's ``children`` gives, for every kind of node."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from transforms._cst import children

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*ROOT.glob("transforms/**/*.py"), *ROOT.glob("fixtures/**/*.py")])

ODD = '''
f"{x!r:>{width}} {y=}"
match p:
    case [1, *rest] if rest: pass
    case {"k": v, **kw}: pass
async def g(*, a: int = 1, **k) -> None:
    async with a as (b, c): yield
    await x[1:2, ::3]
lambda *a, b=1, **c: (yield)
x: list[int] = [*a, *b]
print(*args, **{"a": 1}, sep="")
del a, b
global q
'''


@pytest.mark.parametrize("name", ["odd", *(str(p.relative_to(ROOT)) for p in SOURCES)])
def test_children_are_libcsts(name: str) -> None:
    source = ODD if name == "odd" else (ROOT / name).read_text(encoding="utf-8")
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        pytest.skip("not parsable here")
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        expected = list(node.children)
        got = children(node)
        assert [id(c) for c in got] == [id(c) for c in expected], type(node).__name__
        stack.extend(expected)
