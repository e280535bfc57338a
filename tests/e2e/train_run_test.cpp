// train_run_test.cpp — gpt2-train's run-level behaviour: checkpoints resume to the same losses
// (alone and at TP=2 under mpirun), the model file is llm.c's format and loads with --init-from,
// --val-every writes val_loss, --sample prints text, metrics.jsonl has every field, and bad flags
// fail with a clear message.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "train_job.h"

namespace {

using namespace std::chrono_literals;

std::vector<std::string> args_for(const std::filesystem::path& dir, int steps) {
  return {"--model", "tiny", "--vocab-size", "1024", "--seq-len", "32", "--batch", "2",
          "--steps", std::to_string(steps), "--data", "synthetic:zipf", "--quiet", "--run-dir", dir.string()};
}

std::vector<std::string> with(std::vector<std::string> a, std::initializer_list<std::string> extra) {
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

void resume_matches_straight_run(const std::string& name, int np, std::initializer_list<std::string> layout) {
  auto straight = e2e::fresh_run_dir(name + "_straight");
  auto first = e2e::fresh_run_dir(name + "_first");
  auto resumed = e2e::fresh_run_dir(name + "_resumed");
  std::string out;
  ASSERT_EQ(e2e::run_to_end(e2e::train_command(np, with(args_for(straight, 6), layout)), straight, 180s, &out), 0) << out;
  ASSERT_EQ(e2e::run_to_end(e2e::train_command(np, with(with(args_for(first, 6), layout), {"--save-every", "3"})),
                            first, 180s, &out), 0) << out;
  // --save-every 3 wrote checkpoints/step_00000003 and step_00000006 (complete: state.json last).
  const auto ckpt = first / "checkpoints" / "step_00000003";
  ASSERT_TRUE(std::filesystem::exists(ckpt / "state.json")) << out;
  for (const auto& e : std::filesystem::directory_iterator(ckpt)) EXPECT_NE(e.path().extension(), ".tmp");
  ASSERT_EQ(e2e::run_to_end(e2e::train_command(np, with(with(args_for(resumed, 6), layout), {"--resume", ckpt.string()})),
                            resumed, 180s, &out), 0) << out;
  auto a = e2e::read_losses(straight);
  auto b = e2e::read_losses(resumed);
  ASSERT_EQ(a.size(), 6u);
  ASSERT_EQ(b.size(), 3u) << "the resumed run logs steps 4..6";
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(b[i], a[3 + i], 1e-6 * std::fabs(a[3 + i])) << "step " << 4 + i;
}

TEST(TrainRun, ResumeGivesTheLossesOfAStraightRun) { resume_matches_straight_run("resume1", 0, {}); }

TEST(TrainRun, ResumeAtTensorParallel2) { resume_matches_straight_run("resume_tp2", 2, {"--tp", "2"}); }

TEST(TrainRun, ModelFileIsLlmcFormatAndLoadsWithInitFrom) {
  auto dir = e2e::fresh_run_dir("llmc_file");
  std::string out;
  ASSERT_EQ(e2e::run_to_end(e2e::train_command(0, with(args_for(dir, 2), {"--save-every", "2"})), dir, 120s, &out), 0) << out;
  const auto model = dir / "checkpoints" / "step_00000002" / "model.bin";
  std::ifstream in(model, std::ios::binary);
  int32_t header[8] = {};
  in.read(reinterpret_cast<char*>(header), sizeof header);
  EXPECT_EQ(header[0], 20240326);
  EXPECT_EQ(header[1], 3);       // fp32
  EXPECT_EQ(header[3], 1024);    // V
  EXPECT_EQ(header[4], 2);       // L
  EXPECT_EQ(header[5], 4);       // NH
  EXPECT_EQ(header[6], 128);     // C
  EXPECT_EQ(header[7], 1024);    // Vp: V padded to 128

  auto next = e2e::fresh_run_dir("llmc_init_from");
  auto args = args_for(next, 1);
  // --init-from takes the model shape from the file (no --vocab-size needed).
  args = {"--init-from", model.string(), "--seq-len", "32", "--batch", "2", "--steps", "1",
          "--data", "synthetic:zipf", "--quiet", "--run-dir", next.string()};
  ASSERT_EQ(e2e::run_to_end(e2e::train_command(0, args), next, 120s, &out), 0) << out;
  auto trained = e2e::read_losses(dir);
  auto loaded = e2e::read_losses(next);
  ASSERT_EQ(loaded.size(), 1u);
  // Trained weights start lower than a fresh model on the same distribution.
  EXPECT_LT(loaded[0], std::log(1024.0));
}

TEST(TrainRun, ValidationSamplingAndMetricsFields) {
  const auto val = std::filesystem::path(RANKSCOPE_SOURCE_DIR) / "data/tinyshakespeare/tiny_shakespeare_val.bin";
  if (!std::filesystem::exists(val)) GTEST_SKIP() << "no shipped val shard";
  auto dir = e2e::fresh_run_dir("val_sample");
  std::vector<std::string> args = {"--model", "tiny", "--seq-len", "32", "--batch", "2", "--steps", "4",
                                   "--val-every", "2", "--val-batches", "2", "--sample", "12",
                                   "--run-dir", dir.string()};
  std::string out;
  ASSERT_EQ(e2e::run_to_end(e2e::train_command(0, args), dir, 180s, &out), 0) << out;
  EXPECT_NE(out.find("device: cpu"), std::string::npos) << out;
  EXPECT_NE(out.find("step 4/4 | loss "), std::string::npos) << out;
  EXPECT_NE(out.find("sample (12 tokens"), std::string::npos) << out;
  std::ifstream in(dir / "metrics.jsonl");
  std::string line;
  int lines = 0, with_val = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    for (const char* key : {"step", "loss", "lr", "grad_norm", "tokens_per_s", "step_ms"})
      EXPECT_TRUE(j.contains(key)) << key << " missing in " << line;
    if (j.contains("val_loss")) {
      ++with_val;
      EXPECT_GT(j["val_loss"].get<double>(), 0);
      EXPECT_EQ(j["step"].get<int>() % 2, 0);
    }
    ++lines;
  }
  EXPECT_EQ(lines, 4);
  EXPECT_EQ(with_val, 2);
  // run.json names the program, layout and groups.
  std::ifstream rj(dir / "run.json");
  auto run = nlohmann::json::parse(rj, nullptr, false);
  ASSERT_FALSE(run.is_discarded());
  EXPECT_EQ(run.value("program", ""), "gpt2-train");
}

TEST(TrainRun, BadFlagsFailClearly) {
  auto dir = e2e::fresh_run_dir("bad_flags");
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : {Case{{"--model", "d99"}, "unknown model 'd99'"},
                        Case{{"--inject", "explode:rank=0"}, "unknown fault kind 'explode'"},
                        Case{{"--inject", "stall:rank=0,range=step,step=1,when=now"}, "unknown key 'when'"},
                        Case{{"--steps", "many"}, "--steps"},
                        Case{{"--inject", "crash:rank=5,step=1", "--steps", "1"}, "rank 5 does not exist"},
                        Case{{"--inject", "drop-grad:rank=0,param=h.0.nope", "--steps", "1"}, "no parameter 'h.0.nope'"},
                        Case{{"--data", "/nonexistent/shard.bin", "--steps", "1"}, "no such file"},
                        Case{{"--frobnicate"}, "unknown flag --frobnicate"}}) {
    std::string out;
    auto args = c.args;
    args.insert(args.end(), {"--run-dir", dir.string()});
    int code = e2e::run_to_end(e2e::train_command(0, args), dir, 60s, &out);
    EXPECT_NE(code, 0) << out;
    EXPECT_LT(code, 128) << "must exit, not crash: " << out;
    EXPECT_NE(out.find(c.message), std::string::npos) << out;
  }
}

}  // namespace
