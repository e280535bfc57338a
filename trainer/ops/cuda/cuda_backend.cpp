// cuda_backend.cpp — probe_cuda_device() and make_cuda_ops() of a build with CUDA (see cuda_backend.h).
// Is not: the build without CUDA (cuda_backend_absent.cpp answers the same functions there).
#include "ops/cuda/cuda_backend.h"

#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cctype>
#include <string>
#include <vector>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"

#ifndef RANKSCOPE_CUDA_ARCHS
#define RANKSCOPE_CUDA_ARCHS ""
#endif

namespace gpt2 {
namespace {

struct BuiltArch {
  int arch;       // 90 for "90", "90a", "90-real"
  bool has_ptx;   // "-real" entries carry machine code only
};

// CMAKE_CUDA_ARCHITECTURES as compiled in, e.g. "80;90" or "90-real". Entries without digits
// ("native", "all") give an empty list, and then nothing is checked.
std::vector<BuiltArch> built_archs() {
  std::vector<BuiltArch> out;
  const std::string text = RANKSCOPE_CUDA_ARCHS;
  size_t i = 0;
  while (i < text.size()) {
    size_t end = text.find_first_of(",;", i);
    if (end == std::string::npos) end = text.size();
    const std::string entry = text.substr(i, end - i);
    int arch = 0;
    size_t d = 0;
    while (d < entry.size() && std::isdigit(static_cast<unsigned char>(entry[d]))) arch = arch * 10 + (entry[d++] - '0');
    if (d > 0) out.push_back({arch, entry.find("-real") == std::string::npos});
    i = end + 1;
  }
  return out;
}

bool runs_on(const std::vector<BuiltArch>& archs, int cc) {
  if (archs.empty()) return true;
  for (const BuiltArch& a : archs) {
    if (a.arch == cc) return true;
    if (a.arch < cc && (a.has_ptx || a.arch / 10 == cc / 10)) return true;  // PTX JIT, or same major
  }
  return false;
}

}  // namespace

DeviceProbe probe_cuda_device(int device) {
  DeviceProbe p;
  p.built_with_cuda = true;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear it: the probe must leave no sticky state behind
    p.reason = fmt::format("no CUDA device (cudaGetDeviceCount: {})", cudaGetErrorString(e));
    return p;
  }
  p.device_count = count;
  if (count == 0) {
    p.reason = "no CUDA device (cudaGetDeviceCount found none)";
    return p;
  }
  if (device < 0 || device >= count) {
    p.reason = fmt::format("no CUDA device {} (this machine has {})", device, count);
    return p;
  }
  cudaDeviceProp prop{};
  e = cudaGetDeviceProperties(&prop, device);
  if (e != cudaSuccess) {
    cudaGetLastError();
    p.reason = fmt::format("CUDA device {} unusable (cudaGetDeviceProperties: {})", device, cudaGetErrorString(e));
    return p;
  }
  p.name = prop.name;
  p.compute_capability = prop.major * 10 + prop.minor;
  p.memory_bytes = prop.totalGlobalMem;
  if (!runs_on(built_archs(), p.compute_capability)) {
    p.reason = fmt::format(
        "CUDA device {} ({}, sm_{}) has no kernels in this build (built for {}); hint: reconfigure with "
        "-DCMAKE_CUDA_ARCHITECTURES={}",
        device, p.name, p.compute_capability, RANKSCOPE_CUDA_ARCHS, p.compute_capability);
    return p;
  }
  // Creating the context is where an exclusive-mode or broken device says no.
  e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaFree(nullptr);
  if (e != cudaSuccess) {
    cudaGetLastError();
    p.reason = fmt::format("CUDA device {} ({}) unusable: {}", device, p.name, cudaGetErrorString(e));
    return p;
  }
  p.usable = true;
  p.device = device;
  p.reason = fmt::format("cuda device {} of {}: {} (sm_{}, {:.1f} GiB)", device, count, p.name,
                         p.compute_capability, static_cast<double>(p.memory_bytes) / (1ull << 30));
  return p;
}

rankscope::Result<std::unique_ptr<Ops>> make_cuda_ops(const CudaOpsOptions& options) {
  DeviceProbe p = probe_cuda_device(options.device);
  if (!p.usable) return rankscope::unsupported(p.reason);
  RS_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaOps> ops, cuda::CudaOps::create(options));
  return std::unique_ptr<Ops>(std::move(ops));
}

CUstream_st* cuda_ops_stream(Ops& ops) {
  auto* c = dynamic_cast<cuda::CudaOps*>(&ops);
  return c ? c->stream() : nullptr;
}

rankscope::Status cuda_ops_synchronize(Ops& ops) {
  auto* c = dynamic_cast<cuda::CudaOps*>(&ops);
  if (c == nullptr) return rankscope::Status::ok_status();
  return cuda::cuda_status(cudaStreamSynchronize(c->stream()), "cudaStreamSynchronize");
}

rankscope::Result<CudaMemoryStats> cuda_ops_memory(Ops& ops) {
  auto* c = dynamic_cast<cuda::CudaOps*>(&ops);
  if (c == nullptr) return rankscope::invalid_argument(fmt::format("ops '{}' is not the CUDA backend", ops.name()));
  return c->memory();
}

rankscope::Status cuda_profiler_start() { return cuda::cuda_status(cudaProfilerStart(), "cudaProfilerStart"); }
rankscope::Status cuda_profiler_stop() { return cuda::cuda_status(cudaProfilerStop(), "cudaProfilerStop"); }

bool is_cuda_device_pointer(const void* ptr) {
  if (ptr == nullptr) return false;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    cudaGetLastError();  // an unregistered host pointer may leave a sticky-free error behind
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

rankscope::Status cuda_ops_enqueue_spin(Ops& ops, double seconds) {
  auto* c = dynamic_cast<cuda::CudaOps*>(&ops);
  if (c == nullptr)
    return rankscope::invalid_argument(fmt::format("gpu-stall needs the CUDA backend; ops '{}' is not", ops.name()));
  int device = 0, clock_khz = 0;
  RS_RETURN_IF_ERROR(cuda::cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
  RS_RETURN_IF_ERROR(cuda::cuda_status(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device),
                                       "cudaDeviceGetAttribute(ClockRate)"));
  const double cycles = seconds * static_cast<double>(clock_khz) * 1e3;
  return cuda::cuda_status(cuda::launch_spin(static_cast<long long>(cycles), c->stream()), "launch_spin");
}

}  // namespace gpt2
