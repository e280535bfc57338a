#!/usr/bin/env bash
# check_bundle_test.sh — ctest gpu_checks.check_bundle: the GPU runner's `--dry-run --check-bundle DIR`
# on a tiny fake bundle (empty files in the bundle's layout, made in a temporary folder), without a
# GPU. Asserts: the runner needs what the GPU acceptance names (the layout tests, the MoE test and
# bench, the attention bench, both check scripts); every script it needs exists in the source tree
# (gpu-bundle.sh copies them from there); a complete layout passes; a missing file and a binary
# that is not executable each fail, naming the step and the file; the H200-only incident plan fits.
# Is not: a check of the real 40 MB bundle (scripts/gpu-bundle.sh runs the same check on it).
#   check_bundle_test.sh SOURCE_ROOT
set -u
root=${1:?usage: check_bundle_test.sh SOURCE_ROOT}
runner="$root/scripts/gpu-checks.sh"
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
fail=0
expect() {  # description, then a command that must succeed
  local what=$1; shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fail=1; fi
}

needs=$(bash "$runner" --print-needs) || { echo "FAIL: --print-needs"; exit 1; }
for f in tests/flash_tc_layout_test tests/trainer_mma_layout_test tests/cuda_moe_test tests/cuda_weight_mirror_test \
         bin/attention_gpu_bench bin/moe_expert_loop_bench bin/gpt2_gpu_bench moe_checks.sh attention_checks.sh \
         torch_gpt2.py make_speed_table.py root/usr/bin/mpirun; do
  expect "the runner needs $f" grep -qx "$f" <<<"$needs"
done
for f in $(grep -v / <<<"$needs"); do
  expect "$f is in the source tree" test -f "$root/bench/gpu/$f"
done

# The fake bundle: every needed file, executables executable.
while read -r f; do
  mkdir -p "$fake/$(dirname "$f")"
  : >"$fake/$f"
  case "$f" in bin/*|tests/*|root/usr/bin/*) chmod +x "$fake/$f" ;; esac
done <<<"$needs"

out=$(bash "$runner" --dry-run --check-bundle "$fake" 2>&1)
expect "a complete bundle passes" test $? -eq 0
expect "the plan runs the MoE and attention steps" grep -q "step moe-faults.*step attention" <<<"$(tr '\n' ' ' <<<"$out")"
expect "the default plan leaves the incident out" bash -c '! grep -q "step moe-incident" <<<"$1"' _ "$out"

rm "$fake/tests/cuda_moe_test"
chmod -x "$fake/bin/attention_gpu_bench"
out=$(bash "$runner" --dry-run --check-bundle "$fake" 2>&1)
expect "an incomplete bundle fails" test $? -ne 0
expect "the missing test binary is named with its step" grep -q "moe-tests: tests/cuda_moe_test" <<<"$out"
expect "a binary that is not executable is named" grep -q "attention: bin/attention_gpu_bench" <<<"$out"
expect "a file no step of --only needs is not asked for" \
  bash -c 'bash "$1" --dry-run --check-bundle "$2" --only "env parity sweep" >/dev/null' _ "$runner" "$fake"

out=$(bash "$runner" --dry-run --only "env moe-incident" 2>&1)
expect "the H200 incident call fits its deadline" test $? -eq 0
expect "the H200 incident call plans the incident" grep -q "step moe-incident" <<<"$out"
exit "$fail"
