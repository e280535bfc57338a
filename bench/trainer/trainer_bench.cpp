// trainer_bench.cpp — CPU training throughput of gpt2-train: tokens/s and step time for the d12
// (GPT-2 124M) and tiny presets at llm.c's CPU reference shape (B=4, T=64), with and without the
// probe. Prints numbers only; asserts nothing about speed (the comparison with llm.c's
// train_gpt2.c is done by hand on the same machine, see the trainer notes).
//
// Usage: trainer_bench [--steps-d12 N] [--steps-tiny N] [--skip-d12]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/trainer.h"

namespace {

struct Result {
  double median_ms = 0;
  double tokens_per_s = 0;
};

// Median step time over the steps after the first (which warms caches and allocators).
Result run(const std::string& model, int steps, bool probe, const std::filesystem::path& dir) {
  std::filesystem::remove_all(dir);
  std::vector<std::string> args = {"gpt2-train", "--model", model, "--batch", "4", "--seq-len", "64",
                                   "--steps", std::to_string(steps), "--data", "synthetic:zipf",
                                   "--quiet", "--run-dir", dir.string()};
  if (!probe) args.push_back("--no-probe");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (gpt2::run_gpt2_train(static_cast<int>(args.size()), argv.data()) != 0) {
    std::fprintf(stderr, "trainer_bench: %s run failed\n", model.c_str());
    return {};
  }
  std::ifstream in(dir / "metrics.jsonl");
  std::vector<double> ms;
  std::string line;
  while (std::getline(in, line)) ms.push_back(nlohmann::json::parse(line)["step_ms"].get<double>());
  if (ms.size() > 1) ms.erase(ms.begin());
  std::sort(ms.begin(), ms.end());
  Result r;
  r.median_ms = ms.empty() ? 0 : ms[ms.size() / 2];
  r.tokens_per_s = r.median_ms > 0 ? 4.0 * 64 / (r.median_ms / 1e3) : 0;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int steps_d12 = 4, steps_tiny = 12;
  bool skip_d12 = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--steps-d12") && i + 1 < argc) steps_d12 = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--steps-tiny") && i + 1 < argc) steps_tiny = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--skip-d12")) skip_d12 = true;
    else {
      std::fprintf(stderr, "usage: trainer_bench [--steps-d12 N] [--steps-tiny N] [--skip-d12]\n");
      return 2;
    }
  }
  const auto root = std::filesystem::temp_directory_path() / "rankscope-trainer-bench";
  std::printf("%-6s %-6s %12s %12s\n", "model", "probe", "step_ms", "tokens/s");
  for (const std::string model : {"tiny", "d12"}) {
    if (model == "d12" && skip_d12) continue;
    for (bool probe : {false, true}) {
      Result r = run(model, model == "d12" ? steps_d12 : steps_tiny, probe, root / (model + (probe ? "-on" : "-off")));
      std::printf("%-6s %-6s %12.1f %12.0f\n", model.c_str(), probe ? "on" : "off", r.median_ms, r.tokens_per_s);
      std::fflush(stdout);
    }
  }
  std::filesystem::remove_all(root);
  return 0;
}
