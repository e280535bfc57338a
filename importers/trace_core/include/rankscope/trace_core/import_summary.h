// import_summary.h — what every trace import (nsys exports, Kineto traces) is asked and what it says
// it did: the options, each rank's provenance (file, host, how the rank was found, how its clock was
// placed, what was flagged), and run.json's "source" object with its text for the reports' header.
//
// Is: the types import_nsys and import_kineto share, provenance_json (written into run.json) and
// provenance_text (read back by every report on an imported run). Is not: an import.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace rankscope::trace_core {

struct ImportOptions {
  // NVTX domains whose ranges become ranges ("default" = the unnamed domain). Empty: the
  // `rankscope` domain when a process has it, else every domain but NCCL.
  std::vector<std::string> nvtx_domains;
  // Name of the range that frames one iteration ("train_step"; "train_step 12" also matches and
  // numbers the step). Empty: `step`, else steps from a collective that repeats once per iteration.
  std::string step_range;
  int64_t seq_len = 0;  // > 0: written as run.json training.seq_len (a point of a scaling sweep)
  int64_t batch = 0;    // > 0: training.batch (tokens/s in the scaling report)
  bool traces = true;   // every range and kernel per step (TRACE_RANGES/TRACE_KERNELS) for export
  int threads = 0;      // 0: one per core
  // Files whose world size, process groups, devices or clocks say they are two different jobs:
  // refused unless this is set; then imported as one with a warning (import_job.h check_one_job).
  bool allow_mixed = false;
  std::vector<std::string> command_line;  // recorded in run.json
};

struct RankProvenance {
  int rank = -1;
  std::string file, host, nsys_version, schema_version;
  std::string producer;          // Kineto imports: the trace's versions ("Kineto schema 1, CUPTI 130001, ...")
  uint32_t pid = 0;
  std::string identity;          // how the rank was found ("MPI_RANKS", "file name 'rep_3'", ...)
  int64_t session_start_utc_ns = 0;
  std::string alignment;         // "rankscope:sync marks", "collective end times (12 matched)", ...
  double offset_ms = 0;          // added to this rank's times to put it on the reference clock
  double residual_ms = 0;        // alignment error estimate
  std::string steps_from;
  int64_t steps = 0, ranges = 0, kernels = 0, collectives = 0;
  int64_t open_ended = 0, negative_start = 0, cross_thread = 0, unlaunched_ops = 0;
  std::vector<std::string> flagged;   // the flagged ranges, by name (first few)
  std::vector<std::string> warnings;
  std::vector<std::string> diagnostics;  // DIAGNOSTIC_EVENT (first few)
};

struct ImportSummary {
  std::string kind = "nsys";          // or "kineto" (importers/kineto): run.json source.kind
  int world_size = 0;
  std::vector<RankProvenance> ranks;  // by rank
  std::vector<std::string> warnings;  // job-level
  double seconds = 0;
};

// run.json's "source" object for an import (nsys or Kineto), and its provenance table as text (the
// header of the reports of an imported run). provenance_text returns "" for a run that was not imported.
nlohmann::json provenance_json(const ImportSummary& summary);
std::string provenance_text(const nlohmann::json& source);

}  // namespace rankscope::trace_core
