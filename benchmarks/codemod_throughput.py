#!/usr/bin/env python
"""Throughput of dali-migrate over a large, mostly non-DALI source tree.

The benchmark generates a deterministic tree (seeded random) of ordinary Python modules, of which
a small fraction (1 % by default) are DALI pipeline-mode files of the shape dali-migrate migrates,
then times, side by side and in the same run:

* ``engine.run``      ``dali_migrate.engine.run(tree, Options(mode="diff", jobs=J))``, iterator
                      consumed: discovery, the prefilter and the migration of the DALI files;
* ``engine.run j=1``  the same in one process (only when J is not 1): does the pool pay off?
* ``cli``             ``dali-migrate --diff --format json TREE > /dev/null`` as a subprocess:
                      the above plus interpreter start-up, imports and JSON output;
* ``scan``            discovery and the prefilter alone (list, read, substring test), one
                      process: the part of engine.run that every file pays;
* ``parse DALI``      bare libcst ``parse_module(text).code`` of the DALI files only, one process:
                      the floor for any libcst-based tool that knows which files to open;
* ``parse all``       bare libcst parse-and-print of every file, one process: what a tool that
                      parses everything (no prefilter) would pay at the very least.

Each measurement is repeated (3 times by default) in round-robin order, so that drift of the
machine affects all of them alike, and the median is reported, with files/s and the ratios
``run / parse DALI`` and ``run / parse all``.

Usage::

    python benchmarks/codemod_throughput.py [--files 3000] [--dali-fraction 0.01] [--jobs N]
                                            [--repeat 3] [--seed 0] [--keep] [--tree DIR]
                                            [--json-out FILE] [--profile N]

The tree goes to ``benchmarks/_tree/`` (git-ignored) and is removed afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import ast
import cProfile
import datetime as _dt
import io
import json
import os
import platform
import pstats
import random
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Callable

import libcst as cst

from dali_migrate.engine import Options, Summary, discover, run
from dali_migrate.sourcefile import mentions_dali

HERE = Path(__file__).resolve().parent
DEFAULT_TREE = HERE / "_tree"
#: a file in the generated tree that says it is ours: only such a directory is ever deleted
MARKER = ".codemod-throughput-tree"

# ------------------------------------------------------------------------------------------------
# Source generation: ordinary modules
# ------------------------------------------------------------------------------------------------

#: identifiers are built from these words. None contains "dali" and no two of them can form it
#: when joined with "_", a space or CamelCase (checked for every generated file anyway), so that
#: dali-migrate's prefilter (a substring test) sees exactly the DALI files.
WORDS = (
    "account", "batch", "buffer", "cache", "channel", "client", "config", "count", "cursor",
    "delta", "digest", "edge", "entry", "event", "feature", "field", "frame", "graph", "handler",
    "header", "index", "item", "job", "key", "layer", "limit", "loader", "metric", "model",
    "node", "offset", "order", "packet", "parser", "path", "payload", "query", "queue", "rate",
    "record", "report", "request", "result", "sample", "schema", "score", "session", "shard",
    "signal", "source", "state", "step", "store", "stream", "table", "target", "task", "token",
    "total", "user", "value", "vertex", "weight", "window", "worker",
)
VERBS = (
    "build", "collect", "compute", "convert", "decode", "encode", "fetch", "filter", "flush",
    "format", "group", "load", "merge", "normalize", "parse", "prepare", "refresh", "render",
    "resolve", "sanitize", "score", "split", "summarize", "update", "validate",
)
SENTENCES = (
    "Return the cached value when it is still fresh",
    "Group the records by key and keep the newest of each",
    "This is a best-effort operation; errors are logged, never raised",
    "The caller owns the returned list and may mutate it",
    "Values outside the configured window are dropped",
    "Retries are bounded by the limit of the current session",
    "Keys are compared case-insensitively",
    "See the module docstring for the on-disk layout",
    "The result is stable across runs for the same input",
    "Used by the nightly report job",
)
STDLIB = (
    "import collections", "import functools", "import hashlib", "import itertools",
    "import json", "import logging", "import math", "import os", "import re", "import time",
    "from dataclasses import dataclass, field", "from pathlib import Path",
    "from typing import Any, Iterable, Mapping, Optional, Sequence",
)
TYPES = ("int", "str", "float", "bool", "list[int]", "dict[str, Any]", "Optional[str]", "Sequence[str]")


def _name(rng: random.Random, words: int = 2) -> str:
    return "_".join(rng.sample(WORDS, words))


def _class_name(rng: random.Random) -> str:
    return "".join(w.capitalize() for w in rng.sample(WORDS, 2))


def _func_name(rng: random.Random) -> str:
    return f"{rng.choice(VERBS)}_{_name(rng, rng.randint(1, 2))}"


def _docstring(rng: random.Random, indent: str, params: list[str] = ()) -> list[str]:
    """A one-line or Google-style multi-line docstring."""
    first = f"{rng.choice(SENTENCES)}."
    if rng.random() < 0.4 or not params:
        return [f'{indent}"""{first}"""']
    lines = [f'{indent}"""{first}', "", f"{indent}{rng.choice(SENTENCES)}.", "", f"{indent}Args:"]
    lines += [f"{indent}    {p}: {rng.choice(SENTENCES).lower()}." for p in params]
    lines += ["", f"{indent}Returns:", f"{indent}    {rng.choice(SENTENCES)}.", f'{indent}"""']
    return lines


