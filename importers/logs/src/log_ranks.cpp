// log_ranks.cpp — global ranks of the processes and devices a log names (log_ranks.h).
#include "log_ranks.h"

#include <algorithm>

#include <fmt/format.h>

namespace rankscope::logs {

std::string comm_key(const CommMember& m) {
  if (!m.comm_id.empty()) return "comm " + m.comm_id;
  return fmt::format("comm of {} ranks #{}", m.nranks, m.ordinal + 1);
}

std::string compact(const std::vector<int>& ranks) {
  std::vector<int> r = ranks;
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  std::string out;
  for (size_t i = 0; i < r.size();) {
    size_t j = i;
    while (j + 1 < r.size() && r[j + 1] == r[j] + 1) ++j;
    if (!out.empty()) out += ',';
    // A pair is "4,5", a longer run "4-7", as hangdoctor's verdicts write them.
    out += j == i ? std::to_string(r[i]) : fmt::format("{}{}{}", r[i], j == i + 1 ? "," : "-", r[j]);
    i = j + 1;
  }
  return out;
}

RankMap map_ranks(const LogJob& job) {
  RankMap m;
  for (const auto& [key, c] : job.members) m.nccl_world = std::max(m.nccl_world, c.nranks);
  // Devices per process: a process tagged by its launcher and driving one device is that rank.
  std::map<std::pair<std::string, int>, std::set<int>> devices;
  for (const auto& [key, c] : job.members)
    if (c.rank >= 0) devices[{c.host, c.pid}].insert(c.device);
  for (const auto& [key, c] : job.members) {
    if (c.rank < 0) continue;
    const Device d{c.host, c.pid, c.device};
    auto p = job.processes.find({c.host, c.pid});
    const bool tagged = p != job.processes.end() && p->second.tagged_rank >= 0 && devices[{c.host, c.pid}].size() == 1;
    if (tagged) {
      m.rank_of_device[d] = p->second.tagged_rank;
    } else if (c.nranks == m.nccl_world && c.ordinal == 0) {
      m.rank_of_device[d] = c.rank;  // the first world-sized communicator: its ranks are the job's
    }
  }
  for (const auto& [p, log] : job.processes)
    if (log.tagged_rank >= 0 && devices[p].empty()) m.rank_of_device[{p.first, p.second, -1}] = log.tagged_rank;
  int world = m.nccl_world;
  for (const auto& [d, r] : m.rank_of_device) world = std::max(world, r + 1);
  // Devices no rule placed get ranks past the others, so nothing they printed is lost.
  for (const auto& [key, c] : job.members)
    if (c.rank >= 0 && !m.rank_of_device.count({c.host, c.pid, c.device})) m.rank_of_device[{c.host, c.pid, c.device}] = world++;
  for (const auto& [d, r] : m.rank_of_device) {
    m.ranks_of_process[{std::get<0>(d), std::get<1>(d)}].push_back(r);
    m.host_of_rank[r] = std::get<0>(d);
    m.seen.insert(r);
  }
  // torchrun's "[defaultN]:" is the local rank: the rank itself where the log shows one node.
  std::set<std::string> hosts;
  for (const auto& [p, log] : job.processes) hosts.insert(p.first);
  if (hosts.size() <= 1)
    for (const auto& [r, lines] : job.tagged_local_ranks) {
      world = std::max(world, r + 1);
      m.seen.insert(r);
    }
  for (const auto& [r, lines] : job.tagged_ranks) {
    world = std::max(world, r + 1);
    m.seen.insert(r);
  }
  for (const auto& [key, g] : job.torch) {
    // A subgroup's "Rank N" without a launcher's tag is its group rank: placed at N all the same.
    world = std::max(world, key.first + 1);
    m.seen.insert(key.first);
  }
  for (const auto& [p, log] : job.processes)
    if (!log.bootstrap_address.empty()) m.host_of_address[log.bootstrap_address] = log.host;
  m.world = world;
  return m;
}

}  // namespace rankscope::logs
