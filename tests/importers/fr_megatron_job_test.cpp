// fr_megatron_job_test.cpp — the shape of what fr_megatron_job.h generates: the process groups and
// pg_ids of Megatron-LM's initialize_model_parallel, the key set of format 2.9, the counters
// ProcessGroupNCCL records, uneven but paired MoE all_to_all sizes, group-local p2p peers, pg_status
// agreeing with the entries, and what each fault leaves in the dumps. Read back both raw (the
// unpickler) and through the importer's parse_fr_dump. The generated TP4 PP2 DP2 job is compared with
// the real dumps' groups, pg_ids and keys (tests/fixtures/torch_fr/real-megatron-moe: NVIDIA/
// nvidia-resiliency-ext's tests/attribution/unit/fr_traces, Apache-2.0).
// Is not: a test of hangdoctor's verdicts on these dumps.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "fr_megatron_job.h"
#include "rankscope/pickle/unpickler.h"
#include "rankscope/torch_fr/fr_dump.h"

namespace rankscope::torch_fr::testing {
namespace {

namespace fs = std::filesystem;
using pickle::Kind;
using pickle::Value;

Value root_of(const std::vector<uint8_t>& bytes) {
  auto u = pickle::unpickle(bytes);
  EXPECT_TRUE(u.ok());
  EXPECT_FALSE(u->truncated);
  return u->root;
}

// The entries of a dump, holding their own references (a Value's containers die with the last
// Value that refers to them).
std::vector<Value> entries_of(const std::vector<uint8_t>& bytes) {
  const Value root = root_of(bytes);
  return root.find("entries")->items();
}

std::vector<std::string> keys_of(const Value& dict) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : dict.entries()) keys.push_back(*k.as_string());
  return keys;
}

const std::string& text(const Value* v) {
  static const std::string none;
  return v && v->as_string() ? *v->as_string() : none;
}
int64_t integer(const Value* v) { return v && v->as_int() ? *v->as_int() : -999; }
std::vector<int64_t> first_shape(const Value* sizes) {
  std::vector<int64_t> dims;
  if (!sizes || sizes->items().empty()) return dims;
  for (const auto& d : sizes->items()[0].items()) dims.push_back(*d.as_int());
  return dims;
}

FrDump parsed(const std::vector<uint8_t>& bytes) {
  auto d = parse_fr_dump(bytes, "generated");
  EXPECT_TRUE(d.ok()) << (d.ok() ? "" : d.status().message());
  return d.ok() ? std::move(d).value() : FrDump{};
}

MegatronJobSpec real_like(MegatronFault fault, std::vector<int> ranks = {9, 14}) {
  MegatronJobSpec s;  // TP4 PP2 DP2 MoE EP8, as the real job
  s.fault = fault;
  s.fault_ranks = std::move(ranks);
  return s;
}

std::map<int64_t, Value> pg_status_by_id(const Value& root) {
  std::map<int64_t, Value> out;
  for (const auto& [k, v] : root.find("pg_status")->entries()) out[std::stoll(*k.as_string())] = v;
  return out;
}

