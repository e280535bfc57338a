// runtime_unit_test.cpp — the trainer's runtime pieces in one process, without MPI: --inject
// parsing and the fault points, loss models, the probe decorator over the loopback communicator
// (read back from a real flight recorder), data sources and the DP-aware loader, DDP bucket plans
// and gradient reporting, the LR schedule, flags and the progress line.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <set>

#include "comm/loopback_communicator.h"
#include "comm/probed_communicator.h"
#include "comm/process_groups.h"
#include "data/data_loader.h"
#include "data/shard_source.h"
#include "data/synthetic_source.h"
#include "faults/fault_injector.h"
#include "faults/fault_spec.h"
#include "faults/loss_model.h"
#include "ops/cpu/cpu_ops.h"
#include "parallel/ddp_reducer.h"
#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/run_directory_layout.h"
#include "tokenizer/token_shard.h"
#include "train/lr_schedule.h"
#include "train/metrics_log.h"
#include "train/train_options.h"

namespace gpt2 {
namespace {

std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::path(RANKSCOPE_BINARY_DIR) / "runtime-unit" / name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// A real probe of rank 0 writing into `dir` (no GPU plug-ins).
rankscope::Result<std::unique_ptr<rankscope::probe::Probe>> make_probe(const std::filesystem::path& dir) {
  rankscope::probe::Options po;
  po.run_dir = dir;
  po.nvtx = false;
  po.cupti = false;
  return rankscope::probe::Probe::create(po);
}

// ---------------------------------------------------------------- --inject

TEST(FaultSpec, ParsesEveryKind) {
  auto s = parse_fault_spec("stall:rank=1,range=forward/block0/mlp,step=3");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->kind, FaultKind::kStall);
  EXPECT_EQ(s->rank, 1);
  EXPECT_EQ(s->range, "forward/block0/mlp");
  EXPECT_EQ(s->step, 3);
  auto d = parse_fault_spec("delay:rank=0,range=step,ms=12.5");
  ASSERT_TRUE(d.ok());
  EXPECT_DOUBLE_EQ(d->ms, 12.5);
  EXPECT_EQ(d->step, -1);
  auto r = parse_fault_spec("resize:rank=2,comm=tp1,seq=40,factor=0.5");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->comm, "tp1");
  EXPECT_EQ(r->seq, 40u);
  EXPECT_DOUBLE_EQ(r->factor, 0.5);
  EXPECT_TRUE(parse_fault_spec("skip:rank=0,comm=dp0,seq=7").ok());
  EXPECT_TRUE(parse_fault_spec("crash:rank=3,step=9,range=optimizer").ok());
  EXPECT_TRUE(parse_fault_spec("drop-grad:rank=1,param=wte.weight").ok());
  auto g = parse_fault_spec("lossy:model=gilbert-elliott,p_gb=0.1,p_bg=0.4,loss_good=0.01,loss_bad=0.9");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->loss_model, LossModel::kGilbertElliott);
  EXPECT_EQ(g->rank, -1);
}

TEST(FaultSpec, ClearErrors) {
  struct Case {
    const char* text;
    const char* needle;
  };
  for (const Case& c : {Case{"boom:rank=1", "unknown fault kind 'boom' (known: stall, delay"},
                        Case{"stall:rank=1", "stall needs range="},
                        Case{"stall:rank=1,range=step,step=2,color=red", "unknown key 'color' for stall (allowed: rank, range, step)"},
                        Case{"delay:rank=x,range=step,ms=3", "rank=x is not an integer"},
                        Case{"skip:rank=0,comm=tp0,seq=1,seq=2", "given twice"},
                        Case{"lossy:model=bernoulli", "model=bernoulli needs p="},
                        Case{"lossy:model=bernoulli,p=1.5", "p=1.5 is not a number in [0, 1]"},
                        Case{"lossy:model=bernoulli,p=0.1,p_gb=0.2", "p_gb= does not belong to model=bernoulli"},
                        Case{"lossy:model=smoke,p=0.1", "unknown loss model 'smoke'"},
                        Case{"crash:rank=1,step", "'step' is not key=value"}}) {
    auto s = parse_fault_spec(c.text);
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_NE(s.status().message().find(c.needle), std::string::npos) << s.status().message();
    EXPECT_NE(s.status().message().find(std::string("--inject ") + c.text), std::string::npos);
  }
}

