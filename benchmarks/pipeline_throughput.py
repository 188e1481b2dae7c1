"""Old against new, side by side: each pipeline-mode workload in ``benchmarks/workloads/`` and
the program dali-migrate makes of it, run in one go on the same synthetic data.

    python benchmarks/pipeline_throughput.py                     # GPU if there is one, else CPU
    python benchmarks/pipeline_throughput.py --device cpu --batches 30
    python benchmarks/pipeline_throughput.py --workloads rn50_train \
        --extra benchmarks/experiments/rn50_train_two_contexts.py

Each side runs in its own subprocess, alternating, ``--repeat`` times; the median is reported.
A side consumes every batch the way training does: each output becomes a torch tensor (through
DLPack) and the current CUDA stream is synchronised before the next batch is asked for. Printed
per workload: samples/s, the new/old ratio, the time to the first batch (construction included)
and the peak GPU memory in use (``torch.cuda.mem_get_info``; CPU runs report the peak RSS).
Without a GPU both programs are lowered to the CPU by the harness's shared lowering transform.
``--extra FILE`` adds hand-written variants (same ``run(data_dir, batches, consume)`` entry point)
to the comparison of the workload named by the file's prefix.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import wave
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOADS = HERE / "workloads"
#: which synthetic data each workload reads
DATA = {
    "rn50_train": "jpeg",
    "rn50_val": "jpeg",
    "numpy_volumes": "npy",
    "audio_spectrogram": "wav",
}

RUNNER = r"""
import importlib.util, json, resource, sys, time
path, data_dir, batches, warmup, device = sys.argv[1:6]
batches, warmup = int(batches), int(warmup)
import numpy as np
import torch
gpu = device == "gpu"
if gpu:
    torch.cuda.init()
    free, total = torch.cuda.mem_get_info()
    base_used = total - free
peak = 0
stamps = []
start = time.perf_counter()

def to_torch(t):
    try:
        return torch.from_dlpack(t)
    except Exception:
        return torch.from_numpy(np.asarray(t))

def consume(*outputs):
    global peak
    tensors = [to_torch(t) for t in outputs]
    if gpu:
        torch.cuda.current_stream().synchronize()
        if len(stamps) % 10 == 0:
            free, total = torch.cuda.mem_get_info()
            peak = max(peak, total - free - base_used)
    assert all(t.numel() > 0 for t in tensors)
    stamps.append(time.perf_counter())

