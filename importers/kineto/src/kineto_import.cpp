// kineto_import.cpp — see kineto_import.h. Reads every trace in parallel (one streaming pass each,
// keeping compact rows), chooses ranks and communicators, aligns clocks, then builds and writes
// each rank and frees its rows.
#include "rankscope/kineto/kineto_import.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "rankscope/trace_core/import_job.h"
#include "rankscope/trace_core/rank_builder.h"
#include "rankscope/format/run_metadata.h"
#include "rankscope/format/snapshot_stream.h"
#include "trace_reader.h"
#include "trace_wire.h"

namespace rankscope::kineto {
namespace {

namespace fs = std::filesystem;

bool is_trace_name(const fs::path& p) {
  const std::string n = p.filename().string();
  auto ends = [&](std::string_view s) { return n.size() > s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0; };
  return ends(".json") || ends(".json.gz");
}

std::string producer_text(const KinetoTrace& t) {
  std::string out = "Kineto";
  for (const auto& [k, v] : t.versions) out += fmt::format("{}{} {}", out == "Kineto" ? " " : ", ", k, v);
  if (!t.backend.empty()) out += fmt::format(", backend {}", t.backend);
  for (const auto& [kind, ops] : t.device_ops) out += fmt::format(", {} device ops {}", ops, kind);
  if (t.old_operator_ranges > 0) out += ", 2020-21 categories (Operator, Runtime, Kernel)";
  return out;
}

// One line per kind of event not read: how many, their summed duration and why.
std::vector<std::string> not_read_text(const KinetoTrace& t) {
  std::vector<std::string> out;
  int64_t device_events = 0, device_ns = 0;
  for (const auto& [what, n] : t.not_read) {
    out.push_back(fmt::format("not read: {} events of {} ({:.3f} ms{}): {}", n.events, what, n.duration_ns / 1e6,
                              n.on_device ? " of device time, left out of the device timeline" : " summed", n.why));
    if (n.on_device) device_events += n.events, device_ns += n.duration_ns;
  }
  if (t.device_ops.empty() && device_events > 0) {
    out.push_back(fmt::format("no device work read: the trace has {} device records ({:.3f} ms) the import cannot place, so "
                              "this rank has no device timeline and its reports show host time, as host time",
                              device_events, device_ns / 1e6));
  }
  return out;
}

// What tells this trace's job from another's (import_job.h check_one_job).
trace_core::JobSignature job_signature(const KinetoTrace& t, int rank) {
  trace_core::JobSignature j;
  j.file = t.file.string();
  j.rank = rank;
  j.world_size = t.world_size;
  j.group_count = t.group_count;
  for (const ProcessGroupInfo& g : t.groups) {
    std::string ranks;
    for (int r : g.ranks) ranks += fmt::format("{}{}", ranks.empty() ? "" : ", ", r);
    j.groups[g.name] = fmt::format("{} ({}{})", g.desc.empty() ? "no description" : g.desc, g.backend,
                                   g.ranks.empty() ? std::string() : ", ranks [" + ranks + "]");
  }
  j.devices = t.device_names;
  std::sort(j.devices.begin(), j.devices.end());
  // Epoch times: the base plus ts, or ts alone when it already is one (Kineto before baseTimeNanoseconds
  // wrote epoch microseconds); a trace whose times are neither is not compared on its clock.
  if (t.min_ts <= t.rows.max_ts) {
    const int64_t base = t.base_time_ns.value_or(0);
    const int64_t first = trace_core::add_saturating(t.min_ts, base), last = trace_core::add_saturating(t.rows.max_ts, base);
    constexpr int64_t kYear2001Ns = 978307200LL * 1000000000;
    if (first > kYear2001Ns) j.epoch_window_ns = {first, last};
  }
  return j;
}

std::string drop_text(const KinetoTrace& t) {
  const DropCounts& d = t.dropped;
  return fmt::format("{} events dropped ({} with a field of the wrong type, {} with a time out of range, {} with a negative "
                     "duration, {} missing a field)", d.total(), d.wrong_type, d.bad_time, d.negative_duration, d.missing_field);
}

struct RankChoice {
  size_t trace = 0;
  int rank = -1;
  std::string identity;
  std::vector<std::vector<trace_core::NcclKernelTimes>> streams;  // by communicator index (alignment)
  std::map<uint32_t, uint32_t> comm_of_stream;              // NCCL stream -> communicator index
};

}  // namespace

Result<std::vector<TraceInput>> find_trace_inputs(const std::vector<fs::path>& inputs) {
  std::vector<TraceInput> found;
  for (const auto& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<fs::path> here;
      for (const auto& e : fs::directory_iterator(in, ec)) {
        if (e.is_regular_file(ec) && is_trace_name(e.path())) here.push_back(e.path());
      }
      if (here.empty()) return invalid_argument(fmt::format("{}: no *.json or *.json.gz trace in this folder", in.string()));
      std::sort(here.begin(), here.end());
      for (auto& f : here) found.push_back({std::move(f), true});
    } else if (fs::exists(in, ec)) {
      found.push_back({in, false});
    } else {
      return invalid_argument(fmt::format("{}: no such file or folder", in.string()));
    }
  }
  std::set<fs::path> seen;
  for (const auto& f : found) {
    if (!seen.insert(fs::weakly_canonical(f.file)).second) return invalid_argument(fmt::format("{} is given twice", f.file.string()));
  }
  return found;
}

