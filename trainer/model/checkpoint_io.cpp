// checkpoint_io.cpp — FullWeights tensor views and llm.c's model file reader/writer.
#include "model/checkpoint_io.h"

#include <fmt/format.h>

#include <array>
#include <cstdio>
#include <memory>
#include <system_error>

namespace gpt2 {

namespace {

constexpr int kHeaderInts = 256;

// Per-layer element count of each tensor (or total for wte/wpe/lnf, which have no layers).
size_t per_layer_numel(LlmcTensor t, const ModelConfig& c, int Vp) {
  const size_t C = static_cast<size_t>(c.channels);
  switch (t) {
    case LlmcTensor::kWte: return static_cast<size_t>(Vp) * C;
    case LlmcTensor::kWpe: return static_cast<size_t>(c.max_seq_len) * C;
    case LlmcTensor::kQkvW: return 3 * C * C;
    case LlmcTensor::kQkvB: return 3 * C;
    case LlmcTensor::kAttProjW: return C * C;
    case LlmcTensor::kFcW: return 4 * C * C;
    case LlmcTensor::kFcB: return 4 * C;
    case LlmcTensor::kFcProjW: return 4 * C * C;
    default: return C;  // ln weights and biases, projection biases, lnf
  }
}

bool is_per_layer(LlmcTensor t) {
  return t != LlmcTensor::kWte && t != LlmcTensor::kWpe && t != LlmcTensor::kLnfW &&
         t != LlmcTensor::kLnfB;
}

size_t tensor_offset(LlmcTensor t, const ModelConfig& c, int Vp) {
  size_t off = 0;
  for (int i = 0; i < static_cast<int>(t); i++) {
    auto ti = static_cast<LlmcTensor>(i);
    off += per_layer_numel(ti, c, Vp) * (is_per_layer(ti) ? c.num_layers : 1);
  }
  return off;
}

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

}  // namespace

FullWeights FullWeights::zeros(const ModelConfig& config, int padded_vocab) {
  FullWeights w;
  w.config = config;
  w.padded_vocab = padded_vocab > 0 ? padded_vocab : config.padded_vocab_size(1);
  w.data.assign(tensor_offset(LlmcTensor::kCount, config, w.padded_vocab), 0.0f);
  return w;
}

size_t FullWeights::tensor_numel(LlmcTensor t) const {
  return per_layer_numel(t, config, padded_vocab) * (is_per_layer(t) ? config.num_layers : 1);
}

std::span<const float> FullWeights::tensor(LlmcTensor t, int layer) const {
  size_t off = tensor_offset(t, config, padded_vocab);
  size_t n = tensor_numel(t);
  if (layer >= 0 && is_per_layer(t)) {
    n = per_layer_numel(t, config, padded_vocab);
    off += n * static_cast<size_t>(layer);
  }
  return {data.data() + off, n};
}

std::span<float> FullWeights::tensor(LlmcTensor t, int layer) {
  auto s = static_cast<const FullWeights*>(this)->tensor(t, layer);
  return {const_cast<float*>(s.data()), s.size()};
}

Result<FullWeights> read_llmc_model(const std::filesystem::path& path) {
  std::unique_ptr<FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) {
    return rankscope::not_found(fmt::format(
        "{}: cannot open model file (hint: --init-from takes an llm.c model .bin, e.g. one "
        "written by llm.c's train_gpt2.py)", path.string()));
  }
  std::array<int32_t, kHeaderInts> header{};
  if (std::fread(header.data(), sizeof(int32_t), kHeaderInts, f.get()) != kHeaderInts) {
    return rankscope::corrupt(fmt::format("{}: shorter than the 1024-byte llm.c header", path.string()));
  }
  if (header[0] != kLlmcModelMagic) {
    return rankscope::corrupt(fmt::format("{}: bad magic {} (expected {}: not an llm.c model file)",
                                          path.string(), header[0], kLlmcModelMagic));
  }
  if (header[1] != kLlmcModelVersionFp32) {
    return rankscope::unsupported(fmt::format(
        "{}: llm.c model version {} (hint: only version 3, fp32, is read; version 5 is bf16)",
        path.string(), header[1]));
  }
  ModelConfig c;
  c.max_seq_len = header[2];
  c.vocab_size = header[3];
  c.num_layers = header[4];
  c.num_heads = header[5];
  c.channels = header[6];
  const int Vp = header[7];
  RS_RETURN_IF_ERROR(c.validate(1).prefix(path.string() + ": "));
  if (Vp < c.vocab_size) {
    return rankscope::corrupt(fmt::format("{}: padded vocab {} < vocab {}", path.string(), Vp, c.vocab_size));
  }
  FullWeights w = FullWeights::zeros(c, Vp);
  size_t got = std::fread(w.data.data(), sizeof(float), w.data.size(), f.get());
  if (got != w.data.size()) {
    return rankscope::corrupt(fmt::format("{}: truncated: {} of {} floats of parameters",
                                          path.string(), got, w.data.size()));
  }
  return w;
}

Status write_llmc_model(const std::filesystem::path& path, const FullWeights& w) {
  std::array<int32_t, kHeaderInts> header{};
  header[0] = kLlmcModelMagic;
  header[1] = kLlmcModelVersionFp32;
  header[2] = w.config.max_seq_len;
  header[3] = w.config.vocab_size;
  header[4] = w.config.num_layers;
  header[5] = w.config.num_heads;
  header[6] = w.config.channels;
  header[7] = w.padded_vocab;
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::unique_ptr<FILE, FileCloser> f(std::fopen(tmp.c_str(), "wb"));
    if (!f) return rankscope::io_error(fmt::format("{}: cannot create (does the directory exist?)", tmp.string()));
    if (std::fwrite(header.data(), sizeof(int32_t), kHeaderInts, f.get()) != kHeaderInts ||
        std::fwrite(w.data.data(), sizeof(float), w.data.size(), f.get()) != w.data.size() ||
        std::fflush(f.get()) != 0) {
      return rankscope::io_error(fmt::format("{}: write failed (disk full?)", tmp.string()));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return rankscope::io_error(fmt::format("rename {} -> {}: {}", tmp.string(), path.string(), ec.message()));
  return Status::ok_status();
}

}  // namespace gpt2
