// nvtx_test_injection.cpp — a minimal NVTX tool library for tests (loaded via NVTX_INJECTION64_PATH).
//
// Is: the injection entry point NVTX calls on first use; it swaps the core-2 (domain) push, pop
// mark and domain-create slots for functions that append "push <domain> <message>" / "pop <domain>" /
// "mark <domain> <message> [int64 payload]" to
// the file named by RANKSCOPE_NVTX_TEST_LOG, so a test can see what an nsys-like tool would see.
// Is not: a profiler; nothing but tests loads it.
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace {

struct Domain {
  std::string name;
};

std::mutex& log_mutex() {
  static std::mutex m;
  return m;
}

void append_line(const std::string& line) {
  const char* path = std::getenv("RANKSCOPE_NVTX_TEST_LOG");
  if (path == nullptr) return;
  std::lock_guard<std::mutex> lock(log_mutex());
  if (FILE* f = std::fopen(path, "a")) {
    std::fputs(line.c_str(), f);
    std::fclose(f);
  }
}

std::string domain_name(nvtxDomainHandle_t d) {
  return d ? reinterpret_cast<Domain*>(d)->name : std::string("(global)");
}

nvtxDomainHandle_t NVTX_API create_domain(const char* name) {
  return reinterpret_cast<nvtxDomainHandle_t>(new Domain{name ? name : ""});
}

int NVTX_API push(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  std::string message = attributes && attributes->messageType == NVTX_MESSAGE_TYPE_ASCII && attributes->message.ascii
                            ? attributes->message.ascii
                            : "?";
  append_line("push " + domain_name(domain) + " " + message + "\n");
  return 0;
}

void NVTX_API mark(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  std::string message = attributes && attributes->messageType == NVTX_MESSAGE_TYPE_ASCII && attributes->message.ascii
                            ? attributes->message.ascii
                            : "?";
  if (attributes && attributes->payloadType == NVTX_PAYLOAD_TYPE_INT64)
    message += " " + std::to_string(attributes->payload.llValue);
  append_line("mark " + domain_name(domain) + " " + message + "\n");
}

int NVTX_API pop(nvtxDomainHandle_t domain) {
  append_line("pop " + domain_name(domain) + "\n");
  return 0;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
  auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) || table == nullptr) return 0;
  if (size <= NVTX_CBID_CORE2_DomainCreateA) return 0;
  *table[NVTX_CBID_CORE2_DomainCreateA] = reinterpret_cast<NvtxFunctionPointer>(&create_domain);
  *table[NVTX_CBID_CORE2_DomainRangePushEx] = reinterpret_cast<NvtxFunctionPointer>(&push);
  *table[NVTX_CBID_CORE2_DomainRangePop] = reinterpret_cast<NvtxFunctionPointer>(&pop);
  *table[NVTX_CBID_CORE2_DomainMarkEx] = reinterpret_cast<NvtxFunctionPointer>(&mark);
  return 1;
}
