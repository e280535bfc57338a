// rank_builder.cpp — see rank_builder.h.
#include "rankscope/trace_core/rank_builder.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "rankscope/trace_core/import_job.h"
#include "rankscope/format/flight_recorder_writer.h"
#include "rankscope/format/op_family.h"
#include "rankscope/format/run_directory_layout.h"

namespace rankscope::trace_core {
namespace {

using format::CollectiveOp;
using format::NameKind;

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
constexpr size_t kMaxFlagged = 8;

struct Range {
  int64_t start = 0, end = 0;
  uint64_t gtid = 0;
  uint32_t row = 0;          // index into rows.nvtx
  uint32_t domain = 0;
  uint32_t name = 0;         // index into Names
  uint32_t depth = 0;
  int64_t gpu_start = INT64_MAX, gpu_end = INT64_MIN;
  uint32_t ops = 0;
  bool push_pop = true, cross_thread = false, open_end = false, step = false;
  bool op_leaf = false;      // a run of framework ops (op_family.h): never where a launch or collective is placed
  int64_t step_number = -1;  // for step frames: the number the range carries (payload or text), -1 none
  int64_t projected() const { return ops > 0 ? gpu_end - gpu_start : 0; }
};

struct Launch {
  int64_t start = 0, end = 0;
  uint64_t gtid = 0;
  int64_t gpu_start = INT64_MAX, gpu_end = INT64_MIN;
  uint32_t ops = 0;
  uint32_t api_name = 0;        // pool index of the runtime/driver call's name (0: unknown)
  uint32_t range = kNone;       // innermost kept range containing the launch (index into ranges)
  uint32_t nccl_range = kNone;  // innermost NCCL-domain range containing it
};

struct Names {
  std::vector<std::string> list;
  std::unordered_map<std::string, uint32_t> ids;
  uint32_t id(const std::string& s) {
    auto [it, fresh] = ids.try_emplace(s, uint32_t(list.size()));
    if (fresh) list.push_back(s);
    return it->second;
  }
};

// Min/max over index intervals (iterative segment tree), for the projection sweep.
class MinMaxTree {
 public:
  void build(const std::vector<int64_t>& lo, const std::vector<int64_t>& hi) {
    n_ = lo.size();
    min_.assign(2 * n_, INT64_MAX);
    max_.assign(2 * n_, INT64_MIN);
    for (size_t i = 0; i < n_; ++i) min_[n_ + i] = lo[i], max_[n_ + i] = hi[i];
    for (size_t i = n_; i-- > 1;) {
      min_[i] = std::min(min_[2 * i], min_[2 * i + 1]);
      max_[i] = std::max(max_[2 * i], max_[2 * i + 1]);
    }
  }
  // [l, r)
  std::pair<int64_t, int64_t> query(size_t l, size_t r) const {
    int64_t a = INT64_MAX, b = INT64_MIN;
    for (l += n_, r += n_; l < r; l >>= 1, r >>= 1) {
      if (l & 1) a = std::min(a, min_[l]), b = std::max(b, max_[l]), ++l;
      if (r & 1) --r, a = std::min(a, min_[r]), b = std::max(b, max_[r]);
    }
    return {a, b};
  }

 private:
  size_t n_ = 0;
  std::vector<int64_t> min_, max_;
};

// "train_step" matches "train_step", "train_step 12", "train_step_12", "train_step#12"; the
// number (if any) is returned, -1 without one. nullopt: no match.
std::optional<int64_t> match_step(std::string_view text, std::string_view name) {
  if (text.substr(0, name.size()) != name) return std::nullopt;
  std::string_view rest = text.substr(name.size());
  if (rest.empty()) return int64_t(-1);
  size_t i = 0;
  while (i < rest.size() && (rest[i] == ' ' || rest[i] == '_' || rest[i] == '#' || rest[i] == ':' || rest[i] == '=')) ++i;
  if (i == 0 || i == rest.size()) return std::nullopt;
  int64_t v = 0;
  auto [p, ec] = std::from_chars(rest.data() + i, rest.data() + rest.size(), v);
  if (ec != std::errc() || p != rest.data() + rest.size()) return std::nullopt;
  return v;
}

// For every launch (sorted by start within `threads`), the innermost range of `ranges` on the
// same thread whose interval contains the launch call: one sweep with a stack per thread.
template <class Assign>
void innermost_sweep(const std::vector<Range>& ranges, const std::vector<uint32_t>& range_ids,
                     const std::vector<Launch>& launches, const std::vector<uint32_t>& launch_ids, Assign assign) {
  std::vector<uint32_t> stack;
  size_t ri = 0;
  for (uint32_t li : launch_ids) {
    const Launch& l = launches[li];
    while (ri < range_ids.size() && ranges[range_ids[ri]].start <= l.start) stack.push_back(range_ids[ri++]);
    // A range that ended before this launch ends cannot contain any later launch either.
    while (!stack.empty() && ranges[stack.back()].end < l.end) stack.pop_back();
    if (!stack.empty()) assign(li, stack.back());
  }
}

// A collective as the rank's stream records it: from an NCCL kernel (one communicator per stream) or a
// host-only collective (Gloo and other CPU backends).
struct Coll {
  uint32_t op_index;  // the NCCL kernel, kNone for a host collective
  uint32_t comm;   // stream ordinal
  uint64_t seq;
  int64_t enqueue; // session ts
  CollectiveOp op;
  format::DataType dtype;
  uint64_t launch_gtid;
  uint32_t range;  // innermost kept range (index) or kNone
  int64_t start = 0, end = 0;  // data movement (the kernel, or the host call)
  uint32_t signature = 0;      // pool index of the kernel's short name (0 for host collectives)
  uint64_t bytes = 0;
};

// A step: between two step frames, or two repeats of the step's first collective.
struct Step {
  int64_t number, begin, end;  // session ts
  uint32_t frame = kNone;      // range index of the step frame
};

// One rank's rows turned into its event stream and flight recorder. build_rank runs the phases in
// order (run()); each reads what the ones before it left in these members.
struct RankBuild {
  RankBuild(const std::filesystem::path& file, const ProcessRows& rows, const RankPlan& plan, const ImportOptions& options,
            RankProvenance& prov)
      : file(file), rows(rows), plan(plan), options(options), prov(prov), pool(rows.pool) {}

