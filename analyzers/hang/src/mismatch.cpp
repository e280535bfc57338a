// mismatch.cpp — ranks that disagree about one collective (comm, seq).
//
// Rings wrap at different seqs on different ranks, so only the window every member still holds is
// compared. The majority value is taken as healthy. With a tie (two ranks), each rank's record is
// compared with its own record at the same position of its previous step: the rank whose pattern
// changed is the culprit; PyTorch's Flight Recorder analyzer instead trusts the first rank it read.
// A field one side left unknown (a rooted op's non-root entry with no sizes, an op PyTorch names in a
// way we do not read) is never a disagreement: only members that know a field vote on it, and the
// finding cites their own values.
#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "analysis_parts.h"

namespace rankscope::analyzers::hang {
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

// Call sites are pooled (name_pool.h: one copy of each text), so equal ones are nearly always one
// pointer: tested before the bytes (the scan compares every record of every member).
bool same_call_site(std::string_view a, std::string_view b) {
  return (a.data() == b.data() && a.size() == b.size()) || a == b;
}

// field_value(a, f) == field_value(b, f) without building the text: at 16K ranks the scan compares
// millions of records, and only the one disagreement found needs words.
bool same_field(const format::CollectiveSnapshot& a, const format::CollectiveSnapshot& b, std::string_view field) {
  if (field == "op") return a.op == b.op;
  if (field == "dtype") return a.dtype == b.dtype;
  if (field == "count") return a.count == b.count;
  if (field == "bytes") return a.bytes == b.bytes;
  return same_call_site(a.range, b.range);
}

// What a record leaves unknown is never a disagreement: a mismatch needs both sides' values. PyTorch's
// Flight Recorder leaves the sizes and dtype of a rooted op's non-root members empty (Gloo's scatter
// records its inputs on the root only), names ops it has no word for (read as kUnknown), and our own
// recorders know every field. So an op is compared only where both are known, a dtype likewise, and
// sizes only where both records carry them.
bool op_known(const format::CollectiveSnapshot& r) { return r.op != format::CollectiveOp::kUnknown; }
bool dtype_known(const format::CollectiveSnapshot& r) { return r.dtype != format::DataType::kUnknown; }
// No size and no dtype: the entry recorded no tensor (not a zero-element one).
bool sizes_known(const format::CollectiveSnapshot& r) { return r.count != 0 || dtype_known(r); }

// Ops whose members hold different sizes by design: an all_to_all_v's count is what each rank sends
// in total (its per-peer counts are checked by a2a_counts.cpp); a scatter's root holds every
// member's part and a gather's root receives them all.
bool per_rank_size_op(format::CollectiveOp op) {
  return op == format::CollectiveOp::kAllToAllV || op == format::CollectiveOp::kScatter ||
         op == format::CollectiveOp::kGather;
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
  return prev->op == rec.op && prev->dtype == rec.dtype && prev->count == rec.count &&
         same_call_site(prev->range, rec.range);
}

// What the members of one collective are known to agree on so far: each field the first record
// that knows it gave. A member agrees when every field it knows equals the known one (an unknown
// field agrees with anything), so a field unknown on the first member is still compared between
// the others.
struct KnownFields {
  std::optional<format::CollectiveOp> op;
  std::optional<format::DataType> dtype;
  std::optional<uint64_t> count, bytes;
  std::optional<std::string_view> range;
  bool per_rank_size = false;  // an op whose sizes differ by design was seen

