// ddp_buckets.cpp — cutting the reversed parameter list into contiguous buckets.
#include "ddp_buckets.h"

namespace gpt2 {

std::vector<DdpBucket> plan_ddp_buckets(const std::vector<ParamInfo>& infos, std::vector<int>& bucket_of,
                                        size_t bucket_bytes, size_t first_bucket_bytes) {
  std::vector<DdpBucket> buckets;
  bucket_of.assign(infos.size(), -1);
  DdpBucket current;
  size_t end = 0;  // one past the current bucket's last element (its first parameter's end)
  auto close = [&] {
    if (current.params.empty()) return;
    for (int p : current.params) bucket_of[p] = static_cast<int>(buckets.size());
    buckets.push_back(std::move(current));
    current = {};
  };
  for (int i = static_cast<int>(infos.size()) - 1; i >= 0; --i) {
    auto cap = [&] { return buckets.empty() ? first_bucket_bytes : bucket_bytes; };
    const size_t bytes = infos[i].numel * sizeof(float);
    // A parameter that would overflow a non-empty bucket starts the next one; so does the switch
    // between expert and dense tensors (they are reduced over different groups).
    if (!current.params.empty() && ((current.numel * sizeof(float) + bytes) > cap() ||
                                    current.expert != infos[i].expert))
      close();
    if (current.params.empty()) {
      end = infos[i].offset + infos[i].numel;
      current.expert = infos[i].expert;
    }
    current.params.push_back(i);
    current.offset = infos[i].offset;  // walking backwards: the newest is the lowest offset
    current.numel = end - current.offset;  // spans any alignment padding between parameters
    if (current.numel * sizeof(float) >= cap()) close();
  }
  close();
  return buckets;
}

}  // namespace gpt2
