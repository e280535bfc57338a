// nvtx_injection.cpp — librankscope-nvtx.so, an NVTX injection library (NVTX_INJECTION64_PATH).
//
// Is: what NVTX loads on a program's first NVTX call when NVTX_INJECTION64_PATH names this file. It
// takes over the range push/pop entry points (global: nvtxRangePushA/W/Ex, nvtxRangePop; domains:
// nvtxDomainRangePushEx/Pop, nvtxDomainCreateA/W, nvtxDomainRegisterStringA) and records every
// thread's stack of open ranges in a flight recorder of the process,
// RUN_DIR/nccl/<host>.<pid>.nvtx.flight, next to the NCCL profiler plugin's (format's
// nccl_plugin_run.h folds both into one rank: "what was the rank doing"). Ranges of a domain other
// than ours ("rankscope") are named "<domain>/<message>". PyTorch (torch.cuda.nvtx, emit_nvtx),
// Megatron and NeMo emit such ranges.
// Bounded cost: a push copies at most 63 bytes into the thread's own slot (no allocation, no lock,
// no syscall but the clock); domain names and registered strings are interned once in fixed
// tables; nesting deeper than the recorder's depth (24) is counted, not stored; threads beyond its
// 64 slots are not recorded. One recorder per process however many modules initialise NVTX.
// Is not: linked to the probe, NCCL or CUDA; only NVTX's header-only API is compiled in.
#include <nvtx3/nvToolsExt.h>

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "rankscope/format/clock.h"
#include "rankscope/format/flight_recorder_writer.h"
#include "rankscope/format/nccl_plugin_run.h"

