#!/usr/bin/env python3
"""Generate the dali-migrate operator catalog from the installed DALI.

The catalog (``src/dali_migrate/data/catalog.json``) says, for every operator of DALI pipeline
mode (``nvidia.dali.fn``, the legacy ``nvidia.dali.ops`` classes and ``nvidia.dali.math``), what
it is called in DALI dynamic mode (``nvidia.dali.experimental.dynamic``, "ndd"), whether it is a
reader, a random operator or a decoder, what it was deprecated in favour of, and what its schema
says about inputs, outputs and backends.

Everything is read from the installed DALI: the operator schemas (``nvidia.dali.backend``) and the
Python modules themselves. The output is deterministic, so regenerating with the same DALI gives
a byte-identical file.

Usage::

    python scripts/gen_catalog.py                # (re)write the catalog
    python scripts/gen_catalog.py --check        # exit 1 if the committed file is stale
    python scripts/gen_catalog.py --output X     # write somewhere else
    python scripts/gen_catalog.py --force        # accept a DALI version other than the pinned one

The catalog is pinned to the DALI version recorded in the existing output file: if the installed
DALI differs, the script refuses (exit 2) unless ``--force`` is given.
"""

from __future__ import annotations

import argparse
import difflib
import inspect
import json
import sys
import types
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = REPO_ROOT / "src" / "dali_migrate" / "data" / "catalog.json"
GENERATED_BY = "scripts/gen_catalog.py"

FN_ROOT = "nvidia.dali.fn"
OPS_ROOT = "nvidia.dali.ops"
NDD_ROOT = "nvidia.dali.experimental.dynamic"
MATH_ROOT = "nvidia.dali.math"

EXIT_STALE = 1
EXIT_VERSION_MISMATCH = 2


def warn(message: str) -> None:
    print(f"gen_catalog: warning: {message}", file=sys.stderr)


# --------------------------------------------------------------------------------------------
# Walking the Python modules
# --------------------------------------------------------------------------------------------