spec = importlib.util.spec_from_file_location("workload", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
module.run(data_dir, batches + warmup, consume)
steady = stamps[warmup:]
rate = (len(steady) - 1) / (steady[-1] - steady[0])
if not gpu:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
result = {"batches_per_s": rate, "first_batch_s": stamps[0] - start, "peak_bytes": peak}
print("RESULT " + json.dumps(result))
"""


def make_data(kind: str, root: Path, samples: int, scale: int = 1) -> Path:
    """Deterministic synthetic data: JPEG class folders, .npy volumes or WAV files. ``scale``
    multiplies the size of a volume (its depth) and the length of a clip (JPEGs keep theirs)."""
    import numpy as np

    out = root / (kind if scale == 1 else f"{kind}-x{scale}")
    if out.exists():
        return out
    rng = np.random.default_rng(0)
    if kind == "jpeg":
        from PIL import Image

        for i in range(samples):
            folder = out / f"class_{i % 4}"
            folder.mkdir(parents=True, exist_ok=True)
            h, w = int(rng.integers(300, 480)), int(rng.integers(360, 640))
            yy, xx = np.mgrid[0:h, 0:w]
            img = np.stack([xx * 255 // w, yy * 255 // h, (xx + yy) % 256], axis=-1) + rng.integers(
                0, 60, (h, w, 3)
            )
            Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(
                folder / f"img_{i:05d}.jpg", quality=90
            )
    elif kind == "npy":
        out.mkdir(parents=True)
        for i in range(samples):
            np.save(
                out / f"vol_{i:05d}.npy",
                rng.integers(0, 255, size=(128, 128, 16 * scale)).astype(np.uint8),
            )
    elif kind == "wav":
        for i in range(samples):
            folder = out / f"class_{i % 4}"
            folder.mkdir(parents=True, exist_ok=True)
            t = np.arange(16000 * scale) / 16000.0
            tone = 0.3 * np.sin(2 * np.pi * (200 + 10 * i) * t) + 0.05 * rng.standard_normal(t.size)
            with wave.open(str(folder / f"clip_{i:05d}.wav"), "wb") as f:
                f.setnchannels(1)
                f.setsampwidth(2)
                f.setframerate(16000)
                f.writeframes((tone * 32767).astype("<i2").tobytes())
    else:
        raise ValueError(kind)
    return out


def programs(workload: str, device: str, work: Path, extras: list[Path]) -> dict[str, Path]:
    """The old program, the migrated one and any extra variants, lowered to CPU if asked."""
    sys.path.insert(0, str(HERE.parent / "src"))
    from dali_migrate import migrate_source

    old = (WORKLOADS / f"{workload}.py").read_text()
    sources = {"pipeline": old, "migrated": migrate_source(old).code}
    for extra in extras:
        if extra.name.startswith(workload):
            sources[extra.stem[len(workload) + 1 :] or extra.stem] = extra.read_text()
    if device == "cpu":
        from dali_migrate.harness.lower import lower_to_cpu

        sources = {k: lower_to_cpu(v).code for k, v in sources.items()}
    paths = {}
    for name, code in sources.items():
        p = work / f"{workload}__{name}.py"
        p.write_text(code)
        paths[name] = p
    return paths


def run_side(path: Path, data: Path, batches: int, warmup: int, device: str, timeout: int) -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER, str(path), str(data), str(batches), str(warmup), device],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["auto", "gpu", "cpu"], default="auto")
    ap.add_argument("--workloads", nargs="*", default=sorted(DATA))
    ap.add_argument("--batches", type=int, default=150, help="timed batches per run")
    ap.add_argument("--warmup", type=int, default=20, help="batches before timing starts")
    ap.add_argument("--repeat", type=int, default=3, help="runs per side (median reported)")
    ap.add_argument("--samples", type=int, default=1024, help="files per synthetic dataset")
    ap.add_argument(
        "--scale",
        type=int,
        default=1,
        help="multiply the size of each volume / audio clip (how the ratio depends on the work "
        "per batch)",
    )
    ap.add_argument(
        "--extra",
        nargs="*",
        type=Path,
        default=[],
        help="hand-written variants <workload>_<name>.py",
    )
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()

    device = args.device
    if device == "auto":
        import torch

        device = "gpu" if torch.cuda.is_available() else "cpu"
    work = Path(tempfile.mkdtemp(prefix="dm-bench-"))
    print(
        f"device={device} batches={args.batches} warmup={args.warmup} repeat={args.repeat} "
        f"samples={args.samples}"
        f" scale={args.scale}"
    )
    report = {"device": device, "args": {k: str(v) for k, v in vars(args).items()}, "workloads": {}}
    for workload in args.workloads:
        data = make_data(DATA[workload], work / "data", args.samples, args.scale)
        paths = programs(workload, device, work, args.extra)
        runs: dict[str, list[dict]] = {name: [] for name in paths}
        for _ in range(args.repeat):
            for name, path in paths.items():  # alternating sides, so drifts hit both
                runs[name].append(
                    run_side(path, data, args.batches, args.warmup, device, args.timeout)
                )
        summary = {}
        for name, results in runs.items():
            ok = [r for r in results if "error" not in r]
            if not ok:
                summary[name] = {"error": results[0]["error"]}
                continue
            bps = statistics.median(r["batches_per_s"] for r in ok)
            summary[name] = {
                "batches_per_s": bps,
                "runs": [round(r["batches_per_s"], 2) for r in ok],
                "first_batch_s": statistics.median(r["first_batch_s"] for r in ok),
                "peak_mib": max(r["peak_bytes"] for r in ok) / 2**20,
            }
        base = summary.get("pipeline", {}).get("batches_per_s")
        print(f"\n{workload}")
        for name, s in summary.items():
            if "error" in s:
                print(f"  {name:<22} error: {s['error']}")
                continue
            ratio = s["batches_per_s"] / base if base else float("nan")
            s["ratio"] = ratio
            print(
                f"  {name:<22} {s['batches_per_s']:9.2f} batches/s  x{ratio:5.2f}  "
                f"first batch {s['first_batch_s']:6.2f} s  peak {s['peak_mib']:8.1f} MiB  runs "
                f"{s['runs']}"
            )
        report["workloads"][workload] = summary
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    started = time.time()
    code = main()
    print(f"\ntotal {time.time() - started:.0f} s")
    sys.exit(code)
