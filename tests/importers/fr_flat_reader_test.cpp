// fr_flat_reader_test.cpp — the fast path for PyTorch's pickles (importers/torch_fr/src/fr_flat_pickle.h)
// gives the same dump as the generic unpickler, field by field, on every dump file the tests hold:
// PyTorch's own (real-megatron-moe, gloo16, the fr_scenarios.h fixtures) and the generated Megatron jobs;
// and it hands what it does not read (a cut file, torch.jit's list builders) to the generic reader.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "fr_megatron_job.h"
#include "torch_style_pickler.h"
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
    if (!fast.ok() && !slow.ok()) {
      EXPECT_EQ(fast.status().message(), slow.status().message()) << what;
    }
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
  EXPECT_GT(files, 200u);  // real-megatron-moe (32), gloo16 (~200), the fr_scenarios.h fixtures
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
    if (fast.ok() && slow.ok()) {
      EXPECT_EQ(fast->entries.size(), slow->entries.size()) << "trial " << trial;
    }
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

namespace rankscope::torch_fr {
namespace {

// The entries list is read straight from the opcodes (fr_dump.cpp read_entries_direct, through the
// flat reader's FlatCursor), and any shape that reader does not take is read again with the tree.
// Each case below is one such shape: both ways must give the generic reader's dump.

// Raw pickle bytes, opcode by opcode (protocol 2, strings as SHORT_BINUNICODE).
struct RawPickle {
  std::vector<uint8_t> b{0x80, 2};
  RawPickle& op(std::initializer_list<uint8_t> x) {
    b.insert(b.end(), x);
    return *this;
  }
  RawPickle& s(const std::string& t) {
    b.push_back(0x8c);
    b.push_back(uint8_t(t.size()));
    b.insert(b.end(), t.begin(), t.end());
    return *this;
  }
  RawPickle& i(uint8_t v) { return op({'K', v}); }
  // {'version': '2.9', 'pg_config': {'0': {'name': '0', 'desc': 'default_pg', 'ranks': '[0, 1]'}}, then
  // the caller's keys.
  RawPickle& head() {
    op({'}', '('}).s("version").s("2.9").s("pg_config").op({'}', '('}).s("0").op({'}', '('});
    s("name").s("0").s("desc").s("default_pg").s("ranks").s("[0, 1]").op({'u', 'u'});
    return *this;
  }
  // One all_reduce entry of group "0", collective_seq_id `seq`, completed.
  RawPickle& entry(uint8_t seq) {
    op({'}', '('}).s("state").s("completed").s("profiling_name").s("nccl:all_reduce");
    s("process_group").s("0").s("default_pg").op({0x86}).s("collective_seq_id").i(seq).s("pg_id").i(0);
    return op({'u'});
  }
  std::vector<uint8_t> end() {
    op({'u', '.'});
    return b;
  }
};

TEST(FrFlatReader, EntriesInSeveralBatchesAreOneList) {
  // Python's pickle writes a list 1000 items a batch: MARK ... APPENDS, MARK ... APPENDS.
  RawPickle p;
  p.head().s("entries").op({']', '('}).entry(1).entry(2).op({'e', '('}).entry(3).op({'e'});
  const auto bytes = p.end();
  EXPECT_EQ(expect_same(bytes, "batches"), 3u);
}

TEST(FrFlatReader, AnEntriesListFetchedAgainFromTheMemoIsReadWithTheTree) {
  // The list is memo 9 and is got again after it was read: the tree reader must see its items.
  RawPickle p;
  p.head().s("entries").op({']', 'q', 9, '('}).entry(1).op({'e'}).s("again").op({'h', 9});
  const auto bytes = p.end();
  EXPECT_EQ(expect_same(bytes, "memo list"), 1u);
}

TEST(FrFlatReader, OnlyTheFirstEntriesKeyCounts) {
  // A dict's find is its first entry: the list under a second "entries" key is not the dump's.
  RawPickle p;
  p.head().s("entries").s("none").s("entries").op({']', '('}).entry(1).op({'e'});
  const auto bytes = p.end();
  EXPECT_EQ(expect_same(bytes, "two keys"), 0u);
  ASSERT_TRUE(parse_fr_dump(bytes, "two keys").ok());
}

TEST(FrFlatReader, AMemoPutAfterAKeyTheDirectReaderKnowsIsStillChecked) {
  // The third entry's "state" is the memo get the second entry's was, then a LONG_BINPUT past the
  // memo's limit, then a pair that would read well from there: refused by both readers. (Found by
  // mutating dumps: the direct reader's shortcut for a key got as before had consumed the get when
  // the put failed, and read on from after the put.)
  RawPickle p;
  p.head().s("entries").op({']', '(', '}', '('}).s("state").op({'q', 1}).s("completed").op({'u'});
  p.op({'}', '(', 'h', 1}).s("completed").op({'u'});
  p.op({'}', '(', 'h', 1, 'r', 0x55, 0x55, 0x55, 0x18}).s("state").s("completed").op({'u', 'e'});
  const auto bytes = p.end();
  expect_same(bytes, "put after a key");
  EXPECT_FALSE(parse_fr_dump(bytes, "put", PickleReader::kFast).ok());
}

TEST(FrFlatReader, ShapesTheDirectReaderDoesNotTakeAreReadWithTheTree) {
  // input_sizes as a tuple of two lists (TUPLE2 after two containers) and an entry with SETITEM.
  RawPickle p;
  p.head().s("entries").op({']', '('}).entry(1);
  p.op({'}', '('}).s("state").s("completed").s("profiling_name").s("nccl:all_gather").s("input_sizes");
  p.op({']', '(', 'K', 2, 'K', 3, 'e', ']', '(', 'K', 5, 'e', 0x86}).op({'u'});
  p.op({'}'}).s("state").s("scheduled").op({'s'});
  p.op({'e'});
  const auto bytes = p.end();
  EXPECT_EQ(expect_same(bytes, "shapes"), 3u);
  const auto d = parse_fr_dump(bytes, "shapes");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->entries[1].numel, 11u);  // 2 x 3 + 5
}

TEST(FrFlatReader, ACallSiteIsTheInnermostFrameOutsideTorch) {
  using namespace pickle::testing;
  using pickle::Value;
  Value frames = list({dict({{"name", str("all_reduce")},
                             {"filename", str("/usr/lib/python3/site-packages/torch/distributed/c10d.py")},
                             {"line", num(10)}}),
                       dict({{"name", str("train_step")}, {"filename", str("train.py")}, {"line", num(42)}})});
  Value e = dict({{"state", str("completed")},
                  {"profiling_name", str("nccl:all_reduce")},
                  {"process_group", tuple({str("0"), str("default_pg")})},
                  {"frames", frames}});
  // The same tuple object in two entries: written once, then got from the memo (the tree's case).
  Value shared = tuple({str("0"), str("default_pg")});
  Value e2 = dict({{"state", str("completed")}, {"process_group", shared}});
  Value e3 = dict({{"state", str("scheduled")}, {"process_group", shared}});
  Value root = dict({{"version", str("2.9")}, {"entries", list({e})}});
  const auto bytes = TorchStylePickler().write(root);
  EXPECT_EQ(expect_same(bytes, "frames"), 1u);
  const auto d = parse_fr_dump(bytes, "frames");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->entries[0].call_site, "train_step (train.py:42)");
  const auto shared_bytes = TorchStylePickler().write(dict({{"version", str("2.9")}, {"entries", list({e2, e3})}}));
  EXPECT_EQ(expect_same(shared_bytes, "shared tuple"), 2u);
}

