// device_lag.cpp — ranks whose GPU is behind their host: the "hang in a kernel" evidence.
//
// Two shapes, one per way a trainer reaches its collectives on a GPU:
//   - stream-ordered (NCCL): every member enqueued (comm, seq) and returned (host_returned), but on
//     some members the device never started it while on others it did: those members' compute
//     streams are stuck before it (a kernel that does not end);
//   - host staging (ranks sharing a GPU, MPI): the member's host waits in `device_sync`, copying a
//     collective's input off a GPU that never finishes the work before it, while its peers wait in
//     the collective.
// Is not: the verdict (classifier.cpp decides when to ask) nor wording.
#include <algorithm>

#include "analysis_parts.h"

namespace rankscope::hang {

bool waits_for_own_device(const RankView& v) {
  return std::find(v.stack.begin(), v.stack.end(), std::string(kDeviceSyncRange)) != v.stack.end();
}

std::vector<int> ranks_behind_on_device(const std::vector<RankView>& views, const std::vector<GroupView>& groups,
                                        const std::string& comm, uint64_t seq) {
  const GroupView* group = find_group(groups, comm);
  if (!group) return {};
  std::vector<int> behind;
  bool someone_started = false;
  for (int m : group->ranks) {
    if (m < 0 || m >= int(views.size()) || !views[m].readable()) continue;
    const auto* c = views[m].comm(comm);
    const auto* rec = c ? c->find(seq) : nullptr;
    if (!rec) continue;
    if (rec->host_returned && rec->state == format::CollectiveState::kEnqueued) {
      behind.push_back(m);
    } else if (rec->state == format::CollectiveState::kStarted || !rec->host_returned) {
      someone_started = true;  // its device got there, or its host sits in the call
    }
  }
  if (!someone_started) return {};  // nobody's device got further: no one to compare with
  return behind;
}

}  // namespace rankscope::hang