TEST(LossModel, BernoulliRate) {
  FaultSpec f = *parse_fault_spec("lossy:model=bernoulli,p=0.2");
  LossModelState m(f, 0);
  int lost = 0;
  for (int i = 0; i < 100000; ++i) lost += m.next_chunk_lost();
  EXPECT_NEAR(lost / 1e5, 0.2, 0.01);
}

TEST(LossModel, GilbertElliottIsBursty) {
  FaultSpec f = *parse_fault_spec("lossy:model=gilbert-elliott,p_gb=0.02,p_bg=0.25,loss_good=0,loss_bad=1");
  LossModelState m(f, 3);
  int lost = 0, bursts = 0;
  bool prev = false;
  for (int i = 0; i < 200000; ++i) {
    bool l = m.next_chunk_lost();
    lost += l;
    bursts += (l && !prev);
    prev = l;
  }
  // Long-run loss p_gb / (p_gb + p_bg); mean burst length 1 / p_bg.
  EXPECT_NEAR(lost / 2e5, 0.02 / 0.27, 0.01);
  EXPECT_NEAR(static_cast<double>(lost) / bursts, 4.0, 0.4);
}

std::vector<FaultSpec> specs(std::initializer_list<const char*> texts) {
  std::vector<FaultSpec> out;
  for (const char* t : texts) out.push_back(*parse_fault_spec(t));
  return out;
}

TEST(FaultInjector, KeepsOnlyThisRanksFaultsAndFiresOnce) {
  FaultInjector other(specs({"skip:rank=1,comm=tp0,seq=2"}), 0, nullptr);
  EXPECT_TRUE(other.empty());
  FaultInjector inj(specs({"skip:rank=1,comm=tp0,seq=2", "resize:rank=1,comm=dp0,seq=0,factor=3"}), 1, nullptr);
  CollectiveCall call{"tp0", 2, rankscope::format::CollectiveOp::kAllReduceSum, DataType::kFloat32, 10};
  EXPECT_TRUE(inj.before_collective(call).skip);
  // After a skip the next call carries the same sequence number; it must go through.
  EXPECT_FALSE(inj.before_collective(call).skip);
  CollectiveCall dp{"dp0", 0, rankscope::format::CollectiveOp::kAllReduceSum, DataType::kFloat32, 10};
  auto d = inj.before_collective(dp);
  ASSERT_TRUE(d.count.has_value());
  EXPECT_EQ(*d.count, 30u);
  EXPECT_FALSE(inj.before_collective(dp).count.has_value());
}

TEST(FaultInjector, DropGradOnlyAtItsStep) {
  FaultInjector inj(specs({"drop-grad:rank=0,param=h.0.mlp.c_fc.weight,step=4"}), 0, nullptr);
  inj.set_step(3);
  EXPECT_FALSE(inj.drop_grad("h.0.mlp.c_fc.weight"));
  inj.set_step(4);
  EXPECT_TRUE(inj.drop_grad("h.0.mlp.c_fc.weight"));
  EXPECT_FALSE(inj.drop_grad("wte.weight"));
}

TEST(FaultInjector, DelaySleepsOnlyInItsRange) {
  FaultInjector inj(specs({"delay:rank=0,range=optimizer,ms=60"}), 0, nullptr);
  auto t0 = std::chrono::steady_clock::now();
  inj.on_range_enter("step");
  auto t1 = std::chrono::steady_clock::now();
  inj.on_range_enter("optimizer");
  auto t2 = std::chrono::steady_clock::now();
  EXPECT_LT(t1 - t0, std::chrono::milliseconds(30));
  EXPECT_GE(t2 - t1, std::chrono::milliseconds(60));
}

TEST(FaultInjector, LossyZeroesWholeChunksOfTpPayloadsOnly) {
  FaultInjector inj(specs({"lossy:model=bernoulli,p=0.5,chunk=16"}), 0, nullptr);
  std::vector<float> buf(1024, 1.0f);
  CollectiveCall tp{"tp0", 0, rankscope::format::CollectiveOp::kAllReduceSum, DataType::kFloat32, buf.size()};
  inj.on_payload(tp, buf.data(), buf.size() * 4);
  int zero_chunks = 0;
  for (size_t c = 0; c < buf.size(); c += 4) {  // 16-byte chunks = 4 floats, all or nothing
    int zeros = 0;
    for (size_t i = c; i < c + 4; ++i) zeros += buf[i] == 0.0f;
    EXPECT_TRUE(zeros == 0 || zeros == 4);
    zero_chunks += zeros == 4;
  }
  EXPECT_GT(zero_chunks, 64);
  EXPECT_LT(zero_chunks, 192);
  std::vector<float> dp_buf(64, 1.0f);
  CollectiveCall dp{"dp0", 0, rankscope::format::CollectiveOp::kAllReduceSum, DataType::kFloat32, dp_buf.size()};
  inj.on_payload(dp, dp_buf.data(), dp_buf.size() * 4);
  EXPECT_EQ(std::accumulate(dp_buf.begin(), dp_buf.end(), 0.0f), 64.0f);
}

