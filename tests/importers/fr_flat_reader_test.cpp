// fr_flat_reader_test.cpp — the fast path for PyTorch's pickles (importers/torch_fr/src/fr_flat_pickle.h)
// gives the same dump as the generic unpickler, field by field, on every dump file the tests hold:
// PyTorch's own (real-megatron-moe, gloo16, the issue-13 fixtures) and the generated Megatron jobs;
// and it hands what it does not read (a cut file, torch.jit's list builders) to the generic reader.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "fr_megatron_job.h"
#include "rankscope/torch_fr/fr_dump.h"

namespace rankscope::torch_fr {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Both readers, compared; returns the number of entries (to show something was read).
size_t expect_same(const std::vector<uint8_t>& bytes, const std::string& what) {
  const auto fast = parse_fr_dump(bytes, what, PickleReader::kFast);
  const auto slow = parse_fr_dump(bytes, what, PickleReader::kGeneric);
  EXPECT_EQ(fast.ok(), slow.ok()) << what;
  if (!fast.ok() || !slow.ok()) {
    if (!fast.ok() && !slow.ok()) EXPECT_EQ(fast.status().message(), slow.status().message()) << what;
    return 0;
  }
  const FrDump& a = *fast;
  const FrDump& b = *slow;
  EXPECT_EQ(a.version, b.version) << what;
  EXPECT_EQ(a.comm_lib_version, b.comm_lib_version) << what;
  EXPECT_EQ(a.partial, b.partial) << what;
  EXPECT_EQ(a.timing, b.timing) << what;
  EXPECT_EQ(a.unnamed_group_ranks, b.unnamed_group_ranks) << what;
  EXPECT_EQ(a.groups.size(), b.groups.size()) << what;
  for (const auto& [name, g] : a.groups) {
    auto it = b.groups.find(name);
    if (it == b.groups.end()) {
      ADD_FAILURE() << what << ": group " << name << " only in the fast reader's dump";
      continue;
    }
    EXPECT_EQ(g.desc, it->second.desc);
    EXPECT_EQ(g.ranks, it->second.ranks);
  }
  EXPECT_EQ(a.pg_id_names, b.pg_id_names) << what;
  EXPECT_EQ(a.status_by_pg_id.size(), b.status_by_pg_id.size()) << what;
  for (const auto& [id, st] : a.status_by_pg_id) {
    auto it = b.status_by_pg_id.find(id);
    if (it == b.status_by_pg_id.end()) {
      ADD_FAILURE() << what << ": pg_status row only in the fast reader's dump";
      continue;
    }
    EXPECT_EQ(st.last_enqueued, it->second.last_enqueued);
    EXPECT_EQ(st.last_started, it->second.last_started);
    EXPECT_EQ(st.last_completed, it->second.last_completed);
  }
  EXPECT_EQ(a.entries.size(), b.entries.size()) << what;
  for (size_t i = 0; i < std::min(a.entries.size(), b.entries.size()); ++i) {
    const FrEntry& x = a.entries[i];
    const FrEntry& y = b.entries[i];
    const std::string at = what + " entry " + std::to_string(i);
    EXPECT_EQ(x.group, y.group) << at;
    EXPECT_EQ(x.group_desc, y.group_desc) << at;
    EXPECT_EQ(x.pg_id, y.pg_id) << at;
    EXPECT_EQ(x.is_p2p, y.is_p2p) << at;
    EXPECT_EQ(x.collective_seq, y.collective_seq) << at;
    EXPECT_EQ(x.p2p_seq, y.p2p_seq) << at;
    EXPECT_EQ(x.profiling_name, y.profiling_name) << at;
    EXPECT_EQ(x.op, y.op) << at;
    EXPECT_EQ(x.peer_in_group, y.peer_in_group) << at;
    EXPECT_EQ(x.dtype, y.dtype) << at;
    EXPECT_EQ(x.numel, y.numel) << at;
    EXPECT_EQ(x.out_numel, y.out_numel) << at;
    EXPECT_EQ(x.state, y.state) << at;
    EXPECT_EQ(x.retired, y.retired) << at;
    EXPECT_EQ(x.has_duration, y.has_duration) << at;
    EXPECT_EQ(x.timeout_ms, y.timeout_ms) << at;
    EXPECT_EQ(x.time_created_ns, y.time_created_ns) << at;
    EXPECT_EQ(x.time_started_ns, y.time_started_ns) << at;
    EXPECT_EQ(x.time_completed_ns, y.time_completed_ns) << at;
    EXPECT_EQ(x.call_site, y.call_site) << at;
    EXPECT_EQ(x.completed, y.completed) << at;
    EXPECT_EQ(x.started, y.started) << at;
    EXPECT_EQ(x.aborted, y.aborted) << at;
  }
  return a.entries.size();
}

TEST(FrFlatReader, GivesTheGenericReadersDumpOnEveryFixtureFile) {
  size_t files = 0, entries = 0;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/torch_fr")) {
    if (!e.is_regular_file()) continue;
    const auto bytes = bytes_of(e.path());
    if (bytes.empty() || bytes[0] != 0x80) continue;  // JSON and other files take one path only
    entries += expect_same(bytes, e.path().string());
    ++files;
  }
  EXPECT_GT(files, 200u);  // real-megatron-moe (32), gloo16 (~200), the issue-13 fixtures
  EXPECT_GT(entries, 1000u);
}

