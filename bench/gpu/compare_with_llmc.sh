#!/usr/bin/env bash
# compare_with_llmc.sh — rankscope's GPU trainer (bench/gpu/gpt2_gpu_bench) against llm.c's
# train_gpt2.cu on the same GPU, the same model (d12), batch B and sequence length T, on the same
# tokens (the shipped tinyshakespeare, tokenized by our gpt2-tokenize). Prints one table: our
# tokens/s with the probe off and on, llm.c's, and the ratios ours/llm.c.
#
# llm.c is NOT part of this project and nothing of it is committed: the person running this fills
# the git-ignored folder .llmc/ (or --llmc DIR) with llm.c's public source beforehand. The script
# copies that source to a temporary directory and builds train_gpt2cu there; it never writes into
# the repository. Raw logs go to $OUT when set (the GPU machine's run tool brings $OUT back), else
# to a temporary directory; the script prints where.
#
# Is not: a test of either trainer's correctness (losses are logged, not compared), nor a
# multi-GPU comparison (llm.c is built without MPI and NCCL).
#
# Facts about llm.c used here (read from its source, karpathy/llm.c, Makefile and train_gpt2.cu):
# - `make train_gpt2cu` with USE_CUDNN=0 (its default: attention by its own kernels; USE_CUDNN=1
#   needs NVIDIA's cudnn-frontend headers and libcudnn), NO_MULTI_GPU=1 (no NCCL), NO_USE_MPI=1,
#   PRECISION=BF16 (bf16 activations and weights, fp32 master weights). Its Makefile does not detect
#   the GPU's compute capability by itself (its nvidia-smi query is not run through $(shell)), so
#   GPU_COMPUTE_CAPABILITY=XY is passed explicitly. It links -lnvidia-ml.
# - `-e d12` builds GPT-2 124M from random weights (no checkpoint); -i/-j train/val shard patterns
#   (llm.c's token shard format, which gpt2-tokenize writes); -b B, -t T, -x steps; -v val every,
#   -m val batches, -s 0 no sampling, -n 0 no checkpoints, -h 0 no HellaSwag; -r 0 no recompute,
#   -c weight decay, -l learning rate (its GPT-2 124M recipe: -r 0 -c 0.1 -l 0.0006).
# - each step prints, timed by CUDA events around forward, backward, grad norm and AdamW:
#   "step %4d/%d | loss %7.6f (%+.2fz)| norm %6.4f (%+.2fz)| lr %.2e | %.2f ms | %.1f%% bf16 MFU | %.0f tok/s"
#   where tok/s is a bias-corrected moving average; we use the per-step ms instead.
set -euo pipefail

readonly PROG=compare_with_llmc
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
readonly SCRIPT_DIR REPO_ROOT

usage() {
  cat <<'EOF'
usage: bench/gpu/compare_with_llmc.sh [options]
       bench/gpu/compare_with_llmc.sh --self-test

Measures our GPU trainer (gpt2_gpu_bench, probe off and on) and llm.c's train_gpt2cu on this GPU,
same model, B, T and data, and prints tokens/s, MFU and the ratios ours/llm.c.

Options:
  --llmc DIR            llm.c source (a copy of github.com/karpathy/llm.c; default: .llmc in the
                        repository, which .gitignore keeps out of git)
  --build DIR           our CMake build directory with bin/gpt2_gpu_bench and bin/gpt2-tokenize
                        (default: build in the repository)
  --model dN            GPT-2 depth for both sides (default d12)
  --seq T               sequence length (default 1024)
  --batch B|auto        batch size for both sides (default 16). 16 sequences of 1024 tokens fit
                        both trainers on an 80 GB H100 (llm.c's own GPT-2 124M recipe runs 64 per
                        80 GB GPU), and the ratio needs the same B on both sides, so the default
                        is a B known to run rather than a search. `auto` asks gpt2_gpu_bench for
                        the largest batch ours fits (its --batch 0) and uses it for both.
  --steps N             timed steps: llm.c runs N steps, of which the first --skip are dropped;
                        ours runs N steps per round and probe mode (default 50)
  --skip K              llm.c's first K steps are warm-up, not counted (default 5; must be < N)
  --warmup W            our untimed warm-up steps (default 3)
  --rounds R            our interleaved rounds of probe off / probe on (default 2)
  --arch XY             compute capability for llm.c's build, e.g. 90 (default: asked of
                        nvidia-smi, else of PyTorch)
  --cudnn-frontend DIR  cudnn-frontend's include directory: build llm.c with USE_CUDNN=1 (cuDNN
                        flash attention). Default: DIR/cudnn-frontend/include under --llmc when it
                        exists, else llm.c's default attention path. cudnn.h and libcudnn are
                        looked up in CUDNN_HOME, the CUDA toolkit, /usr, and PyTorch's
                        nvidia.cudnn package; if that build fails, the default path is used and
                        the table says so.
  --no-cudnn            llm.c's default attention path even when cudnn-frontend is there
  --bench-arg ARG       one extra argument for gpt2_gpu_bench (repeatable), e.g.
                        --bench-arg --attention --bench-arg flash
  --llmc-arg ARG        one extra argument for train_gpt2cu (repeatable; later flags win)
  --build-only          tokenize and build llm.c, then stop (no GPU needed; checks the toolchain)
  --self-test           check the log parsers on sample lines in both programs' formats; exit
  -h, --help            this text

