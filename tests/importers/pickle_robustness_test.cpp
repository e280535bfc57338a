// pickle_robustness_test.cpp — the pickle reader on random bytes, on a real-shaped dump truncated at
// every offset and with bytes scrambled: it returns a value or a clear error, never crashes, hangs
// or allocates without bound (this suite runs under ASan+UBSan in the sanitizer configuration).
#include <gtest/gtest.h>

#include <random>

#include "rankscope/pickle/unpickler.h"
#include "torch_style_pickler.h"

namespace rankscope::pickle {
namespace {

using namespace testing;  // NOLINT

std::vector<uint8_t> dump_bytes() {
  Value frame = dict({{"name", str("step")}, {"filename", str("train.py")}, {"line", num(9)}});
  Value entries = Value::container(Kind::kList);
  for (int i = 0; i < 6; ++i) {
    list_push(entries, dict({{"frames", list({frame})},
                             {"record_id", num(i)},
                             {"process_group", tuple({str("1"), str("tp0")})},
                             {"collective_seq_id", num(i + 1)},
                             {"profiling_name", str("nccl:all_reduce")},
                             {"time_created_ns", num(1732400000000000000 + i)},
                             {"duration_ms", Value::floating(0.5)},
                             {"input_sizes", list({list({num(1024), num(768)})})},
                             {"state", str(i < 5 ? "completed" : "scheduled")},
                             {"time_discovered_started_ns", Value()},
                             {"retired", Value::boolean(i < 5)},
                             {"timeout_ms", num(600000)}}));
  }
  return TorchStylePickler().write(dict({{"version", str("2.10")},
                                         {"pg_config", dict({{"1", dict({{"ranks", str("[0, 1]")}})}})},
                                         {"entries", entries}}));
}

void expect_value_or_clear_error(const Result<Unpickled>& r) {
  if (r.ok()) return;  // random bytes can spell a valid pickle ("N." is None)
  EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(r.status().message().rfind("pickle: ", 0), 0u) << r.status().message();
}

TEST(PickleRobustness, GoodDumpReads) {
  auto r = unpickle(dump_bytes());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->root.find("entries")->items().size(), 6u);
}

TEST(PickleRobustness, TruncatedAtEveryOffset) {
  const auto bytes = dump_bytes();
  size_t salvaged = 0;
  for (size_t len = 0; len < bytes.size(); ++len) {
    auto r = unpickle(std::span<const uint8_t>(bytes.data(), len));
    expect_value_or_clear_error(r);
    if (r.ok()) {
      EXPECT_TRUE(r->truncated) << len;
      ++salvaged;
    }
  }
  EXPECT_GT(salvaged, bytes.size() / 2) << "most cuts leave a readable partial dump";
}

TEST(PickleRobustness, ScrambledBytes) {
  const auto good = dump_bytes();
  std::mt19937_64 rng(13);
  for (int trial = 0; trial < 3000; ++trial) {
    auto b = good;
    const int flips = 1 + int(rng() % 8);
    for (int f = 0; f < flips; ++f) b[rng() % b.size()] = uint8_t(rng());
    expect_value_or_clear_error(unpickle(b));
  }
}

TEST(PickleRobustness, RandomBytes) {
  std::mt19937_64 rng(1313);
  const std::string alphabet = "(.0G1JKMNRXBCaehjq]rstu})\x80\x85\x86\x87\x88\x89\x8a\x8b\x8c\x8d\x8e\x93\x94\x95";
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<uint8_t> b(1 + rng() % 300);
    for (auto& x : b) x = (rng() % 2) ? uint8_t(alphabet[rng() % alphabet.size()]) : uint8_t(rng());
    if (rng() % 2) b.insert(b.begin(), {0x80, 0x02});
    expect_value_or_clear_error(unpickle(b));
  }
}

}  // namespace
}  // namespace rankscope::pickle
