// html_report_test.cpp — the self-contained HTML report: rendered from real skew and scaling
// reports of fabricated runs, then opened in headless Chromium (Debian `chromium`), which must
// draw charts with data and log no script error; a screenshot is saved next to the test binary.
// Without chromium the browser tests skip and say so.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "rankscope/analyzers/critical_path/critical_path.h"
#include "rankscope/analyzers/device_timeline/kernels_analyzer.h"
#include "rankscope/analyzers/device_timeline/kernels_json.h"
#include "rankscope/analyzers/diff/run_diff.h"
#include "rankscope/analyzers/scaling/scaling_analyzer.h"
#include "rankscope/analyzers/scaling/scaling_json.h"
#include "rankscope/analyzers/scaling/sweep.h"
#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "rankscope/analyzers/skew/skew_json.h"
#include "rankscope/analyzers/startup/startup_json.h"
#include "rankscope/cli/hangdoctor_app.h"
#include "rankscope/kineto/kineto_import.h"
#include "rankscope/reports/html_report.h"
#include "skew_fake_run.h"
#include "skew_gpu_fake_run.h"

namespace rankscope {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A TP 2 skew run of world_size ranks, rank 1 slow in its compute; with many ranks it also records
// a per-rank peak memory counter in bytes (the report must show it in MiB or GiB).
nlohmann::json skew_json(int world_size = 4) {
  testing::FakeRunSpec spec;
  spec.world_size = world_size;
  spec.tp = 2;
  spec.steps = 12;
  spec.script = testing::standard_step(2, [](int r, int64_t) { return r == 1 ? 18.0 : 0.0; });
  spec.counters = [world_size](int r, int64_t) {
    std::vector<std::pair<std::string, double>> c{{"embed.local_tokens", r % 2 == 0 ? 3900.0 : 196.0}};
    if (world_size > 4) c.push_back({"mem.peak_bytes", 1.5e9 + 1e6 * r});
    return c;
  };
  spec.model = {{"vocab_shard", "contiguous"}};
  const fs::path dir = testing::fresh_temp_dir("html-skew");
  testing::write_fake_run(dir, spec);
  auto report = analyzers::analyze_skew(dir);
  EXPECT_TRUE(report.ok()) << report.status().to_string();
  return analyzers::to_json(*report);
}

nlohmann::json scaling_json() {
  const fs::path sweep = testing::fresh_temp_dir("html-scaling");
  std::vector<analyzers::SweepPoint> points;
  for (int64_t T : {128, 256, 512, 1024}) {
    testing::FakeRunSpec spec;
    spec.world_size = 1;
    spec.tp = 1;
    spec.steps = 3;
    const double Td = double(T);
    spec.script = testing::standard_step(2, nullptr, [Td](int, int64_t) { return 0.1 + 1e-5 * Td * Td; },
                                         [Td](int, int64_t) { return 0.003 * Td; });
    spec.training = {{"seq_len", T}, {"batch", 4}};
    spec.model = {{"layers", 2}, {"channels", 128}, {"vocab_size", 50257}};
    const fs::path dir = sweep / analyzers::sweep_point_dir_name(T);
    testing::write_fake_run(dir, spec);
    points.push_back({T, dir});
  }
  EXPECT_TRUE(analyzers::write_sweep_index(sweep, points).ok());
  auto report = analyzers::analyze_scaling(sweep);
  EXPECT_TRUE(report.ok()) << report.status().to_string();
  return analyzers::to_json(*report);
}

TEST(HtmlReport, IsOneSelfContainedFile) {
  nlohmann::json data = skew_json();
  data["run_dir"] = "/runs/</script><script>alert(1)</script>";
  auto html = reports::render_html_report(data, "skew <of> run");
  ASSERT_TRUE(html.ok()) << html.status().to_string();
  const std::string& h = *html;
  EXPECT_NE(h.find("Chart.js v"), std::string::npos);            // Chart.js inlined
  EXPECT_EQ(h.find("<script src"), std::string::npos);           // nothing fetched
  EXPECT_EQ(h.find("<link"), std::string::npos);
  EXPECT_EQ(h.find("alert(1)</script>"), std::string::npos);     // data cannot close its block
  EXPECT_NE(h.find("<title>skew &lt;of&gt; run</title>"), std::string::npos);
  EXPECT_EQ(h.find("@@"), std::string::npos);                    // every marker filled
  // The data block parses back to the report.
  const std::string open = "<script type=\"application/json\" id=\"rankscope-data\">";
  const size_t a = h.find(open) + open.size();
  const size_t b = h.find("</script>", a);
  const nlohmann::json back = nlohmann::json::parse(h.substr(a, b - a));
  EXPECT_EQ(back, data);

  EXPECT_FALSE(reports::render_html_report({{"kind", "other"}}, "x").ok());
  EXPECT_FALSE(reports::render_html_report(nlohmann::json::array(), "x").ok());
}

struct BrowserRun {
  std::string dom, log;
};

// Empty when no chromium is installed.
std::string chromium_path() {
  if (const char* env = std::getenv("RANKSCOPE_CHROMIUM")) return env;
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (fs::exists(p)) return p;
  }
  return {};
}

