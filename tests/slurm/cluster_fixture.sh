#!/usr/bin/env bash
# cluster_fixture.sh — the ctest fixture around scripts/slurm-cluster.sh: `start SCRIPT DIR` starts the
# four-node cluster the slurm.* tests share (a cluster an interrupted run left in DIR is stopped first),
# `stop SCRIPT DIR` tears it down. Exits 77 (ctest: skipped) with one line why where the machine
# cannot run slurmd.
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
    "$script" stop "$dir" ;;
  *) echo "usage: $0 start|stop SCRIPT DIR" >&2; exit 2 ;;
esac
