// nsys_import.cpp — see nsys_import.h. Two passes over the exports, each file by one worker:
// pass 1 reads what identifies ranks and places clocks (small), pass 2 builds and writes one rank
// at a time (rank_builder.h), so memory holds one rank's rows per worker.
#include "rankscope/nsys/nsys_import.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "export_reader.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/format/run_metadata.h"
#include "rankscope/trace_core/import_job.h"
#include "rankscope/trace_core/rank_builder.h"

namespace rankscope::nsys {
namespace {

namespace fs = std::filesystem;
using format::CollectiveOp;
// The job-level steps and the rank builder every trace importer shares (importers/trace_core).
using trace_core::add_saturating;
using trace_core::align_clocks;
using trace_core::build_rank;
using trace_core::check_one_job;
using trace_core::ClockSubject;
using trace_core::distance_saturating;
using trace_core::fill_job_metadata;
using trace_core::JobSignature;
using trace_core::median_of;
using trace_core::parallel_for;
using trace_core::rank_from_file_name;
using trace_core::RankPlan;
using trace_core::start_import_run;
using trace_core::sub_saturating;

struct RankChoice {
  int rank = -1;
  size_t file = 0;
  const ProcessScan* process = nullptr;
  std::string identity;
  int64_t to_own_ns = 0;
  double offset_ns = 0, residual_ns = 0;
  int64_t matched = 0;
  std::string alignment;
  bool placed = false;
};

// The import, in the phases import_nsys runs in order; each reads what the ones before it left in
// these members.
struct NsysImport {
  const std::vector<fs::path>& files;
  const fs::path& run_dir;
  const ImportOptions& options;
  std::vector<std::optional<Result<ExportScan>>> scans;
  ImportSummary summary;
  std::vector<RankChoice> choices;
  std::vector<std::vector<std::string>> file_warnings;
  int world = 0;
  std::vector<std::string> comm_names;
  std::vector<std::vector<int>> comm_members;
  format::RunMetadata meta;

