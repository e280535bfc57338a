#!/usr/bin/env bash
# compare-outputs.sh — what every command prints on every input we have, recorded, and two such records
# compared: the check that a restructuring changed no behaviour (the text, JSON, HTML and imported
# runs of hangdoctor and of every rankscope subcommand, byte for byte).
#
# Usage:
#   scripts/compare-outputs.sh record BIN_DIR OUT   run BIN_DIR's hangdoctor and rankscope on every case
#   scripts/compare-outputs.sh compare A B [C]      A and B recorded by two builds; C, when given, a second
#                                                   record by A's build: files that differ between A and
#                                                   C change from run to run (times, ids), and are
#                                                   compared with their digits masked; "in 0.01 s", what
#                                                   a command took, is masked everywhere
# Exit 0 when B equals A (1 otherwise, with the files that differ and the first lines of each diff).
#
# The cases: hangdoctor (text, and --json -) on every Flight Recorder fixture, every real job's
# artifacts alone and together (tests/fixtures/torch-jobs), every log fixture (and its start-up), the run-directory
# fixtures, synthetic runs with each fault, and the real files beside the repository (../shared/data,
# or $RANKSCOPE_SHARED_DATA) when present; rankscope import-kineto and import-nsys of every trace
# fixture, then inspect, skew, kernels, critical-path, startup, export and diff on what they wrote and
# on the run-directory fixtures. Every case runs in the same work folder, whatever OUT is, so paths in
# the outputs compare equal. Is not: a test of right answers (the ctest suites are).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
fx=$root/tests/fixtures
data=${RANKSCOPE_SHARED_DATA:-$root/../shared/data}
data=$(cd "$data" 2>/dev/null && pwd || echo "$data")

usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

record() {
  local bin out
  bin=$(cd "$1" && pwd) || { echo "compare-outputs: no folder $1" >&2; exit 2; }
  out=$2
  [[ -x $bin/hangdoctor && -x $bin/rankscope ]] || { echo "compare-outputs: $bin holds no hangdoctor and rankscope" >&2; exit 2; }
  rm -rf "$out"
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
  # One work folder for every record: the paths the commands print are the same in both.
  local work=${TMPDIR:-/tmp}/rankscope-compare-work
  local n=0

