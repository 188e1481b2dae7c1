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
import hashlib
import inspect
import io
import json
import os
import platform
import pstats
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import libcst as cst
from libcst.codemod import VisitorBasedCodemodCommand

from dali_migrate.engine import Options, Summary, discover, run

HERE = Path(__file__).resolve().parent
#: a file in the generated tree that says it is ours: only such a directory is ever deleted
MARKER = ".codemod-throughput-tree"

# ------------------------------------------------------------------------------------------------
# Source generation: ordinary modules
# ------------------------------------------------------------------------------------------------

#: identifiers are built from these words. None contains "dali" and no two of them can form it
#: when joined with "_", a space or CamelCase (checked for every generated file anyway), so that
#: dali-migrate's prefilter (a substring test) sees exactly the DALI files.
WORDS = (
    "account",
    "batch",
    "buffer",
    "cache",
    "channel",
    "client",
    "config",
    "count",
    "cursor",
    "delta",
    "digest",
    "edge",
    "entry",
    "event",
    "feature",
    "field",
    "frame",
    "graph",
    "handler",
    "header",
    "index",
    "item",
    "job",
    "key",
    "layer",
    "limit",
    "loader",
    "metric",
    "model",
    "node",
    "offset",
    "order",
    "packet",
    "parser",
    "path",
    "payload",
    "query",
    "queue",
    "rate",
    "record",
    "report",
    "request",
    "result",
    "sample",
    "schema",
    "score",
    "session",
    "shard",
    "signal",
    "source",
    "state",
    "step",
    "store",
    "stream",
    "table",
    "target",
    "task",
    "token",
    "total",
    "user",
    "value",
    "vertex",
    "weight",
    "window",
    "worker",
)
VERBS = (
    "build",
    "collect",
    "compute",
    "convert",
    "decode",
    "encode",
    "fetch",
    "filter",
    "flush",
    "format",
    "group",
    "load",
    "merge",
    "normalize",
    "parse",
    "prepare",
    "refresh",
    "render",
    "resolve",
    "sanitize",
    "score",
    "split",
    "summarize",
    "update",
    "validate",
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
    "import collections",
    "import functools",
    "import hashlib",
    "import itertools",
    "import json",
    "import logging",
    "import math",
    "import os",
    "import re",
    "import time",
    "from dataclasses import dataclass, field",
    "from pathlib import Path",
    "from typing import Any, Iterable, Mapping, Optional, Sequence",
)
TYPES = (
    "int",
    "str",
    "float",
    "bool",
    "list[int]",
    "dict[str, Any]",
    "Optional[str]",
    "Sequence[str]",
)


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


def _stmts(
    rng: random.Random, indent: str, names: list[str], count: int, depth: int = 0
) -> list[str]:
    """``count`` statements at ``indent``; compound ones nest at most two levels."""
    out: list[str] = []
    for _ in range(count):
        v, x = _name(rng, 1) + f"_{rng.randint(0, 9)}", rng.choice("xyzk")
        src = rng.choice(names)
        kind = rng.randrange(12 if depth < 2 else 6)
        inner = indent + "    "
        if kind == 0:
            out.append(
                f"{indent}{v} = [{x} * {rng.randint(2, 9)} for {x} in {src} if {x} % "
                f"{rng.randint(2, 5)}]"
            )
        elif kind == 1:
            out.append(
                f"{indent}{v} = {{{x}: str({x}) for {x} in sorted({src}) if {x} is not None}}"
            )
        elif kind == 2:
            out.append(f"{indent}{v} = sum({x} ** 2 for {x} in {src})")
        elif kind == 3:
            out.append(f"{indent}{v} = {_expr(rng, names)}")
        elif kind == 4:
            out.append(
                f'{indent}logger.debug("{rng.choice(VERBS)} %s: %r", {rng.choice(names)!r}, {src})'
            )
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
            out.append(
                f'{inner}raise RuntimeError(f"cannot {rng.choice(VERBS)} {{{src}!r}}") from exc'
            )
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
    lines += [
        "",
        "    @property",
        f"    def {_name(rng, 2)}(self):",
        f"        return self.{attrs[0]}",
    ]
    fields = ", ".join(f"{a}={{self.{a}!r}}" for a in attrs)
    lines += ["", "    def __repr__(self):", f'        return f"{{type(self).__name__}}({fields})"']
    return lines


def _block_dataclass(rng: random.Random) -> list[str]:
    lines = [f"@dataclass(frozen={rng.choice(('True', 'False'))})", f"class {_class_name(rng)}:"]
    lines += _docstring(rng, "    ")
    lines.append("")
    for a in dict.fromkeys(_name(rng, 1) for _ in range(rng.randint(2, 6))):
        default = rng.choice(
            ("", " = 0", " = None", " = field(default_factory=list)", f" = {rng.choice(WORDS)!r}")
        )
        lines.append(f"    {a}: {rng.choice(TYPES)}{default}")
    lines += ["", "    def to_dict(self) -> dict[str, Any]:", "        return dict(self.__dict__)"]
    return lines


