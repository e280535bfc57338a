// tokenizer_bench.cpp — GPT-2 encode throughput in MB/s on one core, over tinyshakespeare.
//
// cold: a fresh word cache for every pass (what `gpt2-tokenize encode` sees on a new corpus);
// warm: the cache already holds the corpus's words (pre-tokenizer + one hash lookup per word);
// decode: for reference. Best of N passes; the thread is pinned to one CPU where it can be.
// Each rate is given twice: per wall-clock second, and per second of this thread's CPU time (the
// number to quote on a busy machine, where the wall clock also counts time spent descheduled).
// Usage: tokenizer_bench [TEXT_FILE] [PASSES]   (default: the shipped corpus, 5 passes)
#include <sched.h>

#include <algorithm>
#include <utility>
#include <chrono>
#include <ctime>
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

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Best (shortest) wall and CPU time of `passes` runs of f.
template <class F>
std::pair<double, double> best_of(int passes, F&& f) {
  double wall = 1e30, cpu = 1e30;
  for (int p = 0; p < passes; ++p) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = thread_cpu_seconds();
    f();
    cpu = std::min(cpu, thread_cpu_seconds() - c0);
    wall = std::min(wall, seconds_since(t0));
  }
  return {wall, cpu};
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
  const auto cold = best_of(passes, [&] {
    tok->clear_cache();
    ids.clear();
    tok->encode_append(text, ids);
  });
  const auto warm = best_of(passes, [&] {
    ids.clear();
    tok->encode_append(text, ids);
  });
  bool same = true;
  const auto dec = best_of(passes, [&] {
    auto back = tok->decode(ids);
    same = same && back.ok() && *back == text;
  });
  if (!same) {
    std::fprintf(stderr, "tokenizer_bench: decode(encode(text)) != text\n");
    return 1;
  }
  std::printf("tokenizer_bench: %s, %zu bytes -> %zu tokens, %d passes, %s\n", path.c_str(), text.size(),
              ids.size(), passes, pinned ? "pinned to one CPU" : "not pinned");
  std::printf("  load vocabulary      %8.3f s\n", load_s);
  auto line = [&](const char* what, std::pair<double, double> t) {
    std::printf("  %-20s %8.1f MB/s  (%.3f s wall)   %8.1f MB/s per CPU-second (%.3f s)\n", what, mb / t.first,
                t.first, mb / t.second, t.second);
  };
  line("encode, cold cache", cold);
  line("encode, warm cache", warm);
  line("decode", dec);
  std::printf("  words cached: %zu\n", tok->cache_size());
  std::printf("  budget: encode >= 10 MB/s on one core\n");
  return 0;
}
