#!/usr/bin/env bash
# multinode_test.sh SCENARIO — one scenario of the multi-node acceptance on the four-node Slurm that the
# ctest fixture started (scripts/slurm-cluster.sh; RANKSCOPE_SLURM_DIR, SLURM_CONF): a 16-rank TP=2
# gpt2-train job, 4 ranks on each of n1..n4 (ranks 0-3 on n1, 4-7 on n2, 8-11 on n3, 12-15 on n4),
# each node's run directory local (/scratch/run inside the node's namespace; this head sees none of
# it), a fault, and `hangdoctor /scratch/run --slurm JOB --json` run from the head, outside every node.
#
# Scenarios: lagging_rank_n3 sigkill_rank_n2 sigstop_rank_n4 node_stopped_n2 slurmd_stopped_n4
# (faults), bad_streams_n2_n3 no_such_job other_users_job srun_missing (bad input), and
# kineto_import_n1_n3 (`rankscope import-kineto --slurm`: traces on two nodes' disks).
# Exit 0 pass, 1 fail, 77 skipped.
# Is not: the cluster (scripts/slurm-cluster.sh) nor the fixture (cluster_fixture.sh). Faults are
# injected from the head through /proc (the nodes share this machine's pid namespace): that is the
# test's hand, not evidence; hangdoctor sees the nodes only through srun.
set -euo pipefail
scenario=${1:?usage: multinode_test.sh SCENARIO}
: "${RANKSCOPE_SLURM_DIR:?}" "${RANKSCOPE_BIN:?}" "${RANKSCOPE_WORK:?}"
export SLURM_CONF=$RANKSCOPE_SLURM_DIR/slurm.conf

skip() { echo "SKIPPED: $*"; exit 77; }
# The launcher's own failures, not ours, after which the job is gone before hangdoctor looks; such a
# run is tried once more, and says so (a second failure fails: a trainer that cannot start fails twice):
# - Open MPI 4's mpirun can die of SIGSEGV in orte_show_help_recv when a killed rank's help message
#   arrives after the kill (about 1 run in 5 at load 10);
# - a job that ended before the scenario did anything to it: 16 ranks starting on 2 busy cores, Open
#   MPI's TCP connections can time out ("connect() ... failed: Operation now in progress (115)",
#   open-mpi/ompi#11508: an overloaded host), and a rank dies in MPI's start-up (CI, once).
job_ended_early=""
fail() {
  if [[ -z ${RANKSCOPE_SLURM_RETRIED:-} && $BASHPID == "$$" ]]; then
    local why=""
    if [[ $scenario == sigkill_rank_n2 ]] && grep -q 'orte_show_help_recv' "$work/job.out" 2>/dev/null; then
      why="mpirun itself crashed (Open MPI's orte_show_help_recv)"
    elif [[ -n $job_ended_early ]]; then
      why="the job ended before the scenario touched it ($(grep -m1 -oE 'connect\(\) to [^ ]+ failed|Segmentation fault|Killed' "$work/job.out" 2>/dev/null || echo 'see job.out'))"
    fi
    if [[ -n $why ]]; then
      echo "[$scenario] $why; its output:" >&2
      tail -20 "$work/job.out" >&2 || true
      echo "[$scenario] trying the scenario once more" >&2
      trap - EXIT
      cleanup
      RANKSCOPE_SLURM_RETRIED=1 exec bash "$0" "$scenario"
    fi
  fi
  echo "FAIL [$scenario]: $*" >&2
  exit 1
}
log() { echo "[$scenario] $*"; }
[[ -e $SLURM_CONF ]] || skip "no cluster in $RANKSCOPE_SLURM_DIR (the slurm.cluster_start fixture started none)"

work=$RANKSCOPE_WORK/$scenario
rm -rf "$work"
mkdir -p "$work"
chmod 755 "$RANKSCOPE_WORK" "$work"  # another user's job is submitted from here

