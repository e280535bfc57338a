#!/usr/bin/env bash
# slurm-cluster.sh — a real four-node Slurm on this one machine, for the multi-node tests and for
# trying `hangdoctor --slurm` by hand: one slurmctld and four slurmd n1..n4 on 127.0.0.1, each slurmd
# in its own mount and UTS namespace (hostname nK, a per-node directory bind-mounted at /scratch), so a
# job's `--run-dir /scratch/run` is node-local as on a real cluster and the head sees none of it.
#
#   scripts/slurm-cluster.sh start  DIR   write munge key + slurm.conf under DIR, start the daemons,
#                                         wait until 4 nodes are idle; prints `export SLURM_CONF=...`
#   scripts/slurm-cluster.sh status DIR   exit 0 when the 4 nodes answer (sinfo printed)
#   scripts/slurm-cluster.sh stop   DIR   cancel jobs, stop every daemon and every process left in a
#                                         node's namespace, remove DIR (RANKSCOPE_SLURM_KEEP=1 keeps
#                                         it for its logs) and /scratch if start created it
#   scripts/slurm-cluster.sh can-run      exit 0 when this machine can run it; else one line why
#
# Is: root only (slurmd, namespaces, bind mounts); nothing written under /etc (SLURM_CONF points the
# clients at DIR/slurm.conf; munged gets --key-file/--socket; slurm gets AuthInfo=socket=...). Paths
# outside DIR: the empty mount point /scratch, and a short private directory for everything that holds
# a UNIX socket (munge's socket, slurmd's spool with its step sockets, TmpFS where PMIx puts its
# own): a socket path holds at most 107 bytes, and DIR is often deep in a build tree. That directory
# is made by mktemp under RANKSCOPE_SLURM_SOCKETS (default /tmp), linked as DIR/sockets, and removed
# by stop. Ports: RANKSCOPE_SLURM_PORT (controller, default 16817) and the next four for the nodes.
# Is not: an installer (scripts/install-deps.sh installs slurmctld slurmd slurm-client munge unless
# RANKSCOPE_NO_SLURM=1) nor a test (tests/slurm/).
set -euo pipefail

nodes=(n1 n2 n3 n4)
ctld_port=${RANKSCOPE_SLURM_PORT:-16817}
mount_point=/scratch

