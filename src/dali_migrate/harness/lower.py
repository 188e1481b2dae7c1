"""Source transforms the harness applies to *copies* of the programs it runs (never to the
user's files).

* :func:`lower_to_cpu`: the one shared lowering both sides go through on a machine without a
  GPU: ``device="mixed"``/``"gpu"`` to ``"cpu"`` (keyword arguments, ``device`` variables and
  parameter defaults, ``ndd.Device("gpu", n)``), ``.gpu()`` / ``.to_device("gpu")`` dropped,
  ``device_id=<n>`` to ``None`` (pipelines on a machine without CUDA must not ask for a
  device), ``debug=True`` to ``False`` (DALI's debug mode needs CUDA).
* :func:`split_entry_points`: drops the module-level statements that would *run* the program on
  import (``pipe = train_pipe(...)``, ``pipe.build()``, training loops over them), keeping
  everything else, so the harness can import a script to get at its pipelines; it returns what
  it dropped, for the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeGuard

import libcst as cst
import libcst.matchers as m

from ..cst_text import split_trailing_comments
from ..dali_wrappers import call_module

__all__ = ["Lowering", "lower_to_cpu", "split_entry_points", "strip_entry_points"]

ACCELERATED = ("gpu", "mixed")


@dataclass
class Lowering:
    code: str
    changes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        if not self.changes:
            return "nothing to lower"
        counts: dict[str, int] = {}
        for c in self.changes:
            counts[c] = counts.get(c, 0) + 1
        return ", ".join(f"{n}x {c}" if n > 1 else c for c, n in counts.items())


def _accelerated_string(node: cst.BaseExpression) -> TypeGuard[cst.SimpleString]:
    if isinstance(node, cst.SimpleString):
        try:
            value = node.evaluated_value
        except Exception:  # pragma: no cover - malformed literal
            return False
        return isinstance(value, str) and value in ACCELERATED
    return False


def _to_cpu(name: str, node: cst.SimpleString) -> str:
    """The change lowering ``name=node`` (an accelerated string) makes, for the summary."""
    value = node.evaluated_value
    assert isinstance(value, str)  # _accelerated_string accepted it
    return f'{name}="{value}" -> "cpu"'


def _cpu_like(node: cst.SimpleString) -> cst.SimpleString:
    quote = node.quote if node.quote in ("'", '"') else '"'
    return node.with_changes(value=f"{node.prefix}{quote}cpu{quote}")


def is_device_name(name: str) -> bool:
    """A parameter or keyword the lowering treats as a device (``device``, ``decoder_device``,
    ``dev``; not ``device_id``)."""
    return (
        name in ("dev", "device")
        or name.endswith(("_device", "_dev"))
        or (name.startswith("device_") and name != "device_id")
    )


class _CpuLowering(cst.CSTTransformer):
    def __init__(self) -> None:
        super().__init__()
        self.changes: list[str] = []
        self._pipeline_classes: list[bool] = []

    # device="gpu" / "mixed" as a keyword argument, device_id=<n> as a keyword argument
    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        if updated.keyword is None:
            return updated
        name = updated.keyword.value
        if is_device_name(name) and _accelerated_string(updated.value):
            self.changes.append(_to_cpu(name, updated.value))
            return updated.with_changes(value=_cpu_like(updated.value))
        if name == "device_id" and not m.matches(updated.value, m.Name("None")):
            self.changes.append("device_id -> None")
            return updated.with_changes(value=cst.Name("None"))
        if name == "debug" and m.matches(updated.value, m.Name("True")):
            # DALI 2.4's debug mode (experimental pipeline_def) runs CUDA even for CPU pipelines;
            # the normal mode computes the same outputs
            self.changes.append("debug=True -> False")
            return updated.with_changes(value=cst.Name("False"))
        return updated

    # def f(device="gpu"): ...
    def leave_Param(self, original: cst.Param, updated: cst.Param) -> cst.Param:
        name = updated.name.value
        if (
            updated.default is not None
            and is_device_name(name)
            and _accelerated_string(updated.default)
        ):
            self.changes.append(_to_cpu(name, updated.default))
            return updated.with_changes(default=_cpu_like(updated.default))
        if (
            name == "device_id"
            and updated.default is not None
            and not m.matches(updated.default, m.Name("None"))
        ):
            self.changes.append("device_id -> None")
            return updated.with_changes(default=cst.Name("None"))
        return updated

    # device = "gpu"
    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        if (
            len(updated.targets) == 1
            and isinstance(updated.targets[0].target, cst.Name)
            and is_device_name(updated.targets[0].target.value)
            and _accelerated_string(updated.value)
        ):
            self.changes.append(_to_cpu(updated.targets[0].target.value, updated.value))
            return updated.with_changes(value=_cpu_like(updated.value))
        return updated

    # x.gpu() -> x ; x.to_device("gpu") -> x
    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        func = updated.func
        if isinstance(func, cst.Attribute):
            if func.attr.value == "gpu" and not updated.args:
                self.changes.append(".gpu() dropped")
                return func.value
            if (
                func.attr.value == "to_device"
                and len(updated.args) == 1
                and _accelerated_string(updated.args[0].value)
            ):
                self.changes.append('.to_device("gpu") dropped')
                return func.value
        # ndd.Device("gpu", device_id) -> ndd.Device("cpu")
        if m.matches(func, m.Name("Device") | m.Attribute(attr=m.Name("Device"))) and updated.args:
            first = updated.args[0]
            if first.keyword is None and _accelerated_string(first.value):
                self.changes.append('Device("gpu") -> "cpu"')
                cpu = first.with_changes(
                    value=_cpu_like(first.value), comma=cst.MaybeSentinel.DEFAULT
                )
                return updated.with_changes(args=[cpu])
        # Pipeline(batch_size, num_threads, device_id, ...) and, in a Pipeline subclass,
        # super().__init__(batch_size, num_threads, device_id, ...): the third positional argument
        is_pipeline_ctor = m.matches(
            func, m.Name("Pipeline") | m.Attribute(attr=m.Name("Pipeline"))
        )
        is_super_init = (
            bool(self._pipeline_classes)
            and self._pipeline_classes[-1]
            and m.matches(
                func, m.Attribute(value=m.Call(func=m.Name("super")), attr=m.Name("__init__"))
            )
        )
        if is_pipeline_ctor or is_super_init:
            positional = [i for i, a in enumerate(updated.args) if a.keyword is None and not a.star]
            if len(positional) >= 3 and not m.matches(
                updated.args[positional[2]].value, m.Name("None")
            ):
                args = list(updated.args)
                args[positional[2]] = args[positional[2]].with_changes(value=cst.Name("None"))
                self.changes.append("device_id -> None")
                return updated.with_changes(args=args)
        return updated

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._pipeline_classes.append(
            any(
                m.matches(b.value, m.Name("Pipeline") | m.Attribute(attr=m.Name("Pipeline")))
                for b in node.bases
            )
        )

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self._pipeline_classes.pop()
        return updated


def lower_to_cpu(code: str) -> Lowering:
    """Lower a DALI program (pipeline or dynamic mode) to CPU; see the module docstring."""
    head, tail = split_trailing_comments(code)
    lowering = _CpuLowering()
    new = cst.parse_module(head).visit(lowering)
    return Lowering(new.code + tail, lowering.changes)


# -- entry points ------------------------------------------------------------------------------


class _CallsOf(cst.CSTVisitor):
    """Does an expression call one of ``names`` or a ``.build()`` / ``.run()`` method?"""

    def __init__(self, names: set[str]) -> None:
        super().__init__()
        self.names = names
        self.found = False

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value in self.names:
            self.found = True
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in (
            "build",
            "run",
            "schedule_run",
        ):
            self.found = True


_MAIN_TEST = m.Comparison(left=m.Name("__name__"))


class _Names(cst.CSTVisitor):
    """The names a statement uses, and those it binds (assignment, loop and ``as`` targets)."""

    def __init__(self) -> None:
        super().__init__()
        self.used: set[str] = set()
        self.bound: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.used.add(node.value)

    def _bind(self, target: cst.CSTNode | None) -> None:
        if target is not None:
            self.bound |= {n.value for n in m.findall(target, m.Name()) if isinstance(n, cst.Name)}

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._bind(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bind(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._bind(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._bind(node.name)


def _imported_locals(stmt: cst.BaseSmallStatement, local_modules: set[str]) -> set[str]:
    """The names an import binds to the program's own modules."""
    if isinstance(stmt, cst.ImportFrom) and stmt.module is not None and not stmt.relative:
        root = cst.Module([]).code_for_node(stmt.module).split(".")[0]
        if root in local_modules and not isinstance(stmt.names, cst.ImportStar):
            return {a.evaluated_alias or a.evaluated_name for a in stmt.names}
    if (
        isinstance(stmt, cst.ImportFrom)
        and stmt.relative
        and not isinstance(stmt.names, cst.ImportStar)
    ):
        return {a.evaluated_alias or cst.Module([]).code_for_node(a.name) for a in stmt.names}
    if isinstance(stmt, cst.Import):
        out = set()
        for a in stmt.names:
            dotted = cst.Module([]).code_for_node(a.name)
            if dotted.split(".")[0] in local_modules:
                out.add(a.evaluated_alias or dotted.split(".")[0])
        return out
    return set()


