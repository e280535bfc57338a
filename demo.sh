#!/usr/bin/env bash
# demo.sh — installs what is missing, builds, and runs the main job: GPT-2 (tiny) trained on the
# shipped tinyshakespeare shard with tensor parallelism over 2 MPI ranks, instrumented by the probe;
# then shows what rankscope reads from the run directory.
set -euo pipefail
cd "$(dirname "$0")"
RANKSCOPE_NO_BROWSER=1 ./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# Only what the demo runs (the trainer and the two tools), not the tests and benchmarks: ./test.sh
# builds those.
cmake --build build -j"$(nproc)" --target gpt2-train rankscope hangdoctor

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
run=runs/demo-$(date +%Y%m%d-%H%M%S)
steps=${STEPS:-300}
echo "== training: mpirun -np 2 gpt2-train --model tiny --tp 2 --steps $steps --run-dir $run"
mpirun -np 2 build/bin/gpt2-train --model tiny --tp 2 --batch 8 --seq-len 64 --steps "$steps" \
  --val-every 100 --sample 64 --run-dir "$run"
echo
echo "== rankscope inspect $run"
build/bin/rankscope inspect "$run" --last 2
echo
echo "== hangdoctor $run"
build/bin/hangdoctor "$run" || true
echo
echo "== rankscope skew $run --html $run/skew.html"
build/bin/rankscope skew "$run" --html "$run/skew.html"
echo
echo "run directory: $run (metrics.jsonl has the loss curve; open skew.html in a browser)"
