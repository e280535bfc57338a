// kernels_analyzer.cpp — see kernels_analyzer.h. Ranks are read and analysed on every core (each
// worker takes the next rank; a rank's timeline is freed when its analyses are done), then the
// spread across ranks and the findings are computed from the per-rank results alone.
#include "rankscope/analyzers/device_timeline/kernels_analyzer.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "analyses.h"

namespace rankscope::analyzers {
namespace {

using format::KernelClass;

struct RankWork {
  RankKernels result;
  std::unordered_map<std::string, int64_t> kernel_total_ns;  // every kernel name of the rank (for the spread)
};

void analyse_rank(const format::RankFiles& files, const format::KernelClassifier& classifier,
                  const KernelsOptions& options, RankWork& out) {
  out.result.rank = files.rank;
  if (!files.has_events()) {
    out.result.problem = "no event stream";
    return;
  }
  auto timeline = device_timeline::read_rank_timeline(files, classifier);
  if (!timeline.ok()) {
    out.result.problem = timeline.status().user_text();
    return;
  }
  const device_timeline::RankTimeline& t = *timeline;
  if (t.ops.empty()) {
    out.result.problem = "no GPU kernel records in the capture window (no traced step, or no GPU work)";
    return;
  }
  RankKernels& r = out.result;
  r.traced_steps = int(t.traced_steps.size());
  r.step_ms = t.step_ms;
  r.ops = int64_t(t.ops.size());
  r.overlap = device_timeline::compute_overlap(t);
  r.idle = device_timeline::compute_idle(t, options);
  r.kinds = device_timeline::compute_breakdown(t, options);
  r.launches = device_timeline::compute_launch_stats(t, options);
  r.queues = device_timeline::compute_queues(t, options);
  for (const device_timeline::Op& o : t.ops) out.kernel_total_ns[t.names[o.name]] += o.end - o.begin;
}

RankSpread spread(const std::vector<std::pair<double, int>>& values) {
  RankSpread s;
  if (values.empty()) return s;
  std::vector<std::pair<double, int>> v = values;
  std::sort(v.begin(), v.end());
  s.min = v.front().first, s.min_rank = v.front().second;
  s.max = v.back().first, s.max_rank = v.back().second;
  const size_t n = v.size();
  s.median = n % 2 ? v[n / 2].first : (v[n / 2 - 1].first + v[n / 2].first) / 2;
  return s;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size() && i < 8; ++i) s += fmt::format("{}{}", i ? "," : "", ranks[i]);
  if (ranks.size() > 8) s += fmt::format(",... ({} ranks)", ranks.size());
  return s;
}

// "0,2-5,9" (ascending ranks).
std::string rank_ranges(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    s += fmt::format("{}{}", s.empty() ? "" : ",", ranks[i]);
    if (j > i) s += fmt::format("-{}", ranks[j]);
    i = j + 1;
  }
  return s;
}

std::string short_name(const std::string& name) { return name.size() <= 60 ? name : name.substr(0, 57) + "..."; }

