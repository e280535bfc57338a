// fr_import_test.cpp — PyTorch Flight Recorder dumps (checked-in fixtures written by our writer)
// through the importer and the unchanged hang classifier: each scenario names the right culprit,
// group, op and sequence number, or gives the right clear error.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "fr_fixture_set.h"
#include "fr_hangdoctor_run.h"
#include "rankscope/analyzers/hang/classifier.h"
#include "rankscope/analyzers/hang/report.h"
#include "rankscope/cli/hangdoctor_app.h"
#include "rankscope/torch_fr/fr_dump.h"
#include "rankscope/torch_fr/fr_import.h"

namespace rankscope::torch_fr {
namespace {

namespace fs = std::filesystem;

fs::path fixtures() { return fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/torch_fr"; }

class NoProcesses final : public analyzers::hang::ProcessTable {
 public:
  analyzers::hang::Liveness liveness(const std::string&, int) override { return analyzers::hang::Liveness::kUnknown; }
  std::string local_host() override { return "elsewhere"; }
};

analyzers::hang::Diagnosis diagnose_dumps(const fs::path& path, FrImport* out = nullptr) {
  auto imp = import_fr_dumps(path);
  EXPECT_TRUE(imp.ok()) << imp.status().to_string();
  if (!imp.ok()) return {};
  NoProcesses processes;
  analyzers::hang::ClassifyOptions o;
  o.no_progress_observed = true;  // a dump is written because a collective timed out
  analyzers::hang::Diagnosis d = analyzers::hang::diagnose(imp->run, processes, o);
  if (out) *out = std::move(*imp);
  return d;
}

TEST(FrFixtures, WriterStillReproducesTheCheckedInBytes) {
  for (const auto& [rel, bytes] : testing::fixture_set()) {
    std::ifstream in(fixtures() / rel, std::ios::binary);
    ASSERT_TRUE(in) << rel << " missing: run make_fr_fixtures tests/fixtures/torch_fr";
    std::vector<uint8_t> disk{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    EXPECT_EQ(disk, bytes) << rel;
  }
}

TEST(FrFixtures, PickleStartsAsPyTorchWritesIt) {
  std::ifstream in(fixtures() / "tp2dp2_lagging/comm_lib_trace_rank_0", std::ios::binary);
  std::vector<uint8_t> b{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const std::string head = "\x80\x02}(X\x07\x00\x00\x00versionq\x00X\x04\x00\x00\x00" "2.10q\x01";
  ASSERT_GE(b.size(), head.size());
  EXPECT_EQ(std::string(b.begin(), b.begin() + long(head.size())), head);
}

void expect_tp_lagging(const fs::path& dir, const std::string& version) {
  FrImport imp;
  const auto d = diagnose_dumps(dir, &imp);
  EXPECT_EQ(imp.version, version);
  EXPECT_EQ(d.verdict, analyzers::hang::Verdict::kHang) << analyzers::hang::render_text(d);
  EXPECT_EQ(d.kind, analyzers::hang::Kind::kLaggingRank) << analyzers::hang::render_text(d);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{3}) << analyzers::hang::render_text(d);
  ASSERT_TRUE(d.collective.has_value()) << analyzers::hang::render_text(d);
  EXPECT_EQ(d.collective->comm, "tp1");
  EXPECT_EQ(d.collective->seq, 6u);
  EXPECT_EQ(d.collective->op, format::CollectiveOp::kAllReduceSum);
  EXPECT_EQ(d.collective->range, "forward (train.py:40)");
}

TEST(FrImport, TpDpLaggingRankV210) {
  expect_tp_lagging(fixtures() / "tp2dp2_lagging", "2.10");
  FrImport imp;
  diagnose_dumps(fixtures() / "tp2dp2_lagging", &imp);
  EXPECT_NE(imp.summary.find("format 2.10, backend nccl, 4 ranks (0-3), missing none"), std::string::npos) << imp.summary;
  EXPECT_NE(imp.summary.find("timing off"), std::string::npos) << imp.summary;
}
TEST(FrImport, TpDpLaggingRankV23) { expect_tp_lagging(fixtures() / "tp2dp2_lagging_v2.3", "2.3"); }
TEST(FrImport, TpDpLaggingRankV27) { expect_tp_lagging(fixtures() / "tp2dp2_lagging_v2.7", "2.7"); }
TEST(FrImport, TpDpLaggingRankJson) {
  FrImport imp;
  const auto d = diagnose_dumps(fixtures() / "tp2dp2_lagging_json", &imp);
  EXPECT_EQ(d.kind, analyzers::hang::Kind::kLaggingRank) << analyzers::hang::render_text(d);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{3});
  ASSERT_TRUE(d.collective.has_value());
  EXPECT_EQ(d.collective->comm, "tp1");
  EXPECT_EQ(d.collective->seq, 6u);
}

// A dump whose group names rank 16777216 asked for 11.8 GB; now a clear error.
TEST(FrImport, AGroupNamingAnImpossibleRankIsAClearError) {
  const fs::path dir = fs::temp_directory_path() / ("rs_fr_huge_rank_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (int r : {0, 1}) {
    std::ifstream in(fixtures() / "tp2dp2_lagging_json" / ("comm_lib_trace_rank_" + std::to_string(r)));
    nlohmann::json d = nlohmann::json::parse(in);
    if (r == 1) d["pg_config"]["tp_0"]["ranks"] = "[0, 16777216]";
    std::ofstream(dir / ("comm_lib_trace_rank_" + std::to_string(r))) << d.dump();
  }
  auto imp = import_fr_dumps(dir);
  ASSERT_FALSE(imp.ok());
  EXPECT_NE(imp.status().message().find("names rank 16777216"), std::string::npos) << imp.status().message();
  fs::remove_all(dir);
}

TEST(FrImport, FilePrefixTakesTheRankSuffixes) {
  FrImport imp;
  const auto d = diagnose_dumps(fixtures() / "tp2dp2_lagging/comm_lib_trace_rank_", &imp);
  EXPECT_EQ(imp.found, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{3});
}

TEST(FrImport, CulpritDumpMissingIsInferredFromPeers) {
  FrImport imp;
  const auto d = diagnose_dumps(fixtures() / "tp2dp2_culprit_dump_missing", &imp);
  EXPECT_EQ(imp.missing, std::vector<int>{3});
  EXPECT_NE(imp.summary.find("missing 1 rank (3) (what a missing rank did is inferred from its peers' dumps)"),
            std::string::npos) << imp.summary;
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{3}) << analyzers::hang::render_text(d);
  ASSERT_TRUE(d.collective.has_value()) << analyzers::hang::render_text(d);
  EXPECT_EQ(d.collective->comm, "tp1");
  EXPECT_EQ(d.collective->seq, 6u);
}

// A healthy Gloo job dumped between a barrier's return and its worker retiring the entry: rank 1
// shows the final barrier open while ranks 0, 2 and 3 retired it. A collective completes on every
// member or none: healthy, and the entry read as completed is named.
TEST(FrImport, GlooEntryStillOpenWhereEveryPeerRetiredItIsALateRetirementNotAHang) {
  const auto r = testing::hangdoctor_json((fixtures() / "gloo_late_retirement").string());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.report.at("verdict"), "healthy") << r.report.at("headline");
  const std::string problems = r.report.at("problems").dump();
  EXPECT_NE(problems.find("rank 1's gloo:barrier #11 on default_pg (group 0) was still open in its dump while every other "
                          "member had retired it"), std::string::npos) << problems;
}

TEST(FrImport, GroupsCreatedInDifferentOrdersAlignByName) {
  const auto d = diagnose_dumps(fixtures() / "pg_order_differs");
  EXPECT_EQ(d.kind, analyzers::hang::Kind::kLaggingRank) << analyzers::hang::render_text(d);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{1}) << analyzers::hang::render_text(d);
  ASSERT_TRUE(d.collective.has_value());
  EXPECT_EQ(d.collective->comm, "tp0");
  EXPECT_EQ(d.collective->seq, 4u);
}

