// log_merge.cpp — one job out of the jobs read from several files at once (log_import.cpp reads
// files on every core): what one file says about a process, a communicator or a rank is combined
// with what another says about the same one (a process's stdout and stderr in two files).
#include <algorithm>

#include "log_job.h"

namespace rankscope::logs {
namespace {

void merge_process(ProcessLog& into, ProcessLog&& from) {
  if (into.tagged_rank < 0) into.tagged_rank = from.tagged_rank;
  if (into.version.empty()) into.version = std::move(from.version);
  into.settings.merge(from.settings);
  for (const auto& [t, n] : from.transports) into.transports[t] += n;
  if (into.bootstrap_address.empty()) into.bootstrap_address = std::move(from.bootstrap_address);
  if (into.network.empty()) into.network = std::move(from.network);
  if (into.search_channels < 0) {
    into.search_channels = from.search_channels;
    into.search_bw = from.search_bw;
    into.search_type = std::move(from.search_type);
  }
  for (auto& e : from.errors)
    if (into.errors.size() < ProcessLog::kKeepErrors) into.errors.push_back(std::move(e));
  into.error_count += from.error_count;
}

// The same communicator member in two files: calls add up; the kept calls are the file's with more.
void merge_member(CommMember& into, CommMember&& from) {
  if (into.rank < 0) into.rank = from.rank;
  if (into.nranks == 0) into.nranks = from.nranks;
  if (into.comm_id.empty()) into.comm_id = std::move(from.comm_id);
  into.init_started = into.init_started || from.init_started;
  into.init_completed = into.init_completed || from.init_completed;
  into.coll_channels = std::max(into.coll_channels, from.coll_channels);
  if (from.calls > into.calls) into.last = from.last;
  into.calls += from.calls;
  for (auto& [peer, p] : from.p2p) {
    P2pCalls& q = into.p2p[peer];
    q.sends += p.sends;
    q.recvs += p.recvs;
    q.calls += p.calls;
    q.last = p.last;
  }
}

void merge_torch(TorchPgLog& into, TorchPgLog&& from) {
  if (!into.timed_out) into.timed_out = std::move(from.timed_out);
  into.last_enqueued = std::max(into.last_enqueued, from.last_enqueued);
  into.last_completed = std::max(into.last_completed, from.last_completed);
  if (into.failing_seq < 0) into.failing_seq = from.failing_seq;
  into.watchdog_stuck = into.watchdog_stuck || from.watchdog_stuck;
  into.outstanding = std::max(into.outstanding, from.outstanding);
  if (into.pg_desc.empty()) into.pg_desc = std::move(from.pg_desc);
  if (into.global_rank < 0) into.global_rank = from.global_rank;
}

void merge_failure(RankFailure& into, RankFailure&& from) {
  if (into.error.empty()) {
    into.error = std::move(from.error);
    into.what = from.what;
    into.call = std::move(from.call);
    into.file = std::move(from.file);
    into.line = from.line;
  }
  if (from.exited && !into.exited) {
    into.exited = true;
    into.exitcode = from.exitcode;
  }
  into.root_cause = into.root_cause || from.root_cause;
  if (into.host.empty()) into.host = std::move(from.host);
}

template <typename Map, typename Merge>
void merge_map(Map& into, Map&& from, Merge merge) {
  for (auto& [k, v] : from) {
    auto [it, fresh] = into.try_emplace(k, std::move(v));
    if (!fresh) merge(it->second, std::move(v));
  }
}

}  // namespace

void merge_job(LogJob& into, LogJob&& from) {
  merge_map(into.processes, std::move(from.processes), merge_process);
  merge_map(into.members, std::move(from.members), merge_member);
  merge_map(into.torch, std::move(from.torch), merge_torch);
  merge_map(into.failures, std::move(from.failures), merge_failure);
  for (const auto& [r, n] : from.tagged_ranks) into.tagged_ranks[r] += n;
  for (const auto& [r, n] : from.tagged_local_ranks) into.tagged_local_ranks[r] += n;
  for (auto& [odd, by] : from.named_odd) into.named_odd[odd].merge(by);
  for (auto& [printer, named] : from.barrier_absent) into.barrier_absent[printer].merge(named);
  into.local_exits.merge(from.local_exits);
  for (auto& e : from.other_errors)
    if (into.other_errors.size() < 64) into.other_errors.push_back(std::move(e));
  into.lines += from.lines;
  into.nccl_lines += from.nccl_lines;
  into.torch_lines += from.torch_lines;
  into.coll_lines += from.coll_lines;
  for (auto& f : from.files) into.files.push_back(std::move(f));
  // Indexes into the maps are for reading only: no longer valid once merged.
  into.member_index.clear();
  into.newest_on_device.clear();
}

}  // namespace rankscope::logs
