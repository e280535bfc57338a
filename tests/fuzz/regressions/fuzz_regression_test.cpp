// fuzz_regression_test.cpp — every input the libFuzzer campaigns (tests/fuzz/, docs/FUZZING.md) found
// a crash, leak, timeout or out-of-memory with, read by the normal build's reader.
//
// Is: one test per finding, reading its minimised input from tests/fuzz/regressions/inputs/ and
// asserting what the reader must say now (a clean error naming the problem, or a clean result).
// Is not: a fuzzer; the inputs are kept byte for byte as the campaign minimised them.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/logs/log_import.h"
#include "rankscope/torch_fr/fr_dump.h"

namespace {

std::vector<uint8_t> regression_input(const std::string& name) {
  const auto path = std::filesystem::path(RANKSCOPE_SOURCE_DIR) / "tests/fuzz/regressions/inputs" / name;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

// fuzz_fr_dump: a dump whose memo puts land a little past the memo's end, again and again. The flat
// reader doubled its memo's capacity on every such put (1.4 GB asked after a few dozen), so a 3 KB
// dump exhausted memory. Both readers must answer, and alike.
TEST(FuzzRegression, FrDumpMemoPutsPastTheEndDoNotDoubleTheMemo) {
  const auto bytes = regression_input("fr_dump_memo_put_doubling.pickle");
  ASSERT_EQ(bytes.size(), 3465u);
  auto fast = rankscope::torch_fr::parse_fr_dump(bytes, "dump", rankscope::torch_fr::PickleReader::kFast);
  auto generic = rankscope::torch_fr::parse_fr_dump(bytes, "dump", rankscope::torch_fr::PickleReader::kGeneric);
  EXPECT_EQ(fast.ok(), generic.ok());
  if (!fast.ok()) {
    EXPECT_NE(fast.status().user_text(), "");
  } else if (generic.ok()) {
    EXPECT_EQ(fast->entries.size(), generic->entries.size());
  }
}

// fuzz_logs: an NCCL RAS report whose count-mismatch groups all stand at the same operation (640 and
// 640). Nobody is behind, and the finding's text took the lowest count of an empty list: undefined
// behaviour (UBSan: reference binding to a null pointer). The report reads; no rank is called behind.
TEST(FuzzRegression, RasCountMismatchWithNobodyBehindNamesNoRank) {
  const auto bytes = regression_input("ras_count_mismatch_nobody_behind.txt");
  ASSERT_EQ(bytes.size(), 878u);
  auto imported = rankscope::logs::import_nccl_ras(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                                                   "report");
  ASSERT_TRUE(imported.ok()) << imported.status().user_text();
  for (const auto& finding : imported->findings) {
    EXPECT_EQ(finding.text.find("behind have not launched"), std::string::npos) << finding.text;
  }
}

// fuzz_nccl_ras: a JSON RAS report with a number past a double's range. nlohmann throws out_of_range
// for it, not the parse_error the reader caught, so hangdoctor --nccl-ras terminated. Now a clean
// error saying the report is corrupt.
TEST(FuzzRegression, RasJsonNumberPastADoubleIsACorruptReport) {
  const auto bytes = regression_input("ras_json_number_overflow.json");
  ASSERT_EQ(bytes.size(), 839u);
  auto imported = rankscope::logs::import_nccl_ras(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                                                   "report");
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.status().user_text().find("too large"), std::string::npos) << imported.status().user_text();
}
