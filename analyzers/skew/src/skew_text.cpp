// skew_text.cpp — the skew report as text (skew_text.h): the findings first, then the table of
// ranks, the overlap and the groups' traffic. The formats are printf's, appended to a string.
#include "rankscope/analyzers/skew/skew_text.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "rankscope/format/appendf.h"

namespace rankscope::analyzers {
namespace {

using format::appendf;

// On a GPU the host returns from a range at launch: the breakdown is the device's, from the kernel
// records of the traced steps. Says so, with the GPU time by range and the kernel time no range owns.
void print_device(const DeviceSummary& s, std::string& out) {
  const DeviceBreakdown& d = s.mean;
  auto pct = [&](double ms) { return d.step_ms > 0 ? 100.0 * ms / d.step_ms : 0.0; };
  appendf(out,
          "GPU time per step (device timeline: kernel records of steps %lld-%lld, %d rank%s): %.2f ms = "
          "compute %.2f (%.0f%%) + transfer %.2f (communication kernels, %.0f%%) + memcpy %.2f (memcpys/memsets, "
          "%.0f%%) + "
          "idle %.2f (gaps on the device timeline, %.0f%%; %.2f of it host-bound: the host's step longer than the "
          "GPU's work)\n",
          (long long)d.first_traced_step, (long long)d.last_traced_step, s.ranks, s.ranks == 1 ? "" : "s", d.step_ms,
          d.compute_ms, pct(d.compute_ms), d.transfer_ms, pct(d.transfer_ms), d.memcpy_ms, pct(d.memcpy_ms), d.idle_ms,
          pct(d.idle_ms), d.host_bound_ms);
  // Unions of kernel intervals over the step's window on the device: shares are of the busy time.
  appendf(out,
          "outside any range: %.2f ms of the %.2f ms the GPU was busy (%.0f%%) ran kernels launched outside every "
          "range\n",
          d.outside_ranges_ms, d.busy_ms, d.busy_ms > 0 ? 100.0 * d.outside_ranges_ms / d.busy_ms : 0.0);
  appendf(out, "GPU time by range (ms per step some kernel of the range runs; %% of busy time):\n");
  // The unattributed kernel time takes its place among the ranges, so its size reads at a glance.
  auto ranges = s.ranges_ms;
  if (d.outside_ranges_ms > 0) ranges.emplace_back("(outside any range)", d.outside_ranges_ms);
  std::stable_sort(ranges.begin(), ranges.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  const size_t shown = std::min<size_t>(ranges.size(), 12);
  for (size_t i = 0; i < shown; ++i) {
    const auto& [range, ms] = ranges[i];
    appendf(out, "  %9.2f  %5.1f%%  %s\n", ms, d.busy_ms > 0 ? 100.0 * ms / d.busy_ms : 0.0, range.c_str());
  }
  if (shown < ranges.size()) appendf(out, "  ... %zu more ranges (--json has them all)\n", ranges.size() - shown);
  appendf(out, "\n");
}

std::string rate_text(double gbps) {
  return gbps >= 1 ? fmt::format("{:.2f} GB/s", gbps) : fmt::format("{:.1f} MB/s", gbps * 1e3);
}

// Each group's collectives of a step: how many calls, a rank's bytes, the transfer and its rate;
// the groups that transfer longest first.
void print_groups(const SkewReport& r, std::string& out) {
  std::vector<const GroupBandwidth*> groups;
  for (const auto& g : r.groups)
    // A group of one rank moves nothing between ranks: its call's time is the host's, not a link's.
    if (g.ranks >= 2 && (g.transfer_ms_per_step > 0 || g.bytes_per_step > 0)) groups.push_back(&g);
  if (groups.empty()) return;
  std::stable_sort(groups.begin(), groups.end(),
                   [](auto* a, auto* b) { return a->transfer_ms_per_step > b->transfer_ms_per_step; });
  appendf(out,
          "collectives a step by group (a rank's bytes; the time some call of the group moved data after its last "
          "rank arrived, hidden behind compute or not, and the rate over it):\n");
  const size_t shown = std::min<size_t>(groups.size(), 8);
  for (size_t i = 0; i < shown; ++i) {
    const auto& g = *groups[i];
    std::string rate;
    if (g.bytes_per_step > 0 && g.transfer_ms_per_step > 0) {
      rate = ": " + rate_text(g.algbw_gbps);
      if (g.busbw_gbps > 0) rate += fmt::format(" (bus {})", rate_text(g.busbw_gbps));
    }
    const std::string bytes =
        g.bytes_per_step > 0 ? fmt::format("{:.2f} MB", g.bytes_per_step / 1e6) : "bytes not recorded";
    appendf(out, "  %s (%d ranks): %.0f call%s, %s in %.2f ms%s\n", g.comm.c_str(), g.ranks, g.calls_per_step,
            g.calls_per_step >= 1.5 ? "s" : "", bytes.c_str(), g.transfer_ms_per_step, rate.c_str());
  }
  if (shown < groups.size()) appendf(out, "  ... %zu more groups (--json has them all)\n", groups.size() - shown);
}

}  // namespace

std::string skew_report_text(const SkewReport& r) {
  std::string out;
  appendf(out, "rankscope skew: %s (world %d, steps %lld-%lld, median step %.2f ms)\n", r.run_dir.c_str(), r.world_size,
          (long long)r.first_step, (long long)r.last_step, r.step_ms_median);
  // A rank read in part is said first: every figure below is made without its missing steps.
  for (const auto& p : r.partial_ranks) {
    appendf(out, "partial rank %d: %s%s%s\n", p.rank, p.reason.c_str(), p.left_out.empty() ? "" : "; ",
            p.left_out.c_str());
  }
  if (r.device) print_device(*r.device, out);
  if (r.findings.empty()) appendf(out, "no findings: ranks are in step\n");
  for (size_t i = 0; i < r.findings.size(); ++i) {
    const auto& f = r.findings[i];
    // A share of work with no measurable cost yet shows what it predicts ("[ 22:1 share]").
    const std::string cost = f.cost_ms_per_step < 0.05 && !f.share_text.empty()
                                 ? fmt::format("{:>7} share", f.share_text)
                                 : fmt::format("{:6.1f} ms/step", f.cost_ms_per_step);
    appendf(out, "%2zu. [%s] %s: %s\n", i + 1, cost.c_str(), f.kind.c_str(), f.text.c_str());
    for (const auto& c : f.caveats) appendf(out, "    caveat: %s\n", c.c_str());
  }
  if (!r.below_noise.empty()) {
    std::string line;
    for (const auto& b : r.below_noise) {
      line += fmt::format("{}rank {} {} by {:.1f} ms (noise {:.1f} ms)", line.empty() ? "" : "; ", b.rank,
                          b.kind == "straggler" ? "slower"
                          : b.sites > 1         ? fmt::format("last at {} collectives", b.sites)
                                                : std::string("last at a collective"),
                          b.delay_ms, b.noise_ms);
    }
    appendf(out, "below the run's noise (under %.0fx), not findings: %s\n", kFindingSignificance, line.c_str());
  }
  if (r.what_if) appendf(out, "what if: %s\n", r.what_if->text.c_str());
  if (r.expert_load && r.expert_load->balanced) appendf(out, "what if: %s\n", r.expert_load->balanced->text.c_str());
  // The slowest ranks first (by step time without communication); all of them for small jobs.
  std::vector<const RankSkew*> ranks;
  for (const auto& rs : r.ranks) {
    if (rs.present) ranks.push_back(&rs);
  }
  std::stable_sort(ranks.begin(), ranks.end(),
                   [](auto* a, auto* b) { return a->noncomm_ms_median > b->noncomm_ms_median; });
  const size_t shown = std::min<size_t>(ranks.size(), 16);
  if (r.device) {
    appendf(out,
            "\ncompute, wait, transfer, memcpy and idle: GPU time of the traced steps for ranks with kernel records "
            "(wait 0: an NCCL kernel waiting for a peer looks like one moving data), host time for the others\n");
  }
  appendf(out, "\n%6s %9s %9s %9s %9s %9s %9s %9s %9s %6s %6s%s\n", "rank", "median", "p90", "max", "compute", "wait",
          "transfer", "memcpy", "idle", "rel", "indiv", shown < ranks.size() ? "   (16 slowest)" : "");
  for (size_t i = 0; i < shown; ++i) {
    const auto& x = *ranks[i];
    appendf(out, "%6d %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %6.3f %6.3f\n", x.rank, x.step_ms_median,
            x.step_ms_p90, x.step_ms_max, x.compute_ms, x.collective_wait_ms, x.collective_transfer_ms, x.memcpy_ms,
            x.idle_ms, x.relative_score, x.individual_score);
  }
  for (size_t i = 0; i < shown; ++i) {
    const auto& x = *ranks[i];
    if (x.idle_collective_wait_ms <= 0) continue;
    appendf(out,
            "rank %d: %.2f ms of its %.2f ms GPU idle is its host waiting in collectives for the last arriver "
            "(no NCCL kernels: host collectives such as Gloo)\n",
            x.rank, x.idle_collective_wait_ms, x.idle_ms);
  }
  std::string hidden;
  for (size_t i = 0; i < shown; ++i)
    if (ranks[i]->collective_overlap_ms > 0)
      hidden += fmt::format("{}rank {} {:.2f} ms", hidden.empty() ? "" : ", ", ranks[i]->rank,
                            ranks[i]->collective_overlap_ms);
  if (!hidden.empty())
    appendf(out, "collectives hidden behind the main thread's ops (overlap, not in the columns), a step: %s\n",
            hidden.c_str());
  print_groups(r, out);
  for (const auto& p : r.problems) appendf(out, "problem: %s\n", p.c_str());
  return out;
}

}  // namespace rankscope::analyzers
