// fuzz_snapshot_stream.cpp — libFuzzer target: the node snapshot stream decoder
// (format/src/snapshot_stream.cpp), what `rankscope gather` reads from every node over srun or ssh.
//
// Is: decode_snapshot() on the input with a visitor that reads each entry and checks the promise the
// decoder makes to unpack_snapshot: no entry whose name could leave the directory it unpacks into.
// Limits smaller than the defaults keep one input's memory within libFuzzer's RSS limit (a bomb is
// refused by the same checks, only sooner). Is not: the gather around it (tests/gather).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "rankscope/format/snapshot_stream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace format = rankscope::format;
  format::SnapshotLimits limits;
  limits.max_entry_bytes = 16u << 20;
  limits.max_total_bytes = 64u << 20;
  uint64_t touched = 0, entries = 0;
  auto result = format::decode_snapshot(
      std::span<const uint8_t>(data, size), "fuzz",
      [&](std::string_view name, std::span<const uint8_t> bytes) {
        if (!format::check_snapshot_entry_name(name).ok()) __builtin_trap();
        for (uint8_t b : bytes) touched += b;
        ++entries;
        return rankscope::Status::ok_status();
      },
      limits);
  // The result counts exactly the entries the visitor was handed.
  if (result.entries != entries || result.names.size() != entries) __builtin_trap();
  if (!result.status.ok()) (void)result.status.user_text();
  return static_cast<int>(touched & 0);
}