submitted_jobs=() stopped_pids=() created_user=""
cleanup() {
  local p j
  for p in "${stopped_pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; done
  ((${#submitted_jobs[@]} == 0)) || scancel "${submitted_jobs[@]}" 2>/dev/null || true
  # The next scenario wants all four nodes idle.
  for j in "${submitted_jobs[@]}"; do
    for _ in $(seq 150); do [[ -z $(squeue -h -j "$j" 2>/dev/null) ]] && break; sleep 0.2; done
  done
  [[ -z $created_user ]] || userdel "$created_user" 2>/dev/null || true
}
trap cleanup EXIT

# --- the job -----------------------------------------------------------------------------------------

# submit_training LAUNCHER [gpt2-train flags...]: sets $job (no subshell: cleanup must know it).
# LAUNCHER srun: `srun --mpi=pmix` (Debian's OpenMPI has no PMI2). LAUNCHER mpirun: OpenMPI's mpirun
# inside the allocation (its daemons start through srun): Slurm's PMIx plugin kills the whole step
# when one task dies, so a SIGKILLed rank with survivors needs mpirun with orte_enable_recovery, as
# on clusters that launch that way.
submit_training() {
  local launcher=$1
  shift
  local train=("$RANKSCOPE_BIN/gpt2-train" --model tiny --vocab-size 512 --data synthetic:zipf --batch 2
    --seq-len 32 --tp 2 --steps 100000 --run-dir /scratch/run --watchdog-timeout 600 "$@")
  local launch
  case $launcher in
    srun) launch="srun --mpi=pmix" ;;
    mpirun) launch="mpirun --mca orte_enable_recovery 1 --bind-to none -x OMPI_MCA_btl -x OMPI_MCA_btl_tcp_if_include -x OMPI_MCA_mpi_yield_when_idle -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS" ;;
    *) fail "unknown launcher $launcher" ;;
  esac
  cat >"$work/job.sh" <<EOF
#!/bin/bash
# OpenMPI over TCP: with vader (shared memory) ranks on different "nodes" of this one machine crash in
# mca_btl_vader_poll_handle_frag. Every node is 127.0.0.1: TCP over loopback only (ranks that tried
# this machine's own external address failed to connect now and then, and the job died before the
# fault). Ranks yield when idle: 16 ranks share 2 cores.
export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_mpi_yield_when_idle=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Each node's run directory from an earlier job goes first.
srun --ntasks-per-node=1 rm -rf /scratch/run
exec $launch $(printf '%q ' "${train[@]}")
EOF
  job=$(cd "$work" && sbatch --parsable -N 4 --ntasks-per-node=4 -J "rs-$scenario" -o "$work/job.out" "$work/job.sh") ||
    fail "sbatch refused the job"
  submitted_jobs+=("$job")
}

# wait_in_steps JOB STEP: rank 0 printed step STEP, so every rank is in the training steps (each step
# has TP and DP collectives over all ranks).
wait_in_steps() {
  local job=$1 step=$2 end=$((SECONDS + 120))
  while ((SECONDS < end)); do
    if grep -qE "^step ([0-9]+)/" "$work/job.out" 2>/dev/null &&
      (($(grep -oE '^step [0-9]+' "$work/job.out" | tail -1 | cut -d' ' -f2) >= step)); then
      return 0
    fi
    if [[ -z $(squeue -h -j "$job" 2>/dev/null) ]]; then
      job_ended_early=1
      fail "job $job ended before step $step: $(tail -20 "$work/job.out")"
    fi
    sleep 0.2
  done
  fail "job $job did not reach step $step in 120 s: $(tail -20 "$work/job.out" 2>/dev/null)"
}

# rank_pid JOB RANK: the rank's process, found by its environment (srun: SLURM_PROCID; mpirun:
# OMPI_COMM_WORLD_RANK).
rank_pid() {
  local job=$1 rank=$2 p env
  # Only the trainers' environments: reading every process's is seconds on a loaded machine.
  for p in $(pgrep -x gpt2-train); do
    env=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null) || continue
    grep -qx "SLURM_JOB_ID=$job" <<<"$env" || continue
    if grep -q '^OMPI_COMM_WORLD_RANK=' <<<"$env"; then
      grep -qx "OMPI_COMM_WORLD_RANK=$rank" <<<"$env" || continue
    else
      grep -qx "SLURM_PROCID=$rank" <<<"$env" || continue
    fi
    echo "$p"
    return 0
  done
  fail "no process of rank $rank of job $job"
}

