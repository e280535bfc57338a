#!/usr/bin/env bash
# gpu-acceptance.sh — the trainer's GPU checks as three jobs that each fit one device-machine command
# (10 minutes): run them in order on a GPU machine, from the repository root, with $OUT set (the
# device tool brings $OUT back). Everything they print is also in $OUT/<stage>.log.
#
#   scripts/gpu-acceptance.sh build-test   configure + build (Release, CUDA on), ctest -L gpu, then
#                                          compute-sanitizer memcheck/racecheck on the kernel tests
#   scripts/gpu-acceptance.sh bench        gpt2_gpu_bench d12 T=1024 (largest batch, probe off and on),
#                                          then bench/gpu/compare_with_llmc.sh when .llmc/ holds llm.c
#   scripts/gpu-acceptance.sh sweep        gpt2-train --sweep-seq-len 256..4096 with naive and with flash
#                                          attention, and `rankscope scaling` on each sweep
#
# On the device machine (no Debian dev packages there) first: bash .deps/unpack.sh and the exports of
# the developers' guide; name .deps (and .llmc for the llm.c comparison) in the run tool's carry.
# Is not: a CI step (CI has no GPU) nor a test (the gpu tests are in tests/gpu; this runs them).
set -euo pipefail

stage="${1:-}"
out="${OUT:-$(mktemp -d)}"
build="${BUILD_DIR:-build-gpu}"
jobs="$(nproc)"

usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; }
case "$stage" in
  -h|--help) usage; exit 0 ;;
  build-test|bench|sweep) ;;
  *) echo "gpu-acceptance.sh: name a stage: build-test, bench or sweep (--help)" >&2; exit 2 ;;
esac
mkdir -p "$out"
exec > >(tee "$out/$stage.log") 2>&1
echo "== $stage on $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || echo 'no nvidia-smi') at $(date -u +%FT%TZ)"

configure_and_build() {
  if [ ! -f "$build/build.ninja" ]; then
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRANKSCOPE_WITH_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 >"$out/configure.txt" 2>&1 || { tail -40 "$out/configure.txt"; exit 1; }
  fi
  cmake --build "$build" -j"$jobs" 2>&1 | tail -5
}

case "$stage" in
  build-test)
    configure_and_build
    ctest --test-dir "$build" -L gpu --output-on-failure -j1 2>&1 | tee "$out/ctest-gpu.txt" | tail -40
    grep -c "Skipped" "$out/ctest-gpu.txt" >/dev/null && grep "Skipped" "$out/ctest-gpu.txt" | head -5 || true
    sanitize() {  # tool, test binary, gtest filter
      echo "-- compute-sanitizer --tool $1 $2 ${3:-}"
      compute-sanitizer --tool "$1" --error-exitcode 9 "$build/tests/$2" ${3:+--gtest_filter="$3"} 2>&1 | tail -4 || echo "!! $1 $2 failed"
    }
    for t in cuda_flash_attention_test cuda_ops_test; do sanitize memcheck "$t" '*T64*:*T100*:*Small*:*Tiny*:*Fp32*'; done
    for t in cuda_fused_layernorm_test cuda_gemm_gelu_test cuda_classifier_test; do
      [ -x "$build/tests/$t" ] && sanitize memcheck "$t" && sanitize racecheck "$t"
    done
    sanitize racecheck cuda_flash_attention_test '*T100*:*T1_*'
    ;;
  bench)
    configure_and_build
    for attention in flash naive; do
      "$build/bin/gpt2_gpu_bench" --model d12 --seq 1024 --precision bf16 --attention "$attention" --probe both \
        --steps 20 --rounds 2 | tee "$out/bench-$attention.txt"
    done
    if [ -d .llmc ]; then
      bash bench/gpu/compare_with_llmc.sh --build "$build" --batch auto 2>&1 | tee "$out/llmc.txt" || echo "!! llm.c comparison failed"
    else
      echo "no .llmc/: the llm.c comparison is skipped (see bench/gpu/compare_with_llmc.sh --help)"
    fi
    ;;
  sweep)
    configure_and_build
    for attention in naive flash; do
      dir="$(mktemp -d)/sweep-$attention"
      "$build/bin/gpt2-train" --device cuda --model d12 --batch 2 --steps 6 --quiet --data synthetic:zipf \
        --attention "$attention" --sweep-seq-len 256,512,1024,2048,4096 --run-dir "$dir" 2>&1 | tail -8 || true
      "$build/bin/rankscope" scaling "$dir" --json "$out/scaling-$attention.json" | tee "$out/scaling-$attention.txt"
    done
    ;;
esac
echo "== $stage done; logs in $out"