def walk_module(module: types.ModuleType, root: str, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Yield ``(dotted path relative to root, object)`` for the public non-module attributes.

    Submodules are followed recursively, but only those that belong to ``root`` (so re-exported
    modules such as ``sys`` or ``numpy`` are not walked) and only once each.
    """
    yield from _walk(module, root, prefix, set())


def _walk(
    module: types.ModuleType, root: str, prefix: str, seen: set[int]
) -> Iterator[tuple[str, Any]]:
    seen.add(id(module))
    for name in sorted(dir(module)):
        if name.startswith("_"):
            continue
        try:
            obj = getattr(module, name)
        except Exception:  # a lazy attribute that fails to import: not an operator
            continue
        if isinstance(obj, types.ModuleType):
            if (obj.__name__ == root or obj.__name__.startswith(root + ".")) and id(
                obj
            ) not in seen:
                yield from _walk(obj, root, prefix + name + ".", seen)
            continue
        yield prefix + name, obj


def is_hidden(path: str) -> bool:
    """``fn.hidden.*`` and friends: duplicates DALI keeps for its documentation machinery."""
    return "hidden" in path.split(".")


# --------------------------------------------------------------------------------------------
# Schemas
# --------------------------------------------------------------------------------------------


class Schemas:
    """Access to DALI's operator schemas, with the alias / replacement chains resolved."""

    def __init__(self) -> None:
        import nvidia.dali.backend as backend
        import nvidia.dali.ops as ops

        self._backend = backend
        # The op registries of the Python layer also know the Python-only operators
        # (PythonFunction, TFRecord...) whose schema lists no backend.
        self._registered = {
            "cpu": set(ops.cpu_ops()),
            "gpu": set(ops.gpu_ops()),
            "mixed": set(ops.mixed_ops()),
        }

    def get(self, name: str) -> Any | None:
        return self._backend.TryGetSchema(name) if name else None

    def replacement(self, schema: Any) -> str:
        """The schema this one is deprecated in favour of, or an alias of ('' if none)."""
        return schema.DeprecatedInFavorOf() or schema.AliasFor()

    def chain(self, name: str) -> list[Any]:
        """The schema, then what it is an alias of / deprecated in favour of, transitively."""
        result: list[Any] = []
        seen: set[str] = set()
        while name and name not in seen:
            seen.add(name)
            schema = self.get(name)
            if schema is None:
                break
            result.append(schema)
            name = self.replacement(schema)
        return result

    def data_schema(self, schema: Any) -> Any:
        """The schema that holds the real data: an alias schema (FileReader) declares no inputs
        or outputs of its own, its target does."""
        seen: set[str] = set()
        while schema.AliasFor() and schema.AliasFor() not in seen:
            seen.add(schema.AliasFor())
            target = self.get(schema.AliasFor())
            if target is None:
                break
            schema = target
        return schema

    def backends(self, schema: Any) -> list[str]:
        found = set(schema.GetSupportedBackends())
        found |= {kind for kind, names in self._registered.items() if schema.Name() in names}
        if not found:
            target = self.data_schema(schema)
            if target is not schema:
                return self.backends(target)
        return sorted(found)

    def num_outputs(self, schema: Any, func: Any) -> int | None:
        """The number of outputs when the schema fixes it, else None (as DALI's own signature
        generator does: no output function, evaluated with an empty spec)."""
        schema = self.data_schema(schema)
        if schema.HasOutputFn():
            return None
        if "num_outputs" in _parameters(func):  # python_function, external_source
            return None
        try:
            count = schema.CalculateOutputs(self._backend.OpSpec(""))
        except Exception:
            return None
        return count if count > 0 else None  # 0: outputs decided in Python (TFRecord's dict)


def _parameters(func: Any) -> set[str]:
    try:
        return set(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return set()


# --------------------------------------------------------------------------------------------
# Building the catalog
# --------------------------------------------------------------------------------------------


def collect_fn(fn_module: types.ModuleType) -> tuple[dict[str, Any], dict[str, str]]:
    """Return ``{fn path: callable}`` (hidden duplicates left out) and ``{hidden path: schema}``."""
    operators: dict[str, Any] = {}
    hidden: dict[str, str] = {}
    for path, obj in walk_module(fn_module, FN_ROOT):
        if not callable(obj):
            continue
        schema_name = getattr(obj, "_schema_name", None)
        if not isinstance(schema_name, str):
            warn(f"fn.{path} is callable but has no schema; left out")
            continue
        if is_hidden(path):
            hidden[path] = schema_name
        else:
            operators[path] = obj
    return operators, hidden


def index_ndd(ndd_module: types.ModuleType) -> dict[str, str]:
    """Return ``{schema name: ndd path}`` for every schema-backed public callable of ndd."""
    index: dict[str, str] = {}
    for path, obj in walk_module(ndd_module, NDD_ROOT):
        schema_name = getattr(obj, "_schema_name", None)
        if not callable(obj) or not isinstance(schema_name, str):
            continue
        if schema_name in index:
            warn(f"ndd exposes schema {schema_name} twice: {index[schema_name]}, {path}")
            path = min(path, index[schema_name])
        index[schema_name] = path
    return index


def expected_ndd_path(fn_path: str, schema: Any) -> str:
    """Where ndd is expected to put an op: readers are PascalCase classes, the rest keep the
    fn name. Used only to check the index found by walking ndd."""
    if "readers" in schema.ModulePath():
        return ".".join([*schema.ModulePath(), schema.OperatorName()])
    return fn_path


def classify(chain: list[Any]) -> str:
    if any("readers" in s.ModulePath() for s in chain):
        return "reader"
    if any(s.HasRandomStateArg() for s in chain):
        return "random"
    if any("decoders" in s.ModulePath() for s in chain):
        return "decoder"
    return "op"


def build_operators(
    fn_ops: dict[str, Any], schemas: Schemas, ndd_index: dict[str, str]
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    fn_path_by_schema: dict[str, str] = {}
    for path in sorted(fn_ops):
        fn_path_by_schema.setdefault(fn_ops[path]._schema_name, path)

    entries: dict[str, dict[str, Any]] = {}
    for path, func in sorted(fn_ops.items()):
        name = func._schema_name
        schema = schemas.get(name)
        if schema is None:
            warn(f"fn.{path}: schema {name} is not registered; left out")
            continue
        data = schemas.data_schema(schema)

        ndd_path = ndd_index.get(name)
        if ndd_path is not None and ndd_path != expected_ndd_path(path, schema):
            warn(f"fn.{path} is ndd.{ndd_path}, not ndd.{expected_ndd_path(path, schema)}")

        modern = None
        replacement = schemas.replacement(schema)
        if replacement:
            modern = fn_path_by_schema.get(replacement)
            if modern is None:
                warn(f"fn.{path}: replacement schema {replacement} has no fn path")

        deprecated_in = (schema.DeprecatedInVersion() or None) if schema.IsDeprecated() else None
        entries[path] = {
            "ndd": ndd_path,
            "kind": classify(schemas.chain(name)),
            "schema": name,
            "deprecated_in": deprecated_in,
            "modern": modern,
            "inputs": [data.MinNumInput(), data.MaxNumInput()],
            "num_outputs": schemas.num_outputs(schema, func),
            "backends": schemas.backends(schema),
        }
    return entries, fn_path_by_schema


def build_ops_classes(
    ops_module: types.ModuleType, schemas: Schemas, fn_path_by_schema: dict[str, str]
) -> dict[str, str]:
    result: dict[str, str] = {}
    for path, obj in walk_module(ops_module, OPS_ROOT):
        if not isinstance(obj, type) or is_hidden(path):
            continue
        if not obj.__module__.startswith(OPS_ROOT):  # e.g. itertools.count re-exported
            continue
        schema_name = getattr(obj, "schema_name", None)
        if not isinstance(schema_name, str):
            # ops.ExternalSource is a pure-Python class with no schema_name attribute; its
            # schema is named after its path.
            schema_name = "__".join(path.split("."))
        fn_path = fn_path_by_schema.get(schema_name)
        if fn_path is None:
            if schemas.get(schema_name) is not None:
                warn(f"ops.{path}: schema {schema_name} has no fn counterpart; left out")
            continue
        result[path] = fn_path
    return result


def build_math(math_module: types.ModuleType, ndd_math: types.ModuleType) -> list[str]:
    names = []
    for name, obj in walk_module(math_module, MATH_ROOT):
        if not callable(obj) or getattr(obj, "__module__", None) != MATH_ROOT:
            continue
        if callable(getattr(ndd_math, name, None)):
            names.append(name)
        else:
            warn(f"math.{name} has no ndd.math counterpart")
    return sorted(names)


def check_hidden(hidden: dict[str, str], fn_path_by_schema: dict[str, str]) -> None:
    for path, schema_name in sorted(hidden.items()):
        if schema_name not in fn_path_by_schema:
            warn(f"fn.{path} ({schema_name}) has no non-hidden counterpart; left out")


def check_ndd_coverage(ndd_index: dict[str, str], operators: dict[str, dict[str, Any]]) -> None:
    mapped = {entry["ndd"] for entry in operators.values()}
    for schema_name, path in sorted(ndd_index.items()):
        if path not in mapped:
            warn(f"ndd.{path} ({schema_name}) corresponds to no fn operator")


def build_catalog() -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import nvidia.dali
        import nvidia.dali.experimental.dynamic as ndd
        import nvidia.dali.fn as fn
        import nvidia.dali.math as dali_math
        import nvidia.dali.ops as ops

        schemas = Schemas()
        fn_ops, hidden = collect_fn(fn)
        ndd_index = index_ndd(ndd)
        operators, fn_path_by_schema = build_operators(fn_ops, schemas, ndd_index)
        check_hidden(hidden, fn_path_by_schema)
        check_ndd_coverage(ndd_index, operators)
        return {
            "dali_version": nvidia.dali.__version__,
            "generated_by": GENERATED_BY,
            "operators": operators,
            "ops_classes": build_ops_classes(ops, schemas, fn_path_by_schema),
            "math": build_math(dali_math, ndd.math),
        }


def render(catalog: dict[str, Any]) -> str:
    return json.dumps(catalog, sort_keys=True, indent=1) + "\n"


def summary(catalog: dict[str, Any]) -> str:
    operators = catalog["operators"].values()
    present = Counter(op["kind"] for op in operators if op["ndd"] is not None)
    missing = Counter(op["kind"] for op in operators if op["ndd"] is None)
    kinds = ", ".join(
        f"{kind} {present[kind]}/{missing[kind]}" for kind in ("op", "decoder", "random", "reader")
    )
    return (
        f"DALI {catalog['dali_version']}: {len(catalog['operators'])} fn operators, "
        f"{sum(present.values())} in ndd, {sum(missing.values())} missing "
        f"(present/missing by kind: {kinds}); {len(catalog['ops_classes'])} ops classes; "
        f"{len(catalog['math'])} math functions"
    )


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def diff_summary(old_text: str, new_text: str, limit: int = 40) -> str:
    lines: list[str] = []
    try:
        old_ops = json.loads(old_text).get("operators", {})
        new_ops = json.loads(new_text)["operators"]
    except (ValueError, AttributeError):
        old_ops, new_ops = {}, {}
    else:
        added = sorted(set(new_ops) - set(old_ops))
        removed = sorted(set(old_ops) - set(new_ops))
        changed = sorted(k for k in set(old_ops) & set(new_ops) if old_ops[k] != new_ops[k])
        for label, keys in (("added", added), ("removed", removed), ("changed", changed)):
            if keys:
                lines.append(
                    f"operators {label} ({len(keys)}): {', '.join(keys[:15])}"
                    + (" ..." if len(keys) > 15 else "")
                )
    diff = list(
        difflib.unified_diff(
            old_text.splitlines(), new_text.splitlines(), "committed", "generated", lineterm="", n=1
        )
    )
    lines.extend(diff[:limit])
    if len(diff) > limit:
        lines.append(f"... ({len(diff) - limit} more diff lines)")
    return "\n".join(lines)


def pinned_version(path: Path) -> str | None:
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("dali_version")
    except (ValueError, AttributeError):
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--output",
        type=Path,
        default=DEFAULT_OUTPUT,
        help=f"catalog file (default: {DEFAULT_OUTPUT.relative_to(REPO_ROOT)})",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if OUTPUT differs from what would be generated",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="regenerate even if the installed DALI differs from the pinned one",
    )
    args = parser.parse_args(argv)

    import nvidia.dali

    installed = nvidia.dali.__version__
    pinned = pinned_version(args.output)
    if pinned is not None and pinned != installed and not args.force:
        print(
            f"gen_catalog: error: {args.output} is pinned to DALI {pinned} but DALI {installed} "
            "is installed; install the pinned version or pass --force to re-pin",
            file=sys.stderr,
        )
        return EXIT_VERSION_MISMATCH

    catalog = build_catalog()
    text = render(catalog)

    if args.check:
        old = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if old == text:
            print(f"gen_catalog: {args.output} is up to date ({summary(catalog)})")
            return 0
        print(f"gen_catalog: {args.output} is stale; run scripts/gen_catalog.py", file=sys.stderr)
        print(diff_summary(old, text), file=sys.stderr)
        return EXIT_STALE

    args.output.parent.mkdir(parents=True, exist_ok=True)
    with open(args.output, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    print(f"gen_catalog: wrote {args.output}: {summary(catalog)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