BrowserRun open_in_chromium(const std::string& chromium, const fs::path& html, const fs::path& screenshot) {
  const fs::path work = testing::fresh_temp_dir("html-chromium");
  const std::string flags =
      " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking"
      " --disable-component-update --disable-sync --disable-dev-shm-usage --user-data-dir=" + (work / "profile").string() +
      " --enable-logging=stderr --v=0 --virtual-time-budget=5000 --window-size=1280,2800";
  const std::string url = " file://" + fs::absolute(html).string();
  const std::string dump = chromium + flags + " --dump-dom" + url + " > " + (work / "dom.html").string() + " 2> " +
                           (work / "dom.log").string();
  EXPECT_EQ(std::system(dump.c_str()), 0) << dump << "\n" << read_file(work / "dom.log");
  const std::string shot = "cd " + work.string() + " && " + chromium + flags + " --screenshot=" + screenshot.string() + url +
                           " > /dev/null 2> " + (work / "shot.log").string();
  EXPECT_EQ(std::system(shot.c_str()), 0) << shot;
  BrowserRun run{read_file(work / "dom.html"), read_file(work / "dom.log") + read_file(work / "shot.log")};
  fs::remove_all(work);
  return run;
}

int body_attr(const std::string& dom, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(dom, m, std::regex(name + "=\"(\\d+)\""))) return -1;
  return std::stoi(m[1]);
}

// Opens a written report in Chromium and checks the page drew without errors (at least `min_charts`
// charts and more than `min_points` points); the rendered DOM goes to *dom.
void check_page(const fs::path& file, const std::string& name, int min_charts, int min_points, std::string* dom) {
  const std::string chromium = chromium_path();
  const fs::path png = file.parent_path() / (name + ".png");
  fs::remove(png);
  const BrowserRun run = open_in_chromium(chromium, file, png);
  if (dom) *dom = run.dom;
  EXPECT_NE(run.dom.find("data-rankscope-rendered=\"yes\""), std::string::npos) << run.dom.substr(0, 2000);
  EXPECT_EQ(body_attr(run.dom, "data-rankscope-errors"), 0) << run.dom.substr(0, 2000);
  EXPECT_GE(body_attr(run.dom, "data-rankscope-charts"), min_charts);
  EXPECT_GT(body_attr(run.dom, "data-rankscope-points"), min_points);
  // Chromium prints page console messages as "...:CONSOLE(line)] ..."; uncaught errors say so.
  for (const char* bad : {"Uncaught", "ERROR:CONSOLE", "Failed to load resource"}) {
    EXPECT_EQ(run.log.find(bad), std::string::npos) << bad << " in chromium's log:\n" << run.log;
  }
  ASSERT_TRUE(fs::exists(png)) << "no screenshot; chromium log:\n" << run.log;
  EXPECT_GT(fs::file_size(png), 10000u);
  EXPECT_EQ(read_file(png).substr(1, 3), "PNG");
  std::printf("report %s, screenshot %s\n", file.c_str(), png.c_str());
}

fs::path report_dir() {
  const fs::path out_dir = fs::path(RANKSCOPE_BINARY_DIR) / "tests";
  fs::create_directories(out_dir);
  return out_dir;
}

// Renders, opens in Chromium, checks the page drew without errors; the rendered DOM goes to *dom.
void check_renders(const nlohmann::json& data, const std::string& name, int min_charts, std::string* dom = nullptr) {
  if (chromium_path().empty()) GTEST_SKIP() << "chromium not installed (apt-get install chromium); the browser check is skipped";
  auto html = reports::render_html_report(data, name);
  ASSERT_TRUE(html.ok()) << html.status().to_string();
  const fs::path file = report_dir() / (name + ".html");
  ASSERT_TRUE(reports::write_text_file(file.string(), *html).ok());
  check_page(file, name, min_charts, 10, dom);
}