# The node a process runs on, as its slurmd named it.
pid_node() { tr '\0' '\n' <"/proc/$1/environ" | sed -n 's/^SLURMD_NODENAME=//p'; }

# rank_on_node JOB RANK NODE: the rank's pid, after checking it runs where the scenario says.
rank_on_node() {
  local pid node
  pid=$(rank_pid "$1" "$2")
  node=$(pid_node "$pid")
  [[ $node == "$3" ]] || fail "rank $2 runs on '$node', not $3: the block layout changed"
  echo "$pid"
}

# --- the diagnosis -----------------------------------------------------------------------------------

# Nodes that have not answered by then are reported unreachable.
gather_deadline_s=8

# diagnose JOB: hangdoctor from the head; its text in $work/diagnosis.txt, its JSON in
# $work/diagnosis.json, what it gathered in $work/gathered (gather.json: nodes asked, answered, why
# not), its exit status in $diag_rc, its wall time in $diag_s.
diagnose() {
  local job=$1 t0 t1
  rm -f "$work/diagnosis.json"
  t0=$(date +%s.%N)
  diag_rc=0
  # A hung hangdoctor is itself a failure: the guard is far above any deadline it keeps.
  rm -rf "$work/gathered"
  timeout 120 "$RANKSCOPE_BIN/hangdoctor" /scratch/run --slurm "$job" --deadline "$gather_deadline_s" \
    --gather-dir "$work/gathered" --json "$work/diagnosis.json" >"$work/diagnosis.txt" 2>&1 || diag_rc=$?
  t1=$(date +%s.%N)
  diag_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
  ((diag_rc != 124)) || fail "hangdoctor --slurm $job did not return in 120 s: $(cat "$work/diagnosis.txt")"
}

# poll_until JOB JQ_FILTER SECONDS: diagnoses until the JSON verdict satisfies the filter.
poll_until() {
  local job=$1 filter=$2 seconds=$3 end=$((SECONDS + $3))
  while :; do
    diagnose "$job"
    if [[ -s $work/diagnosis.json ]] && jq -e "$filter" "$work/diagnosis.json" >/dev/null 2>&1; then
      log "verdict after ${diag_s} s of gather+diagnosis: $(head -2 "$work/diagnosis.txt" | tr '\n' ' ')"
      return 0
    fi
    ((SECONDS < end)) || fail "no verdict with $filter in $seconds s; last diagnosis (exit $diag_rc):
$(cat "$work/diagnosis.txt")"
    sleep 1
  done
}

# expect JQ_FILTER WHAT: the last JSON verdict satisfies the filter.
expect() {
  jq -e "$1" "$work/diagnosis.json" >/dev/null ||
    fail "expected $2 ($1); diagnosis:
$(cat "$work/diagnosis.txt")"
}

# expect_rank RANK HOST STATE: ranks[] names the rank's host and state.
expect_rank() {
  expect ".ranks[] | select(.rank == $1) | .host == \"$2\" and .state == \"$3\"" "rank $1 on $2, $3"
}

# expect_bad_input WORDS...: hangdoctor refused (exit 2) with an error naming each word (a regex
# matched as a whole word).
expect_bad_input() {
  ((diag_rc == 2)) || fail "expected exit 2 (bad input), got $diag_rc: $(cat "$work/diagnosis.txt")"
  local w
  for w in "$@"; do
    grep -qiwE -- "$w" "$work/diagnosis.txt" || fail "the error does not say '$w': $(cat "$work/diagnosis.txt")"
  done
  log "error: $(head -3 "$work/diagnosis.txt")"
}

# --- the scenarios -----------------------------------------------------------------------------------