Logs (build, both runs, the table) go to $OUT when set, else to a new temporary directory.
Exit status: 0 done, 1 a step failed (the message names the log), 2 bad arguments or setup.
EOF
}

die() {  # die EXIT_CODE MESSAGE [HINT]
  echo "$PROG: error: $2" >&2
  if [[ $# -ge 3 ]]; then echo "$PROG: hint: $3" >&2; fi
  exit "$1"
}

log() { echo "$PROG: $*" >&2; }

# ---------------------------------------------------------------------------------------------
# Parsers. Pure functions of a log file, so --self-test can feed them sample lines.

# parse_llmc_log FILE SKIP B T -> "steps=N ms=MEAN_MS tok_s=TOKENS_PER_S mfu=MEAN_MFU_PERCENT"
# Counts step lines whose step number (llm.c prints step+1, from 1) is > SKIP. tokens/s is
# B*T*steps over the summed step times, so slow steps weigh as they do in wall time.
# Fails (status 1, a message on stderr) when no step after SKIP was printed.
parse_llmc_log() {
  local file=$1 skip=$2 batch=$3 seq=$4
  awk -v skip="$skip" -v B="$batch" -v T="$seq" '
    # "step   12/50 | loss ... | lr 6.00e-04 | 15.23 ms | 47.1% bf16 MFU | 1075000 tok/s"
    /^step +[0-9]+\/[0-9]+ \|/ {
      split($2, frac, "/"); step = frac[1] + 0
      if (step <= skip) next
      n_fields = split($0, f, "|"); ms = ""; mfu = ""
      for (i = 1; i <= n_fields; i++) {
        if (f[i] ~ /^ *[-0-9.]+ ms *$/) { split(f[i], w, " "); ms = w[1] + 0 }
        else if (f[i] ~ /% [a-z0-9]+ MFU/) { split(f[i], w, "%"); mfu = w[1] + 0 }
      }
      if (ms == "" || ms <= 0) { bad = bad " " step; next }
      n++; sum_ms += ms
      if (mfu != "") { n_mfu++; sum_mfu += mfu }
    }
    END {
      if (bad != "") { printf "llm.c step lines without a time (steps%s)\n", bad > "/dev/stderr"; exit 1 }
      if (n == 0) { printf "no llm.c step line after step %d\n", skip > "/dev/stderr"; exit 1 }
      printf "steps=%d ms=%.2f tok_s=%.0f mfu=%s\n", n, sum_ms / n, B * T * n / (sum_ms / 1000.0),
             n_mfu ? sprintf("%.1f", sum_mfu / n_mfu) : "n/a"
    }' "$file"
}

# parse_llmc_memory FILE -> "X MiB / Y MiB" from "device memory usage: X MiB / Y MiB", or "n/a".
parse_llmc_memory() {
  local line
  line=$(grep -m1 '^device memory usage: ' "$1" || true)
  if [[ -n $line ]]; then echo "${line#device memory usage: }"; else echo "n/a"; fi
}

# parse_ours_log FILE MODE(off|on) -> "tok_s=X ms=Y mfu=Z" from gpt2_gpu_bench's line
#   "  probe off:    1234567 tokens/s    13.27 ms/step  MFU 47.12%"
# mfu is "n/a" when the bench did not know the peak. Fails when the line is missing.
parse_ours_log() {
  local file=$1 mode=$2
  awk -v mode="$mode" '
    $0 ~ "^ *probe " mode " *:" && /tokens\/s/ {
      sub(/^[^:]*:/, ""); tok = ""; ms = ""; mfu = "n/a"
      for (i = 1; i <= NF; i++) {
        if ($i == "tokens/s" && i > 1) tok = $(i - 1)
        else if ($i == "ms/step" && i > 1) ms = $(i - 1)
        else if ($i == "MFU" && i < NF && $(i + 1) ~ /^[0-9.]+%$/) { mfu = $(i + 1); sub(/%$/, "", mfu) }
      }
      if (tok ~ /^[0-9.]+$/ && tok > 0) { printf "tok_s=%s ms=%s mfu=%s\n", tok, ms, mfu; found = 1; exit }
    }
    END { if (!found) { printf "no \"probe %s:\" tokens/s line in gpt2_gpu_bench output\n", mode > "/dev/stderr"; exit 1 } }
  ' "$file"
}

# parse_ours_batch FILE -> the B of gpt2_gpu_bench's header line "... | d12 T=1024 B=24 precision=bf16 | ...".
parse_ours_batch() {
  awk '/^gpt2_gpu_bench: / { for (i = 1; i <= NF; i++) if ($i ~ /^B=[0-9]+$/) { print substr($i, 3); found = 1; exit } }
       END { if (!found) { print "no B= in gpt2_gpu_bench header line" > "/dev/stderr"; exit 1 } }' "$1"
}

# field KEY "k1=v1 k2=v2" -> v of KEY
field() {
  local kv
  for kv in $2; do
    if [[ ${kv%%=*} == "$1" ]]; then echo "${kv#*=}"; return 0; fi
  done
  return 1
}

# ratio A B -> A/B with 3 decimals
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else printf "n/a" }'; }

# ---------------------------------------------------------------------------------------------
# --self-test: the parsers on lines written in each program's printf format, including the ways
# a log goes wrong. Fails loudly on the first mismatch.

self_test() {
  local dir failures=0
  dir=$(mktemp -d "${TMPDIR:-/tmp}/$PROG.selftest.XXXXXX")
  expect() {  # expect NAME GOT WANT
    if [[ "$2" != "$3" ]]; then echo "$PROG self-test FAILED: $1: got '$2', want '$3'" >&2; failures=$((failures + 1)); fi
  }

  # llm.c: step 1 (warm-up) and 2 skipped with SKIP=2; steps 3-5 at 10, 20 and 30 ms -> mean 20 ms,
  # B*T*3 = 3*2*1024 tokens in 0.06 s = 102400 tok/s; MFU mean (40.0+41.0+45.5)/3 = 42.2.
  cat >"$dir/llmc.log" <<'EOF'
+-----------------------+----------------------------------------------------+
| micro batch size B    | 2                                                  |
+-----------------------+----------------------------------------------------+
device memory usage: 5123 MiB / 81559 MiB
val loss 11.009410
step    1/5 | loss 11.011234 (+nanz)| norm 15.2345 (+nanz)| lr 6.00e-04 | 950.00 ms | 1.0% bf16 MFU | 2156 tok/s
step    2/5 | loss 10.500000 (+0.00z)| norm 8.1234 (+0.00z)| lr 6.00e-04 | 11.00 ms | 38.0% bf16 MFU | 186182 tok/s
step    3/5 | loss 9.900000 (-0.71z)| norm 5.0000 (-0.71z)| lr 6.00e-04 | 10.00 ms | 40.0% bf16 MFU | 190000 tok/s
step    4/5 | loss 9.100000 (-1.02z)| norm 3.2000 (-1.02z)| lr 6.00e-04 | 20.00 ms | 41.0% bf16 MFU | 150000 tok/s
step    5/5 | loss 8.700000 (-1.10z)| norm 2.9000 (-1.10z)| lr 6.00e-04 | 30.00 ms | 45.5% bf16 MFU | 120000 tok/s
val loss 8.650000
total average iteration time: 17.750000 ms
EOF
  local got
  got=$(parse_llmc_log "$dir/llmc.log" 2 2 1024) || got="FAILED"
  expect "llm.c steps after warm-up" "$got" "steps=3 ms=20.00 tok_s=102400 mfu=42.2"
  got=$(parse_llmc_log "$dir/llmc.log" 0 2 1024) || got="FAILED"
  expect "llm.c no skip" "$(field steps "$got")" "5"
  expect "llm.c memory" "$(parse_llmc_memory "$dir/llmc.log")" "5123 MiB / 81559 MiB"
  # An unknown GPU: llm.c prints MFU -1 as "-100.0%"; still a step line with a time.
  printf '%s\n' 'step    1/2 | loss 11.0 (+nanz)| norm 1.0 (+nanz)| lr 3.00e-04 | 40.00 ms | -100.0% bf16 MFU | 1 tok/s' \
                'step    2/2 | loss 10.0 (+0.00z)| norm 1.0 (+0.00z)| lr 3.00e-04 | 40.00 ms | -100.0% bf16 MFU | 1 tok/s' >"$dir/unknown_gpu.log"
  got=$(parse_llmc_log "$dir/unknown_gpu.log" 1 4 1024) || got="FAILED"
  expect "llm.c unknown GPU" "$got" "steps=1 ms=40.00 tok_s=102400 mfu=-100.0"
  # Every step skipped, a log cut off before training, a garbled time: each must fail.
  if parse_llmc_log "$dir/llmc.log" 5 2 1024 >/dev/null 2>&1; then expect "llm.c all skipped fails" "passed" "failed"; fi
  head -5 "$dir/llmc.log" >"$dir/cut.log"
  if parse_llmc_log "$dir/cut.log" 0 2 1024 >/dev/null 2>&1; then expect "llm.c no steps fails" "passed" "failed"; fi
  sed 's/| 20.00 ms |/| ms |/' "$dir/llmc.log" >"$dir/garbled.log"
  if parse_llmc_log "$dir/garbled.log" 2 2 1024 >/dev/null 2>&1; then expect "llm.c garbled time fails" "passed" "failed"; fi
  printf 'no memory line\n' >"$dir/nomem.log"
  expect "llm.c memory absent" "$(parse_llmc_memory "$dir/nomem.log")" "n/a"

  # Ours: the lines gpt2_gpu_bench prints (printf "  probe %-3s: %10.0f tokens/s  %7.2f ms/step  MFU %s").
  cat >"$dir/ours.log" <<'EOF'
gpt2_gpu_bench: device 0: NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB) | d12 T=1024 B=24 precision=bf16 | 124.5M parameters
  probe off:     912345 tokens/s    26.94 ms/step  MFU 42.87%
  probe on :     905000 tokens/s    27.16 ms/step  MFU 42.52%
  probe overhead: +0.81% tokens/s (budget: <= 1%)
  peak memory: 30.12 GiB allocated by the model (params, grads, moments, activations) + 2.00 GiB backend scratch; device in use 33.50 GiB (incl. context and cuBLASLt workspace)
EOF
  got=$(parse_ours_log "$dir/ours.log" off) || got="FAILED"
  expect "ours probe off" "$got" "tok_s=912345 ms=26.94 mfu=42.87"
  got=$(parse_ours_log "$dir/ours.log" on) || got="FAILED"
  expect "ours probe on" "$got" "tok_s=905000 ms=27.16 mfu=42.52"
  got=$(parse_ours_batch "$dir/ours.log") || got="FAILED"
  expect "ours batch" "$got" "24"
  printf '%s\n' '  probe off:     100000 tokens/s    10.00 ms/step  MFU n/a (unknown peak; pass --peak-tflops)' >"$dir/nopeak.log"
  got=$(parse_ours_log "$dir/nopeak.log" off) || got="FAILED"
  expect "ours unknown peak" "$got" "tok_s=100000 ms=10.00 mfu=n/a"
  if parse_ours_log "$dir/nopeak.log" on >/dev/null 2>&1; then expect "ours missing probe-on line fails" "passed" "failed"; fi
  printf '%s\n' '  probe off:       -nan tokens/s      nan ms/step  MFU n/a' >"$dir/nan.log"
  if parse_ours_log "$dir/nan.log" off >/dev/null 2>&1; then expect "ours nan tokens/s fails" "passed" "failed"; fi
  printf 'gpt2_gpu_bench: skipped: no CUDA device\n' >"$dir/skipped.log"
  if parse_ours_log "$dir/skipped.log" off >/dev/null 2>&1; then expect "ours skipped fails" "passed" "failed"; fi
  if parse_ours_batch "$dir/skipped.log" >/dev/null 2>&1; then expect "ours skipped has no batch" "passed" "failed"; fi

  expect "ratio" "$(ratio 905000 1000000)" "0.905"
  expect "ratio by zero" "$(ratio 1 0)" "n/a"
  expect "field" "$(field tok_s "steps=3 ms=20.00 tok_s=102400 mfu=42.2")" "102400"

  rm -rf "$dir"
  if ((failures)); then echo "$PROG self-test: $failures failure(s)" >&2; return 1; fi
  echo "$PROG self-test: parsers OK"
}

