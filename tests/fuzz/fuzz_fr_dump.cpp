// fuzz_fr_dump.cpp — libFuzzer target: one PyTorch Flight Recorder dump (importers/torch_fr) read by
// both pickle paths.
//
// Is: parse_fr_dump() on the input with the one-pass flat reader (which hands what it does not
// expect to the generic unpickler) and with the generic unpickler alone, as hangdoctor reads
// comm_lib_trace_rank_N (pickle) or a JSON dump ('{'). Both must come back, ok or with an error, and
// agree on whether the dump was readable. Is not: the job-level import (fuzz_fr_import.cpp).
#include <cstddef>
#include <cstdint>
#include <span>

#include "rankscope/torch_fr/fr_dump.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using rankscope::torch_fr::PickleReader;
  std::span<const uint8_t> bytes(data, size);
  auto fast = rankscope::torch_fr::parse_fr_dump(bytes, "fuzz", PickleReader::kFast);
  auto generic = rankscope::torch_fr::parse_fr_dump(bytes, "fuzz", PickleReader::kGeneric);
  if (!fast.ok()) (void)fast.status().user_text();
  if (!generic.ok()) (void)generic.status().user_text();
  // fr_dump.h promises the same dump from both readers (fr_flat_reader_test checks it on fixtures).
  if (fast.ok() != generic.ok()) __builtin_trap();
  if (fast.ok() && fast.value().entries.size() != generic.value().entries.size()) __builtin_trap();
  return 0;
}
