#!/usr/bin/env bash
# fuzz-seeds.sh — builds the seed corpus of every libFuzzer target (tests/fuzz/, docs/FUZZING.md).
#
# Usage: scripts/fuzz-seeds.sh [OUT [FUZZ_BIN]]   (OUT defaults to .fuzz-corpus/ in the repository,
#   git-ignored; FUZZ_BIN is the folder of the built targets, for the seeds a target makes itself)
# Writes OUT/<target>/ for each target from real files: the test fixtures (tests/fixtures) and, when
# present, the shared real files beside the repository (../shared/data, or $RANKSCOPE_SHARED_DATA):
# PyTorch Flight Recorder dumps, Kineto traces, an Nsight Systems export, NCCL and PyTorch logs and
# RAS reports, our recorders, event streams, run.json, snapshot streams and a plugin run. Targets
# that read several files (a job's dumps, a plugin run) get them joined by the separator the targets
# cut at (tests/fuzz/fuzz_support.h). Adds to OUT, never removes: a campaign's corpus keeps growing.
# Is not: a campaign (scripts/fuzz.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/.fuzz-corpus}
fuzz_bin=${2:-}
data=${RANKSCOPE_SHARED_DATA:-$root/../shared/data}
fx=$root/tests/fixtures
sep=$'\n--rankscope-fuzz-file--\n'   # tests/fuzz/fuzz_support.h kFileSeparator

