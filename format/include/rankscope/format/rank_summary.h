// rank_summary.h — what the verdict needs of a rank, small enough to send 131,072 of them to one head.
//
// Is: the reduction of a flight recorder snapshot to the evidence the hang classifier reads (the
// rank's identity and heartbeat, its step, phase and open ranges, per communicator its issued and
// completed counts, its open collectives and the last few completed ones, the gradients still
// missing, the learned bounds of what it is inside, the watchdog's last event), and a compact codec
// for a node's summaries (docs/FORMAT.md "Rank summaries"): one string table, then each rank as
// varints with times relative to its heartbeat. A node sends these instead of whole recorders (a
// recorder is 65 kB-0.7 MB, a summary a few hundred bytes); the head decodes them into ordinary
// snapshots, so no analyzer learns which it was given. A recorder holding evidence a summary does
// not carry (the NCCL plugin's section, all_to_all_v per-peer counts) is not summarized: it travels
// whole. The decoder trusts nothing: every count is checked against the bytes left, every enum and
// string index against its range. Is not: where summaries travel (gather/) or what they mean.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/status.h"

namespace rankscope::format {

inline constexpr char kRankSummaryMagic[8] = {'R', 'S', 'R', 'A', 'N', 'K', 'S', '\n'};
inline constexpr uint32_t kRankSummaryVersion = 1;
// The entry a node's snapshot stream carries its summaries in, and where a gathered run keeps each
// node's: DIR/summaries/<host>.ranks.
inline constexpr std::string_view kRankSummaryEntry = "summaries.ranks";
inline constexpr std::string_view kRankSummaryDir = "summaries";
inline constexpr std::string_view kRankSummarySuffix = ".ranks";

struct SummaryOptions {
  int completed_per_comm = 4;  // completed (or failed) records kept per communicator, newest
};

// Empty when a summary carries all the evidence `s` holds for a verdict; else why it must travel whole.
std::string why_not_summarized(const FlightRecorderSnapshot& s);

// `s` reduced to what a summary carries (what decode gives back for it).
FlightRecorderSnapshot summarize(const FlightRecorderSnapshot& s, const SummaryOptions& options = {});

// One node's summaries, as one self-delimiting block of bytes (blocks concatenate). Each add()
// reduces its snapshot (summarize) first.
class RankSummaryWriter {
 public:
  explicit RankSummaryWriter(SummaryOptions options = {}) : options_(options) {}
  void add(const FlightRecorderSnapshot& s);
  size_t ranks() const { return ranks_; }
  std::vector<uint8_t> finish();

 private:
  uint32_t string_index(std::string_view s);
  SummaryOptions options_;
  std::vector<std::string> strings_;
  std::unordered_map<std::string, uint32_t> index_;
  std::vector<uint8_t> body_;
  size_t ranks_ = 0;
};

// Decodes one block of summaries (a node's) or several laid end to end (a gathered run's
// summaries.ranks); `source` names them in messages ("node n3"). Names, call sites and range names
// land in the name pool (name_pool.h), as the flight recorder reader's do.
Result<std::vector<FlightRecorderSnapshot>> decode_rank_summaries(std::span<const uint8_t> bytes, std::string_view source);

}  // namespace rankscope::format
