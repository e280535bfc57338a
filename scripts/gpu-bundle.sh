#!/usr/bin/env bash
# gpu-bundle.sh — builds here (Release, CUDA sm_90: H100 and H200 alike) and packs what the GPU
# machine needs to run scripts/gpu-checks.sh without building there: stripped binaries, the `gpu`
# test binaries, the NCCL plugin and NVTX injection libraries, their non-CUDA shared libraries,
# OpenMPI relocatable with OPAL_PREFIX, the token shards, llm.c's train_gpt2cu when .llmc/ holds
# llm.c, and the check scripts (gpu-checks.sh, attention_checks.sh, moe_checks.sh, torch_gpt2.py,
# make_speed_table.py). Which binaries and test binaries: those gpu-checks.sh --print-needs names, so
# the runner's plan is the one list. The packed bundle is checked with the runner's own
# `--dry-run --check-bundle`. Output: .gpu/bundle.tgz (git-ignored), which must stay < 64 MiB, the
# device tool's `carry` limit.
#
#   scripts/gpu-bundle.sh [--build-dir DIR] [--no-build]
#
# Then, with the device tool (one command, repository root, carry [".gpu/bundle.tgz"], timeout_s 540):
#   tar xzf .gpu/bundle.tgz -C .gpu && bash .gpu/bundle/gpu-checks.sh
# llm.c's train_gpt2cu comes along only when .llmc/train_gpt2cu exists: build it there first, as
# bench/gpu/compare_with_llmc.sh does (make train_gpt2cu USE_CUDNN=0 NO_MULTI_GPU=1 NO_USE_MPI=1
# NO_OMP=1 PRECISION=BF16 GPU_COMPUTE_CAPABILITY=90, its CUDA 13 cudaMemAdvise shim force-included
# with NVCC_APPEND_FLAGS="-include SHIM.h"); without it the runner's llmc step says so and moves on.
# Is not: the checks (gpu-checks.sh) nor a CI step. CUDA, cuBLAS, NCCL and CUPTI are not packed:
# the GPU machine's own (PyTorch's site-packages or /usr/local/cuda) are found at run time.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build-gpu-bundle"
do_build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build="$2"; shift 2 ;;
    --no-build) do_build=0; shift ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-bundle.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
done

runner="$root/scripts/gpu-checks.sh"
needs="$(bash "$runner" --print-needs)"
# The runner's bin/ and tests/ files; gpt2-tokenize besides (llm.c's token shards are made with it).
mapfile -t bins < <({ sed -n 's|^bin/||p' <<<"$needs"; echo gpt2-tokenize; } | sort -u)
mapfile -t gpu_tests < <(sed -n 's|^tests/||p' <<<"$needs")
libs=(librankscope-nccl.so librankscope-nvtx.so)

if [ "$do_build" = 1 ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRANKSCOPE_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache \
    >/dev/null
  # Only what the bundle holds; targets this tree lacks (a test another branch adds) are skipped.
  targets=()
  known="$(cmake --build "$build" --target help | awk -F: '{print $1}')"
  for t in "${bins[@]}" rankscope_nccl_profiler rankscope_nvtx_injection "${gpu_tests[@]}"; do
    grep -qx "$t" <<<"$known" && targets+=("$t")
  done
  nice cmake --build "$build" -j"${JOBS:-2}" --target "${targets[@]}"
fi

dest="$root/.gpu/bundle"
rm -rf "$dest"
mkdir -p "$dest"/{bin,lib,tests,deps,root,data}
for b in "${bins[@]}"; do cp "$build/bin/$b" "$dest/bin/"; done
for l in "${libs[@]}"; do cp "$build/lib/$l" "$dest/lib/"; done
for t in "${gpu_tests[@]}"; do
  f="$(find "$build/tests" -type f -name "$t" -perm -u+x | head -1)"
  if [ -n "$f" ]; then cp "$f" "$dest/tests/"; else echo "gpu-bundle: no test binary $t (skipped)"; fi
done
strip --strip-debug "$dest"/bin/* "$dest"/tests/* "$dest"/lib/*.so
if [ -x "$root/.llmc/train_gpt2cu" ]; then cp "$root/.llmc/train_gpt2cu" "$dest/bin/"; fi

# Shared libraries other than the C/C++ runtime, CUDA's (the GPU machine's own) and MPI's (below).
skip='linux-vdso|ld-linux|/libc\.so|/libm\.so|libstdc\+\+|libgcc_s|libpthread|libdl\.so|librt\.so|libcuda|libcublas|libnccl|libcupti|libcudart|libnvrtc|libnvidia|libnvToolsExt'
for f in "$dest"/bin/* "$dest"/tests/* "$dest"/lib/*.so; do ldd "$f" 2>/dev/null || true; done |
  awk '/=>/ {print $3}' | { grep -vE "$skip" || true; } | { grep -vE 'openmpi|libmpi|libopen-(pal|rte)' || true; } | sort -u |
  while read -r l; do [ -f "$l" ] && cp -L "$l" "$dest/deps/"; done

# OpenMPI: the Debian packages' files in their own layout under root/, relocated with OPAL_PREFIX.
for p in openmpi-bin libopenmpi3 openmpi-common libpmix2 libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7 \
         libfabric1 libucx0 libibverbs1 librdmacm1 libpsm2-2 libpsm-infinipath1 libnl-3-200 libnl-route-3-200 \
         libnuma1 libltdl7; do
  { dpkg -L "$p" 2>/dev/null || true; } | grep -vE '^/usr/share/(doc|man|lintian)' | while read -r f; do
    [ -f "$f" ] || [ -L "$f" ] || continue
    mkdir -p "$dest/root$(dirname "$f")"
    cp -a "$f" "$dest/root$f"
  done
done
rm -rf "$dest/root/usr/lib/x86_64-linux-gnu/openmpi/include"
# /usr/bin/mpirun is an alternatives link made by the package's postinst, not one of its files: the
# runner and moe_checks.sh call `mpirun`, so name orterun so, relatively.
ln -sf orterun "$dest/root/usr/bin/mpirun"
find "$dest/root" -name '*.so*' -type f -exec strip --strip-debug {} + 2>/dev/null || true

cp "$root"/data/tinyshakespeare/*.bin "$dest/data/" 2>/dev/null || true
cp "$runner" "$root"/bench/gpu/{torch_gpt2.py,make_speed_table.py,attention_checks.sh,moe_checks.sh} "$dest/"
git -C "$root" rev-parse HEAD > "$dest/COMMIT" 2>/dev/null || true
# Every file the runner's plan (and the H200-only incident) names must be here before packing.
bash "$dest/gpu-checks.sh" --dry-run --check-bundle "$dest" >/dev/null || exit 1
bash "$dest/gpu-checks.sh" --dry-run --check-bundle "$dest" --only moe-incident >/dev/null || exit 1

tar czf "$root/.gpu/bundle.tgz" -C "$root/.gpu" bundle
size=$(stat -c %s "$root/.gpu/bundle.tgz")
echo "gpu-bundle: $(du -sh "$dest" | cut -f1) unpacked, .gpu/bundle.tgz $((size / 1024 / 1024)) MiB ($size bytes)"
if [ "$size" -ge $((64 * 1024 * 1024)) ]; then
  echo "gpu-bundle: over the 64 MiB carry limit" >&2
  exit 1
fi
