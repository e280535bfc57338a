// fr_scenarios.h — the Flight Recorder acceptance scenarios as RankSpecs: who did what in each job.
// Used by make_fr_fixtures (which writes tests/fixtures/torch_fr/<scenario>/), by the tests that
// check the writer still reproduces those bytes, and by the 1024-rank benchmark.
#pragma once

#include <string>
#include <vector>

#include "fr_fixture_writer.h"

namespace rankscope::torch_fr::testing {

// TP2 x DP2 on 4 ranks: tp0=[0,1] tp1=[2,3] dp0=[0,2] dp1=[1,3]. Each step: all-reduce on TP
// (forward), all-reduce on DP (grads). Rank `culprit` never enqueues step `stuck_step`'s TP
// all-reduce; its TP peer waits in it, and the DP peers wait for that peer. `tp_first` per rank
// says which groups it created first (pg_ids differ, names do not).
inline std::vector<RankSpec> tp_dp_job(int tp, int dp, int culprit, int steps, const std::string& version,
                                       bool dp_created_first_on_odd_tp_groups = false) {
  const int world = tp * dp;
  std::vector<RankSpec> ranks;
  for (int r = 0; r < world; ++r) {
    RankSpec s;
    s.rank = r;
    s.version = version;
    std::vector<int> all;
    for (int i = 0; i < world; ++i) all.push_back(i);
    s.groups.push_back({"0", "default_pg", all, 0});
    const int ti = r / tp, di = r % tp;
    std::vector<int> tpr, dpr;
    for (int i = 0; i < tp; ++i) tpr.push_back(ti * tp + i);
    for (int i = 0; i < dp; ++i) dpr.push_back(i * tp + di);
    const bool dp_first = dp_created_first_on_odd_tp_groups && ti % 2 == 1;
    // Names are what PyTorch hashes from the members: the same on every rank.
    s.groups.push_back({"tp_" + std::to_string(ti), "tp" + std::to_string(ti), tpr, dp_first ? 2 : 1});
    s.groups.push_back({"dp_" + std::to_string(di), "dp" + std::to_string(di), dpr, dp_first ? 1 : 2});
    const bool tp_blocked = ti == culprit / tp;
    const bool dp_blocked = di == culprit % tp;
    for (int step = 1; step <= steps; ++step) {
      const bool last = step == steps;
      if (last && r == culprit) break;  // never enqueues its last TP all-reduce
      EntrySpec t{"tp_" + std::to_string(ti), step, "all_reduce", {1024, 768}, "BFloat16",
                  last && tp_blocked ? "scheduled" : "completed", "forward"};
      s.entries.push_back(t);
      if (last && tp_blocked) break;  // waiting in it
      EntrySpec d{"dp_" + std::to_string(di), step, "all_reduce", {4096}, "Float",
                  last && dp_blocked ? "scheduled" : "completed", "reduce_gradients"};
      s.entries.push_back(d);
    }
    ranks.push_back(std::move(s));
  }
  return ranks;
}

// Four ranks, one group; at seq 4 rank 2 all-reduces 512 elements where the others use 1024
// (with `mismatch` false all agree: every rank is inside seq 4 and none completed it).
inline std::vector<RankSpec> size_mismatch_job(bool mismatch = true) {
  std::vector<RankSpec> ranks;
  for (int r = 0; r < 4; ++r) {
    RankSpec s;
    s.rank = r;
    s.groups.push_back({"0", "default_pg", {0, 1, 2, 3}, 0});
    for (int seq = 1; seq <= 4; ++seq) {
      EntrySpec e{"0", seq, "all_reduce", {seq == 4 && r == 2 && mismatch ? 512 : 1024}, "Float",
                  seq == 4 ? "scheduled" : "completed", "allreduce_grads"};
      s.entries.push_back(e);
    }
    ranks.push_back(std::move(s));
  }
  return ranks;
}

// Two ranks: rank 0 sends to rank 1 three times; rank 1 posts only two receives.
inline std::vector<RankSpec> p2p_job() {
  std::vector<RankSpec> ranks(2);
  for (int r = 0; r < 2; ++r) {
    ranks[r].rank = r;
    ranks[r].groups.push_back({"0", "default_pg", {0, 1}, 0});
    ranks[r].entries.push_back({"0", 1, "all_reduce", {16}, "Float", "completed", "setup"});
  }
  for (int i = 1; i <= 3; ++i) ranks[0].entries.push_back({"0", i, "send 0->1", {256}, "Float", i < 3 ? "completed" : "scheduled", "send_activations"});
  for (int i = 1; i <= 2; ++i) ranks[1].entries.push_back({"0", i, "recv 1<-0", {256}, "Float", "completed", "recv_activations"});
  return ranks;
}

// One rank on one GPU, as the H100 run (shared/gpu/torch_nccl_check.py): 20 all_reduces
// of 1 Mi floats on the default group, process-group timeout 8 s.
//   - `timeout` false: a dump taken on demand once all 20 completed, before the watchdog's next pass
//     (nothing retired, pg_status saw no completion yet);
//   - `timeout` true: the 21st all_reduce was queued behind a kernel that spins on the stream and
//     never started; the watchdog retired the first 20 and wrote the dump when the 21st timed out.
inline std::vector<RankSpec> one_gpu_job(bool timeout, bool timing) {
  RankSpec s;
  s.timing = timing;
  s.timeout_ms = 8000;
  s.status_lags = !timeout;
  s.groups.push_back({"0", "default_pg", {0}, 0});
  for (int seq = 1; seq <= 20; ++seq)
    s.entries.push_back({"0", seq, "all_reduce", {1048576}, "Float", "completed", "<module>", timeout ? 1 : 0});
  if (timeout) s.entries.push_back({"0", 21, "all_reduce", {1048576}, "Float", "scheduled", "<module>", 0});
  return {s};
}

// Two GPUs, timing on, default group [0, 1]: two all_reduces completed, the third is open with
// each rank's `state` as given ("started": its GPU runs it; "scheduled": its GPU never started it).
inline std::vector<RankSpec> two_gpu_job(const std::string& state0, const std::string& state1) {
  std::vector<RankSpec> ranks(2);
  for (int r = 0; r < 2; ++r) {
    RankSpec& s = ranks[size_t(r)];
    s.rank = r;
    s.timing = true;
    s.groups.push_back({"0", "default_pg", {0, 1}, 0});
    for (int seq = 1; seq <= 2; ++seq) s.entries.push_back({"0", seq, "all_reduce", {4096}, "Float", "completed", "step"});
    s.entries.push_back({"0", 3, "all_reduce", {4096}, "Float", r == 0 ? state0 : state1, "step"});
  }
  return ranks;
}

// Two CPU ranks over Gloo (shared/gpu/gloo_fr_hang.py): five all_reduces, then rank 1 sleeps before
// its sixth; both dumped on demand while rank 0 waits in #6. Gloo's entries stay "scheduled";
// `retired` marks the finished ones; pg_config names the group '' (PyTorch 2.11). With
// `rank0_timed_out`, rank 0 was dumped after Gloo's timeout failed #6, which its worker retires too.
inline std::vector<RankSpec> gloo_lagging_job(bool rank0_timed_out = false) {
  std::vector<RankSpec> ranks(2);
  for (int r = 0; r < 2; ++r) {
    RankSpec& s = ranks[size_t(r)];
    s.rank = r;
    s.backend = "gloo";
    s.timeout_ms = 20000;
    s.unnamed_pg_config = true;
    s.groups.push_back({"0", "default_pg", {0, 1}, 0});
    for (int seq = 1; seq <= 5; ++seq)
      s.entries.push_back({"0", seq, "all_reduce", {1024}, "Float", "scheduled", "<module>", 1});
  }
  ranks[0].entries.push_back({"0", 6, "all_reduce", {1024}, "Float", "scheduled", "<module>", rank0_timed_out ? 1 : 0});
  return ranks;
}

}  // namespace rankscope::torch_fr::testing
