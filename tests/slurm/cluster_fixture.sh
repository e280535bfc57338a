#!/usr/bin/env bash
# cluster_fixture.sh — the ctest fixture around scripts/slurm-cluster.sh: `start SCRIPT DIR` starts the
# four-node cluster the slurm.* tests share (a cluster an interrupted run left in DIR is stopped first),
# `stop SCRIPT DIR` tears it down and checks that nothing is left. Exits 77 (ctest: skipped) with one
# line why where the machine cannot run slurmd.
# Is not: the cluster (scripts/slurm-cluster.sh) nor a scenario (multinode_test.sh).
set -euo pipefail
action=$1 script=$2 dir=$3
if ! why=$("$script" can-run); then
  echo "SKIPPED: this machine cannot run the four-node Slurm: $why"
  exit 77
fi
case $action in
  start)
    [[ ! -e $dir/slurm.conf ]] || "$script" stop "$dir"
    "$script" start "$dir" ;;
  stop)
    # stop fails where a process stays in a node's namespace; no daemon started from DIR either.
    "$script" stop "$dir"
    left=$(pgrep -a -f -- "(^|/)(munged|slurmctld|slurmd) .*$dir" || true)
    [[ -z $left ]] || { echo "FAIL: still running after stop: $left"; exit 1; }
    [[ ! -e $dir ]] || { echo "FAIL: $dir still there after stop"; exit 1; }
    echo "stopped: no daemon, node process or file left" ;;
  *) echo "usage: $0 start|stop SCRIPT DIR" >&2; exit 2 ;;
esac