# ---------------------------------------------------------------------------------------------
# Build helpers.

# The GPU's compute capability as digits ("90"), from nvidia-smi or PyTorch; empty when unknown.
detect_arch() {
  local cc=""
  if command -v nvidia-smi >/dev/null 2>&1; then
    cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .') || cc=""
  fi
  if [[ -z $cc ]] && command -v python3 >/dev/null 2>&1; then
    cc=$(python3 -c 'import torch; m, n = torch.cuda.get_device_capability(0); print(f"{m}{n}")' 2>/dev/null) || cc=""
  fi
  [[ $cc =~ ^[0-9]+$ ]] && echo "$cc" || true
}

# Makes "-l$1" resolvable by the linker: when the compiler cannot find lib$1.so, links lib$1.so
# (from any of the candidate files given, first that exists) into LINK_DIR, which is on
# LIBRARY_PATH for the build. Returns 1 when no candidate exists.
make_linkable() {
  local name=$1; shift
  local found
  found=$(g++ -print-file-name="lib$name.so" 2>/dev/null || true)
  if [[ $found == /* && -e $found ]]; then return 0; fi
  local candidate
  for candidate in "$@"; do
    if [[ -n $candidate && -e $candidate ]]; then
      ln -sf "$candidate" "$LINK_DIR/lib$name.so"
      return 0
    fi
  done
  return 1
}

# The first path that `ldconfig -p` lists for a library file name, empty when none.
ldconfig_path() {
  local ldconfig
  ldconfig=$(command -v ldconfig || echo /sbin/ldconfig)
  "$ldconfig" -p 2>/dev/null | awk -v n="$1" '$1 == n { print $NF; exit }' || true
}

# Finds cudnn.h's directory and libcudnn's, sets CUDNN_INC and CUDNN_LIB; returns 1 when not found.
find_cudnn() {
  local cuda_home=$1 roots=() root py_root
  [[ -n ${CUDNN_HOME:-} ]] && roots+=("$CUDNN_HOME")
  roots+=("$cuda_home" /usr /usr/local)
  if command -v python3 >/dev/null 2>&1; then
    py_root=$(python3 -c 'import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__))' 2>/dev/null || true)
    [[ -n $py_root ]] && roots+=("$py_root")
  fi
  CUDNN_INC="" CUDNN_LIB=""
  for root in "${roots[@]}"; do
    local inc lib
    for inc in "$root/include" "$root/include/x86_64-linux-gnu"; do
      [[ -f $inc/cudnn.h ]] || continue
      for lib in "$root/lib" "$root/lib64" "$root/lib/x86_64-linux-gnu"; do
        if compgen -G "$lib/libcudnn.so*" >/dev/null; then CUDNN_INC=$inc CUDNN_LIB=$lib; return 0; fi
      done
    done
  done
  return 1
}

# CUDA 13 changed cudaMemAdvise's last parameter from a device ordinal (int) to a cudaMemLocation;
# llm.c (its source of May 2025) passes an int (cudaCpuDeviceId) in llmc/cuda_utils.cuh. Rather than
# edit llm.c, its build force-includes this header (nvcc's NVCC_APPEND_FLAGS), an overload taking
# the old int form; before CUDA 13 the header is empty. Writes the header to $1.
write_cuda13_shim() {
  cat >"$1" <<'EOF'
// Written by rankscope's bench/gpu/compare_with_llmc.sh for building llm.c with CUDA 13: the old
// cudaMemAdvise(ptr, count, advice, int device) form, mapped onto CUDA 13's cudaMemLocation one.
#pragma once
#include <cuda_runtime.h>
#if defined(__cplusplus) && defined(CUDART_VERSION) && CUDART_VERSION >= 13000
static inline cudaError_t cudaMemAdvise(const void* ptr, size_t count, cudaMemoryAdvise advice, int device) {
  cudaMemLocation location;
  location.type = device == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
  location.id = device == cudaCpuDeviceId ? 0 : device;
  return cudaMemAdvise(ptr, count, advice, location);
}
#endif
EOF
}

# build_llmc SRC_COPY ARCH USE_CUDNN(0|1) LOG -> builds SRC_COPY/train_gpt2cu; status of the build.
build_llmc() {
  local src=$1 arch=$2 use_cudnn=$3 buildlog=$4
  local make_vars=(USE_CUDNN="$use_cudnn" NO_MULTI_GPU=1 NO_USE_MPI=1 NO_OMP=1 PRECISION=BF16
                   GPU_COMPUTE_CAPABILITY="$arch")
  local nvcc_flags=(--threads=0 --use_fast_math -std=c++17 -O3
                    "--generate-code=arch=compute_$arch,code=[compute_$arch,sm_$arch]" -DENABLE_BF16)
  local extra_inc=() cudnn_obj=() libs=(-lcublas -lcublasLt -lnvidia-ml) append=${NVCC_APPEND_FLAGS:-}
  if [[ $use_cudnn == 1 ]]; then
    # llm.c's Makefile adds -I$(CUDNN_FRONTEND_PATH); the value carries cudnn.h's directory too.
    make_vars+=(CUDNN_FRONTEND_PATH="$CUDNN_FE -I$CUDNN_INC")
    extra_inc=(-I"$CUDNN_FE" -I"$CUDNN_INC")
    libs+=(-lcudnn)
    # cudnn-frontend releases after llm.c's time (its 1.5) call NVRTC and the driver API from their
    # headers; nvcc finds both libraries (libcuda as the toolkit's stub) in its own lib directories.
    append="${append:+$append }-lnvrtc -lcuda"
  fi
  rm -f "$src/train_gpt2cu"
  (  # a subshell: the build's NVCC_APPEND_FLAGS stays with this build
    echo "# $(date -u +%FT%TZ) llm.c build, USE_CUDNN=$use_cudnn, arch sm_$arch"
    echo "# LIBRARY_PATH=${LIBRARY_PATH:-} NVCC_APPEND_FLAGS=$append"
    export NVCC_APPEND_FLAGS=$append
    if command -v make >/dev/null 2>&1; then
      echo "# make -C $src train_gpt2cu ${make_vars[*]}"
      make -C "$src" train_gpt2cu "${make_vars[@]}"
    else
      # No make: the same nvcc lines as llm.c's Makefile rules for train_gpt2cu (and cudnn_att.o).
      echo "# make not found: nvcc directly, as llm.c's Makefile would"
      mkdir -p "$src/build"
      if [[ $use_cudnn == 1 ]]; then
        (cd "$src" && nvcc -c "${nvcc_flags[@]}" -DENABLE_CUDNN llmc/cudnn_att.cpp "${extra_inc[@]}" -o build/cudnn_att.o)
        cudnn_obj=(build/cudnn_att.o)
        nvcc_flags+=(-DENABLE_CUDNN)
      fi
      (cd "$src" && nvcc "${nvcc_flags[@]}" train_gpt2.cu "${cudnn_obj[@]}" "${libs[@]}" "${extra_inc[@]}" -o train_gpt2cu)
    fi
  ) >"$buildlog" 2>&1 && [[ -x $src/train_gpt2cu ]]
}

# ---------------------------------------------------------------------------------------------
# Main.

llmc_dir="$REPO_ROOT/.llmc" build_dir="$REPO_ROOT/build" model=d12 seq=1024 batch=16 steps=50 skip=5
warmup=3 rounds=2 arch="" cudnn_fe="" no_cudnn=0 build_only=0
bench_args=() llmc_args=()

need_value() { [[ $# -ge 2 ]] || die 2 "$1 needs a value" "see --help"; }
while [[ $# -gt 0 ]]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --self-test) self_test; exit $? ;;
    --llmc) need_value "$@"; llmc_dir=$2; shift 2 ;;
    --build) need_value "$@"; build_dir=$2; shift 2 ;;
    --model) need_value "$@"; model=$2; shift 2 ;;
    --seq) need_value "$@"; seq=$2; shift 2 ;;
    --batch) need_value "$@"; batch=$2; shift 2 ;;
    --steps) need_value "$@"; steps=$2; shift 2 ;;
    --skip) need_value "$@"; skip=$2; shift 2 ;;
    --warmup) need_value "$@"; warmup=$2; shift 2 ;;
    --rounds) need_value "$@"; rounds=$2; shift 2 ;;
    --arch) need_value "$@"; arch=$2; shift 2 ;;
    --cudnn-frontend) need_value "$@"; cudnn_fe=$2; shift 2 ;;
    --bench-arg) need_value "$@"; bench_args+=("$2"); shift 2 ;;
    --llmc-arg) need_value "$@"; llmc_args+=("$2"); shift 2 ;;
    --no-cudnn) no_cudnn=1; shift ;;
    --build-only) build_only=1; shift ;;
    *) die 2 "unknown argument '$1'" "see --help" ;;
  esac
done

is_count() { [[ $1 =~ ^[0-9]+$ ]] && ((10#$1 >= $2)); }
is_count "$seq" 1 || die 2 "--seq must be a positive integer, got '$seq'"
[[ $batch == auto ]] || is_count "$batch" 1 || die 2 "--batch must be a positive integer or 'auto', got '$batch'"
is_count "$steps" 1 || die 2 "--steps must be a positive integer, got '$steps'"
is_count "$skip" 0 || die 2 "--skip must be a non-negative integer, got '$skip'"
((10#$skip < 10#$steps)) || die 2 "--skip ($skip) must be below --steps ($steps): no llm.c step would be counted"
is_count "$warmup" 0 || die 2 "--warmup must be a non-negative integer, got '$warmup'"
is_count "$rounds" 1 || die 2 "--rounds must be a positive integer, got '$rounds'"
[[ -z $arch || $arch =~ ^[0-9]{2,3}$ ]] || die 2 "--arch must be a compute capability like 90, got '$arch'"
[[ $model =~ ^d[0-9]+$ ]] || die 2 "--model must be a GPT-2 depth like d12, got '$model'" "llm.c's -e takes dN"

[[ -f $llmc_dir/train_gpt2.cu && -f $llmc_dir/Makefile && -d $llmc_dir/llmc ]] ||
  die 2 "no llm.c source in '$llmc_dir' (want train_gpt2.cu, Makefile and llmc/)" \
    "copy github.com/karpathy/llm.c there (git clone elsewhere, then cp -r; .llmc/ is git-ignored), or pass --llmc DIR"
llmc_dir=$(cd "$llmc_dir" && pwd)
bench_bin="$build_dir/bin/gpt2_gpu_bench" tokenize_bin="$build_dir/bin/gpt2-tokenize"
[[ -x $tokenize_bin ]] || die 2 "no $tokenize_bin" "build it: cmake --build $build_dir --target gpt2-tokenize gpt2_gpu_bench"
[[ $build_only == 1 || -x $bench_bin ]] || die 2 "no $bench_bin" "build it: cmake --build $build_dir --target gpt2_gpu_bench"
text="$REPO_ROOT/data/tinyshakespeare/tinyshakespeare.txt"
[[ -f $text ]] || die 2 "no $text" "the repository ships it under data/tinyshakespeare/"
# The toolkit's usual place, when the shell's PATH does not name it.
if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then PATH="$PATH:/usr/local/cuda/bin"; fi
command -v nvcc >/dev/null 2>&1 || die 2 "nvcc not found on PATH" "llm.c is built from source here; put the CUDA toolkit's bin/ on PATH"
cuda_home=$(cd "$(dirname "$(command -v nvcc)")/.." && pwd)
[[ -n $arch ]] || arch=$(detect_arch)
[[ -n $arch ]] || die 2 "cannot tell the GPU's compute capability (no nvidia-smi, no PyTorch answer)" "pass --arch 90 for H100/H200"

# The work directory holds the llm.c copy and its build, the shards and the probe's run directory;
# it goes at exit (--build-only keeps it). The logs live in $OUT, or in the work directory's logs/,
# which is then kept.
work=$(mktemp -d "${TMPDIR:-/tmp}/$PROG.XXXXXX")
keep_work=0
cleanup() {
  [[ $keep_work == 1 ]] && return 0
  if [[ -n ${OUT:-} ]]; then rm -rf "$work"; else rm -rf "$work/llmc" "$work/data" "$work/probe_run" "$work/linkdirs"; fi
}
trap cleanup EXIT
if [[ -n ${OUT:-} ]]; then logs="$OUT/$PROG"; else logs="$work/logs"; fi
mkdir -p "$logs"
log "logs in $logs"

# 1. Tokens: the shipped text through our tokenizer, in llm.c's shard format.
mkdir -p "$work/data"
"$tokenize_bin" encode "$text" -o "$work/data/tinyshakespeare.bin" --val-fraction 0.1 \
  --vocab-dir "$REPO_ROOT/data/gpt2" >"$logs/tokenize.log" 2>&1 ||
  die 1 "gpt2-tokenize failed" "see $logs/tokenize.log"
train_shard="$work/data/tinyshakespeare_train.bin"
[[ -s $train_shard ]] || die 1 "gpt2-tokenize wrote no $train_shard" "see $logs/tokenize.log"
train_tokens=$(od -An -t d4 -j 8 -N 4 "$train_shard" | tr -d ' ')
log "tokenized tinyshakespeare: $train_tokens training tokens"

# 2. llm.c: a copy of its source, built outside the repository.
mkdir -p "$work/llmc" "$work/linkdirs"
tar -C "$llmc_dir" --exclude=.git -cf - . | tar -C "$work/llmc" -xf -
cuda_major=$(nvcc --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
llmc_source="llm.c's source unmodified"
if [[ ${cuda_major:-0} -ge 13 ]]; then
  write_cuda13_shim "$work/cuda13_shim.h"
  export NVCC_APPEND_FLAGS="${NVCC_APPEND_FLAGS:+$NVCC_APPEND_FLAGS }-include $work/cuda13_shim.h"
  llmc_source="llm.c's source unmodified, built with CUDA $cuda_major and a force-included cudaMemAdvise shim"
fi
LINK_DIR="$work/linkdirs"
export LIBRARY_PATH="$LINK_DIR${LIBRARY_PATH:+:$LIBRARY_PATH}"
# llm.c links -lnvidia-ml; a machine with the driver but no dev symlink has only libnvidia-ml.so.1.
make_linkable nvidia-ml "$(ldconfig_path libnvidia-ml.so.1)" /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 \
  /usr/lib64/libnvidia-ml.so.1 /usr/local/nvidia/lib64/libnvidia-ml.so.1 "$cuda_home/lib64/stubs/libnvidia-ml.so" \
  "$cuda_home/targets/x86_64-linux/lib/stubs/libnvidia-ml.so" || {
  # llm.c calls NVML only when <nvml.h> exists (llmc/mfu.h's __has_include); without the header its
  # Makefile's -lnvidia-ml resolves nothing, and an empty library stands in.
  if [[ ! -f $cuda_home/include/nvml.h && ! -f $cuda_home/targets/x86_64-linux/include/nvml.h &&
        ! -f /usr/include/nvml.h ]] && echo 'void compare_with_llmc_no_nvml(void) {}' |
        gcc -shared -fPIC -x c - -o "$LINK_DIR/libnvidia-ml.so" 2>/dev/null; then
    log "no libnvidia-ml and no nvml.h: llm.c is built without NVML (an empty -lnvidia-ml)"
  else
    log "warning: no libnvidia-ml found; llm.c's link will likely fail (see its build log)"
  fi
}

[[ -n $cudnn_fe || ! -d $llmc_dir/cudnn-frontend/include ]] || cudnn_fe="$llmc_dir/cudnn-frontend/include"
[[ $no_cudnn == 0 ]] || cudnn_fe=""
attention="default (llm.c's own attention kernels; built with USE_CUDNN=0)"
built=0
if [[ -n $cudnn_fe ]]; then
  [[ -f $cudnn_fe/cudnn_frontend.h ]] || die 2 "no cudnn_frontend.h in '$cudnn_fe'" "pass cudnn-frontend's include/ directory"
  CUDNN_FE=$(cd "$cudnn_fe" && pwd)
  if find_cudnn "$cuda_home"; then
    make_linkable cudnn "$(compgen -G "$CUDNN_LIB/libcudnn.so*" | sort | head -1)" || true
    export LD_LIBRARY_PATH="$CUDNN_LIB:$cuda_home/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    log "building llm.c with cuDNN (frontend $CUDNN_FE, cudnn.h in $CUDNN_INC)"
    if build_llmc "$work/llmc" "$arch" 1 "$logs/llmc_build_cudnn.log"; then
      built=1 attention="cuDNN flash attention (USE_CUDNN=1)"
    else
      attention="default (llm.c's own attention kernels): the cuDNN build failed, see llmc_build_cudnn.log"
    fi
  else
    attention="default (llm.c's own attention kernels): cuDNN frontend given but no cudnn.h + libcudnn found"
  fi
fi
if [[ $built == 0 ]]; then
  log "building llm.c (USE_CUDNN=0, sm_$arch)"
  build_llmc "$work/llmc" "$arch" 0 "$logs/llmc_build.log" ||
    die 1 "llm.c's build failed" "see $logs/llmc_build.log"
fi
log "llm.c built ($llmc_source); attention: $attention"
if [[ $build_only == 1 ]]; then
  keep_work=1
  echo "$PROG: built $work/llmc/train_gpt2cu (attention: $attention); tokens in $work/data; logs in $logs"
  exit 0
fi

# 3. The batch: as given, or the largest ours fits.
if [[ $batch == auto ]]; then
  "$bench_bin" --model "$model" --seq "$seq" --batch 0 --steps 1 --warmup 0 --rounds 1 --probe off \
    "${bench_args[@]}" >"$logs/ours_batch_search.log" 2>&1 || die 1 "gpt2_gpu_bench's batch search failed" "see $logs/ours_batch_search.log"
  grep -q 'skipped:' "$logs/ours_batch_search.log" && die 1 "gpt2_gpu_bench found no usable GPU: $(grep -m1 skipped: "$logs/ours_batch_search.log")"
  batch=$(parse_ours_batch "$logs/ours_batch_search.log") || die 1 "cannot read the batch size" "see $logs/ours_batch_search.log"
  log "largest batch ours fits: $batch"
fi
((10#$batch * 10#$seq + 1 <= 10#$train_tokens)) ||
  die 2 "B*T+1 = $((batch * seq + 1)) tokens exceeds the $train_tokens of the training shard" "lower --batch or --seq"

# 4. Ours: probe off and on, interleaved rounds.
log "running gpt2_gpu_bench: $model T=$seq B=$batch, $steps steps x $rounds rounds, probe off and on"
"$bench_bin" --model "$model" --seq "$seq" --batch "$batch" --steps "$steps" --warmup "$warmup" --rounds "$rounds" \
  --precision bf16 --probe both --run-dir "$work/probe_run" "${bench_args[@]}" >"$logs/ours.log" 2>&1 ||
  die 1 "gpt2_gpu_bench failed" "see $logs/ours.log"
grep -q 'skipped:' "$logs/ours.log" && die 1 "gpt2_gpu_bench found no usable GPU: $(grep -m1 skipped: "$logs/ours.log")"
ours_off=$(parse_ours_log "$logs/ours.log" off) || die 1 "cannot read gpt2_gpu_bench's output" "see $logs/ours.log"
ours_on=$(parse_ours_log "$logs/ours.log" on) || die 1 "cannot read gpt2_gpu_bench's output" "see $logs/ours.log"

# 5. llm.c: same model, B, T and tokens. The val pattern is the train shard too: val loss is not
# measured (it runs only before step 1 and after the last, outside the timed region, on one batch),
# and the train shard holds B*T+1 tokens for any B the check above let through.
log "running llm.c train_gpt2cu: $model T=$seq B=$batch, $steps steps (first $skip not counted)"
llmc_cmd=(./train_gpt2cu -e "$model" -i "$train_shard" -j "$train_shard" -b "$batch" -t "$seq" -x "$steps"
          -v 1000000 -m 1 -s 0 -n 0 -h 0 -y 0 -r 0 -c 0.1 -l 0.0006 "${llmc_args[@]}")
echo "# (cd <llm.c copy> && ${llmc_cmd[*]})" >"$logs/llmc.log"
(cd "$work/llmc" && LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$cuda_home/lib64" "${llmc_cmd[@]}") >>"$logs/llmc.log" 2>&1 || die 1 "llm.c's train_gpt2cu failed" "see $logs/llmc.log"
llmc=$(parse_llmc_log "$logs/llmc.log" "$skip" "$batch" "$seq") || die 1 "cannot read llm.c's step lines" "see $logs/llmc.log"

# 6. The table. llm.c's MFU in the MFU column uses our FLOP count and peak (the same 6N + 6LCT
# per token, N with the same padded vocabulary 50304, so it scales with tokens/s); its own printed
# MFU, against its own peak table (H100 989 TFLOP/s bf16; unknown GPUs print -100%), is noted below.
device=$( (grep -m1 '^gpt2_gpu_bench: ' "$logs/ours.log" || true) | sed 's/^gpt2_gpu_bench: //; s/ | .*//')
llmc_tok=$(field tok_s "$llmc")
ours_off_tok=$(field tok_s "$ours_off") ours_on_tok=$(field tok_s "$ours_on") ours_off_mfu=$(field mfu "$ours_off")
llmc_mfu_ours=$(awk -v m="$ours_off_mfu" -v a="$llmc_tok" -v b="$ours_off_tok" \
  'BEGIN { if (m ~ /^[0-9.]+$/ && b > 0) printf "%.2f", m * a / b; else printf "n/a" }')
row() { printf '  %-24s %12s %10s %8s %14s\n' "$@"; }
{
  echo "$PROG: $model T=$seq B=$batch bf16 | $device"
  row "" "tokens/s" "ms/step" "MFU %" "ours / llm.c"
  row "rankscope, probe off" "$ours_off_tok" "$(field ms "$ours_off")" "$ours_off_mfu" "$(ratio "$ours_off_tok" "$llmc_tok")"
  row "rankscope, probe on" "$ours_on_tok" "$(field ms "$ours_on")" "$(field mfu "$ours_on")" "$(ratio "$ours_on_tok" "$llmc_tok")"
  row "llm.c train_gpt2cu" "$llmc_tok" "$(field ms "$llmc")" "$llmc_mfu_ours" ""
  echo "  MFU: 6N + 6LCT FLOPs per token (N = parameters with the padded vocabulary) over gpt2_gpu_bench's peak"
  echo "  llm.c attention: $attention"
  echo "  llm.c build: $llmc_source"
  echo "  llm.c: $(field steps "$llmc") steps counted (steps $((skip + 1))-$steps), time per step by its CUDA events;"
  echo "    its own MFU $(field mfu "$llmc")%; device memory after its allocations: $(parse_llmc_memory "$logs/llmc.log")"
  echo "  ours: $((steps * rounds)) steps per probe mode, wall time with a device sync each step"
  (grep -E '^ *(probe overhead|peak memory):' "$logs/ours.log" || true) | sed 's/^ */  ours: /'
  on_ratio=$(ratio "$ours_on_tok" "$llmc_tok")
  verdict=$(awk -v r="$on_ratio" 'BEGIN { print (r ~ /^[0-9.]+$/ && r >= 1.0) ? "met" : "not met" }')
  echo "  target: ours / llm.c >= 1.0 with the probe on: $verdict ($on_ratio)"
  echo "  logs: $logs"
} | tee "$logs/table.txt"
