#!/usr/bin/env bash
# gpu-checks.sh — the GPU checks of memory, out-of-memory and MoE, run on the GPU machine from the unpacked
# bundle that scripts/gpu-bundle.sh made (this script is copied into it), in under 8 minutes:
# environment, `gpu` tests, the two out-of-memory runs (exit 2 before the first step), CPU-vs-GPU
# loss parity, the d12 benchmark, MoE on the GPU (bench/gpu/moe_checks.sh: op tests, EP=1/2/4
# parity, fault diagnoses, grouped vs token bench), attention sanitizers and benches
# (bench/gpu/attention_checks.sh --bundle), PyTorch eager/compile and llm.c beside ours in one
# table, 4 ranks on one GPU with a GPU stall under hangdoctor, the seq-len sweep, memcheck.
#
# THE DEVICE COMMAND (one `run` call, repository root, carry [".gpu/bundle.tgz"], timeout_s 540;
# build the bundle first with scripts/gpu-bundle.sh):
#   tar xzf .gpu/bundle.tgz -C .gpu && bash .gpu/bundle/gpu-checks.sh
# Logs come back in $OUT/gpu-checks-logs.tgz (packed after every step); stdout has one summary
# block per step. On an nvidia-h200, the MoE incident at its size (~110 GB) is a second call:
#   tar xzf .gpu/bundle.tgz -C .gpu && bash .gpu/bundle/gpu-checks.sh --only "env moe-incident"
#
#   bash gpu-checks.sh [--only "step step"] [--dry-run [--check-bundle DIR]] [--print-needs]
#
# Time arithmetic (limits, seconds; each step runs under `timeout` with its limit, and only if it
# can still finish before DEADLINE_S = 470, which leaves 10 s of the 480 for unpacking):
#   env 10 + gpu-tests 60 + oom 15 + parity 20 + bench-d12 35 + moe-tests 20 + moe-parity 25
#   + moe-faults 35 + moe-bench 25 + attention 65 (memcheck 20 + racecheck 25 on the smallest
#   shapes, two benches 10 + 10) + torch 60 + llmc 20 + table 5 + gpu-hang 25 + sweep 30
#   + memcheck 20 = 470. So every step gets its turn on an H100 or an H200 even if each hits its
#   limit; only time outside the limits (the CUDA library search before the first step, the 5 s
#   grace of `timeout -k`) can make the last steps skip themselves, never pass the deadline. The
#   limits are estimates made without a GPU: retune them from the first run's "rc=N in Ns" lines.
#   moe-incident (240: 4 d12 ranks at B=24, grouped 5 steps, token loop 2 steps, skew) is not in
#   that plan: it needs ~110 GB free (an H200; it skips itself on an H100) and 470 + 240 passes a
#   10-minute call, so it is asked for by name (above).
# --dry-run prints the plan and checks that the limits fit the deadline, touching nothing; with
# --check-bundle DIR it also checks that every binary and script the plan names is in DIR (ctest
# runs both). --print-needs lists those files (gpu-bundle.sh packs from it). Is not: a build
# (nothing is compiled on the GPU machine) nor a CI step.
set -u

# Every `gpu` test binary the gpu-tests step runs (cuda_moe_test runs in moe-tests).
GPU_TESTS=(cuda_probe_test gemm_plan_test cuda_ops_test flash_tc_layout_test trainer_mma_layout_test
           cuda_flash_attention_test cuda_fused_layernorm_test cuda_gemm_gelu_test cuda_classifier_test
           cuda_model_test cuda_weight_mirror_test cuda_kernel_ranges_test nccl_comm_test nccl_bootstrap_test)
MOE_NEEDS="moe_checks.sh bin/gpt2-train bin/hangdoctor bin/rankscope bin/moe_expert_loop_bench tests/cuda_moe_test"
MOE_NEEDS+=" data/tiny_shakespeare_train.bin root/usr/bin/mpirun"

