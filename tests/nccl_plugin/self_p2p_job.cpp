// self_p2p_job.cpp — replays, on the profiler plugin, the events NCCL 2.28 (ABI v5) gave it in the
// real one-rank PyTorch job of shared/data/real-gpu/plugin-p2p-run (shared/gpu/torch_nccl_p2p.py).
//
// Is: a test program. One process, no RANK in its environment (python train.py), one communicator
// of one rank. Per iteration, as NCCL emitted them for dist.batch_isend_irecv to itself inside the
// job's NVTX ranges train/step > exchange:
//   GroupApi start (groupDepth 2: PyTorch's ncclGroupStart plus ncclSend's own), state 23,
//   P2pApi Send start/stop, P2pApi Recv start/stop (the same GroupApi: no second one), state 24,
//   NCCL's own NVTX range "ncclGroupEnd" (domain NCCL), Group start, P2p Send and P2p Recv to
//   peer 0 = its own rank (4 MiB, 64 channels), their stops, Group stop, GroupApi stop.
// No KernelCh ever: NCCL adds no proxy op for a send/recv to self. all_to_all_single on one rank is
// a plain copy in NCCL: no event at all, only its NVTX range "a2a". After --iterations such steps it
// opens train/step > backward (the spinning kernel), closes backward, opens exchange, launches one
// more send/recv pair (queued behind that kernel on the GPU: nothing more is ever learnt of it),
// prints "READY <pid>" and sleeps until killed, with train/step > exchange open.
// NVTX is header-only: each module of a process initialises the injection library itself. NCCL's
// module is played by a second function table handed to InitializeInjectionNvtx2 before the
// program's own first NVTX call, as libnccl's came before libtorch's in the real job.
// Is not: a check; the tests read what the plugin and the injection library wrote.
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "nccl_profiler_abi.h"

namespace abi = rankscope::nccl_plugin::abi;

namespace {

constexpr size_t kCount = 1 << 20;  // floats: x = torch.ones(1 << 20)
constexpr uint8_t kChannels = 64;    // "64 p2p channels" in the job's log
constexpr uint64_t kCommHash = 0xf0ec67fd6fd098a2ull;

void log_nothing(int, unsigned long, const char*, int, const char*, ...) {}

// A second NVTX module (libnccl's copy of the NVTX header code): its own function tables.
struct NcclNvtxModule {
  NvtxFunctionPointer core_slots[NVTX_CBID_CORE_SIZE + 1] = {};
  NvtxFunctionPointer* core[NVTX_CBID_CORE_SIZE + 1] = {};
  NvtxFunctionPointer core2_slots[NVTX_CBID_CORE2_SIZE + 1] = {};
  NvtxFunctionPointer* core2[NVTX_CBID_CORE2_SIZE + 1] = {};
  nvtxDomainHandle_t domain = nullptr;

  template <typename F>
  F fn(unsigned id) {
    return reinterpret_cast<F>(core2_slots[id]);
  }
  void push(const char* message) {
    nvtxEventAttributes_t a = {};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = message;
    if (auto f = fn<int (*)(nvtxDomainHandle_t, const nvtxEventAttributes_t*)>(NVTX_CBID_CORE2_DomainRangePushEx)) f(domain, &a);
  }
  void pop() {
    if (auto f = fn<int (*)(nvtxDomainHandle_t)>(NVTX_CBID_CORE2_DomainRangePop)) f(domain);
  }
};
NcclNvtxModule g_nccl_nvtx;

int NVTX_API module_table(NvtxCallbackModule module, NvtxFunctionTable* table, unsigned int* size) {
  if (module == NVTX_CB_MODULE_CORE) {
    *table = g_nccl_nvtx.core;
    *size = NVTX_CBID_CORE_SIZE;
    return 1;
  }
  if (module == NVTX_CB_MODULE_CORE2) {
    *table = g_nccl_nvtx.core2;
    *size = NVTX_CBID_CORE2_SIZE;
    return 1;
  }
  return 0;
}

const NvtxExportTableCallbacks g_callbacks = {sizeof(NvtxExportTableCallbacks), &module_table};
const void* NVTX_API export_table(uint32_t id) { return id == NVTX_ETID_CALLBACKS ? &g_callbacks : nullptr; }

// NCCL's module initialises the injection library (at communicator init) and records one range.
void init_nccl_nvtx_module() {
  const char* path = std::getenv("NVTX_INJECTION64_PATH");
  if (!path || !*path) return;
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  auto* init = lib ? reinterpret_cast<int (*)(NvtxGetExportTableFunc_t)>(dlsym(lib, "InitializeInjectionNvtx2")) : nullptr;
  if (!init) return;
  for (unsigned i = 0; i <= NVTX_CBID_CORE_SIZE; ++i) g_nccl_nvtx.core[i] = &g_nccl_nvtx.core_slots[i];
  for (unsigned i = 0; i <= NVTX_CBID_CORE2_SIZE; ++i) g_nccl_nvtx.core2[i] = &g_nccl_nvtx.core2_slots[i];
  if (init(&export_table) == 0) return;
  if (auto create = g_nccl_nvtx.fn<nvtxDomainHandle_t (*)(const char*)>(NVTX_CBID_CORE2_DomainCreateA))
    g_nccl_nvtx.domain = create("NCCL");
  g_nccl_nvtx.push("ncclCommInitRankConfig");
  g_nccl_nvtx.pop();
}

struct Job {
  abi::ProfilerV5* v5 = nullptr;
  void* ctx = nullptr;