Result<std::vector<fs::path>> expand_trace_inputs(const std::vector<fs::path>& inputs) {
  RS_ASSIGN_OR_RETURN(const std::vector<TraceInput> found, find_trace_inputs(inputs));
  std::vector<fs::path> files;
  for (const TraceInput& f : found) files.push_back(f.file);
  return files;
}

namespace {

// Every trace read (one pass each, in parallel); the first that cannot be read fails them all,
// except a JSON file found in a folder that is no profiler trace at all (a job's config or notes
// beside its traces): it is skipped and named in `skipped`. A file named on its own is never skipped.
Result<std::vector<KinetoTrace>> read_traces(const std::vector<TraceInput>& inputs, int threads,
                                             std::vector<std::string>& skipped) {
  std::vector<std::optional<Result<KinetoTrace>>> read(inputs.size());
  trace_core::parallel_for(inputs.size(), threads, [&](size_t i) { read[i] = read_trace(inputs[i].file); });
  std::vector<KinetoTrace> traces;
  traces.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    Result<KinetoTrace>& r = *read[i];
    if (!r.ok() && inputs[i].found_in_folder && r.status().code() == StatusCode::kUnsupported) {
      skipped.push_back(inputs[i].file.string());
      continue;
    }
    if (!r.ok()) return r.status();
    traces.push_back(std::move(*r));
  }
  if (traces.empty())
    return invalid_argument(fmt::format("no PyTorch profiler trace among {} JSON files (first: {})", inputs.size(),
                                        inputs.front().file.string()));
  return traces;
}

// The job-level steps and the ranks' writing, from traces as read (here, or on the nodes and
// decoded: trace_wire.h), in the phases import_read_traces runs in order; each reads what the ones
// before it left in these members.
struct KinetoJob {
  std::vector<KinetoTrace> traces;
  const fs::path& run_dir;
  const ImportOptions& options;
  std::vector<fs::path> files;
  ImportSummary summary;
  std::vector<RankChoice> choices;  // one a trace, in the traces' order
  std::vector<size_t> order;        // choices by rank
  int world = 0;
  std::vector<std::string> comm_names;
  std::map<std::string, uint32_t> comm_of_group;  // NCCL process group name -> communicator
  size_t nccl_comms = 0;                          // communicators [0, nccl_comms) are NCCL's
  std::vector<std::vector<int>> comm_members;
  std::vector<trace_core::ClockSubject> subjects;  // in `order`
  format::RunMetadata meta;

