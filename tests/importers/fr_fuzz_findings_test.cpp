// fr_fuzz_findings_test.cpp — the inputs a fuzzer of the whole hangdoctor command found
// (tests/fixtures/torch_fr/fuzz-findings, README there): each made it abort or overflow. Each is
// unpacked into a folder of dumps and analysed in-process: a verdict with a sentence, never an abort,
// and no number in the report that wrapped around.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <fstream>
#include <iterator>

#include "fr_hangdoctor_run.h"

namespace rankscope::torch_fr {
namespace {

namespace fs = std::filesystem;
using testing::hangdoctor_json;

fs::path findings() { return fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/torch_fr/fuzz-findings"; }

// The packed file's parts as comm_lib_trace_rank_<i> in a fresh folder (the fuzz harness's split).
fs::path unpack(const std::string& name) {
  std::ifstream in(findings() / name, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_FALSE(bytes.empty()) << name;
  const fs::path dir = fs::temp_directory_path() / ("rankscope_fuzz_finding_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string sep = "\n--rankscope-fuzz-file--\n";
  size_t at = 0;
  for (int i = 0;; ++i) {
    const size_t next = i < 7 ? bytes.find(sep, at) : std::string::npos;
    std::ofstream(dir / ("comm_lib_trace_rank_" + std::to_string(i)), std::ios::binary)
        << bytes.substr(at, next == std::string::npos ? std::string::npos : next - at);
    if (next == std::string::npos) break;
    at = next + sep.size();
  }
  return dir;
}

// A verdict, worded, whose times are real durations (finite, not negative, not a wrapped 64-bit
// difference of hundreds of years).
void expect_sound_verdict(const testing::HangdoctorRun& r, const std::string& name) {
  ASSERT_EQ(r.code, 1) << name << ": " << r.err;
  ASSERT_TRUE(r.report.is_object()) << name;
  EXPECT_FALSE(r.report["headline"].get<std::string>().empty()) << name;
  for (const auto& rank : r.report["ranks"])
    for (const char* key : {"waited_s", "idle_s"})
      if (rank.contains(key) && rank[key].is_number()) {
        const double s = rank[key].get<double>();
        EXPECT_TRUE(std::isfinite(s) && s >= 0 && s < 1e10) << name << " rank " << rank["rank"] << " " << key << " " << s;
      }
}

TEST(FrFuzzFindings, DesyncWhoseCulpritsHaveNoValueIsWordedWithoutOne) {
  const fs::path dir = unpack("hang_word_mismatch_map_at_out_of_range");
  const auto r = hangdoctor_json(dir.string());
  expect_sound_verdict(r, "map_at");
  EXPECT_EQ(r.report["verdict"], "desync");
  // No culprit has a count of its own on the collective named, so no values are claimed; the
  // sentence says where each culprit waits instead.
  EXPECT_TRUE(r.report["mismatch"].is_null()) << r.report["mismatch"].dump();
  EXPECT_NE(r.report["headline"].get<std::string>().find("wait in different collectives"), std::string::npos)
      << r.report["headline"];
  fs::remove_all(dir);
}

TEST(FrFuzzFindings, SequenceNumbersFarApartAllocateNothingBySpan) {
  const fs::path dir = unpack("hang_find_mismatch_seq_span_alloc_too_big");
  expect_sound_verdict(hangdoctor_json(dir.string()), "seq_span");
  fs::remove_all(dir);
}

TEST(FrFuzzFindings, TimesNearTheEndsOfInt64GiveNoWrappedWait) {
  const fs::path dir = unpack("hang_fill_ranks_waited_ns_signed_overflow");
  const auto r = hangdoctor_json(dir.string());
  expect_sound_verdict(r, "fill_ranks");
  EXPECT_NE(r.report["headline"].get<std::string>().find("for an unknown time"), std::string::npos) << r.report["headline"];
  fs::remove_all(dir);
}

TEST(FrFuzzFindings, PgStatusAtInt64MaxSaturatesTheNextSeq) {
  const fs::path dir = unpack("import_next_seq_overflow");
  const auto r = hangdoctor_json(dir.string());
  expect_sound_verdict(r, "next_seq");
  // Issued = last enqueued + 1 held at INT64_MAX: the collective named is the one pg_status claims.
  EXPECT_EQ(r.report["collective"]["seq"].get<uint64_t>(), uint64_t(INT64_MAX));
  EXPECT_EQ(r.report["culprit_ranks"], nlohmann::json::array({1}));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rankscope::torch_fr
