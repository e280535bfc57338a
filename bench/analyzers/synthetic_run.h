// synthetic_run.h — what the benchmarks that write their own run directory share: run.json, one
// event-stream writer per rank with the same header (self_usage.h: this process's CPU and peak RSS).
// Is not: what they write into the streams (each bench's own shape).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "rankscope/format/rank_event_stream.h"
#include "rankscope/format/run_metadata.h"
#include "self_usage.h"

namespace rankscope::bench {

inline constexpr int64_t kSyntheticStartNs = 1'700'000'000'000'000'000;

// run.json of a synthetic run of `ranks` ranks, written by `program`.
inline bool write_synthetic_metadata(const std::filesystem::path& dir, int ranks, const std::string& program) {
  format::RunMetadata meta;
  meta.run_id = program;
  meta.created_ns = kSyntheticStartNs;
  meta.program = program;
  meta.world_size = ranks;
  return format::write_run_metadata(dir, meta).ok();
}

// The event stream of `rank`; null when it cannot be created.
inline std::unique_ptr<format::EventStreamWriter> open_synthetic_stream(const std::filesystem::path& dir, int rank, int ranks,
                                                                        const std::string& program) {
  auto w = format::create_rank_event_stream(dir, rank, ranks, kSyntheticStartNs, program);
  return w.ok() ? std::move(*w) : nullptr;
}

}  // namespace rankscope::bench
