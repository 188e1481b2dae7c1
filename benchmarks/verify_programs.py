"""Verify every program fixture (fixtures/programs/<case>/) with the differential harness, on the
device asked for, and print a Markdown table of the verdicts (``--out`` also writes it, with the
JSON next to it). On the GPU machine this is how the fixtures with mixed decoding, ``.gpu()`` and
GPU random operators are verified as written:

    python benchmarks/verify_programs.py --device gpu --out benchmarks/results/verify-gpu.md
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from dali_migrate.harness.datasets import make_dataset  # noqa: E402
from dali_migrate.harness.verify import verify  # noqa: E402

DATA_KEYS = ("kind", "classes", "per_class", "count", "shape", "dtype")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["auto", "gpu", "cpu"], default="auto")
    ap.add_argument("--cases", nargs="*", help="only these fixture names")
    ap.add_argument("--timeout", type=int, default=180)
    ap.add_argument("--out", type=Path, help="write the Markdown table here (and .json beside it)")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="dm-verify-"))
    rows, docs, bad = [], [], 0
    cases = sorted(
        p for p in (ROOT / "fixtures" / "programs").iterdir() if (p / "new.py").is_file()
    )
    for case in cases:
        if args.cases and case.name not in args.cases:
            continue
        spec = json.loads((case / "data.json").read_text())
        key = "-".join(f"{k}={spec[k]}" for k in DATA_KEYS if k in spec).replace(" ", "")
        data = work / "data" / key
        if not data.exists():
            make_dataset({k: spec[k] for k in DATA_KEYS if k in spec}, data)
        started = time.perf_counter()
        report = verify(
            case / "old.py", case / "new.py", data=data, device=args.device, timeout=args.timeout
        )
        doc = report.to_dict() if hasattr(report, "to_dict") else {}
        docs.append({"case": case.name, **doc})
        for p in report.pipelines:
            bad += p.verdict in ("mismatch", "error")
            detail = (getattr(p, "reason", "") or "").replace("|", "/").replace("\n", " ")[:120]
            rows.append(
                f"| {case.name} | {p.name} | "
                f"{report.device}{' (lowered)' if report.lowered else ''} | "
                f"**{p.verdict}** | {p.iterations} | {p.random_ops} | {detail} |"
            )
        print(
            f"{case.name}: {', '.join(f'{p.name}={p.verdict}' for p in report.pipelines)} "
            f"({time.perf_counter() - started:.1f} s)",
            flush=True,
        )
    table = "\n".join(
        [
            "| case | pipeline | device | verdict | iterations | random ops | details |",
            "|---|---|---|---|---|---|---|",
            *rows,
        ]
    )
    print("\n" + table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table + "\n")
        args.out.with_suffix(".json").write_text(json.dumps(docs, indent=2, default=str))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