void add_findings(KernelsReport& report, const std::vector<const RankKernels*>& ok) {
  const KernelsOptions& o = report.options;
  // Low overlap: one finding for every such rank, its cost the worst rank's exposed communication.
  {
    std::vector<int> ranks;
    const RankKernels* worst = nullptr;
    for (const RankKernels* r : ok) {
      if (!r->overlap.ratio || *r->overlap.ratio >= o.low_overlap || r->overlap.exposed_ms_per_step <= 0) continue;
      ranks.push_back(r->rank);
      if (!worst || r->overlap.exposed_ms_per_step > worst->overlap.exposed_ms_per_step) worst = r;
    }
    if (worst) {
      const double comm_ms = double(worst->overlap.communication_ns) / 1e6 / std::max(1, worst->traced_steps);
      report.findings.push_back(
          {"low_overlap", ranks, worst->overlap.exposed_ms_per_step,
           fmt::format(
               "compute/communication overlap is low on rank{} {}: on rank {} only {:.0f}% of its {:.2f} ms a step of "
               "communication-kernel time runs beside a compute kernel, so {:.2f} ms a step of communication is not "
               "hidden (overlap it with compute: bucketed gradient all-reduce, prefetching all-gathers)",
               ranks.size() > 1 ? "s" : "", rank_list(ranks), worst->rank, 100 * *worst->overlap.ratio, comm_ms,
               worst->overlap.exposed_ms_per_step)});
    }
  }
  // Host-bound ranks.
  {
    std::vector<int> ranks;
    const RankKernels* worst = nullptr;
    for (const RankKernels* r : ok) {
      if (!r->idle.host_bound) continue;
      ranks.push_back(r->rank);
      if (!worst || r->idle.host_wait_ms_per_step > worst->idle.host_wait_ms_per_step) worst = r;
    }
    if (worst) {
      report.findings.push_back(
          {"host_bound", ranks, worst->idle.host_wait_ms_per_step,
           fmt::format(
               "rank{} {} {} host-bound: on rank {} the GPU waits {:.2f} ms a step ({:.0f}% of its busy span) for the "
               "CPU to launch the next op (fewer, larger kernels, CUDA graphs, or a faster input pipeline help)",
               ranks.size() > 1 ? "s" : "", rank_list(ranks), ranks.size() > 1 ? "are" : "is", worst->rank,
               worst->idle.host_wait_ms_per_step,
               100.0 * double(worst->idle.device.host_wait_ns) / double(worst->idle.span_ns))});
    }
  }
  // Long launch calls (HTA's runtime outliers).
  {
    std::vector<int> ranks;
    int64_t count = 0;
    double worst_cost = 0;
    const RankKernels* worst = nullptr;
    for (const RankKernels* r : ok) {
      if (r->launches.runtime_outliers == 0) continue;
      ranks.push_back(r->rank);
      count += r->launches.runtime_outliers;
      if (!worst || r->launches.longest_calls.front().cpu_ns > worst->launches.longest_calls.front().cpu_ns) worst = r;
      double over = 0;  // what the long calls cost beyond the cutoff, a step (a lower bound on the loss)
      for (const auto& c : r->launches.longest_calls) over += double(c.cpu_ns - o.runtime_outlier_ns) / 1e6;
      worst_cost = std::max(worst_cost, over / std::max(1, r->traced_steps));
    }
    if (worst) {
      const LaunchOutlier& c = worst->launches.longest_calls.front();
      report.findings.push_back(
          {"launch_outliers", ranks, worst_cost,
           fmt::format("{} launch call{} took over {} µs on the host (rank{} {}); the longest, {} of {} on rank {} at "
                       "step {}, "
                       "took {:.3f} ms",
                       count, count > 1 ? "s" : "", o.runtime_outlier_ns / 1000, ranks.size() > 1 ? "s" : "",
                       rank_list(ranks), c.api.empty() ? "a launch" : c.api, short_name(c.kernel), worst->rank, c.step,
                       double(c.cpu_ns) / 1e6)});
    }
  }
  // A rank whose GPU spends clearly more time in one kind than the median rank.
  if (ok.size() > 1) {
    for (const KindSpread& k : report.kind_spread) {
      const double extra = k.ms_per_step.max - k.ms_per_step.median;
      if (extra < 0.5 || extra < 0.1 * k.ms_per_step.median) continue;
      report.findings.push_back(
          {"kernel_spread",
           {k.ms_per_step.max_rank},
           extra,
           fmt::format("rank {} spends {:.2f} ms a step in {} kernels, the median rank {:.2f} ms ({:+.0f}%)",
                       k.ms_per_step.max_rank, k.ms_per_step.max, format::kernel_class_name(k.kind),
                       k.ms_per_step.median, k.ms_per_step.median > 0 ? 100 * extra / k.ms_per_step.median : 100.0)});
    }
  }
  std::stable_sort(report.findings.begin(), report.findings.end(),
                   [](const KernelsFinding& a, const KernelsFinding& b) {
                     return a.cost_ms_per_step > b.cost_ms_per_step;
                   });
}

}  // namespace

