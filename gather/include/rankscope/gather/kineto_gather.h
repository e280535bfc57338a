// kineto_gather.h — PyTorch profiler traces imported where they were written.
//
// Is: `rankscope import-kineto TRACE_DIR --slurm JOBID -o RUN_DIR` (or --hosts FILE --exec T): a
// 1024-GPU job's traces are a terabyte on the nodes' local disks, so every node runs `rankscope
// kineto-pack TRACE_DIR` (its traces read there, in parallel with the other nodes) through the
// launch path of `gather` (gather.h: one srun or exec per node, one deadline), and only what the
// import keeps of them (the rows, kineto_import.h "importing where the traces were written") comes
// to the head, which imports them as one job: the run directory a local import of the same files
// writes, each trace named host:path. Is not: the reading (importers/kineto) or the launch itself
// (node_launch.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rankscope/gather/gather.h"
#include "rankscope/kineto/kineto_import.h"

namespace rankscope::gather {

struct KinetoNode {
  std::string host;
  bool answered = false;      // sent a whole stream and exited 0
  std::string reason;         // why not
  int traces = 0;             // traces it packed (from its pack.json)
  uint64_t trace_bytes = 0;   // their size on the node's disk
  uint64_t stream_bytes = 0;  // what came over the wire
  double seconds = 0;
};

struct KinetoGatherResult {
  kineto::ImportSummary summary;
  std::vector<KinetoNode> nodes;
  uint64_t trace_bytes = 0, stream_bytes = 0;
  double seconds = 0;  // launch to run.json
  int answered() const;
};

// Runs `targets` (each node's `kineto-pack` command), imports whatever whole streams arrived into
// `run_dir`; a node that failed or stayed silent is a line of summary.warnings and of its node
// record, and its ranks are missing from the import (which says how many). Fails when no node sent
// a trace, or on the import's own errors (two jobs mixed, a rank twice). `o.out_dir` is unused:
// the streams are unpacked into a temporary folder beside `run_dir`, removed at the end.
Result<KinetoGatherResult> import_kineto_from_nodes(const std::vector<GatherTarget>& targets,
                                                    const std::filesystem::path& run_dir, const GatherOptions& o,
                                                    const kineto::ImportOptions& options);

}  // namespace rankscope::gather