  KinetoJob(std::vector<KinetoTrace> read, const fs::path& dir, const ImportOptions& opts)
      : traces(std::move(read)), run_dir(dir), options(opts) {}
  Status choose_ranks();
  void nccl_communicators();
  void host_communicators();
  void place_clocks();
  Status write_ranks();
  Status write_metadata(std::chrono::steady_clock::time_point t0);
};

// Each trace's rank (distributedInfo, else the file name; one trace alone is rank 0 of 1), one job,
// no rank twice.
Status KinetoJob::choose_ranks() {
  choices.resize(traces.size());
  for (size_t i = 0; i < traces.size(); ++i) {
    const KinetoTrace& t = traces[i];
    RankChoice& c = choices[i];
    c.trace = i;
    std::string stem, rule;
    const auto from_name = trace_core::rank_from_file_name(t.file, {".gz", ".json", ".pt.trace"}, &stem, &rule);
    const bool rank_word = from_name && rule.starts_with("the number after");
    if (t.rank) {
      c.rank = *t.rank;
      c.identity = "distributedInfo.rank";  // a number in the file name may be a pid: not compared
    } else if (traces.size() == 1 && !rank_word) {
      // One trace and no rank anywhere (HTA's triton_example.json.gz, a single-GPU job's trace,
      // mi250_minitoy_train_ROCm6_2_kineto where the last number is a ROCm version): it is the whole
      // job. A bare number would make rank 2 of 3 with two ranks "missing".
      c.rank = 0;
      c.identity = from_name ? fmt::format("the only trace, with no distributedInfo.rank and no rank word in its name "
                                           "(its last number, {}, is not taken for a rank): rank 0 of 1",
                                           *from_name)
                             : std::string("the only trace, with no distributedInfo.rank and no number in its name: rank 0 of 1");
    } else if (from_name) {
      c.rank = *from_name;
      c.identity = fmt::format("{} (no distributedInfo.rank)", rule);
    } else {
      return invalid_argument(fmt::format("{}: cannot tell which rank this is: no distributedInfo.rank and no number in the "
                                          "file name, among {} traces; hint: name traces by rank (rank3.json.gz), rankscope never "
                                          "numbers ranks by sorted file name", traces.size(), t.file.string()));
    }
    world = std::max(world, c.rank + 1);
    if (t.world_size) world = std::max(world, *t.world_size);
  }
  {  // traces of two different jobs are never merged without a word (before the
     // duplicate-rank check: two jobs' rank 0 is a mixed folder, not one rank twice)
    std::vector<trace_core::JobSignature> jobs;
    for (size_t i = 0; i < traces.size(); ++i) jobs.push_back(job_signature(traces[i], choices[i].rank));
    RS_RETURN_IF_ERROR(trace_core::check_one_job(jobs, options.allow_mixed, summary.warnings));
  }
  order.resize(choices.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return choices[a].rank < choices[b].rank; });
  for (size_t i = 1; i < order.size(); ++i) {
    const RankChoice &a = choices[order[i - 1]], &b = choices[order[i]];
    if (a.rank == b.rank) {
      return invalid_argument(fmt::format("rank {} appears twice: {} ({}) and {} ({})", a.rank, traces[a.trace].file.string(),
                                          a.identity, traces[b.trace].file.string(), b.identity));
    }
  }
  if (int(choices.size()) < world) {
    summary.warnings.push_back(fmt::format("{} of {} ranks have no trace", world - int(choices.size()), world));
  }
  return {};
}

