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
declare -A NPROC=([fsdp2_tp_healthy]=4 [dtensor_scatter]=4 [subgroup_hang]=8 [raise_no_dump]=4
  [ddp_healthy]=4 [ddp_skip_collective]=4 [ddp_skip_abort]=4 [extra_collective]=4 [dataloader_stall]=4 [wrong_size]=4
  [pipeline_sleep]=4 [debug_server_stall]=4 [pipeline_healthy]=4 [gpipe_sleep]=4 [sigkill_rank]=4 [gil_held]=4
  [ddp_healthy_8]=8 [fsdp2_sleep]=4 [dataloader_healthy]=4 [debug_server_healthy]=4 [fsdp2_healthy]=4
  [ddp_skip_collective_8]=8 [dataloader_stall_8]=8 [fsdp2_sleep_8]=8 [extra_collective_8]=8 [pipeline_sleep_8]=8
  [interleaved_healthy]=4 [interleaved_sleep]=4 [subgroup_healthy]=8 [subgroup_extra]=8 [fsdp2_tp_sleep]=4 [fsdp2_tp_healthy_8]=8 [tp_raise]=4 [pipeline_raise]=4 [fsdp2_dataloader_stall]=4 [ddp_healthy_16]=16 [ddp_skip_collective_16]=16 [sigkill_rank_8]=8 [gil_held_8]=8 [raise_no_dump_8]=8 [wrong_size_8]=8)
