// diagnosis_names.cpp — the stable names of verdicts, kinds and rank states (JSON and text).
#include "rankscope/analyzers/hang/diagnosis.h"

namespace rankscope::analyzers::hang {

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kHealthy: return "healthy";
    case Verdict::kFinished: return "finished";
    case Verdict::kHang: return "hang";
    case Verdict::kDesync: return "desync";
    case Verdict::kCrash: return "crash";
  }
  return "?";
}

std::string_view kind_name(Kind k) {
  switch (k) {
    case Kind::kNone: return "";
    case Kind::kLaggingRank: return "lagging_rank";
    case Kind::kCollectiveMismatch: return "collective_mismatch";
    case Kind::kRankDead: return "rank_dead";
    case Kind::kMissingGradient: return "missing_gradient";
    case Kind::kStuckInCollective: return "stuck_in_collective";
    case Kind::kHostStall: return "host_stall";
    case Kind::kGpuBehindHost: return "gpu_behind_host";
    case Kind::kRankFrozen: return "rank_frozen";
    case Kind::kStuckInCompute: return "stuck_in_compute";
    case Kind::kA2aCountMismatch: return "a2a_count_mismatch";
    case Kind::kRankError: return "rank_error";
    case Kind::kInitIncomplete: return "init_incomplete";
  }
  return "?";
}

std::string_view rank_state_name(RankState s) {
  switch (s) {
    case RankState::kWaiting: return "waiting";
    case RankState::kRunning: return "running";
    case RankState::kDead: return "dead";
    case RankState::kFinished: return "finished";
    case RankState::kAborted: return "aborted";
    case RankState::kMissing: return "missing";
    case RankState::kFrozen: return "frozen";
  }
  return "?";
}

int exit_code(const Diagnosis& d) {
  return d.verdict == Verdict::kHealthy || d.verdict == Verdict::kFinished ? 0 : 1;
}

}  // namespace rankscope::analyzers::hang