  // Folds `r` in; false when it disagrees with a field already known.
  bool merge(const format::CollectiveSnapshot& r, bool with_call_site) {
    auto fold = [](auto& known, auto value) {
      if (!known) known = value;
      return *known == value;
    };
    if (op_known(r)) {
      if (!fold(op, r.op)) return false;
      per_rank_size = per_rank_size || per_rank_size_op(r.op);
    }
    if (dtype_known(r) && !fold(dtype, r.dtype)) return false;
    if (!per_rank_size && sizes_known(r)) {
      if (!fold(count, r.count)) return false;
      if (dtype_known(r) && !fold(bytes, r.bytes)) return false;
    }
    if (with_call_site && !r.range.empty()) {
      if (!range) range = r.range;
      if (!same_call_site(*range, r.range)) return false;
    }
    return true;
  }
};

// Which members know `field` of their record (the others take no part in the vote on it).
bool knows(const format::CollectiveSnapshot& r, std::string_view field) {
  if (field == "op") return op_known(r);
  if (field == "dtype") return dtype_known(r);
  if (field == "count") return sizes_known(r);
  if (field == "bytes") return sizes_known(r) && dtype_known(r);
  return !r.range.empty();
}

using RankRing = std::pair<int, const format::CommSnapshot*>;  // a rank and its ring of the group

// The first field on which two members that both know it disagree; empty when none does.
std::string_view first_disagreeing_field(const std::vector<const format::CollectiveSnapshot*>& recs,
                                         bool with_call_site) {
  const bool per_rank_size =
      std::any_of(recs.begin(), recs.end(), [](auto* x) { return op_known(*x) && per_rank_size_op(x->op); });
  for (auto f : kFields) {
    if (per_rank_size && (f == "count" || f == "bytes")) continue;
    if (f == "range" && !with_call_site) continue;
    const format::CollectiveSnapshot* ref = nullptr;
    for (const auto* x : recs) {
      if (!knows(*x, f)) continue;
      if (!ref)
        ref = x;
      else if (!same_field(*x, *ref, f))
        return f;
    }
  }
  return {};
}

using ValueHolders = std::map<std::string, std::vector<size_t>>;  // a field's value -> member indices

// The healthy value among the most held ones. A tie goes to the value whose holders all repeat their
// previous step, where some other member changed; else to the lowest rank's value, marked ambiguous.
const std::vector<size_t>* healthy_value(const ValueHolders& by_value, const std::vector<RankRing>& members,
                                         const std::vector<const format::CollectiveSnapshot*>& recs, bool& ambiguous) {
  size_t top = 0;
  for (const auto& [v, idx] : by_value) top = std::max(top, idx.size());
  std::vector<const std::vector<size_t>*> largest;
  for (const auto& [v, idx] : by_value)
    if (idx.size() == top) largest.push_back(&idx);
  if (largest.size() == 1) return largest[0];
  std::vector<size_t> changed;
  for (const auto& [v, idx] : by_value)
    for (size_t i : idx) {
      auto rep = repeats_previous_step(*members[i].second, *recs[i]);
      if (rep && !*rep) changed.push_back(i);
    }
  for (const auto* cand : largest) {
    const bool all_repeat = std::all_of(cand->begin(), cand->end(), [&](size_t i) {
      auto rep = repeats_previous_step(*members[i].second, *recs[i]);
      return rep && *rep;
    });
    if (all_repeat && !changed.empty()) return cand;
  }
  ambiguous = true;
  const std::vector<size_t>* healthy = largest[0];
  for (const auto* cand : largest)  // keep the lowest rank's value as the reference
    if (members[cand->front()].first < members[healthy->front()].first) healthy = cand;
  return healthy;
}

// The groups' rings walked for the earliest collective whose members disagree. The scratch vectors
// are reused from group to group.
struct MismatchScan {
  MismatchScan(const std::vector<RankView>& rank_views, bool call_site) : views(rank_views), with_call_site(call_site) {}
  const std::vector<RankView>& views;
  bool with_call_site;
  std::vector<RankRing> members;
  std::vector<const format::CollectiveSnapshot*> recs;
  std::vector<uint64_t> seqs;
  std::vector<KnownFields> known;
  std::vector<uint8_t> quiet;

