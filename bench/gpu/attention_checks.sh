#!/usr/bin/env bash
# attention_checks.sh — the GPU checks of the attention kernels (flash on tensor cores,
# kernels/flash_attention_tc.cu; the scalar flash kernels; naive), for a GPU session or the GPU
# bundle's runner to call. Runs, each time-boxed, logging to LOG_DIR/attention-*.log:
#   1. the CPU layout test if present, the building blocks on the GPU (flash_tc_layout_test: one
#      tile through the kernels' ldmatrix/mma helpers), then cuda_flash_attention_test (tensor cores
#      vs the scalar kernels and the CPU, T in {1, 64, 100, 200, 1024, 4096}; bf16 naive vs the CPU;
#      fp32 flash vs naive);
#   2. compute-sanitizer memcheck (tensor-core flash at T 1, 64, 100, 200; bf16 naive at T 64, 100),
#      then racecheck (shared memory: the cp.async double buffers) on the same flash shapes: the
#      sanitizers slow kernels 10-100x. The time limits add up to 15 minutes; expect about 5;
#   3. attention_gpu_bench at d12 B=16 T=1024 (the <= 6 ms budget) and B=2 T=4096;
#   4. gpt2_gpu_bench, d12 B=16 T=1024 bf16 flash, probe on: the step and "attention alone".
# Usage: attention_checks.sh [--bundle] TEST_DIR BENCH_DIR [LOG_DIR]
#   TEST_DIR holds cuda_flash_attention_test and flash_tc_layout_test (a build tree: build/tests); BENCH_DIR holds
#   attention_gpu_bench and gpt2_gpu_bench (a build tree: build/bin). Exit status: the number of failed steps.
#   --bundle: the reduced set scripts/gpu-checks.sh runs inside its 8-minute budget. That runner
#   already runs every gpu test binary and the d12 step, so this leaves out 1. and 4. and keeps
#   memcheck (20 s) and racecheck (25 s) on the smallest shapes only (tensor-core flash T 1 and 64,
#   bf16 naive T 64: every code path, the fewest sanitised launches) and both benches with 3 reps
#   (10 s each): 20 + 25 + 10 + 10 = 65 s of limits, the runner's `attention` step.
# Is not: the whole GPU acceptance (the bundle's runner calls this among its steps).
set -u
bundle_mode=0
if [ "${1:-}" = "--bundle" ]; then bundle_mode=1; shift; fi
TEST_DIR=${1:?usage: attention_checks.sh [--bundle] TEST_DIR BENCH_DIR [LOG_DIR]}
BENCH_DIR=${2:?usage: attention_checks.sh [--bundle] TEST_DIR BENCH_DIR [LOG_DIR]}
LOG_DIR=${3:-${OUT:-/tmp}/attention-logs}
mkdir -p "$LOG_DIR"
failed=0
run() {  # name limit_s command...
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  timeout -k 5 "$limit" "$@" >"$LOG_DIR/attention-$name.log" 2>&1
  local rc=$?
  echo "== attention-$name: rc=$rc in $((SECONDS - start))s (log $LOG_DIR/attention-$name.log)"
  grep -E "PASSED|FAILED|SKIPPED|ERROR SUMMARY|ms/step|attention alone|tokens/s|error|skipped" "$LOG_DIR/attention-$name.log" |
    tail -n 12 | cut -c1-240
  [ "$rc" -eq 0 ] || failed=$((failed + 1))
}
FLASH_TEST=$TEST_DIR/cuda_flash_attention_test
SHORT='Shapes/CudaFlashAttentionTensorCores.*/T1_*:Shapes/CudaFlashAttentionTensorCores.*/T64_*:'
SHORT+='Shapes/CudaFlashAttentionTensorCores.*/T100_*:Shapes/CudaFlashAttentionTensorCores.*/T200_*'
NAIVE_SHORT='Shapes/CudaNaiveAttentionBf16.*/T64_*:Shapes/CudaNaiveAttentionBf16.*/T100_*'

# Limits: full run / --bundle (seconds).
if [ "$bundle_mode" = 1 ]; then
  MEMCHECK_S=20 RACECHECK_S=25 BENCH_S=10 REPS=3
  SHORT='Shapes/CudaFlashAttentionTensorCores.*/T1_*:Shapes/CudaFlashAttentionTensorCores.*/T64_*'
  NAIVE_SHORT='Shapes/CudaNaiveAttentionBf16.*/T64_*'
else
  MEMCHECK_S=150 RACECHECK_S=180 BENCH_S=90 REPS=10
  [ -x "$TEST_DIR/trainer_mma_layout_test" ] && run layout-cpu 60 "$TEST_DIR/trainer_mma_layout_test" --gtest_brief=1
  run layout-gpu 60 "$TEST_DIR/flash_tc_layout_test"  # the building blocks first: the first wrong index
  run gpu-tests 180 "$FLASH_TEST" --gtest_brief=1
fi
SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$SANITIZER" ]; then
  run memcheck "$MEMCHECK_S" "$SANITIZER" --tool memcheck --error-exitcode 9 "$FLASH_TEST" \
    --gtest_filter="$SHORT:$NAIVE_SHORT"
  run racecheck "$RACECHECK_S" "$SANITIZER" --tool racecheck --racecheck-report hazard --error-exitcode 9 \
    "$FLASH_TEST" --gtest_filter="$SHORT"
else
  echo "== attention-sanitizers: compute-sanitizer not found (PATH, /usr/local/cuda/bin): not run"
  failed=$((failed + 1))
fi
run bench-d12 "$BENCH_S" "$BENCH_DIR/attention_gpu_bench" --batch 16 --seq 1024 --reps "$REPS"
run bench-t4096 "$BENCH_S" "$BENCH_DIR/attention_gpu_bench" --batch 2 --seq 4096 --reps "$REPS"
if [ "$bundle_mode" = 0 ]; then
  run step-d12 150 "$BENCH_DIR/gpt2_gpu_bench" --model d12 --batch 16 --seq 1024 --precision bf16 \
    --attention flash --probe on --steps 10 --rounds 1
fi
exit "$failed"
