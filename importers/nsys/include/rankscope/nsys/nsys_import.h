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

#include <filesystem>
#include <vector>

#include "rankscope/format/status.h"
#include "rankscope/trace_core/import_summary.h"

namespace rankscope::nsys {

// The options and the summary are every trace importer's (importers/trace_core).
using ImportOptions = trace_core::ImportOptions;
using ImportSummary = trace_core::ImportSummary;
using RankProvenance = trace_core::RankProvenance;

Result<ImportSummary> import_nsys(const std::vector<std::filesystem::path>& files, const std::filesystem::path& run_dir,
                                  const ImportOptions& options = {});

}  // namespace rankscope::nsys
