// nccl_profiler_abi.h — the NCCL profiler plugin ABI, versions 3 to 5, as rankscope reads it.
//
// Is: our own definitions of the structs NCCL passes to a profiler plugin, written from the field
// list in the project's research notes (NCCL's headers are not copied). Field order and types must
// match NCCL's exactly; natural C alignment, no packing. Is not: NCCL's headers (none are needed:
// the plugin links neither NCCL nor CUDA).
//   v3: NCCL 2.26 (init without identity; the comm hash rides on each Coll/P2p descriptor)
//   v4: NCCL 2.27 (identity in init; KernelCh carries the GPU timer; 8-bit event type)
//   v5: NCCL 2.28 (64-bit event type; API events; commId second in init)
// NCCL 2.29+ looks for v6 first and then accepts v5; v6-only event types are ignored by type.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace rankscope::nccl_plugin::abi {

using Result = int;  // ncclResult_t: 0 success; the plugin returns 0 from everything
inline constexpr Result kSuccess = 0;
// ncclDebugLogger_t: (level, subsystem flags, file, line, printf format, ...)
using Logger = void (*)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);
inline constexpr int kLogWarn = 2;
inline constexpr int kLogInfo = 3;
inline constexpr unsigned long kLogInit = 1;

// Event type bits (also the activation mask).
enum EventType : uint64_t {
  kGroup = 1,
  kColl = 2,
  kP2p = 4,
  kProxyOp = 8,
  kProxyStep = 16,
  kProxyCtrl = 32,
  kKernelCh = 64,
  kNetPlugin = 128,
  kGroupApi = 256,
  kCollApi = 512,
  kP2pApi = 1024,
  kKernelLaunch = 2048,
};

// States passed to recordEventState (numbers are what matters; names differ between NCCL copies).
inline constexpr int kStateKernelChStop = 22;
inline constexpr int kStateGroupStartApiStop = 23;  // ncclGroupStart returned
inline constexpr int kStateGroupEndApiStart = 24;   // ncclGroupEnd began

// ---- v5 (NCCL 2.28) ----
struct DescrV5 {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct { bool graphCaptured; int groupDepth; } groupApi;
    struct { const char* func; size_t count; const char* datatype; int root; void* stream; bool graphCaptured; } collApi;
    struct { const char* func; size_t count; const char* datatype; void* stream; bool graphCaptured; } p2pApi;
    struct { void* stream; } kernelLaunch;
    struct {
      uint64_t seqNumber; const char* func; const void* sendBuff; void* recvBuff; size_t count; int root;
      const char* datatype; uint8_t nChannels; uint8_t nWarps; const char* algo; const char* proto; void* parentGroup;
    } coll;
    struct { const char* func; void* buff; const char* datatype; size_t count; int peer; uint8_t nChannels; void* parentGroup; } p2p;
    struct { pid_t pid; uint8_t channelId; int peer; int nSteps; int chunkSize; int isSend; } proxyOp;
    struct { int step; } proxyStep;
    struct { uint8_t channelId; uint64_t pTimer; } kernelCh;
    struct { int64_t id; void* data; } netPlugin;
  };
};

// v4 and v5 share the state arguments.
union StateArgsV5 {
  struct { size_t transSize; } proxyStep;
  struct { int appendedProxyOps; } proxyCtrl;
  struct { void* data; } netPlugin;
  struct { uint64_t pTimer; } kernelCh;
};

struct ProfilerV5 {
  const char* name;
  Result (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes, int nranks,
                 int rank, Logger logfn);
  Result (*startEvent)(void* context, void** eHandle, DescrV5* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, StateArgsV5* eStateArgs);
  Result (*finalize)(void* context);
};

// ---- v4 (NCCL 2.27): no API events, 8-bit type, no parentGroup ----
struct DescrV4 {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      uint64_t seqNumber; const char* func; const void* sendBuff; void* recvBuff; size_t count; int root;
      const char* datatype; uint8_t nChannels; uint8_t nWarps; const char* algo; const char* proto;
    } coll;
    struct { const char* func; void* buff; const char* datatype; size_t count; int peer; uint8_t nChannels; } p2p;
    struct { pid_t pid; uint8_t channelId; int peer; int nSteps; int chunkSize; int isSend; } proxyOp;
    struct { int step; } proxyStep;
    struct { uint8_t channelId; uint64_t pTimer; } kernelCh;
    struct { int64_t id; void* data; } netPlugin;
  };
};

struct ProfilerV4 {
  const char* name;
  Result (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash, int nNodes, int nranks,
                 int rank, Logger logfn);
  Result (*startEvent)(void* context, void** eHandle, DescrV4* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, StateArgsV5* eStateArgs);
  Result (*finalize)(void* context);
};

// ---- v3 (NCCL 2.26): init knows nothing of the communicator; Coll/P2p carry its hash ----
struct DescrV3 {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      const char* name; uint64_t commHash; uint64_t seqNumber; const char* func; const void* sendBuff; void* recvBuff;
      size_t count; int root; const char* datatype; uint8_t nMaxChannels; uint8_t nWarps; const char* algo;
      const char* proto;
    } coll;
    struct { const char* name; uint64_t commHash; const char* func; void* buff; const char* datatype; size_t count; int peer; } p2p;
    struct { pid_t pid; uint8_t channelId; int peer; int nSteps; int chunkSize; int isSend; } proxyOp;
    struct { int step; } proxyStep;
    struct { uint8_t channelId; } kernelCh;
    struct { int64_t id; void* data; } netPlugin;
  };
};

union StateArgsV3 {
  struct { size_t transSize; int steps; } proxyOp;
  struct { int appendedProxyOps; } proxyCtrl;
};

struct ProfilerV3 {
  const char* name;
  Result (*init)(void** context, int* eActivationMask);
  Result (*startEvent)(void* context, void** eHandle, DescrV3* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, StateArgsV3* eStateArgs);
  Result (*finalize)(void* context);
};

}  // namespace rankscope::nccl_plugin::abi
