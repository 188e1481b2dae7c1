"""dali_migrate.cst_walk.index lists a module's nodes and parents as libcst's own visitor and
ParentNodeProvider give them, without rebuilding a node."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, ParentNodeProvider

from dali_migrate.cst_walk import index

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(ROOT.glob("fixtures/**/*.py"))[::7]


class _Order(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.nodes: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.nodes.append(node)
        return True


@pytest.mark.parametrize("name", [str(p.relative_to(ROOT)) for p in SOURCES])
def test_index_is_libcsts_order_and_parents(name: str) -> None:
    module = cst.parse_module((ROOT / name).read_text(encoding="utf-8"))
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    order = _Order()
    wrapper.visit(order)
    expected_parents = wrapper.resolve(ParentNodeProvider)
    nodes, parents = index(module)
    assert [id(n) for n in nodes] == [id(n) for n in order.nodes]
    assert {id(k): id(v) for k, v in parents.items()} == {
        id(k): id(v) for k, v in expected_parents.items()
    }
