#!/usr/bin/env bash
# demo.sh — installs what is missing, builds, and runs the main job: GPT-2 (tiny) trained on the
# shipped tinyshakespeare shard with tensor parallelism over 2 MPI ranks, instrumented by the probe;
# then shows what rankscope reads from the run directory. About 3 minutes on a fresh 2-core machine
# (README); each phase prints the seconds since the start.
#
# The build is the quick one: only the trainer and the two tools, each target compiled as one unit,
# at -O1 without debug info (RANKSCOPE_QUICK_BUILD), CUDA only where a GPU can run it
# (RANKSCOPE_WITH_CUDA=AUTO). ./test.sh builds everything, every way CI does.
set -euo pipefail
cd "$(dirname "$0")"
phase() { echo "== $* (${SECONDS} s in)"; }

phase "packages"
./scripts/install-deps.sh --demo

phase "configure"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRANKSCOPE_QUICK_BUILD=ON \
  -DRANKSCOPE_WITH_CUDA=AUTO -DRANKSCOPE_BUILD_TESTS=OFF \
  -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=0 >/dev/null
phase "build: gpt2-train, rankscope, hangdoctor"
cmake --build build -j"$(nproc)" --target gpt2-train rankscope hangdoctor

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
run=runs/demo-$(date +%Y%m%d-%H%M%S)
steps=${STEPS:-60}
phase "training: mpirun -np 2 gpt2-train --model tiny --tp 2 --steps $steps --run-dir $run"
mpirun -np 2 build/bin/gpt2-train --model tiny --tp 2 --batch 8 --seq-len 64 --steps "$steps" \
  --val-every 30 --sample 32 --run-dir "$run"
echo
phase "rankscope inspect $run"
build/bin/rankscope inspect "$run" --last 2
echo
phase "hangdoctor $run"
# Exit 0 on this healthy, finished job; 1 would be a problem found, shown and passed over here.
build/bin/hangdoctor "$run" || true
echo
phase "rankscope skew $run --html $run/skew.html"
build/bin/rankscope skew "$run" --html "$run/skew.html"
echo
phase "done"
echo "run directory: $run (metrics.jsonl has the loss curve; open skew.html in a browser)"