def _expr(rng: random.Random, names: list[str]) -> str:
    """A small expression over ``names``."""
    a, b = rng.choice(names), rng.choice(names)
    return rng.choice(
        (
            f"{a} + {rng.randint(1, 99)}",
            f"len({a}) * {rng.randint(2, 9)}",
            f"{a} if {b} else None",
            f"max({a}, {b}, key=len)",
            f"{a}.get({rng.choice(WORDS)!r}, {rng.randint(0, 9)})",
            f"str({a}).strip().lower()",
            f"({a} or {b})",
            f"[{a}, {b}]",
            f'f"{{{a}}}-{{{b}!r}}"',
            f"round({a} / max({b}, 1), {rng.randint(1, 4)})",
        )
    )


def _stmts(rng: random.Random, indent: str, names: list[str], count: int, depth: int = 0) -> list[str]:
    """``count`` statements at ``indent``; compound ones nest at most two levels."""
    out: list[str] = []
    for _ in range(count):
        v, x = _name(rng, 1) + f"_{rng.randint(0, 9)}", rng.choice("xyzk")
        src = rng.choice(names)
        kind = rng.randrange(12 if depth < 2 else 6)
        inner = indent + "    "
        if kind == 0:
            out.append(f"{indent}{v} = [{x} * {rng.randint(2, 9)} for {x} in {src} if {x} % {rng.randint(2, 5)}]")
        elif kind == 1:
            out.append(f"{indent}{v} = {{{x}: str({x}) for {x} in sorted({src}) if {x} is not None}}")
        elif kind == 2:
            out.append(f"{indent}{v} = sum({x} ** 2 for {x} in {src})")
        elif kind == 3:
            out.append(f"{indent}{v} = {_expr(rng, names)}")
        elif kind == 4:
            out.append(f'{indent}logger.debug("{rng.choice(VERBS)} %s: %r", {rng.choice(names)!r}, {src})')
        elif kind == 5:
            out.append(f"{indent}{v} = {{")
            for w in rng.sample(WORDS, rng.randint(2, 5)):
                out.append(f'{inner}"{w}": {_expr(rng, names)},')
            out.append(f"{indent}}}")
        elif kind == 6:
            out.append(f"{indent}for {x} in {src}:")
            out.append(f"{inner}if not {x}:")
            out.append(f"{inner}    continue")
            out += _stmts(rng, inner, names + [x], rng.randint(1, 3), depth + 1)
        elif kind == 7:
            out.append(f"{indent}if {src} is None:")
            out += _stmts(rng, inner, names, rng.randint(1, 2), depth + 1)
            out.append(f"{indent}elif isinstance({src}, (list, tuple)):")
            out += _stmts(rng, inner, names, rng.randint(1, 2), depth + 1)
            out.append(f"{indent}else:")
            out += _stmts(rng, inner, names, 1, depth + 1)
        elif kind == 8:
            out.append(f"{indent}try:")
            out += _stmts(rng, inner, names, rng.randint(1, 3), depth + 1)
            out.append(f"{indent}except (KeyError, ValueError) as exc:")
            out.append(f'{inner}raise RuntimeError(f"cannot {rng.choice(VERBS)} {{{src}!r}}") from exc')
        elif kind == 9:
            out.append(f"{indent}with open({src}, encoding=\"utf-8\") as fh:")
            out.append(f"{inner}{v} = [line.rstrip() for line in fh if line.strip()]")
        elif kind == 10:
            out.append(f"{indent}while {src} and len({src}) > {rng.randint(1, 9)}:")
            out += _stmts(rng, inner, names, rng.randint(1, 2), depth + 1)
            out.append(f"{inner}break")
        else:
            helper = f"_{_func_name(rng)}"
            out.append(f"{indent}def {helper}({x}):")
            out.append(f"{inner}return {_expr(rng, names + [x])}")
            out.append(f"{indent}{v} = list(map({helper}, {src}))")
        names = names + [v] if kind in (0, 1, 2, 3, 5, 9) else names
    return out