  # run NAME CMD...: stdout, stderr and the exit code of CMD, run in the work folder, into OUT/NAME.*;
  # any file the command wrote into the work folder is kept beside them.
  run() {
    local name=$1
    shift
    rm -rf "$work"
    mkdir -p "$work"
    (cd "$work" && timeout 300 "$@" >"$out/$name.out" 2>"$out/$name.err")
    echo $? >"$out/$name.rc"
    if [[ -n $(ls -A "$work") ]]; then cp -r "$work" "$out/$name.files"; fi
    n=$((n + 1))
    (( n % 50 )) || echo "compare-outputs: $n cases" >&2
  }
  # The name of a path as a case name.
  case_name() { local p=${1#"$root/"}; p=${p#"$data/"}; echo "${p//\//_}"; }

  hangdoctor_cases() {
    local p
    for p in "$@"; do
      [[ -e $p ]] || continue
      run "hangdoctor_$(case_name "$p")" "$bin/hangdoctor" "$p"
      run "hangdoctor_json_$(case_name "$p")" "$bin/hangdoctor" "$p" --json -
    done
  }

  # hangdoctor on dumps, logs, stacks, jobs and run directories.
  hangdoctor_cases $(find "$fx/torch_fr" -mindepth 1 -maxdepth 1 -type d | sort)
  local job
  for job in $(find "$fx/torch-jobs" -mindepth 1 -maxdepth 1 -type d | sort); do
    hangdoctor_cases "$job" "$job/dumps" "$job/job.log" "$job/stacks" "$job/debug_dump"
  done
  hangdoctor_cases $(find "$fx/logs" -type f \( -name '*.log' -o -name '*.txt' -o -name '*.json' \) | sort)
  # A log's start-up (rankscope startup LOG).
  local log
  for log in $(find "$fx/logs" -type f -name '*.log' | sort); do
    run "startup-log_$(case_name "$log")" "$bin/rankscope" startup "$log"
    run "startup-log_json_$(case_name "$log")" "$bin/rankscope" startup "$log" --json -
  done
  hangdoctor_cases $(find "$fx" -name run.json -exec dirname {} \; | sort)
  if [[ -d $data ]]; then
    hangdoctor_cases $(find "$data/real-peers/megatron-moe-fr" "$data/real-gpu/torch-fr" -mindepth 1 -maxdepth 1 -type d 2>/dev/null | sort)
    hangdoctor_cases $(find "$data/real-peers/nccl-logs" -type f -name '*.log' 2>/dev/null | sort)
  fi
  local fault
  for fault in "" "stall:rank=2,range=forward/block0/mlp,step=2" "crash:rank=1,step=2" "skip:rank=3" \
    "resize:rank=1,factor=2" "delay:rank=1,ms=20" "drop-grad:rank=2"; do
    local synth=$work-synth
    rm -rf "$synth"
    "$bin/rankscope" synth --ranks 4 --steps 5 --tp 2 ${fault:+--fault "$fault"} -o "$synth" >/dev/null 2>&1
    run "synth_${fault%%:*}" "$bin/hangdoctor" "$synth" --json -
    run "synth_${fault%%:*}_skew" "$bin/rankscope" skew "$synth" --json -
    rm -rf "$synth"
  done

  # Imports, then every analysis on what they wrote and on the run-directory fixtures.
  local imports=$work-imports
  rm -rf "$imports"
  mkdir -p "$imports"
  local d
  for d in $(find "$fx/kineto" -mindepth 1 -maxdepth 2 -type d | sort); do
    compgen -G "$d/*.json*" >/dev/null || continue
    local name
    name=$(case_name "$d")
    run "import-kineto_$name" "$bin/rankscope" import-kineto "$d" -o "$imports/$name" --threads 1
  done
  if [[ -d $data/real-peers/nsys ]]; then
    local db
    for db in $(find "$data/real-peers/nsys" -name '*.sqlite' | sort); do
      run "import-nsys_$(case_name "$db")" "$bin/rankscope" import-nsys "$db" -o "$imports/$(case_name "$db")" --threads 1
    done
  fi
  local runs=() r
  for r in $(find "$fx" -name run.json -exec dirname {} \; | sort) $(find "$imports" -mindepth 1 -maxdepth 1 -type d | sort); do
    runs+=("$r")
  done
  [[ -d $data/real-gpu/d12-flash ]] && runs+=("$data/real-gpu/d12-flash")
  for r in "${runs[@]}"; do
    local name
    name=$(case_name "${r#"$imports/"}")
    run "inspect_$name" "$bin/rankscope" inspect "$r" --json
    run "skew_$name" "$bin/rankscope" skew "$r" --json skew.json --html skew.html
    run "kernels_$name" "$bin/rankscope" kernels "$r" --json
    run "critical-path_$name" "$bin/rankscope" critical-path "$r" --json cp.json
    run "startup_$name" "$bin/rankscope" startup "$r" --json startup.json
    run "export_$name" "$bin/rankscope" export "$r" --chrome trace.json
  done
  # Each run against the next: every pair of neighbours, both ways for the first.
  local i
  for ((i = 0; i + 1 < ${#runs[@]}; i++)); do
    run "diff_$i" "$bin/rankscope" diff "${runs[i]}" "${runs[i + 1]}" --json diff.json --html diff.html
  done
  ((${#runs[@]} > 1)) && run "diff_back" "$bin/rankscope" diff "${runs[1]}" "${runs[0]}"
  rm -rf "$imports" "$work"
  # The checkout's and the shared data's places, whichever clone recorded: a build of another commit
  # is compared from its own worktree.
  grep -rlZF -e "$root" -e "$data" "$out" 2>/dev/null | xargs -0 -r sed -i -e "s|$root|<repo>|g" -e "s|$data|<data>|g"
  echo "compare-outputs: $n cases recorded in $out" >&2
}

compare() {
  local a=$1 b=$2 c=${3:-}
  [[ -d $a && -d $b ]] || usage
  local files same=0 masked=0 differ=() f
  # What a command took ("written to DIR in 0.01 s") changes from run to run in any record.
  local took='s/ in [0-9]+\.[0-9]+ s\b/ in N s/g'
  mapfile -t files < <(cd "$a" && find . -type f | sort; cd "$b" && find . -type f | sort)
  mapfile -t files < <(printf '%s\n' "${files[@]}" | sort -u)
  for f in "${files[@]}"; do
    if [[ ! -f $a/$f || ! -f $b/$f ]]; then
      differ+=("$f (only in $([[ -f $a/$f ]] && echo A || echo B))")
    elif cmp -s "$a/$f" "$b/$f"; then
      same=$((same + 1))
    elif cmp -s <(sed -E "$took" "$a/$f") <(sed -E "$took" "$b/$f"); then
      masked=$((masked + 1))
    elif [[ -n $c && -f $c/$f ]] && ! cmp -s "$a/$f" "$c/$f" &&
      cmp -s <(sed -E 's/[0-9]+/N/g' "$a/$f") <(sed -E 's/[0-9]+/N/g' "$b/$f"); then
      masked=$((masked + 1))
    else
      differ+=("$f")
    fi
  done
  echo "compare-outputs: ${#files[@]} files: $same byte-identical, $masked identical but for numbers that change from run to run, ${#differ[@]} differ"
  for f in "${differ[@]}"; do
    echo "  differs: $f"
    [[ -f $a/${f%% (*} && -f $b/${f%% (*} ]] && diff "$a/$f" "$b/$f" | head -6 | sed 's/^/    /'
  done
  ((${#differ[@]} == 0))
}

case ${1:-} in
  record) (($# == 3)) || usage; record "$2" "$3" ;;
  compare) (($# == 3 || $# == 4)) || usage; compare "$2" "$3" "${4:-}" ;;
  *) usage ;;
esac