case $scenario in
  lagging_rank_n3)
    # Rank 9 (on n3) blocks on entering forward/embed at step 6; its peers wait for it in a collective.
    submit_training srun --inject stall:rank=9,range=forward/embed,step=6
    wait_in_steps "$job" 2
    rank_on_node "$job" 9 n3 >/dev/null
    poll_until "$job" '.kind == "lagging_rank"' 90
    expect '.gather.nodes_asked == 4 and .gather.nodes_answered == 4' "all four nodes answered"
    head -1 "$work/diagnosis.txt" | grep -q '4 of 4 nodes' || fail "first line does not say 4 of 4 nodes answered"
    expect '.verdict == "hang" and .culprit_ranks == [9]' "rank 9 the one lagging rank"
    expect '.culprits == [{"rank": 9, "host": "n3"}] and .node_findings == []' "rank 9 on n3 the culprit, no node finding"
    expect_rank 9 n3 running
    expect '.ranks[] | select(.rank == 9) | .alive == true' "rank 9 alive (checked on n3)"
    # One job step for the four nodes: step ids count up per job, so a probe step before and after
    # one more diagnosis tells how many steps the gather created.
    step_id() { srun --jobid "$job" --overlap -N 1 -n 1 --quiet printenv SLURM_STEP_ID; }
    before=$(step_id)
    diagnose "$job"
    after=$(step_id)
    log "job steps created by one gather of 4 nodes: $((after - before - 1)) (step ids $before -> $after)"
    ((after - before - 1 == 1)) || fail "the gather created $((after - before - 1)) job steps, not 1"
    expect '.verdict == "hang" and .culprit_ranks == [9] and .gather.nodes_answered == 4' "the same verdict from one step"
    ;;
  sigkill_rank_n2)
    submit_training mpirun
    wait_in_steps "$job" 3
    pid=$(rank_on_node "$job" 6 n2)
    kill -KILL "$pid"
    poll_until "$job" '.kind == "rank_dead"' 90
    expect '.verdict == "crash" and .culprit_ranks == [6]' "rank 6 the dead rank"
    expect '.culprits == [{"rank": 6, "host": "n2"}]' "rank 6 on n2 the culprit"
    expect_rank 6 n2 dead
    expect '.ranks[] | select(.rank == 6) | .alive == false' "rank 6's process gone (checked on n2)"
    ;;
  sigstop_rank_n4)
    submit_training srun
    wait_in_steps "$job" 3
    pid=$(rank_on_node "$job" 13 n4)
    stopped_pids+=("$pid")
    kill -STOP "$pid"
    poll_until "$job" '.kind == "rank_frozen"' 90
    expect '.verdict == "hang" and .culprit_ranks == [13]' "rank 13 the frozen rank"
    expect '.culprits == [{"rank": 13, "host": "n4"}] and .node_findings == []' "rank 13 on n4 the culprit, no node finding"
    expect_rank 13 n4 frozen
    expect '.ranks[] | select(.rank == 13) | .os_state == "stopped"' "rank 13 stopped (SIGSTOP)"
    ;;
  node_stopped_n2)
    submit_training srun
    wait_in_steps "$job" 3
    node_pids=()
    for r in 4 5 6 7; do node_pids+=("$(rank_on_node "$job" "$r" n2)"); done
    stopped_pids+=("${node_pids[@]}")
    kill -STOP "${node_pids[@]}"
    poll_until "$job" '[.ranks[] | select(.state == "frozen") | .rank] == [4, 5, 6, 7]' 90
    expect '.verdict == "hang" and (.culprit_ranks | sort) == [4, 5, 6, 7]' "ranks 4-7 the culprits"
    for r in 4 5 6 7; do expect_rank "$r" n2 frozen; done
    # One node problem, not four culprits: the headline and the node findings name the node.
    expect '.headline | test("node n2")' "the headline naming node n2"
    expect '.node_findings | length == 1 and .[0].host == "n2" and .[0].ranks == [4, 5, 6, 7] and
            .[0].state == "frozen" and .[0].os_state == "stopped"' "one node finding: n2, ranks 4-7 stopped"
    ;;
  slurmd_stopped_n4)
    submit_training srun
    wait_in_steps "$job" 3
    slurmd_pid=$(cat "$RANKSCOPE_SLURM_DIR/run/slurmd-n4.pid")
    stopped_pids+=("$slurmd_pid")
    kill -STOP "$slurmd_pid"
    diagnose "$job"
    log "gather with n4's slurmd stopped returned in ${diag_s} s (exit $diag_rc): $(head -2 "$work/diagnosis.txt" | tr '\n' ' ')"
    [[ -s $work/diagnosis.json ]] || fail "no JSON verdict: $(cat "$work/diagnosis.txt")"
    expect '.gather.nodes_asked == 4 and .gather.nodes_answered == 3' "3 of 4 nodes answered"
    head -1 "$work/diagnosis.txt" | grep -q '3 of 4 nodes' || fail "first line does not say 3 of 4 nodes answered"
    expect '.gather.findings | any(test("n4.*unreachable.*12-15"))' "n4 unreachable with its ranks 12-15"
    # The gather stopped waiting for n4 at its deadline (slack: a loaded machine's process start-up).
    expect ".gather.seconds < $gather_deadline_s + 5" "the gather ending by its deadline"
    jq -e '[.nodes[] | select(.answered | not) | .host] == ["n4"] and
           (.nodes[] | select(.host == "n4") | .missing_ranks) == [12, 13, 14, 15]' "$work/gathered/gather.json" >/dev/null ||
      fail "gather.json does not record n4 alone unreachable with ranks 12-15: $(cat "$work/gathered/gather.json")"
    ;;
  bad_streams_n2_n3)
    # The nodes run this instead of rankscope: n2 answers with random bytes, n3 with its snapshot cut
    # short (300 bytes: a node's rank summaries are a few kB at most), n1 and n4 with the real one.
    submit_training srun
    wait_in_steps "$job" 3
    cat >"$work/rankscope-on-nodes" <<EOF
