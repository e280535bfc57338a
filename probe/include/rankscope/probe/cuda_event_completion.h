// cuda_event_completion.h — a CompletionSource backed by a CUDA event (leaf rankscope_probe_cuda).
//
// Is: the way an asynchronous GPU collective (NCCL on a stream) tells the probe when it finished:
// record an event on the collective's stream right after enqueueing it and hand the source to
// Probe::collective_complete_when; the watchdog thread polls cudaEventQuery. Is not: a CUDA header
// — the stream type is only forward-declared (cudaStream_t is CUstream_st*), design rule 3.
#pragma once

#include <memory>

#include "rankscope/format/status.h"
#include "rankscope/probe/probe.h"

struct CUstream_st;

namespace rankscope::probe {

Result<std::unique_ptr<CompletionSource>> make_cuda_event_completion(CUstream_st* stream);

}  // namespace rankscope::probe