TEST(FrImport, SizeMismatchByMajority) {
  const auto d = diagnose_dumps(fixtures() / "size_mismatch");
  EXPECT_EQ(d.verdict, analyzers::hang::Verdict::kDesync) << analyzers::hang::render_text(d);
  EXPECT_EQ(d.kind, analyzers::hang::Kind::kCollectiveMismatch) << analyzers::hang::render_text(d);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{2}) << analyzers::hang::render_text(d);
  ASSERT_TRUE(d.collective.has_value());
  EXPECT_EQ(d.collective->comm, "default_pg");
  EXPECT_EQ(d.collective->seq, 4u);
}

TEST(FrImport, AllEnqueuedNoneCompletedIsStuckInCollectiveAndSaysTimingWasOff) {
  FrImport imp;
  const auto d = diagnose_dumps(fixtures() / "all_stuck", &imp);
  EXPECT_EQ(d.kind, analyzers::hang::Kind::kStuckInCollective) << analyzers::hang::render_text(d);
  EXPECT_TRUE(d.culprit_ranks.empty()) << analyzers::hang::render_text(d);
  ASSERT_TRUE(d.collective.has_value());
  EXPECT_EQ(d.collective->seq, 4u);
  EXPECT_FALSE(imp.timing);
  EXPECT_NE(imp.summary.find("'running' and 'never started' look the same"), std::string::npos) << imp.summary;
}

