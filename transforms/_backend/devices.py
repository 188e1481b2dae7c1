"""Where data lives, in migrated graph code (a component of DM200-DM202).

Pipeline mode copies a CPU operand of an arithmetic expression to the GPU when the other operand
is on the GPU; dynamic mode raises ``ValueError: Cannot mix GPU and CPU inputs`` (seen on an H200
with ``volumes.gpu() * (fn.cast(flip, ...) + 1.0)``, where ``flip`` comes from a random operator,
so it is on the CPU). The migrated code therefore moves such operands itself.

Before (migrated code, as lowered)::

    volumes = ndd.cast(volumes.gpu(), dtype=types.FLOAT)
    flip = ndd.random.coin_flip(batch_size=n, rng=rng)
    scaled = volumes * (ndd.cast(flip, dtype=types.FLOAT) + 1.0)

After::

    scaled = volumes * (ndd.cast(flip, dtype=types.FLOAT) + 1.0).gpu()

Where data lives is followed statement by statement: an operator called with ``device="gpu"``,
``.gpu()``, and any operator or expression with a GPU input are on the GPU; ``.cpu()`` is on the
CPU. Named arguments of operators stay as they are: GPU operators take CPU argument inputs in
both modes. An operator called with ``device=<an expression>`` (and what is computed from it) is
on a device known only when the code runs: it is not moved (``device=preprocessing_device`` next
to data moved to the GPU under ``if preprocessing_device == "gpu":`` is on the same device).
"""

from __future__ import annotations

import libcst as cst

from .._cst import walk

_OPERATORS = (cst.BinaryOperation, cst.Comparison)


def move_cpu_operands(
    stmts: list[cst.BaseStatement], nodes: set[str]
) -> tuple[list[cst.BaseStatement], bool]:
    """``stmts`` (lowered, in order) with CPU data operands of GPU arithmetic moved to the GPU,
    and whether any was. ``nodes`` are the names that hold data (Batches)."""
    gpu: set[str] = set()
    unknown: set[str] = set()  # data on the device of a device= expression
    nodes = set(nodes)
    out: list[cst.BaseStatement] = []
    moved = False
    for stmt in stmts:
        mover = _Mover(gpu, nodes, unknown)
        new = stmt.visit(mover)
        assert isinstance(new, cst.BaseStatement)  # _Mover rewrites expressions only
        moved = moved or mover.moved
        for node in walk(new):
            if isinstance(node, cst.Assign):
                for t in node.targets:
                    for name in _names(t.target):
                        (gpu.add if _on_gpu(node.value, gpu) else gpu.discard)(name)
                        found = _device_unknown(node.value, unknown)
                        (unknown.add if found else unknown.discard)(name)
                        if _is_data(node.value, nodes) or name in gpu:
                            nodes.add(name)
            elif isinstance(node, cst.For):
                for name in _names(node.target):
                    gpu.discard(name)
        out.append(new)
    return out, moved


class _Mover(cst.CSTTransformer):
    def __init__(self, gpu: set[str], nodes: set[str], unknown: set[str]) -> None:
        super().__init__()
        self.gpu = gpu
        self.nodes = nodes
        self.unknown = unknown
        #: an operand was moved (the statement is not what it was)
        self.moved = False

    def leave_BinaryOperation(
        self, original: cst.BinaryOperation, updated: cst.BinaryOperation
    ) -> cst.BinaryOperation:
        left, right = updated.left, updated.right
        if _on_gpu(left, self.gpu) and self._cpu_data(right):
            return updated.with_changes(right=self._to_gpu(right))
        if _on_gpu(right, self.gpu) and self._cpu_data(left):
            return updated.with_changes(left=self._to_gpu(left))
        return updated

    def leave_Comparison(self, original: cst.Comparison, updated: cst.Comparison) -> cst.Comparison:
        operands = [updated.left, *(c.comparator for c in updated.comparisons)]
        if not any(_on_gpu(o, self.gpu) for o in operands):
            return updated
        left = self._to_gpu(updated.left) if self._cpu_data(updated.left) else updated.left
        comparisons = [
            c.with_changes(comparator=self._to_gpu(c.comparator))
            if self._cpu_data(c.comparator)
            else c
            for c in updated.comparisons
        ]
        return updated.with_changes(left=left, comparisons=comparisons)

    def _to_gpu(self, expr: cst.BaseExpression) -> cst.Call:
        self.moved = True
        return _to_gpu(expr)

    def _cpu_data(self, expr: cst.BaseExpression) -> bool:
        return (
            _is_data(expr, self.nodes)
            and not _on_gpu(expr, self.gpu)
            and not _device_unknown(expr, self.unknown)
        )