# name:limit_s:files of the bundle it needs (@gpu-tests: tests/ of GPU_TESTS):what — in priority
# order (the first ones matter most when time runs short).
STEPS=(
  "env:10::GPU, driver, CUDA/NCCL libraries found, missing shared libraries"
  "gpu-tests:60:@gpu-tests:every gpu test binary but cuda_moe_test (gtest), pass/fail/skip per binary"
  "oom:15:bin/gpt2-train:d12 B16 T4096 naive and flash B64 T4096 must exit 2 before step 1, naming needed and free memory"
  "parity:20:bin/gpt2-train:tiny 20 steps: cpu fp32, cuda fp32, cuda bf16 losses"
  "bench-d12:35:bin/gpt2_gpu_bench:gpt2_gpu_bench d12 B16 T1024 bf16 flash, probe off and on"
  "moe-tests:20:$MOE_NEEDS:cuda_moe_test: every CUDA MoE op against the CPU oracle"
  "moe-parity:25:$MOE_NEEDS:EP=1/2/4 on 4 ranks sharing the GPU, the same 20 losses"
  "moe-faults:35:$MOE_NEEDS:a2a-miscount -> a2a_count_mismatch; stall in moe/experts -> lagging rank"
  "moe-bench:25:$MOE_NEEDS:grouped GEMM chain vs token loop at the incident's hot rank (62,515 rows)"
  "attention:65:attention_checks.sh tests/cuda_flash_attention_test bin/attention_gpu_bench:attention_checks.sh --bundle: memcheck + racecheck (T 1, 64), attention_gpu_bench"
  "torch:60:torch_gpt2.py:bench/gpu/torch_gpt2.py eager and torch.compile, same B and T"
  "llmc:20:data/tiny_shakespeare_train.bin data/tiny_shakespeare_val.bin:llm.c train_gpt2cu d12 B16 T1024 when the bundle has it"
  "table:5:make_speed_table.py:one speed table from bench-d12, torch and llmc"
  "gpu-hang:25:bin/gpt2-train bin/hangdoctor root/usr/bin/mpirun:4 ranks on one GPU (MPI host staging), gpu-stall on rank 2, hangdoctor live"
  "sweep:30:bin/gpt2-train bin/rankscope:d12 B2 seq-len sweep 256..4096, naive and flash, rankscope scaling"
  "memcheck:20:bin/gpt2-train:compute-sanitizer memcheck on 2 tiny steps (NCCL's own probe errors filtered)"
)
# Asked for by name only (--only), never in the default plan: see the arithmetic above.
EXTRA_STEPS=(
  "moe-incident:240:$MOE_NEEDS:the incident at its size (H200: ~110 GB free), grouped and token loops, skew's expert_load"
)
DEADLINE_S=${DEADLINE_S:-470}

dry_run=0
only=""
check_dir=""
print_needs=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=1; shift ;;
    --check-bundle) check_dir="${2:?--check-bundle DIR}"; shift 2 ;;
    --print-needs) print_needs=1; shift ;;
    --only) only="$2"; shift 2 ;;
    -h|--help) sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-checks.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
done

# The steps of this run: the default plan, or the named ones (extras included) in plan order.
plan=()
if [ -z "$only" ]; then
  plan=("${STEPS[@]}")
else
  for s in "${STEPS[@]}" "${EXTRA_STEPS[@]}"; do
    [[ " $only " == *" ${s%%:*} "* ]] && plan+=("$s")
  done
fi

needs_of() {  # the bundle files one plan entry names, one a line
  local needs
  IFS=: read -r _ _ needs _ <<<"$1"
  for n in $needs; do
    if [ "$n" = "@gpu-tests" ]; then printf 'tests/%s\n' "${GPU_TESTS[@]}"; else echo "$n"; fi
  done
}

if [ "$print_needs" = 1 ]; then
  for s in "${STEPS[@]}" "${EXTRA_STEPS[@]}"; do needs_of "$s"; done | sort -u
  exit 0
fi

