// gather_wording.cpp — the headline and per-node findings of a gathered run.
#include "rankscope/analyzers/hang/gather_wording.h"

#include <algorithm>

#include <fmt/format.h>

#include "rankscope/analyzers/hang/rank_list.h"

namespace rankscope::hang {
namespace {

std::string decimal_bytes(uint64_t b) {
  if (b >= (10u << 20)) return fmt::format("{:.1f} MB", double(b) / 1e6);
  if (b >= 10'000) return fmt::format("{:.0f} kB", double(b) / 1e3);
  return fmt::format("{} bytes", b);
}

}  // namespace

std::string gather_headline(const format::GatherRecord& r) {
  const std::string how = r.launcher == "slurm" ? fmt::format(" of Slurm job {}", r.job_id) : std::string();
  return fmt::format("gathered: {} of {} nodes{} answered in {:.2f} s ({} moved)", r.answered(), r.nodes.size(), how,
                     r.seconds, decimal_bytes(r.stream_bytes));
}

std::vector<std::string> gather_findings(const format::GatherRecord& r) {
  std::vector<std::string> lines;
  std::vector<int> placed;
  for (const auto& n : r.nodes) {
    if (n.answered) continue;
    std::string ranks;
    if (!n.missing_ranks.empty()) ranks = fmt::format(": its ranks {} are unseen", compress_ranks(n.missing_ranks));
    else if (!n.ranks.empty()) ranks = fmt::format(" (ranks {} arrived before it failed)", compress_ranks(n.ranks));
    lines.push_back(fmt::format("node {} is unreachable ({}){}", n.host, n.reason, ranks));
    placed.insert(placed.end(), n.missing_ranks.begin(), n.missing_ranks.end());
  }
  std::vector<int> unplaced;
  for (int rank : r.ranks_missing)
    if (std::find(placed.begin(), placed.end(), rank) == placed.end()) unplaced.push_back(rank);
  if (!unplaced.empty())
    lines.push_back(fmt::format("ranks {} of {} sent no flight recorder from any node", compress_ranks(unplaced), r.world_size));
  for (const auto& p : r.problems) lines.push_back("gather: " + p);
  return lines;
}

}  // namespace rankscope::hang
