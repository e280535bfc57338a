// nvtx_range_sink.h — a RangeSink that mirrors probe ranges as NVTX ranges in the "rankscope" domain.
//
// Is: the factory of the leaf target rankscope_probe_nvtx (NVTX3, header-only, from the CUDA
// toolkit), so an nsys timeline shows the same range names as our reports. Without a tool attached
// NVTX calls are near-free no-ops. Is not: an NVTX header; none is included here (design rule 3).
#pragma once

#include <memory>

#include "rankscope/probe/probe.h"

namespace rankscope::probe {

inline constexpr const char* kNvtxDomainName = "rankscope";

// With a rank (>= 0) and world size, it also marks `rankscope:rank=R/W` once and `rankscope:sync`
// (payload: the probe's clock, ns) at each top-level range, for `rankscope import-nsys`.
std::unique_ptr<RangeSink> make_nvtx_range_sink(int rank = -1, int world_size = 0);

}  // namespace rankscope::probe