  void* start(abi::DescrV5 d) {
    void* h = nullptr;
    d.rank = 0;
    v5->startEvent(ctx, &h, &d);
    return h;
  }
  void stop(void* h) {
    if (h) v5->stopEvent(h);
  }
  void* api(uint64_t type, const char* func, void* parent) {
    abi::DescrV5 d{};
    d.type = type;
    d.parentObj = parent;
    if (type == abi::kGroupApi) d.groupApi.groupDepth = 2;
    else {
      d.p2pApi.func = func;
      d.p2pApi.count = kCount;
      d.p2pApi.datatype = "ncclFloat32";
    }
    return start(d);
  }
  void* p2p(const char* func, void* parent_api, void* group) {
    abi::DescrV5 d{};
    d.type = abi::kP2p;
    d.parentObj = parent_api;
    d.p2p.func = func;
    d.p2p.datatype = "ncclFloat32";
    d.p2p.count = kCount;
    d.p2p.peer = 0;  // itself
    d.p2p.nChannels = kChannels;
    d.p2p.parentGroup = group;
    return start(d);
  }
  // dist.batch_isend_irecv([isend(x, 0), irecv(y, 0)]) as NCCL 2.28.9 reports it.
  void exchange() {
    void* group_api = api(abi::kGroupApi, nullptr, nullptr);
    if (group_api) v5->recordEventState(group_api, abi::kStateGroupStartApiStop, nullptr);
    void* send_api = api(abi::kP2pApi, "Send", group_api);
    stop(send_api);
    void* recv_api = api(abi::kP2pApi, "Recv", group_api);
    stop(recv_api);
    if (group_api) v5->recordEventState(group_api, abi::kStateGroupEndApiStart, nullptr);
    g_nccl_nvtx.push("ncclGroupEnd");
    abi::DescrV5 g{};
    g.type = abi::kGroup;
    void* group = start(g);
    void* send = p2p("Send", send_api, group);
    void* recv = p2p("Recv", recv_api, group);
    stop(send);
    stop(recv);
    stop(group);
    g_nccl_nvtx.pop();
    stop(group_api);
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string plugin;
  int iterations = 10;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--plugin" && i + 1 < argc) plugin = argv[++i];
    else if (a == "--iterations" && i + 1 < argc) iterations = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: self_p2p_job --plugin SO [--iterations N]   (RANKSCOPE_RUN_DIR from the environment)\n");
      return 2;
    }
  }
  for (const char* v : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"})
    unsetenv(v);
  void* lib = dlopen(plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  Job job;
  job.v5 = lib ? static_cast<abi::ProfilerV5*>(dlsym(lib, "ncclProfiler_v5")) : nullptr;
  if (!job.v5) {
    std::fprintf(stderr, "self_p2p_job: cannot load ncclProfiler_v5 from %s\n", plugin.c_str());
    return 2;
  }
  init_nccl_nvtx_module();  // NCCL's ranges first, as in ncclCommInitRankConfig
  int mask = 0;
  job.v5->init(&job.ctx, kCommHash, &mask, nullptr, 1, 1, 0, &log_nothing);

  for (int i = 0; i < iterations; ++i) {
    nvtxRangePushA("train/step");
    nvtxRangePushA("exchange");
    job.exchange();
    nvtxRangePop();
    nvtxRangePushA("a2a");  // all_to_all_single on one rank: NCCL copies, the plugin hears nothing
    nvtxRangePop();
    nvtxRangePop();
  }
  nvtxRangePushA("train/step");
  nvtxRangePushA("backward");  // torch.cuda._sleep: a kernel that spins for a minute
  nvtxRangePop();
  nvtxRangePushA("exchange");
  job.exchange();  // queued on the GPU behind the spinning kernel
  std::printf("READY %d\n", int(getpid()));
  std::fflush(stdout);
  for (;;) pause();
}
