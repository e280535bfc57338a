// log_fuzz_findings_test.cpp — inputs the whole-command fuzzer of hangdoctor on logs found
// (tests/fuzz/fuzz_hangdoctor_logs.cpp), kept byte for byte in tests/fuzz/regressions/inputs/: each
// is run as the target runs it (a folder of logs, --json -) and must give a verdict with its JSON.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "log_test_support.h"

namespace rankscope::logs {
namespace {

namespace fs = std::filesystem;

// A Gloo timeout line whose path holds bytes that are not UTF-8 (0x87): the joined verdict's JSON
// was dumped with nlohmann's throwing dump(), so the text report came out and then the command failed
// (type_error 316, exit 2 "could not be analysed"). Now each such byte is U+FFFD in the JSON.
TEST(LogFuzzFindings, ATimeoutLineWithBytesThatAreNotUtf8GivesItsJson) {
  const fs::path input = fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fuzz/regressions/inputs/hangdoctor_logs_gloo_timeout_invalid_utf8.log";
  std::ifstream in(input, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(bytes.empty()) << input;
  const fs::path dir = fs::temp_directory_path() / ("rankscope-log-finding-utf8-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  testing::write_file(dir / "node0.log", bytes);
  const auto cli = testing::hangdoctor({dir.string(), "--json", "-"});
  EXPECT_EQ(cli.code, 1) << cli.err;
  EXPECT_EQ(cli.err.find("internal error"), std::string::npos) << cli.err;
  const auto report = nlohmann::json::parse(cli.out, nullptr, false);
  ASSERT_TRUE(report.is_object()) << cli.out;
  EXPECT_EQ(report["verdict"], "hang");
  EXPECT_NE(cli.out.find("\xEF\xBF\xBD"), std::string::npos);  // U+FFFD where the bytes were
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rankscope::logs
