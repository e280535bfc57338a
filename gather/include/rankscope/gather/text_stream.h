// text_stream.h — a node's snapshot stream as text lines, for the one srun that asks every node.
//
// Is: base64 (RFC 4648, 76 characters a line) of a binary stream, and the reverse over the output of
// `srun --label`, where every line a task writes arrives prefixed with its task id ("  3: ") and the
// tasks' lines interleave: a binary stream could be cut mid-line by srun's buffering and its bytes
// mistaken for labels, a line of base64 cannot. Is not: the stream's format (snapshot_stream.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rankscope::gather {

// `bytes` as base64 lines of 76 characters, each ended by '\n'.
std::string base64_lines(std::span<const uint8_t> bytes);

struct LabeledStreams {
  std::vector<std::vector<uint8_t>> by_task;  // decoded bytes, task i at [i] (empty: it sent nothing)
  std::vector<std::string> problems;          // lines that are no labeled base64, tasks out of range
};

// Splits `srun --label` output into `tasks` streams and decodes each task's base64. A task whose
// text does not decode (a cut-off line, a foreign line) keeps the bytes before it: the stream
// decoder then says it is truncated.
LabeledStreams split_labeled_base64(std::string_view out, size_t tasks);

}  // namespace rankscope::gather
