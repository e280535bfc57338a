// nccl_plugin_run_test.cpp — the reader side of the NCCL plugin's run directory, on files written
// directly through the format library (no plugin, no driver): names, membership, rank fallbacks.
#include <climits>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "rankscope/format/flight_recorder_writer.h"
#include "rankscope/format/nccl_plugin_run.h"
#include "rankscope/format/nccl_section_writer.h"
#include "rankscope/format/run_directory.h"

namespace plugin_run_tests {
namespace {

namespace fs = std::filesystem;
namespace rf = rankscope::format;

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::path(RANKSCOPE_BINARY_DIR) / "tests" / "nccl_plugin_runs" / name;
  fs::remove_all(d);
  fs::create_directories(d / "nccl");
  return d;
}

// One plugin recorder: process (host, pid) with launcher rank `launcher`, member `comm_rank` of a
// communicator of `size` with `hash` and `name`; the launcher's world is 4 unless `world` says.
void write_recorder(const fs::path& dir, int pid, int launcher, uint64_t hash, const std::string& name, int size,
                    int comm_rank, bool finalized = false, int world = -1) {
  rf::FlightIdentity id;
  id.rank = launcher;
  id.world_size = world >= 0 ? world : launcher >= 0 ? 4 : 0;
  id.pid = pid;
  id.host = "h";
  id.start_ns = 1000 + pid;
  rf::FlightLayoutParams p;
  p.max_threads = 1;
  p.max_comms = 1;
  p.ring_entries = 8;
  p.max_params = 0;
  auto w = rf::FlightRecorderWriter::create(dir / "nccl" / ("h." + std::to_string(pid) + "." + std::to_string(hash) + ".flight"), id, p);
  ASSERT_TRUE(w.ok());
  rf::NcclSectionWriter n((*w)->nccl_section());
  rf::NcclIdentityDesc d;
  d.comm_hash = hash;
  d.abi_version = 5;
  d.comm_name = name;
  n.write_identity(d);
  const int c = (*w)->register_comm(name, size, comm_rank);
  const uint64_t seq = (*w)->collective_enqueue(c, {rf::CollectiveOp::kAllReduce, rf::DataType::kFloat32, 4, 16, -1}, 0, {}, 2000);
  (*w)->collective_complete(c, seq, 3000);
  if (finalized) n.set_finalized();
  (*w)->set_process_state(finalized ? rf::ProcessState::kFinished : rf::ProcessState::kRunning);
}

TEST(NcclPluginRun, MembershipAndNamesFromTheFiles) {
  const fs::path dir = fresh_dir("reader_names");
  // 2 processes; "tp" used by a finalized communicator (1) and a live one (2): the live one keeps
  // the name. "x" is used by two live communicators: both carry their hash. No name: the hash.
  for (int r = 0; r < 2; ++r) {
    write_recorder(dir, 100 + r, r, 0x1111000000000000ull, "tp", 2, r, /*finalized=*/true);
    write_recorder(dir, 100 + r, r, 0x2222000000000000ull, "tp", 2, 1 - r);
    write_recorder(dir, 100 + r, r, 0x3333000000000000ull, "x", 2, r);
    write_recorder(dir, 100 + r, r, 0x4444000000000000ull, "x", 2, r);
    write_recorder(dir, 100 + r, r, 0x5555000000000000ull, "", 2, r);
  }
  auto run = rf::open_run_directory(dir);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->world_size, 4) << "the launcher's WORLD_SIZE";
  ASSERT_TRUE(run->metadata);
  std::map<std::string, std::vector<int>> groups;
  for (const auto& g : run->metadata->groups) groups[g.name] = g.ranks;
  EXPECT_EQ(groups["tp"], (std::vector<int>{1, 0})) << "comm-rank order";
  EXPECT_EQ(groups["tp@11110000"], (std::vector<int>{0, 1}));
  EXPECT_EQ(groups.count("x@33330000"), 1u);
  EXPECT_EQ(groups.count("x@44440000"), 1u);
  EXPECT_EQ(groups.count("nccl-5555000000000000"), 1u);
  EXPECT_FALSE(run->ranks[2].flight.has_value()) << "launcher says 4 ranks, two left files";
  ASSERT_TRUE(run->ranks[0].flight.has_value());
  EXPECT_EQ(run->ranks[0].flight->comms.size(), 5u);
  EXPECT_EQ(run->ranks[0].flight->live.process_state, rf::ProcessState::kRunning);
}

