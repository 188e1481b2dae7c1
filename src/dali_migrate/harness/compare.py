"""Sample-by-sample comparison of two runs: dtype, shape, layout, then values.

Values are compared exactly for integer, boolean and 8/16-bit image types. Floating-point
outputs are compared with ``abs(old - new) <= atol + rtol * abs(old)`` (NaN equals NaN), with
these defaults per dtype (record and replay makes CPU runs bit-exact, so the defaults are
tight; they only absorb the last-bit differences of a hand-written migration that computes a
float in another order):

=========  ========  ========
dtype      atol      rtol
=========  ========  ========
float16    1e-3      1e-3
bfloat16   1e-2      1e-2
float32    1e-6      1e-6
float64    1e-12     1e-12
=========  ========  ========

``--atol`` / ``--rtol`` override them: ``--atol 1e-4`` for every float dtype, or
``--atol float16=1e-2`` for one (the option can be repeated).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-3, 1e-3),
    "bfloat16": (1e-2, 1e-2),
    "float32": (1e-6, 1e-6),
    "float64": (1e-12, 1e-12),
}


@dataclass
class Tolerances:
    per_dtype: dict[str, tuple[float, float]] = field(
        default_factory=lambda: dict(DEFAULT_TOLERANCES)
    )

    @classmethod
    def parse(
        cls,
        atol: list[str] | str | float | None = None,
        rtol: list[str] | str | float | None = None,
    ) -> Tolerances:
        """From ``--atol``/``--rtol`` values: ``"1e-5"`` (every float dtype) or
        ``"float32=1e-5"``."""
        tol = cls()
        for index, values in ((0, atol), (1, rtol)):
            if values is None:
                continue
            items = values if isinstance(values, (list, tuple)) else [values]
            for v in items:
                text = str(v)
                if "=" in text:
                    dtype, _, number = text.partition("=")
                    dtypes = [dtype.strip()]
                else:
                    dtypes, number = list(tol.per_dtype), text
                value = float(number)
                if value < 0:
                    raise ValueError(f"tolerance {text!r} is negative")
                for d in dtypes:
                    pair = list(tol.per_dtype.get(d, (0.0, 0.0)))
                    pair[index] = value
                    tol.per_dtype[d] = (pair[0], pair[1])
        return tol

    def for_dtype(self, dtype: str) -> tuple[float, float] | None:
        """(atol, rtol) for a float dtype; None for dtypes compared exactly."""
        return self.per_dtype.get(dtype)


@dataclass
class Difference:
    iteration: int
    output: int
    sample: int | None
    what: str  # "dtype" | "shape" | "layout" | "values" | "samples" | "outputs" | "iterations"
    message: str
    index: list[int] | None = None
    old_value: object = None
    new_value: object = None

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("old_value", "new_value"):
            if d[k] is not None:
                d[k] = repr(d[k]) if not isinstance(d[k], (int, float, str, bool)) else d[k]
        return d


@dataclass
class Comparison:
    iterations: int = 0
    outputs: int = 0
    samples_compared: int = 0
    samples_differing: int = 0
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    first: Difference | None = None
    differences: list[Difference] = field(default_factory=list)  # the first few, for the report

    @property
    def equal(self) -> bool:
        return self.first is None

    def add(self, diff: Difference, limit: int = 20) -> None:
        if self.first is None:
            self.first = diff
        if len(self.differences) < limit:
            self.differences.append(diff)

    def to_dict(self) -> dict:
        return {
            "iterations": self.iterations,
            "outputs": self.outputs,
            "samples_compared": self.samples_compared,
            "samples_differing": self.samples_differing,
            "max_abs_err": self.max_abs_err,
            "max_rel_err": self.max_rel_err,
            "first": self.first.to_dict() if self.first else None,
            "differences": [d.to_dict() for d in self.differences],
        }


def _scalar(x):
    try:
        return x.item()
    except Exception:
        return x


def compare_runs(
    old: list[list[dict]],
    new: list[list[dict]],
    tolerances: Tolerances | None = None,
    shapes_only: set[int] | None = None,
) -> Comparison:
    """Compare two runs: per iteration a list of outputs ``{"layout", "dtype", "samples"}``
    (see ``side.to_output``). The outputs whose indices are in ``shapes_only`` are compared by
    dtype and shape, not by value."""
    tol = tolerances or Tolerances()
    result = Comparison(iterations=min(len(old), len(new)))
    if len(old) != len(new):
        result.add(
            Difference(
                min(len(old), len(new)),
                -1,
                None,
                "iterations",
                f"{len(old)} iterations before, {len(new)} after",
            )
        )
    for it, (o_out, n_out) in enumerate(zip(old, new)):
        result.outputs = max(result.outputs, len(o_out))
        if len(o_out) != len(n_out):
            result.add(
                Difference(
                    it, -1, None, "outputs", f"{len(o_out)} outputs before, {len(n_out)} after"
                )
            )
            continue
        for k, (o, n) in enumerate(zip(o_out, n_out)):
            _compare_output(result, it, k, o, n, tol, values=not (shapes_only and k in shapes_only))
    return result


def _compare_output(
    result: Comparison, it: int, k: int, o: dict, n: dict, tol: Tolerances, values: bool
) -> None:
    """Output ``k`` of iteration ``it``: its layout and each sample (values too when ``values``)."""
    if o.get("layout") is not None and n.get("layout") is not None and o["layout"] != n["layout"]:
        result.add(
            Difference(
                it, k, None, "layout", f"layout {o['layout']!r} before, {n['layout']!r} after"
            )
        )
    os_, ns_ = o["samples"], n["samples"]
    if len(os_) != len(ns_):
        result.add(
            Difference(it, k, None, "samples", f"{len(os_)} samples before, {len(ns_)} after")
        )
        result.samples_differing += abs(len(os_) - len(ns_))
    for s, (a, b) in enumerate(zip(os_, ns_)):
        result.samples_compared += 1
        _compare_sample(result, it, k, s, a, b, tol, values)


def _compare_sample(
    result: Comparison, it: int, k: int, s: int, a: Any, b: Any, tol: Tolerances, values: bool
) -> None:
    """Sample ``s``: dtype and shape, then (when ``values``) its elements, within the tolerances."""
    import numpy as np

    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype:
        result.samples_differing += 1
        result.add(Difference(it, k, s, "dtype", f"dtype {a.dtype} before, {b.dtype} after"))
        return
    if a.shape != b.shape:
        result.samples_differing += 1
        result.add(Difference(it, k, s, "shape", f"shape {a.shape} before, {b.shape} after"))
        return
    pair = (
        tol.for_dtype(a.dtype.name) if a.dtype.kind == "f" or a.dtype.name == "bfloat16" else None
    )
    if not values:
        return
    if pair is None:
        bad = None if np.array_equal(a, b) else (a != b)
    else:
        atol, rtol = pair
        af, bf = a.astype(np.float64), b.astype(np.float64)
        close = np.isclose(bf, af, atol=atol, rtol=rtol, equal_nan=True)
        bad = None if close.all() else ~close
    if bad is None:  # equal (within the tolerances)
        return
    result.samples_differing += 1
    af, bf = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        abs_err = np.abs(af - bf)
        finite = np.isfinite(abs_err)
        if finite.any():
            result.max_abs_err = max(result.max_abs_err, float(abs_err[finite].max()))
        nonzero = finite & (af != 0)
        if nonzero.any():
            rel_err = abs_err[nonzero] / np.abs(af[nonzero])
            result.max_rel_err = max(result.max_rel_err, float(rel_err.max()))
    first = tuple(int(i) for i in np.argwhere(bad)[0]) if a.ndim else ()
    result.add(
        Difference(
            it,
            k,
            s,
            "values",
            f"values differ in {int(bad.sum())} of {a.size} elements",
            list(first),
            _scalar(a[first]),
            _scalar(b[first]),
        )
    )
