// comm_recorder.cpp — NCCL events of one communicator into its flight recorder.
//
// Mapping (docs/FORMAT.md, "NCCL profiler plugin"):
//   Coll start      -> a ring record (seq = collectives launched on this communicator, the same on
//                      every member), op/dtype/count/root, NCCL's per-function seqNumber in `step`
//   Coll stop       -> host_returned (NCCL enqueued it; stopEvent means nothing more)
//   1st KernelCh    -> started; last KernelCh stop (nChannels stopped) -> completed
//   P2p             -> per peer and direction counters (their order differs between ranks, so they
//                      stay out of the communicator's ring). NCCL adds no proxy op, hence no KernelCh,
//                      for a send/recv to the rank itself (a copy inside the kernel) or of zero bytes:
//                      the host stop ends what we learn of them. Zero bytes count completed then; to
//                      self stays launched only (its GPU progress is unknowable, FORMAT.md).
//   GroupApi/CollApi/P2pApi -> "a host thread is inside an NCCL call" (NcclApiState)
// Without KernelCh events (a mask without it) completion is not known: collectives are recorded
// completed when NCCL stops them on the host.
#include "comm_recorder.h"

#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "nccl_profiler_abi.h"
#include "rankscope/format/clock.h"
#include "rankscope/format/nccl_plugin_run.h"

