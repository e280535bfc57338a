// skew_cli_test.cpp — `rankscope skew`, `rankscope scaling` and `rankscope export` as a user meets
// them: --help, exit codes, clear errors on bad input (never a crash), and the files they write.
// Runs the real binary from the build tree.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "rankscope/analyzers/scaling/sweep.h"
#include "skew_fake_run.h"

namespace {

namespace fs = std::filesystem;
using rankscope::testing::fresh_temp_dir;

struct Outcome {
  int code = -1;
  std::string output;  // stdout and stderr
};

Outcome rankscope_cli(const std::string& args) {
  const std::string cmd = std::string(RANKSCOPE_BINARY_DIR) + "/bin/rankscope " + args + " 2>&1";
  Outcome o;
  std::FILE* p = popen(cmd.c_str(), "r");
  if (!p) return o;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) o.output.append(buf, n);
  const int status = pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return o;
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path delayed_run() {
  rankscope::testing::FakeRunSpec spec;
  spec.world_size = 2;
  spec.tp = 2;
  spec.steps = 6;
  spec.script = rankscope::testing::standard_step(1, [](int r, int64_t) { return r == 1 ? 18.0 : 0.0; });
  const fs::path dir = fresh_temp_dir("cli-run");
  rankscope::testing::write_fake_run(dir, spec);
  return dir;
}

TEST(RankscopeCli, HelpAndBadInput) {
  for (const char* cmd : {"skew", "scaling", "export"}) {
    const Outcome help = rankscope_cli(std::string(cmd) + " --help");
    EXPECT_EQ(help.code, 0) << cmd;
    EXPECT_NE(help.output.find(std::string("usage: rankscope ") + cmd), std::string::npos) << help.output;
    const Outcome none = rankscope_cli(cmd);
    EXPECT_EQ(none.code, 2) << cmd << ": " << none.output;
    const std::string extra = std::string(cmd) == "export" ? " --chrome " + fresh_temp_dir("cli").string() + "/x.json" : "";
    const Outcome missing = rankscope_cli(std::string(cmd) + " /nonexistent/run" + extra);
    EXPECT_EQ(missing.code, 2) << cmd;
    EXPECT_NE(missing.output.find("/nonexistent/run"), std::string::npos) << missing.output;
    const Outcome unknown = rankscope_cli(std::string(cmd) + " --frobnicate");
    EXPECT_EQ(unknown.code, 2);
    EXPECT_NE(unknown.output.find("unknown option '--frobnicate'"), std::string::npos) << unknown.output;
  }
  const fs::path run = delayed_run();
  const Outcome steps = rankscope_cli("skew " + run.string() + " --steps 9-3");
  EXPECT_EQ(steps.code, 2);
  EXPECT_NE(steps.output.find("bad step window '9-3'"), std::string::npos) << steps.output;
  const Outcome no_file = rankscope_cli("skew " + run.string() + " --json");
  EXPECT_EQ(no_file.code, 2);
  EXPECT_NE(no_file.output.find("--json needs a file name"), std::string::npos) << no_file.output;
  const Outcome no_chrome = rankscope_cli("export " + run.string());
  EXPECT_EQ(no_chrome.code, 2);
  EXPECT_NE(no_chrome.output.find("--chrome FILE"), std::string::npos) << no_chrome.output;
  const Outcome bad_out = rankscope_cli("skew " + run.string() + " --json /nonexistent/dir/x.json");
  EXPECT_EQ(bad_out.code, 2);
  EXPECT_NE(bad_out.output.find("/nonexistent/dir/x.json"), std::string::npos) << bad_out.output;
}

TEST(RankscopeCli, SkewWritesTextJsonAndHtml) {
  const fs::path run = delayed_run();
  const fs::path out = fresh_temp_dir("cli-out");
  const Outcome o = rankscope_cli("skew " + run.string() + " --json " + (out / "skew.json").string() + " --html " +
                                  (out / "skew.html").string());
  ASSERT_EQ(o.code, 0) << o.output;
  EXPECT_NE(o.output.find("late_arrival: rank 1 arrives last at tp0 allreduce after forward/block0/mlp"),
            std::string::npos) << o.output;
  const auto j = nlohmann::json::parse(read(out / "skew.json"));
  EXPECT_EQ(j["kind"], "rankscope.skew");
  EXPECT_EQ(j["findings"][0]["ranks"], nlohmann::json::array({1}));
  EXPECT_NE(read(out / "skew.html").find("id=\"rankscope-data\""), std::string::npos);
  // --json - puts the JSON alone on stdout.
  const std::string cmd = std::string(RANKSCOPE_BINARY_DIR) + "/bin/rankscope skew " + run.string() + " --json - 2>/dev/null";
  std::FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  EXPECT_EQ(pclose(p), 0);
  EXPECT_EQ(nlohmann::json::parse(text)["schema_version"], 3);
}

// stdout alone (stderr dropped) of a command of the build tree, and its exit code.
Outcome stdout_of(const std::string& binary, const std::string& args) {
  const std::string cmd = std::string(RANKSCOPE_BINARY_DIR) + "/bin/" + binary + " " + args + " 2>/dev/null";
  Outcome o;
  std::FILE* p = popen(cmd.c_str(), "r");
  if (!p) return o;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) o.output.append(buf, n);
  const int status = pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return o;
}

