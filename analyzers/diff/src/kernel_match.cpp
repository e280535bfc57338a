// kernel_match.cpp — kernel families of two runs and their comparison (kernel_match.h).
#include "kernel_match.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>

#include "rankscope/analyzers/skew/range_names.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/run_directory.h"

namespace rankscope::analyzers::diff_detail {
namespace {

// Removes every balanced <...> group (template arguments, nested ones included).
std::string without_template_arguments(std::string_view s) {
  std::string out;
  int depth = 0;
  for (char c : s) {
    if (c == '<') ++depth;
    else if (c == '>' && depth > 0) --depth;
    else if (depth == 0) out.push_back(c);
  }
  return out;
}

class KernelReader : public format::EventStreamVisitor {
 public:
  explicit KernelReader(KernelTable& table) : table_(table) {}
  void on_name(uint32_t id, format::NameKind kind, std::string_view name) override {
    if (families_.size() <= id) families_.resize(size_t(id) + 1), ranges_.resize(size_t(id) + 1), kinds_.resize(size_t(id) + 1);
    if (kind == format::NameKind::kKernel) {
      families_[id] = kernel_family(name);
      kinds_[id] = format::classify_kernel(name);
    } else if (kind == format::NameKind::kRange) {
      ranges_[id] = block_wildcard(name);
    }
  }
  void on_trace_kernels(int64_t step, std::span<const format::TraceKernel> kernels) override {
    steps_.insert(step);
    for (const format::TraceKernel& k : kernels) {
      if (k.name_id >= families_.size() || k.end_ns <= k.begin_ns) continue;
      KernelFamily& f = table_.families[families_[k.name_id]];
      const double ms = double(k.end_ns - k.begin_ns) / 1e6;
      f.ms += ms;
      f.calls += 1;
      f.kind = kinds_[k.name_id];
      f.range_ms[k.range_id < ranges_.size() ? ranges_[k.range_id] : std::string()] += ms;
    }
  }
  size_t traced_steps() const { return steps_.size(); }

 private:
  KernelTable& table_;
  std::vector<std::string> families_, ranges_;
  std::vector<format::KernelClass> kinds_;
  std::set<int64_t> steps_;
};

std::string main_range(const KernelFamily& f) {
  std::string best;
  double most = -1;
  for (const auto& [r, ms] : f.range_ms)
    if (ms > most) most = ms, best = r;
  return best;
}

}  // namespace

std::string kernel_family(std::string_view name) {
  if (format::is_memory_operation(name)) return std::string(name);
  std::string s(name);
  // "(anonymous namespace)::" would read as a parameter list below.
  for (size_t p; (p = s.find("(anonymous namespace)::")) != std::string::npos;) s.erase(p, 23);
  s = without_template_arguments(s);
  if (const size_t paren = s.find('('); paren != std::string::npos && paren > 0) s.erase(paren);
  // The return type: "void name" -> "name" (the family is the last space-separated word).
  while (!s.empty() && s.back() == ' ') s.pop_back();
  if (const size_t space = s.rfind(' '); space != std::string::npos) s.erase(0, space + 1);
  return s.empty() ? std::string(name) : s;
}

Result<KernelTable> read_kernel_table(const std::filesystem::path& run_dir) {
  format::OpenOptions open;
  open.read_flight_recorders = false;
  RS_ASSIGN_OR_RETURN(format::RunDirectory run, format::open_run_directory(run_dir, open));
  KernelTable table;
  for (const format::RankFiles& files : run.ranks) {
    if (!files.has_events()) continue;
    KernelReader reader(table);
    if (!format::scan_rank_events(files, reader).ok()) continue;  // skew already named the unreadable rank
    table.rank_steps += double(reader.traced_steps());
  }
  return table;
}

KernelComparison compare_kernels(const KernelTable& a, const KernelTable& b, size_t top) {
  KernelComparison out;
  if (a.rank_steps <= 0 || b.rank_steps <= 0) return out;
  out.available = true;
  std::set<std::string> families;
  for (const auto& [f, v] : a.families) families.insert(f);
  for (const auto& [f, v] : b.families) families.insert(f);
  // Ranges where a family is on one side only: candidates for "replaced".
  std::map<std::string, KernelSwap> by_range;
  for (const std::string& f : families) {
    const auto ia = a.families.find(f), ib = b.families.find(f);
    KernelDiff c;
    c.family = f;
    if (ia != a.families.end()) c.base_ms = ia->second.ms / a.rank_steps, c.base_calls = ia->second.calls / a.rank_steps;
    if (ib != b.families.end()) c.new_ms = ib->second.ms / b.rank_steps, c.new_calls = ib->second.calls / b.rank_steps;
    const KernelFamily& where = ib != b.families.end() ? ib->second : ia->second;
    c.range = main_range(where);
    if (ia == a.families.end()) {
      c.what = "new";
      KernelSwap& r = by_range[c.range];
      r.added.push_back(f);
      r.new_ms += c.new_ms;
    } else if (ib == b.families.end()) {
      c.what = "gone";
      KernelSwap& r = by_range[c.range];
      r.gone.push_back(f);
      r.base_ms += c.base_ms;
    } else {
      // Calls that changed by more than 5% explain the time first; else the time per call did.
      const double calls_ratio = c.new_calls / c.base_calls;
      if (std::fabs(calls_ratio - 1) > 0.05) c.what = calls_ratio > 1 ? "more calls" : "fewer calls";
      else c.what = c.new_ms > c.base_ms ? "slower per call" : "faster per call";
    }
    out.changes.push_back(std::move(c));
  }
  std::sort(out.changes.begin(), out.changes.end(), [](const KernelDiff& x, const KernelDiff& y) {
    return std::fabs(x.new_ms - x.base_ms) > std::fabs(y.new_ms - y.base_ms);
  });
  if (out.changes.size() > top) out.changes.resize(top);
  auto by_time = [](const KernelTable& t) {
    return [&t](const std::string& x, const std::string& y) { return t.families.at(x).ms > t.families.at(y).ms; };
  };
  for (auto& [range, r] : by_range) {
    if (r.gone.empty() || r.added.empty()) continue;  // a replacement needs both
    r.range = range;
    std::sort(r.gone.begin(), r.gone.end(), by_time(a));
    std::sort(r.added.begin(), r.added.end(), by_time(b));
    out.swaps.push_back(r);
  }
  std::sort(out.swaps.begin(), out.swaps.end(), [](const KernelSwap& x, const KernelSwap& y) {
    return std::fabs(x.new_ms - x.base_ms) > std::fabs(y.new_ms - y.base_ms);
  });
  return out;
}

}  // namespace rankscope::analyzers::diff_detail
