// nvtx_range_sink.cpp — NVTX3 push/pop in the "rankscope" domain for every probe range, and the marks
// that let `rankscope import-nsys` identify and align this rank exactly: `rankscope:rank=R/W` once,
// and `rankscope:sync` with the probe's clock (now_unix_ns, format/clock.h) as its int64 payload at every
// top-level range (a name without '/': data, grad_sync, optimizer — a few per step, and no clock
// read on the nested ranges' hot path).
#include "rankscope/probe/nvtx_range_sink.h"

#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cstring>

#include <string>

#include "rankscope/format/clock.h"
#include "rankscope/format/flight_recorder_layout.h"

namespace rankscope::probe {
namespace {

class NvtxRangeSink final : public RangeSink {
 public:
  NvtxRangeSink(int rank, int world_size) : domain_(nvtxDomainCreateA(kNvtxDomainName)) {
    if (rank >= 0 && world_size > 0) {
      const std::string text = "rankscope:rank=" + std::to_string(rank) + "/" + std::to_string(world_size);
      nvtxEventAttributes_t attributes{};
      attributes.version = NVTX_VERSION;
      attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
      attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
      attributes.message.ascii = text.c_str();
      nvtxDomainMarkEx(domain_, &attributes);
    }
  }
  ~NvtxRangeSink() override { nvtxDomainDestroy(domain_); }

  void push(std::string_view name) override {
    // NVTX wants a NUL-terminated string; names longer than the flight recorder keeps are cut
    // the same way, so both views of a range agree.
    char buffer[format::kNameBytes];
    size_t n = std::min(name.size(), sizeof(buffer) - 1);
    std::memcpy(buffer, name.data(), n);
    buffer[n] = '\0';
    nvtxEventAttributes_t attributes{};
    attributes.version = NVTX_VERSION;
    attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attributes.message.ascii = buffer;
    nvtxDomainRangePushEx(domain_, &attributes);
    if (std::memchr(buffer, '/', n) == nullptr) mark_sync();
  }
  void pop() override { nvtxDomainRangePop(domain_); }

 private:
  void mark_sync() {
    nvtxEventAttributes_t attributes{};
    attributes.version = NVTX_VERSION;
    attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attributes.message.ascii = "rankscope:sync";
    attributes.payloadType = NVTX_PAYLOAD_TYPE_INT64;
    attributes.payload.llValue = rankscope::now_unix_ns();
    nvtxDomainMarkEx(domain_, &attributes);
  }

  nvtxDomainHandle_t domain_;
};

}  // namespace

std::unique_ptr<RangeSink> make_nvtx_range_sink(int rank, int world_size) {
  return std::make_unique<NvtxRangeSink>(rank, world_size);
}

}  // namespace rankscope::probe
