// reference_fixture.h — loads tests/fixtures/trainer/gpt2_small_reference.bin (layout in the
// README next to it) written by trainer/reference/make_fixture.py.
// Is not: a general reader; tests only.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace gpt2::testing {

inline std::filesystem::path fixture_dir() {
  return std::filesystem::path(RANKSCOPE_SOURCE_DIR) / "tests" / "fixtures" / "trainer";
}

struct ReferenceFixture {
  int B = 0, T = 0, V = 0, Vp = 0, L = 0, NH = 0, C = 0, maxT = 0, steps = 0;
  float lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  std::vector<int> inputs, targets;  // (B,T)
  std::vector<float> logits;         // (B,T,V)
  float loss = 0, grad_norm = 0;
  std::vector<float> grads;          // llm.c order
  std::vector<float> step_losses;    // (steps)
  std::string error;                 // empty when loaded

  static ReferenceFixture load(size_t param_count) {
    ReferenceFixture f;
    const auto path = fixture_dir() / "gpt2_small_reference.bin";
    FILE* file = std::fopen(path.c_str(), "rb");
    if (!file) {
      f.error = "cannot open " + path.string();
      return f;
    }
    int32_t header[64];
    float hyper[8];
    bool ok = std::fread(header, 4, 64, file) == 64 && std::fread(hyper, 4, 8, file) == 8;
    if (ok && (header[0] != 20251122 || header[1] != 1)) {
      f.error = "bad magic/version";
      ok = false;
    }
    if (ok) {
      f.B = header[2], f.T = header[3], f.V = header[4], f.Vp = header[5], f.L = header[6];
      f.NH = header[7], f.C = header[8], f.maxT = header[9], f.steps = header[10];
      f.lr = hyper[0], f.beta1 = hyper[1], f.beta2 = hyper[2], f.eps = hyper[3], f.weight_decay = hyper[4];
      const size_t N = static_cast<size_t>(f.B) * f.T;
      f.inputs.resize(N), f.targets.resize(N), f.logits.resize(N * f.V);
      f.grads.resize(param_count), f.step_losses.resize(f.steps);
      float lg[2];
      ok = std::fread(f.inputs.data(), 4, N, file) == N && std::fread(f.targets.data(), 4, N, file) == N &&
           std::fread(f.logits.data(), 4, f.logits.size(), file) == f.logits.size() &&
           std::fread(lg, 4, 2, file) == 2 &&
           std::fread(f.grads.data(), 4, f.grads.size(), file) == f.grads.size() &&
           std::fread(f.step_losses.data(), 4, f.steps, file) == static_cast<size_t>(f.steps);
      f.loss = lg[0], f.grad_norm = lg[1];
      if (!ok) f.error = "truncated " + path.string();
    }
    std::fclose(file);
    return f;
  }
};

}  // namespace gpt2::testing