// One communicator per NCCL process group (named by its kernels' args), else per NCCL stream
// ordinal (first kernel first, as nsys imports do); each rank's kernels on each.
void KinetoJob::nccl_communicators() {
  std::map<std::string, std::string> named_groups;  // pg name -> description
  std::vector<std::map<uint32_t, std::vector<trace_core::NcclKernelTimes>>> nccl_by_stream(traces.size());
  std::vector<std::vector<uint32_t>> anonymous_streams(traces.size());  // by first kernel
  size_t max_anonymous = 0;
  for (size_t i = 0; i < traces.size(); ++i) {
    const KinetoTrace& t = traces[i];
    auto& by_stream = nccl_by_stream[i];
    for (const trace_core::GpuOp& op : t.rows.ops) {
      if (op.kind == trace_core::GpuOpKind::kKernel && trace_core::is_nccl_kernel(t.rows.pool[op.short_name])) {
        by_stream[op.stream].push_back({op.start, op.end, trace_core::nccl_op_from_name(t.rows.pool[op.short_name])});
      }
    }
    std::vector<std::pair<int64_t, uint32_t>> first;
    for (auto& [stream, v] : by_stream) {
      std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
      if (auto g = t.nccl_stream_groups.find(stream); g != t.nccl_stream_groups.end()) named_groups.emplace(g->second.name, g->second.desc);
      else first.emplace_back(v.front().start, stream);
    }
    std::sort(first.begin(), first.end());
    for (const auto& f : first) anonymous_streams[i].push_back(f.second);
    max_anonymous = std::max(max_anonymous, first.size());
  }
  std::set<std::string> descriptions;
  for (const auto& [name, desc] : named_groups) {
    comm_of_group[name] = uint32_t(comm_names.size());
    comm_names.push_back(desc.empty() || !descriptions.insert(desc).second ? "pg" + name : desc);
  }
  for (size_t k = 0; k < max_anonymous; ++k) comm_names.push_back(fmt::format("nccl{}", k));
  nccl_comms = comm_names.size();
  for (size_t i = 0; i < traces.size(); ++i) {
    RankChoice& c = choices[i];
    c.streams.resize(nccl_comms);
    for (auto& [stream, v] : nccl_by_stream[i]) {
      auto g = traces[i].nccl_stream_groups.find(stream);
      uint32_t comm = 0;
      if (g != traces[i].nccl_stream_groups.end()) {
        comm = comm_of_group.at(g->second.name);
      } else {
        const auto& anon = anonymous_streams[i];
        comm = uint32_t(comm_of_group.size() + size_t(std::find(anon.begin(), anon.end(), stream) - anon.begin()));
      }
      c.comm_of_stream[stream] = comm;
      c.streams[comm] = std::move(v);
    }
  }
  nccl_by_stream.clear();
}

