// cupti_kernel_tracer.cpp — CUPTI callbacks and activity buffers behind the KernelTracer interface.
//
// Is: the thin CUPTI layer: subscribe, enable the launch callbacks of both API domains
// (cupti_launch_callbacks.h: runtime, and driver for cuBLASLt/cuDNN/graph launches), enable kernel
// activity, and walk completed buffers (cupti_kernel_records.h decodes each record).
// Is not: which range a kernel belongs to (kernel_attribution.h, in the core).
//
// Without a GPU driver, cuptiActivityEnable fails (CUPTI_ERROR_UNKNOWN); start() then undoes the
// subscription and returns the reason, and the probe prints one line and runs without GPU timing.
// Under nsys (before CUDA 13.2) cuptiSubscribe fails because only one subscriber is allowed: we
// step aside the same way.
#include "rankscope/probe/cupti_kernel_tracer.h"

#include <cupti.h>

#include <atomic>
#include <cstdlib>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "cupti_kernel_records.h"
#include "cupti_launch_callbacks.h"

namespace rankscope::probe {
namespace {

constexpr size_t kBufferBytes = 1 << 20;
constexpr size_t kBufferAlign = 8;

const char* result_string(CUptiResult r) {
  const char* s = nullptr;
  if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || s == nullptr) return "unknown CUPTI error";
  return s;
}

class CuptiKernelTracer final : public KernelTracer {
 public:
  ~CuptiKernelTracer() override { stop(); }

  std::string_view name() const override { return "cupti"; }

  Status start(KernelSink& sink) override {
    // CUPTI's buffer callbacks carry no user pointer, so the one active tracer is found through
    // this process-wide slot; CUPTI itself allows one subscriber per process.
    CuptiKernelTracer* expected = nullptr;
    if (!active().compare_exchange_strong(expected, this)) {
      return unsupported("another rankscope CUPTI tracer is already active in this process");
    }
    sink_ = &sink;
    CUptiResult r = cuptiSubscribe(&subscriber_, &CuptiKernelTracer::on_callback, this);
    if (r != CUPTI_SUCCESS) {
      active().store(nullptr);
      return unsupported(fmt::format("cuptiSubscribe: {}{}", result_string(r),
                                     r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                                         ? "; another profiler (nsys?) holds CUPTI"
                                         : ""));
    }
    subscribed_ = true;
    for (const cupti::LaunchApi& api : cupti::kernel_launch_apis()) {
      r = cuptiEnableCallback(1, subscriber_, api.domain, api.id);
      if (r != CUPTI_SUCCESS) {
        // A launch API we cannot watch would book its kernels outside every range: no timing
        // beats wrong timing.
        std::string why = fmt::format("cuptiEnableCallback({}): {}", api.name, result_string(r));
        stop();
        return unsupported(why);
      }
    }
    r = cuptiActivityRegisterCallbacks(&CuptiKernelTracer::on_buffer_requested,
                                       &CuptiKernelTracer::on_buffer_completed);
    if (r == CUPTI_SUCCESS) r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r != CUPTI_SUCCESS) {
      std::string why = fmt::format("cuptiActivityEnable: {}; no GPU driver?", result_string(r));
      stop();
      return unsupported(why);
    }
    enabled_ = true;
    return {};
  }

  int64_t timestamp_ns() override {
    uint64_t ts = 0;
    cuptiGetTimestamp(&ts);
    return static_cast<int64_t>(ts);
  }

  void flush() override {
    if (enabled_) cuptiActivityFlushAll(0);
  }

  void stop() override {
    if (enabled_) {
      cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
      cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
      enabled_ = false;
    }
    if (subscribed_) {
      cuptiUnsubscribe(subscriber_);
      subscribed_ = false;
    }
    CuptiKernelTracer* self = this;
    active().compare_exchange_strong(self, nullptr);
  }

 private:
  static std::atomic<CuptiKernelTracer*>& active() {
    static std::atomic<CuptiKernelTracer*> tracer{nullptr};
    return tracer;
  }

  static void CUPTIAPI on_callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                                   const void* data) {
    cupti::report_launch(*static_cast<CuptiKernelTracer*>(userdata)->sink_, domain, id, data);
  }

  static void CUPTIAPI on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
    *size = *buffer ? kBufferBytes : 0;
    *max_records = 0;
  }

  static void CUPTIAPI on_buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    CuptiKernelTracer* self = active().load();
    if (self != nullptr && valid > 0) self->deliver(buffer, valid);
    std::free(buffer);
  }

  void deliver(uint8_t* buffer, size_t valid) {
    batch_.clear();
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
      if (std::optional<KernelActivity> kernel = cupti::kernel_activity_of(*record)) batch_.push_back(*kernel);
    }
    if (!batch_.empty()) sink_->on_kernels(batch_);
  }

  KernelSink* sink_ = nullptr;
  CUpti_SubscriberHandle subscriber_{};
  bool subscribed_ = false;
  bool enabled_ = false;
  std::vector<KernelActivity> batch_;
};

}  // namespace

std::unique_ptr<KernelTracer> make_cupti_kernel_tracer() { return std::make_unique<CuptiKernelTracer>(); }

}  // namespace rankscope::probe
