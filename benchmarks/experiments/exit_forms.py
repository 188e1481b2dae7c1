"""Experiment: which form of a migrated (dynamic-mode, eager) program exits 0 (DALI 2.4).

DALI 2.4's eager dynamic mode runs each operator on a daemon Python thread (the `EvalContext`'s
`_AsyncExecutor`). When the interpreter starts finalizing while that thread is inside an
operator (GIL released, in C++), the thread is ended by CPython's `pthread_exit` as soon as it
tries to take the GIL back; the forced unwind meets a C++ frame that cannot be unwound and
`std::terminate` aborts the process: "terminate called without an active exception", exit 134.

    python exit_forms.py FORM [--shape full-epochs|interleaved] [--device cpu|gpu]
    python exit_forms.py --table [--runs 5] [--device cpu|gpu] [FORM ...]   # every form, a table

The table runs each form `--runs` times in fresh processes and prints the exit codes.
"""

from __future__ import annotations

import argparse
import atexit
import collections
import gc
import os
import subprocess
import sys
import tempfile
import time

FORMS = {
    "none": "nothing: the generators stay suspended, the last outputs are never read",
    "consume": "the consumer reads every output (.torch() of ndd.as_tensor), as training does",
    "consume-labels-only": "the consumer reads the labels only; the images are never read",
    "evaluate-in-generator": "the generator yields outputs it has .evaluate()d",
    "sync-cpu-body": "the generator body runs under `with ndd.EvalMode.sync_cpu:`",
    "sync-cpu-program": "the whole program runs under `with ndd.EvalMode.sync_cpu:`",
    "close": "both generators are close()d at the end",
    "del-gc": "`del` of both generators, then gc.collect()",
    "eval-context": "the whole program runs in `with ndd.EvalContext(num_threads=2):`",
    "atexit-sleep": "diagnostic: an atexit hook that sleeps 0.5 s (lets the work finish)",
    "atexit-evaluate-last": "an atexit hook that .evaluate()s the last outputs each gave",
    "os-exit": "os._exit(0) after flushing stdout (skips every exit handler)",
}


def make_jpegs(root: str, classes: int = 2, per_class: int = 10) -> None:
    import numpy as np
    from PIL import Image

    rs = np.random.default_rng(0)
    for c in range(classes):
        os.makedirs(f"{root}/c{c}")
        for i in range(per_class):
            pixels = (rs.random((64, 80, 3)) * 255).astype(np.uint8)
            Image.fromarray(pixels).save(f"{root}/c{c}/{i}.jpg")


def batches(ndd, root, seed, device, form):
    """An endless generator of (images, labels), as dali-migrate emits for a pipeline."""
    reader = ndd.readers.File(file_root=root, random_shuffle=True, seed=seed)
    while True:
        for jpegs, labels in reader.next_epoch(batch_size=4):
            if form == "sync-cpu-body":
                with ndd.EvalMode.sync_cpu:
                    images = ndd.resize(ndd.decoders.image(jpegs, device=device), size=[32, 32])
            else:
                images = ndd.resize(ndd.decoders.image(jpegs, device=device), size=[32, 32])
            if form == "evaluate-in-generator":
                images = images.evaluate()
            yield images, labels


def consume(ndd, outputs, form):
    images, labels = outputs
    if form == "consume":
        ndd.as_tensor(images).torch()
        ndd.as_tensor(labels).torch()
    elif form == "consume-labels-only":
        ndd.as_tensor(labels).torch()


def program(ndd, root, device, form, shape):
    train, val = batches(ndd, root, 1, device, form), batches(ndd, root, 2, device, form)
    last = {}
    if shape == "full-epochs":  # 5 batches of 4 = one epoch of 20 files
        steps = [("train", 5), ("val", 5)]
    else:  # train 3 steps, validate 1, twice
        steps = [("train", 3), ("val", 1), ("train", 3), ("val", 1)]
    for name, n in steps:
        gen = train if name == "train" else val
        for _ in range(n):
            last[name] = next(gen)
            consume(ndd, last[name], form)
    if form == "atexit-evaluate-last":
        atexit.register(lambda: [x.evaluate() for out in last.values() for x in out])
    if form == "close":
        train.close()
        val.close()
    elif form == "del-gc":
        del train, val, last
        gc.collect()


def run_form(form: str, shape: str, device: str) -> None:
    import nvidia.dali.experimental.dynamic as ndd

    root = tempfile.mkdtemp(prefix="exit-forms-")
    make_jpegs(root)
    ndd.set_num_threads(2)
    if form == "sync-cpu-program":
        with ndd.EvalMode.sync_cpu:
            program(ndd, root, device, form, shape)
    elif form == "eval-context":
        with ndd.EvalContext(num_threads=2):
            program(ndd, root, device, form, shape)
    else:
        program(ndd, root, device, form, shape)
    if form == "atexit-sleep":
        atexit.register(time.sleep, 0.5)
    print(form, shape, "reached the end", flush=True)
    if form == "os-exit":
        os._exit(0)


def table(forms, shapes, runs: int, device: str, timeout: float) -> None:
    print(f"device={device} runs={runs} python={sys.version.split()[0]}")
    print(f"{'form':24} {'shape':12} exit codes (count)")
    for form in forms:
        for shape in shapes:
            codes = collections.Counter()
            for _ in range(runs):
                cmd = [sys.executable, __file__, form, "--shape", shape, "--device", device]
                try:
                    proc = subprocess.run(cmd, capture_output=True, timeout=timeout)
                    codes[proc.returncode] += 1
                except subprocess.TimeoutExpired:
                    codes["timeout"] += 1
            summary = ", ".join(f"{code}: {n}/{runs}" for code, n in sorted(codes.items(), key=str))
            print(f"{form:24} {shape:12} {summary}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("forms", nargs="*", help=f"one of: {', '.join(FORMS)}")
    parser.add_argument("--shape", choices=["full-epochs", "interleaved"], default=None)
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--table", action="store_true")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args()
    unknown = [f for f in args.forms if f not in FORMS]
    if unknown:
        parser.error(f"unknown form(s) {unknown}; known: {list(FORMS)}")
    if args.table:
        shapes = [args.shape] if args.shape else ["full-epochs", "interleaved"]
        table(args.forms or list(FORMS), shapes, args.runs, args.device, args.timeout)
    elif len(args.forms) == 1:
        run_form(args.forms[0], args.shape or "full-epochs", args.device)
    else:
        parser.error("give one FORM, or --table")


if __name__ == "__main__":
    main()