def _params(rng: random.Random) -> list[str]:
    return [_name(rng, 1) for _ in range(rng.randint(1, 4))]


def _block_function(rng: random.Random, indent: str = "", method: bool = False) -> list[str]:
    params = list(dict.fromkeys(_params(rng)))
    sig = []
    for i, p in enumerate(params):
        s = f"{p}: {rng.choice(TYPES)}" if rng.random() < 0.6 else p
        if i == len(params) - 1 and rng.random() < 0.5:
            s += f" = {rng.choice(('None', '0', '()', repr(rng.choice(WORDS))))}"
        sig.append(s)
    if method:
        sig.insert(0, "self")
    lines = []
    if rng.random() < 0.15:
        lines.append(f"{indent}@functools.lru_cache(maxsize={rng.choice((32, 128, 1024))})")
    ret = f" -> {rng.choice(TYPES)}" if rng.random() < 0.5 else ""
    lines.append(f"{indent}def {_func_name(rng)}({', '.join(sig)}){ret}:")
    body = indent + "    "
    lines += _docstring(rng, body, params)
    lines += _stmts(rng, body, params, rng.randint(2, 7))
    lines.append(f"{body}return {_expr(rng, params)}")
    return lines


def _block_class(rng: random.Random) -> list[str]:
    attrs = list(dict.fromkeys(_name(rng, 1) for _ in range(rng.randint(2, 4))))
    base = rng.choice(("", "(object)", "(Exception)", "(collections.UserDict)"))
    lines = [f"class {_class_name(rng)}{base}:"]
    lines += _docstring(rng, "    ")
    lines += ["", f"    {_name(rng, 1).upper()}_LIMIT = {rng.randint(2, 4096)}", ""]
    lines.append(f"    def __init__(self, {', '.join(attrs)}):")
    lines += [f"        self.{a} = {a}" for a in attrs]
    lines.append(f"        self._{rng.choice(WORDS)} = {{}}")
    for _ in range(rng.randint(1, 4)):
        lines.append("")
        lines += _block_function(rng, "    ", method=True)
    lines += ["", "    @property", f"    def {_name(rng, 2)}(self):", f"        return self.{attrs[0]}"]
    fields = ", ".join(f"{a}={{self.{a}!r}}" for a in attrs)
    lines += ["", "    def __repr__(self):", f'        return f"{{type(self).__name__}}({fields})"']
    return lines


def _block_dataclass(rng: random.Random) -> list[str]:
    lines = [f"@dataclass(frozen={rng.choice(('True', 'False'))})", f"class {_class_name(rng)}:"]
    lines += _docstring(rng, "    ")
    lines.append("")
    for a in dict.fromkeys(_name(rng, 1) for _ in range(rng.randint(2, 6))):
        default = rng.choice(("", " = 0", " = None", " = field(default_factory=list)", f" = {rng.choice(WORDS)!r}"))
        lines.append(f"    {a}: {rng.choice(TYPES)}{default}")
    lines += ["", "    def to_dict(self) -> dict[str, Any]:", "        return dict(self.__dict__)"]
    return lines


