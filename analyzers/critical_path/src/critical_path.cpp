// critical_path.cpp — the report: walk every step (path_walk.h), then the shares of ranks, kinds,
// ranges and items along the paths, as JSON and text.
#include "rankscope/analyzers/critical_path/critical_path.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "path_walk.h"
#include "rankscope/format/rank_list.h"
#include "step_timeline.h"

namespace rankscope::analyzers {

using critical_path_detail::load_step_timelines;
using critical_path_detail::walk_step;

std::string_view segment_kind_name(PathSegment::Kind k) {
  switch (k) {
    case PathSegment::Kind::kKernel: return "kernel";
    case PathSegment::Kind::kCollective: return "collective";
    case PathSegment::Kind::kLaunchDelay: return "launch_delay";
    case PathSegment::Kind::kHost: break;
  }
  return "host";
}

namespace {

constexpr double kNsPerMs = 1e6;
constexpr size_t kTopShares = 20;

// "allreduce dp0 #12" -> "allreduce dp0": one item across steps.
std::string without_sequence(const std::string& name) {
  const size_t hash = name.rfind(" #");
  return hash == std::string::npos ? name : name.substr(0, hash);
}

std::vector<PathShare> ranked(const std::map<std::pair<std::string, int>, double>& ns, double steps, double covered_ns, size_t top) {
  std::vector<PathShare> out;
  for (const auto& [key, v] : ns) out.push_back(PathShare{key.first, key.second, v / steps / kNsPerMs, covered_ns > 0 ? v / covered_ns : 0});
  std::sort(out.begin(), out.end(), [](const PathShare& a, const PathShare& b) { return a.ms_per_step > b.ms_per_step || (a.ms_per_step == b.ms_per_step && a.what < b.what); });
  if (out.size() > top) out.resize(top);
  return out;
}

void summarize(CriticalPathReport& r) {
  const double steps = double(r.steps.size());
  double step_ns = 0, covered_ns = 0;
  std::map<std::pair<std::string, int>, double> by_rank, by_kind, by_range, by_item;
  for (const StepPath& p : r.steps) {
    step_ns += double(p.step_ns);
    covered_ns += double(p.covered_ns);
    for (const PathSegment& s : p.segments) {
      const double d = double(s.end_ns - s.begin_ns);
      by_rank[{fmt::format("rank {}", s.rank), s.rank}] += d;
      by_kind[{std::string(segment_kind_name(s.kind)), -1}] += d;
      by_range[{fmt::format("rank {} {}", s.rank, s.range.empty() ? "(no range)" : s.range), s.rank}] += d;
      if (s.kind != PathSegment::Kind::kHost)
        by_item[{fmt::format("{} {}", segment_kind_name(s.kind), without_sequence(s.name)), -1}] += d;
    }
  }
  if (steps == 0) return;
  r.step_ms = step_ns / steps / kNsPerMs;
  r.covered_ms = covered_ns / steps / kNsPerMs;
  r.by_rank = ranked(by_rank, steps, covered_ns, size_t(-1));
  r.by_kind = ranked(by_kind, steps, covered_ns, size_t(-1));
  r.by_range = ranked(by_range, steps, covered_ns, kTopShares);
  r.by_item = ranked(by_item, steps, covered_ns, kTopShares);
  if (!r.by_range.empty()) {
    const PathShare& top = r.by_rank.front();
    r.summary = fmt::format("{} of the {:.2f} ms step lies on the critical path through {} ({:.0f}% of it); the largest part is {} ({:.2f} ms a step)",
                            fmt::format("{:.2f} ms", r.covered_ms), r.step_ms, top.what, 100 * top.share, r.by_range.front().what,
                            r.by_range.front().ms_per_step);
  }
}

}  // namespace

Result<CriticalPathReport> analyze_critical_path(const std::filesystem::path& run_dir, const CriticalPathOptions& options) {
  format::OpenOptions open;
  open.read_flight_recorders = false;
  RS_ASSIGN_OR_RETURN(format::RunDirectory run, format::open_run_directory(run_dir, open));
  return analyze_critical_path(run, options);
}

Result<CriticalPathReport> analyze_critical_path(const format::RunDirectory& run, const CriticalPathOptions& options) {
  RS_ASSIGN_OR_RETURN(const format::KernelClassifier classifier, format::KernelClassifier::with_patterns(options.comm_kernel_patterns));
  if (run.world_size <= 0) return invalid_argument(fmt::format("{}: world size unknown (no run.json and no rank files)", run.dir.string()));
  CriticalPathReport report;
  report.run_dir = run.dir.string();
  report.world_size = run.world_size;
  report.problems = run.problems;
  std::vector<int> absent;
  for (int r = 0; r < run.world_size; ++r) {
    const bool has = std::any_of(run.ranks.begin(), run.ranks.end(), [&](const format::RankFiles& f) { return f.rank == r && f.has_events(); });
    if (!has) absent.push_back(r);
  }
  if (!absent.empty())
    report.problems.push_back(fmt::format("{} of {} ranks have no event stream (rank{} {}); the path cannot pass through them", absent.size(),
                                          run.world_size, absent.size() == 1 ? "" : "s", format::compress_ranks(absent)));
  RS_ASSIGN_OR_RETURN(std::vector<critical_path_detail::StepTimelines> steps, load_step_timelines(run, options, classifier, report.problems));
  if (steps.empty()) return not_found(fmt::format("{}: no step in the window: nothing to follow", run.dir.string()));
  for (const auto& st : steps) {
    StepPath path = walk_step(st, options);
    if (path.segments.size() > options.max_segments_per_step) path.segments_cut = true;
    report.steps.push_back(std::move(path));
  }
  summarize(report);
  for (StepPath& p : report.steps) {
    if (p.segments_cut) p.segments.resize(options.max_segments_per_step);
  }
  return report;
}

nlohmann::json critical_path_json(const CriticalPathReport& r) {
  using nlohmann::json;
  auto shares = [](const std::vector<PathShare>& v) {
    json a = json::array();
    for (const PathShare& s : v) {
      json o = {{"what", s.what}, {"ms_per_step", s.ms_per_step}, {"share", s.share}};
      if (s.rank >= 0) o["rank"] = s.rank;
      a.push_back(std::move(o));
    }
    return a;
  };
  json steps = json::array();
  for (const StepPath& p : r.steps) {
    json segs = json::array();
    for (const PathSegment& s : p.segments)
      segs.push_back({{"rank", s.rank}, {"kind", segment_kind_name(s.kind)}, {"begin_ns", s.begin_ns}, {"end_ns", s.end_ns},
                      {"ms", double(s.end_ns - s.begin_ns) / kNsPerMs}, {"name", s.name}, {"range", s.range}});
    steps.push_back({{"step", p.step}, {"step_ms", double(p.step_ns) / kNsPerMs}, {"covered_ms", double(p.covered_ns) / kNsPerMs},
                     {"end_rank", p.end_rank}, {"rank_changes", p.hops}, {"segments", std::move(segs)}, {"segments_cut", p.segments_cut}});
  }
  return {{"schema_version", kCriticalPathSchemaVersion},
          {"run_dir", r.run_dir},
          {"world_size", r.world_size},
          {"step_ms", r.step_ms},
          {"covered_ms", r.covered_ms},
          {"summary", r.summary},
          {"by_rank", shares(r.by_rank)},
          {"by_kind", shares(r.by_kind)},
          {"by_range", shares(r.by_range)},
          {"by_item", shares(r.by_item)},
          {"steps", std::move(steps)},
          {"problems", r.problems}};
}

void write_critical_path_text(const CriticalPathReport& r, std::ostream& out) {
  out << fmt::format("rankscope critical-path: {} (world {}, {} step{})\n", r.run_dir, r.world_size, r.steps.size(), r.steps.size() == 1 ? "" : "s");
  if (!r.summary.empty()) out << r.summary << "\n";
  auto table = [&](const char* title, const std::vector<PathShare>& v, size_t top) {
    if (v.empty()) return;
    out << "\n" << title << " (ms a step on the path, share of it):\n";
    for (size_t i = 0; i < v.size() && i < top; ++i) out << fmt::format("  {:9.2f} {:5.1f}%  {}\n", v[i].ms_per_step, 100 * v[i].share, v[i].what);
  };
  table("by kind", r.by_kind, 4);
  table("by rank", r.by_rank, 8);
  table("by rank and range", r.by_range, 10);
  table("kernels and collectives", r.by_item, 10);
  if (!r.steps.empty()) {
    const StepPath& p = r.steps.back();
    out << fmt::format("\nstep {}: {:.2f} ms, the path covers {:.2f} ms from rank {}'s end, {} change{} of rank (latest first, --json has every step):\n",
                       p.step, double(p.step_ns) / kNsPerMs, double(p.covered_ns) / kNsPerMs, p.end_rank, p.hops, p.hops == 1 ? "" : "s");
    size_t shown = 0;
    for (auto it = p.segments.rbegin(); it != p.segments.rend() && shown < 12; ++it, ++shown)
      out << fmt::format("  rank {:<4} {:<12} {:9.3f} ms  {}\n", it->rank, segment_kind_name(it->kind), double(it->end_ns - it->begin_ns) / kNsPerMs, it->name);
    if (p.segments.size() > shown) out << fmt::format("  ... {} more\n", p.segments.size() - shown);
  }
  for (const std::string& problem : r.problems) out << "problem: " << problem << "\n";
}

}  // namespace rankscope::analyzers
