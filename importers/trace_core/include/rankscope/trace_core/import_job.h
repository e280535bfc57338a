// import_job.h — the job-level steps every trace importer shares (nsys, Kineto; internal).
//
// Is: running one worker per file, a rank from a number in a file name, refusing files of two
// different jobs (world size, process groups, devices, clocks far apart), placing each rank's clock
// on the reference rank's by matching the end times of the collectives they share, and guarding
// the run directory an import writes. Why shared: a second importer that placed clocks its own way
// would make two imports of one job disagree. Is not: reading any file format (importers/nsys,
// importers/kineto) or building a rank's event stream (rank_builder.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rankscope/format/run_metadata.h"
#include "rankscope/format/saturating.h"
#include "rankscope/format/status.h"
#include "rankscope/trace_core/import_summary.h"
#include "rankscope/trace_core/trace_rows.h"

namespace rankscope::trace_core {

// Runs fn(i) for i in [0, n) on up to `threads` workers (0: one per core).
void parallel_for(size_t n, int threads, const std::function<void(size_t)>& fn);

// The rank a file name gives, the extensions in `extensions` stripped from the end in order: the
// number right after "rank" or "worker" ("rank-1.Apr_03_18_51_38.1102.pt.trace.json.gz" -> 1,
// "trace_rank_5_step_100" -> 5, "worker0.1712345678901" -> 0), else the last number ("rep_12.sqlite"
// -> 12); nullopt without one (or one of more than 7 digits: a pid or a time). `stem_out` gets the
// name without the extensions, `rule_out` (optional) which rule matched, in words.
std::optional<int> rank_from_file_name(const std::filesystem::path& file, const std::vector<const char*>& extensions,
                                       std::string* stem_out, std::string* rule_out = nullptr);

// Exact on epoch-sized values (a double would round them to 256 ns).
int64_t median_of(std::vector<int64_t> v);

// Saturating arithmetic on the exports' timestamps (a corrupt export's timestamp near INT64_MAX plus a
// clock offset stays a far-off time, the one nearest the truth): the shared helper.
using format::add_saturating;
using format::distance_saturating;
using format::int64_saturating;
using format::sub_saturating;

// One rank as the clock alignment sees it: its collectives per communicator ordinal (each in
// issue order), and its own clock (ns since the epoch) = timestamp + to_own_ns.
struct ClockSubject {
  int rank = 0;
  const std::vector<std::vector<NcclKernelTimes>>* streams = nullptr;
  int64_t to_own_ns = 0;
  // Out: added to own times to get the reference clock; residual -1 when not placed.
  double offset_ns = 0, residual_ns = 0;
  int64_t matched = 0;
  std::string alignment;
  bool placed = false;  // in: a root (already on the reference clock); out: placed
};

// Breadth-first from the placed subjects (else the first one, named the reference with
// `reference_text`): all-reduce and all-gather of one communicator end together on every member
// (all-to-all does not: it is pairwise), so the median difference of their end times is the
// offset between two ranks and the median deviation its residual. `what` names the collectives
// in the alignment text ("all-reduce/all-gather kernels").
void align_clocks(std::vector<ClockSubject>& subjects, const std::vector<std::string>& comm_names, const std::string& what,
                  const std::string& reference_text);

// --- one job, not two ----------------------------------------------------------------------------
// What tells one job's trace (or export) from another's. Every field is optional: a producer that
// does not write it is not compared on it.
struct JobSignature {
  std::string file;
  int rank = -1;
  std::optional<int> world_size;
  std::optional<int> group_count;              // process groups the job created (Kineto's pg_count)
  std::map<std::string, std::string> groups;   // process group name -> what it is ("default_pg, cuda:nccl, ranks [0, 1]")
  std::vector<std::string> devices;            // device models (sorted, distinct)
  // The first and last event on the file's own clock, in ns since the epoch; absent when the
  // file's times are not epoch times.
  std::optional<std::pair<int64_t, int64_t>> epoch_window_ns;
};

// Two traces of one job record the same steps, so their time windows overlap up to the hosts'
// clock disagreement: milliseconds under NTP, seconds for a host without it. Windows further apart
// than this were recorded at different times: another run, not another rank.
inline constexpr int64_t kFarApartNs = 10LL * 60 * 1000000000;  // 10 minutes

// How `b` differs from `a` as a job, in words ("world size 8 vs 2", "devices A100 vs V100",
// "process group 0 is default_pg, ranks [0..7] vs default_pg, ranks [0, 1]", "clocks 8.5 days
// apart"); empty when they may be one job.
std::vector<std::string> job_differences(const JobSignature& a, const JobSignature& b);

// The files against the first one: nothing when they may all be one job; else an error naming
// the files and what differs, or, with `allow_mixed`, the same text as a job warning.
Status check_one_job(const std::vector<JobSignature>& files, bool allow_mixed, std::vector<std::string>& warnings);

// Creates `run_dir` and checks that it holds nothing but an earlier import by `program` (a
// probe's run directory is never overwritten) and is none of `inputs`; then removes the rank files
// and run.json of that earlier import.
Status prepare_run_directory(const std::filesystem::path& run_dir, const std::vector<std::filesystem::path>& inputs,
                             const std::string& program);

// The start of writing an import: prepare_run_directory, then run.json's first version (program,
// run id "<id_prefix>-<hash of the inputs>", world as data parallel), written at once so an
// interrupted import is recognised and redone. The caller completes and rewrites it at the end.
Result<format::RunMetadata> start_import_run(const std::filesystem::path& run_dir,
                                             const std::vector<std::filesystem::path>& inputs,
                                             const std::string& program, const std::string& id_prefix,
                                             const std::vector<std::string>& command_line, int world);

// run.json's job-level fields of an import: one group per communicator plus `world`, a host slot
// per rank, and the training shape the options give.
void fill_job_metadata(format::RunMetadata& meta, const std::vector<std::string>& comm_names,
                       const std::vector<std::vector<int>>& comm_members, int world, const ImportOptions& options);

// A run id from the inputs' absolute paths: "<prefix>-<fnv1a hex>".
std::string run_id_of(const std::vector<std::filesystem::path>& inputs, const std::string& prefix);

}  // namespace rankscope::trace_core
