// kernel_tracer.h — the seam between the probe core and a GPU kernel activity source (CUPTI).
//
// Is: two small interfaces. A KernelTracer (implemented in the leaf target rankscope_probe_cupti)
// watches kernel launches and completed kernels; a KernelSink (implemented by the probe core)
// receives them: at launch, on the launching thread, so the core can remember which range was
// open; later, the completed kernels with the tracer's own timestamps. Attribution (correlation id
// -> range) and clock conversion live in the core (kernel_attribution.h), testable without a GPU.
// Is not: CUPTI. No CUDA or CUPTI header is included here (design rule 3).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "rankscope/format/status.h"

namespace rankscope::probe {

// One completed kernel as the tracer saw it. `name` is valid only during the on_kernels call.
struct KernelActivity {
  std::string_view name;
  uint32_t correlation_id = 0;  // ties the kernel to its launch call (KernelSink::on_launch)
  uint32_t stream = 0;
  uint32_t device = 0;
  int64_t begin_ns = 0;         // the tracer's clock (KernelTracer::timestamp_ns)
  int64_t end_ns = 0;
};

class KernelSink {
 public:
  virtual ~KernelSink() = default;
  // Called on the launching thread at the entry of every API call that launches kernels, whoever
  // makes it (runtime, driver, a graph launch: once for all the graph's kernels, which share the id).
  virtual void on_launch(uint32_t correlation_id) = 0;
  // Called with completed kernels from any thread (CUPTI's buffer-completion thread, or inside
  // KernelTracer::flush on the main thread).
  virtual void on_kernels(std::span<const KernelActivity> kernels) = 0;
};

class KernelTracer {
 public:
  virtual ~KernelTracer() = default;
  virtual std::string_view name() const = 0;  // "cupti"
  // Subscribes to launches and enables kernel activity. A non-ok Status means GPU kernel timing is
  // unavailable (e.g. no driver); the probe prints one line and carries on without it.
  virtual Status start(KernelSink& sink) = 0;
  // The tracer's clock now, in ns; paired with the probe's clock to convert activity timestamps.
  virtual int64_t timestamp_ns() = 0;
  // Hands buffered completed kernels to the sink (the probe calls it at every step end).
  virtual void flush() = 0;
  // Unsubscribes; no sink call happens after stop() returns.
  virtual void stop() = 0;
};

}  // namespace rankscope::probe