namespace {

using rankscope::format::FlightRecorderWriter;

constexpr size_t kNameBytes = rankscope::format::kNameBytes;
constexpr const char* kOurDomain = "rankscope";
constexpr uint32_t kMaxDomains = 256;
constexpr uint32_t kMaxStrings = 4096;

struct Interned {
  char text[kNameBytes];
};
Interned g_domains[kMaxDomains];  // a domain handle points at its interned name ("" for ours)
std::atomic<uint32_t> g_domains_used{0};
Interned g_strings[kMaxStrings];  // a registered string handle points at its interned text
std::atomic<uint32_t> g_strings_used{0};
Interned g_overflow{"?"};         // handle given when a table is full

FlightRecorderWriter* g_recorder = nullptr;  // never destroyed: other threads may push during exit

void copy_bounded(char* dst, size_t cap, const char* src) {
  size_t n = 0;
  while (src && src[n] && n + 1 < cap) {
    dst[n] = src[n];
    ++n;
  }
  dst[n] = '\0';
}

void copy_bounded_wide(char* dst, size_t cap, const wchar_t* src) {
  size_t n = 0;
  while (src && src[n] && n + 1 < cap) {
    dst[n] = src[n] < 0x80 ? char(src[n]) : '?';
    ++n;
  }
  dst[n] = '\0';
}

Interned* intern(Interned* table, std::atomic<uint32_t>& used, uint32_t cap, const char* a, const wchar_t* w) {
  const uint32_t i = used.fetch_add(1, std::memory_order_relaxed);
  if (i >= cap) return &g_overflow;
  if (a) copy_bounded(table[i].text, kNameBytes, a);
  else copy_bounded_wide(table[i].text, kNameBytes, w);
  return &table[i];
}

int env_int(std::initializer_list<const char*> names, int fallback) {
  for (const char* n : names)
    if (const char* v = std::getenv(n); v && *v) return std::atoi(v);
  return fallback;
}

bool open_recorder() {
  const char* dir = std::getenv("RANKSCOPE_RUN_DIR");
  const std::string run_dir = dir && *dir ? dir : fmt::format("/dev/shm/rankscope-{}", ::getuid());
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  const auto sub = std::filesystem::path(run_dir) / rankscope::format::kNcclPluginDir;
  std::error_code ec;
  std::filesystem::create_directories(sub, ec);
  rankscope::format::FlightIdentity id;
  id.rank = env_int({"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}, -1);
  id.world_size = env_int({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}, 0);
  id.local_rank = env_int({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}, 0);
  id.pid = int(::getpid());
  id.host = host;
  id.start_ns = rankscope::now_unix_ns();
  rankscope::format::FlightLayoutParams params;
  params.max_threads = 64;
  params.max_comms = 1;
  params.ring_entries = 1;
  params.max_params = 0;
  auto w = FlightRecorderWriter::create(sub / fmt::format("{}.{}.nvtx.flight", host, ::getpid()), id, params);
  if (!w.ok()) {
    std::fprintf(stderr, "rankscope NVTX injection: %s (ranges not recorded)\n", w.status().message().c_str());
    return false;
  }
  g_recorder = std::move(w).value().release();
  g_recorder->set_process_state(rankscope::format::ProcessState::kRunning);
  return true;
}

// This thread's slot in the recorder: claimed on its first push; -1 when none is left.
int thread_slot() {
  thread_local int slot = -2;
  if (slot == -2) {
    char name[32] = {};
    pthread_getname_np(pthread_self(), name, sizeof(name));
    slot = g_recorder->claim_thread_slot(int(::syscall(SYS_gettid)), name);
  }
  return slot;
}

int push_named(const char* domain_prefix, const char* message) {
  char name[kNameBytes];
  size_t n = 0;
  if (domain_prefix && *domain_prefix) {
    copy_bounded(name, kNameBytes, domain_prefix);
    n = std::strlen(name);
    if (n + 1 < kNameBytes) name[n++] = '/';
  }
  copy_bounded(name + n, kNameBytes - n, message);
  const int64_t now = rankscope::now_unix_ns();
  g_recorder->push_range(thread_slot(), name, now);
  g_recorder->heartbeat(now);
  return 0;
}

int pop_one() {
  g_recorder->pop_range(thread_slot());
  g_recorder->heartbeat(rankscope::now_unix_ns());
  return 0;
}

// The message of an event's attributes, resolved to bounded ASCII in `out`.
const char* message_of(const nvtxEventAttributes_t* a, char* out) {
  if (!a) return "";
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: return a->message.ascii ? a->message.ascii : "";
    case NVTX_MESSAGE_TYPE_UNICODE: copy_bounded_wide(out, kNameBytes, a->message.unicode); return out;
    case NVTX_MESSAGE_TYPE_REGISTERED:
      return a->message.registered ? reinterpret_cast<const Interned*>(a->message.registered)->text : "";
    default: return "";
  }
}

const char* prefix_of(nvtxDomainHandle_t d) { return d ? reinterpret_cast<const Interned*>(d)->text : ""; }

int NVTX_API range_push_a(const char* message) { return push_named(nullptr, message); }
int NVTX_API range_push_w(const wchar_t* message) {
  char buf[kNameBytes];
  copy_bounded_wide(buf, kNameBytes, message);
  return push_named(nullptr, buf);
}
int NVTX_API range_push_ex(const nvtxEventAttributes_t* a) {
  char buf[kNameBytes];
  return push_named(nullptr, message_of(a, buf));
}
int NVTX_API range_pop() { return pop_one(); }
int NVTX_API domain_range_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  char buf[kNameBytes];
  return push_named(prefix_of(d), message_of(a, buf));
}
int NVTX_API domain_range_pop(nvtxDomainHandle_t) { return pop_one(); }
nvtxDomainHandle_t NVTX_API domain_create_a(const char* name) {
  // Our own domain gets no prefix: the probe's names are already the run's vocabulary.
  const bool ours = name && std::strcmp(name, kOurDomain) == 0;
  return reinterpret_cast<nvtxDomainHandle_t>(intern(g_domains, g_domains_used, kMaxDomains, ours ? "" : name, nullptr));
}
nvtxDomainHandle_t NVTX_API domain_create_w(const wchar_t* name) {
  return reinterpret_cast<nvtxDomainHandle_t>(intern(g_domains, g_domains_used, kMaxDomains, nullptr, name));
}
nvtxStringHandle_t NVTX_API register_string_a(nvtxDomainHandle_t, const char* s) {
  return reinterpret_cast<nvtxStringHandle_t>(intern(g_strings, g_strings_used, kMaxStrings, s, nullptr));
}

template <typename F>
void set(NvtxFunctionTable table, unsigned int size, unsigned int id, F f) {
  if (id < size && table[id]) *table[id] = reinterpret_cast<NvtxFunctionPointer>(f);
}

// NVTX is header-only: every module of the process that emits NVTX (libtorch, libnccl, the
// program) keeps its own function tables and calls this on its own first NVTX call. The recorder is
// the process's: opened by the first call only. Re-creating it would truncate the file under the
// threads already recording into it (their slots were claimed in the first file and would read back
// unclaimed: the open ranges lost).
bool recorder_once() {
  static const bool opened = open_recorder();
  return opened;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
  auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr || !recorder_once()) return 0;  // 0: this module's NVTX stays a no-op
  NvtxFunctionTable core = nullptr, core2 = nullptr;
  unsigned int core_size = 0, core2_size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size) && core) {
    set(core, core_size, NVTX_CBID_CORE_RangePushA, &range_push_a);
    set(core, core_size, NVTX_CBID_CORE_RangePushW, &range_push_w);
    set(core, core_size, NVTX_CBID_CORE_RangePushEx, &range_push_ex);
    set(core, core_size, NVTX_CBID_CORE_RangePop, &range_pop);
  }
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size) && core2) {
    set(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, &domain_range_push_ex);
    set(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, &domain_range_pop);
    set(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, &domain_create_a);
    set(core2, core2_size, NVTX_CBID_CORE2_DomainCreateW, &domain_create_w);
    set(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA, &register_string_a);
  }
  return 1;
}