def _device_unknown(expr: cst.BaseExpression, unknown: set[str]) -> bool:
    """``expr`` is computed by an operator whose ``device=`` is an expression (or from one)."""
    if isinstance(expr, cst.Name):
        return expr.value in unknown
    if isinstance(expr, cst.Call):
        for a in expr.args:
            if a.keyword is not None and a.keyword.value == "device":
                return not isinstance(a.value, cst.SimpleString)
        return any(a.keyword is None and _device_unknown(a.value, unknown) for a in expr.args)
    if isinstance(expr, cst.BinaryOperation):
        return _device_unknown(expr.left, unknown) or _device_unknown(expr.right, unknown)
    if isinstance(expr, cst.UnaryOperation):
        return _device_unknown(expr.expression, unknown)
    return False


def _on_gpu(expr: cst.BaseExpression, gpu: set[str]) -> bool:
    if isinstance(expr, cst.Name):
        return expr.value in gpu
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("gpu", "cpu") and not expr.args:
            return func.attr.value == "gpu"
        for a in expr.args:
            if a.keyword is not None and a.keyword.value == "device":
                return isinstance(a.value, cst.SimpleString) and a.value.evaluated_value in (
                    "gpu",
                    "mixed",
                )
        return any(a.keyword is None and _on_gpu(a.value, gpu) for a in expr.args)
    if isinstance(expr, cst.BinaryOperation):
        return _on_gpu(expr.left, gpu) or _on_gpu(expr.right, gpu)
    if isinstance(expr, cst.UnaryOperation):
        return _on_gpu(expr.expression, gpu)
    if isinstance(expr, cst.Comparison):
        return _on_gpu(expr.left, gpu) or any(_on_gpu(c.comparator, gpu) for c in expr.comparisons)
    if isinstance(expr, (cst.Subscript, cst.Attribute)):
        return _on_gpu(expr.value, gpu)
    return False


def _is_data(expr: cst.BaseExpression, nodes: set[str]) -> bool:
    """A Batch: a data name, an operator call (a dotted call on ndd) or arithmetic with one."""
    if isinstance(expr, cst.Name):
        return expr.value in nodes
    if isinstance(expr, cst.Call):
        func = expr.func
        if (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Attribute)
            and func.value.attr.value == "random"
        ):
            return True  # ndd.random.coin_flip(batch_size=...): a batch drawn on the CPU
        return isinstance(func, cst.Attribute) and any(
            a.keyword is None and _is_data(a.value, nodes) for a in expr.args
        )
    if isinstance(expr, cst.BinaryOperation):
        return _is_data(expr.left, nodes) or _is_data(expr.right, nodes)
    if isinstance(expr, cst.UnaryOperation):
        return _is_data(expr.expression, nodes)
    if isinstance(expr, (cst.Subscript, cst.Attribute)):
        return _is_data(expr.value, nodes)
    return False


def _to_gpu(expr: cst.BaseExpression) -> cst.Call:
    if (
        isinstance(expr, (cst.BinaryOperation, cst.UnaryOperation, cst.Comparison))
        and not expr.lpar
    ):
        expr = expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(cst.Attribute(expr, cst.Name("gpu")))


def _names(target: cst.CSTNode) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _names(e.value)]
    return []
