// chrome_trace.cpp — see chrome_trace.h.
#include "rankscope/reports/chrome_trace.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "rankscope/format/event_stream.h"
#include "rankscope/format/json_text.h"
#include "rankscope/format/run_directory.h"
#include "rankscope/format/vocabulary.h"

namespace rankscope::reports {
namespace {

using nlohmann::json;

// Track ids within a rank's process; range threads keep their own (OS) thread ids.
constexpr int64_t kStepsTid = 0;
constexpr int64_t kCommTidBase = 1'000'000'000;
constexpr int64_t kStreamTidBase = 2'000'000'000;
constexpr int64_t kDrainOverlapNs = 1'000;

// Writes the events of one JSON array, separated by commas, as they come.
class EventSink {
 public:
  explicit EventSink(std::ostream& out) : out_(out) {}
  void write(const json& event) {
    out_ << (count_ == 0 ? "\n" : ",\n") << format::json_text(event);
    ++count_;
  }
  uint64_t count() const { return count_; }

 private:
  std::ostream& out_;
  uint64_t count_ = 0;
};

struct Arrival {
  int rank;
  int64_t tid;
  double arrival_us;
  double end_us;  // < arrival_us when not completed
};

class RankExporter : public format::EventStreamVisitor {
 public:
  RankExporter(int rank, int64_t t0_ns, const ChromeTraceOptions& options, const format::KernelClassifier& classifier,
               EventSink& sink, std::map<std::pair<std::string, uint64_t>, std::vector<Arrival>>& arrivals)
      : rank_(rank), t0_ns_(t0_ns), options_(options), classifier_(classifier), sink_(sink), arrivals_(arrivals) {}

  void on_name(uint32_t id, format::NameKind kind, std::string_view name) override {
    if (names_.size() <= id) names_.resize(size_t(id) + 1);
    names_[id] = std::string(name);
  }
  void on_clock(const format::ClockRecord& clock) override { offset_ns_ = clock.offset_ns; }

  void on_step(const format::StepRecord& step) override {
    if (!in_window(step.step)) return;
    thread_name(kStepsTid, "steps", 0);
    sink_.write({{"ph", "X"},
                 {"cat", "step"},
                 {"name", fmt::format("step {}", step.step)},
                 {"pid", rank_},
                 {"tid", kStepsTid},
                 {"ts", us(step.begin_ns)},
                 {"dur", dur_us(step.begin_ns, step.end_ns)},
                 {"args", {{"step", step.step}}}});
    for (const auto& c : step.collectives) {
      const std::string& comm = name(c.comm_id);
      auto [it, fresh] = comm_tids_.try_emplace(comm, kCommTidBase + int64_t(comm_tids_.size()));
      if (fresh) thread_name(it->second, "comm " + comm, it->second);
      const std::string op(format::short_op_name(format::CollectiveOp(c.op)));
      const bool done = c.end_ns > 0 && c.end_ns >= c.enqueue_ns;
      sink_.write({{"ph", "X"},
                   {"cat", "collective"},
                   {"name", fmt::format("{} {}", comm, op)},
                   {"pid", rank_},
                   {"tid", it->second},
                   {"ts", us(c.enqueue_ns)},
                   {"dur", done ? dur_us(c.enqueue_ns, c.end_ns) : 0.0},
                   {"args",
                    {{"comm", comm},
                     {"seq", c.seq},
                     {"op", op},
                     {"bytes", c.bytes},
                     {"range", name(c.range_id)},
                     {"step", step.step},
                     {"state", std::string(format::state_name(format::CollectiveState(c.state)))}}}});
      arrivals_[{comm, c.seq}].push_back({rank_, it->second, us(c.enqueue_ns), done ? us(c.end_ns) : -1e300});
    }
    for (const auto& cv : step.counters) {
      sink_.write({{"ph", "C"},
                   {"name", name(cv.name_id)},
                   {"pid", rank_},
                   {"ts", us(step.end_ns)},
                   {"args", {{"value", cv.value}}}});
    }
  }

  void on_trace_ranges(int64_t step, std::span<const format::TraceRange> ranges) override {
    if (!in_window(step)) return;
    for (const auto& r : ranges) {
      thread_name(int64_t(r.tid), fmt::format("thread {}", r.tid), 1);
      sink_.write({{"ph", "X"},
                   {"cat", "range"},
                   {"name", name(r.name_id)},
                   {"pid", rank_},
                   {"tid", int64_t(r.tid)},
                   {"ts", us(r.begin_ns)},
                   {"dur", dur_us(r.begin_ns, r.end_ns)},
                   {"args", {{"step", step}, {"depth", r.depth}}}});
    }
  }

