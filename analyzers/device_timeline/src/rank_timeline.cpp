// rank_timeline.cpp — see rank_timeline.h.
#include "rank_timeline.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace rankscope::analyzers::device_timeline {
namespace {

struct RawOp {
  format::TraceKernel k;
  int64_t step;
};
struct RawLaunch {
  format::TraceLaunch l;
  int64_t step;
};

// Keeps the capture window's ops and launches, the names and the steps' wall times; nothing else.
class TimelineVisitor final : public format::EventStreamVisitor {
 public:
  void on_name(uint32_t id, format::NameKind, std::string_view name) override {
    if (id >= names.size()) names.resize(id + 1);
    names[id] = std::string(name);
  }
  void on_step(const format::StepRecord& s) override { step_ns[s.step] = s.end_ns - s.begin_ns; }
  void on_trace_kernels(int64_t step, std::span<const format::TraceKernel> k) override {
    for (const auto& x : k) ops.push_back({x, step});
  }
  void on_trace_launches(int64_t step, std::span<const format::TraceLaunch> l) override {
    for (const auto& x : l) launches.push_back({x, step});
  }
  std::vector<std::string> names;
  std::map<int64_t, int64_t> step_ns;
  std::vector<RawOp> ops;
  std::vector<RawLaunch> launches;
};

// The key an op and its launch record share: where and when it ran, and its name.
auto op_key(uint32_t device, uint32_t stream, int64_t begin, int64_t end, uint32_t name) {
  return std::make_tuple(device, stream, begin, end, name);
}

}  // namespace

Result<RankTimeline> read_rank_timeline(const format::RankFiles& files, const format::KernelClassifier& classifier) {
  TimelineVisitor v;
  RS_ASSIGN_OR_RETURN(format::EventStreamScan scan, format::scan_rank_events(files, v));
  (void)scan;

  RankTimeline t;
  t.rank = files.rank;
  t.names.push_back("");
  t.rules.push_back("");
  std::vector<uint32_t> local(v.names.size(), 0);
  std::vector<format::KernelClass> kind_of(1, format::KernelClass::kCompute);
  auto name = [&](uint32_t file_id, bool kernel) -> uint32_t {
    if (file_id == 0 || file_id >= v.names.size()) return 0;
    if (local[file_id] == 0) {
      local[file_id] = uint32_t(t.names.size());
      t.names.push_back(v.names[file_id]);
      if (kernel) {
        format::KernelVerdict verdict = classifier.classify(v.names[file_id]);
        t.rules.push_back(std::move(verdict.rule));
        kind_of.push_back(verdict.kind);
      } else {
        t.rules.push_back("");
        kind_of.push_back(format::KernelClass::kCompute);
      }
    }
    return local[file_id];
  };

  t.ops.reserve(v.ops.size());
  for (const RawOp& r : v.ops) {
    Op op;
    op.begin = r.k.begin_ns;
    op.end = std::max(r.k.end_ns, r.k.begin_ns);
    op.step = r.step;
    op.name = name(r.k.name_id, true);
    op.device = r.k.device;
    op.stream = r.k.stream;
    op.kind = kind_of[op.name];
    t.ops.push_back(op);
  }
  std::vector<RawOp>().swap(v.ops);
  t.launches.reserve(v.launches.size());
  for (const RawLaunch& r : v.launches) {
    Launch l;
    l.begin = r.l.launch_begin_ns;
    l.end = std::max(r.l.launch_end_ns, r.l.launch_begin_ns);
    l.gpu_begin = r.l.gpu_begin_ns;
    l.gpu_end = std::max(r.l.gpu_end_ns, r.l.gpu_begin_ns);
    l.step = r.step;
    l.kernel = name(r.l.kernel_id, true);
    l.api = name(r.l.api_id, false);
    l.device = r.l.device;
    l.stream = r.l.stream;
    t.launches.push_back(l);
  }
  std::vector<RawLaunch>().swap(v.launches);

  // Join each launch to its op: both sorted by (device, stream, begin, end, name), then merged.
  std::vector<uint32_t> by_op(t.ops.size()), by_launch(t.launches.size());
  for (uint32_t i = 0; i < by_op.size(); ++i) by_op[i] = i;
  for (uint32_t i = 0; i < by_launch.size(); ++i) by_launch[i] = i;
  std::sort(by_op.begin(), by_op.end(), [&](uint32_t a, uint32_t b) {
    const Op &x = t.ops[a], &y = t.ops[b];
    return op_key(x.device, x.stream, x.begin, x.end, x.name) < op_key(y.device, y.stream, y.begin, y.end, y.name);
  });
  std::sort(by_launch.begin(), by_launch.end(), [&](uint32_t a, uint32_t b) {
    const Launch &x = t.launches[a], &y = t.launches[b];
    return op_key(x.device, x.stream, x.gpu_begin, x.gpu_end, x.kernel) <
           op_key(y.device, y.stream, y.gpu_begin, y.gpu_end, y.kernel);
  });
  for (size_t i = 0, j = 0; i < by_op.size() && j < by_launch.size();) {
    const Op& o = t.ops[by_op[i]];
    const Launch& l = t.launches[by_launch[j]];
    const auto ko = op_key(o.device, o.stream, o.begin, o.end, o.name);
    const auto kl = op_key(l.device, l.stream, l.gpu_begin, l.gpu_end, l.kernel);
    if (ko < kl)
      ++i;
    else if (kl < ko)
      ++j;
    else
      t.ops[by_op[i++]].launch = int32_t(by_launch[j++]);
  }
  std::sort(t.ops.begin(), t.ops.end(),
            [](const Op& a, const Op& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });

  double step_sum = 0;
  int steps_known = 0;
  for (const Op& o : t.ops) {
    if (t.traced_steps.empty() || t.traced_steps.back() != o.step) t.traced_steps.push_back(o.step);
  }
  std::sort(t.traced_steps.begin(), t.traced_steps.end());
  t.traced_steps.erase(std::unique(t.traced_steps.begin(), t.traced_steps.end()), t.traced_steps.end());
  for (int64_t s : t.traced_steps) {
    if (auto it = v.step_ns.find(s); it != v.step_ns.end() && it->second > 0)
      step_sum += double(it->second), ++steps_known;
  }
  t.step_ms = steps_known ? step_sum / steps_known / 1e6 : 0;
  int64_t first = INT64_MAX;
  if (!t.ops.empty()) first = t.ops.front().begin;
  for (const Launch& l : t.launches) first = std::min(first, l.begin);
  t.first_ns = first == INT64_MAX ? 0 : first;
  return t;
}

}  // namespace rankscope::analyzers::device_timeline