TEST(HtmlReport, SkewRendersInChromium) {
  // breakdown, top-level ranges, heatmap, arrival skew, one counter chart
  check_renders(skew_json(), "html_report_skew", 5);
}

TEST(HtmlReport, SkewAt64RanksShowsDistributionsAndTopStragglers) {
  // 64 ranks: breakdown of the slowest ranks + median, step-time histogram, top-level ranges,
  // heatmap, arrival dots, two counter histograms
  const nlohmann::json data = skew_json(64);
  std::string dom;
  check_renders(data, "html_report_skew_64", 7, &dom);
  if (dom.empty()) return;  // skipped: no chromium
  EXPECT_NE(dom.find("the 8 slowest of 64 ranks"), std::string::npos);
  EXPECT_NE(dom.find("Compute time over 64 ranks"), std::string::npos);
  EXPECT_NE(dom.find("Counter mem.peak_bytes over 64 ranks"), std::string::npos);
  EXPECT_NE(dom.find("GiB"), std::string::npos);  // 1.5e9 bytes read as GiB
}

TEST(HtmlReport, SkewOfAGpuRunRendersInChromium) {
  // A run with kernel records: the breakdown is the device's and a chart gives GPU time by range,
  // with the kernels launched outside every range as their own bar.
  const fs::path dir = testing::fresh_temp_dir("html-skew-gpu");
  testing::write_gpu_fake_run(dir);
  auto report = analyzers::analyze_skew(dir);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  std::string dom;
  check_renders(analyzers::to_json(*report), "html_report_skew_gpu", 3, &dom);
  if (dom.empty()) return;  // skipped: no chromium
  EXPECT_NE(dom.find("GPU time by range"), std::string::npos);
  EXPECT_NE(dom.find("ms in kernels launched outside every range"), std::string::npos);
  EXPECT_NE(dom.find("GPU time of the traced steps"), std::string::npos);
}

