#!/usr/bin/env bash
# diff_cli_test.sh — `rankscope diff` as a user runs it: exit codes (0 no difference, 1 NEW differs,
# 2 bad input), the text, --json and --html files, --warmup-steps, and a clear message (no source
# location) for every kind of bad input, with the way in for other software's files.
# Usage: diff_cli_test.sh RANKSCOPE_BINARY. Exit 0 pass, 1 fail.
set -uo pipefail
rs=${1:?usage: diff_cli_test.sh RANKSCOPE_BINARY}
work=$(mktemp -d "${TMPDIR:-/tmp}/rs_diff_cli.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# expect_rc WANT DESCRIPTION CMD...: runs CMD, output to $work/out, checks its exit status.
expect_rc() {
  local want=$1 what=$2; shift 2
  "$@" >"$work/out" 2>&1
  local rc=$?
  [[ $rc == "$want" ]] || fail "$what: exit $rc, want $want: $(head -c 600 "$work/out")"
  if grep -qE '\.(cpp|h):[0-9]+' "$work/out"; then fail "$what: a source location in the user's message"; fi
}
has() { grep -qF -- "$1" "$work/out" || fail "$2: no '$1' in: $(head -c 600 "$work/out")"; }

"$rs" synth --ranks 4 --tp 2 --steps 20 -o "$work/base" >/dev/null || { echo "FAIL: synth"; exit 1; }
"$rs" synth --ranks 4 --tp 2 --steps 20 --seed 7 -o "$work/same" >/dev/null || { echo "FAIL: synth"; exit 1; }
"$rs" synth --ranks 4 --tp 2 --steps 20 --fault delay:rank=3,range=forward/block0/mlp,ms=30 -o "$work/slow" >/dev/null ||
  { echo "FAIL: synth"; exit 1; }

expect_rc 0 "--help" "$rs" diff --help
has "usage: rankscope diff BASE NEW" "--help"
expect_rc 0 "the same job twice" "$rs" diff "$work/base" "$work/same"
has "NO SIGNIFICANT DIFFERENCE" "the same job twice"
expect_rc 1 "a delay on rank 3" "$rs" diff "$work/base" "$work/slow" --json "$work/d.json" --html "$work/d.html"
has "SLOWER" "a delay on rank 3"
has "a new straggler: rank 3" "a delay on rank 3"
has "after 1 warm-up step" "a delay on rank 3"
python3 - "$work/d.json" <<'PY' || fail "--json: not the diff report"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["kind"] == "rankscope.diff" and d["significant"] is True, d.get("kind")
assert abs(sum(p["delta_ms"] for p in d["waterfall"]) - d["mean_delta_ms"]) < 1e-6
assert d["base"]["warmup_steps"] == 1 and d["ranks"]["match"] == "rank"
PY
[[ -s $work/d.html ]] && grep -q "rankscope.diff" "$work/d.html" || fail "--html: no report"
expect_rc 1 "--warmup-steps 0" "$rs" diff "$work/base" "$work/slow" --warmup-steps 0 --quiet
[[ ! -s $work/out ]] || fail "--quiet printed: $(head -c 300 "$work/out")"
"$rs" diff "$work/base" "$work/slow" --warmup-steps 0 --json - >"$work/stdout.json" 2>"$work/stderr.txt"  # exit 1: differs
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["base"]["warmup_steps"] == 0' "$work/stdout.json" ||
  fail "--json - with --warmup-steps 0: not JSON on stdout"
grep -q "SLOWER" "$work/stderr.txt" || fail "--json -: the text did not go to stderr"

expect_rc 2 "one run" "$rs" diff "$work/base"
has "usage:" "one run"
expect_rc 2 "three runs" "$rs" diff "$work/base" "$work/same" "$work/slow"
has "two runs, BASE and NEW" "three runs"
expect_rc 2 "an unknown option" "$rs" diff "$work/base" "$work/same" --fast
has "unknown option" "an unknown option"
expect_rc 2 "--warmup-steps x" "$rs" diff "$work/base" "$work/same" --warmup-steps x
has "--warmup-steps takes a whole number" "--warmup-steps x"
expect_rc 2 "a missing NEW" "$rs" diff "$work/base" "$work/no-such-run"
has "NEW: $work/no-such-run" "a missing NEW"
mkdir -p "$work/dumps" && printf 'not a run' >"$work/dumps/nccl_trace_rank_0"
expect_rc 2 "a folder of other software's files" "$rs" diff "$work/dumps" "$work/base"
has "hangdoctor DIR" "a folder of other software's files"
has "rankscope import-kineto" "a folder of other software's files"

echo "diff_cli: $failures failures"
((failures == 0))
