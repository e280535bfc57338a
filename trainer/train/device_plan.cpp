// device_plan.cpp — the --device / --comm / --precision / --attention decision (see device_plan.h).
#include "device_plan.h"

#include <fmt/format.h>

#include "model/config.h"

namespace gpt2 {

std::string_view comm_backend_name(CommBackend c) { return c == CommBackend::kNccl ? "nccl" : "mpi"; }

HostPlacement placement_from_hosts(const std::vector<std::string>& hosts, int rank, bool has_mpi) {
  HostPlacement p;
  p.world_size = static_cast<int>(hosts.size());
  p.has_mpi = has_mpi;
  if (rank < 0 || rank >= p.world_size) return p;
  p.local_rank = 0;
  p.local_size = 0;
  for (int r = 0; r < p.world_size; ++r) {
    if (hosts[static_cast<size_t>(r)] != hosts[static_cast<size_t>(rank)]) continue;
    if (r < rank) ++p.local_rank;
    ++p.local_size;
  }
  return p;
}

namespace {

rankscope::Status check_choice(std::string_view flag, std::string_view value,
                               std::initializer_list<std::string_view> known) {
  for (std::string_view k : known)
    if (value == k) return {};
  std::string list;
  for (std::string_view k : known) list += fmt::format("{}{}", list.empty() ? "" : "|", k);
  return rankscope::invalid_argument(fmt::format("--{} {}: unknown (known: {})", flag, value, list));
}

// The host-collective transport when not NCCL: MPI under a launcher, else the one-process loopback.
std::string host_comm_word(const HostPlacement& where) { return where.has_mpi ? "mpi" : "loopback"; }

}  // namespace

// CPU --attention auto: naive. Measured (trainer_attention_bench, B 4 NH 12 hs 64, loaded 2-core VM):
// flash fwd+bwd 1.16x slower at T 128 and 256, 0.86x at 512, 0.81x at 1024; the CPU runs short T,
// and naive is what reproduces the seq-len cliff of our incident reports.
const AttentionKind kCpuDefaultAttention = AttentionKind::kNaive;

rankscope::Result<DevicePlan> plan_device(const DeviceRequest& request, const DeviceProbe& probe,
                                          const HostPlacement& where) {
  RS_RETURN_IF_ERROR(check_choice("device", request.device, {"auto", "cpu", "cuda"}));
  RS_RETURN_IF_ERROR(check_choice("comm", request.comm, {"auto", "mpi", "nccl"}));
  RS_RETURN_IF_ERROR(check_choice("precision", request.precision, {"auto", "fp32", "bf16"}));
  RS_RETURN_IF_ERROR(check_choice("attention", request.attention, {"auto", "naive", "flash"}));

  DevicePlan plan;
  if (request.device == "cuda" && !probe.usable)
    return rankscope::invalid_argument(fmt::format(
        "--device cuda: {} (hint: --device auto falls back to the CPU)", probe.reason));
  plan.cuda = request.device == "cuda" || (request.device == "auto" && probe.usable);

  if (!plan.cuda) {
    if (request.comm == "nccl")
      return rankscope::invalid_argument("--comm nccl needs --device cuda (NCCL moves GPU buffers)");
    if (request.precision == "bf16")
      return rankscope::invalid_argument(
          "--precision bf16 needs --device cuda (the CPU backend is the fp32 oracle)");
    plan.precision = CudaPrecision::kFp32;
    plan.attention = request.attention == "auto" ? kCpuDefaultAttention : parse_attention_kind(request.attention).value();
    plan.comm = CommBackend::kMpi;
    plan.device_line = request.device == "cpu"
                           ? "device: cpu (as asked), fp32"
                           : fmt::format("device: cpu, fp32 ({}; using cpu)", probe.reason);
    plan.comm_line = fmt::format("comm: {} (cpu buffers)", host_comm_word(where));
    return plan;
  }

  const int devices = probe.device_count > 0 ? probe.device_count : 1;
  plan.device_index = where.local_rank % devices;
  plan.precision = request.precision == "fp32" ? CudaPrecision::kFp32 : CudaPrecision::kBf16;
  // Flash on the GPU: the naive path's (B,NH,T,T) buffers are the seq-len cliff.
  plan.attention = request.attention == "naive" ? AttentionKind::kNaive : AttentionKind::kFlash;
  plan.device_line = fmt::format("device: cuda {} of {} ({}), {}", plan.device_index, devices,
                                 probe.name.empty() ? "unnamed" : probe.name,
                                 cuda_precision_name(plan.precision));

  // NCCL refuses two ranks of one communicator on the same device, so it needs a GPU per rank.
  const bool gpu_per_rank = where.local_size <= devices;
  if (request.comm == "nccl" && !gpu_per_rank)
    return rankscope::invalid_argument(fmt::format(
        "--comm nccl: {} ranks on this host share {} GPU(s) and NCCL refuses duplicate devices "
        "(hint: --comm mpi stages through host memory, or run at most {} ranks per host)",
        where.local_size, devices, devices));
  if (request.comm == "mpi" || (request.comm == "auto" && !gpu_per_rank)) {
    plan.comm = CommBackend::kMpi;
    plan.host_staging = true;
    plan.comm_line =
        request.comm == "mpi"
            ? fmt::format("comm: {} with host staging (as asked)", host_comm_word(where))
            : fmt::format("comm: {} with host staging ({} ranks on this host share {} GPU(s); NCCL "
                          "refuses duplicate devices)",
                          host_comm_word(where), where.local_size, devices);
    return plan;
  }
  plan.comm = CommBackend::kNccl;
  plan.comm_line = request.comm == "nccl"
                       ? "comm: nccl (as asked)"
                       : fmt::format("comm: nccl (each of the {} rank(s) on this host has its own GPU)",
                                     where.local_size);
  return plan;
}

}  // namespace gpt2