def _block_constants(rng: random.Random) -> list[str]:
    name = _name(rng, 2).upper()
    lines = [f"{name} = {{"]
    for w in rng.sample(WORDS, rng.randint(3, 10)):
        lines.append(f'    "{w}": ({rng.randint(0, 999)}, {rng.random():.3f}, "{rng.choice(VERBS)}"),')
    lines.append("}")
    lines.append(f"{_name(rng, 1).upper()}_KEYS = tuple(sorted({name}))")
    return lines


def _block_async(rng: random.Random) -> list[str]:
    p = _name(rng, 1)
    lines = [f"async def {_func_name(rng)}({p}, retries=3):"]
    lines += _docstring(rng, "    ", [p, "retries"])
    lines += [
        "    for attempt in range(retries):",
        "        try:",
        f"            return await {p}.{rng.choice(VERBS)}()",
        "        except ConnectionError:",
        f"            await asyncio.sleep(0.{rng.randint(1, 9)} * 2 ** attempt)",
        f'    raise TimeoutError("{rng.choice(VERBS)} failed after %d attempts" % retries)',
    ]
    return lines


BLOCKS: tuple[tuple[Callable[[random.Random], list[str]], float], ...] = (
    (_block_function, 0.45),
    (_block_class, 0.25),
    (_block_dataclass, 0.12),
    (_block_constants, 0.10),
    (_block_async, 0.08),
)


def _header(rng: random.Random) -> list[str]:
    lines = [f'"""{rng.choice(SENTENCES)}.', "", f"{rng.choice(SENTENCES)}.", '"""', "", "from __future__ import annotations", ""]
    # every import a block may need, plus a random selection of others
    needed = {"import asyncio", "import collections", "import functools", "import logging",
              "from dataclasses import dataclass, field", "from typing import Any, Iterable, Mapping, Optional, Sequence"}
    lines += sorted(needed | set(rng.sample(STDLIB, rng.randint(1, 5))), key=lambda s: s.split()[1])
    lines += ["", "logger = logging.getLogger(__name__)"]
    return lines


def _padding(rng: random.Random, target_lines: int) -> list[str]:
    """Top-level blocks, two blank lines apart, until about ``target_lines`` lines (a block that
    would overshoot by more than 20 lines is drawn again, up to four times, then taken anyway
    unless the padding is already within 40 lines of the target)."""
    lines: list[str] = []
    makers, weights = zip(*BLOCKS)
    while len(lines) < target_lines:
        for _ in range(5):  # prefer a block that fits
            block = ["", ""] + rng.choices(makers, weights)[0](rng)
            if len(lines) + len(block) <= target_lines + 20:
                break
        else:
            if lines and len(lines) >= target_lines - 40:  # close enough: stop, do not overshoot
                break
        lines += block
    return lines


def ordinary_module(rng: random.Random) -> str:
    target = rng.randint(50, 400)
    lines = _header(rng)
    lines += _padding(rng, target - len(lines))
    if rng.random() < 0.2:
        lines += ["", "", 'if __name__ == "__main__":', "    logging.basicConfig(level=logging.INFO)"]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------
# Source generation: DALI pipeline-mode modules
# ------------------------------------------------------------------------------------------------

#: import styles; the decorator name each one binds
DALI_IMPORTS = (
    (["from nvidia.dali import pipeline_def, fn, types"], "pipeline_def"),
    (["import nvidia.dali.fn as fn", "import nvidia.dali.types as types", "from nvidia.dali import pipeline_def"], "pipeline_def"),
    (["import nvidia.dali as dali", "import nvidia.dali.fn as fn", "import nvidia.dali.types as types"], "dali.pipeline_def"),
)


