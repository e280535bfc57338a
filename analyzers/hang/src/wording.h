// wording.h — the sentences of a diagnosis: the one-line verdict and the explanation.
//
// Is: pure formatting over a decided Diagnosis (units, rank lists, the sentence style:
// "HANG: rank 1 never entered allreduce #57 on tp0 (3.1 MiB fp32); it is in forward/embed at
// step 2, idle 31 s. Rank 0 waits in that allreduce since 31 s."). Is not: any decision.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "rankscope/analyzers/hang/diagnosis.h"
#include "rankscope/analyzers/hang/rank_hosts.h"

namespace rankscope::analyzers::hang {

// Facts the classifier knew that the Diagnosis does not carry.
struct WordingFacts {
  bool forming = false;      // other ranks still progress: the hang is forming
  bool all_gone = false;      // every rank's process is gone: the snapshot is the state at death
  bool ambiguous = false;     // a mismatch tie that history could not break
  std::vector<int> waiters;   // live ranks inside the verdict's collective
  std::string progress;       // the last collective each rank issued on the verdict's communicator
  std::string later;          // a later, harder disagreement that followed from the first one
  bool none_started = false;  // no member's record of the verdict's collective says it started
  // kGpuBehindHost: each culprit still shows open a collective its peers completed with it (its
  // device, or the thread watching it, stopped reporting completions); `stopped_at` says which.
  bool peers_completed = false;
  bool culprits_idle = false;  // every culprit is readable and has no open collective
  std::string stopped_at;
  // A desync's one out-of-step culprit waits in a collective of another group that no peer called:
  // "allreduce #3 on pg 1, which none of ranks 0,2,6 called (they issued 2 there)".
  std::string ahead_on;
};

std::string human_bytes(uint64_t bytes);   // "3.1 MiB"
std::string human_seconds(double s);       // "31 s", "3.1 s", "450 ms"
// A duration as the snapshot allows: "<live_word> 31 s" from live recorders ("since 31 s"), "for
// at least 8.0 s" where times are lower bounds (dumps), "for an unknown time" when that bound is 0.
std::string how_long(const Diagnosis& d, double s, std::string_view live_word);
// "allreduce #57 on tp0 (3.1 MiB fp32)"
std::string collective_phrase(const CollectiveRef& c);

// " Also waiting: ranks 0,4 in allreduce #6 on dp0." for waiters outside the verdict's collective.
std::string downstream_sentence(const Diagnosis& d, const WordingFacts& facts);

// node_wording.cpp: a node problem's headline and the sentence the explanation opens with; false
// when the diagnosis holds no node problem that covers every culprit.
bool word_node(Diagnosis& d, const WordingFacts& facts);

// a2a_wording.cpp: the headline and explanation of an a2a_count_mismatch.
void word_count_mismatch(Diagnosis& d, const WordingFacts& facts);

// Fills d.headline and d.explanation.
void compose_wording(Diagnosis& d, const WordingFacts& facts);

}  // namespace rankscope::analyzers::hang
