"""Where a batch's time goes: each side of a workload (the pipeline, the migrated program) run
under cProfile, its own time summed per area (DALI dynamic mode's capture machinery, its call-site
matching, invocation, batch/tensor wrappers, the pipeline's C++ run call, torch, the rest).

    python benchmarks/experiments/profile_steps.py --workloads numpy_volumes audio_spectrogram

Each side runs in its own subprocess (``--batches`` after ``--warmup``), consuming every batch as
``pipeline_throughput.py`` does (DLPack into torch, stream sync). Printed per side: ms per batch
with and without the profiler, and the areas' shares of the profiled time. The profiler slows
Python code more than C++ code, so shares are an upper bound for the Python areas.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from pipeline_throughput import DATA, RUNNER, make_data, programs  # noqa: E402

#: area -> substrings of a profiled function's file (first match wins); "C++" = builtins
AREAS = [
    ("ndd capture", "dynamic/_capture"),
    ("ndd call-site matching", "dynamic/_call_site"),
    ("ndd invocation/ops", "dynamic/_invocation"),
    ("ndd invocation/ops", "dynamic/_ops"),
    ("ndd invocation/ops", "dynamic/_op_builder"),
    ("ndd batch/tensor", "dynamic/_batch"),
    ("ndd batch/tensor", "dynamic/_tensor"),
    ("ndd other", "experimental/dynamic"),
    ("pipeline (Python)", "nvidia/dali/pipeline"),
    ("other DALI Python", "nvidia/dali"),
    ("torch", "torch"),
    ("workload + consume", "<string>"),
    ("workload + consume", "workload"),
]

PROFILED = RUNNER.replace(
    "module.run(data_dir, batches + warmup, consume)",
    """import cProfile, pstats, os
profiler = cProfile.Profile()
def consume_and_arm(*outputs, _seen=[0]):
    consume(*outputs)
    _seen[0] += 1
    if _seen[0] == warmup:
        profiler.enable()
module.run(data_dir, batches + warmup, consume_and_arm)
profiler.disable()
areas = {}
for (file, line, name), (cc, nc, tt, ct, callers) in pstats.Stats(profiler).stats.items():
    other = "C++ / builtins" if file == "~" else "other Python"
    area = next((a for a, key in AREAS if key in file), other)
    if file == "~" and ("run" in name or "Run" in name or "Outputs" in name or "outputs" in name):
        area = "C++ run/outputs calls"
    areas[area] = areas.get(area, 0.0) + tt
print("AREAS " + json.dumps(areas))
top = sorted(pstats.Stats(profiler).stats.items(), key=lambda kv: -kv[1][2])[:8]
rows = [[f"{os.path.basename(f)}:{n}", tt] for (f, l, n), (cc, nc, tt, ct, c) in top]
print("TOP " + json.dumps(rows))""",
).replace(
    "import importlib.util, json, resource, sys, time",
    "import importlib.util, json, resource, sys, time\nAREAS = " + repr(AREAS),
)


def run(code: str, path: Path, data: Path, batches: int, warmup: int, device: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", code, str(path), str(data), str(batches), str(warmup), device],
        capture_output=True,
        text=True,
        timeout=600,
    )
    out: dict = {}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            out.update(json.loads(line[7:]))
        elif line.startswith("AREAS "):
            out["areas"] = json.loads(line[6:])
        elif line.startswith("TOP "):
            out["top"] = json.loads(line[4:])
    if not out:
        out["error"] = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["gpu", "cpu"], default="gpu")
    ap.add_argument("--workloads", nargs="*", default=["numpy_volumes", "audio_spectrogram"])
    ap.add_argument("--batches", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--samples", type=int, default=1024)
    ap.add_argument(
        "--scale",
        type=int,
        default=1,
        help="size multiplier of each volume / clip (as pipeline_throughput.py)",
    )
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for workload in args.workloads:
            data = make_data(DATA[workload], work / "data", args.samples, args.scale)
            print(workload)
            for side, path in programs(workload, args.device, work, []).items():
                plain = run(RUNNER, path, data, args.batches, args.warmup, args.device)
                profiled = run(PROFILED, path, data, args.batches, args.warmup, args.device)
                results[f"{workload}/{side}"] = {"plain": plain, "profiled": profiled}
                if "error" in plain or "error" in profiled:
                    print(f"  {side}: error {plain.get('error') or profiled.get('error')}")
                    continue
                ms = 1000 / plain["batches_per_s"]
                areas = profiled["areas"]
                total = sum(areas.values())
                print(
                    f"  {side:9s} {ms:6.3f} ms/batch (profiled "
                    f"{1000 / profiled['batches_per_s']:6.3f})"
                )
                for area, t in sorted(areas.items(), key=lambda kv: -kv[1]):
                    if t / total >= 0.01:
                        print(
                            f"      {area:26s} {100 * t / total:5.1f} %  "
                            f"{1000 * t / args.batches:6.3f} ms/batch"
                        )
                print(
                    "      top functions (own time): "
                    + ", ".join(
                        f"{name} {1000 * t / args.batches:.3f}" for name, t in profiled["top"][:6]
                    )
                )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