def _dali_ops(rng: random.Random, img: str) -> list[str]:
    """An augmentation chain on ``img``: 2 to 5 operators, some random, in a plausible order."""
    size = rng.choice((160, 192, 224, 256, 299, 320))
    pool = [
        lambda: [f"{img} = fn.resize({img}, resize_x={size}, resize_y={size})"],
        lambda: [f"{img} = fn.resize({img}, resize_shorter={size + 32})"],
        lambda: [f"angle = fn.random.uniform(range=(-{rng.randint(5, 30)}.0, {rng.randint(5, 30)}.0))",
                 f"{img} = fn.rotate({img}, angle=angle, fill_value=0)"],
        lambda: [f"{img} = fn.brightness_contrast({img}, brightness={rng.uniform(0.8, 1.2):.2f}, contrast={rng.uniform(0.8, 1.2):.2f})"],
        lambda: [f"{img} = fn.hsv({img}, hue={rng.randint(-20, 20)}.0, saturation={rng.uniform(0.7, 1.3):.2f})"],
        lambda: [f"{img} = fn.gaussian_blur({img}, window_size={rng.choice((3, 5, 7))})"],
        lambda: [f"{img} = fn.flip({img}, horizontal=1)"],
        lambda: [f"{img} = fn.random_resized_crop({img}, size=({size}, {size}))"],
        lambda: [f"{img} = fn.color_twist({img}, brightness={rng.uniform(0.8, 1.2):.2f}, saturation={rng.uniform(0.8, 1.2):.2f})"],
    ]
    lines = [line for make in rng.sample(pool, rng.randint(2, 5)) for line in make()]
    if rng.random() < 0.7:  # the usual last step: crop, mirror at random, normalise
        mirror = rng.choice(("flip", "mirror", "do_flip"))
        lines.append(f"{mirror} = fn.random.coin_flip(probability={rng.choice(('0.5', '0.25'))})")
        lines.append(
            f"{img} = fn.crop_mirror_normalize({img}, crop=({size}, {size}), mirror={mirror}, "
            f"mean=[0.485 * 255, 0.456 * 255, 0.406 * 255], std=[0.229 * 255, 0.224 * 255, 0.225 * 255], "
            f"dtype=types.FLOAT{rng.choice(('', ', output_layout=types.NCHW'))})"
        )
    return lines


