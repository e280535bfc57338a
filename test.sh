#!/usr/bin/env bash
# test.sh — installs what is missing, builds everything, runs every test. Exits non-zero on any
# failure. Configurations: the RelWithDebInfo build of everything (with CUDA when nvcc is found; GPU
# tests skip without a device), a Release (-O3) build of the format and probe tests, an ASan+UBSan
# build of the CPU code and a ThreadSanitizer build of the lock-free parts.
set -euo pipefail
cd "$(dirname "$0")"
./scripts/install-deps.sh

jobs=$(nproc)
# mpirun as root in containers and CI, and more ranks than cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

# Most builds here compile each target as one translation unit (CMake's unity build): the headers
# every file includes (GoogleTest, nlohmann/json, fmt) are parsed once per target instead of once per
# file, which halves CI's compile time. File-local names must therefore differ between the files of
# one target (docs/ARCHITECTURE.md). A unity build also hides a missing #include, so the ASan stage
# compiles file by file, and scripts/unity-coverage.sh checks that every file compiled inside a
# unity unit is compiled on its own there or in a target that is never unity (CUDA, mpi, benches).
unity=(-DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=0)
# Each stage's start, with the seconds since this script began: where CI's time goes.
stage() { echo "== $* ($(date -u +%H:%M:%S), ${SECONDS} s in)"; }

# The lines the last commit changed, held to .clang-format (the tree is formatted as it is touched).
stage "format of the last commit's lines"
scripts/check-format.sh HEAD~1

stage "release build"
# Everything, CUDA included wherever nvcc is (CI has no GPU: this proves the CUDA code compiles); the
# options the demo's quick build of the same folder set are given back their defaults.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRANKSCOPE_WITH_CUDA=ON -DRANKSCOPE_BUILD_TESTS=ON \
  -DRANKSCOPE_QUICK_BUILD=OFF "${unity[@]}" >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs" -LE 'bench|slurm'
# The quick benchmarks; those labelled bench_large (16K ranks, d12, the trainer, the MoE token loop and nsys-import
# benches, 10 timed hangs, the seq-len sweep's timings: 5-6 minutes on 2 cores) run with
# `ctest --test-dir build -L bench`.
ctest --test-dir build --output-on-failure -L bench -LE bench_large

# Multi-node: hangdoctor --slurm on a real four-node Slurm on this machine
# (scripts/slurm-cluster.sh: munged, slurmctld, slurmd n1..n4 in their own mount+UTS namespaces; the
# ctest fixture slurm_cluster starts and stops it, the trap stops it if this script is interrupted).
if slurm_why=$(scripts/slurm-cluster.sh can-run); then
  stage "multi-node: a four-node Slurm on this machine"
  trap 'scripts/slurm-cluster.sh stop build/slurm-cluster >/dev/null 2>&1 || true' EXIT
  ctest --test-dir build --output-on-failure -L slurm
else
  echo "== multi-node Slurm tests skipped: $slurm_why"
fi

# The flight recorder's seqlocks and the probe's lock-free paths under -O3, what users of
# CMAKE_BUILD_TYPE=Release get: the optimiser may reorder or tear a racing read that -O2 happens to
# leave alone (torn range names were found only here).
stage "Release (-O3) build: format and probe tests"
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DRANKSCOPE_WITH_CUDA=OFF "${unity[@]}" >/dev/null
cmake --build build-release -j"$jobs" --target format_tests probe_tests
build-release/tests/format_tests
build-release/tests/format_tests --gtest_filter='FlightRecorder*' --gtest_repeat=20
build-release/tests/probe_tests

# libFuzzer smoke (docs/FUZZING.md): every reader's fuzz target for a fixed number of
# executions on seeds from the real files; any crash, leak, timeout or out-of-memory fails. Needs clang.
if [[ "${RANKSCOPE_SKIP_SANITIZERS:-0}" != 1 ]] && command -v clang++-14 >/dev/null; then
  stage "libFuzzer smoke (clang, every reader)"
  CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRANKSCOPE_FUZZ=ON \
    -DRANKSCOPE_WITH_CUDA=OFF -DRANKSCOPE_BUILD_BENCHMARKS=OFF "${unity[@]}" >/dev/null
  cmake --build build-fuzz -j"$jobs" --target fuzz_all
  ctest --test-dir build-fuzz --output-on-failure -j"$jobs" -L fuzz
else
  echo "== libFuzzer smoke skipped: no clang++-14 (or RANKSCOPE_SKIP_SANITIZERS=1)"
fi

if [[ "${RANKSCOPE_SKIP_SANITIZERS:-0}" != 1 ]]; then
  # With clang where it is (it is on these machines): it compiles this -O0 sanitized build file by
  # file in about half g++'s time (hang_report_test.cpp 9.4 s against 16.4 s, trainer.cpp 9.0 s
  # against 17.3 s), and this stage was the largest of CI's. g++ builds everything else.
  asan_compilers=()
  if command -v clang++-14 >/dev/null; then asan_compilers=(-DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14); fi
  stage "ASan+UBSan build (CPU), file by file${asan_compilers:+, clang}"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DRANKSCOPE_SANITIZE=ON -DRANKSCOPE_WITH_CUDA=OFF \
    -DRANKSCOPE_BUILD_BENCHMARKS=OFF -DRANKSCOPE_UNBUILT_TEST_LABELS="mpi;slow" -DCMAKE_UNITY_BUILD=OFF \
    "${asan_compilers[@]}" >/dev/null
  scripts/unity-coverage.sh build build-asan
  cmake --build build-asan -j"$jobs"
  # OpenMPI's own allocations trip LeakSanitizer; leaks in our code are checked by the non-MPI tests.
  # The pages rendered in Chromium run Chromium's code, not ours: the release run covers them.
  ASAN_OPTIONS=detect_leaks=0 ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE "bench|mpi|slow" -E RendersInChromium
fi

if [[ "${RANKSCOPE_SKIP_SANITIZERS:-0}" != 1 ]]; then
  # The probe (recorder writer, watchdog thread, learned bounds, seqlocks) and the DDP reducer's
  # communication thread are lock-free by design: ThreadSanitizer checks them. CPU only, no MPI;
  # the trainer tests other than DDP use OpenMP/OpenBLAS, which TSan cannot see into.
  stage "ThreadSanitizer build (flight recorder, probe, DDP reducer, NCCL profiler plugin)"
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRANKSCOPE_TSAN=ON -DRANKSCOPE_WITH_CUDA=OFF "${unity[@]}" >/dev/null
  cmake --build build-tsan -j"$jobs" --target format_tests probe_tests trainer_runtime_test fake_nccl_driver rankscope_nccl_profiler
  TSAN_OPTIONS=halt_on_error=1 build-tsan/tests/format_tests
  TSAN_OPTIONS=halt_on_error=1 build-tsan/tests/probe_tests
  TSAN_OPTIONS=halt_on_error=1 build-tsan/tests/trainer_runtime_test --gtest_filter='Ddp*:ProbedCommunicator*'
  # The plugin's callbacks from three threads at once (application, host-callback, proxy) in each of
  # 4 forked ranks, with an unload and reload; any race makes a rank, and so the driver, fail.
  rm -rf build-tsan/nccl_plugin_tsan_run
  TSAN_OPTIONS=halt_on_error=1 build-tsan/tests/fake_nccl_driver --plugin build-tsan/lib/librankscope-nccl.so \
    --run-dir build-tsan/nccl_plugin_tsan_run --abi 5 --ranks 4 --tp 2 --steps 8 --reload --reload-after 3 --callback-thread
fi
stage "done"
