#!/usr/bin/env bash
# The capture-mode and exit-code experiments on the GPU machine (DALI 2.4.0, torch, pillow).
# Run from the repository root, one part per call (each part stays under 10 minutes):
#   bash benchmarks/experiments/capture_exit_gpu.sh exit      # exit codes per form, 5 runs each
#   bash benchmarks/experiments/capture_exit_gpu.sh capture   # two pipelines: raised? equal?
#   bash benchmarks/experiments/capture_exit_gpu.sh bench     # RN50 training: capture forms
#   bash benchmarks/experiments/capture_exit_gpu.sh programs  # the multi-pipeline fixtures, whole
# RUNS=N changes the number of runs. Output: tables on stdout (also under $OUT when set).
set -u
RUNS=${RUNS:-5}
EXP=benchmarks/experiments
out() { if [ -n "${OUT:-}" ]; then tee -a "$OUT/capture-exit-gpu-$1.txt"; else cat; fi; }
case "${1:-}" in
exit)
  python $EXP/exit_forms.py --table --runs "$RUNS" --device gpu --shape interleaved \
    none consume evaluate-in-generator sync-cpu-body close del-gc atexit-evaluate-last 2>&1 | out exit
  ;;
capture)
  for plan in phases alternate; do
    python $EXP/capture_forms.py --check --runs "$RUNS" --device gpu --plan $plan \
      eager capture-both capture-train-eager-val capture-thread 2>&1 | out capture
  done
  ;;
bench)
  python benchmarks/pipeline_throughput.py --device gpu --workloads rn50_train --batches 120 \
    --warmup 20 --repeat 3 --samples 1024 --extra $EXP/rn50_train_capture.py \
    $EXP/rn50_train_capture_thread.py $EXP/rn50_train_eager_evaluate.py $EXP/rn50_train_eager.py \
    2>&1 | out bench
  python $EXP/capture_forms.py --bench --device gpu --repeat 3 --batches 300 \
    eager eager-lazy capture-both capture-thread 2>&1 | out bench
  ;;
programs)
  python -m pytest -q -rA tests/test_verify_program.py tests/test_programs.py tests/test_projects.py \
    -k "x_train or y_three or z_gpu or train_val or several or capture_loops" 2>&1 | out programs
  python -m pytest -q -rA -m gpu tests/test_verify_programs.py 2>&1 | out programs
  ;;
*)
  echo "usage: $0 exit|capture|bench|programs" >&2; exit 2 ;;
esac