def _block_constants(rng: random.Random) -> list[str]:
    name = _name(rng, 2).upper()
    lines = [f"{name} = {{"]
    for w in rng.sample(WORDS, rng.randint(3, 10)):
        lines.append(
            f'    "{w}": ({rng.randint(0, 999)}, {rng.random():.3f}, "{rng.choice(VERBS)}"),'
        )
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
    lines = [
        f'"""{rng.choice(SENTENCES)}.',
        "",
        f"{rng.choice(SENTENCES)}.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
    ]
    # every import a block may need, plus a random selection of others
    needed = {
        "import asyncio",
        "import collections",
        "import functools",
        "import logging",
        "from dataclasses import dataclass, field",
        "from typing import Any, Iterable, Mapping, Optional, Sequence",
    }
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


def ordinary_module(rng: random.Random, size: tuple[int, int] = (50, 400)) -> str:
    target = rng.randint(*size)
    lines = _header(rng)
    lines += _padding(rng, target - len(lines))
    if rng.random() < 0.2:
        lines += [
            "",
            "",
            'if __name__ == "__main__":',
            "    logging.basicConfig(level=logging.INFO)",
        ]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------
# Source generation: DALI pipeline-mode modules
# ------------------------------------------------------------------------------------------------

#: import styles; the decorator name each one binds
DALI_IMPORTS = (
    (["from nvidia.dali import pipeline_def, fn, types"], "pipeline_def"),
    (
        [
            "import nvidia.dali.fn as fn",
            "import nvidia.dali.types as types",
            "from nvidia.dali import pipeline_def",
        ],
        "pipeline_def",
    ),
    (
        [
            "import nvidia.dali as dali",
            "import nvidia.dali.fn as fn",
            "import nvidia.dali.types as types",
        ],
        "dali.pipeline_def",
    ),
)


def _dali_ops(rng: random.Random, img: str) -> list[str]:
    """An augmentation chain on ``img``: 2 to 5 operators, some random, in a plausible order."""
    size = rng.choice((160, 192, 224, 256, 299, 320))
    pool = [
        lambda: [f"{img} = fn.resize({img}, resize_x={size}, resize_y={size})"],
        lambda: [f"{img} = fn.resize({img}, resize_shorter={size + 32})"],
        lambda: [
            f"angle = fn.random.uniform(range=(-{rng.randint(5, 30)}.0, {rng.randint(5, 30)}.0))",
            f"{img} = fn.rotate({img}, angle=angle, fill_value=0)",
        ],
        lambda: [
            f"{img} = fn.brightness_contrast({img}, brightness={rng.uniform(0.8, 1.2):.2f}, "
            f"contrast={rng.uniform(0.8, 1.2):.2f})"
        ],
        lambda: [
            f"{img} = fn.hsv({img}, hue={rng.randint(-20, 20)}.0, "
            f"saturation={rng.uniform(0.7, 1.3):.2f})"
        ],
        lambda: [f"{img} = fn.gaussian_blur({img}, window_size={rng.choice((3, 5, 7))})"],
        lambda: [f"{img} = fn.flip({img}, horizontal=1)"],
        lambda: [f"{img} = fn.random_resized_crop({img}, size=({size}, {size}))"],
        lambda: [
            f"{img} = fn.color_twist({img}, brightness={rng.uniform(0.8, 1.2):.2f}, "
            f"saturation={rng.uniform(0.8, 1.2):.2f})"
        ],
    ]
    lines = [line for make in rng.sample(pool, rng.randint(2, 5)) for line in make()]
    if rng.random() < 0.7:  # the usual last step: crop, mirror at random, normalise
        mirror = rng.choice(("flip", "mirror", "do_flip"))
        lines.append(f"{mirror} = fn.random.coin_flip(probability={rng.choice(('0.5', '0.25'))})")
        lines.append(
            f"{img} = fn.crop_mirror_normalize({img}, crop=({size}, {size}), mirror={mirror}, "
            "mean=[0.485 * 255, 0.456 * 255, 0.406 * 255], std=[0.229 * 255, 0.224 * 255, 0.225 "
            "* 255], "
            f"dtype=types.FLOAT{rng.choice(('', ', output_layout=types.NCHW'))})"
        )
    return lines


