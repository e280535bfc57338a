// fr_fixture_set.h — every checked-in Flight Recorder fixture file: relative path -> bytes.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "fr_scenarios.h"

namespace rankscope::torch_fr::testing {

inline std::map<std::string, std::vector<uint8_t>> fixture_set() {
  std::map<std::string, std::vector<uint8_t>> files;
  auto add = [&](const std::string& dir, const std::vector<RankSpec>& job, bool json = false) {
    for (const auto& r : job) {
      const std::string name = dir + "/comm_lib_trace_rank_" + std::to_string(r.rank);
      if (json) {
        const std::string j = write_json(r);
        files[name] = std::vector<uint8_t>(j.begin(), j.end());
      } else {
        files[name] = write_pickle(r);
      }
    }
  };
  add("tp2dp2_lagging", tp_dp_job(2, 2, 3, 6, "2.10"));
  add("tp2dp2_lagging_v2.3", tp_dp_job(2, 2, 3, 6, "2.3"));
  add("tp2dp2_lagging_v2.7", tp_dp_job(2, 2, 3, 6, "2.7"));
  add("tp2dp2_lagging_json", tp_dp_job(2, 2, 3, 6, "2.10"), true);
  auto missing = tp_dp_job(2, 2, 3, 6, "2.10");
  missing.pop_back();
  add("tp2dp2_culprit_dump_missing", missing);
  add("pg_order_differs", tp_dp_job(2, 2, 1, 4, "2.10", true));
  add("size_mismatch", size_mismatch_job());
  add("all_stuck", size_mismatch_job(false));
  add("p2p_hang", p2p_job());
  // Rank 3's dump cut in the middle (killed while writing); rank 1's cut after 9 bytes.
  add("truncated", tp_dp_job(2, 2, 3, 6, "2.10"));
  auto& r3 = files["truncated/comm_lib_trace_rank_3"];
  r3.resize(r3.size() * 2 / 3);
  files["truncated/comm_lib_trace_rank_1"].resize(9);
  // The backends' own rules, on the shapes of the H100 dumps.
  add("nccl_healthy_timing", one_gpu_job(false, true));
  add("nccl_healthy_no_timing", one_gpu_job(false, false));
  add("nccl_timeout_timing", one_gpu_job(true, true));
  add("nccl_timeout_no_timing", one_gpu_job(true, false));
  add("nccl_timeout_timing_json", one_gpu_job(true, true), true);
  add("nccl_two_gpus_one_behind", two_gpu_job("started", "scheduled"));
  add("nccl_two_gpus_both_started", two_gpu_job("started", "started"));
  add("gloo_lagging", gloo_lagging_job());
  add("gloo_timed_out", gloo_lagging_job(true));
  auto mixed = tp_dp_job(2, 2, 3, 6, "2.10");
  mixed[2] = tp_dp_job(2, 2, 3, 6, "2.7")[2];
  add("mixed_versions", mixed);
  return files;
}

}  // namespace rankscope::torch_fr::testing
