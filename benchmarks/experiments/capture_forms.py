"""Experiment: forms of two dynamic-mode pipelines in one program, with and without capture mode.

A training program steps a training generator N times, then a validation generator a few
times, and repeats; both generators are endless and stay suspended between uses and at exit
(never closed). DALI 2.4 lets one capture-mode loop be active at a time per thread: the
`next_epoch(..., capture=True)` iterator is active while it is suspended at its `yield`.

    python capture_forms.py FORM             # one run: outputs compared with the eager form
    python capture_forms.py --check [FORM ...] [--runs 5]   # every form: raised? equal? exit code
    python capture_forms.py --bench [FORM ...] [--batches 60] [--repeat 3]   # throughput

Forms: see FORMS. "equal" compares every output of every step, bit for bit, with the form
`eager` (random values included: capture mode reproduces eager random draws).
"""

from __future__ import annotations

import argparse
import os
import pickle
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time

FORMS = {
    "eager": "both loops eager (no capture); outputs .evaluate()d before the yield",
    "eager-lazy": "both loops eager; outputs yielded unevaluated (may abort at exit)",
    "eager-sync-cpu": "both loops eager, each body under `with ndd.EvalMode.sync_cpu:`",
    "capture-both": "both loops capture=True, each an endless generator",
    "capture-train-eager-val": "training loop capture=True, validation loop eager",
    "capture-own-evalcontext": "both capture=True, each passing its own EvalContext as ctx=",
    "capture-val-fresh-epoch": "training endless capture; each validation a fresh full epoch",
    "capture-close-inner": "both capture=True; the inner capture iterator closed between uses",
    "capture-thread": "both capture=True, each generator stepped in its own thread",
    "capture-tls-release": "both capture=True; private: the capture context cleared before yield",
}
PLANS = {  # (pipeline, steps) in program order
    "phases": [("train", 3), ("val", 2), ("train", 3), ("val", 2), ("train", 4), ("val", 2)],
    "alternate": [("train", 1), ("val", 1)] * 7,  # a validation step right after each step
}


def make_jpegs(root: str, n: int, size: int) -> None:
    import numpy as np
    from PIL import Image

    rs = np.random.default_rng(0)
    for c in range(2):
        os.makedirs(f"{root}/c{c}", exist_ok=True)
        for i in range(n // 2):
            pixels = (rs.random((size, size + 16, 3)) * 255).astype(np.uint8)
            Image.fromarray(pixels).save(f"{root}/c{c}/{i}.jpg")


def device() -> str:
    """Where images are decoded: "cpu", or "gpu" (set by --device, inherited by the children)."""
    return os.environ.get("CAPTURE_FORMS_DEVICE", "cpu")


def train_body(ndd, jpegs, rng):
    images = ndd.decoders.image(jpegs, device=device())
    images = ndd.random_resized_crop(images, size=(48, 48), rng=rng)
    mirror = ndd.random.coin_flip(batch_size=jpegs.batch_size, probability=0.5, rng=rng)
    return ndd.crop_mirror_normalize(images, mirror=mirror, mean=[128.0], std=[64.0])


def val_body(ndd, jpegs):
    images = ndd.decoders.image(jpegs, device=device())
    return ndd.resize(images, size=[48, 48])


class InThread:
    """Steps a generator in a thread of its own, one item per request (nothing runs ahead)."""

    def __init__(self, gen):
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._results: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._serve, args=(gen,), daemon=True).start()

    def _serve(self, gen) -> None:
        while self._requests.get():
            try:
                self._results.put((next(gen), None))
            except BaseException as error:  # handed to the consumer, raised there
                self._results.put((None, error))
                return

    def __iter__(self):
        return self

    def __next__(self):
        self._requests.put(True)
        item, error = self._results.get()
        if error is not None:
            raise error
        return item


def pipeline(ndd, root, kind, form, bs, ctx=None):
    """An endless generator of (images, labels) for the "train" or "val" pipeline."""
    from nvidia.dali.experimental.dynamic import _capture

    capture = form.startswith("capture")
    if form == "capture-train-eager-val" and kind == "val":
        capture = False
    reader = ndd.readers.File(file_root=root, random_shuffle=kind == "train", seed=7)
    rng = ndd.random.RNG(seed=12)
    while True:
        for jpegs, labels in reader.next_epoch(batch_size=bs, capture=capture, ctx=ctx):
            with ndd.EvalMode.sync_cpu if form == "eager-sync-cpu" else ndd.EvalMode.current():
                images = train_body(ndd, jpegs, rng) if kind == "train" else val_body(ndd, jpegs)
            if form == "eager":
                images = images.evaluate()  # no work left running when the program exits
            if form == "capture-tls-release":
                _capture.CaptureContext._tls.current = None  # private API of DALI 2.4
            yield images, labels