die() { echo "slurm-cluster: $*" >&2; exit 1; }
# die_with_log LOG MESSAGE: dies with the log's last lines (a CI run shows why without the files).
die_with_log() { die "$2; the end of $1:
$(tail -n 15 "$1" 2>/dev/null)"; }

# Why this machine cannot run the cluster, or nothing when it can.
why_not() {
  [[ $(id -u) -eq 0 ]] || { echo "not root (slurmd, mount namespaces and bind mounts need root)"; return; }
  local b
  for b in slurmctld slurmd sbatch srun sinfo munged unshare; do
    command -v "$b" >/dev/null || { echo "$b not installed (scripts/install-deps.sh installs it unless RANKSCOPE_NO_SLURM=1)"; return; }
  done
  # What start does in each node's namespace: set its host name, bind-mount a directory.
  local probe_dir
  probe_dir=$(mktemp -d)
  if ! unshare -m -u --propagation private sh -c "hostname rs-probe && mount --bind '$probe_dir' '$probe_dir'" 2>/dev/null; then
    rmdir "$probe_dir"
    echo "cannot set a host name and bind-mount in new mount+UTS namespaces (unshare -m -u; a container without CAP_SYS_ADMIN?)"
    return
  fi
  rmdir "$probe_dir"
}

# The longest socket path under the short directory is PMIx's under TmpFS (tmp/<node>/ then about 24
# bytes: slurmd refused 110 bytes when TmpFS was 86 long); 64 leaves room for longer job ids.
max_socket_dir=64

# Makes the short private directory for sockets (DIR/sockets links to it) and echoes its path.
make_socket_dir() {
  local dir=$1 base=${RANKSCOPE_SLURM_SOCKETS:-/tmp} sockets
  sockets=$(mktemp -d "$base/rs-slurm.XXXXXX") || die "cannot make a directory for the cluster's sockets under $base"
  if ((${#sockets} > max_socket_dir)); then
    rmdir "$sockets"
    die "$sockets is too long a path for the cluster's UNIX sockets (at most $max_socket_dir bytes: a socket path holds 107); set RANKSCOPE_SLURM_SOCKETS to a shorter directory"
  fi
  # Non-root users (the permission test's) must reach the munge socket.
  chmod 755 "$sockets"
  ln -s "$sockets" "$dir/sockets"
  echo "$sockets"
}

write_config() {
  local dir=$1 sockets=$2 host
  host=$(hostname -s)
  mkdir -p "$dir"/{munge,ctld,log,run} "$sockets/munge" "${nodes[@]/#/$sockets/spool/}" "${nodes[@]/#/$sockets/tmp/}" \
    "${nodes[@]/#/$dir/node/}"
  # Non-root users (the permission test's) must reach the munge socket and read slurm.conf.
  chmod 755 "$dir" "$dir/munge" "$dir/run" "$sockets/munge"
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  local ports=() i
  for i in 1 2 3 4; do ports+=($((ctld_port + i))); done
  cat >"$dir/slurm.conf" <<EOF
# Written by scripts/slurm-cluster.sh: four nodes on one machine (see that script's header).
ClusterName=rankscope
SlurmctldHost=${host}(127.0.0.1)
SlurmctldPort=${ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=${sockets}/munge/munge.socket
StateSaveLocation=${dir}/ctld
SlurmctldPidFile=${dir}/run/slurmctld.pid
SlurmctldLogFile=${dir}/log/slurmctld.log
SlurmdSpoolDir=${sockets}/spool/%n
SlurmdPidFile=${dir}/run/slurmd-%n.pid
SlurmdLogFile=${dir}/log/slurmd-%n.log
# The nodes claim more CPUs than the machine has.
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
# PMIx keeps per-node temp dirs here; one per node or they collide.
TmpFS=${sockets}/tmp/%n
# Debian's OpenMPI has no PMI2.
MpiDefault=pmix
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmctldTimeout=30
# A node whose slurmd a test stops must not be declared DOWN (and its job killed) meanwhile.
SlurmdTimeout=300
MessageTimeout=5
InactiveLimit=0
KillWait=2
JobAcctGatherType=jobacct_gather/none
NodeName=n[1-4] NodeHostname=localhost NodeAddr=127.0.0.1 Port=[${ports[0]}-${ports[3]}] CPUs=4 State=UNKNOWN
PartitionName=debug Nodes=n[1-4] Default=YES MaxTime=INFINITE State=UP
EOF
}

start_node() {
  local dir=$1 node=$2
  # The node's own name and /scratch; slurmd daemonizes inside the namespace, and so do its job steps.
  unshare -m -u --propagation private sh -c "hostname $node && mount --bind '$dir/node/$node' $mount_point && \
    exec slurmd -N $node -f '$dir/slurm.conf'" || die_with_log "$dir/log/slurmd-$node.log" "slurmd $node did not start"
}

idle_nodes() { sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l; }

start() {
  local dir=$1 reason
  reason=$(why_not)
  [[ -z $reason ]] || die "cannot run here: $reason"
  [[ ! -e $dir/slurm.conf ]] || die "$dir already holds a cluster (stop it first)"
  dir=$(mkdir -p "$dir" && cd "$dir" && pwd)
  local sockets
  sockets=$(make_socket_dir "$dir")
  write_config "$dir" "$sockets"
  if [[ ! -d $mount_point ]]; then mkdir "$mount_point" && touch "$dir/created-mount-point"; fi
  export SLURM_CONF=$dir/slurm.conf
  munged --key-file="$dir/munge/munge.key" --socket="$sockets/munge/munge.socket" --pid-file="$dir/run/munged.pid" \
    --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed" --force ||
    die_with_log "$dir/log/munged.log" "munged did not start"
  slurmctld -f "$SLURM_CONF" || die_with_log "$dir/log/slurmctld.log" "slurmctld did not start"
  local node
  for node in "${nodes[@]}"; do start_node "$dir" "$node"; done
  # The node namespaces, so that stop can find every process left in them (job steps included).
  for node in "${nodes[@]}"; do
    local pid_file=$dir/run/slurmd-$node.pid
    for _ in $(seq 50); do [[ -s $pid_file ]] && break; sleep 0.1; done
    [[ -s $pid_file ]] || die_with_log "$dir/log/slurmd-$node.log" "slurmd $node wrote no pid file"
    readlink "/proc/$(cat "$pid_file")/ns/mnt" >>"$dir/run/node-namespaces"
  done
  local waited=0
  until [[ $(idle_nodes) -eq ${#nodes[@]} ]]; do
    ((waited++ < 300)) || die_with_log "$dir/log/slurmctld.log" "4 idle nodes not reached in 30 s: $(sinfo -h -N 2>&1 | tr '\n' ' ')"
    sleep 0.1
  done
  echo "export SLURM_CONF=$SLURM_CONF"
}

# Kills `pid` (ours: read from our pid files or found in our node namespaces) and waits for it to go.
kill_and_wait() {
  local pid=$1
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}

# The pids of the processes in a node's mount namespace (one find: a readlink per process is seconds
# on a loaded machine).
in_node_namespaces() {
  local ns match=()
  while read -r ns; do
    ((${#match[@]} == 0)) || match+=(-o)
    match+=(-lname "${ns//[/\\[}")
  done <"$1/run/node-namespaces"
  match=("${match[@]//]/\\]}")
  # find fails on processes that end while it reads /proc: not an error here.
  { find /proc -mindepth 3 -maxdepth 3 -path '/proc/*/ns/mnt' \( "${match[@]}" \) -printf '%h\n' 2>/dev/null || true; } |
    sed 's|^/proc/||; s|/ns$||'
}

stop() {
  local dir=$1
  [[ -e $dir/slurm.conf ]] || { echo "slurm-cluster: no cluster in $dir" >&2; return 0; }
  export SLURM_CONF=$dir/slurm.conf
  # Everything in a node's namespace is this cluster's: slurmd, slurmstepd, the jobs' tasks (stopped
  # ones too: SIGKILL ends them). Killing them outright is quick where slurmd's own shutdown waits for
  # its steps; the controller's state goes with DIR.
  if [[ -s $dir/run/node-namespaces ]]; then
    local p
    for _ in $(seq 50); do
      [[ -n $(in_node_namespaces "$dir") ]] || break
      for p in $(in_node_namespaces "$dir"); do kill -KILL "$p" 2>/dev/null || true; done
      sleep 0.1
    done
    p=$(in_node_namespaces "$dir")
    [[ -z $p ]] || die "processes still in the nodes' namespaces after SIGKILL: $(echo $p)"
  else
    # start failed before recording the namespaces: the daemons by their pid files.
    local f
    for f in "$dir"/run/slurmd-*.pid; do [[ -s $f ]] && kill_and_wait "$(cat "$f")"; done
  fi
  [[ -s $dir/run/slurmctld.pid ]] && kill_and_wait "$(cat "$dir/run/slurmctld.pid")"
  [[ -s $dir/run/munged.pid ]] && kill_and_wait "$(cat "$dir/run/munged.pid")"
  if [[ -e $dir/created-mount-point ]]; then rmdir "$mount_point" 2>/dev/null || true; fi
  # The sockets' directory is ours only where DIR/sockets links to one that mktemp named.
  local sockets
  sockets=$(readlink "$dir/sockets" 2>/dev/null || true)
  if [[ $sockets == */rs-slurm.?????? && -d $sockets ]]; then rm -rf "$sockets"; fi
  if [[ ${RANKSCOPE_SLURM_KEEP:-0} == 1 ]]; then echo "slurm-cluster: stopped; logs kept in $dir/log"; else rm -rf "$dir"; fi
}

status() {
  local dir=$1
  [[ -e $dir/slurm.conf ]] || die "no cluster in $dir"
  export SLURM_CONF=$dir/slurm.conf
  sinfo -N
  # Up: idle, or running jobs.
  [[ $(sinfo -h -N -t idle,alloc,mix -o '%N' | sort -u | wc -l) -eq ${#nodes[@]} ]]
}

case "${1:-}" in
  start) [[ $# -eq 2 ]] || die "usage: $0 start DIR"; start "$2" ;;
  stop) [[ $# -eq 2 ]] || die "usage: $0 stop DIR"; stop "$2" ;;
  status) [[ $# -eq 2 ]] || die "usage: $0 status DIR"; status "$2" ;;
  can-run) reason=$(why_not); [[ -z $reason ]] || { echo "$reason"; exit 1; } ;;
  *) die "usage: $0 start|stop|status DIR | can-run" ;;
esac