# seed TARGET FILE...: copies each file into OUT/TARGET under a name made from its path.
seed() {
  local target=$1; shift
  mkdir -p "$out/$target"
  local f
  for f in "$@"; do
    [[ -f $f ]] || continue
    local name=${f#"$root/"}; name=${name#"$data/"}
    cp "$f" "$out/$target/${name//\//_}"
  done
}
# joined TARGET NAME FILE...: the files joined by the separator, as one seed.
joined() {
  local target=$1 name=$2; shift 2
  mkdir -p "$out/$target"
  local first=1 f
  {
    for f in "$@"; do
      [[ $first == 1 ]] || printf '%s' "$sep"
      first=0
      cat "$f"
    done
  } > "$out/$target/$name"
}
# Files matching a find(1) name under the folders given (missing folders are skipped).
files() {
  local pattern=$1; shift
  local d
  for d in "$@"; do [[ -d $d ]] && find "$d" -type f -name "$pattern"; done | sort
}
have_data=0
[[ -d $data ]] && have_data=1

# PyTorch Flight Recorder dumps: every dump alone (pickle and JSON), and each job's first ranks.
mapfile -t dumps < <(files 'comm_lib_trace_rank_*' "$fx/torch_fr" "$data/real-gpu/torch-fr"; files '_dump_*' "$fx/torch_fr" "$data/real-peers/megatron-moe-fr")
seed fuzz_pickle "${dumps[@]}" "$fx/torch_fr/stdlib_p2.pickle" "$fx/torch_fr/stdlib_p4.pickle"
seed fuzz_fr_dump "${dumps[@]}"
while IFS= read -r dir; do
  mapfile -t ranks < <(find "$dir" -maxdepth 1 -type f \( -name 'comm_lib_trace_rank_*' -o -name '_dump_*' \) | sort -V | head -4)
  (( ${#ranks[@]} > 0 )) || continue
  name=${dir#"$root/"}; name=${name#"$data/"}
  joined fuzz_fr_import "${name//\//_}" "${ranks[@]}"
done < <(for d in "$fx/torch_fr" "$data/real-gpu/torch-fr" "$data/real-peers/megatron-moe-fr"; do [[ -d $d ]] && find "$d" -type d; done | sort)

# Kineto traces: each alone, and the two-rank jobs as pairs.
seed fuzz_kineto $(files '*.json' "$fx/kineto") $(files '*.json.gz' "$fx/kineto" "$data/real-gpu/kineto-gloo-2ranks")
joined fuzz_kineto nccl-2ranks.pair "$fx/kineto/nccl-2ranks/rank0.json" "$fx/kineto/nccl-2ranks/rank1.json"
if (( have_data )); then
  joined fuzz_kineto real-gloo-2ranks.pair "$data/real-gpu/kineto-gloo-2ranks/rank0.json.gz" "$data/real-gpu/kineto-gloo-2ranks/rank1.json.gz"
fi

# The head of `import-kineto --slurm`: the same traces packed as a node packs them, by the target's
# own encoder (FUZZ_BIN, the folder of the built targets, when given; else no seed).
if [[ -n ${fuzz_bin:-} && -x $fuzz_bin/fuzz_kineto_pack ]]; then
  pack_traces=$(files '*.json' "$fx/kineto/nccl-2ranks" "$fx/kineto/gloo-threads" "$fx/kineto/critical-path" | tr '\n' ':')
  pack_traces+=$(files '*.json.gz' "$fx/kineto/torch-cpu-gloo-2ranks" | tr '\n' ':')
  RANKSCOPE_FUZZ_WRITE_SEEDS="$out/fuzz_kineto_pack" RANKSCOPE_FUZZ_SEED_TRACES="$pack_traces" "$fuzz_bin/fuzz_kineto_pack" >/dev/null 2>&1 ||
    echo "fuzz-seeds: fuzz_kineto_pack could not write its seeds" >&2
fi
mkdir -p "$out/fuzz_kineto_pack"

# Nsight Systems: the real export, slimmed (the tables the importer never reads emptied, then
# VACUUM): 1.6 MB of mostly CPU samples would make every execution slow. Without the shared data
# (a clone elsewhere, CI without ../shared) the folder is still made: the target starts from nothing.
mkdir -p "$out/fuzz_nsys"
if (( have_data )) && command -v sqlite3 >/dev/null; then
  for db in $(files '*.sqlite' "$data/real-peers/nsys"); do
    slim="$out/fuzz_nsys/$(basename "$db" .sqlite).slim.sqlite"
    rm -f "$slim"
    sqlite3 "$db" ".backup '$slim'"
    sqlite3 "$slim" "PRAGMA page_size=1024; DELETE FROM SAMPLING_CALLCHAINS; DELETE FROM COMPOSITE_EVENTS;
      DELETE FROM SCHED_EVENTS; DELETE FROM CUDA_CALLCHAINS; VACUUM;" 2>/dev/null || true
  done
fi

# Logs and RAS reports (the long real nccl-tests logs cut to their first 64 KiB: a seed is a start).
seed fuzz_logs $(files '*.log' "$fx/logs") $(files '*.txt' "$fx/logs/ras")
seed fuzz_nccl_ras $(files '*.txt' "$fx/logs/ras") $(files '*.json' "$fx/logs/ras")
mkdir -p "$out/fuzz_logs"
for f in $(files '*.log' "$data/real-peers/nccl-logs"); do
  head -c 65536 "$f" > "$out/fuzz_logs/real-$(basename "$f")"
done
mapfile -t torch_logs < <(files 'gloo-*.log' "$fx/logs/torch" | head -2)
(( ${#torch_logs[@]} == 2 )) && joined fuzz_logs gloo-two-files.pair "${torch_logs[@]}"

# The run-directory contract: recorders, event streams, run.json, snapshot streams.
seed fuzz_flight_recorder $(files '*.flight' "$fx" "$data/real-gpu")
seed fuzz_event_stream $(files '*.events' "$fx" "$data/real-gpu")
seed fuzz_run_metadata $(files 'run.json' "$fx" "$data/real-gpu")
seed fuzz_snapshot_stream $(files '*.snap' "$fx")
seed fuzz_rank_summaries $(files '*.ranks' "$fx")

# The NCCL profiler plugin's run: process.json, the communicator's recorder and the NVTX recorder.
plugin=$data/real-gpu/plugin-p2p-run/nccl
if [[ -d $plugin ]]; then
  joined fuzz_nccl_plugin_run real-p2p-run "$plugin/vm.456.process.json" "$plugin/vm.456.f0ec67fd6fd098a2.r0.flight" \
    "$plugin/vm.456.nvtx.flight"
  seed fuzz_nccl_plugin_run "$plugin/vm.456.f0ec67fd6fd098a2.r0.flight"
fi
# Our own recorders seen as plugin files, so the target has seeds without the shared data too.
seed fuzz_nccl_plugin_run $(files '*.flight' "$fx/format")

# The whole hangdoctor command on a folder of dumps (1-8 files, cut at the separator): every job's
# first eight ranks joined, and every input that once broke the command
# (tests/fixtures/torch_fr/fuzz-findings, joined the same way already).
mkdir -p "$out/fuzz_hangdoctor_dumps"
while IFS= read -r dir; do
  mapfile -t ranks < <(find "$dir" -maxdepth 1 -type f \( -name 'comm_lib_trace_rank_*' -o -name '_dump_*' \) | sort -V | head -8)
  (( ${#ranks[@]} > 0 )) || continue
  name=${dir#"$root/"}; name=${name#"$data/"}
  joined fuzz_hangdoctor_dumps "${name//\//_}" "${ranks[@]}"
done < <(for d in "$fx/torch_fr" "$fx/torch-jobs" "$data/real-gpu/torch-fr" "$data/real-peers/megatron-moe-fr"; do [[ -d $d ]] && find "$d" -type d; done | sort)
seed fuzz_hangdoctor_dumps $(files 'hang_*' "$fx/torch_fr/fuzz-findings") $(files 'import_*' "$fx/torch_fr/fuzz-findings")

# The whole hangdoctor command on a folder of logs: every log alone, each real job's log, and the
# real nccl-tests logs cut to their first 64 KiB; the two Gloo ranks' logs as one job of two files.
seed fuzz_hangdoctor_logs $(files '*.log' "$fx/logs" "$fx/torch-jobs") $(files '*.txt' "$fx/logs/ras")
mkdir -p "$out/fuzz_hangdoctor_logs"
for f in $(files '*.log' "$data/real-peers/nccl-logs"); do
  head -c 65536 "$f" > "$out/fuzz_hangdoctor_logs/real-$(basename "$f")"
done
(( ${#torch_logs[@]} == 2 )) && joined fuzz_hangdoctor_logs gloo-two-files.pair "${torch_logs[@]}"

# `rankscope skew` on a run imported from Kineto traces: the traces fuzz_kineto starts from.
seed fuzz_skew $(files '*.json' "$fx/kineto/nccl-2ranks" "$fx/kineto/critical-path" "$fx/kineto/gloo-threads") \
  $(files '*.json.gz' "$fx/kineto/torch-cpu-gloo-2ranks")
joined fuzz_skew nccl-2ranks.pair "$fx/kineto/nccl-2ranks/rank0.json" "$fx/kineto/nccl-2ranks/rank1.json"
mapfile -t gloo_cpu < <(files '*.json.gz' "$fx/kineto/torch-cpu-gloo-2ranks" | head -2)
(( ${#gloo_cpu[@]} == 2 )) && joined fuzz_skew torch-cpu-gloo-2ranks.pair "${gloo_cpu[@]}"
if (( have_data )) && [[ -d $data/real-gpu/kineto-gloo-2ranks ]]; then
  joined fuzz_skew real-gloo-2ranks.pair "$data/real-gpu/kineto-gloo-2ranks/rank0.json.gz" "$data/real-gpu/kineto-gloo-2ranks/rank1.json.gz"
fi

# `rankscope diff BASE NEW` on two one-rank runs imported from Kineto traces: each job's two ranks as
# BASE and NEW, the attention pair (naive against flash), and a trace against itself.
mkdir -p "$out/fuzz_diff"
joined fuzz_diff nccl-2ranks.pair "$fx/kineto/nccl-2ranks/rank0.json" "$fx/kineto/nccl-2ranks/rank1.json"
joined fuzz_diff critical-path.pair "$fx/kineto/critical-path/rank0.json" "$fx/kineto/critical-path/rank1.json"
joined fuzz_diff critical-path.same "$fx/kineto/critical-path/rank0.json" "$fx/kineto/critical-path/rank0.json"
(( ${#gloo_cpu[@]} == 2 )) && joined fuzz_diff torch-cpu-gloo-2ranks.pair "${gloo_cpu[@]}"
mapfile -t attention_base < <(files '*.json*' "$fx/kineto/diff-attention/base" | head -1)
mapfile -t attention_new < <(files '*.json*' "$fx/kineto/diff-attention/new" | head -1)
(( ${#attention_base[@]} == 1 && ${#attention_new[@]} == 1 )) &&
  joined fuzz_diff diff-attention.pair "${attention_base[0]}" "${attention_new[0]}"
if (( have_data )) && [[ -d $data/real-gpu/kineto-gloo-2ranks ]]; then
  joined fuzz_diff real-gloo-2ranks.pair "$data/real-gpu/kineto-gloo-2ranks/rank0.json.gz" "$data/real-gpu/kineto-gloo-2ranks/rank1.json.gz"
fi

# The whole hangdoctor command on a run directory our probe wrote: run.json and the first eight
# ranks' recorders, for every run directory in the fixtures and the real GPU runs.
mkdir -p "$out/fuzz_hangdoctor_rundir"
while IFS= read -r meta; do
  dir=$(dirname "$meta")
  mapfile -t recorders < <(find "$dir" -maxdepth 1 -type f -name 'rank*.flight' | sort -V | head -8)
  (( ${#recorders[@]} > 0 )) || continue
  name=${dir#"$root/"}; name=${name#"$data/"}
  joined fuzz_hangdoctor_rundir "${name//\//_}" "$meta" "${recorders[@]}"
done < <(for d in "$fx" "$data/real-gpu"; do [[ -d $d ]] && find "$d" -name run.json; done | sort)

# The whole hangdoctor command on one job's artifacts together (tests/fuzz/fuzz_hangdoctor_mix.cpp's
# layout: the log, ranks 0-3's dumps, their stacks; what a run lacks is an empty part).
mkdir -p "$out/fuzz_hangdoctor_mix"
for job in "$fx"/torch-jobs/*/; do
  job=${job%/}
  [[ -d $job/dumps || -f $job/job.log ]] || continue
  parts=()
  [[ -f $job/job.log ]] && parts+=("$job/job.log") || parts+=(/dev/null)
  for r in 0 1 2 3; do [[ -f $job/dumps/comm_lib_trace_rank_$r ]] && parts+=("$job/dumps/comm_lib_trace_rank_$r") || parts+=(/dev/null); done
  for r in 0 1 2 3; do [[ -f $job/stacks/rank$r.txt ]] && parts+=("$job/stacks/rank$r.txt") || parts+=(/dev/null); done
  joined fuzz_hangdoctor_mix "torch-jobs_$(basename "$job")" "${parts[@]}"
done

for d in "$out"/*/; do
  printf '%-24s %4d seeds\n' "$(basename "$d")" "$(find "$d" -type f | wc -l)"
done
