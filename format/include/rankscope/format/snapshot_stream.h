// snapshot_stream.h — the node snapshot stream: one node's share of a run directory, as bytes.
//
// Is: the encoder and the bounded decoder of the stream `rankscope snapshot` writes to stdout and
// `rankscope gather` reads back from every node (docs/FORMAT.md "Snapshot stream"): an 8-byte magic,
// a version, then one zlib stream of named entries (relative paths, each with its size up front)
// closed by an end record that counts them. The decoder trusts nothing: names are checked (no
// absolute path, no "..", a small alphabet), sizes are checked against limits before a byte is
// inflated, and a stream that stops early or lies about its end is an error that still keeps the
// entries that arrived whole. Is not: what goes into a snapshot (gather/) or where it is
// unpacked.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/format/status.h"

namespace rankscope::format {

inline constexpr char kSnapshotMagic[8] = {'R', 'S', 'S', 'N', 'A', 'P', '\r', '\n'};
inline constexpr uint32_t kSnapshotVersion = 1;
// The first entry of every stream: what the node is and the state of its ranks' processes (JSON).
inline constexpr std::string_view kSnapshotManifest = "snapshot.json";

// Where a decoder stops believing the sender. Deflate expands at most about 1032:1, so a bomb is
// a stream whose entries claim (or inflate to) more than these: every size is checked before its
// bytes are inflated, and the running total as they arrive. The defaults hold a node of 4096
// ranks (a recorder is about 0.7 MB uncompressed) with room to spare.
struct SnapshotLimits {
  uint64_t max_entry_bytes = 64ull << 20;     // one file, as declared before it is inflated
  uint64_t max_total_bytes = 4ull << 30;      // all files of one stream, inflated
  uint64_t max_entries = 1u << 20;
};

// Writes a stream to `out` entry by entry (one file's bytes in memory at a time).
class SnapshotWriter {
 public:
  explicit SnapshotWriter(std::FILE* out);
  ~SnapshotWriter();
  SnapshotWriter(const SnapshotWriter&) = delete;
  SnapshotWriter& operator=(const SnapshotWriter&) = delete;

  // `name` must pass check_snapshot_entry_name; an error leaves the stream unusable.
  Status add(std::string_view name, std::span<const uint8_t> bytes);
  Status add(std::string_view name, std::string_view text);
  // The end record, then flush. A stream without it reads as truncated.
  Status finish();
  uint64_t bytes_in() const { return bytes_in_; }    // entry payloads, uncompressed
  uint64_t bytes_out() const { return bytes_out_; }  // what went to `out`

 private:
  Status deflate_bytes(std::span<const uint8_t> bytes, bool final);
  struct Zlib;
  std::unique_ptr<Zlib> z_;
  std::FILE* out_;
  uint64_t entries_ = 0, bytes_in_ = 0, bytes_out_ = 0;
  bool failed_ = false, finished_ = false;
};

// Ok when `name` is a relative path of 1..4 components over [A-Za-z0-9._+@=,-], none "." or "..",
// at most 255 bytes: nothing a decoder writes can leave the directory it unpacks into.
Status check_snapshot_entry_name(std::string_view name);

struct SnapshotDecodeResult {
  Status status;                    // ok only for a whole stream: magic, version, end record, counts
  uint32_t version = 0;
  uint64_t entries = 0;             // entries handed to the visitor (whole ones only)
  uint64_t bytes = 0;               // their payload bytes
  std::vector<std::string> names;   // in stream order
};

// Called once per whole entry; an error from it stops the decoding and becomes the result's status.
using SnapshotVisitor = std::function<Status(std::string_view name, std::span<const uint8_t> bytes)>;

// Decodes `stream` (the whole stream as received); `source` names it in messages ("node n3").
SnapshotDecodeResult decode_snapshot(std::span<const uint8_t> stream, std::string_view source,
                                     const SnapshotVisitor& visitor, const SnapshotLimits& limits = {});

// One entry written to dir/name (its folders created; holes where the bytes are zero), refusing a
// name that would replace a directory or a link an earlier entry made.
Status write_snapshot_entry(const std::filesystem::path& dir, std::string_view name, std::span<const uint8_t> bytes);

// decode_snapshot into `dir` (created): each entry written to dir/name. Entries that arrived whole
// stay written when the stream fails later.
SnapshotDecodeResult unpack_snapshot(std::span<const uint8_t> stream, std::string_view source,
                                     const std::filesystem::path& dir, const SnapshotLimits& limits = {});

}  // namespace rankscope::format
