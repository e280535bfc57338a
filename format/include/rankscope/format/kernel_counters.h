// kernel_counters.h — names of the per-step counters the probe writes when it times GPU kernels.
//
// Is: the two counter names of the contract that say how much GPU kernel time of a step no range
// can claim (docs/FORMAT.md, "Counters"), shared by the probe that writes them and the analyzers
// that read them. Values are ns of kernel time (f64), booked in the step whose end delivered them.
// Is not: per-range kernel time (RangeAggregate::kernel_ns) or per-kernel detail (TRACE_KERNELS).
#pragma once

#include <string_view>

namespace rankscope::format {

// Kernels launched while no range was open on the launching thread.
inline constexpr std::string_view kKernelNsOutsideRangesCounter = "gpu.kernel_ns_outside_ranges";
// Kernels whose launch the tracer never reported (an unwatched launch API, or a launch so old its
// correlation id was forgotten): not attributable, so not inside any range either.
inline constexpr std::string_view kKernelNsNoLaunchSeenCounter = "gpu.kernel_ns_no_launch_seen";

}  // namespace rankscope::format
