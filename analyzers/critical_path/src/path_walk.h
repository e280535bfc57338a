// path_walk.h — the backward walk that finds one step's critical path (internal, pure).
//
// Rules (docs/CRITICAL_PATH.md), from the rank whose step ended last, at its end, on its host:
//   host   in a host collective (Gloo, MPI: no kernel carries it)  -> the collective from its last
//          member's arrival; continue on that member at its arrival;
//          a kernel of this rank ended within touch_ns before now  -> the host waited for it: device;
//          else host work back to the last host collective's end or the step's start, named by ranges.
//   device the kernel running last before now (any stream); none, or the GPU idle for longer than
//          touch_ns before now -> host. A communication kernel is its collective from the member
//          that started it last (continue there, on its device); a compute kernel is itself; then
//          what held its start: its launch returning after every kernel before it had ended (a
//          launch delay, then the host at the launch), a kernel ending just before it (device),
//          else the host.
// Each move goes back in time or to another rank at the same time; a step's walk ends at the
// start of the step of the rank it is on, or after a bounded number of moves.
#pragma once

#include "step_timeline.h"

namespace rankscope::analyzers::critical_path_detail {

StepPath walk_step(const StepTimelines& step, const CriticalPathOptions& options);

}  // namespace rankscope::analyzers::critical_path_detail
