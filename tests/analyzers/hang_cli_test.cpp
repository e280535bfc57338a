// hang_cli_test.cpp — hangdoctor's command line: exit codes, bad input with clear messages, the
// JSON file; and the two real binaries (hangdoctor, rankscope synth) end to end.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hang_test_support.h"
#include "rankscope/cli/hangdoctor_app.h"
#include "rankscope/format/run_directory_layout.h"

namespace rankscope::analyzers::hang {
namespace {

using testing::FakeProcessTable;
using testing::make_run;
using testing::scratch;

struct Outcome {
  int code = -1;
  std::string out, err;
};

// `after_text_report`: cli::HangdoctorEnv's hook (a test throws from it).
Outcome hangdoctor(std::vector<std::string> argv, std::function<void()> after_text_report = {}) {
  char* out_buf = nullptr;
  char* err_buf = nullptr;
  size_t out_len = 0, err_len = 0;
  std::FILE* out = open_memstream(&out_buf, &out_len);
  std::FILE* err = open_memstream(&err_buf, &err_len);
  FakeProcessTable procs;
  cli::HangdoctorEnv env{&procs, nullptr, out, err};
  env.after_text_report = std::move(after_text_report);
  std::vector<std::string_view> args(argv.begin(), argv.end());
  Outcome o;
  o.code = cli::run_hangdoctor(args, env);
  std::fclose(out);
  std::fclose(err);
  o.out.assign(out_buf, out_len);
  o.err.assign(err_buf, err_len);
  std::free(out_buf);
  std::free(err_buf);
  return o;
}

TEST(HangCli, UsageErrorsExitTwo) {
  EXPECT_EQ(hangdoctor({}).code, 2);
  auto help = hangdoctor({"--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("usage: hangdoctor PATH"), std::string::npos);
  auto bad = hangdoctor({"somewhere", "--frobnicate"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("unknown option"), std::string::npos) << bad.err;
  auto wait = hangdoctor({"somewhere", "--wait", "soon"});
  EXPECT_EQ(wait.code, 2);
  EXPECT_NE(wait.err.find("--wait needs a number of seconds"), std::string::npos) << wait.err;
}

TEST(HangCli, MissingEmptyAndNonRunDirectoriesExitTwoWithAHint) {
  const auto base = scratch("cli");
  auto missing = hangdoctor({(base / "nope").string()});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("nope"), std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find("hint"), std::string::npos) << missing.err;

  std::filesystem::create_directories(base / "empty");
  auto empty = hangdoctor({(base / "empty").string()});
  EXPECT_EQ(empty.code, 2);
  EXPECT_FALSE(empty.err.empty());
  EXPECT_TRUE(empty.out.empty());

  std::filesystem::create_directories(base / "notes");
  std::ofstream(base / "notes" / "readme.txt") << "not a run\n";
  auto notes = hangdoctor({(base / "notes").string()});
  EXPECT_EQ(notes.code, 2);
  EXPECT_NE(notes.err.find("hangdoctor: "), std::string::npos);

  std::ofstream(base / "file.txt") << "x";
  EXPECT_EQ(hangdoctor({(base / "file.txt").string()}).code, 2);
}

TEST(HangCli, NothingReadableExitsTwoAndNamesTheProblem) {
  auto run = make_run(scratch("cli"), 2, 3, 1);
  for (int r = 0; r < 2; ++r) std::ofstream(format::flight_recorder_path(run.dir, r), std::ios::trunc) << "garbage";
  auto o = hangdoctor({run.dir.string()});
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("nothing can be said"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("rank00001.flight"), std::string::npos) << o.err;
}

TEST(HangCli, ExitCodesAndJsonFile) {
  auto healthy = make_run(scratch("ok"), 2, 3, 2);
  EXPECT_EQ(hangdoctor({healthy.dir.string()}).code, 0);

  auto stuck = make_run(scratch("stuck"), 4, 5, 2, "stall:rank=2,range=forward/block0/mlp,step=2");
  std::filesystem::remove(format::flight_recorder_path(stuck.dir, 1));
  const auto json_file = stuck.dir / "diagnosis.json";
  auto o = hangdoctor({stuck.dir.string(), "--json", json_file.string()});
  EXPECT_EQ(o.code, 1);
  EXPECT_EQ(o.out.rfind("HANG: rank 2 never entered allreduce #", 0), 0u) << o.out;
  EXPECT_NE(o.out.find("missing: "), std::string::npos) << o.out;  // rank 1 reported, rest diagnosed
  std::ifstream in(json_file);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("schema_version"), 2);
  EXPECT_EQ(j.at("verdict"), "hang");
  EXPECT_EQ(j.at("culprit_ranks"), nlohmann::json::array({2}));
  EXPECT_EQ(j.at("ranks")[1].at("state"), "missing");

  auto to_stdout = hangdoctor({stuck.dir.string(), "--json", "-"});
  EXPECT_NE(to_stdout.out.find("\"schema_version\": 2"), std::string::npos);
}

// --html writes one self-contained page holding the diagnosis, beside or instead of the JSON; a page
// that cannot be written is exit 2 and one line naming it.
TEST(HangCli, HtmlPageHoldsTheDiagnosisAndAnUnwritableOneExitsTwo) {
  auto stuck = make_run(scratch("html"), 4, 5, 2, "stall:rank=2,range=forward/block0/mlp,step=2");
  const auto page = stuck.dir / "diagnosis.html";
  auto o = hangdoctor({stuck.dir.string(), "--html", page.string(), "--json", "-", "-q"});
  EXPECT_EQ(o.code, 1);
  EXPECT_EQ(nlohmann::json::parse(o.out).at("culprit_ranks"), nlohmann::json::array({2}));  // --json - still alone
  std::ifstream in(page);
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("<title>hangdoctor: HANG, rank 2</title>"), std::string::npos) << html.substr(0, 400);
  EXPECT_NE(html.find("\"kind\":\"rankscope.hang\""), std::string::npos);
  EXPECT_NE(html.find("\"culprit_ranks\":[2]"), std::string::npos);
  EXPECT_EQ(html.find("<script src="), std::string::npos);  // nothing fetched

  auto bad = hangdoctor({stuck.dir.string(), "--html", (stuck.dir / "no-such-dir" / "x.html").string()});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("no-such-dir/x.html: cannot write"), std::string::npos) << bad.err;
  EXPECT_EQ(bad.err.find(".cpp"), std::string::npos) << bad.err;
}

// A process table that fails inside the analysis (the classifier asks it about every rank): the
// command's exception boundary, not an abort.
class ThrowingProcessTable final : public ProcessTable {
 public:
  Liveness liveness(const std::string&, int) override { throw std::out_of_range("map::at"); }
  std::string local_host() override { return "fakehost"; }
};

TEST(HangCli, AThrowInsideTheAnalysisIsExitTwoAndOneLineNamingTheInput) {
  auto stuck = make_run(scratch("throws"), 4, 5, 2, "stall:rank=2,range=forward/block0/mlp,step=2");
  char* out_buf = nullptr;
  char* err_buf = nullptr;
  size_t out_len = 0, err_len = 0;
  std::FILE* out = open_memstream(&out_buf, &out_len);
  std::FILE* err = open_memstream(&err_buf, &err_len);
  ThrowingProcessTable procs;
  cli::HangdoctorEnv env{&procs, nullptr, out, err};
  const std::string dir = stuck.dir.string();
  const std::vector<std::string_view> args = {"--json", "-", dir};
  const int code = cli::run_hangdoctor(args, env);
  std::fclose(out);
  std::fclose(err);
  const std::string err_text(err_buf, err_len);
  std::free(out_buf);
  std::free(err_buf);
  EXPECT_EQ(code, 2);
  EXPECT_EQ(err_text, "hangdoctor: " + dir + ": could not be analysed: a number or a name in it lies outside what "
                      "the analysis handles (an internal error; please report it with the input)\n");
  EXPECT_EQ(err_text.find("map::at"), std::string::npos);
}

// A throw after the text report was written (the JSON's rendering is next): the verdict already
// printed stays, whole, ahead of the boundary's one line; no JSON file is left half written.
TEST(HangCli, AThrowAfterTheTextReportKeepsTheReportThenExitsTwo) {
  auto stuck = make_run(scratch("throws-late"), 4, 5, 2, "stall:rank=2,range=forward/block0/mlp,step=2");
  const auto json_file = stuck.dir / "diagnosis.json";
  const std::string dir = stuck.dir.string();
  auto thrown = hangdoctor({dir, "--json", json_file.string()}, [] { throw std::length_error("vector::reserve"); });
  EXPECT_EQ(thrown.code, 2);
  // The same report a run without the throw prints, to its last line.
  auto unthrown = hangdoctor({dir});
  EXPECT_EQ(unthrown.code, 1);
  EXPECT_EQ(thrown.out, unthrown.out);
  EXPECT_EQ(thrown.out.rfind("HANG: rank 2 never entered allreduce #", 0), 0u) << thrown.out;
  EXPECT_EQ(thrown.err, "hangdoctor: " + dir + ": could not be analysed: it asked for more memory than there is "
                        "(an internal error; please report it with the input)\n");
  EXPECT_FALSE(std::filesystem::exists(json_file));
}

int run_binary(const std::string& command) {
  const int status = std::system((command + " > /dev/null 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(HangCli, RealBinariesSynthThenDiagnose) {
  const std::string bin = std::string(RANKSCOPE_BINARY_DIR) + "/bin/";
  const auto dir = scratch("bin");
  EXPECT_EQ(run_binary(bin + "rankscope synth --ranks 4 --steps 6 --tp 2 --fault crash:rank=2 -o " + (dir / "run").string()), 0);
  EXPECT_EQ(run_binary(bin + "hangdoctor " + (dir / "run").string() + " --json " + (dir / "d.json").string()), 1);
  std::ifstream in(dir / "d.json");
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("verdict"), "crash");
  EXPECT_EQ(j.at("kind"), "rank_dead");
  EXPECT_EQ(j.at("culprit_ranks"), nlohmann::json::array({2}));
  EXPECT_EQ(run_binary(bin + "rankscope synth --ranks 4 --steps 6 --fault explode -o " + (dir / "x").string()), 2);
  EXPECT_EQ(run_binary(bin + "rankscope synth --ranks 4 -o " + (dir / "y").string()), 2);
  EXPECT_EQ(run_binary(bin + "hangdoctor " + (dir / "nothing").string()), 2);
}

}  // namespace
}  // namespace rankscope::analyzers::hang