def make(ndd, root, kind, form, bs):
    if form == "capture-own-evalcontext":
        return pipeline(ndd, root, kind, form, bs, ctx=ndd.EvalContext())
    if form == "capture-thread":
        return InThread(pipeline(ndd, root, kind, form, bs))
    if form == "capture-close-inner":
        return ClosingLoop(ndd, root, kind, bs)
    return pipeline(ndd, root, kind, form, bs)


class ClosingLoop:
    """Keeps the capture iterator between steps of one phase; close() ends it."""

    def __init__(self, ndd, root, kind, bs):
        self.ndd, self.kind, self.bs = ndd, kind, bs
        self.reader = ndd.readers.File(file_root=root, random_shuffle=kind == "train", seed=7)
        self.rng = ndd.random.RNG(seed=12)
        self.it = None

    def __next__(self):
        ndd = self.ndd
        if self.it is None:
            self.it = iter(self.reader.next_epoch(batch_size=self.bs, capture=True))
        try:
            jpegs, labels = next(self.it)
        except StopIteration:
            self.it = iter(self.reader.next_epoch(batch_size=self.bs, capture=True))
            jpegs, labels = next(self.it)
        if self.kind == "train":
            return train_body(ndd, jpegs, self.rng), labels
        return val_body(ndd, jpegs), labels

    def close(self):
        if self.it is not None:
            self.it.close()
            self.it = None


def as_numpy(ndd, batch):
    import numpy as np

    return np.asarray(ndd.as_tensor(batch).torch().cpu())


def run_plan(ndd, root, form, plan, bs=4):
    """The training program; returns every output of every step as numpy arrays."""
    gens = {kind: make(ndd, root, kind, form, bs) for kind in ("train", "val")}
    seen = []
    for kind, steps in PLANS[plan]:
        if form == "capture-val-fresh-epoch" and kind == "val":
            reader = ndd.readers.File(file_root=root, random_shuffle=False, seed=7)
            for i, (jpegs, labels) in enumerate(reader.next_epoch(batch_size=bs, capture=True)):
                if i < steps:
                    seen.append((kind, as_numpy(ndd, val_body(ndd, jpegs)), as_numpy(ndd, labels)))
            continue
        for _ in range(steps):
            images, labels = next(gens[kind])
            seen.append((kind, as_numpy(ndd, images), as_numpy(ndd, labels)))
        if form == "capture-close-inner":
            gens[kind].close()
    return seen


def one(form: str, plan: str, out: str | None) -> None:
    import nvidia.dali.experimental.dynamic as ndd

    ndd.set_num_threads(2)
    root = tempfile.mkdtemp(prefix="capture-forms-")
    make_jpegs(root, 20, 64)
    try:
        seen = run_plan(ndd, root, form, plan)
    except Exception as error:  # the finding, reported in the table
        print(f"RAISED {type(error).__name__}: {error}".splitlines()[0], flush=True)
        sys.exit(3)
    if out:
        with open(out, "wb") as f:
            pickle.dump(seen, f)
    print(form, "reached the end", flush=True)


def check(forms, runs: int, plan: str) -> None:
    import numpy as np

    tmp = tempfile.mkdtemp(prefix="capture-forms-check-")
    ref = f"{tmp}/eager.pkl"
    subprocess.run([sys.executable, __file__, "eager", "--out", ref, "--plan", plan], check=True)
    with open(ref, "rb") as f:
        expected = pickle.load(f)
    print(f"device {device()}, plan {plan}: {PLANS[plan]}")
    print(f"{'form':26} runs  raised  exit codes  outputs equal to eager")
    for form in forms:
        raised, codes, equal = 0, [], []
        for i in range(runs):
            out = f"{tmp}/{form}-{i}.pkl"
            cmd = [sys.executable, __file__, form, "--out", out, "--plan", plan]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            codes.append(proc.returncode)
            raised += "RAISED" in proc.stdout
            if proc.returncode == 0:
                with open(out, "rb") as f:
                    got = pickle.load(f)
                equal.append(
                    len(got) == len(expected)
                    and all(
                        a[0] == b[0] and np.array_equal(a[1], b[1]) and np.array_equal(a[2], b[2])
                        for a, b in zip(got, expected)
                    )
                )
            elif i == 0:
                print("   ", (proc.stdout + proc.stderr).strip().splitlines()[-1][:150])
        eq = f"{sum(equal)}/{len(equal)}" if equal else "-"
        print(f"{form:26} {runs:4}  {raised:6}  {str(sorted(set(codes))):10}  {eq}", flush=True)