// Then one communicator per host backend (Gloo's collectives are host annotations), and the members
// of every communicator.
void KinetoJob::host_communicators() {
  std::set<std::string> backends;
  for (const KinetoTrace& t : traces)
    for (const HostAnnotation& h : t.host_annotations) backends.insert(h.backend);
  const std::vector<std::string> backend_list(backends.begin(), backends.end());
  size_t group_count = 0;
  for (const KinetoTrace& t : traces) group_count = std::max(group_count, t.groups.size());
  for (const std::string& b : backend_list) comm_names.push_back(b);
  if (!backend_list.empty() && group_count > 1) {
    summary.warnings.push_back(fmt::format("the traces name {} process groups but {} annotations do not say which group ran "
                                           "them: all are matched as one sequence per backend", group_count, backend_list.front()));
  }
  comm_members.resize(comm_names.size());
  for (size_t i = 0; i < traces.size(); ++i) {
    KinetoTrace& t = traces[i];
    RankChoice& c = choices[i];
    for (size_t k = 0; k < nccl_comms; ++k) {
      if (!c.streams[k].empty()) comm_members[k].push_back(c.rank);
    }
    std::sort(t.host_annotations.begin(), t.host_annotations.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
    for (size_t b = 0; b < backend_list.size(); ++b) {
      const uint32_t comm = uint32_t(nccl_comms + b);
      std::vector<trace_core::NcclKernelTimes> times;
      uint64_t seq = 0;
      for (const HostAnnotation& h : t.host_annotations) {
        if (h.backend != backend_list[b]) continue;
        trace_core::HostCollective hc;
        hc.enqueue = hc.start = h.start;
        hc.end = h.end;
        hc.gtid = h.gtid;
        hc.comm = comm;
        hc.seq = seq++;
        hc.op = h.op;
        hc.bytes = h.bytes;
        t.rows.host_collectives.push_back(hc);
        times.push_back({h.start, h.end, h.op});
      }
      if (!times.empty()) comm_members[comm].push_back(c.rank);
      c.streams.push_back(std::move(times));
    }
  }
  // distributedInfo's pg_config knows a group's members, also those whose trace is missing.
  for (const KinetoTrace& t : traces) {
    for (const ProcessGroupInfo& g : t.groups) {
      if (auto it = comm_of_group.find(g.name); it != comm_of_group.end() && !g.ranks.empty()) comm_members[it->second] = g.ranks;
    }
  }
  for (auto& m : comm_members) {
    std::sort(m.begin(), m.end());
    m.erase(std::unique(m.begin(), m.end()), m.end());
  }
}

// Each rank's clock aligned on the collectives it shares with the others.
void KinetoJob::place_clocks() {
  subjects.resize(order.size());
  for (size_t j = 0; j < order.size(); ++j) {
    const RankChoice& c = choices[order[j]];
    const KinetoTrace& t = traces[c.trace];
    subjects[j].rank = c.rank;
    subjects[j].streams = &c.streams;
    subjects[j].to_own_ns = t.base_time_ns.value_or(0);
  }
  trace_core::align_clocks(subjects, comm_names, "all-reduce/all-gather collectives",
                     "reference: its own baseTimeNanoseconds");
}

// Each rank built and written (trace_core's rank builder), over the cores. run.json is written first
// (an interrupted import is recognised and redone), completed at the end.
Status KinetoJob::write_ranks() {
  RS_ASSIGN_OR_RETURN(meta, trace_core::start_import_run(run_dir, files, "rankscope import-kineto", "kineto",
                                                         options.command_line, world));
  const std::string run_id = meta.run_id;

  summary.world_size = world;
  summary.ranks.resize(order.size());
  std::vector<Status> errors(order.size());
  trace_core::parallel_for(order.size(), options.threads, [&](size_t j) {
    const RankChoice& c = choices[order[j]];
    KinetoTrace& t = traces[c.trace];
    const trace_core::ClockSubject& clock = subjects[j];
    trace_core::RankProvenance& prov = summary.ranks[j];
    prov.rank = c.rank;
    prov.file = t.file.string();
    prov.producer = producer_text(t);
    prov.identity = c.identity;
    prov.session_start_utc_ns = t.base_time_ns.value_or(0);
    prov.alignment = clock.alignment;
    prov.offset_ms = clock.offset_ns / 1e6;
    prov.residual_ms = clock.residual_ns < 0 ? -1 : clock.residual_ns / 1e6;
    prov.warnings = t.warnings;
    if (!t.base_time_ns && !job_signature(t, c.rank).epoch_window_ns) {
      // Before baseTimeNanoseconds (2022) Kineto wrote epoch microseconds: only other times are relative.
      prov.warnings.push_back("no baseTimeNanoseconds and times are not epoch times: this rank's clock is the trace's own");
    }
    if (!t.stopped_early.empty()) {
      prov.warnings.push_back(fmt::format("partial import: {}; kept the {} events read before it, the rest is lost",
                                          t.stopped_early, t.events));
    }
    if (t.dropped.total() > 0) prov.warnings.push_back(drop_text(t));
    for (std::string& line : not_read_text(t)) prov.warnings.push_back(std::move(line));
    trace_core::ImportOptions rank_options = options;
    if (rank_options.step_range.empty() && t.profiler_steps > 0) rank_options.step_range = "ProfilerStep";
    trace_core::RankPlan plan;
    plan.rank = c.rank;
    plan.world_size = world;
    plan.process = t.process_key;
    plan.to_own_ns = t.base_time_ns.value_or(0);
    plan.session_zero_ts = INT64_MIN;  // Kineto times have no capture start to fall before
    plan.clock = format::ClockRecord{int64_t(clock.offset_ns), clock.residual_ns < 0 ? -1 : int64_t(clock.residual_ns),
                                     plan.to_own_ns, uint32_t(clock.matched), 0};
    plan.run_id = run_id;
    plan.comm_names = comm_names;
    plan.comm_members = comm_members;
    plan.comm_of_stream = c.comm_of_stream;
    plan.run_dir = run_dir;
    errors[j] = trace_core::build_rank(t.file, t.rows, plan, rank_options, prov);
    t.rows = trace_core::ProcessRows{};  // this rank is written: its rows are not needed any more
  });
  for (const Status& st : errors) {
    if (!st.ok()) return st;
  }
  return {};
}

// run.json completed: the job's groups, the earliest start, Kineto's versions, provenance.
Status KinetoJob::write_metadata(std::chrono::steady_clock::time_point t0) {
  trace_core::fill_job_metadata(meta, comm_names, comm_members, world, options);
  int64_t created = INT64_MAX;
  for (const KinetoTrace& t : traces) {
    if (t.base_time_ns) created = std::min(created, *t.base_time_ns);
  }
  meta.created_ns = created == INT64_MAX ? 0 : created;
  if (!order.empty()) {
    for (const auto& [k, v] : traces[choices[order[0]].trace].versions) meta.versions["kineto_" + k] = v;
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  meta.extra["source"] = trace_core::provenance_json(summary);
  return format::write_run_metadata(run_dir, meta);
}

// `t0` is when the import began (the summary's seconds).
Result<ImportSummary> import_read_traces(std::vector<KinetoTrace> traces, const fs::path& run_dir,
                                         const ImportOptions& options, std::chrono::steady_clock::time_point t0,
                                         std::vector<std::string> warnings = {}) {
  KinetoJob job(std::move(traces), run_dir, options);
  for (const KinetoTrace& t : job.traces) job.files.push_back(t.file);
  job.summary.kind = "kineto";
  job.summary.warnings = std::move(warnings);
  RS_RETURN_IF_ERROR(job.choose_ranks());
  job.nccl_communicators();
  job.host_communicators();
  job.place_clocks();
  RS_RETURN_IF_ERROR(job.write_ranks());
  RS_RETURN_IF_ERROR(job.write_metadata(t0));
  return std::move(job.summary);
}

}  // namespace

Result<ImportSummary> import_kineto(const std::vector<fs::path>& inputs, const fs::path& run_dir, const ImportOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  if (inputs.empty()) return invalid_argument("no traces given; hint: torch.profiler writes one per rank with on_trace_ready=tensorboard_trace_handler(DIR)");
  RS_ASSIGN_OR_RETURN(const std::vector<TraceInput> found, find_trace_inputs(inputs));
  std::vector<std::string> skipped;
  RS_ASSIGN_OR_RETURN(std::vector<KinetoTrace> traces, read_traces(found, options.threads, skipped));
  for (std::string& f : skipped) f = fmt::format("skipped {}: JSON, but not a profiler trace", f);
  return import_read_traces(std::move(traces), run_dir, options, t0, std::move(skipped));
}

Result<PackSummary> pack_traces(const std::vector<fs::path>& inputs, std::FILE* out, const std::string& host, int threads,
                                bool none_ok) {
  if (inputs.empty()) return invalid_argument("no traces given");
  std::vector<fs::path> files;
  if (none_ok) {
    // Only the folders and files that are here: a node that ran no profiled rank has none of them.
    std::vector<fs::path> here;
    std::error_code ec;
    for (const fs::path& in : inputs)
      if (fs::exists(in, ec) && !(fs::is_directory(in, ec) && !expand_trace_inputs({in}).ok())) here.push_back(in);
    if (!here.empty()) {
      RS_ASSIGN_OR_RETURN(files, expand_trace_inputs(here));
    }
  } else {
    RS_ASSIGN_OR_RETURN(files, expand_trace_inputs(inputs));
  }
  PackSummary summary;
  summary.traces = int(files.size());
  format::SnapshotWriter writer(out);
  // The manifest first: a head cut off later still knows what this node had.
  nlohmann::json manifest = {{"host", host}, {"files", nlohmann::json::array()}};
  for (const fs::path& f : files) {
    std::error_code ec;
    const uint64_t bytes = fs::file_size(f, ec);
    summary.trace_bytes += ec ? 0 : bytes;
    manifest["files"].push_back({{"file", fs::absolute(f).lexically_normal().string()}, {"bytes", ec ? 0 : bytes}});
  }
  RS_RETURN_IF_ERROR(writer.add(kPackManifest, manifest.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)));
  // One trace in memory per thread: read, encode, add (the writer is not shared while it writes).
  std::mutex writing;
  std::vector<Status> errors(files.size());
  trace_core::parallel_for(files.size(), threads, [&](size_t i) {
    auto trace = read_trace(files[i]);
    if (!trace.ok()) {
      errors[i] = trace.status();
      return;
    }
    trace->file = fs::absolute(trace->file).lexically_normal();
    const std::vector<uint8_t> bytes = encode_trace(*trace);
    std::lock_guard<std::mutex> lock(writing);
    errors[i] = writer.add(fmt::format("trace-{:06}.rkw", i), bytes);
  });
  for (const Status& st : errors) RS_RETURN_IF_ERROR(st);
  RS_RETURN_IF_ERROR(writer.finish());
  summary.packed_bytes = writer.bytes_in();
  summary.stream_bytes = writer.bytes_out();
  return summary;
}