  std::optional<MismatchFinding> scan_group(const GroupView& g);
  bool find_members(const GroupView& g);
  bool find_shared_seqs();
  void mark_quiet_seqs();
  bool usable_records(uint64_t seq);
  MismatchFinding vote(const GroupView& g, std::string_view field);
};

// The members with a readable, non-empty ring of the group; false when fewer than two.
bool MismatchScan::find_members(const GroupView& g) {
  members.clear();
  for (int r : g.ranks) {
    if (r < 0 || r >= int(views.size()) || !views[r].readable()) continue;
    const auto* c = views[r].comm(g.name);
    if (c && !c->ring.empty()) members.emplace_back(r, c);
  }
  return members.size() >= 2;
}

// The seqs every member may hold: those of the first member's ring in the shared window. Sized by a
// ring (what the file holds), never by the span of the numbers (which a file sets at will).
bool MismatchScan::find_shared_seqs() {
  uint64_t lo = 0, hi = UINT64_MAX;
  for (const auto& [r, c] : members) {
    lo = std::max(lo, c->ring.front().seq);
    hi = std::min(hi, c->ring.back().seq);
  }
  if (hi == UINT64_MAX || lo > hi) return false;
  seqs.clear();
  for (const auto& rec : members.front().second->ring)
    if (rec.seq >= lo && rec.seq <= hi && (seqs.empty() || rec.seq > seqs.back())) seqs.push_back(rec.seq);
  return true;
}

// RankRing by member, each ring walked in order (a dp group of 2048 ranks gathered seq by seq touches
// 2048 rings per seq): which seqs are quiet, every member holding a usable record that agrees with
// what the members before it know. Only the others are looked at seq by seq.
void MismatchScan::mark_quiet_seqs() {
  quiet.assign(seqs.size(), 1);
  known.assign(seqs.size(), KnownFields{});
  for (const auto& [r, c] : members) {
    for (size_t k = 0; k < seqs.size(); ++k) {
      if (!quiet[k]) continue;
      const auto* rec = at_seq(*c, seqs[k]);
      quiet[k] =
          rec && !rec->torn && rec->state != format::CollectiveState::kEmpty && known[k].merge(*rec, with_call_site);
    }
  }
}

// Every member's record of `seq` into recs; false when one has none (or a torn or empty one).
bool MismatchScan::usable_records(uint64_t seq) {
  recs.clear();
  for (const auto& [r, c] : members) {
    const auto* rec = at_seq(*c, seq);
    if (!rec || rec->torn || rec->state == format::CollectiveState::kEmpty) return false;
    recs.push_back(rec);
  }
  return true;
}

// The vote is among the members that know the field: each value cited is a member's own.
MismatchFinding MismatchScan::vote(const GroupView& g, std::string_view field) {
  MismatchFinding m;
  m.mismatch.field = std::string(field);
  ValueHolders by_value;
  int64_t when = INT64_MAX;
  for (size_t i = 0; i < members.size(); ++i) {
    if (!knows(*recs[i], field)) continue;
    const std::string v = field_value(*recs[i], field);
    m.mismatch.values_by_rank[members[i].first] = v;
    by_value[v].push_back(i);
    when = std::min(when, views[members[i].first].aligned(recs[i]->enqueue_ns));
  }
  m.when_ns = when;
  const std::vector<size_t>* healthy = healthy_value(by_value, members, recs, m.ambiguous);
  for (const auto& [v, idx] : by_value)
    if (&idx != healthy)
      for (size_t i : idx) m.culprits.push_back(members[i].first);
  std::sort(m.culprits.begin(), m.culprits.end());
  m.at = collective_ref(g.name, *recs[healthy->front()]);
  return m;
}

// The earliest disagreement of this communicator; later ones follow from it.
std::optional<MismatchFinding> MismatchScan::scan_group(const GroupView& g) {
  if (!find_members(g) || !find_shared_seqs()) return std::nullopt;
  mark_quiet_seqs();
  for (size_t k = 0; k < seqs.size(); ++k) {
    if (quiet[k] || !usable_records(seqs[k])) continue;
    const std::string_view field = first_disagreeing_field(recs, with_call_site);
    if (!field.empty()) return vote(g, field);
  }
  return std::nullopt;
}

}  // namespace

std::optional<MismatchFinding> find_mismatch(const std::vector<RankView>& views, const GroupList& groups,
                                             bool with_call_site) {
  std::optional<MismatchFinding> best;
  MismatchScan scan(views, with_call_site);
  for (const auto& g : groups)
    if (auto m = scan.scan_group(g); m && (!best || m->when_ns < best->when_ns)) best = std::move(m);
  return best;
}

}  // namespace rankscope::analyzers::hang
