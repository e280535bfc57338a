// node_snapshot.h — one node's share of a run directory, written as a snapshot stream.
//
// Is: what `rankscope snapshot RUN_DIR [--stacks]` puts in the stream (format/snapshot_stream.h):
// first snapshot.json (this host, its boot id, the time, and for every process that wrote a
// recorder here the state /proc gives: alive or gone, runnable/stopped/traced/D/zombie, wchan),
// then by default what the verdict needs of each rank written on this host (summaries.ranks,
// format/rank_summary.h), or with --full (and for a recorder a summary cannot carry) the whole
// rankNNNNN.flight, then run.json when present, the NCCL plugin's nccl/ files, recent evidence/ stacks, and with
// --stacks fresh native stacks of its live ranks. Event streams are left out: they grow with the run, recorders do not.
// Recorders that another host wrote (a run directory on a shared filesystem) are left to that host's snapshot. Is not:
// the gathering over many nodes (gather.h) or the codec.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "rankscope/analyzers/hang/process_table.h"
#include "rankscope/analyzers/hang/stack_capture.h"
#include "rankscope/format/status.h"

namespace rankscope::gather {

struct NodeSnapshotOptions {
  bool stacks = false;     // capture native stacks of live ranks (eu-stack, else gdb)
  int max_stacks = 8;      // processes captured (each up to 30 s: eu-stack, then gdb, time-limited)
  bool all_hosts = false;  // also ship recorders written on other hosts
  // Whole recorders instead of what the verdict needs of each rank (format/rank_summary.h).
  bool full = false;
  uint64_t max_evidence_file_bytes = 1 << 20;  // older or larger evidence files stay behind
  int max_evidence_files = 64;
};

struct NodeSnapshotSummary {
  int recorders = 0;   // flight recorders shipped (probe and plugin), whole or summarized
  int summarized = 0;  // of those, sent as summaries
  int processes = 0;   // processes whose state is recorded
  int stacks = 0;
  uint64_t bytes_in = 0;             // uncompressed payload
  uint64_t bytes_out = 0;            // the stream
  std::vector<std::string> skipped;  // what was left out and why
};

// Writes the stream for `run_dir` to `out`. Fails when run_dir is not a directory or the stream
// cannot be written; a file that cannot be read is skipped and named in the manifest.
Result<NodeSnapshotSummary> write_node_snapshot(const std::filesystem::path& run_dir, std::FILE* out,
                                                analyzers::hang::ProcessTable& processes,
                                                analyzers::hang::StackCollector& stacks,
                                                const NodeSnapshotOptions& options = {});

}  // namespace rankscope::gather
