#!/usr/bin/env bash
# kineto_on_nodes_cli_test.sh — `rankscope import-kineto DIR --hosts FILE --exec T -o RUN`
# on this one machine, each "host" a folder (the --exec template cds into it, so DIR means a
# different disk on each, as on a cluster): h1 and h2 hold one trace each of the NCCL pair, h3 none
# (a node that ran no profiled rank), h4 cannot be reached. Expected: exit 1 (a node failed), h4
# named with its reason, both ranks imported, and the run's rank files equal to a local import's but
# for the run id; then skew reads it. Usage: kineto_on_nodes_cli_test.sh RANKSCOPE FIXTURES
set -euo pipefail
rankscope=$1 fixtures=$2
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
mkdir -p "$d/h1/traces" "$d/h2/traces" "$d/h3"
cp "$fixtures/nccl-2ranks/rank0.json" "$d/h2/traces/"
cp "$fixtures/nccl-2ranks/rank1.json" "$d/h1/traces/"
printf 'h1\nh2\nh3\n# a comment\nh4\n' >"$d/hosts"
rc=0
"$rankscope" import-kineto traces --hosts "$d/hosts" --exec "cd $d/{host} &&" -o "$d/remote" >"$d/out" 2>"$d/err" || rc=$?
cat "$d/out" "$d/err"
[[ $rc -eq 1 ]] || { echo "FAIL: exit $rc, expected 1 (h4 unreachable)"; exit 1; }
grep -q "read on 2 of 4 nodes" "$d/out" || { echo "FAIL: no 'read on 2 of 4 nodes'"; exit 1; }
grep -q "h3: no trace there" "$d/out" || { echo "FAIL: h3 not reported as holding no trace"; exit 1; }
grep -q "h4: no traces: .*can't cd" "$d/out" || { echo "FAIL: h4's reason not given"; exit 1; }
grep -q '"file": "h1:' "$d/remote/run.json" || { echo "FAIL: traces not named host:path in run.json"; exit 1; }
"$rankscope" import-kineto "$d/h2/traces/rank0.json" "$d/h1/traces/rank1.json" -o "$d/local" -q
local_id=$(sed -n 's/.*"run_id": "\([^"]*\)".*/\1/p' "$d/local/run.json")
remote_id=$(sed -n 's/.*"run_id": "\([^"]*\)".*/\1/p' "$d/remote/run.json")
[[ ${#local_id} -eq ${#remote_id} && -n $local_id ]] || { echo "FAIL: run ids '$local_id' '$remote_id'"; exit 1; }
for f in "$d"/local/rank*; do
  name=$(basename "$f")
  cmp <(sed "s/$local_id/$remote_id/g" "$f") "$d/remote/$name" || { echo "FAIL: $name differs from the local import's"; exit 1; }
done
"$rankscope" skew "$d/remote" | grep -q 'rank 1 arrives last' || { echo "FAIL: skew on the imported run"; exit 1; }
# Bad input: --exec without --hosts, a template without {host}.
! "$rankscope" import-kineto traces --exec 'ssh {host}' -o "$d/x" 2>"$d/err2" && grep -q -- "--exec goes with --hosts" "$d/err2"
! "$rankscope" import-kineto traces --hosts "$d/hosts" --exec 'ssh' -o "$d/x" 2>"$d/err3" && grep -q "has no {host}" "$d/err3"
echo "ok"
