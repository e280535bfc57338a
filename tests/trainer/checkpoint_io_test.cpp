// checkpoint_io_test.cpp — llm.c model files: round trip through a model, header fields, and
// clear errors for a missing, foreign, truncated or wrong-version file.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "model/checkpoint_io.h"
#include "model/gpt2.h"
#include "ops/cpu/cpu_ops.h"

namespace gpt2 {
namespace {

std::filesystem::path temp_path(const char* name) {
  auto dir = std::filesystem::temp_directory_path() / ("rankscope_h2_ckpt_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir / name;
}

TEST(CheckpointIo, RoundTripThroughTheModelKeepsEveryWeight) {
  auto ops = make_cpu_ops();
  GPT2::Options o;
  o.config = ModelConfig::preset("tiny").value();
  o.config.vocab_size = 1000;  // Vp 1024
  o.config.max_seq_len = 32;
  o.batch = 1;
  o.seq_len = 8;
  auto model = std::move(GPT2::create(o, *ops, nullptr)).value();
  ASSERT_TRUE(model->init_weights(9).ok());
  auto w = model->gather_full_weights();
  ASSERT_TRUE(w.ok());
  const auto path = temp_path("model.bin");
  ASSERT_TRUE(write_llmc_model(path, *w).ok());
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
  EXPECT_EQ(std::filesystem::file_size(path), 1024 + 4 * w->data.size());

  std::ifstream f(path, std::ios::binary);
  int32_t header[8];
  f.read(reinterpret_cast<char*>(header), sizeof(header));
  EXPECT_EQ(header[0], 20240326);
  EXPECT_EQ(header[1], 3);
  EXPECT_EQ(header[2], 32);
  EXPECT_EQ(header[3], 1000);
  EXPECT_EQ(header[4], 2);
  EXPECT_EQ(header[5], 4);
  EXPECT_EQ(header[6], 128);
  EXPECT_EQ(header[7], 1024);

  auto back = read_llmc_model(path);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->data, w->data);
  auto other = std::move(GPT2::create(o, *ops, nullptr)).value();
  ASSERT_TRUE(other->load_full_weights(*back).ok());
  EXPECT_EQ(other->gather_full_weights()->data, w->data);
  // Padding rows of wte are zero, real rows are not.
  auto wte = w->tensor(LlmcTensor::kWte);
  EXPECT_EQ(wte[1000 * 128], 0.0f);
  EXPECT_NE(wte[999 * 128], 0.0f);
}

TEST(CheckpointIo, ClearErrors) {
  auto missing = read_llmc_model(temp_path("nope.bin"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), rankscope::StatusCode::kNotFound);

  const auto bad = temp_path("bad.bin");
  {
    std::ofstream f(bad, std::ios::binary);
    int32_t header[256] = {20240520, 1};
    f.write(reinterpret_cast<const char*>(header), sizeof(header));
  }
  auto r = read_llmc_model(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bad magic"), std::string::npos);

  FullWeights w = FullWeights::zeros(ModelConfig::preset("tiny").value());
  w.config.vocab_size = 300, w.config.max_seq_len = 8;
  w = FullWeights::zeros(w.config);
  const auto trunc = temp_path("trunc.bin");
  ASSERT_TRUE(write_llmc_model(trunc, w).ok());
  std::filesystem::resize_file(trunc, std::filesystem::file_size(trunc) - 100);
  auto t = read_llmc_model(trunc);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("truncated"), std::string::npos);

  {
    std::fstream f(trunc, std::ios::binary | std::ios::in | std::ios::out);
    int32_t v5 = 5;
    f.seekp(4);
    f.write(reinterpret_cast<const char*>(&v5), 4);
  }
  auto v = read_llmc_model(trunc);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), rankscope::StatusCode::kUnsupported);

  // A model of another shape refuses the weights with both shapes in the message.
  auto ops = make_cpu_ops();
  GPT2::Options o;
  o.config = ModelConfig::preset("tiny").value();
  o.config.max_seq_len = 8;
  o.batch = 1, o.seq_len = 4;
  auto model = std::move(GPT2::create(o, *ops, nullptr)).value();
  Status s = model->load_full_weights(w);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("V=300"), std::string::npos);
}

}  // namespace
}  // namespace gpt2
