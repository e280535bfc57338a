// device_lag.cpp — ranks whose GPU is behind their host: the "hang in a kernel" evidence.
//
// Two shapes, one per way a trainer reaches its collectives on a GPU:
//   - stream-ordered (NCCL): every member enqueued (comm, seq) and returned (host_returned), but on
//     some members the device never started it while on others it did: those members' compute
//     streams are stuck before it (a kernel that does not end);
//   - host staging (ranks sharing a GPU, MPI): the member's host waits in `device_sync`, copying a
//     collective's input off a GPU that never finishes the work before it, while its peers wait in
//     the collective.
// When no member's device started it, there is no peer to compare with (one rank, or every GPU
// stuck): a member is still behind when its recorder provably sees device starts on that
// communicator (an earlier collective there has a start time), so "not started" is a fact and not a
// gap in the recording (PyTorch dumps with TORCH_NCCL_ENABLE_TIMING; not NCCL's one-rank
// communicators, which give the profiler plugin no events at all).
// Is not: the verdict (classifier.cpp decides when to ask) nor wording.
#include <algorithm>

#include "analysis_parts.h"

namespace rankscope::analyzers::hang {

namespace {

bool records_device_starts(const format::CommSnapshot& c, uint64_t before_seq) {
  return std::any_of(c.ring.begin(), c.ring.end(), [&](const format::CollectiveSnapshot& r) {
    return r.seq < before_seq && r.start_ns != 0;
  });
}

}  // namespace

bool waits_for_own_device(const RankView& v) {
  return std::find(v.stack.begin(), v.stack.end(), std::string(kDeviceSyncRange)) != v.stack.end();
}

std::vector<int> ranks_behind_on_device(const std::vector<RankView>& views, const GroupList& groups,
                                        const std::string& comm, uint64_t seq) {
  const GroupView* group = find_group(groups, comm);
  if (!group) return {};
  std::vector<int> behind;
  bool someone_started = false, all_behind_provably = true;
  for (int m : group->ranks) {
    if (m < 0 || m >= int(views.size()) || !views[m].readable()) continue;
    const auto* c = views[m].comm(comm);
    const auto* rec = c ? c->find(seq) : nullptr;
    if (!rec) continue;
    if (rec->host_returned && rec->state == format::CollectiveState::kEnqueued) {
      behind.push_back(m);
      all_behind_provably = all_behind_provably && records_device_starts(*c, seq);
    } else if (rec->state == format::CollectiveState::kStarted || !rec->host_returned) {
      someone_started = true;  // its device got there, or its host sits in the call
    }
  }
  // Nobody's device got further: only recorders that see device starts make "never started" a fact.
  if (!someone_started && !all_behind_provably) return {};
  return behind;
}

}  // namespace rankscope::analyzers::hang
