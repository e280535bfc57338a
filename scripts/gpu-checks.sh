#!/usr/bin/env bash
# gpu-checks.sh — issue 23's GPU acceptance, run on the GPU machine from the unpacked bundle that
# scripts/gpu-bundle.sh made (this script is copied into it), in under 8 minutes: environment, `gpu`
# tests, the two out-of-memory runs (exit 2 before the first step), CPU-vs-GPU loss parity, the d12
# benchmark, PyTorch eager/compile and llm.c beside it in one table, attention checks
# (bench/gpu/attention_checks.sh when the bundle has it), 4 ranks on one GPU with a GPU stall under
# hangdoctor, the seq-len sweep naive vs flash, compute-sanitizer memcheck.
#
#   bash .gpu/bundle/gpu-checks.sh [--dry-run] [--only "step step"]
#
# Every step runs under `timeout` with its own limit, and only if it can finish before the overall
# deadline (DEADLINE_S, default 470 s); logs go to $OUT/gpu-checks-logs.tgz after every step, so a
# run cut short still brings back what it did. --dry-run prints the plan and checks that the
# limits fit the deadline, touching nothing (ctest runs it). Is not: a build (nothing is compiled
# on the GPU machine) nor a CI step.
set -u

# name:limit_s:what — in priority order (the first ones matter most when time runs short).
STEPS=(
  "env:10:GPU, driver, CUDA/NCCL libraries found, missing shared libraries"
  "gpu-tests:90:every gpu test binary (gtest), pass/fail/skip per binary"
  "oom:20:d12 B16 T4096 naive and flash B64 T4096 must exit 2 before step 1, naming needed and free memory"
  "parity:30:tiny 20 steps: cpu fp32, cuda fp32, cuda bf16 losses"
  "bench-d12:50:gpt2_gpu_bench d12 B16 T1024 bf16 flash, probe off and on"
  "torch:70:bench/gpu/torch_gpt2.py eager and torch.compile, same B and T"
  "llmc:30:llm.c train_gpt2cu d12 B16 T1024 when the bundle has it"
  "table:5:one speed table from bench-d12, torch and llmc"
  "attention:50:bench/gpu/attention_checks.sh when the bundle has it"
  "gpu-hang:40:4 ranks on one GPU (MPI host staging), gpu-stall on rank 2, hangdoctor live"
  "sweep:45:d12 B2 seq-len sweep 256..4096, naive and flash, rankscope scaling"
  "memcheck:30:compute-sanitizer memcheck on 2 tiny steps (NCCL's own probe errors filtered)"
)
DEADLINE_S=${DEADLINE_S:-470}

dry_run=0
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=1; shift ;;
    --only) only="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-checks.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
done

wanted() { [ -z "$only" ] || [[ " $only " == *" $1 "* ]]; }

if [ "$dry_run" = 1 ]; then
  total=0
  for s in "${STEPS[@]}"; do
    IFS=: read -r name limit what <<<"$s"
    wanted "$name" || continue
    printf 'step %-10s limit %3ss  %s\n' "$name" "$limit" "$what"
    total=$((total + limit))
  done
  echo "total of limits: ${total}s, deadline ${DEADLINE_S}s"
  if [ "$total" -gt "$DEADLINE_S" ]; then
    echo "gpu-checks: the step limits exceed the deadline" >&2
    exit 1
  fi
  exit 0
fi

G="$(cd "$(dirname "$0")" && pwd)"   # the unpacked bundle
W=${WORK_DIR:-/tmp/rankscope-gpu-checks}
OUT=${OUT:-$W/out}
mkdir -p "$W/logs" "$OUT"
T0=$(date +%s)
pack() { tar czf "$OUT/gpu-checks-logs.tgz" -C "$W" logs 2>/dev/null; }