TEST(NcclPluginRun, WithoutLauncherRanksTheSpanningCommunicatorNumbersThem) {
  const fs::path dir = fresh_dir("reader_no_launcher");
  // Process 300 is rank 1 of the communicator every process belongs to, process 301 rank 0.
  write_recorder(dir, 300, -1, 0xabcd, "world", 2, 1);
  write_recorder(dir, 301, -1, 0xabcd, "world", 2, 0);
  auto run = rf::open_run_directory(dir);
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_EQ(run->world_size, 2);
  ASSERT_TRUE(run->ranks[0].flight && run->ranks[1].flight);
  EXPECT_EQ(run->ranks[0].flight->pid, 301);
  EXPECT_EQ(run->ranks[1].flight->pid, 300);
  bool said = false;
  for (const auto& p : run->problems) said = said || p.find("communicator world") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(NcclPluginRun, EmptyPluginDirectoryIsAClearError) {
  const fs::path dir = fresh_dir("reader_empty");
  std::FILE* f = std::fopen((dir / "nccl" / "h.1.junk.flight").c_str(), "w");
  std::fputs("not a recorder", f);
  std::fclose(f);
  auto run = rf::open_run_directory(dir);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("NCCL_PROFILER_PLUGIN"), std::string::npos) << run.status().message();
}

bool said(const rf::RunDirectory& run, std::string_view what) {
  for (const auto& p : run.problems)
    if (p.find(what) != std::string::npos) return true;
  return false;
}

// A recorder of a dying job whose header claims a world of 2^31 - 1 ranks: the rank table is never
// sized by it (the reader once asked for 1.4 TB); the claim is reported with the file.
TEST(NcclPluginRun, AHugeClaimedWorldIsReportedNotAllocated) {
  const fs::path dir = fresh_dir("reader_huge_world");
  write_recorder(dir, 400, 0, 0xabcd, "world", 2, 0, false, INT_MAX);
  write_recorder(dir, 401, 1, 0xabcd, "world", 2, 1);
  auto run = rf::open_run_directory(dir);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->world_size, 4) << "the other process's launcher world";
  EXPECT_TRUE(said(*run, "h.400.43981.flight: claims a world of 2147483647 ranks")) << testing::PrintToString(run->problems);
  ASSERT_TRUE(run->ranks[0].flight && run->ranks[1].flight) << "its launcher rank still holds";
  EXPECT_EQ(run->ranks[0].flight->pid, 400);
}

// A launcher rank of INT_MAX: rank + 1 would overflow; the claim is dropped and NCCL numbers the ranks.
TEST(NcclPluginRun, ALauncherRankPastAnyWorldIsReported) {
  const fs::path dir = fresh_dir("reader_huge_rank");
  write_recorder(dir, 410, INT_MAX, 0xabcd, "world", 2, 1, false, 4);
  write_recorder(dir, 411, 0, 0xabcd, "world", 2, 0);
  auto run = rf::open_run_directory(dir);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->world_size, 4);
  EXPECT_TRUE(said(*run, "h.410.43981.flight: claims launcher rank 2147483647")) << testing::PrintToString(run->problems);
  ASSERT_TRUE(run->ranks[0].flight && run->ranks[1].flight);
  EXPECT_EQ(run->ranks[0].flight->pid, 411);
  EXPECT_EQ(run->ranks[1].flight->pid, 410);
}

// process.json written by anything: a host that is not a string, a pid that is not an integer (or
// one no int holds) is reported by file name; the good one still gives its boot id.
TEST(NcclPluginRun, ProcessJsonOfTheWrongTypesIsReported) {
  const fs::path dir = fresh_dir("reader_process_json");
  write_recorder(dir, 420, 0, 0xabcd, "world", 2, 0);
  write_recorder(dir, 421, 1, 0xabcd, "world", 2, 1);
  const std::map<std::string, std::string> files = {
      {"a.process.json", R"({"host": 5, "pid": 420})"},
      {"b.process.json", R"({"host": "h", "pid": "421"})"},
      {"c.process.json", R"({"host": "h", "pid": 1e300})"},
      {"d.process.json", R"({"host": "h", "pid": 99999999999})"},
      {"e.process.json", R"({"host": "h", "pid": 420, "boot_id": "boot-a"})"},
      {"f.process.json", R"({"host": "h", "pid": 421, "boot_id": 7})"},
  };
  for (const auto& [name, text] : files) std::ofstream(dir / "nccl" / name) << text;
  auto run = rf::open_run_directory(dir);
  ASSERT_TRUE(run.ok()) << run.status().message();
  for (const char* bad : {"a.process.json", "b.process.json", "c.process.json", "d.process.json"})
    EXPECT_TRUE(said(*run, bad)) << bad << ": " << testing::PrintToString(run->problems);
  ASSERT_TRUE(run->ranks[0].flight && run->ranks[1].flight);
  EXPECT_EQ(run->ranks[0].flight->boot_id, "boot-a");
  EXPECT_EQ(run->ranks[1].flight->boot_id, "");
}

}  // namespace
}  // namespace plugin_run_tests