def dali_module(rng: random.Random, index: int) -> str:
    """A DALI pipeline-mode module: padding, one ``@pipeline_def`` and its use site, padding."""
    imports, decorator = rng.choice(DALI_IMPORTS)
    header = _header(rng)
    at = header.index("logger = logging.getLogger(__name__)") - 1
    header[at:at] = [""] + imports  # a third-party section after the standard library

    name = f"{rng.choice(('train', 'val', 'eval', 'aug', 'infer', 'calib'))}_pipe_{index}"
    root = rng.choice(("data_dir", "file_root", "root", "image_dir"))
    extra = rng.choice(("", ", shard_id=0, num_shards=1", ", size=256"))
    enc, lab = rng.choice((("jpegs", "labels"), ("encoded", "label"), ("files", "targets")))
    img = rng.choice(("images", "imgs", "out"))
    dec_args = {
        "batch_size": rng.choice((16, 32, 64, 128, 256)),
        "num_threads": rng.choice((2, 4, 8)),
        "device_id": 0,
    }
    if rng.random() < 0.6:
        dec_args["seed"] = rng.randint(0, 9999)

    body = [f"{enc}, {lab} = fn.readers.file(file_root={root}, random_shuffle={rng.choice(('True', 'False'))}"
            + (', name="Reader"' if rng.random() < 0.4 else "")
            + (", shard_id=shard_id, num_shards=num_shards" if "shard" in extra else "") + ")"]
    if rng.random() < 0.8:
        body.append(f'{img} = fn.decoders.image({enc}, device="mixed"'
                    + (", output_type=types.RGB" if rng.random() < 0.5 else "") + ")")
    else:
        body.append(f'{img} = fn.decoders.image_random_crop({enc}, device="mixed", random_area=[0.08, 1.0])')
    body += _dali_ops(rng, img)
    body.append(f"return {img}, {lab}")

    pipe = [f"@{decorator}({', '.join(f'{k}={v}' for k, v in dec_args.items())})",
            f"def {name}({root}{extra}):"]
    pipe += _docstring(rng, "    ")
    pipe += [f"    {line}" for line in body]

    steps = rng.choice((10, 100, 1000))
    if rng.random() < 0.5:  # module-level use, as in most examples
        use = [f'pipe = {name}("/data/{rng.choice(WORDS)}")', "pipe.build()",
               f"for _ in range({steps}):", f"    {img}, {lab} = pipe.run()"]
    else:  # inside a main() that also prints progress
        use = ["def main(argv=None):",
               f'    pipe = {name}(os.environ.get("DATA", "/data"), batch_size={rng.choice((8, 16, 32))})',
               "    pipe.build()",
               f"    for step in range({steps}):",
               f"        {img}, {lab} = pipe.run()",
               f'        logger.info("step %d: %s", step, {img}.as_tensor().shape())',
               "", "", 'if __name__ == "__main__":', "    main()"]
        if "import os" not in header:
            header.insert(at, "import os")

    target = rng.randint(50, 400)
    before = _padding(rng, rng.randint(0, max(0, target - 40)) // 2)
    after = _padding(rng, max(0, target - len(header) - len(before) - len(pipe) - len(use)))
    lines = header + before + ["", ""] + pipe + after + ["", ""] + use  # padding starts with blank lines
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------
# The tree
# ------------------------------------------------------------------------------------------------


@dataclass
class Tree:
    root: Path
    files: list[Path] = field(default_factory=list)
    dali: list[Path] = field(default_factory=list)
    lines: int = 0
    bytes: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {
            "root": str(self.root),
            "files": len(self.files),
            "dali_files": len(self.dali),
            "lines": self.lines,
            "bytes": self.bytes,
            "mean_lines": round(self.lines / max(1, len(self.files)), 1),
            "generation_s": round(self.seconds, 3),
        }


def _clear(root: Path) -> None:
    """Remove ``root`` if it is a tree this script made (or empty); refuse anything else."""
    if not root.exists():
        return
    if (root / MARKER).is_file() or not any(root.iterdir()):
        shutil.rmtree(root)
    else:
        sys.exit(f"{root} exists and was not made by this benchmark; choose another --tree")


def generate_tree(root: Path, n_files: int, dali_fraction: float, seed: int) -> Tree:
    """Write ``n_files`` modules under ``root`` (packages of 10 sub-packages of 30 modules)."""
    t0 = time.perf_counter()
    _clear(root)
    root.mkdir(parents=True)
    (root / MARKER).write_text(json.dumps({"files": n_files, "dali_fraction": dali_fraction, "seed": seed}))
    # The generated tree's own pyproject.toml stops the CLI's upward search for
    # [tool.dali-migrate] settings, so that a config around the checkout cannot skew the run.
    (root / "pyproject.toml").write_text("# generated by benchmarks/codemod_throughput.py\n")

    rng = random.Random(seed)
    n_dali = round(n_files * dali_fraction)
    if dali_fraction > 0:
        n_dali = max(1, n_dali)
    dali_at = set(rng.sample(range(n_files), n_dali))
    tree = Tree(root)
    for i in range(n_files):
        path = root / f"pkg_{i // 300:02d}" / f"sub_{i // 30 % 10}" / f"mod_{i:05d}.py"
        # one generator per file, seeded from the file's index: a file does not change when
        # --files changes (only which files are DALI does)
        frng = random.Random(f"{seed}:{i}")
        text = dali_module(frng, i) if i in dali_at else ordinary_module(frng)
        ast.parse(text, str(path))  # every generated file is valid Python
        if i not in dali_at and "dali" in text:  # would defeat the prefilter: a generator bug
            raise AssertionError(f"{path}: an ordinary module mentions 'dali'")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        tree.files.append(path)
        if i in dali_at:
            tree.dali.append(path)
        tree.lines += text.count("\n")
        tree.bytes += len(text.encode("utf-8"))
    tree.seconds = time.perf_counter() - t0
    return tree


# ------------------------------------------------------------------------------------------------
# The measurements
# ------------------------------------------------------------------------------------------------


def engine_run(tree: Tree, jobs: int) -> Summary:
    """``dali-migrate --diff`` through the library: run() with its iterator consumed."""
    summary = Summary()
    for fr in run([tree.root], Options(mode="diff", jobs=jobs)):
        summary.add(fr)
    return summary


def scan_only(tree: Tree) -> int:
    """What run() does for a file that is not DALI: discovery, a raw read and the prefilter."""
    wanted = 0
    for p in discover([tree.root]):
        with open(p, "rb") as fh:
            wanted += mentions_dali(fh.read())
    return wanted


def cli_command(jobs: int | None, root: Path) -> list[str]:
    """The installed console script next to this interpreter, else ``python -m dali_migrate``."""
    script = Path(sys.executable).with_name("dali-migrate")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "dali_migrate"]
    cmd += ["--diff", "--format", "json"]
    if jobs is not None:
        cmd += ["--jobs", str(jobs)]
    return cmd + [str(root)]