def dali_module(rng: random.Random, index: int, size: tuple[int, int] = (50, 400)) -> str:
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

    body = [
        f"{enc}, {lab} = fn.readers.file(file_root={root}, "
        f"random_shuffle={rng.choice(('True', 'False'))}"
        + (', name="Reader"' if rng.random() < 0.4 else "")
        + (", shard_id=shard_id, num_shards=num_shards" if "shard" in extra else "")
        + ")"
    ]
    if rng.random() < 0.8:
        body.append(
            f'{img} = fn.decoders.image({enc}, device="mixed"'
            + (", output_type=types.RGB" if rng.random() < 0.5 else "")
            + ")"
        )
    else:
        body.append(
            f'{img} = fn.decoders.image_random_crop({enc}, device="mixed", random_area=[0.08, 1.0])'
        )
    body += _dali_ops(rng, img)
    body.append(f"return {img}, {lab}")

    pipe = [
        f"@{decorator}({', '.join(f'{k}={v}' for k, v in dec_args.items())})",
        f"def {name}({root}{extra}):",
    ]
    pipe += _docstring(rng, "    ")
    pipe += [f"    {line}" for line in body]

    steps = rng.choice((10, 100, 1000))
    if rng.random() < 0.5:  # module-level use, as in most examples
        use = [
            f'pipe = {name}("/data/{rng.choice(WORDS)}")',
            "pipe.build()",
            f"for _ in range({steps}):",
            f"    {img}, {lab} = pipe.run()",
        ]
    else:  # inside a main() that also prints progress
        use = [
            "def main(argv=None):",
            f'    pipe = {name}(os.environ.get("DATA", "/data"), '
            f'batch_size={rng.choice((8, 16, 32))})',
            "    pipe.build()",
            f"    for step in range({steps}):",
            f"        {img}, {lab} = pipe.run()",
            f'        logger.info("step %d: %s", step, {img}.as_tensor().shape())',
            "",
            "",
            'if __name__ == "__main__":',
            "    main()",
        ]
        if "import os" not in header:
            header.insert(at, "import os")

    target = rng.randint(*size)
    before = _padding(rng, rng.randint(0, max(0, target - 40)) // 2)
    after = _padding(rng, max(0, target - len(header) - len(before) - len(pipe) - len(use)))
    lines = (
        header + before + ["", ""] + pipe + after + ["", ""] + use
    )  # padding starts with blank lines
    return "\n".join(lines) + "\n"


def dali_class_module(rng: random.Random, index: int, size: tuple[int, int] = (50, 400)) -> str:
    """A ``Pipeline`` subclass with ``ops.*`` members and ``define_graph``, built and run at
    module level or in ``main()``, between padding code (the legacy class API)."""
    header = _header(rng)
    at = header.index("logger = logging.getLogger(__name__)") - 1
    header[at:at] = [
        "",
        "import nvidia.dali.ops as ops",
        "import nvidia.dali.types as types",
        "from nvidia.dali.pipeline import Pipeline",
    ]
    cls = f"{rng.choice(('HybridTrain', 'Val', 'Eval', 'Aug'))}Pipe{index}"
    crop = rng.choice((160, 192, 224, 256))
    members = [
        "        self.input = ops.FileReader(file_root=data_dir, shard_id=device_id, num_shards=1, "
        f"random_shuffle={rng.choice(('True', 'False'))})",
        '        self.decode = ops.ImageDecoder(device="mixed", output_type=types.RGB)',
    ]
    graph = [
        "        self.jpegs, self.labels = self.input(name=\"Reader\")",
        "        images = self.decode(self.jpegs)",
    ]
    if rng.random() < 0.6:
        members.append(
            '        self.res = ops.RandomResizedCrop(device="gpu", size=crop, random_area=[0.08, '
            '1.25])'
        )
        graph.append("        images = self.res(images)")
    else:
        members.append('        self.res = ops.Resize(device="gpu", resize_x=crop, resize_y=crop)')
        graph.append("        images = self.res(images)")
    members += [
        "        self.cmnp = ops.CropMirrorNormalize(",
        '            device="gpu",',
        "            dtype=types.FLOAT,",
        "            output_layout=types.NCHW,",
        "            crop=(crop, crop),",
        "            mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],",
        "            std=[0.229 * 255, 0.224 * 255, 0.225 * 255],",
        "        )",
        f"        self.coin = ops.CoinFlip(probability={rng.choice(('0.5', '0.25'))})",
    ]
    graph = (
        ["        rng = self.coin()"]
        + graph
        + [
            "        output = self.cmnp(images.gpu(), mirror=rng)",
            "        return [output, self.labels]",
        ]
    )
    pipe = [f"class {cls}(Pipeline):"]
    pipe += _docstring(rng, "    ")
    pipe += [
        "    def __init__(self, batch_size, num_threads, device_id, data_dir, crop):",
        f"        super({cls}, self).__init__(batch_size, num_threads, device_id, "
        f"seed={rng.randint(1, 99)} + device_id)",
    ]
    pipe += members + ["", "    def define_graph(self):"] + graph
    steps = rng.choice((10, 100, 1000))
    ctor = (
        f'{cls}(batch_size={rng.choice((32, 64, 128, 256))}, num_threads={rng.choice((2, 4, 8))}, '
        f'device_id=0, data_dir="/data/{rng.choice(WORDS)}", crop={crop})'
    )
    use = [
        f"pipe = {ctor}",
        "pipe.build()",
        f"for _ in range({steps}):",
        "    images, labels = pipe.run()",
    ]
    target = rng.randint(*size)
    before = _padding(rng, rng.randint(0, max(0, target - 40)) // 2)
    after = _padding(rng, max(0, target - len(header) - len(before) - len(pipe) - len(use)))
    lines = header + before + ["", ""] + pipe + after + ["", ""] + use
    return "\n".join(lines) + "\n"


def dali_pipelines_module(
    rng: random.Random, index: int, size: tuple[int, int] = (50, 400)
) -> tuple[str, list[str]]:
    """A module of ``@pipeline_def`` functions that other modules build and run (no use site
    here), and the names it defines."""
    imports, decorator = rng.choice(DALI_IMPORTS)
    header = _header(rng)
    at = header.index("logger = logging.getLogger(__name__)") - 1
    header[at:at] = [""] + imports
    names = [f"train_pipe_{index}", f"val_pipe_{index}"]
    seed = rng.randint(0, 9999)
    img = rng.choice(("images", "imgs"))
    train = [
        f"@{decorator}(batch_size={rng.choice((32, 64, 128))}, num_threads={rng.choice((2, 4))}, "
        f"device_id=0, seed={seed})",
        f"def {names[0]}(data_dir, size={rng.choice((160, 224))}):",
    ]
    train += _docstring(rng, "    ")
    train += [
        "    jpegs, labels = fn.readers.file(file_root=data_dir, random_shuffle=True)",
        f'    {img} = fn.decoders.image(jpegs, device="mixed")',
    ]
    train += [f"    {line}" for line in _dali_ops(rng, img)]
    train += [f"    return {img}, labels"]
    val = [
        f"@{decorator}(batch_size={rng.choice((16, 32))}, num_threads=2, device_id=0)",
        f"def {names[1]}(data_dir):",
        "    jpegs, labels = fn.readers.file(file_root=data_dir)",
        f'    {img} = fn.decoders.image(jpegs, device="mixed")',
        f"    return fn.resize({img}, resize_x=224, resize_y=224), labels",
    ]
    target = rng.randint(*size)
    before = _padding(rng, rng.randint(0, max(0, target - 40)) // 2)
    after = _padding(rng, max(0, target - len(header) - len(before) - len(train) - len(val)))
    lines = header + before + ["", ""] + train + ["", ""] + val + after
    return "\n".join(lines) + "\n", names


def helper_module(
    rng: random.Random, module: str, names: list[str], size: tuple[int, int] = (50, 400)
) -> str:
    """A module that never mentions DALI: it imports the pipelines of ``module`` (a sibling)
    and builds and runs them in its training loop."""
    header = _header(rng)
    at = header.index("logger = logging.getLogger(__name__)") - 1
    header[at:at] = ["", f"from .{module} import {', '.join(names)}"]
    steps = rng.choice((10, 100, 1000))
    loop = [
        "def train(data_dir, iterations):",
        f"    train = {names[0]}(data_dir)",
        "    train.build()",
        f"    val = {names[1]}(data_dir)",
        "    val.build()",
        "    results = []",
        "    for _ in range(iterations):",
        "        images, labels = train.run()",
        "        val_images, val_labels = val.run()",
        "        results.append((images, labels, val_images, val_labels))",
        "    return results",
        "",
        "",
        'if __name__ == "__main__":',
        f'    train("/data/{rng.choice(WORDS)}", {steps})',
    ]
    target = rng.randint(*size)
    before = _padding(rng, rng.randint(0, max(0, target - 40)) // 2)
    after = _padding(rng, max(0, target - len(header) - len(before) - len(loop)))
    lines = header + before + after + ["", ""] + loop
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------
# The tree
# ------------------------------------------------------------------------------------------------


#: bump when the generators change: a cached tree of another version is generated again
GENERATOR_VERSION = 2
#: the kinds of DALI files, in turn: a @pipeline_def module with its use site, a Pipeline
#: subclass with ops, a module of pipelines plus a sibling module (no DALI import) running them
DALI_KINDS = ("pipeline_def", "pipeline_class", "pipelines+helper")


@dataclass
class Tree:
    root: Path
    files: list[Path] = field(default_factory=list)
    #: the files dali-migrate must parse and migrate: those that mention DALI, and the
    #: helper modules that import a pipeline from one of them
    dali: list[Path] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)
    lines: int = 0
    dali_lines: int = 0
    bytes: int = 0
    seconds: float = 0.0
    cached: bool = False

    def to_dict(self) -> dict:
        return {
            "root": str(self.root),
            "files": len(self.files),
            "dali_files": len(self.dali),
            "dali_kinds": self.kinds,
            "lines": self.lines,
            "dali_lines": self.dali_lines,
            "bytes": self.bytes,
            "mean_lines": round(self.lines / max(1, len(self.files)), 1),
            "generation_s": round(self.seconds, 3),
            "cached": self.cached,
        }

    def manifest(self) -> dict:
        rel = lambda ps: [str(p.relative_to(self.root)) for p in ps]  # noqa: E731
        return {
            "files": rel(self.files),
            "dali": rel(self.dali),
            "kinds": self.kinds,
            "lines": self.lines,
            "dali_lines": self.dali_lines,
            "bytes": self.bytes,
        }


def _clear(root: Path) -> None:
    """Remove ``root`` if it is a tree this script made (or empty); refuse anything else."""
    if not root.exists():
        return
    if (root / MARKER).is_file() or not any(root.iterdir()):
        shutil.rmtree(root)
    else:
        sys.exit(f"{root} exists and was not made by this benchmark; choose another --tree")


def tree_params(
    n_files: int | None, n_lines: int | None, dali_fraction: float, seed: int, size: tuple[int, int]
) -> dict:
    return {
        "version": GENERATOR_VERSION,
        "files": n_files,
        "lines": n_lines,
        "dali_fraction": dali_fraction,
        "seed": seed,
        "size": list(size),
    }


def default_tree_dir(params: dict) -> Path:
    """A cache directory in the system's temp dir, named after the parameters."""
    key = hashlib.sha1(json.dumps(params, sort_keys=True).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"dali-migrate-codemod-tree-{key}"


def cached_tree(root: Path, params: dict) -> Tree | None:
    """The tree at ``root`` when this script generated it with the same parameters."""
    try:
        doc = json.loads((root / MARKER).read_text())
    except (OSError, ValueError):
        return None
    if doc.get("params") != params or "manifest" not in doc:
        return None
    m = doc["manifest"]
    tree = Tree(
        root,
        [root / f for f in m["files"]],
        [root / f for f in m["dali"]],
        m["kinds"],
        m["lines"],
        m["dali_lines"],
        m["bytes"],
        cached=True,
    )
    if not all(p.is_file() for p in tree.files):
        return None
    return tree


def generate_tree(
    root: Path,
    n_files: int | None,
    dali_fraction: float,
    seed: int,
    *,
    n_lines: int | None = None,
    size: tuple[int, int] = (50, 400),
) -> Tree:
    """Write modules under ``root`` (packages of 10 sub-packages of 30 modules) until there are
    ``n_files`` of them, or ``n_lines`` lines. Every ``1 / dali_fraction``-th module is a DALI
    one, of the kinds of :data:`DALI_KINDS` in turn; a module of pipelines brings a sibling
    ``loop_NNNNN.py`` that runs them (an extra file)."""
    t0 = time.perf_counter()
    params = tree_params(n_files, n_lines, dali_fraction, seed, size)
    _clear(root)
    root.mkdir(parents=True)
    # The generated tree's own pyproject.toml stops the CLI's upward search for
    # [tool.dali-migrate] settings, so that a config around the checkout cannot skew the run.
    (root / "pyproject.toml").write_text("# generated by benchmarks/codemod_throughput.py\n")
    step = max(1, round(1 / dali_fraction)) if dali_fraction > 0 else 0
    tree = Tree(root, kinds=dict.fromkeys(DALI_KINDS, 0))

    def add(path: Path, text: str, dali: bool) -> None:
        ast.parse(text, str(path))  # every generated file is valid Python
        if not dali and "dali" in text:  # would defeat the prefilter: a generator bug
            raise AssertionError(f"{path}: an ordinary module mentions 'dali'")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        tree.files.append(path)
        n = text.count("\n")
        tree.lines += n
        tree.bytes += len(text.encode("utf-8"))
        if dali:
            tree.dali.append(path)
            tree.dali_lines += n

    i = 0
    while (n_files is None or i < n_files) and (n_lines is None or tree.lines < n_lines):
        folder = root / f"pkg_{i // 300:02d}" / f"sub_{i // 30 % 10}"
        path = folder / f"mod_{i:05d}.py"
        # one generator per file, seeded from the file's index: a file does not change when
        # --files changes (only which files are DALI does)
        frng = random.Random(f"{seed}:{i}")
        if step and i % step == step // 2:
            kind = DALI_KINDS[(i // step) % len(DALI_KINDS)]
            tree.kinds[kind] += 1
            if kind == "pipeline_def":
                add(path, dali_module(frng, i, size), True)
            elif kind == "pipeline_class":
                add(path, dali_class_module(frng, i, size), True)
            else:
                text, names = dali_pipelines_module(frng, i, size)
                add(path, text, True)
                add(folder / f"loop_{i:05d}.py", helper_module(frng, path.stem, names, size), True)
        else:
            add(path, ordinary_module(frng, size), False)
        i += 1
    tree.seconds = time.perf_counter() - t0
    (root / MARKER).write_text(json.dumps({"params": params, "manifest": tree.manifest()}))
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
    """What run() does for every file before it migrates any: discovery, a raw read and the
    prefilter, and the cross-module discovery of :mod:`dali_migrate.project` (which pipelines
    are defined where, which modules import them), without the in-memory pre-migration."""
    from dali_migrate import engine, project

    files = discover([tree.root])
    candidates = list(engine._candidates(files))
    wanted = {c[0] for c in candidates if c[1]}
    params = inspect.signature(project.discover).parameters
    if "raw" in params:  # the prefilter's bytes are handed over (see engine._candidates)
        raw = {c[0]: c[2] for c in candidates if len(c) > 2}
        project.discover(files, [tree.root], wanted, raw=raw)
    else:
        from dali_migrate.sourcefile import SourceError, read_source

        def read(p: Path) -> str | None:
            try:
                return read_source(p).text
            except SourceError:
                return None

        project.discover(files, [tree.root], read, wanted)
    return len(wanted)


class NoopCodemod(VisitorBasedCodemodCommand):
    """A codemod that changes nothing: ``python -m libcst.tool codemod -x
    codemod_throughput.NoopCodemod`` then costs what libcst's own runner costs (discovery,
    a worker pool, parse, one visit, code generation) and nothing more."""

    DESCRIPTION = "no-op (dali-migrate codemod_throughput benchmark)"


def libcst_tool_command(jobs: int, root: Path) -> list[str]:
    # the command first: libcst.tool's first argument pass takes the first positional for it
    return [
        sys.executable,
        "-m",
        "libcst.tool",
        "codemod",
        "-x",
        "codemod_throughput.NoopCodemod",
        "-j",
        str(jobs),
        "--no-format",
        "--hide-progress",
        "-u",
        "0",
        str(root),
    ]


class TimedOut(Exception):
    pass


def libcst_tool_run(tree: Tree, jobs: int, timeout: float) -> None:
    """``python -m libcst.tool codemod`` with the no-op codemod over the whole tree; its process
    group is killed after ``timeout`` seconds (:class:`TimedOut`)."""
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
    )
    proc = subprocess.Popen(
        libcst_tool_command(jobs, tree.root),
        cwd=tree.root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise TimedOut from None
    if proc.returncode != 0:
        raise RuntimeError(f"libcst.tool codemod exited {proc.returncode}: {err.strip()[-2000:]}")


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
        cli_command(jobs, tree.root),
        cwd=tree.root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
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
    rounds: int = 0  #: at most this many runs (0: every round)
    timed_out: float | None = None  #: the timeout it ran past, if it did

    @property
    def median(self) -> float:
        return statistics.median(self.times) if self.times else float("nan")

    def shown(self) -> str:
        if self.timed_out is not None and not self.times:
            return f"> {self.timed_out:.0f}"
        return f"{self.median:.3f}"

    def to_dict(self) -> dict:
        return {
            "files": self.files,
            "processes": self.procs,
            "runs_s": [round(t, 4) for t in self.times],
            "median_s": round(self.median, 4) if self.times else None,
            "files_per_s": round(self.files / self.median, 1) if self.times else None,
            "timed_out_after_s": self.timed_out,
        }


def measure(measurements: list[Measurement], repeat: int) -> None:
    """Time every measurement ``repeat`` times, round-robin."""
    for r in range(repeat):
        for m in measurements:
            if (m.rounds and r >= m.rounds) or m.timed_out is not None:
                continue
            t0 = time.perf_counter()
            try:
                m.fn()
            except TimedOut:
                m.timed_out = round(time.perf_counter() - t0, 1)
                print(
                    f"  round {r + 1}/{repeat}  {m.name:<22} > {m.timed_out:.0f} s (stopped)",
                    file=sys.stderr,
                    flush=True,
                )
                continue
            m.times.append(time.perf_counter() - t0)
            print(
                f"  round {r + 1}/{repeat}  {m.name:<22} {m.times[-1]:8.3f} s",
                file=sys.stderr,
                flush=True,
            )


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
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--files", type=int, default=None, help="files in the tree (default 3000 unless --lines)"
    )
    ap.add_argument(
        "--lines",
        type=int,
        default=None,
        help="generate files until the tree has this many lines (e.g. 1000000); modules then have "
        "200-1000 lines unless --size says otherwise",
    )
    ap.add_argument(
        "--size",
        type=int,
        nargs=2,
        metavar=("MIN", "MAX"),
        default=None,
        help="lines of a module (default 50 400, or 200 1000 with --lines)",
    )
    ap.add_argument(
        "--dali-fraction", type=float, default=0.01, help="fraction of DALI files (default 0.01)"
    )
    ap.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="worker processes for dali-migrate (default: the tool's default, one per core)",
    )
    ap.add_argument(
        "--repeat", type=int, default=3, help="runs of each measurement; the median is reported"
    )
    ap.add_argument("--seed", type=int, default=0, help="seed of the generated tree (default 0)")
    ap.add_argument(
        "--tree",
        type=Path,
        default=None,
        help="where the tree goes (default: a cache directory in the temp dir, named after the "
        "parameters, reused by later runs)",
    )
    ap.add_argument(
        "--fresh",
        action="store_true",
        help="generate the tree again even when a cached one matches",
    )
    ap.add_argument("--clean", action="store_true", help="remove the tree afterwards")
    ap.add_argument(
        "--keep", action="store_true", help=argparse.SUPPRESS
    )  # the default now; kept for old commands
    ap.add_argument(
        "--libcst-timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="stop `python -m libcst.tool codemod` after S seconds and report '> S' (default 300; "
        "0: skip it)",
    )
    ap.add_argument(
        "--libcst-repeat", type=int, default=1, help="runs of the libcst.tool row (default 1)"
    )
    ap.add_argument(
        "--parse-all", action="store_true", help="also time a bare libcst parse of every file"
    )
    ap.add_argument(
        "--no-serial",
        action="store_true",
        help="skip the one-process rows (engine.run / cli with j=1)",
    )
    ap.add_argument("--json-out", type=Path, help="also write the results as JSON to this file")
    ap.add_argument(
        "--profile",
        type=int,
        metavar="N",
        default=0,
        help="also print the top N functions of a cProfile'd one-process engine run",
    )
    args = ap.parse_args(argv)
    if args.files is None and args.lines is None:
        args.files = 3000
    size = tuple(args.size) if args.size else ((200, 1000) if args.lines else (50, 400))
    if (
        (args.files is not None and args.files < 1)
        or (args.lines is not None and args.lines < 1)
        or not 0 <= args.dali_fraction <= 1
        or args.repeat < 1
        or not 1 <= size[0] <= size[1]
    ):
        ap.error(
            "need --files/--lines >= 1, 0 <= --dali-fraction <= 1, --repeat >= 1 and 1 <= MIN <= "
            "MAX"
        )

    machine = machine_info()
    # engine.run's own default: Options.jobs == 0 means one worker per core
    jobs_opt = args.jobs if args.jobs is not None else Options().jobs
    effective_jobs = jobs_opt or os.cpu_count() or 1

    params = tree_params(args.files, args.lines, args.dali_fraction, args.seed, size)
    tree_root = (args.tree or default_tree_dir(params)).resolve()
    tree = None if args.fresh else cached_tree(tree_root, params)
    if tree is None:
        what = f"{args.files} files" if args.files is not None else f"{args.lines} lines"
        print(
            f"generating {what} ({args.dali_fraction:.2%} DALI, seed {args.seed}) under "
            f"{tree_root}",
            file=sys.stderr,
            flush=True,
        )
        tree = generate_tree(
            tree_root, args.files, args.dali_fraction, args.seed, n_lines=args.lines, size=size
        )
    else:
        print(f"reusing the tree under {tree_root}", file=sys.stderr, flush=True)
    try:
        print(
            f"  {len(tree.files)} files, {len(tree.dali)} DALI ({tree.kinds}), {tree.lines} lines, "
            f"{tree.bytes / 1e6:.1f} MB",
            file=sys.stderr,
        )

        n, n_dali = len(tree.files), len(tree.dali)
        j = effective_jobs
        summaries: list[Summary] = []  # of the main engine runs: checked below
        cli_m = Measurement(f"cli j={j}", n, str(j), lambda: cli_run(tree, args.jobs))
        cli1_m = Measurement("cli j=1", n, "1", lambda: cli_run(tree, 1))
        run_m = Measurement(
            f"engine.run j={j}", n, str(j), lambda: summaries.append(engine_run(tree, jobs_opt))
        )
        serial_m = Measurement(
            "engine.run j=1", n, "1", lambda: summaries.append(engine_run(tree, 1))
        )
        scan_m = Measurement("scan + discovery", n, "1", lambda: scan_only(tree))
        dali_m = Measurement("parse DALI only", n_dali, "1", lambda: parse_and_print(tree.dali))
        tool_m = Measurement(
            f"libcst.tool codemod j={j}",
            n,
            str(j),
            lambda: libcst_tool_run(tree, j, args.libcst_timeout),
            rounds=args.libcst_repeat,
        )
        all_m = Measurement("parse all", n, "1", lambda: parse_and_print(tree.files))
        ms = [cli_m] + ([] if args.no_serial or j == 1 else [cli1_m]) + [run_m]
        ms += [] if args.no_serial or j == 1 else [serial_m]
        ms += [scan_m] + ([dali_m] if n_dali else [])
        ms += [tool_m] if args.libcst_timeout > 0 else []
        ms += [all_m] if args.parse_all else []
        measure(ms, args.repeat)

        # sanity: the run saw every file and migrated the DALI ones
        s = summaries[-1]
        if s.scanned != n or s.parsed != n_dali or s.changed != n_dali or s.errors:
            print(f"WARNING: unexpected engine summary {s.to_dict()}", file=sys.stderr)

        def ratio(a: float | None, b: float | None) -> float | None:
            if a is None or b is None or a != a or b != b or b <= 0:
                return None
            return a / b

        one = serial_m if serial_m in ms else run_m  # the one-process engine run
        # what migrating one DALI file costs in one process (the serial run less the scan that
        # every file pays), and how that compares with merely parsing and printing it
        per_file = ratio(one.median - scan_m.median, n_dali)
        dali_median = dali_m.median if n_dali else None
        ratios = {
            "run / parse DALI": ratio(run_m.median, dali_median),
            "cli / parse DALI": ratio(cli_m.median, dali_median),
        }
        if cli1_m in ms:
            ratios["cli j=1 / parse DALI"] = ratio(cli1_m.median, dali_median)
        ratios["migrate / parse, per DALI file (1 process)"] = ratio(
            per_file, ratio(dali_median, n_dali)
        )
        if tool_m in ms:
            tool_s = tool_m.median if tool_m.times else None
            ratios["libcst.tool / cli"] = ratio(tool_s, cli_m.median)
        if all_m in ms:
            ratios["run / parse all"] = ratio(run_m.median, all_m.median)

        print()
        print(
            f"dali-migrate {machine['dali_migrate']}, libcst {machine['libcst']}, Python "
            f"{machine['python']}, "
            f"{machine['cpu_count']} cores ({machine['usable_cores']} usable), jobs={j}"
        )
        print(
            f"tree: {n} files, {n_dali} DALI "
            f"({', '.join(f'{v} {k}' for k, v in tree.kinds.items())}), "
            f"{tree.lines} lines ({tree.lines / n:.0f}/file, DALI {tree.dali_lines}); median of "
            f"{args.repeat}"
        )
        print(
            f"engine summary: {s.scanned} scanned, {s.parsed} parsed, {s.changed} would change, "
            f"{s.errors} errors"
        )
        print()
        print(
            f"{'measurement':<24} {'procs':>5} {'files':>6} {'median s':>9} {'min s':>8} "
            f"{'max s':>8} {'files/s':>9}"
        )
        for m in ms:
            if m.times:
                print(
                    f"{m.name:<24} {m.procs:>5} {m.files:>6} {m.shown():>9} {min(m.times):8.3f} "
                    f"{max(m.times):8.3f} {m.files / m.median:9.0f}"
                )
            else:
                print(
                    f"{m.name:<24} {m.procs:>5} {m.files:>6} {m.shown():>9} {'':>8} {'':>8} {'':>9}"
                )
        print()
        for k, v in ratios.items():
            if v is None and k.startswith("libcst.tool") and tool_m.timed_out is not None:
                print(f"{k:<44} {f'> {tool_m.timed_out / cli_m.median:.0f}x':>8}")
                continue
            print(f"{k:<44} {'n/a' if v is None else f'{v:7.2f}x':>8}")
        if per_file is not None:
            print(f"{'migrating one DALI file, 1 process':<44} {per_file:7.3f} s")

        if args.json_out:
            doc = {
                "benchmark": "codemod_throughput",
                "timestamp": _dt.datetime.now().isoformat(timespec="seconds"),
                "argv": sys.argv[1:] if argv is None else argv,
                "machine": {
                    **machine,
                    "loadavg_at_end": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
                },
                "jobs": j,
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
        if args.clean:
            _clear(tree_root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
