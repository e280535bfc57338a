// mismatch.cpp — ranks that disagree about one collective (comm, seq).
//
// Rings wrap at different seqs on different ranks, so only the window every member still holds is
// compared. The majority value is taken as healthy. With a tie (two ranks), each rank's record is
// compared with its own record at the same position of its previous step: the rank whose pattern
// changed is the culprit; PyTorch's Flight Recorder analyzer instead trusts the first rank it read.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "analysis_parts.h"

namespace rankscope::hang {
namespace {

const format::CollectiveSnapshot* at_seq(const format::CommSnapshot& c, uint64_t seq) {
  if (c.ring.empty() || seq < c.ring.front().seq) return nullptr;
  const uint64_t idx = seq - c.ring.front().seq;
  if (idx < c.ring.size() && c.ring[idx].seq == seq) return &c.ring[idx];
  return c.find(seq);
}

// The value of `field` as text; "" when the field cannot be compared on this record.
std::string field_value(const format::CollectiveSnapshot& r, std::string_view field) {
  if (field == "op") return std::string(format::op_name(r.op));
  if (field == "dtype") return std::string(format::dtype_name(r.dtype));
  if (field == "count") return std::to_string(r.count);
  if (field == "bytes") return std::to_string(r.bytes);
  return std::string(r.range);
}

constexpr std::string_view kFields[] = {"op", "dtype", "count", "bytes", "range"};

// field_value(a, f) == field_value(b, f) without building the text: at 16K ranks the scan compares
// millions of records, and only the one disagreement found needs words.
bool same_field(const format::CollectiveSnapshot& a, const format::CollectiveSnapshot& b, std::string_view field) {
  if (field == "op") return a.op == b.op;
  if (field == "dtype") return a.dtype == b.dtype;
  if (field == "count") return a.count == b.count;
  if (field == "bytes") return a.bytes == b.bytes;
  return a.range == b.range;
}

// Every field the scan below compares is the same in `a` and `b` (a range only where both name
// one, so that a member without call sites never disagrees by its range alone).
bool agrees(const format::CollectiveSnapshot& a, const format::CollectiveSnapshot& b, bool per_rank_size,
            bool with_call_site) {
  if (a.op != b.op || a.dtype != b.dtype) return false;
  if (!per_rank_size && (a.count != b.count || a.bytes != b.bytes)) return false;
  return !with_call_site || a.range.empty() || b.range.empty() || a.range == b.range;
}

// The same position in the rank's previous step: does this record repeat it? nullopt: unknown.
std::optional<bool> repeats_previous_step(const format::CommSnapshot& c, const format::CollectiveSnapshot& rec) {
  if (rec.step < 1) return std::nullopt;
  std::optional<uint64_t> first_this, first_prev;
  for (const auto& r : c.ring) {
    if (r.step == rec.step && !first_this) first_this = r.seq;
    if (r.step == rec.step - 1 && !first_prev) first_prev = r.seq;
  }
  if (!first_this || !first_prev || rec.seq < *first_this) return std::nullopt;
  const auto* prev = at_seq(c, *first_prev + (rec.seq - *first_this));
  if (!prev || prev->step != rec.step - 1) return std::nullopt;
  return prev->op == rec.op && prev->dtype == rec.dtype && prev->count == rec.count && prev->range == rec.range;
}

}  // namespace

std::optional<MismatchFinding> find_mismatch(const std::vector<RankView>& views, const std::vector<GroupView>& groups,
                                             bool with_call_site) {
  std::optional<MismatchFinding> best;
  std::vector<std::pair<int, const format::CommSnapshot*>> members;
  std::vector<const format::CollectiveSnapshot*> recs;
  std::vector<uint8_t> quiet;
  for (const auto& g : groups) {
    members.clear();
    for (int r : g.ranks) {
      if (r < 0 || r >= int(views.size()) || !views[r].readable()) continue;
      const auto* c = views[r].comm(g.name);
      if (c && !c->ring.empty()) members.emplace_back(r, c);
    }
    if (members.size() < 2) continue;
    uint64_t lo = 0, hi = UINT64_MAX;
    for (const auto& [r, c] : members) {
      lo = std::max(lo, c->ring.front().seq);
      hi = std::min(hi, c->ring.back().seq);
    }
    if (hi == UINT64_MAX || lo > hi) continue;
    // Member by member, each ring walked in order (a dp group of 2048 ranks gathered seq by seq
    // touches 2048 rings per seq): which seqs are quiet, every member holding a usable record that
    // agrees with the first member's. Only the others are looked at seq by seq below.
    quiet.assign(hi - lo + 1, 1);
    const format::CommSnapshot& first = *members.front().second;
    for (const auto& [r, c] : members) {
      for (uint64_t k = 0; k < quiet.size(); ++k) {
        if (!quiet[k]) continue;
        const auto* rec = at_seq(*c, lo + k);
        const auto* ref = at_seq(first, lo + k);
        quiet[k] = rec && ref && !rec->torn && rec->state != format::CollectiveState::kEmpty &&
                   agrees(*rec, *ref, ref->op == format::CollectiveOp::kAllToAllV, with_call_site);
      }
    }
    for (uint64_t seq = lo; seq <= hi; ++seq) {
      if (quiet[seq - lo]) continue;
      recs.clear();
      bool usable = true;
      for (const auto& [r, c] : members) {
        const auto* rec = at_seq(*c, seq);
        if (!rec || rec->torn || rec->state == format::CollectiveState::kEmpty) {
          usable = false;
          break;
        }
        recs.push_back(rec);
      }
      if (!usable) continue;
      // An all_to_all_v's element count is what each rank sends in total, which differs between
      // ranks by design; its per-peer counts are checked by a2a_counts.cpp instead.
      const bool per_rank_size = recs[0]->op == format::CollectiveOp::kAllToAllV;
      // One pass for the common case, every member agreeing; the field is named only when not.
      if (std::all_of(recs.begin() + 1, recs.end(), [&](const format::CollectiveSnapshot* x) {
            return agrees(*x, *recs[0], per_rank_size, with_call_site);
          }))
        continue;
      std::string_view field;
      for (auto f : kFields) {
        if (per_rank_size && (f == "count" || f == "bytes")) continue;
        if (f == "range") {
          const bool all_named = std::all_of(recs.begin(), recs.end(), [](auto* x) { return !x->range.empty(); });
          if (!with_call_site || !all_named) continue;
        }
        if (std::any_of(recs.begin(), recs.end(), [&](auto* x) { return !same_field(*x, *recs[0], f); })) {
          field = f;
          break;
        }
      }
      if (field.empty()) continue;

      MismatchFinding m;
      m.mismatch.field = std::string(field);
      std::map<std::string, std::vector<size_t>> by_value;  // value -> member indices
      int64_t when = INT64_MAX;
      for (size_t i = 0; i < members.size(); ++i) {
        const std::string v = field_value(*recs[i], field);
        m.mismatch.values_by_rank[members[i].first] = v;
        by_value[v].push_back(i);
        when = std::min(when, views[members[i].first].aligned(recs[i]->enqueue_ns));
      }
      m.when_ns = when;
      size_t top = 0;
      for (const auto& [v, idx] : by_value) top = std::max(top, idx.size());
      std::vector<const std::vector<size_t>*> largest;
      for (const auto& [v, idx] : by_value)
        if (idx.size() == top) largest.push_back(&idx);
      const std::vector<size_t>* healthy = largest.size() == 1 ? largest[0] : nullptr;
      if (!healthy) {
        // Tie: the healthy value is the one whose holders all repeat their previous step.
        std::vector<size_t> changed;
        for (size_t i = 0; i < members.size(); ++i) {
          auto rep = repeats_previous_step(*members[i].second, *recs[i]);
          if (rep && !*rep) changed.push_back(i);
        }
        for (const auto* cand : largest) {
          const bool all_repeat = std::all_of(cand->begin(), cand->end(), [&](size_t i) {
            auto rep = repeats_previous_step(*members[i].second, *recs[i]);
            return rep && *rep;
          });
          if (all_repeat && !changed.empty()) {
            healthy = cand;
            break;
          }
        }
        if (!healthy) {
          m.ambiguous = true;
          healthy = largest[0];
          for (const auto* cand : largest)  // keep the lowest rank's value as the reference
            if (members[cand->front()].first < members[healthy->front()].first) healthy = cand;
        }
      }
      for (size_t i = 0; i < members.size(); ++i)
        if (std::find(healthy->begin(), healthy->end(), i) == healthy->end()) m.culprits.push_back(members[i].first);
      m.at = collective_ref(g.name, *recs[healthy->front()]);
      if (!best || m.when_ns < best->when_ns) best = std::move(m);
      break;  // the earliest disagreement of this communicator; later ones follow from it
    }
  }
  return best;
}

}  // namespace rankscope::hang