#!/bin/bash
case \$(hostname) in
  n2) head -c 4096 /dev/urandom ;;
  n3) "$RANKSCOPE_BIN/rankscope" "\$@" | head -c 300 ;;
  *) exec "$RANKSCOPE_BIN/rankscope" "\$@" ;;
esac
EOF
    chmod 755 "$work/rankscope-on-nodes"
    diag_rc=0
    timeout 120 "$RANKSCOPE_BIN/hangdoctor" /scratch/run --slurm "$job" --deadline "$gather_deadline_s" \
      --remote-rankscope "$work/rankscope-on-nodes" --gather-dir "$work/gathered" --json "$work/diagnosis.json" \
      >"$work/diagnosis.txt" 2>&1 || diag_rc=$?
    ((diag_rc == 0 || diag_rc == 1)) || fail "hangdoctor exit $diag_rc: $(cat "$work/diagnosis.txt")"
    log "$(head -4 "$work/diagnosis.txt" | tr '\n' ' ')"
    expect '.gather.nodes_asked == 4 and .gather.nodes_answered == 2' "2 of 4 nodes answered"
    jq -e '[.nodes[] | select(.answered | not) | .host] == ["n2", "n3"] and
           all(.nodes[] | select(.answered | not); .reason != "")' "$work/gathered/gather.json" >/dev/null ||
      fail "gather.json does not record n2 and n3 as failed with a reason: $(cat "$work/gathered/gather.json")"
    # Each failed node is named with its own ranks, none of which arrived (n3's stream broke before
    # its first recorder).
    jq -e '(.nodes[] | select(.host == "n2") | .missing_ranks) == [4, 5, 6, 7] and
           (.nodes[] | select(.host == "n3") | .missing_ranks) == [8, 9, 10, 11]' "$work/gathered/gather.json" >/dev/null ||
      fail "gather.json does not name n2's ranks 4-7 and n3's ranks 8-11 as unseen: $(jq -c '.nodes' "$work/gathered/gather.json")"
    # Nothing lost: the ranks of the nodes that answered are all there, read from their recorders.
    expect '[.ranks[] | select(.host == "n1" or .host == "n4") | .rank] == [0, 1, 2, 3, 12, 13, 14, 15]' \
      "ranks 0-3 (n1) and 12-15 (n4) read"
    ;;
  no_such_job)
    diagnose 4242424
    expect_bad_input 4242424
    ;;
  other_users_job)
    other=rankscope-slurm-other
    if ! id "$other" >/dev/null 2>&1; then
      useradd --system --no-create-home --shell /usr/sbin/nologin "$other"
      created_user=$other
    fi
    job=$(cd "$work" && runuser -u "$other" -- sbatch --parsable -N 1 -o /dev/null -J rs-other --wrap 'sleep 300') ||
      fail "sbatch as $other refused"
    submitted_jobs+=("$job")
    for _ in $(seq 150); do [[ $(squeue -h -j "$job" -o %t) == R ]] && break; sleep 0.2; done
    # Neither root nor the owner: `nobody` asks about the other user's job.
    diag_rc=0
    runuser -u nobody -- timeout 120 "$RANKSCOPE_BIN/hangdoctor" /scratch/run --slurm "$job" --json - \
      >"$work/diagnosis.txt" 2>&1 || diag_rc=$?
    expect_bad_input "$job" "permission|denied|owner"
    ;;
  srun_missing)
    # Slurm's query commands are there, srun is not.
    mkdir "$work/bin"
    for tool in squeue scontrol sinfo; do ln -s "$(command -v "$tool")" "$work/bin/$tool"; done
    diag_rc=0
    env PATH="$work/bin" "$RANKSCOPE_BIN/hangdoctor" /scratch/run --slurm 1 --json - >"$work/diagnosis.txt" 2>&1 ||
      diag_rc=$?
    expect_bad_input srun PATH
    ;;
  kineto_import_n1_n3)
    # Profiler traces on the nodes' own disks, imported from the head. The real 2-rank
    # PyTorch pair (tests/fixtures/kineto/torch-cpu-gloo-2ranks): rank 0's trace on n1, rank 1's on n3,
    # none on n2 and n4 (no profiled rank there). Each node's /scratch is its own folder.
    fixtures=$(cd "$(dirname "$0")/../fixtures/kineto/torch-cpu-gloo-2ranks" && pwd)
    for n in n1 n2 n3 n4; do rm -rf "$RANKSCOPE_SLURM_DIR/node/$n/traces"; done
    mkdir -p "$RANKSCOPE_SLURM_DIR/node/n1/traces" "$RANKSCOPE_SLURM_DIR/node/n3/traces"
    cp "$fixtures/rank0.json.gz" "$RANKSCOPE_SLURM_DIR/node/n1/traces/"
    cp "$fixtures/rank1.json.gz" "$RANKSCOPE_SLURM_DIR/node/n3/traces/"
    job=$(cd "$work" && sbatch --parsable -N 4 --ntasks-per-node=1 -J "rs-$scenario" -o "$work/job.out" --wrap 'sleep 600') ||
      fail "sbatch refused the job"
    submitted_jobs+=("$job")
    for _ in $(seq 300); do [[ $(squeue -h -j "$job" -o %t) == R ]] && break; sleep 0.2; done
    [[ $(squeue -h -j "$job" -o %t) == R ]] || fail "job $job not running after 60 s"
    import_rc=0
    "$RANKSCOPE_BIN/rankscope" import-kineto /scratch/traces --slurm "$job" -o "$work/remote" >"$work/import.txt" 2>&1 || import_rc=$?
    cat "$work/import.txt"
    [[ $import_rc -eq 0 ]] || fail "import-kineto --slurm exit $import_rc"
    grep -q "read on 2 of 4 nodes" "$work/import.txt" || fail "not 'read on 2 of 4 nodes'"
    grep -q "n2: no trace there" "$work/import.txt" || fail "n2 not reported as holding no trace"
    grep -q "n1: 1 trace, " "$work/import.txt" || fail "n1 not reported as sending its one trace"
    grep -q '"file": "n1:/scratch/traces/rank0.json.gz"' "$work/remote/run.json" || fail "rank 0's trace not named n1:/scratch/traces/rank0.json.gz"
    # The same files imported here (the head sees the nodes' folders through the cluster's directory).
    "$RANKSCOPE_BIN/rankscope" import-kineto "$RANKSCOPE_SLURM_DIR/node/n1/traces/rank0.json.gz" \
      "$RANKSCOPE_SLURM_DIR/node/n3/traces/rank1.json.gz" -o "$work/local" -q
    local_id=$(sed -n 's/.*"run_id": "\([^"]*\)".*/\1/p' "$work/local/run.json")
    remote_id=$(sed -n 's/.*"run_id": "\([^"]*\)".*/\1/p' "$work/remote/run.json")
    for f in "$work"/local/rank*; do
      cmp <(sed "s/$local_id/$remote_id/g" "$f") "$work/remote/$(basename "$f")" ||
        fail "$(basename "$f") of the import on the nodes differs from the local import's"
    done
    log "rank files equal to a local import's; $(grep '^read on' "$work/import.txt")"
    ;;
  *) fail "unknown scenario (see the header)" ;;
esac
log "passed"
