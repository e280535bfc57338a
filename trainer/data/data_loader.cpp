// data_loader.cpp — window arithmetic and the per-epoch shuffle.
#include "data_loader.h"

#include <algorithm>
#include <numeric>
#include <random>

#include <fmt/format.h>

namespace gpt2 {
namespace {
// Shuffling needs a table of window indices; an endless synthetic stream is random already.
constexpr uint64_t kMaxShuffledWindows = uint64_t{1} << 26;
}  // namespace

rankscope::Result<std::unique_ptr<DataLoader>> DataLoader::create(
    std::shared_ptr<const TokenSource> source, const DataLoaderOptions& options, int vocab_size) {
  if (options.batch < 1 || options.seq_len < 1 || options.dp_size < 1 || options.dp_rank < 0 ||
      options.dp_rank >= options.dp_size)
    return rankscope::invalid_argument(fmt::format(
        "data loader: bad shape B={} T={} dp_rank={} dp_size={}", options.batch, options.seq_len,
        options.dp_rank, options.dp_size));
  if (source->max_token_id() >= vocab_size)
    return rankscope::invalid_argument(fmt::format(
        "{}: holds token id {} but the model's vocabulary has {} ids (hint: raise --vocab-size or "
        "use data tokenized for this vocabulary)", source->describe(), source->max_token_id(), vocab_size));
  const uint64_t window = static_cast<uint64_t>(options.batch) * options.seq_len * options.dp_size;
  const uint64_t windows = (source->size() - 1) / window;
  if (windows == 0)
    return rankscope::invalid_argument(fmt::format(
        "{}: too short for one batch of B*T*DP+1 = {} tokens (hint: lower --batch or --seq-len)",
        source->describe(), window + 1));
  return std::unique_ptr<DataLoader>(new DataLoader(std::move(source), options, windows));
}

DataLoader::DataLoader(std::shared_ptr<const TokenSource> source, const DataLoaderOptions& options,
                       uint64_t windows)
    : source_(std::move(source)), options_(options), windows_(windows),
      scratch_(static_cast<size_t>(options.batch) * options.seq_len + 1) {}

uint64_t DataLoader::window_start(uint64_t index) {
  const uint64_t window = static_cast<uint64_t>(options_.batch) * options_.seq_len * options_.dp_size;
  const uint64_t epoch = index / windows_;
  uint64_t w = index % windows_;
  if (options_.shuffle && windows_ <= kMaxShuffledWindows) {
    if (static_cast<int64_t>(epoch) != perm_epoch_) {
      perm_.resize(windows_);
      std::iota(perm_.begin(), perm_.end(), uint64_t{0});
      std::mt19937_64 rng(options_.seed * 0x9e3779b97f4a7c15ULL + epoch);
      std::shuffle(perm_.begin(), perm_.end(), rng);
      perm_epoch_ = static_cast<int64_t>(epoch);
    }
    w = perm_[w];
  }
  return w * window;
}

void DataLoader::next(int* inputs, int* targets) {
  const size_t bt = static_cast<size_t>(options_.batch) * options_.seq_len;
  const uint64_t start = window_start(served_) + static_cast<uint64_t>(options_.dp_rank) * bt;
  source_->read(start, scratch_);
  std::copy(scratch_.begin(), scratch_.begin() + bt, inputs);
  std::copy(scratch_.begin() + 1, scratch_.end(), targets);
  ++served_;
}

}  // namespace gpt2