TEST(FrMegatronJob, GroupsFollowMegatronsCreationOrder) {
  const auto groups = megatron_groups(MegatronLayout{});
  // default, 8 DP-with-CP, 8 DP, 16 CP, 2 MP, 4 TP, 8 x (PP, EMB, POS_EMB), 2 TDP-CP, 2 TDP, 4 TCP, 2 EP,
  // 16 ETP, 2 ETMP, 1 ETMPP, 16 EDP, 1 IDO.
  ASSERT_EQ(groups.size(), 109u);
  auto expect = [&](size_t name, const char* desc, std::vector<int> ranks) {
    ASSERT_LT(name, groups.size());
    EXPECT_EQ(groups[name].name, std::to_string(name));
    EXPECT_EQ(groups[name].desc, desc) << name;
    EXPECT_EQ(groups[name].ranks, ranks) << name;
  };
  expect(0, "default_pg", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  expect(1, "DATA_PARALLEL_GROUP_WITH_CP", {0, 4});
  expect(6, "DATA_PARALLEL_GROUP_WITH_CP", {9, 13});
  expect(33, "MODEL_PARALLEL_GROUP", {0, 1, 2, 3, 8, 9, 10, 11});
  expect(37, "TENSOR_MODEL_PARALLEL_GROUP", {8, 9, 10, 11});
  expect(42, "PIPELINE_MODEL_PARALLEL_GROUP", {1, 9});
  expect(43, "EMBEDDING_GROUP", {1, 9});
  expect(44, "POSITION_EMBEDDING_GROUP", {1});
  expect(64, "TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP", {8, 9, 10, 11, 12, 13, 14, 15});
  expect(69, "TENSOR_AND_CONTEXT_PARALLEL_GROUP", {8, 9, 10, 11});
  expect(72, "EXPERT_MODEL_PARALLEL_GROUP", {8, 9, 10, 11, 12, 13, 14, 15});
  expect(90, "EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP", {8, 9, 10, 11, 12, 13, 14, 15});
  expect(91, "EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  expect(101, "EXPERT_DATA_PARALLEL_GROUP", {9});
  expect(108, "INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  for (const auto& g : groups) EXPECT_EQ(g.timeout_ms, g.desc == "EXPERT_MODEL_PARALLEL_GROUP" ? 600000 : 180000) << g.name;

  MegatronLayout l;
  l.tp = 2;
  l.pp = 4;
  l.dp = 2;
  const auto g2 = megatron_groups(l);
  std::map<std::string, std::vector<std::vector<int>>> by_desc;
  for (const auto& g : g2) by_desc[g.desc].push_back(g.ranks);
  EXPECT_EQ(by_desc["PIPELINE_MODEL_PARALLEL_GROUP"].front(), (std::vector<int>{0, 4, 8, 12}));
  EXPECT_EQ(by_desc["EMBEDDING_GROUP"].front(), (std::vector<int>{0, 12}));
  EXPECT_EQ(by_desc["EXPERT_MODEL_PARALLEL_GROUP"].size(), 4u);
  EXPECT_EQ(by_desc["EXPERT_MODEL_PARALLEL_GROUP"][1], (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(by_desc["TENSOR_MODEL_PARALLEL_GROUP"][3], (std::vector<int>{6, 7}));
}

TEST(FrMegatronJob, ThirteenGroupsPerRankWithTheRealJobsPgIdGaps) {
  const auto job = megatron_job(real_like(MegatronFault::kGpuError));
  ASSERT_EQ(job.dumps.size(), 16u);
  EXPECT_EQ(job.culprits, (std::vector<int>{9, 14}));
  for (const auto& [rank, bytes] : job.dumps) {
    const Value root = root_of(bytes);
    const Value* pg_config = root.find("pg_config");
    ASSERT_NE(pg_config, nullptr);
    EXPECT_EQ(pg_config->entries().size(), 13u) << rank;
    std::vector<int64_t> ids;
    for (const auto& [id, v] : pg_status_by_id(root)) ids.push_back(id);
    // Gaps: DATA_PARALLEL_GROUP, CONTEXT_PARALLEL_GROUP, (POSITION_EMBEDDING_GROUP on the first
    // stage), TENSOR_AND_DATA_PARALLEL_GROUP, EXPERT_TENSOR_PARALLEL_GROUP never ran a collective.
    if (rank < 8) {
      EXPECT_EQ(ids, (std::vector<int64_t>{0, 1, 4, 5, 6, 7, 9, 11, 12, 14, 15, 16, 17})) << rank;
    } else {
      EXPECT_EQ(ids, (std::vector<int64_t>{0, 1, 4, 5, 6, 7, 8, 10, 11, 13, 14, 15, 16})) << rank;
    }
    // pg_config names sorted as numbers, zipped with the sorted pg_status keys, give every entry's
    // (pg_id, group name).
    std::vector<int64_t> names;
    for (const auto& k : keys_of(*pg_config)) names.push_back(std::stoll(k));
    std::sort(names.begin(), names.end());
    std::map<int64_t, std::string> name_of_id;
    for (size_t i = 0; i < ids.size(); ++i) name_of_id[ids[i]] = std::to_string(names[i]);
    for (const auto& e : root.find("entries")->items())
      EXPECT_EQ(name_of_id[integer(e.find("pg_id"))], text(&e.find("process_group")->items()[0])) << rank;
    const FrDump d = parsed(bytes);
    EXPECT_EQ(d.groups.size(), 13u);
    EXPECT_EQ(d.version, "2.9");
    EXPECT_EQ(d.comm_lib_version, "2.27.3");
    EXPECT_EQ(d.entries.size(), root.find("entries")->items().size());
  }
}

TEST(FrMegatronJob, KeysAndValueTypesOfFormat29) {
  const auto job = megatron_job(real_like(MegatronFault::kGpuError));
  const Value root = root_of(job.dumps.at(8));
  EXPECT_EQ(keys_of(root), (std::vector<std::string>{"version", "pg_config", "nccl_version", "pg_status", "entries"}));
  EXPECT_EQ(text(root.find("version")), "2.9");
  // FlightRecorder's pg_name_to_ranks_ is a std::map keyed by (name, desc): pg_config in string order.
  const auto names = keys_of(*root.find("pg_config"));
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const auto& [name, info] : root.find("pg_config")->entries()) {
    EXPECT_EQ(keys_of(info), (std::vector<std::string>{"name", "desc", "ranks"}));
    EXPECT_EQ(text(info.find("name")), *name.as_string());
    EXPECT_EQ(text(info.find("ranks")).front(), '[');
  }
  for (const auto& [id, st] : pg_status_by_id(root)) {
    EXPECT_EQ(keys_of(st), (std::vector<std::string>{"last_enqueued_collective", "last_started_collective",
                                                       "last_completed_collective"}));
    EXPECT_EQ(integer(st.find("last_started_collective")), -1);  // timing off
  }
  const auto& entries = root.find("entries")->items();
  ASSERT_FALSE(entries.empty());
  for (const auto& e : entries) {
    EXPECT_EQ(keys_of(e), (std::vector<std::string>{
                              "record_id", "pg_id", "process_group", "thread_name", "thread_id", "collective_seq_id",
                              "p2p_seq_id", "op_id", "profiling_name", "time_created_ns", "input_sizes", "input_dtypes",
                              "output_sizes", "output_dtypes", "state", "time_discovered_started_ns",
                              "time_discovered_completed_ns", "retired", "timeout_ms", "is_p2p"}));
    EXPECT_EQ(e.find("process_group")->kind(), Kind::kTuple);
    EXPECT_EQ(text(e.find("state")), "scheduled");  // only active entries, timing off
    EXPECT_TRUE(e.find("time_discovered_started_ns")->is_none());
    EXPECT_TRUE(e.find("time_discovered_completed_ns")->is_none());
    EXPECT_EQ(e.find("retired")->as_bool(), false);
    EXPECT_EQ(e.find("is_p2p")->kind(), Kind::kBool);
    EXPECT_EQ(text(e.find("profiling_name")).rfind("nccl:", 0), 0u);
    const auto& thread = text(e.find("thread_name"));
    EXPECT_TRUE(thread == "python3" || thread == "pt_autograd_0") << thread;  // rank 8: local GPU 0
  }
}

TEST(FrMegatronJob, OpIdCountsCollectivesAndP2pOfAGroupAndP2pKeepsTheCollectiveSeq) {
  MegatronJobSpec spec = real_like(MegatronFault::kNone, {});
  spec.only_active = false;
  spec.iterations = 2;
  const auto job = megatron_job(spec);
  for (const auto& [rank, bytes] : job.dumps) {
    std::map<std::string, std::pair<int64_t, int64_t>> last;  // group -> (collective seq, p2p seq)
    for (const auto& e : entries_of(bytes)) {
      const std::string group = text(&e.find("process_group")->items()[0]);
      const bool p2p = *e.find("is_p2p")->as_bool();
      const int64_t coll = integer(e.find("collective_seq_id")), p2p_seq = integer(e.find("p2p_seq_id"));
      auto& [prev_coll, prev_p2p] = last[group];
      if (p2p) {
        EXPECT_EQ(coll, prev_coll) << rank << " " << group;     // a send/recv records the current collective seq
        EXPECT_EQ(p2p_seq, prev_p2p + 1) << rank << " " << group;
      } else {
        EXPECT_EQ(coll, prev_coll + 1) << rank << " " << group;
        EXPECT_EQ(p2p_seq, prev_p2p) << rank << " " << group;
      }
      EXPECT_EQ(integer(e.find("op_id")), coll + p2p_seq);  // op_id_ bumps for both
      prev_coll = coll;
      prev_p2p = p2p_seq;
    }
  }
}

TEST(FrMegatronJob, AllToAllSizesDifferAcrossRanksAndPairUp) {
  MegatronJobSpec spec = real_like(MegatronFault::kNone, {});
  spec.only_active = false;
  spec.iterations = 1;
  const auto job = megatron_job(spec);
  // (EP group, seq) -> per rank (input rows, output rows)
  std::map<std::pair<std::string, int64_t>, std::map<int, std::pair<int64_t, int64_t>>> a2a;
  for (const auto& [rank, bytes] : job.dumps)
    for (const auto& e : entries_of(bytes))
      if (text(e.find("profiling_name")) == "nccl:all_to_all") {
        EXPECT_EQ(integer(e.find("timeout_ms")), 600000);
        a2a[{text(&e.find("process_group")->items()[0]), integer(e.find("collective_seq_id"))}][rank] = {
            first_shape(e.find("input_sizes"))[0], first_shape(e.find("output_sizes"))[0]};
      }
  ASSERT_FALSE(a2a.empty());
  int uneven = 0;
  for (const auto& [key, members] : a2a) {
    ASSERT_EQ(members.size(), 8u) << key.first << " #" << key.second;
    int64_t in = 0, out = 0;
    std::set<int64_t> ins, outs;
    for (const auto& [rank, io] : members) {
      in += io.first;
      out += io.second;
      ins.insert(io.first);
      outs.insert(io.second);
    }
    EXPECT_EQ(in, out) << key.first << " #" << key.second;
    // Dispatch and probs: every rank sends seq/tp rows and receives its own count; combine: the reverse.
    EXPECT_TRUE((ins.size() == 1) != (outs.size() == 1)) << key.first << " #" << key.second;
    uneven += ins.size() > 1 || outs.size() > 1;
  }
  EXPECT_EQ(uneven, int(a2a.size()));
}

TEST(FrMegatronJob, A2aCountMismatchLeavesOneUnpairedDispatchOpenOnEveryEpMember) {
  const auto job = megatron_job(real_like(MegatronFault::kA2aCountMismatch, {5}));
  EXPECT_EQ(job.culprits, (std::vector<int>{5}));
  // The EP group of rank 5 is ranks 0..7: each has the same all_to_all seq as its oldest open one.
  std::map<int, std::pair<int64_t, std::pair<int64_t, int64_t>>> oldest;  // rank -> (seq, (in, out))
  for (int r = 0; r < 8; ++r)
    for (const auto& e : entries_of(job.dumps.at(r)))
      if (text(e.find("profiling_name")) == "nccl:all_to_all") {
        oldest[r] = {integer(e.find("collective_seq_id")),
                     {first_shape(e.find("input_sizes"))[0], first_shape(e.find("output_sizes"))[0]}};
        EXPECT_EQ(first_shape(e.find("input_sizes")).size(), 2u);  // the dispatch: [rows, hidden]
        break;
      }
  ASSERT_EQ(oldest.size(), 8u);
  int64_t in = 0, out = 0;
  for (const auto& [r, s] : oldest) {
    EXPECT_EQ(s.first, oldest[0].first) << r;
    in += s.second.first;
    out += s.second.second;
    EXPECT_EQ(s.second.first, r == 5 ? 2049 : 2048) << r;
  }
  EXPECT_EQ(in, out + 1);
}

TEST(FrMegatronJob, P2pEntriesNameGroupLocalPeersSelfFirst) {
  const auto job = megatron_job(real_like(MegatronFault::kGpuError));
  int seen_pp = 0, seen_world = 0;
  for (const auto& [rank, bytes] : job.dumps) {
    const FrDump d = parsed(bytes);
    for (const auto& e : d.entries) {
      if (!e.is_p2p) continue;
      const std::string name(e.profiling_name);
      const bool send = name.rfind("nccl:send ", 0) == 0;
      const int peer_global = rank < 8 ? rank + 8 : rank - 8;
      if (e.group_desc == "PIPELINE_MODEL_PARALLEL_GROUP") {
        // Megatron's _p2p_ops with a 2-rank pipeline group: the even stage sends forward and the odd
        // stage receives on it, the other direction uses the default group.
        const int me = rank < 8 ? 0 : 1;
        EXPECT_EQ(name, std::string("nccl:") + (rank < 8 ? "send " : "recv ") + std::to_string(me) +
                            (rank < 8 ? "->" : "<-") + std::to_string(1 - me));
        EXPECT_EQ(e.peer_in_group, 1 - me);
        ++seen_pp;
      } else {
        EXPECT_EQ(e.group_desc, "default_pg");
        EXPECT_EQ(name, std::string("nccl:") + (send ? "send " : "recv ") + std::to_string(rank) + (send ? "->" : "<-") +
                            std::to_string(peer_global));
        EXPECT_EQ(send, rank >= 8);
        EXPECT_EQ(e.peer_in_group, peer_global);
        ++seen_world;
      }
    }
  }
  EXPECT_GT(seen_pp, 0);
  EXPECT_GT(seen_world, 0);

  // PP 4: both directions on the pipeline group, peers numbered within it.
  MegatronJobSpec spec;
  spec.layout.tp = 2;
  spec.layout.pp = 4;
  spec.layout.dp = 2;
  spec.only_active = false;
  spec.iterations = 1;
  const auto job4 = megatron_job(spec);
  std::set<std::string> names;
  for (const auto& e : parsed(job4.dumps.at(5)).entries)
    if (e.is_p2p) {
      EXPECT_EQ(e.group_desc, "PIPELINE_MODEL_PARALLEL_GROUP");
      names.insert(std::string(e.profiling_name));
    }
  EXPECT_EQ(names, (std::set<std::string>{"nccl:recv 1<-0", "nccl:send 1->2", "nccl:recv 1<-2", "nccl:send 1->0"}));
}

// pg_status holds the seq of the newest enqueued and the newest completed Work of each group: the
// collective seq for a collective, the p2p seq for a send/recv.
void expect_pg_status_agrees_with_entries(const std::vector<uint8_t>& bytes, int rank) {
  const Value root = root_of(bytes);
  const auto status = pg_status_by_id(root);
  std::map<int64_t, std::pair<int64_t, int64_t>> from_entries;  // pg_id -> (enqueued, completed)
  for (const auto& e : root.find("entries")->items()) {
    const int64_t seq = *e.find("is_p2p")->as_bool() ? integer(e.find("p2p_seq_id")) : integer(e.find("collective_seq_id"));
    auto& [enq, done] = from_entries.try_emplace(integer(e.find("pg_id")), -1, -1).first->second;
    enq = seq;
    if (text(e.find("state")) == "completed") done = seq;
  }
  for (const auto& [pg_id, seqs] : from_entries) {
    ASSERT_TRUE(status.count(pg_id)) << rank << " pg " << pg_id;
    EXPECT_EQ(integer(status.at(pg_id).find("last_enqueued_collective")), seqs.first) << rank << " pg " << pg_id;
    EXPECT_EQ(integer(status.at(pg_id).find("last_completed_collective")), seqs.second) << rank << " pg " << pg_id;
  }
}

TEST(FrMegatronJob, PgStatusAgreesWithTheEntries) {
  for (auto fault : {MegatronFault::kNone, MegatronFault::kGpuError, MegatronFault::kGilHeld}) {
    MegatronJobSpec spec = real_like(fault);
    spec.only_active = false;
    spec.ring = 1 << 20;  // every record in the dump
    for (const auto& [rank, bytes] : megatron_job(spec).dumps) expect_pg_status_agrees_with_entries(bytes, rank);
  }
}

TEST(FrMegatronJob, GpuErrorRankReportsFewerCompletionsThanItsPeersRan) {
  const auto job = megatron_job(real_like(MegatronFault::kGpuError));
  auto tp_status = [&](int rank) {
    const FrDump d = parsed(job.dumps.at(rank));
    // TENSOR_MODEL_PARALLEL_GROUP is pg_id 5 on every rank of this layout.
    return d.status_by_pg_id.at(5);
  };
  const FrStatus nine = tp_status(9);
  for (int peer : {8, 10, 11}) {
    const FrStatus p = tp_status(peer);
    EXPECT_LT(nine.last_completed, p.last_completed) << peer;
    // Its GPU still ran what its host enqueued: the peers completed all of it with rank 9 ...
    EXPECT_GE(p.last_completed, nine.last_enqueued) << peer;
    // ... and went on to enqueue what rank 9's blocked host never did.
    EXPECT_GT(p.last_enqueued, nine.last_enqueued) << peer;
  }
  // Rank 9 dumps every TP entry from the first one its watchdog could not see complete.
  const FrDump d9 = parsed(job.dumps.at(9));
  int64_t first_open_tp = -1;
  for (const auto& e : d9.entries)
    if (e.group_desc == "TENSOR_MODEL_PARALLEL_GROUP") {
      first_open_tp = e.collective_seq;
      break;
    }
  EXPECT_EQ(first_open_tp, nine.last_completed + 1);
}

TEST(FrMegatronJob, GilHeldRanksDumpNoEntries) {
  const auto job = megatron_job(real_like(MegatronFault::kGilHeld));
  EXPECT_EQ(job.culprits, (std::vector<int>{9, 14}));
  for (const auto& [rank, bytes] : job.dumps) {
    const FrDump d = parsed(bytes);
    if (rank == 9 || rank == 14) {
      EXPECT_TRUE(d.entries.empty()) << rank;
      EXPECT_EQ(d.status_by_pg_id.size(), 13u);
    } else if (rank >= 8) {
      EXPECT_FALSE(d.entries.empty()) << rank;
    }
  }
  // Their EP peers enqueued past them (pg_id 11 is EXPERT_MODEL_PARALLEL_GROUP on the last stage).
  EXPECT_GT(parsed(job.dumps.at(8)).status_by_pg_id.at(11).last_enqueued, parsed(job.dumps.at(9)).status_by_pg_id.at(11).last_enqueued);
}

TEST(FrMegatronJob, KilledRankWritesNoDump) {
  const auto job = megatron_job(real_like(MegatronFault::kKilled, {9}));
  EXPECT_EQ(job.culprits, (std::vector<int>{9}));
  EXPECT_EQ(job.dumps.size(), 15u);
  EXPECT_EQ(job.dumps.count(9), 0u);
  bool waits_on_nine = false;
  for (const auto& [rank, bytes] : job.dumps) {
    const FrDump d = parsed(bytes);
    for (const auto& e : d.entries) {
      const auto& members = d.groups.at(std::string(e.group)).ranks;
      waits_on_nine |= std::find(members.begin(), members.end(), 9) != members.end();
    }
  }
  EXPECT_TRUE(waits_on_nine);
}

TEST(FrMegatronJob, StageStallNamesEveryRankOfTheStage) {
  MegatronJobSpec spec;
  spec.layout.tp = 2;
  spec.layout.pp = 4;
  spec.layout.dp = 2;
  spec.fault = MegatronFault::kStageStall;
  spec.fault_ranks = {5};
  const auto job = megatron_job(spec);
  EXPECT_EQ(job.culprits, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(job.dumps.size(), 16u);
  for (const auto& [rank, bytes] : job.dumps) EXPECT_EQ(parsed(bytes).groups.size(), rank < 4 || rank >= 12 ? 13u : 12u) << rank;
}

TEST(FrMegatronJob, HealthyJobIsDumpedWithNothingOpen) {
  MegatronJobSpec spec;
  const auto active = megatron_job(spec);
  EXPECT_TRUE(active.culprits.empty());
  for (const auto& [rank, bytes] : active.dumps) {
    const Value root = root_of(bytes);
    EXPECT_TRUE(root.find("entries")->items().empty()) << rank;
    for (const auto& [id, st] : pg_status_by_id(root))
      EXPECT_EQ(integer(st.find("last_completed_collective")), integer(st.find("last_enqueued_collective"))) << rank;
  }
  spec.only_active = false;
  for (const auto& [rank, bytes] : megatron_job(spec).dumps) {
    const auto entries = entries_of(bytes);
    // Fewer records than the ring holds (5 iterations of this layout): all of them, from record 0.
    ASSERT_FALSE(entries.empty());
    EXPECT_LT(entries.size(), 2000u);
    EXPECT_EQ(integer(entries.front().find("record_id")), 0);
    EXPECT_EQ(integer(entries.back().find("record_id")), int64_t(entries.size()) - 1);
    for (const auto& e : entries) {
      EXPECT_EQ(text(e.find("state")), "completed");
      EXPECT_EQ(e.find("retired")->as_bool(), true);
      EXPECT_GE(integer(e.find("time_discovered_completed_ns")), integer(e.find("time_created_ns")));
    }
    for (const auto& e : parsed(bytes).entries) EXPECT_TRUE(e.completed);
  }
}

TEST(FrMegatronJob, RingKeepsTheNewestRecordsInOrder) {
  MegatronJobSpec spec = real_like(MegatronFault::kGpuError);
  spec.only_active = false;
  spec.ring = 100;
  for (const auto& [rank, bytes] : megatron_job(spec).dumps) {
    const auto entries = entries_of(bytes);
    ASSERT_EQ(entries.size(), 100u);
    for (size_t i = 1; i < entries.size(); ++i) {
      EXPECT_EQ(integer(entries[i].find("record_id")), integer(entries[i - 1].find("record_id")) + 1);
      EXPECT_GT(integer(entries[i].find("time_created_ns")), integer(entries[i - 1].find("time_created_ns")));
    }
  }
}

TEST(FrMegatronJob, BatchedP2pRecordsPerOpEntriesThatNeverCompleteAndACoalescedWork) {
  MegatronJobSpec spec;
  spec.layout.batch_p2p_comm = true;
  spec.only_active = false;
  spec.iterations = 1;
  const auto job = megatron_job(spec);
  const Value root = root_of(job.dumps.at(0));
  int coalesced = 0, members = 0;
  for (const auto& e : root.find("entries")->items()) {
    const auto& name = text(e.find("profiling_name"));
    if (name == "nccl:coalesced") {
      ++coalesced;
      EXPECT_TRUE(e.find("input_sizes")->items().empty());
      EXPECT_EQ(e.find("is_p2p")->as_bool(), false);
      EXPECT_EQ(text(e.find("state")), "completed");
      EXPECT_EQ(text(&e.find("process_group")->items()[1]), "PIPELINE_MODEL_PARALLEL_GROUP");
    } else if (*e.find("is_p2p")->as_bool()) {
      ++members;
      EXPECT_EQ(text(e.find("state")), "scheduled");  // recorded with no events (pytorch/pytorch#137969)
      EXPECT_EQ(e.find("retired")->as_bool(), false);
    }
  }
  // First of 2 stages, 4 microbatches: send_forward (warmup), send_forward_recv_backward x3 (steady
  // state), recv_backward (cooldown): 5 batches of 1 + 3 x 2 + 1 ops.
  EXPECT_EQ(coalesced, 5);
  EXPECT_EQ(members, 8);
}

TEST(FrMegatronJob, DeterministicPerSeed) {
  MegatronJobSpec spec = real_like(MegatronFault::kGpuError);
  const auto a = megatron_job(spec), b = megatron_job(spec);
  EXPECT_EQ(a.dumps, b.dumps);
  EXPECT_EQ(a.description, b.description);
  spec.seed = 2;
  EXPECT_NE(megatron_job(spec).dumps, a.dumps);
}

// The real job (tests/fixtures/torch_fr/real-megatron-moe, from NVIDIA/nvidia-resiliency-ext's
// tests/attribution/unit/fr_traces, Apache-2.0): the same groups (name, desc, members) and pg_status
// keys on every rank, the same keys, and, for the GIL run, no entries on the ranks holding the GIL.
void expect_like_the_real_dumps(const char* folder, MegatronFault fault) {
  const fs::path real = fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/torch_fr/real-megatron-moe" / folder;
  if (!fs::exists(real / "_dump_0")) GTEST_SKIP() << "no real Megatron dumps at " << real.string();
  const auto job = megatron_job(real_like(fault));
  for (int rank = 0; rank < 16; ++rank) {
    std::ifstream in(real / ("_dump_" + std::to_string(rank)), std::ios::binary);
    const std::vector<uint8_t> real_bytes{std::istreambuf_iterator<char>(in), {}};
    const Value want = root_of(real_bytes), got = root_of(job.dumps.at(rank));
    EXPECT_EQ(keys_of(got), keys_of(want));
    EXPECT_EQ(text(got.find("version")), text(want.find("version")));
    EXPECT_EQ(text(got.find("nccl_version")), text(want.find("nccl_version")));
    EXPECT_EQ(keys_of(*got.find("pg_config")), keys_of(*want.find("pg_config"))) << rank;
    for (const auto& [name, info] : want.find("pg_config")->entries()) {
      const Value* mine = got.find("pg_config")->find(*name.as_string());
      ASSERT_NE(mine, nullptr) << rank << " " << *name.as_string();
      EXPECT_EQ(text(mine->find("desc")), text(info.find("desc"))) << rank;
      EXPECT_EQ(text(mine->find("ranks")), text(info.find("ranks"))) << rank;
    }
    EXPECT_EQ(keys_of(*got.find("pg_status")), keys_of(*want.find("pg_status"))) << rank;
    const auto& want_entries = want.find("entries")->items();
    const auto& got_entries = got.find("entries")->items();
    EXPECT_EQ(want_entries.empty(), got_entries.empty()) << rank;
    if (!want_entries.empty() && !got_entries.empty()) {
      EXPECT_EQ(keys_of(got_entries[0]), keys_of(want_entries[0]));
    }
  }
}

TEST(FrMegatronJob, LikeTheRealGpuErrorDumps) { expect_like_the_real_dumps("gpu_error_2nd", MegatronFault::kGpuError); }
TEST(FrMegatronJob, LikeTheRealGilDumps) { expect_like_the_real_dumps("lock_gil_1st", MegatronFault::kGilHeld); }

}  // namespace
}  // namespace rankscope::torch_fr::testing
