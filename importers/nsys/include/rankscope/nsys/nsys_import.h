// nsys_import.h — Nsight Systems SQLite exports (one or more per job) turned into a run directory.
//
// Is: `rankscope import-nsys REP.sqlite... -o RUN_DIR`. Reads each export read-only and immutable
// (never writes to it), finds the rank of each process that ran the job (a `rankscope:rank=R/W`
// NVTX mark, else MPI_RANKS, else RANK in the recorded environment, else a number in the file
// name — never the sorted position), puts every rank on one clock (the session start's UTC epoch,
// refined by matching the end times of all-reduce and all-gather kernels across ranks, or exact
// from `rankscope:sync` marks), projects kernels onto NVTX ranges as nsys does (a GPU op belongs to
// every range of its launching thread that contains the launch call; the range's GPU time is first
// op start to last op end), turns NCCL kernels into collectives (kind from the kernel name, one
// communicator per NCCL stream, arrival = the launch), and writes run.json, rankNNNNN.events and
// rankNNNNN.flight through the format library's writers so skew, scaling, export and inspect read
// it unchanged. Files are processed in parallel; each holds one rank's rows in memory at a time.
// Is not: an nsys-rep reader (export first: nsys export --type sqlite), nor a replacement for the
// probe's own flight recorder on a live job.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rankscope/format/status.h"

namespace rankscope::nsys {

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

Result<ImportSummary> import_nsys(const std::vector<std::filesystem::path>& files, const std::filesystem::path& run_dir,
                                  const ImportOptions& options = {});

// run.json's "source" object for an import (nsys or Kineto), and its provenance table as text (the
// header of the reports of an imported run). provenance_text returns "" for a run that was not imported.
nlohmann::json provenance_json(const ImportSummary& summary);
std::string provenance_text(const nlohmann::json& source);

}  // namespace rankscope::nsys
