// analyses.h — the five analyses over one rank's timeline (internal; one file each).
#pragma once

#include "rank_timeline.h"

namespace rankscope::analyzers::device_timeline {

OverlapResult compute_overlap(const RankTimeline& t);                           // overlap.cpp
IdleResult compute_idle(const RankTimeline& t, const KernelsOptions& options);  // idle_breakdown.cpp
std::vector<KindBreakdown> compute_breakdown(const RankTimeline& t,
                                             const KernelsOptions& options);                    // kernel_breakdown.cpp
LaunchStats compute_launch_stats(const RankTimeline& t, const KernelsOptions& options);         // launch_stats.cpp
std::vector<StreamQueue> compute_queues(const RankTimeline& t, const KernelsOptions& options);  // queue_length.cpp

}  // namespace rankscope::analyzers::device_timeline