# Files of the plan missing from bundle DIR, "step: file" a line (executables must be executable).
missing_in_bundle() {
  local dir=$1 s f
  for s in "${plan[@]}"; do
    while read -r f; do
      [ -n "$f" ] || continue
      case "$f" in
        bin/*|tests/*|root/usr/bin/*) [ -x "$dir/$f" ] || echo "${s%%:*}: $f" ;;
        *) [ -f "$dir/$f" ] || echo "${s%%:*}: $f" ;;
      esac
    done < <(needs_of "$s")
  done
}

if [ "$dry_run" = 1 ]; then
  total=0
  for s in "${plan[@]}"; do
    IFS=: read -r name limit _ what <<<"$s"
    printf 'step %-12s limit %3ss  %s\n' "$name" "$limit" "$what"
    total=$((total + limit))
  done
  echo "total of limits: ${total}s, deadline ${DEADLINE_S}s"
  status=0
  if [ "$total" -gt "$DEADLINE_S" ]; then
    echo "gpu-checks: the step limits exceed the deadline" >&2
    status=1
  fi
  if [ -n "$check_dir" ]; then
    missing=$(missing_in_bundle "$check_dir")
    if [ -n "$missing" ]; then
      echo "gpu-checks: missing from the bundle $check_dir:" >&2
      echo "$missing" | sed 's/^/  /' >&2
      status=1
    else
      echo "bundle $check_dir: every file the plan names is there"
    fi
  fi
  exit "$status"
fi

G="$(cd "$(dirname "$0")" && pwd)"   # the unpacked bundle
W=${WORK_DIR:-/tmp/rankscope-gpu-checks}
OUT=${OUT:-$W/out}
mkdir -p "$W/logs" "$OUT"
T0=$(date +%s)
# stdout also goes into the packed logs (the device tool returns only its last 12,000 characters).
exec > >(tee -a "$W/logs/summary.txt") 2>&1
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
  for t in $GPU_TEST_NAMES; do
    echo "## $t"
    timeout 40 "$G/tests/$t" --gtest_brief=1 2>&1 | tail -25
    echo "## $t exit ${PIPESTATUS[0]}"
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
  bash "$G/attention_checks.sh" --bundle "$G/tests" "$B" "$W/logs/attention"
}

# One stage of bench/gpu/moe_checks.sh from the bundle: its bin/ and tests/ stand for a build tree.
moe_stage() {
  BUILD_DIR=$G MOE_NO_BUILD=1 MOE_KEEP_SUMMARY=1 OUT=$W/logs/moe MOE_WORK=$W/moe bash "$G/moe_checks.sh" "$1"
}
moe_tests() { moe_stage tests; }
moe_parity() { moe_stage parity; }
moe_faults() { moe_stage faults; }
moe_bench() { moe_stage bench; }
moe_incident() { moe_stage incident; }

gpu_hang() {
  mpirun -np 4 "$B/gpt2-train" --device cuda --comm mpi --tp 2 --model tiny --steps 40 --run-dir "$W/gpustall" \
    --inject gpu-stall:rank=2,range=forward/block0/attn,step=5,seconds=200 --watchdog-timeout 5 \
    >"$W/logs/gpu-hang-job.log" 2>&1 &
  local pid=$!
  sleep 3
  "$B/hangdoctor" "$W/gpustall" --wait 10 --json "$W/logs/gpu-hang.json" 2>&1 | head -30
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
  "$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)" --tool memcheck --print-limit 50 "$B/gpt2-train" --device cuda --model tiny --steps 2 \
    --run-dir "$W/memcheck" >"$W/logs/memcheck-full.log" 2>&1
  echo "memcheck exit $?"
  grep -c "ncclInitKernelsForDevice" "$W/logs/memcheck-full.log" | sed 's/^/NCCL probe reports (ignored): /'
  awk '/^========= (Invalid|Program hit|Uninitialized|Race)/ {block=$0; keep=1; next}
       /^=========[ \t]*$/ {if (keep && block !~ /ncclInitKernelsForDevice/) print block; keep=0; next}
       keep {block = block "\n" $0}' "$W/logs/memcheck-full.log" | head -40
  tail -3 "$W/logs/memcheck-full.log"
}

declare -A RUN=([env]=env_check [gpu-tests]=gpu_tests [oom]=oom_runs [parity]=parity [bench-d12]=bench_d12
                [moe-tests]=moe_tests [moe-parity]=moe_parity [moe-faults]=moe_faults [moe-bench]=moe_bench
                [moe-incident]=moe_incident [torch]=torch_bench [llmc]=llmc [table]=speed_table
                [attention]=attention [gpu-hang]=gpu_hang [sweep]=sweep [memcheck]=memcheck)
export -f env_check gpu_tests oom_runs parity bench_d12 moe_stage moe_tests moe_parity moe_faults moe_bench \
  moe_incident torch_bench llmc speed_table attention gpu_hang sweep memcheck
GPU_TEST_NAMES="${GPU_TESTS[*]}"
export G W B cuda_dirs GPU_TEST_NAMES

# A bundle missing a file some step needs still runs the other steps; say which up front.
missing=$(missing_in_bundle "$G")
[ -n "$missing" ] && { echo "== bundle incomplete (these steps will fail):"; echo "$missing" | sed 's/^/   /'; }

for s in "${plan[@]}"; do
  IFS=: read -r name limit _ what <<<"$s"
  now=$(date +%s)
  if [ $((now - T0 + limit)) -gt "$DEADLINE_S" ]; then
    echo "== $name skipped: ${limit}s would pass the ${DEADLINE_S}s deadline (at +$((now - T0))s)"
    continue
  fi
  echo "== $name (limit ${limit}s, at +$((now - T0))s): $what"
  timeout -k 5 "$limit" bash -c "${RUN[$name]}" >"$W/logs/$name.log" 2>&1
  rc=$?
  echo "   rc=$rc in $(($(date +%s) - now))s"
  echo "$name rc=$rc seconds=$(($(date +%s) - now)) limit=$limit" >>"$W/logs/steps.txt"
  grep -E '^## |^== attention|MOE-CHECK|PASSED|FAILED|SKIPPED|exit|rror|tokens/s|^\||memory|step (1|20)/' "$W/logs/$name.log" | tail -n 30 | cut -c1-300
  pack
done
echo "== done at +$(($(date +%s) - T0))s; logs in $OUT/gpu-checks-logs.tgz"
pack