def bench_one(form: str, batches: int, warmup: int, bs: int, root: str) -> tuple:
    """Batches per second of the training pipeline alone, each batch read as a torch tensor,
    and the CPU time of the whole process (all threads) per batch, in ms."""
    import nvidia.dali.experimental.dynamic as ndd
    import torch

    ndd.set_num_threads(2)
    gen = make(ndd, root, "train", form, bs)
    sync = torch.cuda.current_stream().synchronize if device() == "gpu" else (lambda: None)
    for _ in range(warmup):
        images, labels = next(gen)
        ndd.as_tensor(images).torch(), ndd.as_tensor(labels).torch()
        sync()
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(batches):
        images, labels = next(gen)
        ndd.as_tensor(images).torch(), ndd.as_tensor(labels).torch()
        sync()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    return batches / wall, 1000 * cpu / batches


def bench(forms, batches: int, repeat: int, bs: int) -> None:
    root = tempfile.mkdtemp(prefix="capture-forms-bench-")
    make_jpegs(root, 256, 96)
    results = {form: [] for form in forms}
    load = os.getloadavg()[0]
    for _ in range(repeat):  # round-robin, fresh process each, so drift hits every form alike
        for form in forms:
            cmd = [
                sys.executable,
                __file__,
                form,
                "--bench-child",
                "--batches",
                str(batches),
                "--bs",
                str(bs),
                "--root",
                root,
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            lines = proc.stdout.strip().splitlines()
            if proc.returncode != 0 or not lines:
                print(f"{form}: failed: {(proc.stdout + proc.stderr).strip()[-200:]}")
                continue
            results[form].append(tuple(float(x) for x in lines[-1].split()))
    print(
        f"device {device()}, batch {bs} (96x112 JPEGs), {batches} batches after 10 warm-up, "
        f"{repeat} fresh processes per form, load average {load:.1f} -> {os.getloadavg()[0]:.1f}"
    )
    base = statistics.median(r[0] for r in results["eager"]) if results.get("eager") else None
    print(f"{'form':24} {'batches/s':>9} {'min-max':>13} {'vs eager':>8} {'CPU ms/batch':>12}")
    for form, values in results.items():
        if not values:
            continue
        rates = [v[0] for v in values]
        med = statistics.median(rates)
        ratio = f"{med / base:.2f}x" if base else "-"
        cpu = statistics.median(v[1] for v in values)
        print(f"{form:24} {med:9.1f} {min(rates):6.1f}-{max(rates):<6.1f} {ratio:>8} {cpu:12.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("forms", nargs="*")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--bench", action="store_true")
    parser.add_argument("--bench-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    parser.add_argument("--out")
    parser.add_argument("--plan", choices=list(PLANS), default="phases")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bs", type=int, default=16)
    parser.add_argument("--device", choices=["cpu", "gpu"], default=None, help="decoding device")
    args = parser.parse_args()
    if args.device:
        os.environ["CAPTURE_FORMS_DEVICE"] = args.device
    for form in args.forms:
        if form not in FORMS:
            parser.error(f"unknown form {form}; known: {list(FORMS)}")
    if args.bench_child:
        print(*bench_one(args.forms[0], args.batches, 10, args.bs, args.root))
    elif args.check:
        check(args.forms or list(FORMS), args.runs, args.plan)
    elif args.bench:
        default = [
            "eager",
            "eager-lazy",
            "eager-sync-cpu",
            "capture-both",
            "capture-thread",
            "capture-tls-release",
        ]
        bench(args.forms or default, args.batches, args.repeat, args.bs)
    elif len(args.forms) == 1:
        one(args.forms[0], args.plan, args.out)
    else:
        parser.error("give one FORM, or --check / --bench")


if __name__ == "__main__":
    main()
