// checkpoint_io.h — full (unsharded) GPT-2 weights and llm.c's model file format.
//
// Is: FullWeights (all parameters at TP=1, in llm.c's tensor order) and a reader/writer of llm.c's
// model file: a header of 256 int32 (magic 20240326, [1]=version 3 (fp32), [2]=maxT, [3]=V,
// [4]=L, [5]=NH, [6]=C, [7]=Vp, rest 0), then fp32 tensors in this order:
//   wte (Vp,C), wpe (maxT,C), ln1w (L,C), ln1b (L,C), qkvw (L,3C,C), qkvb (L,3C),
//   attprojw (L,C,C), attprojb (L,C), ln2w (L,C), ln2b (L,C), fcw (L,4C,C), fcb (L,4C),
//   fcprojw (L,C,4C), fcprojb (L,C), lnfw (C), lnfb (C).
// Files written by llm.c's train_gpt2.py load here and ours load in llm.c. Writes go to
// "<path>.tmp" then rename(), so a reader never sees half a file.
// Is not: optimizer state or data position (trainer/train/ writes those next to the model file).
#pragma once

#include <filesystem>
#include <span>
#include <vector>

#include "model/config.h"

namespace gpt2 {

constexpr int kLlmcModelMagic = 20240326;
constexpr int kLlmcModelVersionFp32 = 3;

// llm.c's tensors, in file order.
enum class LlmcTensor : int {
  kWte = 0, kWpe, kLn1W, kLn1B, kQkvW, kQkvB, kAttProjW, kAttProjB,
  kLn2W, kLn2B, kFcW, kFcB, kFcProjW, kFcProjB, kLnfW, kLnfB, kCount
};

struct FullWeights {
  ModelConfig config;
  int padded_vocab = 0;     // Vp of this buffer (rows of wte; rows >= V are zero)
  std::vector<float> data;  // all tensors, file order

  // Zero-filled weights for `config` with Vp padded to `padded_vocab` (0: round V up to 128).
  static FullWeights zeros(const ModelConfig& config, int padded_vocab = 0);
  // Elements of one tensor over all layers, e.g. kQkvW has L*3C*C.
  size_t tensor_numel(LlmcTensor t) const;
  // The whole tensor (all layers), or with layer >= 0 that layer's slice of a per-layer tensor.
  std::span<float> tensor(LlmcTensor t, int layer = -1);
  std::span<const float> tensor(LlmcTensor t, int layer = -1) const;
};

Result<FullWeights> read_llmc_model(const std::filesystem::path& path);
Status write_llmc_model(const std::filesystem::path& path, const FullWeights& weights);

}  // namespace gpt2