// ---------------------------------------------------------------- probe decorator

TEST(ProbedCommunicator, ReportsEveryCallWithSequenceNumbers) {
  auto dir = temp_dir("probed_comm");
  auto probe = make_probe(dir);
  ASSERT_TRUE(probe.ok()) << probe.status().to_string();
  FaultInjector inj(specs({"resize:rank=0,comm=world,seq=1,factor=2", "skip:rank=0,comm=world,seq=2"}), 0, probe->get());
  ProbedCommunicator world(std::make_unique<LoopbackCommunicator>("world"), probe->get(), &inj);
  std::vector<float> v(8, 1.0f);
  ASSERT_TRUE(world.all_reduce(v.data(), 8, DataType::kFloat32, ReduceOp::kSum).ok());   // seq 0
  ASSERT_TRUE(world.all_reduce(v.data(), 8, DataType::kFloat32, ReduceOp::kMax).ok());   // seq 1, resized to 16
  ASSERT_TRUE(world.broadcast(v.data(), 8, DataType::kFloat32, 0).ok());                 // skipped
  ASSERT_TRUE(world.broadcast(v.data(), 8, DataType::kFloat32, 0).ok());                 // seq 2
  EXPECT_EQ(v[0], 1.0f);  // a resized call never writes past or corrupts the caller's data
  auto sub = world.split("tp0", 0, 0);
  ASSERT_TRUE(sub);
  ASSERT_TRUE(sub->barrier().ok());

  auto snap = rankscope::format::read_flight_recorder(rankscope::format::flight_recorder_path(dir, 0));
  ASSERT_TRUE(snap.ok()) << snap.status().to_string();
  const auto* w = snap->comm("world");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->next_seq, 3u);
  ASSERT_EQ(w->ring.size(), 3u);
  EXPECT_EQ(w->ring[0].op, rankscope::format::CollectiveOp::kAllReduceSum);
  EXPECT_EQ(w->ring[0].count, 8u);
  EXPECT_EQ(w->ring[0].bytes, 32u);
  EXPECT_EQ(w->ring[0].state, rankscope::format::CollectiveState::kCompleted);
  EXPECT_EQ(w->ring[1].op, rankscope::format::CollectiveOp::kAllReduceMax);
  EXPECT_EQ(w->ring[1].count, 16u);
  EXPECT_EQ(w->ring[2].op, rankscope::format::CollectiveOp::kBroadcast);
  EXPECT_EQ(w->ring[2].peer, 0);
  const auto* t = snap->comm("tp0");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->next_seq, 1u);
  EXPECT_EQ(t->ring[0].op, rankscope::format::CollectiveOp::kBarrier);
}

TEST(GroupLayout, MegatronGroups) {
  auto l = GroupLayout::make(8, 2);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->dp, 4);
  EXPECT_EQ(l->tp_group(5), 2);
  EXPECT_EQ(l->tp_rank(5), 1);
  EXPECT_EQ(l->dp_group(5), 1);
  EXPECT_EQ(l->dp_rank(5), 2);
  auto groups = l->groups();
  ASSERT_EQ(groups.size(), 1u + 4 + 2);
  EXPECT_EQ(groups[0].name, "world");
  EXPECT_EQ(groups[2].name, "tp1");
  EXPECT_EQ(groups[2].ranks, (std::vector<int>{2, 3}));
  EXPECT_EQ(groups[6].name, "dp1");
  EXPECT_EQ(groups[6].ranks, (std::vector<int>{1, 3, 5, 7}));
  auto bad = GroupLayout::make(6, 4);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not a multiple of --tp 4"), std::string::npos);
}