declare -A DUMP_AFTER=([subgroup_hang]=2)
declare -A TRUTH=(
  [fsdp2_tp_healthy]='{"verdict": "healthy", "culprits": []}'
  [dtensor_scatter]='{"verdict": "healthy", "culprits": []}'
  [subgroup_hang]='{"verdict": "problem", "culprits": [5], "note": "rank 5 sleeps instead of the subgroup [1,3,5,7] all_reduce; monitored_barrier names group rank 2"}'
  [raise_no_dump]='{"verdict": "problem", "culprits": [3], "note": "rank 3 raises in backward and exits without a dump"}'
  [ddp_healthy]='{"verdict": "healthy", "culprits": []}'
  [ddp_skip_collective]='{"verdict": "problem", "culprits": [2], "note": "a data-dependent branch makes rank 2 skip the loss all_reduce"}'
  [ddp_skip_abort]='{"verdict": "problem", "culprits": [2], "note": "rank 2 skips the loss all_reduce at step 1; Gloo aborts rank 1 on the size it receives"}'
  [extra_collective]='{"verdict": "problem", "culprits": [3], "note": "rank 3 makes one all_reduce more than the others"}'
  [dataloader_stall]='{"verdict": "problem", "culprits": [1], "note": "rank 1 DataLoader worker blocks on one sample"}'
  [wrong_size]='{"verdict": "problem", "culprits": [1], "note": "rank 1 all_reduces 65 elements where the others reduce 64"}'
  [pipeline_sleep]='{"verdict": "problem", "culprits": [2], "note": "Schedule1F1B over 4 stages; the stage of rank 2 sleeps in stage_forward"}'
  [debug_server_stall]='{"verdict": "problem", "culprits": [2], "note": "rank 2 sleeps in stage_forward; the debug server dump_dir is kept"}'
  [pipeline_healthy]='{"verdict": "healthy", "culprits": []}'
  [gpipe_sleep]='{"verdict": "problem", "culprits": [1], "note": "ScheduleGPipe over 4 stages; the stage of rank 1 sleeps in stage_forward"}'
  [sigkill_rank]='{"verdict": "problem", "culprits": [3], "note": "rank 3 is SIGKILLed at step 2"}'
  [gil_held]='{"verdict": "problem", "culprits": [2], "note": "rank 2 holds the GIL in a regular expression"}'
  [ddp_healthy_8]='{"verdict": "healthy", "culprits": []}'
  [fsdp2_sleep]='{"verdict": "problem", "culprits": [1], "note": "FSDP2; rank 1 sleeps in stage_forward"}'
  [dataloader_healthy]='{"verdict": "healthy", "culprits": []}'
  [debug_server_healthy]='{"verdict": "healthy", "culprits": []}'
  [fsdp2_healthy]='{"verdict": "healthy", "culprits": []}'
  [ddp_skip_collective_8]='{"verdict": "problem", "culprits": [2], "note": "8 ranks; rank 2 skips the loss all_reduce at the last step"}'
  [dataloader_stall_8]='{"verdict": "problem", "culprits": [1], "note": "8 ranks; rank 1 DataLoader worker blocks on one sample"}'
  [fsdp2_sleep_8]='{"verdict": "problem", "culprits": [1], "note": "8 ranks, FSDP2; rank 1 sleeps in stage_forward"}'
  [extra_collective_8]='{"verdict": "problem", "culprits": [3], "note": "8 ranks; rank 3 makes one all_reduce more"}'
  [pipeline_sleep_8]='{"verdict": "problem", "culprits": [5], "note": "Schedule1F1B over 8 stages; the stage of rank 5 sleeps in stage_forward"}'
  [interleaved_healthy]='{"verdict": "healthy", "culprits": []}'
  [interleaved_sleep]='{"verdict": "problem", "culprits": [2], "note": "ScheduleInterleaved1F1B, 2 stages a rank; rank 2 sleeps in stage_forward"}'
  [subgroup_healthy]='{"verdict": "healthy", "culprits": []}'
  [subgroup_extra]='{"verdict": "problem", "culprits": [4], "note": "rank 4 makes one all_reduce more on its subgroup [0,2,4,6]"}'
  [fsdp2_tp_sleep]='{"verdict": "problem", "culprits": [3], "note": "FSDP2 + TP (dp 2 x tp 2); rank 3 sleeps in its forward"}'
  [fsdp2_tp_healthy_8]='{"verdict": "healthy", "culprits": []}'
  [tp_raise]='{"verdict": "problem", "culprits": [1], "note": "TP over 4 ranks; rank 1 raises in its forward and exits without a dump"}'
  [pipeline_raise]='{"verdict": "problem", "culprits": [1], "note": "Schedule1F1B over 4 stages; the stage of rank 1 raises in its forward"}'
  [fsdp2_dataloader_stall]='{"verdict": "problem", "culprits": [2], "note": "FSDP2; rank 2 DataLoader worker blocks on one sample"}'
  [ddp_healthy_16]='{"verdict": "healthy", "culprits": []}'
  [ddp_skip_collective_16]='{"verdict": "problem", "culprits": [2], "note": "16 ranks; rank 2 skips the loss all_reduce at the last step"}'
  [sigkill_rank_8]='{"verdict": "problem", "culprits": [3], "note": "8 ranks; rank 3 is SIGKILLed at step 2"}'
  [gil_held_8]='{"verdict": "problem", "culprits": [2], "note": "8 ranks; rank 2 holds the GIL in a regular expression"}'
  [raise_no_dump_8]='{"verdict": "problem", "culprits": [3], "note": "8 ranks; rank 3 raises in backward and exits without a dump"}'
  [wrong_size_8]='{"verdict": "problem", "culprits": [1], "note": "8 ranks; rank 1 all_reduces 65 elements where the others reduce 64"}')