namespace rankscope::nccl_plugin {
namespace {

using format::CollectiveOp;
using format::DataType;

Handle g_ignored{HandleKind::kIgnored};  // for events we accept but do not record (Group, KernelLaunch)

int this_tid() {
  thread_local const int tid = int(::syscall(SYS_gettid));
  return tid;
}

bool same(const char* a, const char* b) { return a && std::strcmp(a, b) == 0; }

CollectiveOp op_of(const char* func) {
  if (!func) return CollectiveOp::kUnknown;
  if (same(func, "AllReduce")) return CollectiveOp::kAllReduce;
  if (same(func, "AllGather")) return CollectiveOp::kAllGather;
  if (same(func, "ReduceScatter")) return CollectiveOp::kReduceScatter;
  if (same(func, "Broadcast")) return CollectiveOp::kBroadcast;
  if (same(func, "Reduce")) return CollectiveOp::kReduce;
  if (same(func, "AlltoAll") || same(func, "AllToAll")) return CollectiveOp::kAllToAll;
  if (same(func, "Gather")) return CollectiveOp::kGather;
  if (same(func, "Scatter")) return CollectiveOp::kScatter;
  if (same(func, "Send")) return CollectiveOp::kSend;
  if (same(func, "Recv")) return CollectiveOp::kRecv;
  return CollectiveOp::kUnknown;
}

// NCCL names types "ncclFloat32", "ncclBfloat16", ... (older aliases: ncclFloat, ncclHalf, ...).
DataType dtype_of(const char* name) {
  if (!name) return DataType::kUnknown;
  std::string_view n(name);
  if (n.rfind("nccl", 0) == 0) n.remove_prefix(4);
  if (n == "Float32" || n == "Float") return DataType::kFloat32;
  if (n == "Bfloat16") return DataType::kBFloat16;
  if (n == "Float16" || n == "Half") return DataType::kFloat16;
  if (n == "Int32" || n == "Int") return DataType::kInt32;
  if (n == "Int64") return DataType::kInt64;
  if (n == "Uint8" || n == "Char") return DataType::kUInt8;
  if (n == "Float64" || n == "Double") return DataType::kFloat64;
  return DataType::kUnknown;
}

// NCCL's seqNumber exists for these five functions only.
bool has_function_seq(CollectiveOp op) {
  return op == CollectiveOp::kAllReduce || op == CollectiveOp::kAllGather || op == CollectiveOp::kReduceScatter ||
         op == CollectiveOp::kBroadcast || op == CollectiveOp::kReduce;
}

}  // namespace

std::unique_ptr<CommContext> CommContext::create(const RecorderSettings& s, int abi, uint64_t hash,
                                                 const char* comm_name, int n_nodes, int nranks, int rank,
                                                 std::string& error) {
  static std::atomic<uint32_t> unidentified{0};
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::path(s.run_dir) / format::kNcclPluginDir;
  std::filesystem::create_directories(dir, ec);
  const std::string base = fmt::format("{}.{}", s.host, ::getpid());
  std::string name = fmt::format("{}.{:016x}.r{}.flight", base, hash, rank);
  if (hash == 0) {
    // A plugin that is really unloaded and loaded again (NCCL reloads it once no communicator uses
    // it) counts from 0 again: the names an earlier load wrote are skipped, never written over.
    do {
      name = fmt::format("{}.ctx{}.flight", base, unidentified.fetch_add(1));
    } while (std::filesystem::exists(dir / name, ec));
  }
  std::unique_ptr<CommContext> c(new CommContext());
  c->file_ = (dir / name).string();
  format::FlightIdentity id;
  id.rank = s.launcher_rank;
  id.world_size = s.launcher_world;
  id.local_rank = s.launcher_local;
  id.pid = int(::getpid());
  id.host = s.host;
  id.run_id = s.run_id;
  id.start_ns = now_unix_ns();
  format::FlightLayoutParams params;
  params.max_threads = 1;
  params.max_range_depth = 1;
  params.max_comms = 1;
  params.ring_entries = s.ring_entries;
  params.max_params = 0;
  auto w = format::FlightRecorderWriter::create(c->file_, id, params);
  if (!w.ok()) {
    error = w.status().message();
    return nullptr;
  }
  c->writer_ = std::move(w).value();
  c->writer_->set_concurrent_collective_writers(true);
  c->nccl_storage_ = std::make_unique<format::NcclSectionWriter>(c->writer_->nccl_section());
  c->nccl_ = c->nccl_storage_.get();
  format::NcclIdentityDesc nid;
  nid.comm_hash = hash;
  nid.abi_version = uint32_t(abi);
  nid.event_mask = s.mask;
  nid.n_nodes = n_nodes;
  nid.comm_name = comm_name ? std::string_view(comm_name) : std::string_view();
  c->nccl_->write_identity(nid);
  c->kernel_progress_ = (s.mask & abi::kKernelCh) != 0;
  c->n_slots_ = std::max<uint32_t>(s.slots, 1);
  c->slots_.reset(new InflightSlot[c->n_slots_]);
  for (uint32_t i = 0; i < c->n_slots_; ++i) c->slots_[i].owner = c.get();
  if (nranks > 0) {
    // v4/v5: the communicator is known now. Its slot name is only a label: readers name it from
    // the NCCL section (hash and commName).
    c->comm_ = c->writer_->register_comm(comm_name && *comm_name ? comm_name : fmt::format("nccl-{:016x}", hash), nranks, rank);
    std::call_once(c->registered_, [] {});
  }
  c->writer_->set_process_state(format::ProcessState::kRunning);
  return c;
}

CommContext::~CommContext() = default;

void CommContext::ensure_registered(const NcclEvent& e) {
  std::call_once(registered_, [&] {
    nccl_->set_comm_hash(e.comm_hash);
    comm_ = writer_->register_comm(fmt::format("nccl-{:016x}", e.comm_hash), 0, e.rank);
  });
}

InflightSlot* CommContext::claim_slot() {
  for (uint32_t tries = 0; tries < n_slots_; ++tries) {
    InflightSlot& s = slots_[next_slot_.fetch_add(1, std::memory_order_relaxed) % n_slots_];
    uint32_t expected = 0;
    if (s.busy.compare_exchange_strong(expected, 1, std::memory_order_acquire)) return &s;
  }
  return nullptr;
}

InflightSlot* CommContext::own_slot(void* parent) {
  // A PXN proxy of another process hands us a parent from its own address space: accept only
  // pointers into our pool, checked by address before anything is read through them.
  const auto p = reinterpret_cast<uintptr_t>(parent);
  const auto first = reinterpret_cast<uintptr_t>(&slots_[0]);
  const auto end = reinterpret_cast<uintptr_t>(&slots_[n_slots_]);
  if (p < first || p >= end || (p - first) % sizeof(InflightSlot) != offsetof(InflightSlot, self)) return nullptr;
  InflightSlot* s = reinterpret_cast<InflightSlot*>(p - offsetof(InflightSlot, self));
  return s->busy.load(std::memory_order_acquire) ? s : nullptr;
}

void* CommContext::start(const NcclEvent& e) {
  switch (e.type) {
    case abi::kColl: return start_coll(e, false);
    case abi::kP2p: return start_coll(e, true);
    case abi::kKernelCh: return start_kernel_channel(e);
    case abi::kGroupApi: api_start(HandleKind::kGroupApi, e); return &group_api_;
    case abi::kCollApi: api_start(HandleKind::kCollApi, e); return &coll_api_;
    case abi::kP2pApi: api_start(HandleKind::kP2pApi, e); return &p2p_api_;
    case abi::kGroup:
    case abi::kKernelLaunch: return &g_ignored;  // parents NCCL may expect to be non-null
    default:
      // Proxy, network and (v6) copy-engine events: not recorded. Null: NCCL skips their stop.
      nccl_->count_ignored();
      return nullptr;
  }
}

void* CommContext::start_coll(const NcclEvent& e, bool p2p) {
  ensure_registered(e);
  const int64_t now = now_unix_ns();
  InflightSlot* s = claim_slot();
  const CollectiveOp op = p2p ? (same(e.func, "Send") ? CollectiveOp::kSend : CollectiveOp::kRecv) : op_of(e.func);
  if (p2p) {
    nccl_->peer_launched(e.peer, op == CollectiveOp::kSend);
    if (!s) {
      nccl_->count_dropped();
      nccl_->peer_completed(e.peer, op == CollectiveOp::kSend);  // unknowable: never shown as pending
      return nullptr;
    }
    s->self.kind = HandleKind::kP2p;
    s->in_ring = false;
    s->peer = e.peer;
    s->send = op == CollectiveOp::kSend;
    s->to_self = e.rank >= 0 && e.peer == e.rank && e.count > 0;
  } else {
    format::CollectiveDesc d;
    d.op = op;
    d.dtype = dtype_of(e.datatype);
    d.count = e.count;
    d.bytes = e.count * format::dtype_size(d.dtype);
    d.peer = op == CollectiveOp::kBroadcast || op == CollectiveOp::kReduce ? e.root : -1;
    const int64_t fseq = has_function_seq(op) && e.has_seq ? int64_t(e.seq_number) : -1;
    const uint64_t seq = writer_->collective_enqueue(comm_, d, fseq, {}, now);
    if (!s) {
      // Completion will not be known: recorded completed at once, so it never looks pending.
      nccl_->count_dropped();
      writer_->collective_complete(comm_, seq, now);
      return nullptr;
    }
    s->self.kind = HandleKind::kColl;
    s->in_ring = true;
    s->ring_seq = seq;
    s->to_self = false;
  }
  // No KernelCh will come for a P2p to self or of zero bytes: 0 channels completes it at the host stop.
  const bool no_kernel_channels = p2p && (e.count == 0 || (e.rank >= 0 && e.peer == e.rank));
  s->n_channels = no_kernel_channels ? 0 : e.n_channels;
  s->ch_started.store(0, std::memory_order_relaxed);
  s->ch_stopped.store(0, std::memory_order_relaxed);
  s->pending.store(2, std::memory_order_release);
  return &s->self;
}

void* CommContext::start_kernel_channel(const NcclEvent& e) {
  InflightSlot* s = own_slot(e.parent);
  if (!s) {
    nccl_->count_foreign();
    return nullptr;
  }
  // The clock is read once per collective here (first channel): on VMs without a TSC clock source a
  // read is a system call (~0.4 us), the largest part of the plugin's cost.
  if (s->ch_started.fetch_add(1, std::memory_order_acq_rel) == 0) {
    const int64_t now = now_unix_ns();
    nccl_->kernel_seen(now);
    if (s->in_ring) writer_->collective_start(comm_, s->ring_seq, now);
  }
  return &s->channel;
}

void CommContext::api_start(HandleKind kind, const NcclEvent& e) {
  using format::NcclApiCall;
  const NcclApiCall call = kind == HandleKind::kGroupApi ? NcclApiCall::kGroupStart
                           : kind == HandleKind::kP2pApi ? NcclApiCall::kP2p
                                                         : NcclApiCall::kCollective;
  nccl_->api_enter(call, kind == HandleKind::kGroupApi ? CollectiveOp::kUnknown : op_of(e.func), this_tid(), now_unix_ns());
}

void CommContext::api_state(int state) {
  // A group's API event spans ncclGroupStart to the end of ncclGroupEnd; the thread is inside
  // NCCL only in the two calls, not between them while it enqueues work.
  if (state == abi::kStateGroupStartApiStop) nccl_->api_leave();
  else if (state == abi::kStateGroupEndApiStart)
    nccl_->api_enter(format::NcclApiCall::kGroupEnd, CollectiveOp::kUnknown, this_tid(), now_unix_ns());
}

void CommContext::complete(InflightSlot* s, int64_t now_ns) {
  if (s->in_ring) writer_->collective_complete(comm_, s->ring_seq, now_ns);
  else if (!s->to_self) nccl_->peer_completed(s->peer, s->send);
  release(s);
}

void CommContext::release(InflightSlot* s) {
  if (s->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) s->busy.store(0, std::memory_order_release);
}

void CommContext::host_stopped(InflightSlot* s) {
  if (s->in_ring) writer_->collective_host_returned(comm_, s->ring_seq);
  // Without kernel progress (or with a channel count NCCL did not give) the host stop is all we
  // will ever learn.
  if (!kernel_progress_ || s->n_channels == 0) complete(s, now_unix_ns());
  release(s);
}

void CommContext::channel_stopped(InflightSlot* s) {
  if (s->n_channels == 0 || s->ch_stopped.fetch_add(1, std::memory_order_acq_rel) + 1 != s->n_channels) return;
  const int64_t now = now_unix_ns();  // the last channel: the collective completed
  nccl_->kernel_seen(now);
  complete(s, now);
}

void CommContext::stop(void* handle) {
  if (!handle) return;
  auto* h = static_cast<Handle*>(handle);
  switch (h->kind) {
    case HandleKind::kColl:
    case HandleKind::kP2p: {
      auto* s = reinterpret_cast<InflightSlot*>(reinterpret_cast<char*>(h) - offsetof(InflightSlot, self));
      s->owner->host_stopped(s);
      return;
    }
    case HandleKind::kKernelCh: {
      auto* s = reinterpret_cast<InflightSlot*>(reinterpret_cast<char*>(h) - offsetof(InflightSlot, channel));
      s->owner->channel_stopped(s);
      return;
    }
    case HandleKind::kGroupApi:
    case HandleKind::kCollApi:
    case HandleKind::kP2pApi: reinterpret_cast<ApiHandle*>(h)->owner->api_stop(); return;
    case HandleKind::kIgnored: return;
  }
}

void CommContext::record_state(void* handle, int state, bool has_ptimer) {
  (void)has_ptimer;  // the GPU timer is not recorded yet: CPU times keep one clock per file
  if (!handle) return;
  auto* h = static_cast<Handle*>(handle);
  if (h->kind == HandleKind::kGroupApi) reinterpret_cast<ApiHandle*>(h)->owner->api_state(state);
}

void CommContext::finalize() {
  nccl_->set_finalized();
  writer_->set_process_state(format::ProcessState::kFinished);
  writer_->heartbeat(now_unix_ns());
  writer_->sync();
}

}  // namespace rankscope::nccl_plugin
