// gather_real_gpu_test.cpp — run directories written on an H100 (shared/data/real-gpu beside the
// checkout: gpt2-train's probe recorder, and the NCCL profiler plugin's nccl/ recorders of a
// PyTorch job) travel through snapshot + gather unchanged: the gathered run reads as the original
// and hangdoctor says the same. Skips where that folder is absent (CI); the synthetic tests in
// gather_test.cpp carry the same facts on recorders written by the format library.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gather_test_support.h"
#include "rankscope/cli/hangdoctor_app.h"
#include "rankscope/format/run_directory.h"
#include "rankscope/gather/gather.h"

namespace rankscope::gather {
namespace {

namespace fs = std::filesystem;
using testing::rankscope_binary;
using testing::scratch;
using testing::write_fake_node;

nlohmann::json diagnose_json(const fs::path& dir, const fs::path& json_file) {
  const std::string d = dir.string(), j = json_file.string();
  std::vector<std::string_view> args{d, "--json", j, "--quiet"};
  rankscope::cli::HangdoctorEnv env;
  env.out = std::tmpfile();
  env.err = std::tmpfile();
  rankscope::cli::run_hangdoctor(args, env);
  std::fclose(env.out);
  std::fclose(env.err);
  std::ifstream in(json_file);
  return nlohmann::json::parse(in, nullptr, false);
}

void expect_travels_whole(const fs::path& real, const std::string& tag) {
  const auto root = scratch(tag);
  // File by file: the shared data is read-only, and its modes must not follow it here.
  for (const auto& e : fs::recursive_directory_iterator(real)) {
    const auto to = root / "n1" / "run" / fs::relative(e.path(), real);
    if (e.is_directory()) fs::create_directories(to);
    else fs::create_directories(to.parent_path()), fs::copy_file(e.path(), to);
  }
  // The recorders name the GPU machine as their host: --all-hosts ships them from this one.
  auto targets = exec_targets({"n1"}, write_fake_node(root), "'" + rankscope_binary() + "' snapshot run --all-hosts");
  ASSERT_TRUE(targets.ok());
  GatherOptions o;
  o.out_dir = root / "g";
  auto rec = gather_nodes(*targets, o);
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  ASSERT_EQ(rec->answered(), 1) << rec->nodes[0].reason;
  auto a = format::open_run_directory(real), b = format::open_run_directory(root / "g");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->world_size, b->world_size);
  ASSERT_EQ(a->ranks.size(), b->ranks.size());
  for (size_t r = 0; r < a->ranks.size(); ++r) {
    ASSERT_EQ(a->ranks[r].flight.has_value(), b->ranks[r].flight.has_value());
    if (!a->ranks[r].flight) continue;
    EXPECT_EQ(a->ranks[r].flight->pid, b->ranks[r].flight->pid);
    EXPECT_EQ(a->ranks[r].flight->live.heartbeat_ns, b->ranks[r].flight->live.heartbeat_ns);
    EXPECT_EQ(a->ranks[r].flight->comms.size(), b->ranks[r].flight->comms.size());
  }
  const auto da = diagnose_json(real, root / "a.json"), db = diagnose_json(root / "g", root / "b.json");
  EXPECT_EQ(da["verdict"], db["verdict"]);
  EXPECT_EQ(da["culprit_ranks"], db["culprit_ranks"]);
  EXPECT_EQ(da["collective"], db["collective"]);
}

TEST(GatherRealGpu, ProbeRunDirectoryTravelsWhole) {
  const fs::path real = fs::path(RANKSCOPE_REAL_GPU_DATA) / "d12-flash";
  if (!fs::exists(real)) GTEST_SKIP() << real << " absent (real GPU data lives beside the checkout, not in CI)";
  expect_travels_whole(real, "d12");
}

TEST(GatherRealGpu, NcclPluginRecordersTravelWhole) {
  const fs::path real = fs::path(RANKSCOPE_REAL_GPU_DATA) / "plugin-p2p-run";
  if (!fs::exists(real)) GTEST_SKIP() << real << " absent (real GPU data lives beside the checkout, not in CI)";
  expect_travels_whole(real, "plugin");
}

}  // namespace
}  // namespace rankscope::gather
