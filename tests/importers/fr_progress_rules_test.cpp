// fr_progress_rules_test.cpp — the importer's rules for many process groups, one by one:
// pg_status rows named by the groups' creation order (fr_pg_status.h), and dump files named per host
// (fr_discovery.h), and a dump's entries sorted by group (fr_entry_groups.h). The whole job is checked on the real dumps (fr_real_dumps_test.cpp) and on
// Megatron-shaped ones (fr_megatron_verdict_test.cpp).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "fr_discovery.h"
#include "fr_entry_groups.h"
#include "fr_pg_status.h"

namespace rankscope::torch_fr {
namespace {

namespace fs = std::filesystem;

FrDump dump_with_groups(const std::vector<std::string>& names, const std::vector<int64_t>& ids) {
  FrDump d;
  for (const auto& n : names) d.groups[n] = FrGroup{n, "G", {0}};
  for (int64_t id : ids) d.status_by_pg_id[id] = FrStatus{10 + id, -1, 10 + id};
  return d;
}

TEST(FrPgStatus, RowsOfADumpWithNoEntriesAreNamedInCreationOrder) {
  // A rank of the real job: 13 groups, ids with gaps (other groups took them), no entry.
  FrDump d = dump_with_groups({"0", "6", "33", "37", "42", "108"}, {0, 1, 4, 5, 6, 16});
  resolve_pg_status(d);
  ASSERT_EQ(d.status.size(), 6u);
  EXPECT_EQ(d.status["0"].last_enqueued, 10);
  EXPECT_EQ(d.status["6"].last_enqueued, 11);
  EXPECT_EQ(d.status["33"].last_enqueued, 14);
  EXPECT_EQ(d.status["42"].last_enqueued, 16);
  EXPECT_EQ(d.status["108"].last_enqueued, 26);
}

TEST(FrPgStatus, TheEntriesFixSomeRowsAndTheGapsBetweenAreFilledOnlyWhereCountsAgree) {
  FrDump d = dump_with_groups({"0", "5", "9", "12", "20"}, {0, 2, 3, 7, 8, 9});
  d.pg_id_names = {{3, "9"}};
  resolve_pg_status(d);
  // Below the fixed point 3 -> "9": ids {0, 2}, names {"0", "5"}: paired. Above it: ids {7, 8, 9},
  // names {"12", "20"}: three rows for two groups, so none of them is named.
  EXPECT_EQ(d.status.count("0"), 1u);
  EXPECT_EQ(d.status["5"].last_enqueued, 12);
  EXPECT_EQ(d.status["9"].last_enqueued, 13);
  EXPECT_EQ(d.status.count("12"), 0u);
  EXPECT_EQ(d.status.count("20"), 0u);
}

TEST(FrPgStatus, NamesThatAreNotCountersAreNeverGuessed) {
  FrDump d = dump_with_groups({"3f2a9c", "0"}, {0, 1});
  resolve_pg_status(d);
  EXPECT_TRUE(d.status.empty());
  d.pg_id_names = {{1, "3f2a9c"}};
  resolve_pg_status(d);
  EXPECT_EQ(d.status.size(), 1u);  // only the row the entries name
  EXPECT_EQ(d.status["3f2a9c"].last_enqueued, 11);
}

TEST(FrPgStatus, ARowCountsSendRecvWhenTheNewestEntryOnItIsOne) {
  std::map<int, FrDump> dumps;
  for (int r : {0, 1}) {
    FrDump d;
    d.status["7"] = FrStatus{500, -1, 498};
    d.status["9"] = FrStatus{40, -1, 40};
    dumps[r] = d;
  }
  FrEntry send;
  send.group = "7";
  send.is_p2p = true;
  send.p2p_seq = 500;
  send.collective_seq = 3;
  dumps[0].entries.push_back(send);  // rank 1 has no entry on "7": it takes what rank 0 shows
  const auto p = group_progress(dumps);
  EXPECT_EQ(p.at(0).at("7").numbering, SeqNumbering::kP2P);
  EXPECT_EQ(p.at(1).at("7").numbering, SeqNumbering::kP2P);
  EXPECT_EQ(p.at(0).at("9").numbering, SeqNumbering::kUnknown);  // nobody shows an entry there
}

void touch_dump(const fs::path& p) {
  std::ofstream out(p, std::ios::binary);
  out.put(char(0x80));
}

// Entries read from a dump share one pooled copy of each group name, and entries_by_group tests
// the pointer first; names built apart (a test's, another reader's) are still one group by text.
TEST(FrEntryGroups, EntriesAreGroupedByTheNamesTextNotWhereItLies) {
  const std::string a1 = "37", a2 = std::string("3") + "7", b = "42";
  ASSERT_NE(a1.data(), a2.data());
  FrDump d;
  for (const std::string* name : {&a1, &b, &a2, &a2, &b, &a1}) {
    FrEntry e;
    e.group = *name;
    e.collective_seq = int64_t(d.entries.size());
    d.entries.push_back(e);
  }
  const std::vector<GroupEntries> groups = entries_by_group(d);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].name, "37");
  EXPECT_EQ(groups[1].name, "42");
  std::vector<int64_t> seqs;
  for (const FrEntry* e : groups[0].entries) seqs.push_back(e->collective_seq);
  EXPECT_EQ(seqs, (std::vector<int64_t>{0, 2, 3, 5}));
  ASSERT_NE(find_group(groups, "42"), nullptr);
  EXPECT_EQ(find_group(groups, "42")->entries.size(), 2u);
  EXPECT_EQ(find_group(groups, "4"), nullptr);
}

