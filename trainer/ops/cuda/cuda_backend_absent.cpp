// cuda_backend_absent.cpp — cuda_backend.h in a build without CUDA (nvcc not found at configure time):
// the probe says so in one line and the factory fails with kUnsupported, so the trainer links and
// falls back to the CPU the same way on every machine.
// Is not: a stub of the backend — nothing here pretends to compute.
#include <string>

#include "ops/cuda/cuda_backend.h"

namespace gpt2 {

DeviceProbe probe_cuda_device(int) {
  DeviceProbe p;
  p.reason = "built without CUDA (nvcc was not found at configure time)";
  return p;
}

rankscope::Result<std::unique_ptr<Ops>> make_cuda_ops(const CudaOpsOptions&) {
  return rankscope::unsupported(probe_cuda_device(0).reason + "; hint: install the CUDA toolkit and reconfigure");
}

CUstream_st* cuda_ops_stream(Ops&) { return nullptr; }

rankscope::Status cuda_ops_synchronize(Ops&) { return rankscope::Status::ok_status(); }

rankscope::Result<CudaMemoryStats> cuda_ops_memory(Ops& ops) {
  return rankscope::invalid_argument(std::string("ops '") + ops.name() + "' is not the CUDA backend (built without CUDA)");
}

rankscope::Status cuda_profiler_start() { return rankscope::unsupported(probe_cuda_device(0).reason); }
rankscope::Status cuda_profiler_stop() { return rankscope::unsupported(probe_cuda_device(0).reason); }

bool is_cuda_device_pointer(const void*) { return false; }

rankscope::Status cuda_ops_enqueue_spin(Ops& ops, double) {
  return rankscope::invalid_argument(std::string("gpu-stall needs the CUDA backend; ops '") + ops.name() +
                                     "' is not (built without CUDA)");
}

}  // namespace gpt2
