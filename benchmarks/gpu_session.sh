#!/usr/bin/env bash
# One GPU session's runs, one part per device call (each under 10 minutes), from the repository
# root of the GPU machine after DALI is unpacked (see benchmarks/README.md). Results go to $OUT
# (or ./gpu-out) and are committed under benchmarks/results/ with this command line.
#   bash benchmarks/gpu_session.sh programs     # every program, project and loader fixture, old
#                                               # against new, on the GPU; the harness's GPU tests
#   bash benchmarks/gpu_session.sh throughput   # the four workloads, pipeline against migrated
#   bash benchmarks/gpu_session.sh scaled       # numpy and audio with 8x larger samples
#   bash benchmarks/gpu_session.sh capture      # one capture loop at a time; exit codes per form
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
log() { tee -a "$OUT/$1.txt"; }
case "${1:-}" in
programs)
  python3 -m pytest -q -p no:randomly -rfE tests/test_programs.py tests/test_projects.py \
    tests/test_loaders.py tests/test_iterators_plans.py 2>&1 | tail -40 | log programs
  python3 -m pytest -q -p no:randomly -rfE -m gpu tests/test_verify_programs.py \
    tests/test_verify_program.py 2>&1 | tail -20 | log programs
  ;;
throughput)
  python3 benchmarks/pipeline_throughput.py --device gpu --batches 120 --warmup 20 --repeat 2 \
    --samples 1024 --json "$OUT/throughput-x1.json" 2>&1 | log throughput-x1
  ;;
scaled)
  python3 benchmarks/pipeline_throughput.py --device gpu --workloads numpy_volumes \
    audio_spectrogram --batches 100 --warmup 10 --repeat 2 --samples 512 --scale 8 \
    --json "$OUT/throughput-x8.json" 2>&1 | log throughput-x8
  ;;
capture)
  RUNS=3 bash benchmarks/experiments/capture_exit_gpu.sh exit 2>&1 | log capture
  RUNS=3 bash benchmarks/experiments/capture_exit_gpu.sh capture 2>&1 | log capture
  ;;
*)
  echo "usage: $0 programs|throughput|scaled|capture" >&2
  exit 2
  ;;
esac
