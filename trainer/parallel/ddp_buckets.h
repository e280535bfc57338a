// ddp_buckets.h — how DDP groups gradients into all-reduce buckets.
//
// Is: the bucket plan. Gradients become final in reverse parameter order (ln_f first, the tied
// wte last, after backward/embed), so buckets are cut walking the parameters from the END of the
// flat gradient buffer: each bucket is one contiguous range of it, one all-reduce. The first
// bucket is small (it launches as soon as the head's gradients are done, starting the overlap
// early, as PyTorch DDP does); later ones are about `bucket_bytes`; a parameter larger than a
// bucket gets one of its own. Bucket 0 is reduced first; the order is fixed and the same on every
// rank (they must issue identical collectives). A bucket holds only MoE expert tensors or only
// other tensors (ParamInfo::expert): expert buckets are reduced over edp{m}, not dp{j}.
// Is not: the reduction (ddp_reducer.h).
#pragma once

#include <cstddef>
#include <vector>

#include "model/parameters.h"

namespace gpt2 {

inline constexpr size_t kDdpBucketBytes = 25u << 20;      // 25 MiB, PyTorch's default
inline constexpr size_t kDdpFirstBucketBytes = 1u << 20;  // 1 MiB

struct DdpBucket {
  std::vector<int> params;  // parameter indices, in the order their gradients become final
  size_t offset = 0;        // first element in the flat gradient buffer
  size_t numel = 0;         // elements: [offset, offset + numel)
  bool expert = false;      // MoE expert tensors: reduced over the expert-data-parallel group
};

// Buckets for `infos` (forward order, contiguous in the flat buffer). bucket_of[i] is filled
// with the bucket of parameter i.
std::vector<DdpBucket> plan_ddp_buckets(const std::vector<ParamInfo>& infos, std::vector<int>& bucket_of,
                                        size_t bucket_bytes = kDdpBucketBytes,
                                        size_t first_bucket_bytes = kDdpFirstBucketBytes);

}  // namespace gpt2