fs::path two_point_sweep() {
  const fs::path sweep = fresh_temp_dir("cli-sweep");
  std::vector<rankscope::analyzers::SweepPoint> points;
  for (int64_t T : {64, 128}) {
    rankscope::testing::FakeRunSpec spec;
    spec.world_size = 1;
    spec.tp = 1;
    spec.steps = 3;
    spec.script = rankscope::testing::standard_step(1, nullptr);
    spec.training = {{"seq_len", T}, {"batch", 2}};
    rankscope::testing::write_fake_run(sweep / rankscope::analyzers::sweep_point_dir_name(T), spec);
    points.push_back({T, sweep / rankscope::analyzers::sweep_point_dir_name(T)});
  }
  EXPECT_TRUE(rankscope::analyzers::write_sweep_index(sweep, points).ok());
  return sweep;
}

// `--json -` is for pipes (| jq): stdout must carry the JSON and nothing else.
TEST(RankscopeCli, JsonOnStdoutIsJsonOnly) {
  const fs::path run = delayed_run();
  const fs::path synth = fresh_temp_dir("cli-synth") / "run";
  ASSERT_EQ(rankscope_cli("synth --ranks 4 --tp 2 --steps 5 --fault stall:rank=1,step=3 -o " + synth.string()).code, 0);
  struct Case {
    std::string binary, args;
  };
  for (const Case& c : {Case{"rankscope", "skew " + run.string() + " --json -"},
                        Case{"rankscope", "scaling " + two_point_sweep().string() + " --json -"},
                        Case{"rankscope", "inspect " + synth.string() + " --json"},
                        Case{"hangdoctor", synth.string() + " --json -"},
                        Case{"hangdoctor", synth.string() + " --json - --quiet"}}) {
    const Outcome o = stdout_of(c.binary, c.args);
    EXPECT_LE(o.code, 1) << c.binary << " " << c.args;
    const auto j = nlohmann::json::parse(o.output, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << c.binary << " " << c.args << " printed more than JSON:\n" << o.output.substr(0, 400);
  }
  // --quiet: no text anywhere, stderr included.
  const Outcome quiet = rankscope_cli("skew " + run.string() + " --json " + (fresh_temp_dir("cli-q") / "s.json").string() + " --quiet");
  EXPECT_EQ(quiet.code, 0);
  EXPECT_EQ(quiet.output, "");
}

TEST(RankscopeCli, ExportAndScaling) {
  const fs::path run = delayed_run();
  const fs::path out = fresh_temp_dir("cli-export");
  const Outcome e = rankscope_cli("export " + run.string() + " --chrome " + (out / "trace.json").string() + " --steps 1-2");
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_NE(e.output.find("2 ranks"), std::string::npos) << e.output;
  const auto trace = nlohmann::json::parse(read(out / "trace.json"));
  EXPECT_FALSE(trace["traceEvents"].empty());
  EXPECT_FALSE(fs::exists(out / "trace.json.tmp"));

  // A two-point sweep of the same fake run is enough to exercise the command end to end.
  const fs::path sweep = two_point_sweep();
  const Outcome s = rankscope_cli("scaling " + sweep.string() + " --json " + (out / "scaling.json").string());
  ASSERT_EQ(s.code, 0) << s.output;
  EXPECT_EQ(nlohmann::json::parse(read(out / "scaling.json"))["points"].size(), 2u);
  const Outcome empty = rankscope_cli("scaling " + fresh_temp_dir("cli-empty").string());
  EXPECT_EQ(empty.code, 2);
  EXPECT_NE(empty.output.find("no sweep points"), std::string::npos) << empty.output;
}

// The one-H100 d12 run of the shared data folder (skipped when absent): the text report gives the
// GPU's breakdown of the traced steps, names the range with the most kernel time first and says how
// much ran in kernels launched outside every range (cuBLASLt's, in that run).
TEST(RankscopeCli, SkewOfARealGpuRunGivesGpuTimeByRange) {
  const fs::path run = fs::path(RANKSCOPE_REAL_GPU_DATA) / "d12-flash";
  if (!fs::exists(run / "rank00000.events")) GTEST_SKIP() << "real GPU data not found at " << run.string();
  const Outcome o = stdout_of("rankscope", "skew " + run.string());
  ASSERT_EQ(o.code, 0) << o.output;
  const std::string& text = o.output;
  EXPECT_NE(text.find("GPU time per step (device timeline: kernel records of steps 5-6, 1 rank)"), std::string::npos) << text;
  const size_t by_range = text.find("GPU time by range");
  ASSERT_NE(by_range, std::string::npos) << text;
  const size_t first = text.find('\n', by_range) + 1;
  EXPECT_NE(text.substr(first, text.find('\n', first) - first).find("backward/block*/attn/sdpa"), std::string::npos) << text;
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(outside any range: 1[45]\.[0-9]+ ms)"))) << text;
}

}  // namespace
