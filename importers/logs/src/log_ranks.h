// log_ranks.h — which global rank printed what: NCCL's lines name a host, a pid and a CUDA device,
// PyTorch's a rank in a process group, launchers a global rank. Shared by the run mapping
// (log_run.cpp) and the findings (log_findings.cpp).
#pragma once

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "log_job.h"

namespace rankscope::logs {

using Device = std::tuple<std::string, int, int>;  // (host, pid, CUDA device)

struct RankMap {
  int world = 0;                                  // ranks 0..world-1
  int nccl_world = 0;                             // the largest communicator's size
  std::map<Device, int> rank_of_device;
  std::map<std::pair<std::string, int>, std::vector<int>> ranks_of_process;  // (host, pid)
  std::map<int, std::string> host_of_rank;
  std::set<int> seen;                             // ranks that printed something
  std::map<std::string, std::string> host_of_address;  // bootstrap IP -> host
};

RankMap map_ranks(const LogJob& job);

// "comm 0x54fe282d32a87d85" where NCCL printed a commId, else "comm of 8 ranks #2" (the second of
// that size each process made).
std::string comm_key(const CommMember& m);

// "0,2-5,7": runs of three or more as ranges, a pair as "4,5".
std::string compact(const std::vector<int>& ranks);

}  // namespace rankscope::logs
