// kernels_text.cpp — see kernels_text.h. Per-step figures are per traced step of the rank.
#include "rankscope/analyzers/device_timeline/kernels_text.h"

#include <fmt/format.h>

#include "units.h"

namespace rankscope::analyzers {
namespace {

using device_timeline::ms;
using device_timeline::us;

std::string clip(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 3) + "..."; }

}  // namespace

std::string kernels_report_text(const KernelsReport& report) {
  std::string out;
  auto line = [&](const std::string& s) { out += s + "\n"; };
  std::vector<const RankKernels*> ok;
  for (const auto& r : report.ranks)
    if (r.problem.empty()) ok.push_back(&r);
  line(fmt::format("rankscope kernels: {} ({} rank{} analysed of {})", report.run_dir, ok.size(),
                   ok.size() == 1 ? "" : "s", report.world_size));
  if (!report.comm_patterns.empty()) {
    std::string p;
    for (const auto& x : report.comm_patterns) p += (p.empty() ? "" : ", ") + x;
    line("communication kernels also: " + p);
  }
  if (ok.empty()) {
    for (const auto& p : report.problems) line("problem: " + p);
    return out;
  }
  auto per_step = [](const RankKernels& r, int64_t ns) { return ms(ns) / std::max(1, r.traced_steps); };

  line("\ncompute/communication overlap (share of communication-kernel time with a compute kernel running)");
  line(fmt::format("{:>6} {:>7} {:>8} {:>14} {:>10} {:>16}", "rank", "steps", "step ms", "comm ms/step", "overlap",
                   "exposed ms/step"));
  for (const RankKernels* r : ok) {
    line(fmt::format("{:>6} {:>7} {:>8.2f} {:>14.3f} {:>10} {:>16.3f}", r->rank, r->traced_steps, r->step_ms,
                     per_step(*r, r->overlap.communication_ns),
                     r->overlap.ratio ? fmt::format("{:.1f}%", 100 * *r->overlap.ratio) : std::string("-"),
                     r->overlap.exposed_ms_per_step));
  }

  line(fmt::format("\nGPU idle by cause, ms a step (kernel wait: gaps under {:.0f} µs between back-to-back ops)",
                   us(report.options.kernel_wait_threshold_ns)));
  line(fmt::format("{:>6} {:>10} {:>10} {:>10} {:>12} {:>10}  {}", "rank", "span", "idle", "host wait", "kernel wait",
                   "other", ""));
  for (const RankKernels* r : ok) {
    const IdleByCause& d = r->idle.device;
    line(fmt::format("{:>6} {:>10.3f} {:>10.3f} {:>10.3f} {:>12.3f} {:>10.3f}  {}", r->rank,
                     per_step(*r, r->idle.span_ns), per_step(*r, d.total_ns()), per_step(*r, d.host_wait_ns),
                     per_step(*r, d.kernel_wait_ns), per_step(*r, d.other_ns), r->idle.host_bound ? "host-bound" : ""));
    for (const StreamIdle& s : r->idle.streams) {
      line(fmt::format("{:>6} {:>10} {:>10.3f} {:>10.3f} {:>12.3f} {:>10.3f}", "", fmt::format("stream {}", s.stream),
                       per_step(*r, s.idle.total_ns()), per_step(*r, s.idle.host_wait_ns),
                       per_step(*r, s.idle.kernel_wait_ns), per_step(*r, s.idle.other_ns)));
    }
  }

  line("\nkernel time by kind, ms a step (summed durations)");
  line(fmt::format("{:>6} {:>10} {:>14} {:>10}", "rank", "compute", "communication", "memory"));
  for (const RankKernels* r : ok) {
    line(fmt::format("{:>6} {:>10.3f} {:>14.3f} {:>10.3f}", r->rank, per_step(*r, r->kinds[0].total_ns),
                     per_step(*r, r->kinds[1].total_ns), per_step(*r, r->kinds[2].total_ns)));
  }
  line("\ntop kernels across ranks, ms a step (min / median / max, with the ranks of the extremes)");
  for (const KernelSpread& k : report.kernel_spread) {
    const RankSpread& s = k.ms_per_step;
    line(fmt::format("  {:<13} {:>9.3f} (r{}) {:>9.3f} {:>9.3f} (r{})  {}", format::kernel_class_name(k.kind), s.min,
                     s.min_rank, s.median, s.max, s.max_rank, clip(k.name, 70)));
  }

  line(fmt::format("\nlaunches (µs; delay = op begin - call end; outliers: call > {:.0f} µs, delay > {:.0f} µs)",
                   us(report.options.runtime_outlier_ns), us(report.options.launch_delay_outlier_ns)));
  line(fmt::format("{:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>7} {:>10}", "rank", "launches", "cpu med",
                   "cpu p95", "delay med", "delay p95", "long calls", "long delay", "short", "unlaunched"));
  for (const RankKernels* r : ok) {
    const LaunchStats& l = r->launches;
    line(fmt::format("{:>6} {:>9} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>10} {:>10} {:>7} {:>10}", r->rank, l.launches,
                     us(l.cpu.median_ns), us(l.cpu.p95_ns), us(l.delay.median_ns), us(l.delay.p95_ns),
                     l.runtime_outliers, l.delay_outliers, l.short_kernels, l.ops_without_launch));
  }
  for (const RankKernels* r : ok) {
    for (const auto& c : r->launches.longest_calls)
      line(fmt::format("  rank {} step {}: {} took {:.1f} µs on the host ({})", r->rank, c.step,
                       c.api.empty() ? "a launch" : c.api, us(c.cpu_ns), clip(c.kernel, 60)));
    for (const auto& c : r->launches.longest_delays)
      line(fmt::format("  rank {} step {}: {} began {:.1f} µs after its {} returned", r->rank, c.step,
                       clip(c.kernel, 60), us(c.delay_ns), c.api.empty() ? "launch" : c.api));
  }

  line(fmt::format("\nlaunch queue per stream (launched, not yet started; CUDA blocks the CPU at {})",
                   report.options.cuda_queue_limit));
  line(fmt::format("{:>6} {:>8} {:>9} {:>6} {:>14} {:>8}", "rank", "stream", "launches", "max", "ms at max", "mean"));
  for (const RankKernels* r : ok) {
    for (const StreamQueue& q : r->queues)
      line(fmt::format("{:>6} {:>8} {:>9} {:>6} {:>14.3f} {:>8.2f}", r->rank, q.stream, q.launches, q.max_length,
                       ms(q.time_at_max_ns), q.mean_length));
  }

  if (report.findings.empty()) line("\nno findings");
  for (size_t i = 0; i < report.findings.size(); ++i)
    line(fmt::format("{}{:>2}. {}", i ? "" : "\n", i + 1, report.findings[i].text));
  for (const auto& p : report.problems) line("problem: " + p);
  return out;
}

}  // namespace rankscope::analyzers
