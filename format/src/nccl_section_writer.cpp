// nccl_section_writer.cpp — the NCCL plugin's section of a flight recorder.
#include "rankscope/format/nccl_section_writer.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "seqlock.h"

namespace rankscope::format {
namespace {

template <typename T>
std::atomic_ref<T> atomic(T& v) {
  return std::atomic_ref<T>(v);
}

}  // namespace

void NcclSectionWriter::write_identity(const NcclIdentityDesc& id) {
  atomic(info_->comm_hash).store(id.comm_hash, std::memory_order_relaxed);
  info_->abi_version = id.abi_version;
  info_->event_mask = id.event_mask;
  info_->n_nodes = id.n_nodes;
  const size_t n = std::min(id.comm_name.size(), sizeof(info_->comm_name) - 1);
  std::memset(info_->comm_name, 0, sizeof(info_->comm_name));
  if (n > 0) std::memcpy(info_->comm_name, id.comm_name.data(), n);
  for (auto& p : info_->peers) p.peer = -1;
  std::atomic_thread_fence(std::memory_order_release);
  std::memcpy(info_->magic, kNcclInfoMagic, sizeof(kNcclInfoMagic));
}

void NcclSectionWriter::set_comm_hash(uint64_t hash) {
  uint64_t expected = 0;
  if (hash != 0) atomic(info_->comm_hash).compare_exchange_strong(expected, hash, std::memory_order_relaxed);
}

uint64_t NcclSectionWriter::comm_hash() const { return atomic(info_->comm_hash).load(std::memory_order_relaxed); }

void NcclSectionWriter::set_finalized() { atomic(info_->finalized).store(1, std::memory_order_release); }

void NcclSectionWriter::count_dropped() { atomic(info_->dropped_events).fetch_add(1, std::memory_order_relaxed); }
void NcclSectionWriter::count_foreign() { atomic(info_->foreign_events).fetch_add(1, std::memory_order_relaxed); }
void NcclSectionWriter::count_ignored() { atomic(info_->ignored_events).fetch_add(1, std::memory_order_relaxed); }

void NcclSectionWriter::kernel_seen(int64_t now_ns) {
  atomic(info_->last_kernel_ns).store(now_ns, std::memory_order_relaxed);
}

void NcclSectionWriter::api_enter(NcclApiCall call, CollectiveOp op, int tid, int64_t now_ns) {
  NcclApiState& a = info_->api;
  seqlock::begin(a.seq);
  if (a.depth == 0 || a.begin_ns == 0) {
    a.begin_ns = now_ns;
    a.tid = tid;
    a.call = uint32_t(call);
    a.op = uint32_t(op);
  }
  a.depth += 1;
  seqlock::end(a.seq);
}

void NcclSectionWriter::api_leave() {
  NcclApiState& a = info_->api;
  seqlock::begin(a.seq);
  if (a.depth > 0) a.depth -= 1;
  if (a.depth == 0) {
    a.begin_ns = 0;
    a.call = uint32_t(NcclApiCall::kNone);
    a.op = 0;
  }
  seqlock::end(a.seq);
}

NcclPeerCounters* NcclSectionWriter::peer_entry(int peer) {
  std::atomic_ref<uint32_t> used(info_->peers_used);
  // Lookup first: entries are claimed once (peer -1 -> peer with a CAS) and never released.
  for (uint32_t i = 0; i < kNcclMaxPeers; ++i) {
    std::atomic_ref<int32_t> p(info_->peers[i].peer);
    int32_t v = p.load(std::memory_order_acquire);
    if (v == peer) return &info_->peers[i];
    if (v == -1) {
      if (p.compare_exchange_strong(v, peer, std::memory_order_acq_rel)) {
        used.fetch_add(1, std::memory_order_relaxed);
        return &info_->peers[i];
      }
      if (v == peer) return &info_->peers[i];  // another thread claimed it for the same peer
    }
  }
  atomic(info_->peers_overflow).fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

void NcclSectionWriter::peer_launched(int peer, bool send) {
  if (NcclPeerCounters* e = peer_entry(peer))
    atomic(send ? e->send_launched : e->recv_launched).fetch_add(1, std::memory_order_relaxed);
}

void NcclSectionWriter::peer_completed(int peer, bool send) {
  if (NcclPeerCounters* e = peer_entry(peer))
    atomic(send ? e->send_completed : e->recv_completed).fetch_add(1, std::memory_order_relaxed);
}

}  // namespace rankscope::format