TEST(FrFlatReader, GivesTheGenericReadersDumpOnGeneratedMegatronJobs) {
  for (auto fault : {testing::MegatronFault::kNone, testing::MegatronFault::kGpuError}) {
    testing::MegatronJobSpec spec;
    spec.fault = fault;
    spec.only_active = false;
    const auto job = testing::megatron_job(spec);
    size_t entries = 0;
    for (const auto& [rank, bytes] : job.dumps) entries += expect_same(bytes, "rank " + std::to_string(rank));
    EXPECT_GT(entries, 0u);
  }
}

TEST(FrFlatReader, ACutFileIsStillReadAsFarAsItGoes) {
  testing::MegatronJobSpec spec;
  spec.only_active = false;
  const auto job = testing::megatron_job(spec);
  std::vector<uint8_t> bytes = job.dumps.at(3);
  bytes.resize(bytes.size() * 2 / 3);  // the generic reader salvages a cut file; the fast one hands it over
  const auto fast = parse_fr_dump(bytes, "cut", PickleReader::kFast);
  ASSERT_TRUE(fast.ok()) << fast.status().to_string();
  EXPECT_TRUE(fast->partial);
  EXPECT_GT(fast->entries.size(), 0u);
  expect_same(bytes, "cut");
}

}  // namespace
}  // namespace rankscope::torch_fr

namespace rankscope::torch_fr {
namespace {

// Hostile bytes: every cut and thousands of flipped bytes of a real dump neither crash nor hang the
// fast path (ASan runs this too), and whatever it accepts the generic reader reads alike.
TEST(FrFlatReader, DamagedDumpsAreHandledLikeTheGenericReaderDoes) {
  const auto original =
      bytes_of(fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/torch_fr/real-megatron-moe/gpu_error_2nd/_dump_8");
  ASSERT_GT(original.size(), 1000u);
  for (size_t cut = 1; cut < original.size(); cut += 37) {
    std::vector<uint8_t> b(original.begin(), original.begin() + std::ptrdiff_t(cut));
    (void)parse_fr_dump(b, "cut", PickleReader::kFast);
  }
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<uint8_t> b = original;
    for (int k = 0; k < 3; ++k) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      b[size_t(x % b.size())] = uint8_t(x >> 32);
    }
    const auto fast = parse_fr_dump(b, "flipped", PickleReader::kFast);
    const auto slow = parse_fr_dump(b, "flipped", PickleReader::kGeneric);
    if (fast.ok() && slow.ok()) EXPECT_EQ(fast->entries.size(), slow->entries.size()) << "trial " << trial;
  }
}

// {'version': '2.9', 'comm_lib_version': <memo get_id>} with '2.9' put at memo id 40: ids need not
// come in order, and a slot below the highest that nothing was put in is not a value.
std::vector<uint8_t> memo_gap_pickle(uint8_t get_id) {
  std::vector<uint8_t> b = {0x80, 2, '}', '(', 0x8c, 7};
  for (char c : std::string("version")) b.push_back(uint8_t(c));
  b.insert(b.end(), {0x8c, 3, '2', '.', '9', 'r', 40, 0, 0, 0, 0x8c, 16});  // LONG_BINPUT 40
  for (char c : std::string("comm_lib_version")) b.push_back(uint8_t(c));
  b.insert(b.end(), {'h', get_id, 'u', '.'});
  return b;
}

TEST(FrFlatReader, MemoIdsOutOfOrderAreReadAndAnEmptySlotIsRefused) {
  const auto put = memo_gap_pickle(40);
  const auto fast = parse_fr_dump(put, "memo", PickleReader::kFast);
  ASSERT_TRUE(fast.ok()) << fast.status().to_string();
  EXPECT_EQ(fast->version, "2.9");
  EXPECT_EQ(fast->comm_lib_version, "2.9");
  expect_same(put, "memo");
  for (uint8_t never_put : {uint8_t(0), uint8_t(39)}) {  // below the slot put: grown over, never filled
    const auto gap = memo_gap_pickle(never_put);
    EXPECT_FALSE(parse_fr_dump(gap, "gap", PickleReader::kFast).ok()) << int(never_put);
    expect_same(gap, "gap");
  }
}

// A few bytes of memo references cannot describe millions of entries: refused as the generic reader
// refuses them.
TEST(FrFlatReader, AMemoBombIsRefused) {
  // {'version': '2.9', 'entries': [d, d, ... 2^20 times]} where d is one memoized dict of 100 keys.
  std::vector<uint8_t> b = {0x80, 2, '}', '(', 0x8c, 7};
  for (char c : std::string("version")) b.push_back(uint8_t(c));
  b.insert(b.end(), {0x8c, 3, '2', '.', '9', 0x8c, 7});
  for (char c : std::string("entries")) b.push_back(uint8_t(c));
  b.insert(b.end(), {']', '}', '('});
  for (int k = 0; k < 100; ++k) b.insert(b.end(), {'K', uint8_t(k), 'K', uint8_t(k)});
  b.insert(b.end(), {'u', 'q', 1, '('});  // the dict is memo 1; MARK for the list's items
  for (int i = 0; i < (1 << 20); ++i) b.insert(b.end(), {'h', 1});
  b.insert(b.end(), {'e', 'u', '.'});
  const auto fast = parse_fr_dump(b, "bomb", PickleReader::kFast);
  EXPECT_FALSE(fast.ok());
}

}  // namespace
}  // namespace rankscope::torch_fr