Result<KernelsReport> analyze_kernels(const std::filesystem::path& run_dir, const KernelsOptions& options) {
  RS_ASSIGN_OR_RETURN(format::KernelClassifier classifier,
                      format::KernelClassifier::with_patterns(options.comm_kernel_patterns));
  format::OpenOptions open;
  open.read_flight_recorders = false;
  RS_ASSIGN_OR_RETURN(format::RunDirectory run, format::open_run_directory(run_dir, open));

  KernelsReport report;
  report.run_dir = run_dir.string();
  report.world_size = run.world_size;
  report.options = options;
  report.comm_patterns = options.comm_kernel_patterns;
  report.problems = run.problems;

  std::vector<const format::RankFiles*> todo;
  for (const auto& r : run.ranks) {
    if (!options.rank || r.rank == *options.rank) todo.push_back(&r);
  }
  if (options.rank && todo.empty())
    return invalid_argument(fmt::format("rank {} is not in this run (world size {})", *options.rank, run.world_size));

  std::vector<RankWork> work(todo.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < todo.size();) analyse_rank(*todo[i], classifier, options, work[i]);
  };
  const size_t threads = std::min<size_t>(todo.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();

  std::vector<const RankKernels*> ok;
  std::vector<const RankWork*> ok_work;
  bool any_launches = false;
  for (RankWork& w : work) {
    report.ranks.push_back(std::move(w.result));
  }
  std::map<std::string, std::vector<int>> ranks_with_problem;  // one line per problem, not per rank
  for (size_t i = 0; i < report.ranks.size(); ++i) {
    const RankKernels& r = report.ranks[i];
    if (!r.problem.empty()) {
      ranks_with_problem[r.problem].push_back(r.rank);
      continue;
    }
    ok.push_back(&r);
    ok_work.push_back(&work[i]);
    any_launches |= r.launches.launches > 0;
  }
  for (const auto& [problem, ranks] : ranks_with_problem)
    report.problems.push_back(
        fmt::format("{} {}: {}", ranks.size() > 1 ? "ranks" : "rank", rank_ranges(ranks), problem));
  if (!ok.empty() && !any_launches)
    report.problems.push_back(
        "no launch records (TRACE_LAUNCHES) in this run: launch statistics, queue lengths and the host-wait share of "
        "idle time "
        "need them; the probe does not record launches yet, and imports written before they were added need "
        "re-importing");

  // Spread across ranks, per kind and per kernel that some rank has in its top list.
  std::map<std::pair<KernelClass, std::string>, bool> top_names;
  for (size_t k = 0; k < 3; ++k) {
    std::vector<std::pair<double, int>> v;
    for (const RankKernels* r : ok) {
      v.emplace_back(double(r->kinds[k].total_ns) / 1e6 / std::max(1, r->traced_steps), r->rank);
      for (const KernelStat& s : r->kinds[k].top) top_names[{r->kinds[k].kind, s.name}] = true;
    }
    if (!v.empty()) report.kind_spread.push_back({ok.front()->kinds[k].kind, spread(v)});
  }
  for (const auto& [key, unused] : top_names) {
    std::vector<std::pair<double, int>> v;
    for (size_t i = 0; i < ok.size(); ++i) {
      const auto it = ok_work[i]->kernel_total_ns.find(key.second);
      const double total = it == ok_work[i]->kernel_total_ns.end() ? 0 : double(it->second);
      v.emplace_back(total / 1e6 / std::max(1, ok[i]->traced_steps), ok[i]->rank);
    }
    report.kernel_spread.push_back({key.second, key.first, spread(v)});
  }
  std::stable_sort(report.kernel_spread.begin(), report.kernel_spread.end(),
                   [](const KernelSpread& a, const KernelSpread& b) {
                     return a.kind != b.kind ? a.kind < b.kind : a.ms_per_step.max > b.ms_per_step.max;
                   });
  add_findings(report, ok);
  return report;
}

}  // namespace rankscope::analyzers
