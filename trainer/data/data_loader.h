// data_loader.h — cuts (inputs, targets) micro-batches for one data-parallel rank.
//
// Is: llm.c's batching made rank-aware. The source is read in windows of B*T*DP tokens (+1 for
// the last target); window w belongs to every DP rank, and DP rank d takes the rows
// [d*B*T, (d+1)*B*T) of it, so DP=2 at B/2 sees exactly the rows DP=1 sees at B. TP ranks of one
// DP group pass the same dp_rank and read the same tokens. Windows are taken in order from the
// start; with shuffle, each epoch visits them in a permutation drawn from (seed, epoch), the same
// on every rank. The position is one integer (batches served), which checkpoints save.
// Is not: a prefetcher or a tokenizer.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "token_source.h"

namespace gpt2 {

struct DataLoaderOptions {
  int batch = 4;      // B: micro-batch of this DP rank
  int seq_len = 64;   // T
  int dp_rank = 0;
  int dp_size = 1;
  bool shuffle = false;
  uint64_t seed = 0;
};

class DataLoader {
 public:
  // Fails when the source is too short for one window or holds ids >= vocab_size.
  static rankscope::Result<std::unique_ptr<DataLoader>> create(std::shared_ptr<const TokenSource> source,
                                                               const DataLoaderOptions& options,
                                                               int vocab_size);

  // inputs, targets: (B, T) each; targets[i] is the token after inputs[i].
  void next(int* inputs, int* targets);

  uint64_t position() const { return served_; }   // micro-batches served so far
  void seek(uint64_t position) { served_ = position; }
  uint64_t windows_per_epoch() const { return windows_; }
  const TokenSource& source() const { return *source_; }

 private:
  DataLoader(std::shared_ptr<const TokenSource> source, const DataLoaderOptions& options,
             uint64_t windows);
  uint64_t window_start(uint64_t index);  // token offset of the index-th window served

  std::shared_ptr<const TokenSource> source_;
  DataLoaderOptions options_;
  uint64_t windows_ = 0;
  uint64_t served_ = 0;
  int64_t perm_epoch_ = -1;
  std::vector<uint64_t> perm_;  // window order of epoch perm_epoch_ (shuffle only)
  std::vector<int> scratch_;    // (B*T + 1)
};

}  // namespace gpt2
