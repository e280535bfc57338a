// fuzz_rank_summaries.cpp — libFuzzer target: the rank summary decoder (format/src/rank_summary.cpp),
// what `rankscope gather` reads of every rank from every node.
//
// Is: decode_rank_summaries() on the input; what decodes is encoded again (RankSummaryWriter) and
// must decode again to as many ranks, and the decoder never yields more ranks than the input could
// hold (a rank takes 29 bytes at least). Is not: the snapshot stream around it (fuzz_snapshot_stream).
#include <cstddef>
#include <cstdint>
#include <span>

#include "rankscope/format/rank_summary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace format = rankscope::format;
  auto decoded = format::decode_rank_summaries(std::span<const uint8_t>(data, size), "fuzz");
  if (!decoded.ok()) {
    (void)decoded.status().user_text();
    return 0;
  }
  if (decoded->size() > size / 29) __builtin_trap();
  format::RankSummaryWriter writer;
  for (const auto& s : *decoded) writer.add(s);
  const auto again = format::decode_rank_summaries(writer.finish(), "fuzz again");
  if (!again.ok() || again->size() != decoded->size()) __builtin_trap();
  return 0;
}