def cli_run(tree: Tree, jobs: int | None) -> None:
    """``dali-migrate --diff --format json TREE > /dev/null``, end to end."""
    proc = subprocess.run(
        cli_command(jobs, tree.root), cwd=tree.root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    if proc.returncode not in (0, 1):  # 2: a file could not be processed or a usage error
        raise RuntimeError(f"dali-migrate exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")


def parse_and_print(paths: list[Path]) -> None:
    """Bare libcst: read, ``parse_module``, ``.code``, in this process, one file after another."""
    for p in paths:
        text = p.read_text(encoding="utf-8")
        if cst.parse_module(text).code != text:  # a round-trip libcst guarantees; cheap to check
            raise AssertionError(f"{p}: libcst round trip differs")


@dataclass
class Measurement:
    name: str
    files: int  #: files the measurement goes through (for files/s)
    procs: str  #: processes it uses, as shown in the table
    fn: Callable[[], object]
    times: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    def to_dict(self) -> dict:
        return {
            "files": self.files,
            "processes": self.procs,
            "runs_s": [round(t, 4) for t in self.times],
            "median_s": round(self.median, 4),
            "files_per_s": round(self.files / self.median, 1),
        }


def measure(measurements: list[Measurement], repeat: int) -> None:
    """Time every measurement ``repeat`` times, round-robin."""
    for r in range(repeat):
        for m in measurements:
            t0 = time.perf_counter()
            m.fn()
            m.times.append(time.perf_counter() - t0)
            print(f"  round {r + 1}/{repeat}  {m.name:<18} {m.times[-1]:8.3f} s", file=sys.stderr, flush=True)


def profile_engine(tree: Tree, top: int) -> str:
    """cProfile of a one-process engine run (worker processes are invisible to cProfile)."""
    prof = cProfile.Profile()
    prof.enable()
    engine_run(tree, jobs=1)
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out).strip_dirs()
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()


# ------------------------------------------------------------------------------------------------
# Main
# ------------------------------------------------------------------------------------------------