  Status run() {
    choose_domains();
    RS_RETURN_IF_ERROR(collect_ranges());
    name_ranges();
    order_ranges_by_thread();
    join_launches();
    project_launches_onto_ranges();
    collect_collectives();
    find_steps();
    flag_odd_ranges();
    bucket_by_step();
    RS_RETURN_IF_ERROR(write_event_stream());
    return write_flight_recorder();
  }

  void choose_domains();
  Status collect_ranges();
  void name_ranges();
  void order_ranges_by_thread();
  void join_launches();
  void project_launches_onto_ranges();
  void collect_collectives();
  void find_steps();
  void steps_from_repeating_collectives();
  void flag_odd_ranges();
  void bucket_by_step();
  Status write_event_stream();
  Status write_flight_recorder();

  int64_t own(int64_t ts) const { return add_saturating(ts, plan.to_own_ns); }
  std::string dname(uint32_t id) const;
  bool kept_domain(uint32_t id) const;
  int step_containing(int64_t t) const;
  int step_at_or_after(int64_t t) const;
  int64_t capture_end() const;

  const std::filesystem::path& file;
  const ProcessRows& rows;
  const RankPlan& plan;
  const ImportOptions& options;
  RankProvenance& prov;
  const std::vector<std::string>& pool;

  std::map<uint32_t, std::string> domain_name;  // by domainId, this process
  std::vector<std::string> selected;            // --nvtx-domains ("default": the unnamed domain)
  bool ours_present = false;                    // this process put ranges in our domain
  std::string step_name;
  std::vector<Range> ranges, nccl;              // kept ranges (step frames among them), NCCL's own
  uint64_t main_tid = 0;                        // the thread of the step frames (or of most work)
  Names names;
  std::map<uint64_t, std::vector<uint32_t>> ranges_by_thread, nccl_by_thread;
  std::vector<uint32_t> op_ids;                 // this process's GPU ops, by (correlation, start)
  std::vector<Launch> launches;
  std::vector<uint32_t> launch_of_op, host_launch;
  std::map<uint64_t, std::vector<uint32_t>> launches_by_thread;
  std::vector<Coll> colls;
  std::vector<Step> steps;
  std::vector<int64_t> begins, ends;            // of the steps
  std::vector<std::vector<uint32_t>> step_ranges, step_colls, step_ops;
};

// --- domains and which ones are kept ---------------------------------------------------------
std::string RankBuild::dname(uint32_t id) const {
  if (id == 0) return "";
  auto it = domain_name.find(id);
  return it != domain_name.end() ? it->second : fmt::format("domain{}", id);
}

bool RankBuild::kept_domain(uint32_t id) const {
  const std::string n = dname(id);
  if (!selected.empty()) return std::find(selected.begin(), selected.end(), n) != selected.end();
  if (ours_present) return n == "rankscope";
  return n != "NCCL";
}

void RankBuild::choose_domains() {
  for (const auto& [key, name] : rows.domains) {
    if (key.first == plan.process) domain_name[key.second] = name;
  }
  selected = options.nvtx_domains;
  for (auto& s : selected) {
    if (s == "default") s.clear();
  }
  // Our domain is chosen by default when this process put ranges in it (not merely created it).
  for (const NvtxRow& r : rows.nvtx) {
    if (r.kind != NvtxKind::kMark && process_key(r.gtid) == plan.process && r.domain != 0 && dname(r.domain) == "rankscope") {
      ours_present = true;
      break;
    }
  }
}

// --- ranges: this process's, NCCL's apart; the step frames of the thread that has most ---------
Status RankBuild::collect_ranges() {
  step_name = options.step_range.empty() ? "step" : options.step_range;
  std::vector<Range> step_candidates;
  for (uint32_t i = 0; i < rows.nvtx.size(); ++i) {
    const NvtxRow& r = rows.nvtx[i];
    if (process_key(r.gtid) != plan.process || r.kind == NvtxKind::kMark) continue;
    Range x;
    x.start = r.start;
    x.end = r.open_end ? std::max(rows.max_ts, r.start) : r.end;
    x.gtid = r.gtid;
    x.row = i;
    x.domain = r.domain;
    x.push_pop = r.kind == NvtxKind::kPushPop;
    x.cross_thread = r.end_gtid != 0;
    x.open_end = r.open_end;
    x.op_leaf = format::is_op_family_leaf(pool[r.text]);
    const std::string d = dname(r.domain);
    if (d == "NCCL") {
      nccl.push_back(x);
      continue;
    }
    // Our own step range lives in our domain; a named one may be in any domain.
    const bool step_domain = options.step_range.empty() ? (d == "rankscope" || !ours_present) : true;
    if (step_domain && !x.cross_thread) {
      if (auto n = match_step(pool[r.text], step_name)) {
        x.step = true;
        x.step_number = *n >= 0 ? *n : (r.has_payload ? r.payload : -1);
        step_candidates.push_back(x);
        continue;
      }
    }
    if (kept_domain(r.domain)) ranges.push_back(x);
  }
  // The step frames: those of the thread that has most of them.
  if (!step_candidates.empty()) {
    std::map<uint64_t, size_t> per_thread;
    for (const Range& s : step_candidates) ++per_thread[s.gtid];
    main_tid = std::max_element(per_thread.begin(), per_thread.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
    for (const Range& s : step_candidates) {
      if (s.gtid == main_tid) ranges.push_back(s);
    }
  } else if (!options.step_range.empty()) {
    std::map<std::string, size_t> seen;
    for (const Range& r : ranges) ++seen[pool[rows.nvtx[r.row].text]];
    std::vector<std::pair<size_t, std::string>> top;
    for (auto& [n, c] : seen) top.emplace_back(c, n);
    std::sort(top.rbegin(), top.rend());
    std::string list;
    for (size_t i = 0; i < std::min<size_t>(top.size(), 8); ++i) list += fmt::format("{}'{}' ({})", i ? ", " : "", top[i].second, top[i].first);
    return invalid_argument(fmt::format("{}: rank {} has no range named '{}'{}{}", file.string(), plan.rank, step_name,
                                        list.empty() ? "" : "; the most frequent ranges are ", list));
  }
  return {};
}

// Names: our domain's names as they are; other domains by their nesting path below the step
// frame, prefixed with the domain ("Megatron:forward/layer3"); start/end ranges stay flat.
void RankBuild::name_ranges() {
  std::vector<uint32_t> order(ranges.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const Range &x = ranges[a], &y = ranges[b];
    return std::tie(x.gtid, x.domain, x.start, y.end) < std::tie(y.gtid, y.domain, y.start, x.end);
  });
  std::vector<uint32_t> stack;
  uint64_t cur_tid = 0;
  uint32_t cur_domain = kNone;
  for (uint32_t i : order) {
    Range& r = ranges[i];
    if (r.gtid != cur_tid || r.domain != cur_domain) stack.clear(), cur_tid = r.gtid, cur_domain = r.domain;
    const std::string d = dname(r.domain);
    const std::string& text = pool[rows.nvtx[r.row].text];
    if (r.step) {
      r.name = names.id("step");
    } else if (d == "rankscope") {
      r.name = names.id(text);
    } else if (!r.push_pop) {
      r.name = names.id(d.empty() ? text : d + ":" + text);
    } else {
      while (!stack.empty() && ranges[stack.back()].end < r.end) stack.pop_back();
      const bool under = !stack.empty() && !ranges[stack.back()].step;
      const std::string prefix = under ? names.list[ranges[stack.back()].name] + "/" : (d.empty() ? "" : d + ":");
      r.name = names.id(prefix + text);
    }
    if (r.push_pop && !r.step && d != "rankscope") stack.push_back(i);
    else if (r.step) stack.push_back(i);
  }
}

// Per thread: ranges by (start, longer first), with their depth across domains.
void RankBuild::order_ranges_by_thread() {
  auto by_start = [](const std::vector<Range>& v) {
    return [&v](uint32_t a, uint32_t b) { return std::tie(v[a].start, v[b].end) < std::tie(v[b].start, v[a].end); };
  };
  for (uint32_t i = 0; i < ranges.size(); ++i) {
    if (!ranges[i].cross_thread) ranges_by_thread[ranges[i].gtid].push_back(i);
  }
  for (uint32_t i = 0; i < nccl.size(); ++i) {
    if (!nccl[i].cross_thread) nccl_by_thread[nccl[i].gtid].push_back(i);
  }
  for (auto& [tid, ids] : ranges_by_thread) {
    std::sort(ids.begin(), ids.end(), by_start(ranges));
    std::vector<uint32_t> stack;
    for (uint32_t i : ids) {
      while (!stack.empty() && ranges[stack.back()].end < ranges[i].end) stack.pop_back();
      ranges[i].depth = uint32_t(stack.size());
      stack.push_back(i);
    }
  }
  for (auto& [tid, ids] : nccl_by_thread) std::sort(ids.begin(), ids.end(), by_start(nccl));
}

// --- launches: runtime calls joined to their GPU ops on (correlation id, process) ---------------
void RankBuild::join_launches() {
  std::vector<uint32_t> rt;  // this process's runtime calls: correlation ids are unique only within a process
  for (uint32_t i = 0; i < rows.runtime.size(); ++i) {
    if (process_key(rows.runtime[i].gtid) == plan.process) rt.push_back(i);
  }
  std::sort(rt.begin(), rt.end(), [&](uint32_t a, uint32_t b) {
    const RuntimeRow &x = rows.runtime[a], &y = rows.runtime[b];
    return std::tie(x.correlation, x.start) < std::tie(y.correlation, y.start);
  });
  for (uint32_t i = 0; i < rows.ops.size(); ++i) {
    if (rows.ops[i].process == plan.process) op_ids.push_back(i);
  }
  std::sort(op_ids.begin(), op_ids.end(), [&](uint32_t a, uint32_t b) {
    return std::tie(rows.ops[a].correlation, rows.ops[a].start) < std::tie(rows.ops[b].correlation, rows.ops[b].start);
  });
  launch_of_op.assign(rows.ops.size(), kNone);
  {
    std::unordered_map<uint32_t, uint32_t> launch_of_runtime;
    size_t j = 0;
    for (uint32_t oi : op_ids) {
      const GpuOp& op = rows.ops[oi];
      while (j < rt.size() && rows.runtime[rt[j]].correlation < op.correlation) ++j;
      // Among the calls of this correlation id (ids wrap in very long captures), the latest that
      // began before the op started.
      uint32_t best = kNone;
      for (size_t k = j; k < rt.size() && rows.runtime[rt[k]].correlation == op.correlation; ++k) {
        if (best == kNone || rows.runtime[rt[k]].start <= op.start) best = rt[k];
        else break;
      }
      if (best == kNone) {
        ++prov.unlaunched_ops;
        continue;
      }
      auto [it, fresh] = launch_of_runtime.try_emplace(best, uint32_t(launches.size()));
      if (fresh) {
        const RuntimeRow& r = rows.runtime[best];
        Launch l;
        l.start = r.start;
        l.end = r.end;
        l.gtid = r.gtid;
        l.api_name = r.name;
        launches.push_back(l);
      }
      Launch& l = launches[it->second];
      l.gpu_start = std::min(l.gpu_start, op.start);
      l.gpu_end = std::max(l.gpu_end, op.end);
      ++l.ops;
      launch_of_op[oi] = it->second;
    }
  }
  // Host-only collectives ride the projection sweep as launches without GPU ops, so each gets the
  // innermost range open on its thread when it was called.
  host_launch.resize(rows.host_collectives.size());
  for (uint32_t h = 0; h < rows.host_collectives.size(); ++h) {
    const HostCollective& hc = rows.host_collectives[h];
    Launch l;
    l.start = l.end = hc.enqueue;
    l.gtid = hc.gtid;
    host_launch[h] = uint32_t(launches.size());
    launches.push_back(l);
  }
  for (uint32_t i = 0; i < launches.size(); ++i) launches_by_thread[launches[i].gtid].push_back(i);
}

// --- projection: one sorted sweep per thread ------------------------------------------------
void RankBuild::project_launches_onto_ranges() {
  for (auto& [tid, ids] : launches_by_thread) {
    std::sort(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) { return launches[a].start < launches[b].start; });
    std::vector<int64_t> lo(ids.size()), hi(ids.size()), starts(ids.size());
    std::vector<uint64_t> ops_prefix(ids.size() + 1, 0);
    for (size_t k = 0; k < ids.size(); ++k) {
      const Launch& l = launches[ids[k]];
      lo[k] = l.gpu_start, hi[k] = l.gpu_end, starts[k] = l.start;
      ops_prefix[k + 1] = ops_prefix[k] + l.ops;
    }
    MinMaxTree tree;
    tree.build(lo, hi);
    auto rit = ranges_by_thread.find(tid);
    if (rit != ranges_by_thread.end()) {
      for (uint32_t ri : rit->second) {
        Range& r = ranges[ri];
        size_t a = size_t(std::lower_bound(starts.begin(), starts.end(), r.start) - starts.begin());
        size_t b = size_t(std::upper_bound(starts.begin(), starts.end(), r.end) - starts.begin());
        while (b > a && launches[ids[b - 1]].end > r.end) --b;  // the call must end inside the range too
        if (b <= a) continue;
        const auto [s, e] = tree.query(a, b);
        r.gpu_start = s;
        r.gpu_end = e;
        r.ops = uint32_t(ops_prefix[b] - ops_prefix[a]);
      }
      // Launches and collectives belong to the user's ranges, not to the op leaves inside them.
      std::vector<uint32_t> placing;
      for (uint32_t ri : rit->second)
        if (!ranges[ri].op_leaf) placing.push_back(ri);
      innermost_sweep(ranges, placing, launches, ids, [&](uint32_t li, uint32_t ri) { launches[li].range = ri; });
    }
    auto nit = nccl_by_thread.find(tid);
    if (nit != nccl_by_thread.end()) {
      innermost_sweep(nccl, nit->second, launches, ids, [&](uint32_t li, uint32_t ri) { launches[li].nccl_range = ri; });
    }
  }
}

// --- collectives from NCCL kernels, one communicator per stream, and host-only ones -------------
void RankBuild::collect_collectives() {
  {
    std::map<uint32_t, std::vector<uint32_t>> by_stream;
    for (uint32_t oi : op_ids) {
      const GpuOp& op = rows.ops[oi];
      if (op.kind == GpuOpKind::kKernel && is_nccl_kernel(pool[op.short_name])) by_stream[op.stream].push_back(oi);
    }
    std::vector<std::pair<int64_t, uint32_t>> order;
    for (auto& [stream, v] : by_stream) {
      std::sort(v.begin(), v.end(), [&](uint32_t a, uint32_t b) { return rows.ops[a].start < rows.ops[b].start; });
      order.emplace_back(rows.ops[v.front()].start, stream);
    }
    std::sort(order.begin(), order.end());
    for (uint32_t k = 0; k < order.size(); ++k) {
      const auto& v = by_stream[order[k].second];
      for (uint64_t s = 0; s < v.size(); ++s) {
        const GpuOp& op = rows.ops[v[s]];
        const auto named = plan.comm_of_stream.find(order[k].second);
        const uint32_t comm = named != plan.comm_of_stream.end() ? named->second : k;
        const auto bytes = rows.collective_bytes.find(v[s]);
        Coll c{v[s], comm, s, op.start, nccl_op_from_name(pool[op.short_name]), nccl_dtype_from_name(pool[op.short_name]), 0, kNone,
               op.start, op.end, op.short_name, bytes != rows.collective_bytes.end() ? bytes->second : 0};
        const uint32_t li = launch_of_op[v[s]];
        if (li != kNone) {
          const Launch& l = launches[li];
          c.launch_gtid = l.gtid;
          c.range = l.range;
          c.enqueue = l.start;
          if (l.nccl_range != kNone) {
            const Range& nr = nccl[l.nccl_range];
            c.enqueue = nr.start;  // the rank called the collective here (ncclAllReduce, ncclGroupEnd)
            if (c.op == CollectiveOp::kUnknown) c.op = nccl_op_from_name(pool[rows.nvtx[nr.row].text]);
          }
        }
        colls.push_back(c);
      }
    }
  }
  for (uint32_t h = 0; h < rows.host_collectives.size(); ++h) {
    const HostCollective& hc = rows.host_collectives[h];
    colls.push_back(Coll{kNone, hc.comm, hc.seq, hc.enqueue, hc.op, hc.dtype, hc.gtid, launches[host_launch[h]].range,
                         hc.start, hc.end, 0, hc.bytes});
  }
  prov.collectives = int64_t(colls.size());
}

// --- steps: the step frames, else a collective that repeats once per iteration, else the capture --
void RankBuild::find_steps() {
  for (uint32_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].step) steps.push_back({ranges[i].step_number, ranges[i].start, ranges[i].end, i});
  }
  std::sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) { return a.begin < b.begin; });
  if (!steps.empty()) {
    bool numbered = std::all_of(steps.begin(), steps.end(), [](const Step& s) { return s.number >= 0; });
    for (size_t i = 1; numbered && i < steps.size(); ++i) numbered = steps[i].number > steps[i - 1].number;
    if (!numbered) {
      for (size_t i = 0; i < steps.size(); ++i) steps[i].number = int64_t(i) + 1;
    }
    const std::string d = dname(ranges[steps.front().frame].domain);
    prov.steps_from = fmt::format("range '{}'{}{}", step_name, d.empty() ? " (default domain)" : " (domain " + d + ")",
                                  numbered ? ", numbered by its payload or name" : ", numbered from 1 in time order");
  } else {
    steps_from_repeating_collectives();
  }
  if (steps.empty()) {
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (const Range& r : ranges) lo = std::min(lo, r.start), hi = std::max(hi, r.end);
    for (const Launch& l : launches) lo = std::min(lo, l.start), hi = std::max(hi, std::max(l.end, l.gpu_end));
    if (lo <= hi) steps.push_back({1, lo, hi, kNone});
    prov.steps_from = fmt::format("whole capture: no range named '{}' and no collective that repeats once per iteration; "
                                  "the capture is one step (pass --step-range NAME)", step_name);
    prov.warnings.push_back(prov.steps_from);
  }
  if (main_tid == 0) {
    std::map<uint64_t, size_t> per_thread;
    for (const Range& r : ranges) ++per_thread[r.gtid];
    for (const Launch& l : launches) ++per_thread[l.gtid];
    if (!per_thread.empty())
      main_tid = std::max_element(per_thread.begin(), per_thread.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
  }
  prov.steps = int64_t(steps.size());
  for (const Step& s : steps) begins.push_back(s.begin), ends.push_back(s.end);
}

