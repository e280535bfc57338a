// fuzz_fr_import.cpp — libFuzzer target: a job's PyTorch Flight Recorder dumps, imported and exported
// as a Chrome trace (importers/torch_fr: discovery, groups, pg_status, p2p pairing, dump times).
//
// Is: the input cut at kFileSeparator into up to four dumps, written as comm_lib_trace_rank_0..3 in
// a scratch directory, then import_fr_dumps() on it and, when it reads, write_fr_chrome_trace() (the
// path `rankscope export --chrome` takes; the non-UTF-8 names crashed it). Is not: a check of
// the verdict (tests/importers).
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <span>
#include <streambuf>
#include <string>

#include "fuzz_support.h"
#include "rankscope/torch_fr/fr_chrome.h"
#include "rankscope/torch_fr/fr_import.h"

namespace {

// Counts what the exporter writes without keeping it.
class CountingBuffer : public std::streambuf {
 public:
  uint64_t bytes = 0;

 protected:
  int_type overflow(int_type c) override {
    if (c != traits_type::eof()) ++bytes;
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char*, std::streamsize n) override {
    bytes += static_cast<uint64_t>(n);
    return n;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = rankscope::fuzz;
  const auto dir = fuzz::scratch().fresh_subdir("fr");
  const auto parts = fuzz::split_files(std::span<const uint8_t>(data, size), 4);
  for (size_t i = 0; i < parts.size(); ++i) {
    fuzz::write_bytes(dir / ("comm_lib_trace_rank_" + std::to_string(i)), parts[i]);
  }
  auto imported = rankscope::torch_fr::import_fr_dumps(dir);
  if (!imported.ok()) {
    (void)imported.status().user_text();
    return 0;
  }
  CountingBuffer sink;
  std::ostream out(&sink);
  auto exported = rankscope::torch_fr::write_fr_chrome_trace(imported.value(), out);
  if (!exported.ok()) (void)exported.status().user_text();
  return 0;
}