// Skew's report of a Kineto import with HTA's analyses and the critical path beside it,
// as `rankscope skew` assembles it (tools/rankscope/skew_device_analyses.cpp): overlap and idle
// by cause per rank, the critical path by rank and what lies on it.
TEST(HtmlReport, SkewWithGpuAnalysesAndTheCriticalPathRendersInChromium) {
  const fs::path dir = testing::fresh_temp_dir("html-skew-analyses");
  auto imported = kineto::import_kineto({fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/kineto/critical-path"}, dir / "run");
  ASSERT_TRUE(imported.ok()) << imported.status().to_string();
  auto report = analyzers::analyze_skew(dir / "run");
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  nlohmann::json data = analyzers::to_json(*report);
  auto kernels = analyzers::analyze_kernels(dir / "run");
  ASSERT_TRUE(kernels.ok()) << kernels.status().to_string();
  data["kernels"] = analyzers::kernels_report_json(*kernels);
  auto path = analyzers::analyze_critical_path(dir / "run");
  ASSERT_TRUE(path.ok()) << path.status().to_string();
  data["critical_path"] = analyzers::critical_path_json(*path);
  data["critical_path"]["steps_analysed"] = data["critical_path"]["steps"].size();
  data["critical_path"].erase("steps");
  std::string dom;
  check_renders(data, "html_report_skew_analyses", 5, &dom);
  if (dom.empty()) return;  // skipped: no chromium
  EXPECT_NE(dom.find("Communication overlapped by compute"), std::string::npos);
  EXPECT_NE(dom.find("GPU idle by cause"), std::string::npos);
  EXPECT_NE(dom.find("Critical path by rank"), std::string::npos);
  EXPECT_NE(dom.find("rank 1 data"), std::string::npos);  // rank 1's slow loader is on the path
}

// A start-up report of 4 ranks, rank 1 late in init/data (what `rankscope startup` makes of it).
nlohmann::json startup_json() {
  analyzers::StartupReport r;
  r.run_dir = "runs/startup";
  r.world_size = 4;
  r.median_to_first_step_s = 5.0;
  for (int rank = 0; rank < 4; ++rank) {
    analyzers::RankStartup x;
    x.rank = rank;
    x.readable = true;
    const double data_ms = rank == 1 ? 3000 : 40;
    x.phases = {{"init/launch", 2400, 1}, {"init/comm", 300, 2}, {"init/device", 5, 1},
                {"init/clock_align", 20, 1}, {"init/model", 900, 1}, {"init/data", data_ms, 1}};
    x.launch_at_s = 0.01 * rank;
    x.to_first_step_s = 3.7 + data_ms / 1000;
    x.first_step_at_s = *x.launch_at_s + *x.to_first_step_s;
    x.slowest_phase = rank == 1 ? "init/data" : "init/launch";
    x.slowest_phase_ms = rank == 1 ? 3000 : 2400;
    r.ranks.push_back(x);
  }
  r.findings.push_back({"late_rank", 1, "init/data", "", 2960, "rank 1 reached step 1 3.0 s after the others: init/data took 3.0 s (others 0.0 s)"});
  return analyzers::startup_report_json(r);
}

TEST(HtmlReport, StartupRendersInChromium) {
  // phases per rank
  check_renders(startup_json(), "html_report_startup", 1);
}

// A diff report (what `rankscope diff` makes of a run whose backward got slower), as a DiffReport.
nlohmann::json diff_json() {
  analyzers::DiffReport r;
  r.base_dir = "runs/yesterday";
  r.new_dir = "runs/today";
  r.base_ranks = r.new_ranks = 8;
  r.base_steps = r.new_steps = 100;
  r.base_step_ms = 410;
  r.new_step_ms = 480;
  r.noise_ms = 8;
  r.significant = true;
  r.base_mean_ms = 412;
  r.new_mean_ms = 483;
  r.mean_delta_ms = 71;
  r.parts = {{"compute in backward", 200, 252.5, 52.5, "backward/block*/attn went from 60 ms to 112.5 ms a step (1.88x)"},
             {"collective wait", 10, 26, 16, "a new straggler: rank 5 (arrives late), costing 16 ms a step"},
             {"memcpy", 10, 12.5, 2.5, ""},
             {"compute in forward", 140, 140, 0, ""},
             {"collective transfer", 52, 52, 0, ""}};
  r.settings = {{"versions.nccl", "2.21.5", "2.23.4"}};
  r.ranks_by_rank = false;
  r.rank_match = "world sizes differ (4 -> 8): ranks matched by their place in the tp groups";
  r.roles = {{"tp rank 1", {1, 3}, {1, 3, 5, 7}, 412, 495, 83}, {"tp rank 0", {0, 2}, {0, 2, 4, 6}, 412, 471, 59}};
  r.unexplained_ms = 2.5;  // memcpy's change has no cause
  r.unexplained_parts = {"memcpy"};
  r.headline = "SLOWER: 410 ms a step in BASE, 480 ms in NEW (+17.1%); most of it is compute in backward";
  return analyzers::diff_report_json(r);
}

TEST(HtmlReport, DiffRendersInChromium) {
  // the waterfall, each part in both runs; the roles table
  std::string dom;
  check_renders(diff_json(), "html_report_diff", 2, &dom);
  if (dom.empty()) return;  // skipped: no browser
  EXPECT_NE(dom.find("Roles"), std::string::npos);
  EXPECT_NE(dom.find("tp rank 1"), std::string::npos);
  EXPECT_NE(dom.find("1,3,5,7"), std::string::npos);
  EXPECT_NE(dom.find("left unexplained: +2.50 ms of the +71.00 ms, in parts with no cause found (memcpy)"), std::string::npos);
}

TEST(HtmlReport, ScalingRendersInChromium) {
  // log-log time vs T, throughput
  check_renders(scaling_json(), "html_report_scaling", 2);
}

// hangdoctor --html on a real job's folder (dumps, log and stacks joined): the page says what each
// artifact said, the culprit's evidence on both sides, and where they disagree. It has no charts.
TEST(HtmlReport, HangdoctorsJoinedVerdictRendersInChromium) {
  if (chromium_path().empty()) GTEST_SKIP() << "chromium not installed (apt-get install chromium); the browser check is skipped";
  const fs::path file = report_dir() / "html_report_hang.html";
  fs::remove(file);
  const std::string run = (fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/torch-jobs/pipeline_sleep").string();
  const std::string out = file.string();
  const std::vector<std::string_view> args = {run, "--html", out, "--quiet"};
  rankscope::cli::HangdoctorEnv env;
  env.out = env.err = std::tmpfile();
  EXPECT_EQ(rankscope::cli::run_hangdoctor(args, env), 1);
  std::fclose(env.out);
  ASSERT_TRUE(fs::exists(file));
  std::string dom;
  check_page(file, "html_report_hang", 0, -1, &dom);
  for (const char* want : {"What each artifact said", "Evidence for rank 2", "The artifacts disagree: the log says a hang (rank 2)",
                           "stage_forward", "From the log", "Stacks: read the stacks of 4 ranks"})
    EXPECT_NE(dom.find(want), std::string::npos) << want;
}

}  // namespace
}  // namespace rankscope