TEST(GroupLayout, ExpertGroupsAreCarvedOutOfDataParallel) {
  // 16 ranks, TP 2, DP 8, EP 4: dp1 = {1,3,5,..,15}; its first 4 DP positions form one ep group,
  // positions 0 and 4 of dp1 hold the same experts and form an edp group.
  auto l = GroupLayout::make(16, 2, 4);
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  EXPECT_EQ(l->edp, 2);
  EXPECT_EQ(l->ep_group(5), 1);  // dp_rank 2, tp_rank 1
  EXPECT_EQ(l->ep_rank(5), 2);
  EXPECT_EQ(l->edp_group(5), 5);  // ep_rank 2 * tp 2 + tp_rank 1
  EXPECT_EQ(l->edp_rank(5), 0);
  auto groups = l->groups();
  ASSERT_EQ(groups.size(), 1u + 8 + 2 + 4 + 8);  // world, tp, dp, ep, edp
  EXPECT_EQ(groups[11].name, "ep0");
  EXPECT_EQ(groups[11].ranks, (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(groups[12].name, "ep1");
  EXPECT_EQ(groups[12].ranks, (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(groups[13].name, "ep2");
  EXPECT_EQ(groups[13].ranks, (std::vector<int>{8, 10, 12, 14}));
  EXPECT_EQ(groups[15].name, "edp0");
  EXPECT_EQ(groups[15].ranks, (std::vector<int>{0, 8}));
  EXPECT_EQ(groups[20].name, "edp5");
  EXPECT_EQ(groups[20].ranks, (std::vector<int>{5, 13}));
  // Every rank is in exactly one ep and one edp group, at the position the arithmetic says.
  for (int r = 0; r < 16; ++r) {
    const auto& e = groups[11 + static_cast<size_t>(l->ep_group(r))].ranks;
    ASSERT_LT(static_cast<size_t>(l->ep_rank(r)), e.size());
    EXPECT_EQ(e[static_cast<size_t>(l->ep_rank(r))], r);
    const auto& d = groups[15 + static_cast<size_t>(l->edp_group(r))].ranks;
    ASSERT_LT(static_cast<size_t>(l->edp_rank(r)), d.size());
    EXPECT_EQ(d[static_cast<size_t>(l->edp_rank(r))], r);
  }
  EXPECT_EQ(GroupLayout::make(8, 2)->groups().size(), 1u + 4 + 2);  // no ep/edp groups at EP 1
  auto bad = GroupLayout::make(12, 2, 4);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--ep 4 does not divide the data-parallel degree 6"),
            std::string::npos);
}

// ---------------------------------------------------------------- data

TEST(SyntheticSource, DeterministicAndSkewed) {
  SyntheticSource a(SyntheticDistribution::kZipf, 50257, 5), b(SyntheticDistribution::kZipf, 50257, 5);
  std::vector<int> x(20000), y(20000);
  a.read(1000, x);
  b.read(1000, y);
  EXPECT_EQ(x, y);
  int low = 0, even = 0;
  for (int id : x) {
    ASSERT_GE(id, 0);
    ASSERT_LT(id, 50257);
    low += id < 25216;
    even += id % 2 == 0;
  }
  EXPECT_GT(low, 5 * (20000 - low));                 // contiguous TP=2 shards: > 5:1
  EXPECT_NEAR(even / 20000.0, 0.5, 0.05);            // strided shards: balanced
  SyntheticSource u(SyntheticDistribution::kUniform, 1000, 1);
  u.read(0, x);
  EXPECT_NEAR(std::count_if(x.begin(), x.end(), [](int id) { return id < 500; }) / 20000.0, 0.5, 0.03);
}

TEST(DataLoader, DataParallelRanksSplitTheRowsOfOneWindow) {
  std::shared_ptr<const TokenSource> src = std::make_shared<SyntheticSource>(SyntheticDistribution::kUniform, 512, 9);
  const int T = 8;
  auto whole = DataLoader::create(src, {4, T, 0, 1, false, 0}, 512);
  auto r0 = DataLoader::create(src, {2, T, 0, 2, false, 0}, 512);
  auto r1 = DataLoader::create(src, {2, T, 1, 2, false, 0}, 512);
  ASSERT_TRUE(whole.ok() && r0.ok() && r1.ok());
  for (int step = 0; step < 3; ++step) {
    std::vector<int> wi(4 * T), wt(4 * T), ai(2 * T), at(2 * T), bi(2 * T), bt(2 * T);
    (*whole)->next(wi.data(), wt.data());
    (*r0)->next(ai.data(), at.data());
    (*r1)->next(bi.data(), bt.data());
    ai.insert(ai.end(), bi.begin(), bi.end());
    at.insert(at.end(), bt.begin(), bt.end());
    EXPECT_EQ(ai, wi);
    EXPECT_EQ(at, wt);
    for (int i = 0; i + 1 < 4 * T; ++i) EXPECT_EQ(wt[i], wi[i + 1]);  // targets are inputs shifted
  }
}

std::filesystem::path write_shard(const std::filesystem::path& dir, const std::string& name, int first, int n) {
  std::vector<int32_t> ids(n);
  std::iota(ids.begin(), ids.end(), first);
  auto p = dir / name;
  EXPECT_TRUE(write_token_shard(p.string(), ids).ok());
  return p;
}

TEST(ShardSource, GlobConcatenatesInNameOrderAndWrapsPerEpoch) {
  auto dir = temp_dir("shards");
  write_shard(dir, "corpus_001.bin", 100, 50);
  write_shard(dir, "corpus_000.bin", 0, 50);
  auto src = ShardSource::open((dir / "corpus_*.bin").string());
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  EXPECT_EQ((*src)->size(), 100u);
  EXPECT_EQ((*src)->files().size(), 2u);
  std::vector<int> x(100);
  (*src)->read(0, x);
  EXPECT_EQ(x[49], 49);
  EXPECT_EQ(x[50], 100);  // corpus_001 follows corpus_000
  std::shared_ptr<const TokenSource> shared = std::move(src).value();
  // B*T = 20: (100-1)/20 = 4 windows per epoch; the 5th batch starts over.
  auto loader = DataLoader::create(shared, {2, 10, 0, 1, false, 0}, 1024);
  ASSERT_TRUE(loader.ok());
  std::vector<int> in(20), tg(20), first(20);
  (*loader)->next(first.data(), tg.data());
  for (int i = 0; i < 3; ++i) (*loader)->next(in.data(), tg.data());
  (*loader)->next(in.data(), tg.data());
  EXPECT_EQ(in, first);
}

TEST(DataLoader, ShuffleVisitsEveryWindowOncePerEpoch) {
  auto dir = temp_dir("shuffle");
  write_shard(dir, "s.bin", 0, 401);
  auto shard = ShardSource::open((dir / "s.bin").string());
  ASSERT_TRUE(shard.ok());
  std::shared_ptr<const TokenSource> s = std::move(shard).value();
  auto a = DataLoader::create(s, {1, 10, 0, 1, true, 3}, 1024);
  auto b = DataLoader::create(s, {1, 10, 0, 1, true, 3}, 1024);
  ASSERT_TRUE(a.ok() && b.ok());
  std::set<int> starts;
  bool in_order = true;
  for (int i = 0; i < 40; ++i) {
    std::vector<int> x(10), y(10), x2(10), y2(10);
    (*a)->next(x.data(), y.data());
    (*b)->next(x2.data(), y2.data());
    EXPECT_EQ(x, x2);  // the same seed gives every rank the same order
    starts.insert(x[0]);
    in_order &= x[0] == i * 10;
  }
  EXPECT_EQ(starts.size(), 40u);
  EXPECT_FALSE(in_order);
}

TEST(DataLoader, ClearErrors) {
  std::shared_ptr<const TokenSource> src = std::make_shared<SyntheticSource>(SyntheticDistribution::kUniform, 50257, 2);
  auto too_big = DataLoader::create(src, {1, 10, 0, 1, false, 0}, 1000);
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.status().message().find("--vocab-size"), std::string::npos);
  auto missing = open_token_source("/nonexistent/x.bin", 1000, 0);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no such file"), std::string::npos);
  auto bad = open_token_source("synthetic:gauss", 1000, 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("synthetic:uniform, synthetic:zipf"), std::string::npos);
}

// ---------------------------------------------------------------- DDP

TEST(DdpBuckets, ContiguousReverseOrderFirstSmallWteLast) {
  auto ops = make_cpu_ops();
  ModelConfig c = *ModelConfig::preset("tiny");
  ParameterSet params(c, TensorParallel{}, *ops);
  std::vector<int> bucket_of;
  auto buckets = plan_ddp_buckets(params.infos(), bucket_of, 1 << 20, 64 << 10);
  ASSERT_GE(buckets.size(), 3u);
  EXPECT_LE(buckets[0].numel * 4, size_t{64} << 10);
  // Bucket 0 holds ln_f (final first); wte (index 0) is in the last bucket.
  EXPECT_EQ(bucket_of[lnf_bias_index(c.num_layers)], 0);
  EXPECT_EQ(bucket_of[kParamWte], static_cast<int>(buckets.size()) - 1);
  // Buckets tile the flat buffer from its end without gaps, each a contiguous range.
  size_t end = params.total_numel();
  for (const auto& b : buckets) {
    EXPECT_EQ(b.offset + b.numel, end);
    end = b.offset;
    for (int p : b.params) {
      EXPECT_GE(params.infos()[p].offset, b.offset);
      EXPECT_LE(params.infos()[p].offset + params.infos()[p].numel, b.offset + b.numel);
    }
  }
  EXPECT_EQ(end, 0u);
}

TEST(DdpReducer, ReportsGradientsAndDropsTheInjectedOne) {
  auto dir = temp_dir("ddp_probe");
  auto probe = make_probe(dir);
  ASSERT_TRUE(probe.ok());
  auto ops = make_cpu_ops();
  ModelConfig c = *ModelConfig::preset("tiny");
  ParameterSet params(c, TensorParallel{}, *ops);
  LoopbackCommunicator dp("dp0");
  DdpReducer reducer(params, dp, probe->get(), [](std::string_view p) { return p == "h.1.mlp.c_fc.weight"; });
  (*probe)->begin_step(1);
  reducer.begin_backward(true);
  for (int i = static_cast<int>(params.count()) - 1; i >= 0; --i) reducer.on_grad_ready(i);
  auto snap = rankscope::format::read_flight_recorder(rankscope::format::flight_recorder_path(dir, 0));
  ASSERT_TRUE(snap.ok());
  ASSERT_EQ(snap->params.size(), params.count());
  EXPECT_EQ(snap->params[kParamWte].bucket, reducer.bucket_of(kParamWte));
  auto missing = snap->missing_gradients();
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0]->name, "h.1.mlp.c_fc.weight");
  EXPECT_TRUE(reducer.finish_backward().ok());  // DP=1: nothing to wait for
  (*probe)->end_step();
}