TEST(FrDiscovery, PrefixesThatNameTheHostAreOneJob) {
  const fs::path dir = fs::temp_directory_path() / ("rs_fr_hosts_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (int r : {0, 1}) touch_dump(dir / ("nccl_trace_rank_container-node01_" + std::to_string(r)));
  for (int r : {2, 3}) touch_dump(dir / ("nccl_trace_rank_container-node02_" + std::to_string(r)));
  std::ofstream(dir / "notes_7") << "not a dump";
  const DiscoveredDumps found = discover_dumps(dir);
  ASSERT_EQ(found.files.size(), 4u);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(found.files[size_t(r)].rank, r);
  fs::remove_all(dir);
}

TEST(FrDiscovery, TwoJobsInOneDirectoryAreNeverMerged) {
  const fs::path dir = fs::temp_directory_path() / ("rs_fr_two_jobs_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (int r = 0; r < 4; ++r) touch_dump(dir / ("comm_lib_trace_rank_" + std::to_string(r)));
  for (int r = 0; r < 2; ++r) touch_dump(dir / ("comm_lib_trace_rank_old_" + std::to_string(r)));
  const DiscoveredDumps found = discover_dumps(dir);
  ASSERT_EQ(found.files.size(), 4u);  // ranks 0 and 1 repeat: the prefix with more files
  EXPECT_EQ(found.files[0].file.filename(), "comm_lib_trace_rank_0");
  fs::remove_all(dir);
}

// has_dumps, which stops at a directory's first dump, answers what a whole discovery would: dumps
// among other files, none (only files that are not dumps, or none at all), and prefixes.
TEST(FrDiscovery, HasDumpsAnswersAsTheWholeDiscoveryDoes) {
  const fs::path dir = fs::temp_directory_path() / ("rs_fr_has_dumps_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto agree = [](const fs::path& p) {
    const bool whole = !discover_dumps(p).files.empty();
    EXPECT_EQ(has_dumps(p), whole) << p;
    return whole;
  };
  EXPECT_FALSE(agree(dir));  // empty
  std::ofstream(dir / "notes_7") << "not a dump";
  std::ofstream(dir / "train.log") << "step 1\n";
  EXPECT_FALSE(agree(dir));  // a trailing number alone is not a dump
  for (int r = 0; r < 3; ++r) touch_dump(dir / ("comm_lib_trace_rank_" + std::to_string(r)));
  for (int r = 0; r < 2; ++r) touch_dump(dir / ("comm_lib_trace_rank_old_" + std::to_string(r)));
  EXPECT_TRUE(agree(dir));
  EXPECT_TRUE(agree(dir / "comm_lib_trace_rank_"));
  EXPECT_TRUE(agree(dir / "comm_lib_trace_rank_old_"));
  EXPECT_FALSE(agree(dir / "nccl_trace_rank_"));
  EXPECT_FALSE(agree(dir / "missing" / "comm_lib_trace_rank_"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rankscope::torch_fr
