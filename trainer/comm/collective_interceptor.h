// collective_interceptor.h — the hook ProbedCommunicator calls before every collective.
//
// Is: the seam through which fault injection (trainer/faults) changes what a rank does in one
// collective — skip it, give it another element count, or drop chunks of its payload — without a
// line of fault logic in the communicators or the model. Is not: an observer; the probe reporting
// is ProbedCommunicator's own job.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "rankscope/format/vocabulary.h"

namespace gpt2 {

struct CollectiveCall {
  std::string_view comm;               // "tp0"
  uint64_t seq = 0;                    // per-communicator sequence number, as in the flight recorder
  rankscope::format::CollectiveOp op = rankscope::format::CollectiveOp::kUnknown;
  rankscope::format::DataType dtype = rankscope::format::DataType::kUnknown;
  size_t count = 0;                    // the call's element count
};

struct InterceptDecision {
  bool skip = false;                   // the rank does not take part at all (a desync)
  std::optional<size_t> count;         // the rank takes part with this element count instead
};

class CollectiveInterceptor {
 public:
  virtual ~CollectiveInterceptor() = default;
  // Called before the collective is reported to the probe, so the recorder shows what the rank
  // really did. May block (a stall) or kill the process (a crash).
  virtual InterceptDecision before_collective(const CollectiveCall& call) = 0;
  // Called with this rank's outgoing payload (bytes of it) just before the data moves; may
  // overwrite parts of it (lossy links). Not called for skipped collectives or barriers.
  virtual void on_payload(const CollectiveCall& call, void* payload, size_t bytes) = 0;
};

}  // namespace gpt2
