// gpt2_probe_ranges_test.cpp — forward and backward run under the range names of design.md §2
// (and finer ones nested inside), as recorded by a real probe into a run directory.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "model/gpt2.h"
#include "ops/cpu/cpu_ops.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/probe/probe.h"

namespace gpt2 {
namespace {

TEST(Gpt2ProbeRanges, EveryPhaseRunsUnderItsDesignName) {
  const auto run_dir = std::filesystem::temp_directory_path() /
                       ("rankscope_h2_ranges_" + std::to_string(::getpid()));
  std::filesystem::remove_all(run_dir);
  rankscope::probe::Options po;
  po.run_dir = run_dir;
  po.nvtx = false;
  po.cupti = false;
  po.watchdog_stacks = false;
  auto probe = rankscope::probe::Probe::create(po);
  ASSERT_TRUE(probe.ok()) << probe.status().to_string();

  auto ops = make_cpu_ops();
  GPT2::Options o;
  o.config = ModelConfig::preset("tiny").value();
  o.config.vocab_size = 256;
  o.config.max_seq_len = 8;
  o.batch = 1;
  o.seq_len = 8;
  auto model = std::move(GPT2::create(o, *ops, nullptr)).value();
  ASSERT_TRUE(model->init_weights(1).ok());
  std::vector<int> in = {1, 2, 3, 4, 5, 6, 7, 8}, tg = {2, 3, 4, 5, 6, 7, 8, 9};
  (*probe)->begin_step(0);
  ASSERT_TRUE(model->forward(in.data(), tg.data(), probe->get()).ok());
  ASSERT_TRUE(model->backward(1.0f, {}, probe->get()).ok());
  (*probe)->end_step();
  (*probe)->shutdown();

  auto stream = rankscope::format::read_event_stream(rankscope::format::event_stream_path(run_dir, 0));
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  ASSERT_EQ(stream->steps.size(), 1u);
  std::set<std::string> seen;
  for (const auto& r : stream->steps[0].ranges) seen.insert(std::string(stream->name(r.name_id)));
  for (const char* name :
       {"forward/embed", "forward/block0/attn", "forward/block1/mlp", "forward/block0/mlp/fc",
        "forward/block1/attn/sdpa", "forward/head", "forward/head/loss", "backward/head",
        "backward/block1/mlp", "backward/block0/attn", "backward/block0/attn/qkv", "backward/embed"}) {
    EXPECT_TRUE(seen.count(name)) << "range " << name << " was not recorded";
  }
  EXPECT_FALSE(seen.count("forward/block2/attn")) << "tiny has 2 blocks";
  std::filesystem::remove_all(run_dir);
}

}  // namespace
}  // namespace gpt2
