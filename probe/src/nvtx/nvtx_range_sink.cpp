// nvtx_range_sink.cpp — NVTX3 push/pop in the "rankscope" domain for every probe range.
#include "rankscope/probe/nvtx_range_sink.h"

#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cstring>

#include "rankscope/format/flight_recorder_layout.h"

namespace rankscope::probe {
namespace {

class NvtxRangeSink final : public RangeSink {
 public:
  NvtxRangeSink() : domain_(nvtxDomainCreateA(kNvtxDomainName)) {}
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
  }
  void pop() override { nvtxDomainRangePop(domain_); }

 private:
  nvtxDomainHandle_t domain_;
};

}  // namespace

std::unique_ptr<RangeSink> make_nvtx_range_sink() { return std::make_unique<NvtxRangeSink>(); }

}  // namespace rankscope::probe