  // One GPU track per rank (per device it used): the device timeline, every stream's kernels in
  // time order, NCCL kernels in their own category. Slices on one track must nest, so a kernel that
  // overlaps another without nesting inside it (streams running concurrently) goes to the first
  // "concurrent" lane where it fits; a device that ran one kernel at a time has one track. A kernel
  // that starts less than kDrainOverlapNs before the one it follows ends (on an H100 a dependent
  // launch, e.g. cuBLASLt's split-K reduce, starts as its predecessor drains: 0.1-0.2 us) is drawn
  // from that end instead, with args.overlap_ns saying by how much.
  void on_trace_kernels(int64_t step, std::span<const format::TraceKernel> kernels) override {
    if (!in_window(step)) return;
    order_.resize(kernels.size());
    for (size_t i = 0; i < kernels.size(); ++i) order_[i] = i;
    std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) {
      return kernels[a].begin_ns != kernels[b].begin_ns ? kernels[a].begin_ns < kernels[b].begin_ns
                                                        : kernels[a].end_ns > kernels[b].end_ns;  // outer first
    });
    for (size_t i : order_) {
      const auto& k = kernels[i];
      const int64_t end = std::max(k.end_ns, k.begin_ns);
      auto& lanes = gpu_lanes_[k.device];
      size_t lane = 0;
      int64_t shown_begin = k.begin_ns;
      for (;; ++lane) {
        if (lane == lanes.size()) lanes.emplace_back();
        auto& open = lanes[lane];  // ends of the slices open on this lane, innermost last (non-increasing)
        while (!open.empty() && open.back() <= k.begin_ns) open.pop_back();
        if (open.empty() || end <= open.back()) break;
        const bool draining = open.back() - k.begin_ns < kDrainOverlapNs;
        if (draining && (open.size() == 1 || end <= open[open.size() - 2])) {
          shown_begin = open.back();
          open.pop_back();
          break;
        }
      }
      lanes[lane].push_back(end);
      const int64_t tid = kStreamTidBase + int64_t(k.device) * 1'000'000 + int64_t(lane);
      thread_name(tid,
                  lane == 0 ? fmt::format("gpu {}", k.device) : fmt::format("gpu {} concurrent {}", k.device, lane),
                  tid);
      // Categories: "nccl" for NCCL's kernels (as before), "comm" for other communication kernels
      // (DeepEP, NVSHMEM, custom all-reduce, the user's --comm-kernel), "memcpy", "kernel".
      const format::KernelVerdict& verdict = classify(k.name_id);
      const char* category = verdict.kind == format::KernelClass::kCommunication
                                 ? (verdict.rule == "nccl" ? "nccl" : "comm")
                             : verdict.kind == format::KernelClass::kMemory ? "memcpy"
                                                                            : "kernel";
      sink_.write({{"ph", "X"},
                   {"cat", category},
                   {"name", name(k.name_id)},
                   {"pid", rank_},
                   {"tid", tid},
                   {"ts", us(shown_begin)},
                   {"dur", dur_us(shown_begin, k.end_ns)},
                   {"args",
                    {{"range", k.range_id == 0 ? std::string("(outside any range)") : name(k.range_id)},
                     {"step", step},
                     {"stream", k.stream},
                     {"overlap_ns", shown_begin - k.begin_ns},
                     {"class_rule", verdict.rule}}}});
    }
  }

 private:
  bool in_window(int64_t step) const { return step >= options_.first_step && step <= options_.last_step; }
  // A kernel name's class, decided once per name (user regexes are slow to run per kernel).
  const format::KernelVerdict& classify(uint32_t name_id) {
    auto it = verdicts_.find(name_id);
    if (it == verdicts_.end()) it = verdicts_.emplace(name_id, classifier_.classify(name(name_id))).first;
    return it->second;
  }
  double us(int64_t own_ns) const { return double(own_ns + offset_ns_ - t0_ns_) / 1e3; }
  static double dur_us(int64_t begin, int64_t end) { return end > begin ? double(end - begin) / 1e3 : 0.0; }
  const std::string& name(uint32_t id) const {
    static const std::string kNone;
    return id < names_.size() ? names_[id] : kNone;
  }
  void thread_name(int64_t tid, const std::string& label, int64_t sort_index) {
    if (!named_.insert(tid).second) return;
    sink_.write({{"ph", "M"}, {"name", "thread_name"}, {"pid", rank_}, {"tid", tid}, {"args", {{"name", label}}}});
    sink_.write({{"ph", "M"},
                 {"name", "thread_sort_index"},
                 {"pid", rank_},
                 {"tid", tid},
                 {"args", {{"sort_index", sort_index}}}});
  }

