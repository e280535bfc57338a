// host_staging_communicator.h — a Communicator decorator that lets a host-memory backend (MPI,
// loopback) reduce buffers that live on a device, by copying them through host memory.
//
// Is: the way several ranks share one GPU (4 ranks on one H100, where NCCL refuses duplicate
// devices): every call copies each device buffer it is given into a host staging buffer, runs the
// wrapped host collective on that, and copies the result back. Host pointers (a loss scalar) pass
// through untouched. Which pointers are device memory is a predicate given at construction
// (cuda_backend.h's is_cuda_device_pointer on the GPU path), and the copies go through the Ops that
// own that memory, so the logic is tested with the CPU backend and a fake predicate.
// Put it OUTSIDE the probe decorator (Staging(Probed(MPI))): the probe then times the transfer
// itself, and fault injection (lossy, resize, skip) sees host buffers as it does on the CPU.
// While the host copies a device buffer off the GPU it sits in the probe range `device_sync`: a
// GPU that never finishes the work before the collective shows up there, and hangdoctor says the
// rank's GPU is behind its host (analyzers/hang/src/device_lag.cpp), not that it never arrived.
// Staging buffers grow to the largest call and are reused; calls are serialised per communicator
// (the DDP thread and the main thread may share one), which MPI requires of a communicator anyway.
// Is not: a device-aware transport (that is NCCL: comm/nccl/nccl_communicator.h).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "comm/communicator.h"
#include "model/ops.h"

namespace gpt2 {

using IsDevicePointer = std::function<bool(const void*)>;

class HostStagingCommunicator final : public Communicator {
 public:
  // `ops` owns the device memory and must outlive this communicator and its splits; so must
  // `probe` (may be null).
  HostStagingCommunicator(std::unique_ptr<Communicator> inner, Ops& ops, IsDevicePointer on_device,
                          rankscope::probe::Probe* probe = nullptr);

  const std::string& name() const override { return inner_->name(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }

  Status all_reduce(void* buf, size_t count, DataType dtype, ReduceOp op) override;
  Status all_gather(const void* send, void* recv, size_t count, DataType dtype) override;
  Status reduce_scatter(const void* send, void* recv, size_t recv_count, DataType dtype) override;
  Status broadcast(void* buf, size_t count, DataType dtype, int root) override;
  Status all_to_all(const void* send, void* recv, size_t count, DataType dtype) override;
  Status all_to_all_v(const void* send, std::span<const size_t> send_counts,
                      std::span<const size_t> send_displs, void* recv,
                      std::span<const size_t> recv_counts, std::span<const size_t> recv_displs,
                      DataType dtype) override;
  Status barrier() override;
  std::unique_ptr<Communicator> split(const std::string& name, int color, int key) override;

  // Bytes copied device->host and host->device so far (for tests and the start-up line).
  size_t staged_bytes() const { return staged_bytes_; }

 private:
  // A host view of `bytes` at `ptr`: the pointer itself when it is host memory, else staging
  // buffer `slot` filled from the device when `fill`.
  void* stage_in(int slot, const void* ptr, size_t bytes, bool fill);
  // Copies staging buffer `slot` back to `ptr` when `ptr` is device memory.
  void stage_out(int slot, void* ptr, size_t bytes);

  std::unique_ptr<Communicator> inner_;
  Ops& ops_;
  IsDevicePointer on_device_;
  rankscope::probe::Probe* probe_;
  std::mutex mutex_;
  std::vector<unsigned char> staging_[2];  // [0] send / in-place, [1] receive
  size_t staged_bytes_ = 0;
};

}  // namespace gpt2