// No step frame: each step runs from one collective that occurs once per iteration to the next.
void RankBuild::steps_from_repeating_collectives() {
  std::vector<uint32_t> order(colls.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return colls[a].enqueue < colls[b].enqueue; });
  std::map<std::tuple<uint32_t, uint8_t, uint32_t>, uint32_t> sig_ids;
  std::vector<uint32_t> seq;
  for (uint32_t i : order) {
    const Coll& c = colls[i];
    seq.push_back(sig_ids.try_emplace({c.comm, uint8_t(c.op), c.signature}, uint32_t(sig_ids.size())).first->second);
  }
  const size_t period = repeating_period(seq);
  std::optional<uint32_t> marker;
  if (period > 0) {
    std::map<uint32_t, int> in_first;
    for (size_t i = 0; i < period; ++i) ++in_first[seq[i]];
    for (size_t i = 0; i < period && !marker; ++i) {
      if (in_first[seq[i]] == 1) marker = seq[i];
    }
  }
  if (marker) {
    std::vector<int64_t> at;
    std::map<uint64_t, size_t> threads;
    for (size_t i = 0; i < seq.size(); ++i) {
      if (seq[i] != *marker) continue;
      at.push_back(colls[order[i]].enqueue);
      ++threads[colls[order[i]].launch_gtid];
    }
    main_tid = std::max_element(threads.begin(), threads.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
    for (size_t i = 0; i + 1 < at.size(); ++i) steps.push_back({int64_t(i) + 1, at[i], at[i + 1] - 1, kNone});
    const Coll& m = colls[order[std::find(seq.begin(), seq.end(), *marker) - seq.begin()]];
    prov.steps_from = fmt::format(
        "collective: no range named '{}', so each step runs from one {} on {} to the next ({} collectives repeat per "
        "iteration; the part before the first is left out); pass --step-range NAME to use a range",
        step_name, format::short_op_name(m.op), m.comm < plan.comm_names.size() ? plan.comm_names[m.comm] : "nccl?", period);
  }
}