TEST(FrImport, P2pHangNamesTheReceiverThatNeverPosted) {
  const auto d = diagnose_dumps(fixtures() / "p2p_hang");
  EXPECT_EQ(d.kind, analyzers::hang::Kind::kLaggingRank) << analyzers::hang::render_text(d);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{1}) << analyzers::hang::render_text(d);
  ASSERT_TRUE(d.collective.has_value());
  EXPECT_EQ(d.collective->comm, "default_pg p2p 0-1");
  EXPECT_EQ(d.collective->op, format::CollectiveOp::kSend);
}

TEST(FrImport, TruncatedDumpsAreReadAsFarAsTheyGoOrReported) {
  FrImport imp;
  const auto d = diagnose_dumps(fixtures() / "truncated", &imp);
  EXPECT_EQ(imp.partial, std::vector<int>{3}) << imp.summary;
  EXPECT_EQ(imp.missing, std::vector<int>{1}) << imp.summary;
  EXPECT_NE(imp.summary.find("ended early 1 rank (3)"), std::string::npos) << imp.summary;
  bool said = false;
  for (const auto& p : imp.run.problems) said |= p.find("comm_lib_trace_rank_1: pickle: truncated") != std::string::npos;
  EXPECT_TRUE(said) << "rank 1's error names its file and says truncated";
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{3}) << analyzers::hang::render_text(d);
}

TEST(FrImport, HangdoctorOnAPrefixSaysWhatItReadThenTheVerdict) {
  const std::string prefix = (fixtures() / "tp2dp2_lagging/comm_lib_trace_rank_").string();
  std::vector<std::string_view> args = {prefix};
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  rankscope::cli::HangdoctorEnv env;
  env.out = out;
  env.err = err;
  EXPECT_EQ(rankscope::cli::run_hangdoctor(args, env), 1);
  std::rewind(out);
  char line[4096] = {0};
  ASSERT_TRUE(std::fgets(line, sizeof line, out));
  EXPECT_NE(std::string(line).find("read PyTorch Flight Recorder dumps"), std::string::npos) << line;
  EXPECT_NE(std::string(line).find("4 ranks (0-3), missing none"), std::string::npos) << line;
  ASSERT_TRUE(std::fgets(line, sizeof line, out));
  EXPECT_EQ(std::string(line).rfind("HANG: rank 3 never entered allreduce #6 on tp1", 0), 0u) << line;
  std::fclose(out);
  std::fclose(err);
}

TEST(FrImport, MixedVersionsAreRefused) {
  auto r = import_fr_dumps(fixtures() / "mixed_versions");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("mixed Flight Recorder versions"), std::string::npos) << r.status().message();
}

TEST(FrDump, RankListStrings) {
  EXPECT_EQ(parse_rank_list("[0, 1, 2, 3]"), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(parse_rank_list("[3,1]"), (std::vector<int>{1, 3}));
  EXPECT_EQ(parse_rank_list("[]"), std::vector<int>{});
  EXPECT_FALSE(parse_rank_list("[0, x]").has_value());
  EXPECT_FALSE(parse_rank_list("[0, 1").has_value());
  // What std::from_chars<int> and the 0..2^24 bound took before the digits were read by hand.
  EXPECT_EQ(parse_rank_list("[007, -0,16777216]"), (std::vector<int>{0, 7, 16777216}));
  EXPECT_EQ(parse_rank_list("1 2]"), (std::vector<int>{1, 2}));
  for (const char* bad : {"[-1]", "[16777217]", "[99999999999999999999]", "[+1]", "[-]", "[1x]", "", "[", "1 2"})
    EXPECT_FALSE(parse_rank_list(bad).has_value()) << bad;
}

// A job's dumps list the same groups: one list a distinct text, shared, and never two texts confused,
// even long ones that differ only where the pool's hash does not look.
TEST(FrDump, RankListPoolSharesEqualTextsOnly) {
  RankListPool pool;
  std::string world = "[";
  for (int r = 0; r < 4096; ++r) world += (r ? ", " : "") + std::to_string(r);
  world += "]";
  std::string other = world;
  const size_t middle = other.find(", 2049,");
  ASSERT_NE(middle, std::string::npos);
  other.replace(middle, 7, ", 2050,");  // same length; not sorted any more, so read sorted
  const auto a = pool.get(world), b = pool.get(std::string(world)), c = pool.get(other);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(&a->vec(), &b->vec()) << "equal texts: one list";
  EXPECT_NE(&a->vec(), &c->vec());
  EXPECT_EQ(a->size(), 4096u);
  EXPECT_EQ((*a)[2049], 2049);
  EXPECT_EQ(c->vec(), *parse_rank_list(other));
  EXPECT_EQ(std::count(c->begin(), c->end(), 2050), 2);
  EXPECT_FALSE(pool.get("[0, x]").has_value());
  EXPECT_TRUE(pool.get("[]").has_value() && pool.get("[]")->empty());
}

}  // namespace
}  // namespace rankscope::torch_fr