# --- environment: the machine's CUDA libraries, the bundle's own Debian ones, OpenMPI relocated
cuda_dirs=""
for n in libnccl.so.2 libcublasLt.so.13 libcublas.so.13 libcupti.so.13 libcudart.so.13 libnvrtc.so.13; do
  p=$(find /usr/local/cuda*/ /opt /usr/lib /usr/local/lib -name "$n" 2>/dev/null | head -1)
  [ -n "$p" ] && cuda_dirs="$cuda_dirs:$(dirname "$p")"
done
for l in "$G"/deps/*; do  # the machine's own copy wins where it has one
  [ -e "$l" ] && ldconfig -p | grep -q " $(basename "$l") " && rm -f "$l"
done
R=$G/root/usr
export OPAL_PREFIX=$R PATH=$R/bin:$PATH
export LD_LIBRARY_PATH=$G/deps:$R/lib/x86_64-linux-gnu:$R/lib/x86_64-linux-gnu/openmpi/lib:$R/lib/x86_64-linux-gnu/pmix2/lib$cuda_dirs:${LD_LIBRARY_PATH:-}
export RANKSCOPE_DATA_DIR=$G/data
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export PMIX_MCA_gds=hash OMPI_MCA_btl_vader_single_copy_mechanism=none
B=$G/bin

env_check() {
  nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv,noheader
  echo "bundle commit: $(cat "$G/COMMIT" 2>/dev/null)"
  echo "cuda library dirs: $cuda_dirs"
  for f in "$B"/* "$G"/tests/* "$G"/lib/*.so; do ldd "$f" | grep "not found" | sed "s|^|$(basename "$f"): |"; done | sort -u
  python3 -c 'import torch; print("torch", torch.__version__)' 2>&1 | tail -1
}

gpu_tests() {
  for t in "$G"/tests/*; do
    echo "## $(basename "$t")"
    timeout 60 "$t" --gtest_brief=1 2>&1 | tail -25
    echo "## $(basename "$t") exit $?"
  done
}

# The issue's two crashes: both must stop before step 1 with exit 2, naming needed and free memory.
oom_runs() {
  for args in "--batch 16 --seq-len 4096 --attention naive" "--batch 64 --seq-len 4096 --attention flash"; do
    echo "## gpt2-train --device cuda --model d12 $args"
    # shellcheck disable=SC2086
    "$B/gpt2-train" --device cuda --model d12 $args --steps 2 --run-dir "$W/oom" 2>&1 | tail -6
    echo "## exit ${PIPESTATUS[0]} (want 2)"
  done
}

parity() {
  for cfg in "cpu fp32" "cuda fp32" "cuda bf16"; do
    set -- $cfg
    echo "## $1 $2"
    "$B/gpt2-train" --device "$1" --precision "$2" --model tiny --steps 20 --run-dir "$W/tiny-$1-$2" 2>&1 |
      grep -E "device|memory:|^step (1|2|10|20)/|rror" | head -8
  done
}

bench_d12() {
  "$B/gpt2_gpu_bench" --model d12 --seq 1024 --batch 16 --precision bf16 --attention flash --probe both \
    --steps 20 --warmup 3 --rounds 2
}

torch_bench() {
  LD_LIBRARY_PATH=${cuda_dirs#:} python3 -u "$G/torch_gpt2.py" --batch 16 --seq 1024 --steps 20 --warmup 5
}

llmc() {
  [ -x "$B/train_gpt2cu" ] || { echo "llmc: not in the bundle (put llm.c in .llmc/ and build train_gpt2cu)"; return 0; }
  cd "$G/data" && "$B/train_gpt2cu" -e d12 -i tiny_shakespeare_train.bin -j tiny_shakespeare_val.bin -b 16 -t 1024 \
    -x 40 -v 1000000 -m 1 -s 0 -n 0 -h 0 -y 0 -r 0
}

speed_table() {
  python3 "$G/make_speed_table.py" "$W/logs/bench-d12.log" "$W/logs/torch.log" "$W/logs/llmc.log"
}

attention() {
  [ -f "$G/attention_checks.sh" ] || { echo "attention: no attention_checks.sh in the bundle"; return 0; }
  BUNDLE="$G" bash "$G/attention_checks.sh"
}

gpu_hang() {
  mpirun -np 4 "$B/gpt2-train" --device cuda --comm mpi --tp 2 --model tiny --steps 40 --run-dir "$W/gpustall" \
    --inject gpu-stall:rank=2,range=forward/block0/attn,step=5,seconds=200 --watchdog-timeout 5 \
    >"$W/logs/gpu-hang-job.log" 2>&1 &
  local pid=$!
  sleep 3
  "$B/hangdoctor" "$W/gpustall" --wait 25 --json "$W/logs/gpu-hang.json" 2>&1 | head -30
  kill "$pid" 2>/dev/null
  sleep 1
  kill -9 "$pid" 2>/dev/null
  tail -5 "$W/logs/gpu-hang-job.log"
}

sweep() {
  for a in naive flash; do
    "$B/gpt2-train" --device cuda --model d12 --batch 2 --steps 3 --quiet --data synthetic:zipf --attention "$a" \
      --sweep-seq-len 256,512,1024,2048,4096 --run-dir "$W/sweep-$a" 2>&1 | tail -3
    "$B/rankscope" scaling "$W/sweep-$a" --json "$W/logs/scaling-$a.json" 2>&1 | head -14
  done
}

# NCCL probes its kernel images at communicator creation and compute-sanitizer reports each probe
# as an API error (24 on the H100); only errors outside ncclInitKernelsForDevice count.
memcheck() {
  compute-sanitizer --tool memcheck --print-limit 50 "$B/gpt2-train" --device cuda --model tiny --steps 2 \
    --run-dir "$W/memcheck" >"$W/logs/memcheck-full.log" 2>&1
  echo "memcheck exit $?"
  grep -c "ncclInitKernelsForDevice" "$W/logs/memcheck-full.log" | sed 's/^/NCCL probe reports (ignored): /'
  awk '/^========= (Invalid|Program hit|Uninitialized|Race)/ {block=$0; keep=1; next}
       /^=========[ \t]*$/ {if (keep && block !~ /ncclInitKernelsForDevice/) print block; keep=0; next}
       keep {block = block "\n" $0}' "$W/logs/memcheck-full.log" | head -40
  tail -3 "$W/logs/memcheck-full.log"
}

declare -A RUN=([env]=env_check [gpu-tests]=gpu_tests [oom]=oom_runs [parity]=parity [bench-d12]=bench_d12
                [torch]=torch_bench [llmc]=llmc [table]=speed_table [attention]=attention [gpu-hang]=gpu_hang
                [sweep]=sweep [memcheck]=memcheck)
export -f env_check gpu_tests oom_runs parity bench_d12 torch_bench llmc speed_table attention gpu_hang sweep memcheck
export G W B cuda_dirs

for s in "${STEPS[@]}"; do
  IFS=: read -r name limit what <<<"$s"
  wanted "$name" || continue
  now=$(date +%s)
  if [ $((now - T0 + limit)) -gt "$DEADLINE_S" ]; then
    echo "== $name skipped: ${limit}s would pass the ${DEADLINE_S}s deadline (at +$((now - T0))s)"
    continue
  fi
  echo "== $name (limit ${limit}s, at +$((now - T0))s): $what"
  timeout -k 5 "$limit" bash -c "${RUN[$name]}" >"$W/logs/$name.log" 2>&1
  rc=$?
  echo "   rc=$rc in $(($(date +%s) - now))s"
  grep -E '^## |PASSED|FAILED|SKIPPED|exit|rror|tokens/s|^\||memory|step (1|20)/' "$W/logs/$name.log" | tail -n 30 | cut -c1-300
  pack
done
echo "== done at +$(($(date +%s) - T0))s; logs in $OUT/gpu-checks-logs.tgz"
