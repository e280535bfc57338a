// plugin_exports.cpp — the symbols NCCL looks for: ncclProfiler_v5, ncclProfiler_v4, ncclProfiler_v3.
//
// Is: one adapter per ABI version that turns NCCL's descriptor into an NcclEvent and hands it to the
// communicator's recorder. Every entry point returns success whatever happens (errors must not
// reach NCCL) and tolerates a null or dummy context. Is not: the recording (comm_recorder.cpp).
#include "nccl_profiler_abi.h"
#include "plugin_process.h"

namespace rankscope::nccl_plugin {
namespace {

constexpr const char* kName = "rankscope";

// ---- v5 ----
abi::Result init_v5(void** context, uint64_t comm_id, int* mask, const char* comm_name, int n_nodes, int nranks, int rank,
                    abi::Logger log) {
  if (context) *context = open_comm(5, comm_id, comm_name, n_nodes, nranks, rank, mask, log);
  return abi::kSuccess;
}

// Coll and P2p fields carry the same names in v4 and v5 (v5 adds parentGroup): one decoder.
template <typename Descr>
NcclEvent decode_v4_v5(const Descr* d) {
  NcclEvent e;
  e.type = d->type;
  e.parent = d->parentObj;
  e.rank = d->rank;
  if (d->type == abi::kColl) {
    e.func = d->coll.func;
    e.datatype = d->coll.datatype;
    e.count = d->coll.count;
    e.root = d->coll.root;
    e.has_seq = true;
    e.seq_number = d->coll.seqNumber;
    e.n_channels = d->coll.nChannels;
  } else if (d->type == abi::kP2p) {
    e.func = d->p2p.func;
    e.datatype = d->p2p.datatype;
    e.count = d->p2p.count;
    e.peer = d->p2p.peer;
    e.n_channels = d->p2p.nChannels;
  }
  return e;
}

abi::Result start_v5(void* context, void** handle, abi::DescrV5* d) {
  if (handle) *handle = nullptr;
  CommContext* c = comm_of(context);
  if (!c || !d || !handle) return abi::kSuccess;
  NcclEvent e = decode_v4_v5(d);
  if (d->type == abi::kCollApi) e.func = d->collApi.func;
  if (d->type == abi::kP2pApi) e.func = d->p2pApi.func;
  *handle = c->start(e);
  return abi::kSuccess;
}

abi::Result stop_any(void* handle) {
  CommContext::stop(handle);
  return abi::kSuccess;
}

abi::Result record_v5(void* handle, int state, abi::StateArgsV5* args) {
  CommContext::record_state(handle, state, args != nullptr);
  return abi::kSuccess;
}

abi::Result finalize_any(void* context) {
  close_comm(context);
  return abi::kSuccess;
}

// ---- v4 ----
abi::Result init_v4(void** context, int* mask, const char* comm_name, uint64_t comm_hash, int n_nodes, int nranks, int rank,
                    abi::Logger log) {
  if (context) *context = open_comm(4, comm_hash, comm_name, n_nodes, nranks, rank, mask, log);
  return abi::kSuccess;
}

abi::Result start_v4(void* context, void** handle, abi::DescrV4* d) {
  if (handle) *handle = nullptr;
  CommContext* c = comm_of(context);
  if (!c || !d || !handle) return abi::kSuccess;
  *handle = c->start(decode_v4_v5(d));
  return abi::kSuccess;
}

// ---- v3 ----
abi::Result init_v3(void** context, int* mask) {
  // No identity yet: the recorder learns the communicator from its first Coll/P2p descriptor.
  if (context) *context = open_comm(3, 0, nullptr, -1, 0, -1, mask, nullptr);
  return abi::kSuccess;
}

abi::Result start_v3(void* context, void** handle, abi::DescrV3* d) {
  if (handle) *handle = nullptr;
  CommContext* c = comm_of(context);
  if (!c || !d || !handle) return abi::kSuccess;
  NcclEvent e;
  e.type = d->type;
  e.parent = d->parentObj;
  e.rank = d->rank;
  if (d->type == abi::kColl) {
    e.func = d->coll.func;
    e.datatype = d->coll.datatype;
    e.count = d->coll.count;
    e.root = d->coll.root;
    e.has_seq = true;
    e.seq_number = d->coll.seqNumber;
    e.n_channels = d->coll.nMaxChannels;
    e.comm_hash = d->coll.commHash;
  } else if (d->type == abi::kP2p) {
    e.func = d->p2p.func;
    e.datatype = d->p2p.datatype;
    e.count = d->p2p.count;
    e.peer = d->p2p.peer;
    e.comm_hash = d->p2p.commHash;
  }
  *handle = c->start(e);
  return abi::kSuccess;
}

abi::Result record_v3(void* handle, int state, abi::StateArgsV3*) {
  CommContext::record_state(handle, state, false);
  return abi::kSuccess;
}

}  // namespace
}  // namespace rankscope::nccl_plugin

namespace np = rankscope::nccl_plugin;

// The objects NCCL resolves with dlsym (newest first). Plain global data, C linkage, exported.
extern "C" {
__attribute__((visibility("default"))) np::abi::ProfilerV5 ncclProfiler_v5 = {
    np::kName, np::init_v5, np::start_v5, np::stop_any, np::record_v5, np::finalize_any};
__attribute__((visibility("default"))) np::abi::ProfilerV4 ncclProfiler_v4 = {
    np::kName, np::init_v4, np::start_v4, np::stop_any, np::record_v5, np::finalize_any};
__attribute__((visibility("default"))) np::abi::ProfilerV3 ncclProfiler_v3 = {
    np::kName, np::init_v3, np::start_v3, np::stop_any, np::record_v3, np::finalize_any};
}
