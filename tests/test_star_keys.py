"""The keys a ``**name`` hands a pipeline's creation, where the code lets the tool read them
(``transforms/_backend/star_keys.py``)."""

from __future__ import annotations

import libcst as cst
import pytest

from dali_migrate.context import FileContext
from dali_migrate.transforms._backend.star_keys import Unpacked, unpacked, written_out


def _read(body: str) -> tuple[FileContext, cst.Call, Unpacked | str]:
    """The last call of ``make(...)`` in ``def f(a, b):`` + ``body``, read."""
    source = "def f(a, b):\n" + "".join(f"    {line}\n" for line in body.splitlines())
    ctx = FileContext(source)
    calls = [
        c for c in ctx.nodes_of(cst.Call) if isinstance(c.func, cst.Name) and c.func.value == "make"
    ]
    return ctx, calls[-1], unpacked(ctx, calls[-1])


def test_literal_keys_are_always_there_and_added_ones_may_be() -> None:
    _, _, found = _read(
        'kw = {"batch_size": a, "num_threads": 2}\n'
        'kw.update({"shard_id": 0}, seed=b)\n'
        "if b:\n"
        '    kw["dim"] = 3\n'
        '    kw.setdefault("scale", 1.0)\n'
        'print(kw["batch_size"], kw.get("dim"), "dim" in kw, len(kw))\n'
        "p = make(a, **kw)"
    )
    assert isinstance(found, Unpacked)
    assert found.keys == {
        "batch_size": True,
        "num_threads": True,
        "shard_id": True,  # added before the call, whenever it runs
        "seed": True,
        "dim": False,
        "scale": False,
    }


def test_written_out_reads_each_key_from_the_dict() -> None:
    ctx, call, found = _read(
        'kw = dict(num_threads=2, device_id=a, shard_id=0)\nif a:\n    kw["seed"] = b\n'
        'kw["shard_id"] = 1\np = make(a, *[b], **kw)\nkw["dim"] = 3'
    )
    assert isinstance(found, Unpacked)
    view = written_out(call, found, {"seed": cst.parse_expression("-1")}.get)
    assert cst.Module([]).code_for_node(view) == (
        'make(a, b, num_threads = 2, device_id = kw["device_id"], shard_id = kw["shard_id"], '
        'seed = kw.get("seed", -1), dim = kw["dim"])'
    )
    assert found.keys["dim"] is False  # set after the call: there on a later call only


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ('kw = {"a": 1}\nfill(kw)\np = make(**kw)', "`fill(kw)` hands it on"),
        ('kw = {"a": 1}\nkw.pop("a")\np = make(**kw)', "`kw.pop(\"a\")` may add or remove keys"),
        ('kw = {"a": 1}\ndel kw["a"]\np = make(**kw)', "removes a key"),
        ('kw = {"a": 1}\nkw[b] = 2\np = make(**kw)', "not a string written out"),
        ('kw = {"a": 1}\nkw = {}\np = make(**kw)', "not bound once"),
        ('kw = {a: 1}\np = make(**kw)', "not bound once"),
        ("p = make(**a.options)", "set in code the tool does not follow"),
        ('kw = {"a": 1}\np = make(a=2, **kw)', "`a` is given twice"),
        ("p = make(*b)", "not a list or tuple written out here"),
        ("p = make(*[a], b)", "positional arguments follow `*[a]`"),
        ('kw = {"a": 1}\nkw |= {"b": 2}\np = make(**kw)', "not bound once"),
        ('kw = {"a": 1}\ndef g():\n    kw["b"] = 2\np = make(**kw)', "in another function"),
    ],
)
def test_keys_that_cannot_be_read_say_why(body: str, why: str) -> None:
    _, _, found = _read(body)
    assert isinstance(found, str) and why in found, found


def test_a_comprehension_of_the_function_reads_its_dict() -> None:
    _, _, found = _read('kw = {"num_threads": 2}\npipes = [make(i, **kw) for i in range(a)]')
    assert isinstance(found, Unpacked) and found.keys == {"num_threads": True}
