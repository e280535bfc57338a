// startup_analyzer.cpp — per-rank start-up timelines from step 0 of each event stream.
//
// Each rank's stream is scanned once; only step 0 (start-up), the first training step's begin and
// the clock record are kept, so memory is O(ranks x phases). Durations use each rank's own clock;
// "reached step 1 later than the others" uses the clock alignment (offset to rank 0).
#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "rankscope/analyzers/startup/startup_report.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/run_directory.h"

namespace rankscope::analyzers {
namespace {

constexpr double kNsPerMs = 1e6;
constexpr std::string_view kLaunchCounter = "init.launch_at_ns";

// Keeps step 0 and the begin of the first later step.
class StartupVisitor final : public format::EventStreamVisitor {
 public:
  void on_name(uint32_t id, format::NameKind, std::string_view name) override {
    if (names.size() <= id) names.resize(id + 1);
    names[id] = std::string(name);
  }
  void on_clock(const format::ClockRecord& c) override { offset_ns = c.offset_ns; }
  void on_step(const format::StepRecord& s) override {
    if (s.step == 0 && !startup) startup = s;
    if (s.step >= 1 && !first_step_begin_ns) first_step_begin_ns = s.begin_ns;
  }
  std::vector<std::string> names;
  std::optional<format::StepRecord> startup;
  std::optional<int64_t> first_step_begin_ns;
  int64_t offset_ns = 0;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int ranks_per_host(const format::RunDirectory& run) {
  if (!run.metadata || run.metadata->hosts.empty()) return 0;
  std::map<std::string, int> per;
  for (const auto& h : run.metadata->hosts) ++per[h];
  int most = 0;
  for (const auto& [h, n] : per) most = std::max(most, n);
  return most;
}

// A rank's launch and first step on the job's aligned clock.
struct AlignedStart {
  std::optional<int64_t> launch_ns, first_ns;
};

// One rank's start-up from its event stream: its init/* phases, the slowest, the time from launch to
// step 1; or the problem that kept it from being read.
RankStartup read_rank_startup(const format::RankFiles& files, AlignedStart& aligned) {
  RankStartup r;
  r.rank = files.rank;
  if (!files.has_events()) {
    r.problem = "no event stream";
    return r;
  }
  StartupVisitor v;
  auto scan = format::scan_rank_events(files, v);
  if (!scan.ok()) {
    r.problem = scan.status().message();
    return r;
  }
  if (!v.startup) {
    r.problem = "no start-up record (step 0): written by a producer without init/* ranges, or it died first";
    return r;
  }
  r.readable = true;
  std::optional<int64_t> launch_ns;
  for (const auto& c : v.startup->counters)
    if (c.name_id < v.names.size() && v.names[c.name_id] == kLaunchCounter) launch_ns = int64_t(c.value);
  for (const auto& a : v.startup->ranges) {
    if (a.name_id >= v.names.size() || v.names[a.name_id].rfind("init/", 0) != 0) continue;
    r.phases.push_back({v.names[a.name_id], double(a.total_ns) / kNsPerMs, int(a.count)});
    if (r.phases.back().ms > r.slowest_phase_ms) {
      r.slowest_phase_ms = r.phases.back().ms;
      r.slowest_phase = r.phases.back().name;
    }
  }
  // Without the launch time, start-up begins where the probe did (step 0's begin).
  if (!launch_ns) launch_ns = v.startup->begin_ns;
  if (v.first_step_begin_ns) r.to_first_step_s = double(*v.first_step_begin_ns - *launch_ns) / 1e9;
  aligned.launch_ns = *launch_ns + v.offset_ns;
  if (v.first_step_begin_ns) aligned.first_ns = *v.first_step_begin_ns + v.offset_ns;
  return r;
}

// Times on one axis: seconds since the earliest launch.
void place_on_one_axis(StartupReport& report, const std::vector<AlignedStart>& aligned) {
  std::optional<int64_t> t0;
  for (const auto& x : aligned)
    if (x.launch_ns) t0 = t0 ? std::min(*t0, *x.launch_ns) : *x.launch_ns;
  std::vector<double> to_first;
  for (size_t i = 0; i < aligned.size(); ++i) {
    if (!t0) break;
    auto& r = report.ranks[i];
    if (aligned[i].launch_ns) r.launch_at_s = double(*aligned[i].launch_ns - *t0) / 1e9;
    if (aligned[i].first_ns) r.first_step_at_s = double(*aligned[i].first_ns - *t0) / 1e9;
    if (r.to_first_step_s) to_first.push_back(*r.to_first_step_s);
  }
  if (!to_first.empty()) report.median_to_first_step_s = median(to_first);
}

// A late rank reached step 1 well after the others; the phase that took longest beyond the others'
// median is why.
void find_late_ranks(StartupReport& report) {
  std::vector<const RankStartup*> with_first;
  for (const auto& r : report.ranks)
    if (r.first_step_at_s) with_first.push_back(&r);
  for (const RankStartup* r : with_first) {
    std::vector<double> others;
    for (const RankStartup* o : with_first)
      if (o != r) others.push_back(*o->first_step_at_s);
    if (others.empty()) continue;
    const double late_s = *r->first_step_at_s - median(others);
    if (late_s < 0.5 || late_s < 0.2 * report.median_to_first_step_s.value_or(0)) continue;
    std::string phase;
    double phase_ms = 0, excess_ms = 0, others_ms = 0;
    for (const auto& p : r->phases) {
      std::vector<double> their;
      for (const RankStartup* o : with_first)
        if (o != r)
          for (const auto& q : o->phases)
            if (q.name == p.name) their.push_back(q.ms);
      const double m = median(their);
      if (p.ms - m > excess_ms) {
        excess_ms = p.ms - m;
        phase = p.name;
        phase_ms = p.ms;
        others_ms = m;
      }
    }
    StartupFinding f;
    f.kind = "late_rank";
    f.rank = r->rank;
    f.phase = phase;
    f.cost_ms = late_s * 1e3;
    f.text = phase.empty()
                 ? fmt::format("rank {} reached step 1 {:.1f} s after the others", r->rank, late_s)
                 : fmt::format("rank {} reached step 1 {:.1f} s after the others: {} took {:.1f} s (others {:.1f} s)",
                               r->rank, late_s, phase, phase_ms / 1e3, others_ms / 1e3);
    report.findings.push_back(std::move(f));
  }
  std::sort(report.findings.begin(), report.findings.end(),
            [](const StartupFinding& a, const StartupFinding& b) { return a.cost_ms > b.cost_ms; });
}

}  // namespace

Result<StartupReport> analyze_startup(const std::filesystem::path& run_dir) {
  format::OpenOptions oo;
  oo.read_flight_recorders = false;
  RS_ASSIGN_OR_RETURN(format::RunDirectory run, format::open_run_directory(run_dir, oo));
  StartupReport report;
  report.run_dir = run_dir.string();
  report.world_size = run.world_size;
  report.problems = run.problems;
  std::vector<AlignedStart> aligned(run.ranks.size());
  for (size_t i = 0; i < run.ranks.size(); ++i) report.ranks.push_back(read_rank_startup(run.ranks[i], aligned[i]));
  place_on_one_axis(report, aligned);
  find_late_ranks(report);
  if (run.metadata && run.metadata->extra.contains("config"))
    for (auto& c : config_findings(run.metadata->extra["config"], run.world_size, ranks_per_host(run))) {
      StartupFinding f;
      f.kind = "setting";
      f.setting = c.setting;
      f.rank = c.ranks.size() == 1 ? c.ranks.front() : -1;
      f.text = c.text;
      report.findings.push_back(std::move(f));
    }
  bool any = false;
  for (const auto& r : report.ranks) any |= r.readable;
  if (!any)
    return rankscope::not_found(fmt::format("{}: no rank has a start-up record (event stream step 0 with init/* ranges)",
                                            run_dir.string()));
  return report;
}

}  // namespace rankscope::analyzers
