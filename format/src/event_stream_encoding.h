// event_stream_encoding.h — the on-disk framing shared by the event stream writer and reader.
// Private to the format library; docs/FORMAT.md is the public description.
#pragma once

#include <cstdint>
#include <cstring>

namespace rankscope::format::events {

struct FileHeader {
  char magic[8];
  uint32_t schema_version;
  uint32_t header_bytes;  // 64
  int32_t rank;
  int32_t world_size;
  int64_t created_ns;
  char run_id[32];
};
static_assert(sizeof(FileHeader) == 64);

struct RecordHeader {
  uint32_t type;
  uint32_t payload_bytes;
};
static_assert(sizeof(RecordHeader) == 8);

inline constexpr uint32_t kMaxPayloadBytes = 1u << 30;

// Fixed prefix of array-carrying records.
struct StepPrefix {
  int64_t step;
  int64_t begin_ns;
  int64_t end_ns;
  uint32_t n_ranges;
  uint32_t n_collectives;
  uint32_t n_counters;
  uint32_t reserved;
};
static_assert(sizeof(StepPrefix) == 40);

struct ArrayPrefix {
  int64_t step;
  uint32_t count;
  uint32_t reserved;
};
static_assert(sizeof(ArrayPrefix) == 16);

struct NamePrefix {
  uint32_t id;
  uint8_t kind;
  uint8_t reserved[3];
};
static_assert(sizeof(NamePrefix) == 8);

}  // namespace rankscope::format::events
