// tokenizer_bench.cpp — GPT-2 encode throughput in MB/s on one core, over tinyshakespeare.
//
// cold: a fresh word cache for every pass (what `gpt2-tokenize encode` sees on a new corpus);
// warm: the cache already holds the corpus's words (pre-tokenizer + one hash lookup per word);
// decode: for reference. Best of N passes; the thread is pinned to one CPU where it can be.
// Usage: tokenizer_bench [TEXT_FILE] [PASSES]   (default: the shipped corpus, 5 passes)
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/gpt2_tokenizer.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : gpt2::default_data_dir() + "/tinyshakespeare/tinyshakespeare.txt";
  const int passes = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &one);
  const bool pinned = sched_setaffinity(0, sizeof one, &one) == 0;

  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "tokenizer_bench: cannot open %s\n", path.c_str());
    return 2;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string text = std::move(ss).str();

  const auto t_load = std::chrono::steady_clock::now();
  auto tok = gpt2::Gpt2Tokenizer::load_dir(gpt2::default_vocab_dir());
  if (!tok.ok()) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", tok.status().to_string().c_str());
    return 2;
  }
  const double load_s = seconds_since(t_load);

  const double mb = double(text.size()) / 1e6;
  std::vector<gpt2::TokenId> ids;
  double cold = 1e30, warm = 1e30, dec = 1e30;
  for (int p = 0; p < passes; ++p) {
    tok->clear_cache();
    ids.clear();
    auto t0 = std::chrono::steady_clock::now();
    tok->encode_append(text, ids);
    cold = std::min(cold, seconds_since(t0));
  }
  for (int p = 0; p < passes; ++p) {
    ids.clear();
    auto t0 = std::chrono::steady_clock::now();
    tok->encode_append(text, ids);
    warm = std::min(warm, seconds_since(t0));
  }
  for (int p = 0; p < passes; ++p) {
    auto t0 = std::chrono::steady_clock::now();
    auto back = tok->decode(ids);
    dec = std::min(dec, seconds_since(t0));
    if (!back.ok() || *back != text) {
      std::fprintf(stderr, "tokenizer_bench: decode(encode(text)) != text\n");
      return 1;
    }
  }
  std::printf("tokenizer_bench: %s, %zu bytes -> %zu tokens, %d passes, %s\n", path.c_str(), text.size(),
              ids.size(), passes, pinned ? "pinned to one CPU" : "not pinned");
  std::printf("  load vocabulary      %8.3f s\n", load_s);
  std::printf("  encode, cold cache   %8.1f MB/s  (%.3f s, %zu words cached after)\n", mb / cold, cold,
              tok->cache_size());
  std::printf("  encode, warm cache   %8.1f MB/s  (%.3f s)\n", mb / warm, warm);
  std::printf("  decode               %8.1f MB/s  (%.3f s)\n", mb / dec, dec);
  std::printf("  budget: encode >= 10 MB/s on one core\n");
  return 0;
}