Result<ImportSummary> import_kineto_packed(const std::vector<PackedNode>& nodes, const fs::path& run_dir,
                                           const ImportOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::pair<std::string, fs::path>> packs;  // (host, file)
  for (const PackedNode& n : nodes) {
    std::error_code ec;
    std::vector<fs::path> here;
    for (const auto& e : fs::directory_iterator(n.dir, ec))
      if (e.path().extension() == ".rkw") here.push_back(e.path());
    if (ec) return io_error(fmt::format("node {}: cannot read {}: {}", n.host, n.dir.string(), ec.message()));
    std::sort(here.begin(), here.end());
    for (auto& f : here) packs.emplace_back(n.host, std::move(f));
  }
  if (packs.empty()) return invalid_argument("no node sent a trace");
  std::vector<std::optional<Result<KinetoTrace>>> decoded(packs.size());
  trace_core::parallel_for(packs.size(), options.threads, [&](size_t i) {
    const auto& [host, file] = packs[i];
    const std::string source = fmt::format("node {}, {}", host, file.filename().string());
    std::ifstream in(file, std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      decoded[i] = io_error(fmt::format("{}: cannot read", source));
      return;
    }
    decoded[i] = decode_trace(bytes, source);
    // A trace's file is named as its node sees it: host:path.
    if (decoded[i]->ok()) (*decoded[i])->file = host + ":" + (*decoded[i])->file.string();
  });
  std::vector<KinetoTrace> traces;
  for (auto& d : decoded) {
    if (!d->ok()) return d->status();
    traces.push_back(std::move(**d));
  }
  decoded.clear();
  return import_read_traces(std::move(traces), run_dir, options, t0);
}

}  // namespace rankscope::kineto