// Ranges belong to the step their start falls in; collectives and kernels issued between two
// steps to the next one (as the probe records them).
int RankBuild::step_containing(int64_t t) const {
  const int i = int(std::upper_bound(begins.begin(), begins.end(), t) - begins.begin()) - 1;
  return i >= 0 && t <= ends[size_t(i)] ? i : -1;
}

int RankBuild::step_at_or_after(int64_t t) const {
  const int i = int(std::lower_bound(ends.begin(), ends.end(), t) - ends.begin());
  return i < int(steps.size()) ? i : -1;
}

// --- flags: ranges the import could not place whole --------------------------------------------
void RankBuild::flag_odd_ranges() {
  auto flag = [&](const Range& r, const char* what) {
    if (prov.flagged.size() < kMaxFlagged)
      prov.flagged.push_back(fmt::format("{} '{}' ({}, thread {})", what, names.list[r.name], dname(r.domain).empty() ? "default domain" : dname(r.domain), tid_of(r.gtid)));
  };
  for (const Range& r : ranges) {
    if (r.open_end) ++prov.open_ended, flag(r, "open at the end of the capture:");
    if (r.start < plan.session_zero_ts) ++prov.negative_start, flag(r, "started before the capture:");
    if (r.cross_thread) ++prov.cross_thread, flag(r, "ends on another thread (not projected):");
  }
  prov.ranges = int64_t(ranges.size());
}

