// joined_verdict.h — one verdict from everything a job left: Flight Recorder dumps, logs, stacks.
//
// Is: each artifact diagnosed on its own first (the dumps by the classifier, the log by
// diagnose_log, the stacks by diagnose_stacks), then joined per rank:
//   - every rank an artifact names (or says something of) gets an evidence line per artifact
//     ("dumps: waiting in all_reduce #3 on pg 0", "log: raised nothing while the others timed out",
//     "stacks: in `stage_forward` at train.py:88, unmoved over 2 snapshots");
//   - the culprits are the ranks every naming artifact agrees on: where the dumps say "one of ranks
//     4-7" and the log names rank 6, rank 6. An artifact that names no rank (a timeout alone, a
//     group rank it cannot map, stacks where no rank stands apart) narrows nothing. The stacks'
//     outliers narrow too, even from one snapshot, once another artifact says the job is stuck;
//   - where the named sets do not meet, the artifacts disagree: said so, and the verdict is "one of
//     ranks" their union; where one artifact sees a problem and another none, that is said too;
//   - a culprit's headline carries its own Python frame where the stacks have it.
// The verdict of a single artifact is unchanged by this (it is only used with two or more).
// Is not: any artifact's own reading or rules.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rankscope/analyzers/hang/diagnosis.h"
#include "rankscope/analyzers/hang/log_verdict.h"
#include "rankscope/analyzers/hang/stack_verdict.h"

namespace rankscope::analyzers::hang {

struct JoinInputs {
  std::optional<Diagnosis> dumps;     // the classifier on the Flight Recorder dumps
  std::string dumps_summary;
  std::optional<LogVerdict> log;
  std::optional<StackSummary> stacks;
};

struct JoinedVerdict {
  Diagnosis diagnosis;     // the verdict, with culprits and headline reconciled
  nlohmann::json joined;   // JSON "joined": artifacts[], culprits[] {rank, evidence[]}, disagreements[]
  std::string text;        // the evidence per culprit and the disagreements, for the text report
};

JoinedVerdict join_verdicts(const JoinInputs& in);

}  // namespace rankscope::analyzers::hang
