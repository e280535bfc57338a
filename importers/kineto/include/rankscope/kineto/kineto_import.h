// kineto_import.h — PyTorch profiler (Kineto) traces, one per rank, turned into a run directory.
//
// Is: `rankscope import-kineto TRACE... -o RUN_DIR` (files or folders; .json or .json.gz). Each
// trace is read in one streaming pass (trace_reader.h: nlohmann's SAX parser over zlib, never the
// document) into the importers' shared row model, then written by the rank builder every import
// uses (importers/trace_core), so skew, scaling, export and the HTML report read it
// unchanged. The rank comes from distributedInfo, else from a number in the file name (never the
// sorted position); traces of two different jobs (world size, process groups, devices, clocks far
// apart) are refused unless options.allow_mixed (import_job.h check_one_job); steps from
// ProfilerStep#N; ranges from record_function annotations nested below the step ("forward",
// "backward/..."); kernels, memcpys and memsets joined to the
// runtime or driver call that launched them by correlation id, on any device Kineto writes (CUDA,
// ROCm, XPU, PrivateUse1, HPU, MTIA) and in every category spelling it has used (event_categories.h);
// what cannot be placed is counted and reported as not read; NCCL collectives from
// their kernels (one communicator per NCCL stream, the nccl:* annotation as the call), Gloo/MPI
// collectives from their gloo:* annotations; clocks from each trace's baseTimeNanoseconds, aligned
// on the all-reduces the ranks share (import_job.h), with the residual reported.
// Is not: a reader of Kineto's protobuf or of traces merged across ranks (HTA's output).
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/format/status.h"
#include "rankscope/trace_core/import_summary.h"

namespace rankscope::kineto {

// Options and summary are every trace importer's (nvtx_domains is not used; step_range defaults to
// ProfilerStep). The summary's kind is "kineto"; provenance_json/provenance_text render it.
using ImportOptions = trace_core::ImportOptions;
using ImportSummary = trace_core::ImportSummary;

Result<ImportSummary> import_kineto(const std::vector<std::filesystem::path>& inputs, const std::filesystem::path& run_dir,
                                    const ImportOptions& options = {});

// The trace files named by `inputs`: files as given, folders' *.json and *.json.gz (sorted).
Result<std::vector<std::filesystem::path>> expand_trace_inputs(const std::vector<std::filesystem::path>& inputs);

// The same, each marked with whether it was found in a folder: import_kineto skips a folder's JSON
// file that is no profiler trace (a warning names it) and refuses one named on its own.
struct TraceInput {
  std::filesystem::path file;
  bool found_in_folder = false;
};
Result<std::vector<TraceInput>> find_trace_inputs(const std::vector<std::filesystem::path>& inputs);

// --- importing where the traces were written (`import-kineto --slurm/--hosts`, gather/) ---
// Each node reads its own traces and sends what was kept of them (trace_wire.h: the rows, 10-50x
// smaller than the text) as a snapshot stream (format/snapshot_stream.h): `pack.json` first (host,
// files with their paths and sizes), then `trace-NNNNNN.rkw` per trace. The head unpacks each node's
// stream into a folder of its own and imports them all as one job: the same ranks, communicators,
// clocks and rank files as a local import of the same traces, each trace's file named host:path.

inline constexpr std::string_view kPackManifest = "pack.json";

struct PackSummary {
  int traces = 0;
  uint64_t trace_bytes = 0;   // the traces' files
  uint64_t packed_bytes = 0;  // their rows, encoded
  uint64_t stream_bytes = 0;  // what went out (deflated)
};

// Node side (`rankscope kineto-pack TRACE|DIR...`): reads every trace `inputs` names (threads in
// parallel, one trace in memory per thread) and writes the stream to `out`. A trace that cannot be
// read fails the node, as it fails a local import. With `none_ok`, inputs that are not here (a
// missing folder, one without traces: a node that ran no profiled rank) are skipped, and a node
// with none sends a stream of no trace.
Result<PackSummary> pack_traces(const std::vector<std::filesystem::path>& inputs, std::FILE* out, const std::string& host,
                                int threads = 0, bool none_ok = false);

struct PackedNode {
  std::string host;
  std::filesystem::path dir;  // the node's unpacked stream
};

// Head side: every node's traces imported as one job into `run_dir`.
Result<ImportSummary> import_kineto_packed(const std::vector<PackedNode>& nodes, const std::filesystem::path& run_dir,
                                           const ImportOptions& options = {});

}  // namespace rankscope::kineto
