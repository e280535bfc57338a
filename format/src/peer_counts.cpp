// peer_counts.cpp — the peer-counts section: sketch weights, hashes, record encoding, read-back.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "peer_counts_section.h"
#include "seqlock.h"

namespace rankscope::format {
namespace {

uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

const PeerCountsDirectory* directory_of(const uint8_t* base) {
  return reinterpret_cast<const PeerCountsDirectory*>(base + kPeerCountsDirectoryOffset);
}

uint64_t comm_bytes() { return sizeof(uint64_t) + uint64_t(kPeerCountsEntriesPerComm) * sizeof(PeerCountsRecord); }

struct Summary {
  uint64_t total = 0, min = 0, max = 0, hash = 0, sketch = 0;
  bool fits32 = true;
};

// `sending`: counts[j] goes from `me` to j; else counts[j] comes from j to `me`.
Summary summarise(std::span<const size_t> counts, uint32_t me, bool sending) {
  Summary s;
  s.min = counts.empty() ? 0 : std::numeric_limits<uint64_t>::max();
  for (size_t j = 0; j < counts.size(); ++j) {
    const uint64_t c = counts[j];
    s.total += c;
    s.min = std::min(s.min, c);
    s.max = std::max(s.max, c);
    s.sketch += c * (sending ? peer_pair_weight(me, uint32_t(j)) : peer_pair_weight(uint32_t(j), me));
    if (c > std::numeric_limits<uint32_t>::max()) s.fits32 = false;
  }
  s.hash = peer_counts_hash(counts);
  return s;
}

}  // namespace

uint64_t peer_pair_weight(uint32_t sender, uint32_t receiver) {
  return mix64((uint64_t(sender) << 32) | receiver) | 1;
}

uint64_t peer_counts_hash(std::span<const size_t> counts) {
  uint64_t h = mix64(counts.size());
  for (size_t c : counts) h = mix64(h ^ uint64_t(c));
  return h;
}

uint64_t peer_counts_section_bytes(const FlightLayoutParams& params) { return uint64_t(params.max_comms) * comm_bytes(); }

PeerCountsRecord make_peer_counts_record(uint64_t seq, int rank_in_comm, std::span<const size_t> send,
                                         std::span<const size_t> recv) {
  PeerCountsRecord r{};
  const uint32_t me = uint32_t(std::max(0, rank_in_comm));
  const Summary s = summarise(send, me, true), v = summarise(recv, me, false);
  r.seq = seq;
  r.n_peers = uint32_t(std::max(send.size(), recv.size()));
  r.rank_in_comm = rank_in_comm;
  r.send_total = s.total;
  r.recv_total = v.total;
  r.send_min = s.min;
  r.send_max = s.max;
  r.recv_min = v.min;
  r.recv_max = v.max;
  r.send_hash = s.hash;
  r.recv_hash = v.hash;
  r.send_sketch = s.sketch;
  r.recv_sketch = v.sketch;
  if (send.size() == recv.size() && send.size() <= kPeerCountsExactPeers && s.fits32 && v.fits32) {
    r.flags |= kPeerCountsExact;
    for (size_t j = 0; j < send.size(); ++j) {
      r.send[j] = uint32_t(send[j]);
      r.recv[j] = uint32_t(recv[j]);
    }
  }
  return r;
}

void init_peer_counts_directory(uint8_t* base, uint64_t offset, const FlightLayoutParams& params) {
  (void)params;
  auto* d = reinterpret_cast<PeerCountsDirectory*>(base + kPeerCountsDirectoryOffset);
  d->offset = offset;
  d->entries_per_comm = kPeerCountsEntriesPerComm;
  d->record_bytes = sizeof(PeerCountsRecord);
  d->exact_peers = kPeerCountsExactPeers;
  d->comm_bytes = uint32_t(comm_bytes());
}

void write_peer_counts(uint8_t* base, int comm, uint64_t seq, int rank_in_comm, std::span<const size_t> send,
                       std::span<const size_t> recv) {
  const PeerCountsDirectory* d = directory_of(base);
  if (d->offset == 0 || comm < 0) return;
  uint8_t* slot = base + d->offset + uint64_t(comm) * d->comm_bytes;
  const uint64_t call = std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(slot)).fetch_add(1, std::memory_order_relaxed);
  auto* rec = reinterpret_cast<PeerCountsRecord*>(slot + sizeof(uint64_t)) + call % d->entries_per_comm;
  const PeerCountsRecord fresh = make_peer_counts_record(seq, rank_in_comm, send, recv);
  // Everything but the guard, under the seqlock (the record is reused when the slot wraps).
  seqlock::begin(rec->guard);
  std::memcpy(reinterpret_cast<uint8_t*>(rec) + sizeof(uint64_t), reinterpret_cast<const uint8_t*>(&fresh) + sizeof(uint64_t),
              sizeof(PeerCountsRecord) - sizeof(uint64_t));
  seqlock::end(rec->guard);
}