def _describe(module: cst.Module, stmt: cst.CSTNode, line: int) -> str:
    text = module.code_for_node(stmt).strip().splitlines()[0]
    return f"line {line}: {text[:80]}{'...' if len(text) > 80 else ''}"


def split_entry_points(
    code: str,
    local_modules: set[str] | frozenset = frozenset(),
) -> tuple[str, list[str]]:
    """The module without the statements that *run the program* when it is imported, and
    those statements ("line N: text"). A module-level statement is left out when it calls one
    of the module's own functions or classes, a name imported from the program's own modules
    (``local_modules``: top-level module names), a pipeline's ``build()``/``run()``, or uses a
    name such a statement bound; the ``if __name__ == "__main__":`` block is left out silently
    (it never runs on import). Everything else runs: imports, definitions, constants, and also
    a ``raise`` or a ``while True:`` at module level, which then show in the verdict."""
    module = cst.parse_module(code)
    wrapper = cst.metadata.MetadataWrapper(module, unsafe_skip_copy=True)
    lines = wrapper.resolve(cst.metadata.PositionProvider)
    local = {s.name.value for s in module.body if isinstance(s, (cst.FunctionDef, cst.ClassDef))}
    state = {"local": set(local), "dropped": set()}
    body: list[cst.BaseStatement] = []
    dropped: list[str] = []

    def runs_program(node: cst.CSTNode) -> bool:
        finder, names = _CallsOf(state["local"]), _Names()
        node.visit(finder)
        node.visit(names)
        if finder.found or names.used & state["dropped"]:
            state["dropped"] |= names.bound
            return True
        return False

    for stmt in module.body:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef, cst.Try)):
            body.append(stmt)  # try: import x / except ImportError: fallbacks
        elif isinstance(stmt, cst.If) and m.matches(stmt.test, _MAIN_TEST):
            continue  # the __main__ block never runs under the harness anyway
        elif isinstance(stmt, cst.SimpleStatementLine):
            keep: list[cst.BaseSmallStatement] = []
            for small in stmt.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)):
                    state["local"] |= _imported_locals(small, set(local_modules))
                    keep.append(small)
                elif _wrapper_import(small):
                    keep.append(small)  # dali = try_import_dali(): an import, not the program
                elif runs_program(small):
                    dropped.append(_describe(module, small, lines[stmt].start.line))
                else:
                    keep.append(small)
            if keep:
                body.append(stmt.with_changes(body=keep))
        elif runs_program(stmt):
            dropped.append(_describe(module, stmt, lines[stmt].start.line))
        else:
            body.append(stmt)
    return module.with_changes(body=body).code, dropped


def _wrapper_import(small: cst.BaseSmallStatement) -> bool:
    """``dali = try_import_dali()``, ``fn = importlib.import_module("nvidia.dali.fn")``: a name
    bound to DALI by a call the migration follows as an import."""
    value = small.value if isinstance(small, (cst.Assign, cst.AnnAssign)) else None
    return isinstance(value, cst.Call) and call_module(value) is not None


def strip_entry_points(code: str, local_modules: set[str] | frozenset = frozenset()) -> str:
    """:func:`split_entry_points`, the code only."""
    return split_entry_points(code, local_modules)[0]
