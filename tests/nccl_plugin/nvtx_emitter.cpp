// nvtx_emitter.cpp — a program that emits NVTX ranges through the NVTX headers and nothing else.
//
// Is: the subject of the NVTX injection test: it links neither the probe nor librankscope-nvtx.so;
// with NVTX_INJECTION64_PATH set, NVTX loads the injection library on the first call. The main
// thread opens "train" (global domain), then "forward" in domain "megatron" (a registered string),
// then 30 nested "level" ranges (deeper than the recorder stores) and closes them again; a second
// thread opens "data/loader". Then it exits with those ranges still open, as a killed job would.
// Is not: a check; the test reads the recorder it leaves behind.
#include <nvtx3/nvToolsExt.h>

#include <thread>

int main() {
  nvtxRangePushA("train");
  nvtxDomainHandle_t megatron = nvtxDomainCreateA("megatron");
  nvtxStringHandle_t forward = nvtxDomainRegisterStringA(megatron, "forward");
  nvtxEventAttributes_t a = {};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = forward;
  nvtxDomainRangePushEx(megatron, &a);
  for (int i = 0; i < 30; ++i) nvtxRangePushA("level");
  for (int i = 0; i < 30; ++i) nvtxRangePop();
  std::thread loader([] { nvtxRangePushA("data/loader"); });
  loader.join();
  return 0;  // "train" and "megatron/forward" stay open
}
