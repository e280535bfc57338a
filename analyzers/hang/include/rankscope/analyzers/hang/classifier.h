// classifier.h — turns a run directory's flight recorders into a Diagnosis.
//
// Is: the reasoning of hangdoctor, on data only (no clock, no /proc: time comes from the
// recorders, liveness from a ProcessTable), so it is tested on synthetic and checked-in runs:
//   1. ranks are aligned on rank 0's clock; "now" is the freshest heartbeat;
//   2. every rank finished -> finished; a rank's open collective or step past the bound its probe
//      learned (flight recorder bounds), a rank idle past the bound its waiting peers and the job's
//      own durations give (peer_wait_bound.cpp: start-up and the first steps, before the probes
//      learned much), or no progress for `stuck_after_s` (or as observed by --wait) -> stuck, else
//      healthy;
//   3. at any (comm, seq) inside the window all ranks' rings share, op / dtype / size / call-site
//      disagreement -> desync (collective_mismatch); the majority signature is healthy, a tie is
//      broken by each rank's own previous step;
//   4. a rank whose pid is gone (this host) or whose heartbeat is stale while others beat -> crash;
//   5. otherwise the wait-for graph: a rank inside (comm, seq) waits for the members that never
//      issued seq; following it from every waiter ends at the culprits, and the innermost
//      communicator pointing at them is named. All members inside, none finished ->
//      stuck_in_collective (no one blamed); a culprit in host work -> host_stall; one whose
//      backward is over but a gradient never arrived -> missing_gradient; else lagging_rank.
// Is not: rendering (report.h) or following a live job (progress_watch.h).
#pragma once

#include <string>
#include <vector>

#include "rankscope/analyzers/hang/diagnosis.h"
#include "rankscope/analyzers/hang/process_table.h"
#include "rankscope/format/run_directory.h"

namespace rankscope::analyzers::hang {

struct ClassifyOptions {
  double stuck_after_s = 10;       // no progress anywhere for this long -> stuck
  double stale_heartbeat_s = 10;   // heartbeat this much older than the freshest -> silent/dead
  bool no_progress_observed = false;  // --wait saw no progress: stuck whatever the timestamps say
  bool learned_bounds = true;      // use the bounds the probes learned (past one -> stuck at once)
  // Evidence from dumps written at a moment they do not record (PyTorch Flight Recorder): the
  // heartbeats are only a lower bound on "now", so every duration is "at least"; this sentence says
  // what the bound rests on. Empty for run directories, whose heartbeats are live.
  std::string time_basis;
  bool peer_wait = true;           // a rank idle past the bound from its waiting peers -> stuck at once
  double peer_wait_floor_s = 3;    // that bound is max(floor, factor x the job's own scale): the
  double peer_wait_factor = 3;     // probe's floor; a smaller factor, as two signals agree
  double peer_wait_min_s = 1;      // the peers waited at least this long (blocked, not passing)
  // Ranks whose nodes did not answer a gather (a gathered run's record): their evidence could not
  // be fetched, which says nothing of them; a collective waits on them only where no other member
  // is missing, so they are culprits only where nothing with evidence explains the waits.
  std::vector<int> unreachable_ranks;
  // What a rank without evidence lacks, in the verdict's words (default: its flight recorder).
  std::string missing_evidence = "flight recorder";
  std::string missing_evidence_plural = "flight recorders";
};

Diagnosis diagnose(const format::RunDirectory& run, ProcessTable& processes, const ClassifyOptions& options = {});

}  // namespace rankscope::analyzers::hang
