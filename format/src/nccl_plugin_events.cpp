// nccl_plugin_events.cpp — see nccl_plugin_events.h.
#include "nccl_plugin_events.h"

#include <algorithm>
#include <tuple>

#include "rankscope/format/event_stream.h"

namespace rankscope::format {
namespace {

bool usable(const CollectiveSnapshot& c) { return !c.torn && c.enqueue_ns > 0; }

// The anchor's records, ascending seq, usable only.
std::vector<const CollectiveSnapshot*> anchor_records(const CommSnapshot& comm) {
  std::vector<const CollectiveSnapshot*> out;
  for (const auto& c : comm.ring)
    if (usable(c)) out.push_back(&c);
  return out;
}

const CommSnapshot* choose_anchor(const FlightRecorderSnapshot& flight) {
  const CommSnapshot* best = nullptr;
  auto key = [](const CommSnapshot& c) { return std::make_tuple(c.size, c.ring.size()); };
  for (const auto& c : flight.comms) {
    if (c.ring.empty()) continue;
    if (!best || key(c) > key(*best) || (key(c) == key(*best) && c.name < best->name)) best = &c;
  }
  return best;
}

// Smallest p over which the newest records repeat: the p-periodic run at the end of the ring (the
// same op, bytes and peer p records apart, consecutive sequence numbers) must cover two periods and
// half the ring, so that collectives of initialisation (a broadcast of the weights, a barrier) before
// the job's loop do not hide its pattern, while a pair of equal buckets at the end does not make one.
// Returns the period and the index where the periodic run starts; {0, n} when there is none.
std::pair<int, size_t> find_period(const std::vector<const CollectiveSnapshot*>& recs) {
  auto same = [](const CollectiveSnapshot* a, const CollectiveSnapshot* b) {
    return a->op == b->op && a->bytes == b->bytes && a->peer == b->peer;
  };
  const size_t n = recs.size();
  for (size_t p = 1; 2 * p <= n; ++p) {
    size_t start = n - p;  // records [start, n) are periodic with period p
    while (start > 0 && recs[start - 1 + p]->seq == recs[start - 1]->seq + p && same(recs[start - 1], recs[start - 1 + p]))
      --start;
    const size_t run = n - start;
    if (run >= 2 * p && 2 * run >= n) return {int(p), start};
  }
  return {0, n};
}

double median(std::vector<int64_t> v) {
  if (v.empty()) return -1;
  std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
  return double(v[v.size() / 2]);
}

}  // namespace

RebuiltEvents rebuild_events_from_rings(const FlightRecorderSnapshot& flight, int world_size) {
  RebuiltEvents out;
  EventStreamHeader header;
  header.rank = flight.rank;
  header.world_size = world_size;
  header.created_ns = flight.start_ns;
  header.run_id = flight.run_id;
  auto writer = EventStreamWriter::create_in_memory(header);

  const CommSnapshot* anchor = choose_anchor(flight);
  std::vector<const CollectiveSnapshot*> recs;
  if (anchor) {
    out.anchor = anchor->name;
    recs = anchor_records(*anchor);
    size_t first_periodic = 0;
    std::tie(out.period, first_periodic) = find_period(recs);
    recs.erase(recs.begin(), recs.begin() + long(first_periodic));  // initialisation before the loop
  }
  if (out.period > 0) {
    const uint64_t p = uint64_t(out.period);
    // Phase: the residue whose collective follows the longest pause after the one before it.
    std::vector<std::vector<int64_t>> pauses(p);
    for (size_t i = 1; i < recs.size(); ++i) {
      if (recs[i]->seq != recs[i - 1]->seq + 1) continue;
      const int64_t prev_done = recs[i - 1]->end_ns > 0 ? recs[i - 1]->end_ns : recs[i - 1]->enqueue_ns;
      pauses[recs[i]->seq % p].push_back(recs[i]->enqueue_ns - prev_done);
    }
    uint64_t phase = 0;
    double longest = -1;
    for (uint64_t r = 0; r < p; ++r)
      if (const double m = median(pauses[r]); m > longest) longest = m, phase = r;

    // Only steps every ring still covers whole.
    int64_t covered_from = 0;
    for (const auto& c : flight.comms)
      if (!c.ring.empty() && c.ring.front().seq > 0) covered_from = std::max(covered_from, c.ring.front().enqueue_ns);

    std::vector<const CollectiveSnapshot*> bounds;
    for (const auto* r : recs)
      if (r->seq % p == phase && r->seq >= phase) bounds.push_back(r);
    // Every collective of the rank, by launch time.
    std::vector<std::pair<const CommSnapshot*, const CollectiveSnapshot*>> all;
    for (const auto& c : flight.comms)
      for (const auto& e : c.ring)
        if (usable(e)) all.emplace_back(&c, &e);
    std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.second->enqueue_ns < b.second->enqueue_ns; });

    for (size_t k = 0; k + 1 < bounds.size(); ++k) {
      const int64_t begin = bounds[k]->enqueue_ns, end = bounds[k + 1]->enqueue_ns;
      if (begin < covered_from || bounds[k + 1]->seq != bounds[k]->seq + p) continue;
      StepRecord step;
      step.step = int64_t((bounds[k]->seq - phase) / p);
      step.begin_ns = begin;
      step.end_ns = end;
      auto it = std::lower_bound(all.begin(), all.end(), begin,
                                 [](const auto& a, int64_t t) { return a.second->enqueue_ns < t; });
      for (; it != all.end() && it->second->enqueue_ns < end; ++it) {
        const auto& [comm, c] = *it;
        CollectiveEvent e{};
        e.comm_id = writer->intern(NameKind::kComm, comm->name);
        e.op = uint8_t(c->op);
        e.dtype = uint8_t(c->dtype);
        e.state = uint8_t(c->state);
        e.range_id = c->range.empty() ? 0 : writer->intern(NameKind::kRange, c->range);
        e.seq = c->seq;
        e.bytes = c->bytes;
        e.enqueue_ns = c->enqueue_ns;
        e.start_ns = c->start_ns > 0 ? c->start_ns : c->enqueue_ns;
        e.end_ns = c->end_ns;
        step.collectives.push_back(e);
      }
      writer->write_step(step);
      ++out.steps;
    }
  }
  out.bytes = writer->take_bytes();
  return out;
}

}  // namespace rankscope::format
