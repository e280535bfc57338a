// a2a_wording.cpp — the sentences of an a2a_count_mismatch: who sends what to whom, who expected
// what, in elements and, when the row width is known, in rows (the MoE dispatch's unit).
#include <cstdlib>

#include <fmt/format.h>

#include "rankscope/analyzers/hang/rank_list.h"
#include "wording.h"

namespace rankscope::analyzers::hang {
namespace {

std::string grouped(uint64_t v) {  // 17571 -> "17,571"
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string amount(uint64_t elements, uint64_t row) {
  if (row == 0) return fmt::format("{} elements", grouped(elements));
  return fmt::format("{} rows ({} elements of width {})", grouped(elements / row), grouped(elements), row);
}

std::string difference_text(int64_t diff, uint64_t row) {
  const uint64_t mag = uint64_t(std::llabs(diff));
  const std::string how = diff > 0 ? "more" : "fewer";
  if (row == 0) return fmt::format("{} elements {}", grouped(mag), how);
  return fmt::format("{} {} {}", grouped(mag / row), mag / row == 1 ? "row" : "rows", how);
}

}  // namespace

void word_count_mismatch(Diagnosis& d, const WordingFacts& f) {
  const CountMismatch& m = *d.count_mismatch;
  const CollectiveRef& c = *d.collective;
  const std::string where = fmt::format("{} #{} on {}{}", format::short_op_name(c.op), c.seq, c.comm,
                                        c.range.empty() ? "" : fmt::format(" (called from {})", c.range));
  const uint64_t row = m.row_elements;
  if (m.evidence == "outlier") {
    const bool sends = m.sender >= 0;
    d.headline = fmt::format("DESYNC: the counts of {} disagree: its members send {} in total than they receive, and {} "
                             "{} {} in all where every other member {} {}.",
                             where, difference_text(m.difference, row), who(d, {sends ? m.sender : m.receiver}),
                             sends ? "sends" : "receives", amount(m.sent.value_or(0), row), sends ? "sends" : "receives",
                             amount(m.expected.value_or(0), row));
  } else if (m.sender >= 0 && m.sent && m.expected) {
    d.headline = fmt::format("DESYNC: the counts of {} disagree: {} sends {} to {}, which expects {} from it.", where,
                             who(d, {m.sender}), amount(*m.sent, row), who(d, {m.receiver}), amount(*m.expected, row));
  } else if (m.sender >= 0) {
    d.headline = fmt::format("DESYNC: the counts of {} disagree: {} sends {} to {} than rank {} expects.", where,
                             who(d, {m.sender}), difference_text(m.difference, row), who(d, {m.receiver}), m.receiver);
  } else {
    d.headline = fmt::format("DESYNC: the counts of {} disagree: its members send {} in total than they expect; the pairs "
                             "could not be located.",
                             where, difference_text(m.difference, row));
  }
  d.explanation =
      "An all_to_all_v needs what rank i sends to rank j to equal what rank j expects from rank i. Here they differ, so "
      "NCCL hangs (a send and a receive of different sizes never match) and MPI fails with a truncation error or "
      "completes short with corrupt rows; the waits, crashes or later disagreements that follow come from this call.";
  if (m.evidence == "sketch")
    d.explanation += " The communicator is larger than the flight recorder keeps exact counts for; the pair was located "
                     "from the per-rank count sketches.";
  else if (m.evidence == "totals")
    d.explanation += " The communicator is larger than the flight recorder keeps exact counts for, and more than one "
                     "pair differs, so the sketches detect the disagreement without locating it.";
  else if (m.evidence == "outlier")
    d.explanation += " Only each member's totals are recorded (PyTorch's Flight Recorder keeps input and output sizes, "
                     "not the splits), so the pair is not located: the member named is the one whose total differs from "
                     "what all the others share.";
  if (m.other_pairs > 0) d.explanation += fmt::format(" {} other pair(s) of this call disagree too.", m.other_pairs);
  d.explanation += " In an MoE dispatch both sides derive their splits from the counts all_to_all before it (the combine "
                   "swaps them): check the rank that expected a different count.";
  if (!f.waiters.empty())
    d.explanation += fmt::format(" {} {} {} still inside it.", f.waiters.size() == 1 ? "Rank" : "Ranks",
                                 ranks_on_hosts(d, f.waiters), f.waiters.size() == 1 ? "is" : "are");
}

}  // namespace rankscope::analyzers::hang
