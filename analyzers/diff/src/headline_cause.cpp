// headline_cause.cpp — see headline_cause.h.
#include "headline_cause.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "rankscope/analyzers/skew/range_names.h"

namespace rankscope::analyzers::diff_detail {
namespace {

// A deeper candidate wins when it carries at least this share of the largest one's change.
constexpr double kDeeperShare = 0.75;

bool same_direction(double d, double step_delta) { return d != 0 && (d > 0) == (step_delta > 0); }

std::string last_component(const std::string& range) {
  const size_t slash = range.rfind('/');
  return slash == std::string::npos ? range : range.substr(slash + 1);
}

// "[attention]" -> "attention": a framework op family reads as the kind of work it is.
std::string work_name(const std::string& leaf) {
  if (leaf.size() > 2 && leaf.front() == '[' && leaf.back() == ']') return leaf.substr(1, leaf.size() - 2);
  return leaf;
}

// The leaf ranges (nothing recorded under them in either run) grouped by their last name, each
// group's change summed over the parts it lies under.
struct WorkGroup {
  double delta = 0;
  std::map<std::string, double> by_top;                      // top-level range -> change
  std::vector<std::pair<double, std::string>> members;       // (change, range)
};

std::map<std::string, WorkGroup> work_groups(const RunParts& a, const RunParts& b) {
  std::set<std::string> names;
  for (const auto& [n, v] : a.range_compute) names.insert(n);
  for (const auto& [n, v] : b.range_compute) names.insert(n);
  std::map<std::string, WorkGroup> groups;
  for (const std::string& n : names) {
    if (n == "step" || n.starts_with("init")) continue;
    const auto next = names.upper_bound(n);
    if (next != names.end() && next->starts_with(n + "/")) continue;  // not a leaf
    const std::string leaf = last_component(n);
    // A catch-all names no work to act on; the wait is communication's, not work.
    if (leaf == "[other ops]" || leaf == "[waiting on collectives]" || leaf == n) continue;
    const double av = a.range_compute.count(n) ? a.range_compute.at(n) : 0;
    const double bv = b.range_compute.count(n) ? b.range_compute.at(n) : 0;
    WorkGroup& g = groups[leaf];
    g.delta += bv - av;
    g.by_top[std::string(top_level_range(n))] += bv - av;
    g.members.emplace_back(bv - av, n);
  }
  return groups;
}

std::string member_text(const RunParts& a, const RunParts& b, const std::vector<std::pair<double, std::string>>& members) {
  std::vector<std::pair<double, std::string>> sorted = members;
  std::sort(sorted.begin(), sorted.end(), [](auto& x, auto& y) { return std::fabs(x.first) > std::fabs(y.first); });
  std::string out;
  for (size_t i = 0; i < std::min<size_t>(sorted.size(), 3); ++i) {
    const std::string& n = sorted[i].second;
    const double av = a.range_compute.count(n) ? a.range_compute.at(n) : 0;
    const double bv = b.range_compute.count(n) ? b.range_compute.at(n) : 0;
    out += fmt::format("{}{} {} -> {}", out.empty() ? "" : ", ", n, format_ms(av), format_ms(bv));
  }
  return out;
}

}  // namespace

HeadlineCause headline_cause(const RunParts& a, const RunParts& b, const std::vector<DiffPart>& parts, double step_delta,
                             double attention_factor) {
  HeadlineCause best;
  // The largest part that moved the way the step did (a part that shrank does not explain a
  // slower run, however large).
  const DiffPart* top = parts.empty() ? nullptr : &parts.front();
  for (const DiffPart& p : parts)
    if (same_direction(p.delta_ms, step_delta)) {
      top = &p;
      break;
    }
  if (top) best = {top->name, top->delta_ms, top->cause};

  // Communication as a whole, when its wait and transfer moved together with the step.
  const DiffPart *wait = nullptr, *transfer = nullptr;
  for (const DiffPart& p : parts) {
    if (p.name == "collective wait") wait = &p;
    if (p.name == "collective transfer") transfer = &p;
  }
  if (wait && transfer && same_direction(wait->delta_ms, step_delta) && same_direction(transfer->delta_ms, step_delta) &&
      std::fabs(wait->delta_ms + transfer->delta_ms) > std::fabs(best.delta_ms)) {
    const std::string cause = !transfer->cause.empty() ? transfer->cause : wait->cause;
    best = {"communication", wait->delta_ms + transfer->delta_ms,
            fmt::format("wait {:+.1f} ms, transfer {:+.1f} ms{}{}", wait->delta_ms, transfer->delta_ms, cause.empty() ? "" : "; ",
                        cause)};
  }

  // One kind of work across the parts, when it carries nearly as much.
  const std::string* chosen = nullptr;
  const WorkGroup* group = nullptr;
  const auto groups = work_groups(a, b);
  for (const auto& [leaf, g] : groups) {
    if (!same_direction(g.delta, step_delta)) continue;
    if (!group || std::fabs(g.delta) > std::fabs(group->delta)) chosen = &leaf, group = &g;
  }
  std::vector<std::pair<double, std::string>> tops;
  if (group)
    for (const auto& [t, d] : group->by_top)
      if (same_direction(d, step_delta)) tops.emplace_back(std::fabs(d), t);
  // Under one part only, the part's own cause names the same range (and its kernels): keep it.
  if (tops.size() >= 2 && std::fabs(group->delta) >= kDeeperShare * std::fabs(best.delta_ms)) {
    std::sort(tops.rbegin(), tops.rend());
    std::string where;
    for (size_t i = 0; i < tops.size(); ++i)
      where += (i == 0 ? ", " : i + 1 == tops.size() ? " and " : ", ") + tops[i].second;
    HeadlineCause work;
    work.name = work_name(*chosen) + where;
    work.delta_ms = group->delta;
    // Its share of the step's change, where it is one (parts that moved the other way can make a
    // cause larger than the change).
    const double share = step_delta != 0 ? 100.0 * group->delta / step_delta : 0.0;
    const bool a_share = share > 0 && share <= 100;
    work.joiner = a_share ? ", " : ": ";
    work.detail = a_share ? fmt::format("{:.0f}% of the {:+.1f} ms: ", share, step_delta) : std::string();
    work.detail += member_text(a, b, group->members);
    const std::string w = work_name(*chosen);
    if (attention_factor > 0 && (w == "attention" || w == "attn"))
      work.detail += fmt::format("; the sequence length predicts {:.1f}x", attention_factor);
    best = std::move(work);
  }
  return best;
}

}  // namespace rankscope::analyzers::diff_detail