  NsysImport(const std::vector<fs::path>& exports, const fs::path& dir, const ImportOptions& opts)
      : files(exports), run_dir(dir), options(opts) {}
  Status check_inputs() const;
  Status scan_exports();
  Status choose_ranks_of_file(size_t f);
  Status choose_ranks();
  void place_clocks();
  Status build_ranks();
  Status write_metadata(std::chrono::steady_clock::time_point t0);
};

// Each export once, and an SQLite export, never the report itself.
Status NsysImport::check_inputs() const {
  if (files.empty()) return invalid_argument("no nsys exports given; hint: nsys export --type sqlite -o rep_0.sqlite rep_0.nsys-rep");
  std::set<fs::path> seen;
  for (const auto& f : files) {
    if (!seen.insert(fs::weakly_canonical(f)).second)
      return invalid_argument(fmt::format("{} is given twice", f.string()));
    if (f.extension() == ".nsys-rep" || f.extension() == ".qdrep") {
      return invalid_argument(
          fmt::format("{} is an nsys report, not its SQLite export; hint: nsys export --type sqlite -o {} {}",
                      f.string(), fs::path(f).replace_extension(".sqlite").string(), f.string()));
    }
  }
  return {};
}

// Pass 1: what identifies the ranks and places the clocks, each file on a worker.
Status NsysImport::scan_exports() {
  scans.resize(files.size());
  parallel_for(files.size(), options.threads, [&](size_t i) { scans[i] = scan_export(files[i]); });
  for (auto& s : scans) {
    if (!s->ok()) return s->status();
  }
  return {};
}

// The ranks one export holds: processes named by an NVTX mark or MPI_RANKS; else its busiest
// process, numbered by the recorded environment or the file name.
Status NsysImport::choose_ranks_of_file(size_t f) {
  const ExportScan& scan = **scans[f];
  std::vector<RankChoice> here;
  for (const ProcessScan& p : scan.processes) {
    RankChoice c;
    c.file = f;
    c.process = &p;
    if (p.mark_rank) {
      c.rank = *p.mark_rank;
      c.identity = fmt::format("NVTX mark '{}'", p.mark_text);
    } else if (auto it = scan.info.mpi_rank_by_process.find(p.key); it != scan.info.mpi_rank_by_process.end()) {
      c.rank = it->second;
      c.identity = "MPI_RANKS table";
    } else {
      continue;
    }
    here.push_back(c);
  }
  if (here.empty()) {
    const ProcessScan* best = nullptr;
    for (const ProcessScan& p : scan.processes) {
      if (!best || std::tie(p.kernels, p.ranges) > std::tie(best->kernels, best->ranges)) best = &p;
    }
    if (!best) {
      return invalid_argument(
          fmt::format("{}: no process in this export ran kernels or NVTX ranges; hint: capture with "
                      "nsys profile -t cuda,nvtx",
                      files[f].string()));
    }
    RankChoice c;
    c.file = f;
    c.process = best;
    std::string stem, rule;
    const auto from_name = rank_from_file_name(files[f], {".sqlite", ".nsys-rep", ".qdrep"}, &stem, &rule);
    if (scan.info.env_rank) {
      c.rank = *scan.info.env_rank;
      c.identity = fmt::format("{}={} in the recorded environment", scan.info.env_rank_variable, c.rank);
      if (from_name && *from_name != c.rank) {
        file_warnings[f].push_back(fmt::format("the file name says {} but {} says {}: the environment wins", *from_name,
                                               scan.info.env_rank_variable, c.rank));
      }
    } else if (from_name) {
      c.rank = *from_name;
      c.identity = fmt::format("{} (no rankscope:rank mark, no MPI_RANKS, no RANK in the recorded environment)", rule);
    } else {
      return invalid_argument(
          fmt::format("{}: cannot tell which rank this is: no rankscope:rank=R/W NVTX mark, no MPI_RANKS table (nsys "
                      "profile -t mpi), "
                      "no RANK in the recorded environment and no number in the file name; hint: name exports by rank "
                      "(nsys profile -o rep_%q{{RANK}}), rankscope never numbers ranks by sorted file name",
                      files[f].string()));
    }
    here.push_back(c);
  }
  for (const ProcessScan& p : scan.processes) {
    const bool used = std::any_of(here.begin(), here.end(), [&](const RankChoice& c) { return c.process == &p; });
    if (!used && p.kernels > 0) {
      file_warnings[f].push_back(
          fmt::format("process {} ({} kernels, {} ranges) is not a rank: left out", p.pid, p.kernels, p.ranges));
    }
  }
  for (auto& c : here) choices.push_back(std::move(c));
  return {};
}

// Every export's ranks, the world they imply, one job, no rank twice; the ranks with no export named.
Status NsysImport::choose_ranks() {
  file_warnings.resize(files.size());
  for (size_t f = 0; f < files.size(); ++f) RS_RETURN_IF_ERROR(choose_ranks_of_file(f));
  for (const RankChoice& c : choices) {
    if (c.rank < 0 || c.rank >= (1 << 20)) return invalid_argument(fmt::format("{}: rank {} is out of range", files[c.file].string(), c.rank));
    world = std::max(world, c.rank + 1);
    const ExportScan& scan = **scans[c.file];
    if (c.process->mark_world) world = std::max(world, *c.process->mark_world);
    else if (scan.info.env_world && c.identity.find("environment") != std::string::npos) world = std::max(world, *scan.info.env_world);
  }
  {  // exports of two different jobs are never merged without a word (import_job.h)
    std::vector<JobSignature> jobs;
    for (const RankChoice& c : choices) {
      const ExportScan& scan = **scans[c.file];
      JobSignature& j = jobs.emplace_back();
      j.file = files[c.file].string();
      j.rank = c.rank;
      if (c.process->mark_world) j.world_size = *c.process->mark_world;
      else if (scan.info.env_world) j.world_size = *scan.info.env_world;
      const int64_t to_epoch = scan.absolute_timestamps ? 0 : scan.info.has_session_start ? scan.info.utc_epoch_ns : INT64_MIN;
      if (to_epoch != INT64_MIN && scan.min_ts <= scan.max_ts) {
        j.epoch_window_ns = {add_saturating(scan.min_ts, to_epoch), add_saturating(scan.max_ts, to_epoch)};
      }
    }
    RS_RETURN_IF_ERROR(check_one_job(jobs, options.allow_mixed, summary.warnings));
  }
  std::sort(choices.begin(), choices.end(), [](const RankChoice& a, const RankChoice& b) { return a.rank < b.rank; });
  for (size_t i = 1; i < choices.size(); ++i) {
    if (choices[i].rank == choices[i - 1].rank) {
      return invalid_argument(fmt::format("rank {} appears twice: {} ({}) and {} ({})", choices[i].rank,
                                          files[choices[i - 1].file].string(), choices[i - 1].identity,
                                          files[choices[i].file].string(), choices[i].identity));
    }
  }
  if (int(choices.size()) < world) {
    std::string missing;
    int shown = 0;
    for (int r = 0, i = 0; r < world; ++r) {
      if (i < int(choices.size()) && choices[size_t(i)].rank == r) {
        ++i;
        continue;
      }
      if (shown++ < 10) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", r);
    }
    summary.warnings.push_back(fmt::format("{} of {} ranks have no export (missing: {}{})", world - int(choices.size()), world,
                                           missing, shown > 10 ? ", ..." : ""));
  }
  return {};
}

// Each rank's own clock: the session start's UTC epoch plus the session timestamp (or the
// timestamps themselves when exported absolute), or the probe clock its sync marks carry; then the
// ranks aligned on their NCCL kernels. One communicator per NCCL stream ordinal.
void NsysImport::place_clocks() {
  for (size_t i = 0; i < choices.size(); ++i) {
    RankChoice& c = choices[i];
    const ExportScan& scan = **scans[c.file];
    c.to_own_ns = scan.absolute_timestamps ? 0 : scan.info.utc_epoch_ns;
    if (!c.process->sync_marks.empty()) {
      std::vector<int64_t> d;
      for (const auto& [ts, payload] : c.process->sync_marks) d.push_back(sub_saturating(payload, ts));
      const int64_t med = median_of(d);
      int64_t worst = 0;
      for (int64_t x : d) worst = std::max(worst, distance_saturating(x, med));
      c.to_own_ns = med;
      c.residual_ns = double(worst);
      c.matched = int64_t(d.size());
      c.alignment = fmt::format("rankscope:sync marks ({}): the probe clock", d.size());
      c.placed = true;
    }
  }
  size_t max_streams = 0;
  for (const RankChoice& c : choices) max_streams = std::max(max_streams, c.process->nccl_streams.size());
  for (size_t k = 0; k < max_streams; ++k) comm_names.push_back(fmt::format("nccl{}", k));
  {
    std::vector<ClockSubject> subjects(choices.size());
    for (size_t i = 0; i < choices.size(); ++i) {
      const RankChoice& c = choices[i];
      subjects[i] = ClockSubject{c.rank, &c.process->nccl_streams, c.to_own_ns, c.offset_ns, c.residual_ns, c.matched, c.alignment, c.placed};
    }
    const std::string reference = choices.empty() ? "" : fmt::format("reference: session start ({})",
        (**scans[choices[0].file]).absolute_timestamps ? "absolute timestamps" : "UTC epoch");
    align_clocks(subjects, comm_names, "all-reduce/all-gather kernels", reference);
    for (size_t i = 0; i < choices.size(); ++i) {
      RankChoice& c = choices[i];
      c.offset_ns = subjects[i].offset_ns, c.residual_ns = subjects[i].residual_ns, c.matched = subjects[i].matched;
      c.alignment = subjects[i].alignment, c.placed = subjects[i].placed;
    }
  }

  comm_members.resize(max_streams);
  for (const RankChoice& c : choices) {
    for (size_t k = 0; k < c.process->nccl_streams.size(); ++k) comm_members[k].push_back(c.rank);
  }
}

// Pass 2: each export's ranks built and written (rank_builder.h), each file on a worker. run.json
// is written first (an interrupted import is recognised and redone), completed at the end.
Status NsysImport::build_ranks() {
  RS_ASSIGN_OR_RETURN(meta,
                      start_import_run(run_dir, files, "rankscope import-nsys", "nsys", options.command_line, world));
  const std::string run_id = meta.run_id;

  summary.world_size = world;
  summary.ranks.resize(choices.size());
  std::vector<std::vector<size_t>> by_file(files.size());
  for (size_t i = 0; i < choices.size(); ++i) by_file[choices[i].file].push_back(i);
  std::vector<Status> errors(files.size());
  parallel_for(files.size(), options.threads, [&](size_t f) {
    if (by_file[f].empty()) return;
    ExportInfo info;
    auto db = open_export(files[f], info);
    if (!db.ok()) {
      errors[f] = db.status();
      return;
    }
    std::set<uint64_t> processes;
    for (size_t i : by_file[f]) processes.insert(choices[i].process->key);
    auto rows = load_process_rows(**db, info, processes);
    if (!rows.ok()) {
      errors[f] = rows.status();
      return;
    }
    const ExportScan& scan = **scans[f];
    for (size_t i : by_file[f]) {
      const RankChoice& c = choices[i];
      RankProvenance& prov = summary.ranks[i];
      prov.rank = c.rank;
      prov.file = files[f].string();
      prov.host = info.host;
      prov.pid = c.process->pid;
      prov.nsys_version = info.product_version;
      prov.schema_version = info.schema_version;
      prov.identity = c.identity;
      prov.session_start_utc_ns = info.utc_epoch_ns;
      prov.alignment = c.alignment;
      prov.offset_ms = c.offset_ns / 1e6;
      prov.residual_ms = c.residual_ns < 0 ? -1 : c.residual_ns / 1e6;
      prov.warnings = info.warnings;
      for (const auto& w : file_warnings[f]) prov.warnings.push_back(w);
      prov.diagnostics = info.diagnostics;
      if (info.diagnostic_count > int64_t(info.diagnostics.size())) {
        prov.diagnostics.push_back(fmt::format("... {} diagnostics in all", info.diagnostic_count));
      }
      RankPlan plan;
      plan.rank = c.rank;
      plan.world_size = world;
      plan.process = c.process->key;
      plan.to_own_ns = c.to_own_ns;
      plan.session_zero_ts = scan.absolute_timestamps ? info.utc_epoch_ns : 0;
      plan.clock = format::ClockRecord{int64_t(c.offset_ns), c.residual_ns < 0 ? -1 : int64_t(c.residual_ns),
                                       c.to_own_ns, uint32_t(c.matched), 0};
      plan.run_id = run_id;
      plan.host = info.host;
      plan.comm_names = comm_names;
      plan.comm_members = comm_members;
      plan.run_dir = run_dir;
      Status st = build_rank(info.file, *rows, plan, options, prov);
      if (!st.ok()) {
        errors[f] = st;
        return;
      }
    }
  });
  for (const Status& st : errors) {
    if (!st.ok()) return st;
  }
  return {};
}

// run.json completed: the job's groups, hosts, the earliest session start, nsys's versions, provenance.
Status NsysImport::write_metadata(std::chrono::steady_clock::time_point t0) {
  fill_job_metadata(meta, comm_names, comm_members, world, options);
  int64_t created = INT64_MAX;
  for (size_t i = 0; i < choices.size(); ++i) {
    meta.hosts[size_t(choices[i].rank)] = summary.ranks[i].host;
    const ExportScan& scan = **scans[choices[i].file];
    if (scan.info.has_session_start) created = std::min(created, scan.info.utc_epoch_ns);
  }
  meta.created_ns = created == INT64_MAX ? 0 : created;
  if (!summary.ranks.empty()) {
    meta.versions["nsys"] = summary.ranks.front().nsys_version;
    meta.versions["nsys_export_schema"] = summary.ranks.front().schema_version;
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  meta.extra["source"] = trace_core::provenance_json(summary);
  return format::write_run_metadata(run_dir, meta);
}

}  // namespace

Result<ImportSummary> import_nsys(const std::vector<fs::path>& files, const fs::path& run_dir,
                                  const ImportOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  NsysImport job(files, run_dir, options);
  RS_RETURN_IF_ERROR(job.check_inputs());
  RS_RETURN_IF_ERROR(job.scan_exports());
  RS_RETURN_IF_ERROR(job.choose_ranks());
  job.place_clocks();
  RS_RETURN_IF_ERROR(job.build_ranks());
  RS_RETURN_IF_ERROR(job.write_metadata(t0));
  return std::move(job.summary);
}

}  // namespace rankscope::nsys
