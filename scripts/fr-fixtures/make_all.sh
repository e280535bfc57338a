#!/usr/bin/env bash
# Regenerates every fixture folder under tests/fixtures/torch_fr/gloo16/ (about 2 minutes a run on
# 2 cores; 16 rank processes at a time). Run from anywhere; PYTHON defaults to python3 and must have
# torch and megatron-core (versions in tests/fixtures/torch_fr/gloo16/README.md).
# Usage: scripts/fr-fixtures/make_all.sh [layout ...]   (default: tp4pp2 tp2pp4)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
py="${PYTHON:-python3}"
out="$root/tests/fixtures/torch_fr/gloo16"
layouts=("$@")
[ ${#layouts[@]} -eq 0 ] && layouts=(tp4pp2 tp2pp4)
for layout in "${layouts[@]}"; do
  for scenario in healthy gil_held rank_killed stage_stall a2a_count_mismatch lagging_rank; do
    echo "== $layout $scenario"
    "$py" "$here/gloo_megatron_job.py" --layout "$layout" --scenario "$scenario" \
      --out "$out/${layout}_${scenario}"
  done
done
