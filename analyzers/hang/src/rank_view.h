// rank_view.h — the facts about one rank that every classification step needs, computed once.
//
// Is: times moved onto rank 0's clock, the liveness answer, the main thread's open ranges, the
// collective the rank is inside (if any), and quick access to its communicators. Is not: any
// judgement about other ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rankscope/analyzers/hang/process_table.h"
#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/run_directory.h"
#include "rankscope/format/saturating.h"

namespace rankscope::analyzers::hang {

struct RankView {
  int rank = 0;
  const format::FlightRecorderSnapshot* snap = nullptr;  // null: no readable recorder
  std::string missing_reason;
  bool unreachable = false;         // no recorder because its node did not answer a gather
  int64_t offset_ns = 0;            // own clock + offset = rank 0's clock
  Liveness liveness = Liveness::kUnknown;
  bool finished = false;
  bool aborted = false;
  bool dead = false;                // decided by the classifier
  bool frozen = false;              // decided by the classifier: heartbeat stopped, no thread runs
  ProcessStatus os;                 // /proc's answer, read only for ranks whose heartbeat stopped
  int64_t heartbeat_ns = 0;         // aligned
  int64_t last_activity_ns = 0;     // aligned: newest enqueue, completion, step or range start
  std::vector<std::string> stack;   // main thread, outermost first
  int64_t innermost_begin_ns = 0;   // aligned begin of stack.back(), 0 when the stack is empty
  // The collective the rank is blocked in: the oldest one it entered and that has not completed.
  const format::CommSnapshot* pending_comm = nullptr;
  const format::CollectiveSnapshot* pending = nullptr;
  // Every collective it entered and that has not completed (a DDP comm thread and the main thread
  // can each be inside one), oldest first.
  std::vector<std::pair<const format::CommSnapshot*, const format::CollectiveSnapshot*>> open;

  bool readable() const { return snap != nullptr; }
  bool waiting() const { return pending != nullptr; }
  bool inside(const std::string& comm, uint64_t seq) const;
  const std::string& innermost() const;
  int64_t aligned(int64_t own_ns) const { return own_ns == 0 ? 0 : format::add_saturating(own_ns, offset_ns); }
  const format::CommSnapshot* comm(const std::string& name) const;
  // Collectives issued on `name`, or -1 when the rank has no such communicator.
  int64_t issued(const std::string& name) const;
};

std::vector<RankView> build_rank_views(const format::RunDirectory& run, ProcessTable& processes);

}  // namespace rankscope::analyzers::hang
