// unpickler.h — reads a plain-data Python pickle (protocols 2 to 5) into a pickle::Value, bounded.
//
// Is: the opcodes that None, bools, ints (BININT*, LONG1, LONG4), floats, strings (BINUNICODE*,
// SHORT_BINUNICODE, BINBYTES* read as text), lists, tuples and dicts need, both memo forms
// (BINPUT/LONG_BINPUT and MEMOIZE), FRAME, and torch.jit's build_intlist/doublelist/boollist
// globals (the only GLOBAL/REDUCE accepted: the list argument is returned). Bounded: nesting depth,
// memo size and input size have limits, every length is checked against the bytes left, memo
// references share (never copy) what they refer to, containers cannot be made to contain themselves.
// Is not: a Python object loader. Any other global, REDUCE, BUILD, NEWOBJ, persistent id or
// out-of-band buffer is refused: a data file never executes anything.
//
// Truncated input (no STOP: PyTorch writes dumps with a plain non-atomic write) is salvaged when a
// container was open: every open container gets the complete values pushed into it so far and is
// flagged partial(); the result says truncated. Anything else malformed is a kCorrupt error naming
// the byte offset and the opcode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

#include "rankscope/format/status.h"
#include "rankscope/pickle/value.h"

namespace rankscope::pickle {

struct UnpickleLimits {
  int max_depth = 64;                      // nesting of containers
  size_t max_memo_entries = 16u << 20;     // PyTorch memoizes every distinct string: 1e5 is normal
  size_t max_input_bytes = size_t(1) << 30;
  // A walk of the result visits a shared value once per reference: without this cap a file of a few
  // hundred bytes could describe a tree of 2^64 values (each list holding the previous one twice).
  uint64_t max_tree_size = uint64_t(1) << 26;
};

struct Unpickled {
  Value root;
  int protocol = 0;        // from PROTO; 0 when the stream had none
  bool truncated = false;  // the input ended before STOP; root is what could be salvaged
};

Result<Unpickled> unpickle(std::span<const uint8_t> bytes, const UnpickleLimits& limits = {});

// Reads the file and unpickles it; errors are prefixed with the file name.
Result<Unpickled> unpickle_file(const std::filesystem::path& path, const UnpickleLimits& limits = {});

}  // namespace rankscope::pickle