std::vector<PeerCountsSnapshot> read_peer_counts(const seqlock::CopyWindow& copies, int comm, uint64_t next_seq,
                                                 const std::string& comm_name, std::vector<std::string>& warnings) {
  const std::span<const uint8_t> bytes = copies.data();
  std::vector<PeerCountsSnapshot> out;
  if (bytes.size() < kPeerCountsDirectoryOffset + sizeof(PeerCountsDirectory)) return out;
  const PeerCountsDirectory d = *directory_of(bytes.data());
  if (d.offset == 0) return out;  // written before the section existed
  const auto* h = reinterpret_cast<const FlightHeader*>(bytes.data());
  const uint64_t limit = bytes.size();
  const uint64_t per_comm = sizeof(uint64_t) + uint64_t(d.entries_per_comm) * sizeof(PeerCountsRecord);
  if (d.record_bytes != sizeof(PeerCountsRecord) || d.exact_peers != kPeerCountsExactPeers || d.entries_per_comm == 0 ||
      d.entries_per_comm > 4096 || d.comm_bytes != per_comm || d.offset % alignof(PeerCountsRecord) != 0 || d.offset > limit ||
      uint64_t(h->layout.max_comms) * per_comm > limit - d.offset) {
    warnings.push_back(comm_name + ": peer-counts section inconsistent: ignored");
    return out;
  }
  const uint8_t* slot = bytes.data() + d.offset + uint64_t(comm) * per_comm;
  const auto* recs = reinterpret_cast<const PeerCountsRecord*>(slot + sizeof(uint64_t));
  for (uint32_t i = 0; i < d.entries_per_comm; ++i) {
    PeerCountsRecord r;
    const bool ok = copies.read(&recs[i], &r, sizeof(r), &recs[i].guard);
    if (r.guard == 0 && ok) continue;  // never written
    if (r.seq >= next_seq) continue;   // not a collective of this communicator (yet)
    PeerCountsSnapshot s;
    s.seq = r.seq;
    s.n_peers = r.n_peers;
    s.rank_in_comm = r.rank_in_comm;
    s.exact = (r.flags & kPeerCountsExact) != 0 && r.n_peers <= kPeerCountsExactPeers;
    s.send_total = r.send_total;
    s.recv_total = r.recv_total;
    auto detail = std::make_shared<PeerCountsDetail>();
    if (s.exact) {
      detail->send.assign(r.send, r.send + r.n_peers);
      detail->recv.assign(r.recv, r.recv + r.n_peers);
    }
    detail->send_min = r.send_min;
    detail->send_max = r.send_max;
    detail->recv_min = r.recv_min;
    detail->recv_max = r.recv_max;
    detail->send_hash = r.send_hash;
    detail->recv_hash = r.recv_hash;
    detail->send_sketch = r.send_sketch;
    detail->recv_sketch = r.recv_sketch;
    s.detail = std::move(detail);
    s.torn = !ok;
    if (s.torn) warnings.push_back(fmt::format("{} peer counts of #{} torn", comm_name, r.seq));
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.seq < b.seq; });
  return out;
}

}  // namespace rankscope::format
