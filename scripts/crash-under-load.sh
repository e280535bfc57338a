#!/usr/bin/env bash
# crash-under-load.sh — a race check by hand: a DP=4 gpt2-train job whose rank 2 kills
# itself at step 3 (`--inject crash:rank=2,step=3`), diagnosed with `hangdoctor --wait 4` while two
# `yes` loops keep both cores busy; RUNS times. Every verdict must be `rank_dead` for rank 2: a
# process that has exited is dead whatever its heartbeat says, even when the verdict comes while its
# exit is still being reaped.
#
# Usage: scripts/crash-under-load.sh [RUNS] [BUILD_DIR]     (defaults: 50, build)
# Prints one line a run and a count at the end; exit 0 when every run said rank_dead for rank 2.
# Needs mpirun (Open MPI) and jq. The runs' folders go under a temporary directory, removed at exit
# (RANKSCOPE_KEEP=1 keeps them; a run that said something else is always kept and named).
# Is not: a ctest test (each run takes 10-20 s on a loaded machine; 50 of them are minutes). The
# deterministic part, a real unreaped child read as dead, is hang_process_state_tests.
set -euo pipefail
runs=${1:-50}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${2:-$root/build}" && pwd)
for tool in mpirun jq; do command -v $tool >/dev/null || { echo "crash-under-load: $tool is needed" >&2; exit 2; }; done
[[ -x $build/bin/gpt2-train && -x $build/bin/hangdoctor ]] || { echo "crash-under-load: build gpt2-train and hangdoctor in $build first" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/rankscope-crash-load.XXXXXX")
load_pids=()
job_pgid=""
cleanup() {
  local p
  for p in "${load_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [[ -z $job_pgid ]] || kill -KILL -- "-$job_pgid" 2>/dev/null || true
  if [[ ${RANKSCOPE_KEEP:-0} != 1 ]]; then
    # Keep the runs that failed; drop the rest.
    find "$work" -mindepth 1 -maxdepth 1 -name 'run-*' ! -name '*.failed' -exec rm -rf {} + 2>/dev/null || true
    rmdir "$work" 2>/dev/null || true
  fi
}
trap cleanup EXIT

# Two busy loops, one a core (the machine's own load comes on top).
for _ in 1 2; do (exec yes >/dev/null) & load_pids+=($!); done

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
ok=0
for i in $(seq "$runs"); do
  dir=$work/run-$i
  mkdir -p "$dir"
  # orte_enable_recovery: the survivors stay (stuck in the collective rank 2 never joins), as in a
  # real job whose launcher does not tear the others down at once.
  setsid mpirun -np 4 --oversubscribe --bind-to none --mca orte_enable_recovery 1 \
    -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 \
    "$build/bin/gpt2-train" --model tiny --data synthetic:zipf --batch 2 --seq-len 32 --quiet \
    --tp 1 --steps 200 --run-dir "$dir/run" --inject crash:rank=2,step=3 >"$dir/job.log" 2>&1 &
  job_pgid=$!
  # hangdoctor --wait waits for the run directory's recorders and then for 4 s without progress.
  for _ in $(seq 300); do [[ -d $dir/run ]] && break; sleep 0.1; done
  status=0
  timeout 180 "$build/bin/hangdoctor" "$dir/run" --wait 4 --json "$dir/verdict.json" >"$dir/verdict.txt" 2>&1 || status=$?
  kill -KILL -- "-$job_pgid" 2>/dev/null || true
  wait "$job_pgid" 2>/dev/null || true
  job_pgid=""
  said=$(jq -r '"\(.verdict) \(.kind) \(.culprit_ranks | map(tostring) | join(","))"' "$dir/verdict.json" 2>/dev/null || echo "no verdict (exit $status)")
  if [[ $said == "crash rank_dead 2" ]]; then
    ok=$((ok + 1))
    echo "run $i: $said"
  else
    mv "$dir" "$dir.failed"
    echo "run $i: $said  <- kept in $dir.failed: $(head -1 "$dir.failed/verdict.txt")"
  fi
done
echo "crash-under-load: $ok of $runs runs said rank_dead for rank 2 (two yes loops; load $(cut -d' ' -f1 /proc/loadavg) at the end)"
[[ $ok -eq $runs ]]
