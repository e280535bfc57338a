#!/bin/bash
# Runs each scenario of torch_job.py under torchrun on the CPU (Gloo) and keeps what it left in
# tests/fixtures/torch-jobs/<scenario>/: dumps/ (one Flight Recorder dump a rank that wrote one),
# job.log (torchrun's output, every line tagged [defaultN]:) and truth.json. Dumps are taken without
# stack frames, which would carry this machine's paths (and which blocked the watcher's dump in subgroup_hang).
# usage: make_fixtures.sh PYTHON [scenario...]   (PYTHON: a venv's python with torch 2.15)
set -u
PY=${1:?python with torch}; shift
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(cd "$HERE/../.." && pwd)/tests/fixtures/torch-jobs
declare -A NPROC=([fsdp2_tp_healthy]=4 [dtensor_scatter]=4 [subgroup_hang]=8 [raise_no_dump]=4)
declare -A DUMP_AFTER=([subgroup_hang]=2)
declare -A TRUTH=(
  [fsdp2_tp_healthy]='{"verdict": "healthy", "culprits": []}'
  [dtensor_scatter]='{"verdict": "healthy", "culprits": []}'
  [subgroup_hang]='{"verdict": "problem", "culprits": [5], "note": "rank 5 sleeps instead of the subgroup [1,3,5,7] all_reduce; monitored_barrier names group rank 2"}'
  [raise_no_dump]='{"verdict": "problem", "culprits": [3], "note": "rank 3 raises in backward and exits without a dump"}')
SCEN=("$@"); [ ${#SCEN[@]} -eq 0 ] && SCEN=(fsdp2_tp_healthy dtensor_scatter subgroup_hang raise_no_dump)
for s in "${SCEN[@]}"; do
  work=$(mktemp -d); dir=$OUT/$s
  rm -rf "$dir"; mkdir -p "$dir/dumps"
  echo "== $s (${NPROC[$s]} ranks)"
  DUMP_AFTER_S=${DUMP_AFTER[$s]:-6} TORCH_FR_BUFFER_SIZE=2000 TORCH_FR_DUMP_TEMP_FILE=$work/comm_lib_trace_rank_ OMP_NUM_THREADS=1 \
    timeout 180 "$PY" -m torch.distributed.run --standalone --nproc-per-node "${NPROC[$s]}" --tee 3 \
    "$HERE/torch_job.py" "$s" > "$dir/job.log" 2>&1
  echo "torchrun exit $?"
  cp "$work"/comm_lib_trace_rank_* "$dir/dumps/" 2>/dev/null
  # the venv's path and this machine's temporary folder are not part of the fixture
  sed -i -e "s|$work|<workdir>|g" -e "s|$(dirname "$(dirname "$PY")")|<venv>|g" -e "s|$HERE/|scripts/torch-jobs/|g" "$dir/job.log"
  echo "${TRUTH[$s]}" > "$dir/truth.json"
  ls "$dir/dumps"; rm -rf "$work"
done
