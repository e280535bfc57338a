// cupti_kernel_records.h — a CUPTI activity record read as the probe's KernelActivity.
//
// Is: the decoding of one kernel record (CONCURRENT_KERNEL or KERNEL) into name, correlation id,
// stream, device and the tracer-clock start/end; every other record kind that may share an
// activity buffer (external correlation, runtime/driver API, memcpy, ...) reads as "not a kernel".
// Pure: no CUPTI call, so tests feed it fabricated records.
// Is not: the walk over a buffer (cuptiActivityGetNextRecord, in cupti_kernel_tracer.cpp).
// Private to rankscope_probe_cupti (design rule 3).
#pragma once

#include <cupti.h>

#include <optional>

#include "rankscope/probe/kernel_tracer.h"

namespace rankscope::probe::cupti {

// The record as a kernel, or nullopt when it is not a kernel record. `name` points into the record
// (CUPTI owns it until the buffer is freed); a record without a name reads as "?".
std::optional<KernelActivity> kernel_activity_of(const CUpti_Activity& record);

}  // namespace rankscope::probe::cupti