def machine_info() -> dict:
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "loadavg_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "cpu_count": os.cpu_count(),
        "usable_cores": affinity,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "libcst": metadata.version("libcst"),
        "dali_migrate": metadata.version("dali-migrate"),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=3000, help="files in the tree (default 3000)")
    ap.add_argument("--dali-fraction", type=float, default=0.01, help="fraction of DALI files (default 0.01)")
    ap.add_argument("--jobs", type=int, default=None,
                    help="worker processes for dali-migrate (default: the tool's default, one per core)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each measurement; the median is reported")
    ap.add_argument("--seed", type=int, default=0, help="seed of the generated tree (default 0)")
    ap.add_argument("--tree", type=Path, default=DEFAULT_TREE, help=f"where to generate the tree (default {DEFAULT_TREE})")
    ap.add_argument("--keep", action="store_true", help="keep the generated tree afterwards")
    ap.add_argument("--json-out", type=Path, help="also write the results as JSON to this file")
    ap.add_argument("--profile", type=int, metavar="N", default=0,
                    help="also print the top N functions of a cProfile'd one-process engine run")
    args = ap.parse_args(argv)
    if args.files < 1 or not 0 <= args.dali_fraction <= 1 or args.repeat < 1:
        ap.error("need --files >= 1, 0 <= --dali-fraction <= 1 and --repeat >= 1")

    machine = machine_info()
    # engine.run's own default: Options.jobs == 0 means one worker per core
    jobs_opt = args.jobs if args.jobs is not None else Options().jobs
    effective_jobs = jobs_opt or os.cpu_count() or 1

    tree_root = args.tree.resolve()
    print(f"generating {args.files} files ({args.dali_fraction:.2%} DALI, seed {args.seed}) under {tree_root}",
          file=sys.stderr, flush=True)
    tree = generate_tree(tree_root, args.files, args.dali_fraction, args.seed)
    try:
        print(f"  {len(tree.files)} files, {len(tree.dali)} DALI, {tree.lines} lines, "
              f"{tree.bytes / 1e6:.1f} MB in {tree.seconds:.1f} s", file=sys.stderr)

        n, n_dali = len(tree.files), len(tree.dali)
        summaries: list[Summary] = []  # of the main engine runs: checked below
        run_m = Measurement(f"engine.run j={effective_jobs}", n, str(effective_jobs),
                            lambda: summaries.append(engine_run(tree, jobs_opt)))
        serial_m = run_m if effective_jobs == 1 else Measurement("engine.run j=1", n, "1", lambda: engine_run(tree, 1))
        cli_m = Measurement(f"cli j={effective_jobs}", n, str(effective_jobs), lambda: cli_run(tree, args.jobs))
        scan_m = Measurement("scan + prefilter", n, "1", lambda: scan_only(tree))
        dali_m = Measurement("parse DALI only", n_dali, "1", lambda: parse_and_print(tree.dali))
        all_m = Measurement("parse all", n, "1", lambda: parse_and_print(tree.files))
        ms = [run_m] + ([serial_m] if serial_m is not run_m else []) + [cli_m, scan_m]
        ms += ([dali_m] if n_dali else []) + [all_m]
        measure(ms, args.repeat)

        # sanity: the run saw every file and migrated the DALI ones
        s = summaries[-1]
        if s.scanned != n or s.parsed != n_dali or s.changed != n_dali or s.errors:
            print(f"WARNING: unexpected engine summary {s.to_dict()}", file=sys.stderr)

        def ratio(a: float, b: float) -> float | None:
            return a / b if b > 0 else None

        # what migrating one DALI file costs in one process (the serial run less the scan that
        # every file pays), and how that compares with merely parsing and printing it
        per_file = ratio(serial_m.median - scan_m.median, n_dali)
        dali_median = dali_m.median if n_dali else 0.0
        ratios = {
            "run / parse DALI": ratio(run_m.median, dali_median),
            "run / parse all": ratio(run_m.median, all_m.median),
            "cli / parse DALI": ratio(cli_m.median, dali_median),
            "cli / parse all": ratio(cli_m.median, all_m.median),
            "migrate / parse, per DALI file (1 process)": ratio(per_file or 0.0, ratio(dali_median, n_dali) or 0.0),
        }

        print()
        print(f"dali-migrate {machine['dali_migrate']}, libcst {machine['libcst']}, Python {machine['python']}, "
              f"{machine['cpu_count']} cores ({machine['usable_cores']} usable), jobs={effective_jobs}")
        print(f"tree: {n} files, {n_dali} DALI, {tree.lines} lines ({tree.lines / n:.0f}/file); "
              f"median of {args.repeat}")
        print(f"engine summary: {s.scanned} scanned, {s.parsed} parsed, {s.changed} would change, {s.errors} errors")
        print()
        print(f"{'measurement':<18} {'procs':>5} {'files':>6} {'median s':>9} {'min s':>8} {'max s':>8} {'files/s':>9}")
        for m in ms:
            print(f"{m.name:<18} {m.procs:>5} {m.files:>6} {m.median:9.3f} {min(m.times):8.3f} "
                  f"{max(m.times):8.3f} {m.files / m.median:9.0f}")
        print()
        for k, v in ratios.items():
            print(f"{k:<44} {'n/a' if v is None else f'{v:7.2f}x':>8}")
        if per_file is not None:
            print(f"{'migrating one DALI file, 1 process':<44} {per_file:7.3f} s")

        if args.json_out:
            doc = {
                "benchmark": "codemod_throughput",
                "timestamp": _dt.datetime.now().isoformat(timespec="seconds"),
                "argv": sys.argv[1:] if argv is None else argv,
                "machine": {**machine, "loadavg_at_end": list(os.getloadavg()) if hasattr(os, "getloadavg") else None},
                "jobs": effective_jobs,
                "repeat": args.repeat,
                "seed": args.seed,
                "tree": tree.to_dict(),
                "engine_summary": s.to_dict(),
                "results": {m.name: m.to_dict() for m in ms},
                "ratios": {k: None if v is None else round(v, 3) for k, v in ratios.items()},
                "migrate_s_per_dali_file": None if per_file is None else round(per_file, 4),
            }
            args.json_out.write_text(json.dumps(doc, indent=2) + "\n")
            print(f"\nwrote {args.json_out}", file=sys.stderr)

        if args.profile:
            print()
            print(profile_engine(tree, args.profile))
    finally:
        if not args.keep:
            _clear(tree_root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
