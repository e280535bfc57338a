// moe_runtime_unit_test.cpp — the trainer's MoE runtime pieces in one process, without MPI: the
// --moe-* flags and their validation, the route-skew and a2a-miscount fault specs and what the
// injector hands the trainer, and DDP buckets that keep expert tensors apart (reduced over edp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "faults/fault_injector.h"
#include "faults/fault_spec.h"
#include "ops/cpu/cpu_ops.h"
#include "parallel/ddp_buckets.h"
#include "train/train_options.h"

namespace gpt2 {
namespace {

rankscope::Result<TrainOptions> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "gpt2-train");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_train_options(static_cast<int>(argv.size()), argv.data());
}

TEST(MoeTrainOptions, FlagsParseAndLandInMoeConfig) {
  auto o = parse({"--moe-experts", "8", "--moe-top-k", "2", "--moe-every", "2", "--moe-capacity-factor",
                  "1.25", "--moe-aux-loss-coef", "0.01", "--moe-expert-loop", "token", "--ep", "2"});
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->moe.experts, 8);
  EXPECT_EQ(o->moe.top_k, 2);
  EXPECT_EQ(o->moe.every, 2);
  EXPECT_FLOAT_EQ(o->moe.capacity_factor, 1.25f);
  EXPECT_FLOAT_EQ(o->moe.aux_loss_coef, 0.01f);
  EXPECT_EQ(o->moe.loop, ExpertLoop::kToken);
  EXPECT_TRUE(o->moe.is_moe_block(0));
  EXPECT_FALSE(o->moe.is_moe_block(1));
  EXPECT_NE(train_usage().find("--moe-expert-loop"), std::string::npos);
}

TEST(MoeTrainOptions, ClearErrors) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--moe-experts", "6", "--ep", "4"}, "cannot be sharded over --ep 4"},
      {{"--moe-aux-loss-coef", "0.01"}, "need --moe-experts"},
      {{"--moe-experts", "1", "--moe-top-k", "2"}, "exceeds --moe-experts 1"},
      {{"--moe-experts", "4", "--moe-top-k", "3"}, "not a number in [1, 2]"},
      {{"--moe-experts", "4", "--moe-capacity-factor", "-1"}, "--moe-capacity-factor"},
      {{"--moe-experts", "4", "--moe-expert-loop", "rows"}, "unknown --moe-expert-loop 'rows'"},
      {{"--moe-experts", "4", "--resume", "runs/x"}, "dense GPT-2 only"},
      {{"--moe-experts", "4", "--ep", "2", "--sample", "10"}, "--sample"},
  };
  for (const Case& c : cases) {
    auto o = parse(c.args);
    ASSERT_FALSE(o.ok()) << c.message;
    EXPECT_NE(o.status().message().find(c.message), std::string::npos) << o.status().to_string();
  }
}

TEST(MoeFaultSpec, ParsesRouteSkewAndMiscount) {
  auto skew = parse_fault_spec("route-skew:expert=3,bias=4.5");
  ASSERT_TRUE(skew.ok()) << skew.status().to_string();
  EXPECT_EQ(skew->kind, FaultKind::kRouteSkew);
  EXPECT_EQ(skew->expert, 3);
  EXPECT_DOUBLE_EQ(skew->bias, 4.5);
  EXPECT_EQ(skew->rank, -1);  // every rank
  auto miss = parse_fault_spec("a2a-miscount:rank=1,step=7,delta=-3");
  ASSERT_TRUE(miss.ok()) << miss.status().to_string();
  EXPECT_EQ(miss->kind, FaultKind::kA2aMiscount);
  EXPECT_EQ(miss->delta, -3);
  EXPECT_FALSE(parse_fault_spec("a2a-miscount:rank=1,step=7,delta=0").ok());
  EXPECT_FALSE(parse_fault_spec("a2a-miscount:rank=1,delta=2").ok());  // step= required
  EXPECT_FALSE(parse_fault_spec("route-skew:expert=-1,bias=1").ok());
}

TEST(MoeFaultInjector, BiasOnEveryRankMiscountOnlyOnItsRankAndStep) {
  std::vector<FaultSpec> specs = {*parse_fault_spec("route-skew:expert=2,bias=3"),
                                  *parse_fault_spec("a2a-miscount:rank=1,step=4,delta=5")};
  MoeConfig moe;
  moe.experts = 4;
  FaultInjector rank0(specs, 0, nullptr), rank1(specs, 1, nullptr);
  EXPECT_EQ(rank0.router_logit_bias(moe), (std::vector<float>{0, 0, 3, 0}));
  EXPECT_EQ(rank1.router_logit_bias(moe), rank0.router_logit_bias(moe));
  EXPECT_EQ(rank0.combine_miscount(4, 0).peer, -1);
  EXPECT_EQ(rank1.combine_miscount(3, 1).peer, -1);
  const CombineMiscount m = rank1.combine_miscount(4, 1);
  EXPECT_EQ(m.peer, 0);  // the lowest other EP rank: rank 1 of the incident expected rows from 0
  EXPECT_EQ(m.delta, 5);
  EXPECT_EQ(rank1.combine_miscount(4, 0).peer, 1);
  FaultInjector dense({*parse_fault_spec("route-skew:expert=2,bias=3")}, 0, nullptr);
  EXPECT_TRUE(dense.router_logit_bias(MoeConfig{}).empty());
}

TEST(MoeDdpBuckets, ExpertTensorsHaveBucketsOfTheirOwn) {
  auto ops = make_cpu_ops();
  ModelConfig c = *ModelConfig::preset("tiny");
  MoeConfig moe;
  moe.experts = 4;
  moe.every = 2;
  ParameterSet params(c, TensorParallel{}, *ops, moe, ExpertParallel{2, 1});
  std::vector<int> bucket_of;
  auto buckets = plan_ddp_buckets(params.infos(), bucket_of, 1 << 20, 64 << 10);
  int expert_buckets = 0;
  for (const auto& b : buckets) {
    for (int p : b.params) EXPECT_EQ(params.infos()[p].expert, b.expert) << params.infos()[p].name;
    expert_buckets += b.expert;
  }
  EXPECT_GE(expert_buckets, 1);
  EXPECT_EQ(params.index_of("h.0.mlp.experts.0.c_fc.weight"), -1);  // EP rank 1 holds experts 2, 3
  EXPECT_TRUE(params.infos()[params.index_of("h.0.mlp.experts.3.c_fc.weight")].expert);
  EXPECT_EQ(bucket_of[params.lnf_bias()], 0);
}

}  // namespace
}  // namespace gpt2