// Everything by step: ranges by where they start, collectives and kernels by the step at or after
// their call; collectives before the first step belong to no step (start-up, NCCL warm-up).
void RankBuild::bucket_by_step() {
  step_ranges.assign(steps.size(), {});
  step_colls.assign(steps.size(), {});
  step_ops.assign(steps.size(), {});
  for (size_t k = 0; k < steps.size(); ++k) {
    if (steps[k].frame != kNone) step_ranges[k].push_back(steps[k].frame);
  }
  for (uint32_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].step) continue;
    if (const int s = step_containing(ranges[i].start); s >= 0) step_ranges[size_t(s)].push_back(i);
  }
  for (uint32_t i = 0; i < colls.size(); ++i) {
    const int s = step_at_or_after(colls[i].enqueue);
    if (s >= 0) step_colls[size_t(s)].push_back(i);
  }
  if (options.traces) {
    for (uint32_t oi : op_ids) {
      const uint32_t li = launch_of_op[oi];
      const int s = step_at_or_after(li != kNone ? launches[li].start : rows.ops[oi].start);
      if (s >= 0) step_ops[size_t(s)].push_back(oi);
    }
  }
  // Collectives before the first step belong to no step (start-up, NCCL warm-up).
  if (!steps.empty()) {
    const size_t k = 0;
    auto& v = step_colls[k];
    v.erase(std::remove_if(v.begin(), v.end(), [&](uint32_t i) { return colls[i].enqueue < begins[0]; }), v.end());
    if (options.traces) {
      auto& o = step_ops[k];
      o.erase(std::remove_if(o.begin(), o.end(), [&](uint32_t oi) {
                const uint32_t li = launch_of_op[oi];
                return (li != kNone ? launches[li].start : rows.ops[oi].start) < begins[0];
              }), o.end());
    }
  }
}

