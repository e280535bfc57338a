#!/usr/bin/env bash
# fuzz.sh — a libFuzzer campaign by hand on one target (tests/fuzz/, docs/FUZZING.md).
#
# Usage: scripts/fuzz.sh TARGET SECONDS [JOBS] [-- LIBFUZZER_FLAGS...]
#   TARGET   a target of tests/fuzz/ (fuzz_pickle, fuzz_kineto, ...; `scripts/fuzz.sh list` names them)
#   SECONDS  how long to fuzz (libFuzzer -max_total_time)
#   JOBS     parallel fuzzing processes (default 1; the corpus is shared)
# Builds the target in build-fuzz/ (clang-14, -DRANKSCOPE_FUZZ=ON; $RANKSCOPE_FUZZ_BUILD overrides)
# when missing, seeds the corpus .fuzz-corpus/TARGET (git-ignored) with scripts/fuzz-seeds.sh when
# empty, and runs. Findings land in .fuzz-corpus/findings/TARGET/ (crash-*, leak-*, timeout-*, oom-*);
# the log in .fuzz-corpus/logs/TARGET.log ends with libFuzzer's executions and coverage (cov, ft).
# Minimise a finding with: build-fuzz/fuzz/TARGET -minimize_crash=1 -runs=100000 FINDING.
# Memory: -rss_limit_mb=2048 and -malloc_limit_mb=1024 (a reader asking for more than 1 GB for one
# input is a finding); timeout 10 s an input.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RANKSCOPE_FUZZ_BUILD:-$root/build-fuzz}
corpus_root=$root/.fuzz-corpus

if [[ ${1:-} == list || $# -lt 2 ]]; then
  [[ ${1:-} == list ]] || echo "usage: scripts/fuzz.sh TARGET SECONDS [JOBS] [-- LIBFUZZER_FLAGS...]" >&2
  sed -n 's/^  \(fuzz_[a-z_]*\):.*/\1/p' "$root/tests/fuzz/CMakeLists.txt"
  [[ ${1:-} == list ]]; exit
fi
target=$1 seconds=$2 jobs=1
shift 2
if [[ $# -gt 0 && $1 != -- ]]; then jobs=$1; shift; fi
[[ ${1:-} == -- ]] && shift
if ! grep -q "^  $target:" "$root/tests/fuzz/CMakeLists.txt"; then
  echo "fuzz.sh: no fuzz target '$target' (scripts/fuzz.sh list names them)" >&2
  exit 2
fi

if [[ ! -f $build/build.ninja ]]; then
  command -v clang++-14 >/dev/null || { echo "fuzz.sh: clang++-14 is needed (libFuzzer)" >&2; exit 2; }
  CC=clang-14 CXX=clang++-14 cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DRANKSCOPE_FUZZ=ON -DRANKSCOPE_WITH_CUDA=OFF -DRANKSCOPE_BUILD_BENCHMARKS=OFF \
    -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=0 >/dev/null
fi
# RANKSCOPE_FUZZ_NO_BUILD=1 runs the binary as built (several campaigns at once share one build).
[[ ${RANKSCOPE_FUZZ_NO_BUILD:-0} == 1 ]] || ninja -C "$build" "$target"

corpus=$corpus_root/$target
if [[ -z $(ls -A "$corpus" 2>/dev/null) ]]; then
  "$root/scripts/fuzz-seeds.sh" "$corpus_root" "$build/fuzz" >/dev/null
fi
mkdir -p "$corpus" "$corpus_root/findings/$target" "$corpus_root/logs"
log=$corpus_root/logs/$target.log
echo "fuzz.sh: $target for ${seconds}s, $jobs job(s), corpus $corpus, log $log"
flags=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024
       -artifact_prefix="$corpus_root/findings/$target/" -print_final_stats=1)
if (( jobs > 1 )); then
  flags+=(-fork="$jobs" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
fi
# The whole output goes to the log (follow it with tail -f); the summary is printed at the end.
status=0
"$build/fuzz/$target" "${flags[@]}" "$@" "$corpus" >"$log" 2>&1 || status=$?
grep -E '^==[0-9]+==ERROR|^SUMMARY|^stat::' "$log" || true
echo "fuzz.sh: exit $status, last status line: $(grep -E '^#[0-9]+' "$log" | tail -1)"
ls "$corpus_root/findings/$target" 2>/dev/null | sed 's/^/finding: /'
exit "$status"