// ---------------------------------------------------------------- loop pieces

TEST(LrSchedule, WarmupThenCosineToTheFloor) {
  LrSchedule s{1e-3f, 10, 110, 0.1f};
  EXPECT_FLOAT_EQ(s.at(1), 1e-4f);
  EXPECT_FLOAT_EQ(s.at(10), 1e-3f);
  EXPECT_NEAR(s.at(60), 0.55e-3f, 1e-6f);  // halfway down the cosine
  EXPECT_FLOAT_EQ(s.at(110), 1e-4f);
  EXPECT_GT(s.at(30), s.at(31));
}

TEST(TrainOptions, DefaultsFlagsAndErrors) {
  const char* ok[] = {"gpt2-train", "--model", "d6", "--tp=2", "--inject", "crash:rank=1,step=2",
                      "--inject", "delay:rank=0,range=step,ms=5", "--shuffle", "--steps", "30"};
  auto o = parse_train_options(11, ok);
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->model, "d6");
  EXPECT_EQ(o->tp, 2);
  EXPECT_EQ(o->inject.size(), 2u);
  EXPECT_TRUE(o->shuffle);
  EXPECT_EQ(o->warmup, 3);  // 10% of --steps
  const char* missing[] = {"gpt2-train", "--steps"};
  EXPECT_NE(parse_train_options(2, missing).status().message().find("--steps needs a value"), std::string::npos);
  const char* both[] = {"gpt2-train", "--resume", "a", "--init-from", "b"};
  EXPECT_FALSE(parse_train_options(5, both).ok());
  const char* help[] = {"gpt2-train", "--help"};
  EXPECT_TRUE(parse_train_options(2, help)->help);
  EXPECT_NE(train_usage().find("--vocab-shard"), std::string::npos);
}

TEST(MetricsLog, ProgressLine) {
  StepMetrics m;
  m.step = 12;
  m.total_steps = 200;
  m.loss = 5.2134f;
  m.tokens_per_s = 3210;
  m.step_ms = 41.2;
  EXPECT_EQ(progress_line(m), "step 12/200 | loss 5.21 | 3.2k tok/s | 41 ms");
}

}  // namespace
}  // namespace gpt2
