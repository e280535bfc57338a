// kineto_pack_test.cpp — traces imported where they were written. A node reads its own
// traces and sends what the import keeps (kineto_import.h pack_traces, trace_wire.h); the head imports
// the nodes' packs as one job (import_kineto_packed). Asserted: the run directory equals a local
// import of the same files (rank files byte for byte but the run id, which names the inputs' paths;
// run.json but the trace's names, host:path), the wire form survives a round trip on every fixture,
// and a cut, lying or hostile pack is a clean error naming its node, never a crash.
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "rankscope/format/run_metadata.h"
#include "rankscope/format/snapshot_stream.h"
#include "rankscope/kineto/kineto_import.h"
#include "trace_reader.h"
#include "test_files.h"
#include "trace_wire.h"

namespace rankscope::kineto {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/kineto";

// A fresh scratch folder per test, and whole files as bytes (tests/format/test_files.h).
using format::testing::read_bytes;
fs::path fresh_dir(const std::string& name) { return format::testing::scratch_dir("kpack-" + name); }

// What a node sends for `inputs`, unpacked into `dir` as the head does.
PackSummary pack_into(const std::vector<fs::path>& inputs, const fs::path& dir, const std::string& host) {
  const fs::path stream = dir.parent_path() / (host + ".stream");
  fs::create_directories(dir.parent_path());
  std::FILE* f = std::fopen(stream.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  auto packed = pack_traces(inputs, f, host, 2);
  std::fclose(f);
  EXPECT_TRUE(packed.ok()) << packed.status().to_string();
  const auto bytes = read_bytes(stream);
  EXPECT_EQ(packed.ok() ? packed->stream_bytes : 0, bytes.size());
  const auto decoded = format::unpack_snapshot(bytes, "node " + host, dir);
  EXPECT_TRUE(decoded.status.ok()) << decoded.status.to_string();
  return packed.ok() ? *packed : PackSummary{};
}

// The rank files of two imports, byte for byte, with `run_id_a` read as `run_id_b` (the run id names
// the inputs' paths, which differ: host:path against path).
void expect_same_rank_files(const fs::path& a, const fs::path& b) {
  auto ma = format::read_run_metadata(a), mb = format::read_run_metadata(b);
  ASSERT_TRUE(ma.ok() && mb.ok());
  ASSERT_EQ(ma->run_id.size(), mb->run_id.size());
  int compared = 0;
  for (const auto& e : fs::directory_iterator(a)) {
    const std::string name = e.path().filename().string();
    if (name == "run.json") continue;
    ASSERT_TRUE(fs::exists(b / name)) << name;
    auto x = read_bytes(e.path()), y = read_bytes(b / name);
    // Every place the run id is written, replaced.
    for (size_t at = 0; (at = std::string_view(reinterpret_cast<const char*>(x.data()), x.size()).find(ma->run_id, at)) != std::string_view::npos;)
      std::copy(mb->run_id.begin(), mb->run_id.end(), x.begin() + long(at));
    EXPECT_TRUE(x == y) << name << " differs beyond the run id";
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

// run.json of both, with each trace's file reduced to its name and the run ids and timing dropped.
nlohmann::json comparable_metadata(const fs::path& run) {
  std::ifstream in(run / "run.json");
  nlohmann::json j = nlohmann::json::parse(in);
  j.erase("run_id");
  j.erase("command_line");
  j.erase("inputs");
  auto& source = j["source"];
  source.erase("seconds");
  for (auto& r : source["ranks"]) r["file"] = fs::path(r["file"].get<std::string>()).filename().string();
  return j;
}

TEST(KinetoPack, TwoNodesImportAsALocalImportOfTheSameFiles) {
  const fs::path base = fresh_dir("two-nodes");
  // The NCCL pair: two process groups, clocks aligned on their all-reduces; one trace a node.
  const fs::path local = base / "local", remote = base / "remote";
  const std::vector<fs::path> traces = {fs::absolute(kFixtures / "nccl-2ranks/rank0.json"), fs::absolute(kFixtures / "nccl-2ranks/rank1.json")};
  ASSERT_TRUE(fs::exists(traces[0]) && fs::exists(traces[1]));
  auto here = import_kineto(traces, local);
  ASSERT_TRUE(here.ok()) << here.status().to_string();

  const PackSummary n1 = pack_into({traces[1]}, base / "unpacked/n1", "n1");  // the order of nodes is not the ranks'
  const PackSummary n2 = pack_into({traces[0]}, base / "unpacked/n2", "n2");
  EXPECT_EQ(n1.traces, 1);
  EXPECT_EQ(n2.traces, 1);
  EXPECT_EQ(n1.trace_bytes, fs::file_size(traces[1]));
  EXPECT_GT(n1.packed_bytes, 0u);
  auto there = import_kineto_packed({{"n1", base / "unpacked/n1"}, {"n2", base / "unpacked/n2"}}, remote);
  ASSERT_TRUE(there.ok()) << there.status().to_string();

  expect_same_rank_files(local, remote);
  EXPECT_EQ(comparable_metadata(local), comparable_metadata(remote));
  ASSERT_EQ(there->ranks.size(), 2u);
  EXPECT_EQ(there->ranks[0].file, "n2:" + traces[0].lexically_normal().string());
  EXPECT_EQ(there->ranks[1].file, "n1:" + traces[1].lexically_normal().string());
  EXPECT_EQ(there->warnings, here->warnings);
  fs::remove_all(base);
}

TEST(KinetoPack, EveryFixtureSurvivesTheWire) {
  int traces = 0;
  for (const auto& e : fs::recursive_directory_iterator(kFixtures)) {
    const std::string n = e.path().filename().string();
    if (!e.is_regular_file() || !(n.ends_with(".json") || n.ends_with(".json.gz"))) continue;
    auto t = read_trace(e.path());
    if (!t.ok()) continue;  // the hostile ones are the reader's tests
    const auto bytes = encode_trace(*t);
    auto back = decode_trace(bytes, n);
    ASSERT_TRUE(back.ok()) << n << ": " << back.status().to_string();
    EXPECT_EQ(encode_trace(*back), bytes) << n;
    EXPECT_EQ(back->rows.ops.size(), t->rows.ops.size());
    EXPECT_EQ(back->rows.pool, t->rows.pool);
    ++traces;
  }
  EXPECT_GE(traces, 15);
}

TEST(KinetoPack, CutOrLyingPacksAreCleanErrors) {
  auto t = read_trace(kFixtures / "nccl-2ranks/rank0.json");
  ASSERT_TRUE(t.ok());
  const auto bytes = encode_trace(*t);
  // Every cut: an error that names the source and says it is corrupt, never a crash.
  for (size_t n = 0; n < bytes.size(); n += 1 + n / 64) {
    auto r = decode_trace(std::span(bytes.data(), n), "node n7, trace-000000.rkw");
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_NE(r.status().message().find("node n7"), std::string::npos) << r.status().message();
  }
  // A length that claims more than there is (the file name's, right after the magic: 2^63 bytes) is
  // refused before anything is allocated; so is one byte after the trace's end.
  std::vector<uint8_t> lying = bytes;
  lying[15] = 0x7f;
  auto huge = decode_trace(lying, "x");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("cut short"), std::string::npos) << huge.status().message();
  lying = bytes;
  lying.push_back(0);
  EXPECT_FALSE(decode_trace(lying, "x").ok());
  // A string index past the pool: every u32 of the GPU ops' names is checked.
  KinetoTrace bad = *t;
  ASSERT_FALSE(bad.rows.ops.empty());
  bad.rows.ops[0].name = uint32_t(bad.rows.pool.size()) + 5;
  auto r = decode_trace(encode_trace(bad), "node n3");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("past the pool"), std::string::npos) << r.status().message();
  // An enum out of range.
  bad = *t;
  bad.rows.ops[0].kind = trace_core::GpuOpKind(9);
  EXPECT_FALSE(decode_trace(encode_trace(bad), "node n3").ok());
  // What no trace reader gives: a world of 2^30 ranks (fuzz_kineto_pack's first finding: the import
  // sized its tables by it, a 1 GiB allocation from a 1.7 kB input), a rank past 2^20, a group's rank
  // below 0, a time span that ends before it starts or lies near INT64_MAX.
  for (int which = 0; which < 5; ++which) {
    bad = *t;
    if (which == 0) bad.world_size = 1 << 30;
    if (which == 1) bad.rank = 1 << 20;
    if (which == 2) bad.groups.push_back({"x", "y", "nccl", {0, -3}});
    if (which == 3) std::swap(bad.rows.ops[0].start, bad.rows.ops[0].end), bad.rows.ops[0].start += 1;
    if (which == 4) bad.rows.runtime.at(0).end = INT64_MAX;
    auto refused = decode_trace(encode_trace(bad), "node n5");
    ASSERT_FALSE(refused.ok()) << which;
    EXPECT_NE(refused.status().message().find("node n5: corrupt packed trace"), std::string::npos) << refused.status().message();
  }
  // Not a pack at all.
  const std::string text = "{\"traceEvents\": []}";
  auto not_pack = decode_trace(std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()), "node n3");
  ASSERT_FALSE(not_pack.ok());
  EXPECT_NE(not_pack.status().message().find("not a trace packed"), std::string::npos);
}

TEST(KinetoPack, ANodeWithoutTracesSendsNoneWhenAllowed) {
  const fs::path base = fresh_dir("none");
  const fs::path stream = base / "n4.stream";
  std::FILE* f = std::fopen(stream.c_str(), "wb");
  auto refused = pack_traces({base / "traces"}, f, "n4", 1, /*none_ok=*/false);
  EXPECT_FALSE(refused.ok());
  std::rewind(f);
  auto none = pack_traces({base / "traces"}, f, "n4", 1, /*none_ok=*/true);
  std::fclose(f);
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_EQ(none->traces, 0);
  const auto decoded = format::unpack_snapshot(read_bytes(stream), "node n4", base / "unpacked");
  EXPECT_TRUE(decoded.status.ok()) << decoded.status.to_string();
  EXPECT_EQ(decoded.names, std::vector<std::string>{std::string(kPackManifest)});
  // A head that got only such nodes has nothing to import, and says so.
  auto nothing = import_kineto_packed({{"n4", base / "unpacked"}}, base / "run");
  ASSERT_FALSE(nothing.ok());
  EXPECT_NE(nothing.status().message().find("no node sent a trace"), std::string::npos);
  fs::remove_all(base);
}

}  // namespace
}  // namespace rankscope::kineto