  int rank_;
  int64_t t0_ns_;
  const ChromeTraceOptions& options_;
  const format::KernelClassifier& classifier_;
  std::unordered_map<uint32_t, format::KernelVerdict> verdicts_;
  EventSink& sink_;
  std::map<std::pair<std::string, uint64_t>, std::vector<Arrival>>& arrivals_;
  int64_t offset_ns_ = 0;
  std::vector<std::string> names_;
  std::map<std::string, int64_t> comm_tids_;
  std::map<uint32_t, std::vector<std::vector<int64_t>>> gpu_lanes_;  // by device: lanes of open slice ends
  std::vector<size_t> order_;
  std::set<int64_t> named_;
};

// From the last arriver's slice to each rank that waited for it, at the moment of the last arrival
// (inside every waiter's slice, which lasts until completion).
uint64_t write_flows(const std::map<std::pair<std::string, uint64_t>, std::vector<Arrival>>& arrivals,
                     EventSink& sink) {
  uint64_t id = 0;
  for (const auto& [key, ranks] : arrivals) {
    if (ranks.size() < 2) continue;
    const auto last = std::max_element(ranks.begin(), ranks.end(),
                                       [](const Arrival& a, const Arrival& b) { return a.arrival_us < b.arrival_us; });
    const std::string name = fmt::format("{} #{}", key.first, key.second);
    for (const Arrival& w : ranks) {
      if (&w == &*last || w.end_us < last->arrival_us) continue;
      ++id;
      sink.write({{"ph", "s"},
                  {"cat", "collective"},
                  {"name", name},
                  {"id", id},
                  {"pid", last->rank},
                  {"tid", last->tid},
                  {"ts", last->arrival_us}});
      sink.write({{"ph", "f"},
                  {"bp", "e"},
                  {"cat", "collective"},
                  {"name", name},
                  {"id", id},
                  {"pid", w.rank},
                  {"tid", w.tid},
                  {"ts", last->arrival_us}});
    }
  }
  return id;
}

}  // namespace

Result<ChromeTraceSummary> export_chrome_trace(const std::filesystem::path& run_dir, std::ostream& out,
                                               const ChromeTraceOptions& options) {
  format::OpenOptions open;
  open.read_flight_recorders = false;
  RS_ASSIGN_OR_RETURN(const format::KernelClassifier classifier,
                      format::KernelClassifier::with_patterns(options.comm_kernel_patterns));
  RS_ASSIGN_OR_RETURN(format::RunDirectory run, format::open_run_directory(run_dir, open));
  ChromeTraceSummary summary;
  summary.problems = run.problems;
  // Time zero: when the run started on rank 0's clock, so ts stay small and precise.
  const int64_t t0 = run.metadata ? run.metadata->created_ns : 0;

  const json other = {{"run_dir", run_dir.string()},
                      {"run_id", run.metadata ? run.metadata->run_id : ""},
                      {"producer", "rankscope export --chrome"}};
  out << "{\"displayTimeUnit\":\"ns\",\"otherData\":" << format::json_text(other) << ",\"traceEvents\":[";
  EventSink sink(out);
  std::map<std::pair<std::string, uint64_t>, std::vector<Arrival>> arrivals;
  for (const format::RankFiles& files : run.ranks) {
    if (!files.has_events()) {
      summary.problems.push_back(fmt::format("rank {}: no event stream", files.rank));
      continue;
    }
    std::string label = fmt::format("rank {}", files.rank);
    if (run.metadata && size_t(files.rank) < run.metadata->hosts.size())
      label += " (" + run.metadata->hosts[size_t(files.rank)] + ")";
    sink.write({{"ph", "M"}, {"name", "process_name"}, {"pid", files.rank}, {"args", {{"name", label}}}});
    sink.write(
        {{"ph", "M"}, {"name", "process_sort_index"}, {"pid", files.rank}, {"args", {{"sort_index", files.rank}}}});
    RankExporter exporter(files.rank, t0, options, classifier, sink, arrivals);
    auto scanned = format::scan_rank_events(files, exporter);
    if (!scanned.ok()) {
      summary.problems.push_back(fmt::format("rank {}: {}", files.rank, scanned.status().user_text()));
      continue;
    }
    for (const auto& w : scanned->warnings) summary.problems.push_back(fmt::format("rank {}: {}", files.rank, w));
    ++summary.ranks;
  }
  summary.flows = write_flows(arrivals, sink);
  out << "\n]}\n";
  summary.events = sink.count();
  if (!out) return io_error("writing the trace failed (disk full?)");
  return summary;
}

}  // namespace rankscope::reports