// Flipped bytes in the entries of a generated dump (completed entries, every key PyTorch writes):
// whatever the direct reader accepts is the generic reader's dump, field by field.
TEST(FrFlatReader, DamagedEntriesReadDirectlyGiveTheGenericReadersDump) {
  testing::MegatronJobSpec spec;
  spec.only_active = false;
  const auto job = testing::megatron_job(spec);
  const std::vector<uint8_t>& original = job.dumps.at(5);
  const std::string key = "entries";
  const auto at = std::search(original.begin(), original.end(), key.begin(), key.end());
  ASSERT_NE(at, original.end());
  const size_t from = size_t(at - original.begin());
  uint64_t x = 0x2545f4914f6cdd1dull;
  size_t both_read = 0;
  for (int trial = 0; trial < 600; ++trial) {
    std::vector<uint8_t> b = original;
    for (int k = 0; k < 2; ++k) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      b[from + size_t(x % (b.size() - from))] = uint8_t(x >> 32);
    }
    const auto fast = parse_fr_dump(b, "flipped", PickleReader::kFast);
    const auto slow = parse_fr_dump(b, "flipped", PickleReader::kGeneric);
    ASSERT_EQ(fast.ok(), slow.ok()) << "trial " << trial;
    if (fast.ok()) {
      ++both_read;
      expect_same(b, "trial " + std::to_string(trial));
    }
  }
  EXPECT_GT(both_read, 50u);
}

}  // namespace
}  // namespace rankscope::torch_fr