# Scenarios that keep stacks (py-spy on PATH, from the venv).
declare -A STACKS=([ddp_healthy]=1 [ddp_skip_collective]=1 [ddp_skip_abort]=1 [extra_collective]=1 [dataloader_stall]=1 [wrong_size]=1
  [pipeline_sleep]=1 [pipeline_healthy]=1 [gpipe_sleep]=1 [sigkill_rank]=1 [gil_held]=1 [ddp_healthy_8]=1
  [fsdp2_sleep]=1 [dataloader_healthy]=1 [fsdp2_healthy]=1 [ddp_skip_collective_8]=1 [dataloader_stall_8]=1
  [fsdp2_sleep_8]=1 [extra_collective_8]=1 [pipeline_sleep_8]=1
  [interleaved_healthy]=1 [interleaved_sleep]=1 [subgroup_healthy]=1 [subgroup_extra]=1 [fsdp2_tp_sleep]=1 [fsdp2_tp_healthy_8]=1 [tp_raise]=1 [pipeline_raise]=1 [fsdp2_dataloader_stall]=1 [ddp_healthy_16]=1 [ddp_skip_collective_16]=1 [sigkill_rank_8]=1 [gil_held_8]=1 [raise_no_dump_8]=1 [wrong_size_8]=1)
SCEN=("$@"); [ ${#SCEN[@]} -eq 0 ] && SCEN=(fsdp2_tp_healthy dtensor_scatter subgroup_hang raise_no_dump)
for s in "${SCEN[@]}"; do
  work=$(mktemp -d); dir=$OUT/$s
  rm -rf "$dir"; mkdir -p "$dir/dumps"
  echo "== $s (${NPROC[$s]} ranks)"
  stacks=; [ -n "${STACKS[$s]:-}" ] && { stacks=$work/stacks; mkdir -p "$stacks"; }
  [[ "$s" = debug_server_* ]] && mkdir -p "$work/debug"
  PATH=$(dirname "$PY"):$PATH STACKS_DIR=$stacks DEBUG_DUMP_DIR=$work/debug \
  DUMP_AFTER_S=${DUMP_AFTER[$s]:-6} TORCH_FR_BUFFER_SIZE=2000 TORCH_FR_DUMP_TEMP_FILE=$work/comm_lib_trace_rank_ OMP_NUM_THREADS=1 \
    timeout 180 "$PY" -m torch.distributed.run --standalone --nproc-per-node "${NPROC[$s]}" --tee 3 \
    "$HERE/torch_job.py" "$s" > "$dir/job.log" 2>&1
  echo "torchrun exit $?"
  cp "$work"/comm_lib_trace_rank_* "$dir/dumps/" 2>/dev/null
  [ -n "$stacks" ] && cp -r "$stacks" "$dir/stacks"
  if [ -d "$work/debug" ]; then  # the debug server's periodic files: its stacks and what it said of them
    mkdir -p "$dir/debug_dump"; cp "$work"/debug/* "$dir/debug_dump/" 2>/dev/null
    for kind in $(ls "$dir/debug_dump" | sed 's/_[0-9]*_[0-9]*\.txt$//' | sort -u); do  # the last 3 of each kind
      ls "$dir/debug_dump/${kind}"_*.txt | sort | head -n -3 | xargs -r rm -f
    done
  fi
  # Paths of this machine in stacks and logs become relative or placeholders: the script, the venv,
  # the interpreter, the host name.
  pyhome=$(dirname "$(dirname "$(readlink -f "$PY")")")
  for f in "$dir/job.log" $(find "$dir" -name '*.txt'); do
    sed -i -e "s|$work|<workdir>|g" -e "s|$(dirname "$(dirname "$PY")")|<venv>|g" -e "s|$HERE/|scripts/torch-jobs/|g" \
      -e "s|$pyhome|<python>|g" -e "s|$(hostname)|<host>|g" "$f"
  done
  # the venv's path and this machine's temporary folder are not part of the fixture
  sed -i -e "s|$work|<workdir>|g" -e "s|$(dirname "$(dirname "$PY")")|<venv>|g" -e "s|$HERE/|scripts/torch-jobs/|g" "$dir/job.log"
  echo "${TRUTH[$s]}" > "$dir/truth.json"
  rmdir "$dir/dumps" "$dir/stacks" 2>/dev/null  # a job that crashed before any dump or stack
  ls "$dir/dumps"; rm -rf "$work"
done