int64_t RankBuild::capture_end() const {
  int64_t last = steps.empty() ? 0 : steps.back().end;
  for (const Launch& l : launches) last = std::max(last, l.gpu_end);
  for (const Range& r : ranges) last = std::max(last, r.end);
  return last;
}

// --- the event stream: per step its ranges, collectives and (with --traces) kernels -----------
Status RankBuild::write_event_stream() {
  format::EventStreamHeader header;
  header.rank = plan.rank;
  header.world_size = plan.world_size;
  header.created_ns = steps.empty() ? own(0) : own(steps.front().begin);
  header.run_id = plan.run_id;
  RS_ASSIGN_OR_RETURN(auto writer, format::EventStreamWriter::create(format::event_stream_path(plan.run_dir, plan.rank), header));
  writer->write_clock(plan.clock);

  std::vector<uint32_t> range_stream_id(names.list.size(), 0);
  auto range_id = [&](uint32_t name) {
    if (range_stream_id[name] == 0) range_stream_id[name] = writer->intern(NameKind::kRange, names.list[name]);
    return range_stream_id[name];
  };
  std::vector<uint32_t> comm_stream_id;
  auto comm_id = [&](uint32_t k) {
    if (comm_stream_id.size() <= k) comm_stream_id.resize(k + 1, 0);
    if (comm_stream_id[k] == 0)
      comm_stream_id[k] = writer->intern(NameKind::kComm, k < plan.comm_names.size() ? plan.comm_names[k] : fmt::format("nccl{}", k));
    return comm_stream_id[k];
  };
  std::unordered_map<uint32_t, uint32_t> kernel_stream_id, api_stream_id;
  auto kernel_id = [&](uint32_t pool_index) {
    auto [it, fresh] = kernel_stream_id.try_emplace(pool_index, 0);
    if (fresh) it->second = writer->intern(NameKind::kKernel, pool[pool_index]);
    return it->second;
  };
  // The launch call's name as the CUDA API spells it: nsys appends the API version
  // ("cudaLaunchKernel_v7000"), Kineto does not.
  auto api_id = [&](uint32_t pool_index) -> uint32_t {
    if (pool_index == 0 || pool[pool_index].empty()) return 0;
    auto [it, fresh] = api_stream_id.try_emplace(pool_index, 0);
    if (fresh) {
      std::string_view n = pool[pool_index];
      const size_t v = n.rfind("_v");
      if (v != std::string_view::npos && v + 2 < n.size() &&
          std::all_of(n.begin() + long(v) + 2, n.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
        n = n.substr(0, v);
      it->second = writer->intern(NameKind::kApi, n);
    }
    return it->second;
  };

  std::vector<int64_t> agg_stamp(names.list.size(), -1);
  std::vector<format::RangeAggregate> agg(names.list.size());
  std::vector<uint32_t> touched;
  for (size_t k = 0; k < steps.size(); ++k) {
    const Step& st = steps[k];
    format::StepRecord rec;
    rec.step = st.number;
    rec.begin_ns = own(st.begin);
    rec.end_ns = own(st.end);
    touched.clear();
    for (uint32_t i : step_ranges[k]) {
      const Range& r = ranges[i];
      if (r.cross_thread) continue;
      const bool main = r.gtid == main_tid;
      if (!main && r.projected() == 0) continue;
      if (agg_stamp[r.name] != int64_t(k)) {
        agg_stamp[r.name] = int64_t(k);
        agg[r.name] = format::RangeAggregate{range_id(r.name), 0, 0, 0};
        touched.push_back(r.name);
      }
      auto& a = agg[r.name];
      if (main) a.count += 1, a.total_ns += r.end - r.start;
      a.kernel_ns += r.projected();
    }
    for (uint32_t n : touched) rec.ranges.push_back(agg[n]);
    for (uint32_t i : step_colls[k]) {
      const Coll& c = colls[i];
      format::CollectiveEvent e{};
      e.comm_id = comm_id(c.comm);
      e.op = uint8_t(c.op);
      e.dtype = uint8_t(c.dtype);
      e.state = uint8_t(format::CollectiveState::kCompleted);
      e.range_id = c.range != kNone ? range_id(ranges[c.range].name) : 0;
      e.seq = c.seq;
      e.enqueue_ns = own(c.enqueue);
      e.bytes = c.bytes;
      e.start_ns = own(c.start);
      e.end_ns = own(c.end);
      rec.collectives.push_back(e);
    }
    writer->write_step(rec);
    if (options.traces) {
      std::vector<format::TraceRange> tr;
      for (uint32_t i : step_ranges[k]) {
        const Range& r = ranges[i];
        tr.push_back({range_id(r.name), tid_of(r.gtid), own(r.start), own(r.end), r.depth, 0});
      }
      std::vector<format::TraceKernel> tk;
      std::vector<format::TraceLaunch> tl;  // the ops whose launch was seen, with its host call
      for (uint32_t oi : step_ops[k]) {
        const GpuOp& op = rows.ops[oi];
        const uint32_t li = launch_of_op[oi];
        const uint32_t ri = li != kNone ? launches[li].range : kNone;
        tk.push_back({kernel_id(op.name), ri != kNone ? range_id(ranges[ri].name) : 0, op.stream, op.device, own(op.start), own(op.end)});
        if (li != kNone) {
          const Launch& l = launches[li];
          tl.push_back({api_id(l.api_name), tk.back().name_id, tid_of(l.gtid), op.stream, op.device, op.correlation,
                        own(l.start), own(l.end), own(op.start), own(op.end)});
        }
      }
      if (!tr.empty()) writer->write_trace_ranges(st.number, tr);
      if (!tk.empty()) writer->write_trace_kernels(st.number, tk);
      if (!tl.empty()) writer->write_trace_launches(st.number, tl);
    }
    RS_RETURN_IF_ERROR(writer->flush());
  }
  writer->write_end(own(capture_end()));
  RS_RETURN_IF_ERROR(writer->flush());
  writer.reset();
  prov.kernels = int64_t(op_ids.size());
  return {};
}

// --- the flight recorder: the rank's state when the capture ended ----------------------------
Status RankBuild::write_flight_recorder() {
  format::FlightIdentity id;
  id.rank = plan.rank;
  id.world_size = plan.world_size;
  id.pid = int(pid_of(plan.process));
  id.host = plan.host;
  id.run_id = plan.run_id;
  id.start_ns = steps.empty() ? own(0) : own(steps.front().begin);
  RS_ASSIGN_OR_RETURN(auto flight, format::FlightRecorderWriter::create(format::flight_recorder_path(plan.run_dir, plan.rank), id));
  flight->set_clock(plan.clock.offset_ns, plan.clock.uncertainty_ns);
  std::vector<int> slots;
  for (size_t k = 0; k < plan.comm_names.size(); ++k) {
    const auto& members = plan.comm_members[k];
    const int pos = int(std::find(members.begin(), members.end(), plan.rank) - members.begin());
    slots.push_back(flight->register_comm(plan.comm_names[k], int(members.size()), pos < int(members.size()) ? pos : -1));
  }
  for (size_t k = 0; k < steps.size(); ++k) {
    for (uint32_t i : step_colls[k]) {
      const Coll& c = colls[i];
      if (c.comm >= slots.size() || slots[c.comm] < 0) continue;
      format::CollectiveDesc desc;
      desc.op = c.op;
      desc.dtype = c.dtype;
      desc.bytes = c.bytes;
      const uint64_t s = flight->collective_enqueue(slots[c.comm], desc, steps[k].number,
                                                    c.range != kNone ? names.list[ranges[c.range].name] : "", own(c.enqueue));
      flight->collective_start(slots[c.comm], s, own(c.start));
      flight->collective_complete(slots[c.comm], s, own(c.end));
    }
  }
  if (!steps.empty()) flight->set_step(steps.back().number, own(steps.back().begin));
  // Ranges of the main thread still open when the capture stopped: what the rank was doing.
  std::vector<const Range*> open;
  for (const Range& r : ranges) {
    if (r.open_end && r.gtid == main_tid && !r.cross_thread) open.push_back(&r);
  }
  std::sort(open.begin(), open.end(), [](const Range* a, const Range* b) { return a->start < b->start; });
  const int slot = flight->claim_thread_slot(int(tid_of(main_tid)), "main");
  if (slot >= 0) {
    for (const Range* r : open) flight->push_range(slot, names.list[r->name], own(r->start));
  }
  if (!open.empty()) flight->set_phase(names.list[open.front()->name]);
  flight->set_process_state(format::ProcessState::kFinished);
  flight->heartbeat(own(capture_end()));
  return {};
}

}  // namespace

size_t repeating_period(const std::vector<uint32_t>& seq) {
  const size_t n = seq.size();
  for (size_t p = 1; p <= std::min<size_t>(n / 2, 4096); ++p) {
    const size_t budget = (n - p) / 50;  // 2% may differ (a checkpoint step, a capture edge)
    size_t bad = 0;
    for (size_t i = 0; i + p < n && bad <= budget; ++i) bad += seq[i] != seq[i + p];
    if (bad <= budget) return p;
  }
  return 0;
}

Status build_rank(const std::filesystem::path& file, const ProcessRows& rows, const RankPlan& plan, const ImportOptions& options,
                  RankProvenance& prov) {
  return RankBuild(file, rows, plan, options, prov).run();
}

}  // namespace rankscope::trace_core
