// host_staging_communicator.cpp — device buffers through host memory (see the header).
#include "comm/host_staging_communicator.h"

#include <algorithm>
#include <numeric>

namespace gpt2 {
namespace {

size_t element_bytes(DataType dtype) { return rankscope::format::dtype_size(dtype); }

// Elements spanned by a v-collective's layout: the furthest displacement + count.
size_t v_extent(std::span<const size_t> counts, std::span<const size_t> displs) {
  size_t extent = 0;
  for (size_t i = 0; i < counts.size() && i < displs.size(); ++i)
    extent = std::max(extent, displs[i] + counts[i]);
  return extent;
}

}  // namespace

HostStagingCommunicator::HostStagingCommunicator(std::unique_ptr<Communicator> inner, Ops& ops,
                                                 IsDevicePointer on_device, rankscope::probe::Probe* probe)
    : inner_(std::move(inner)), ops_(ops), on_device_(std::move(on_device)), probe_(probe) {}

void* HostStagingCommunicator::stage_in(int slot, const void* ptr, size_t bytes, bool fill) {
  if (ptr == nullptr || !on_device_(ptr)) return const_cast<void*>(ptr);
  auto& buf = staging_[slot];
  if (buf.size() < bytes) buf.resize(bytes);
  if (fill && bytes > 0) {
    // Waits for every op before it on the device: where a stuck GPU holds its host.
    rankscope::probe::ScopedRange wait(probe_, "device_sync");
    ops_.copy_to_host(buf.data(), ptr, bytes);
    staged_bytes_ += bytes;
  }
  return buf.data();
}

void HostStagingCommunicator::stage_out(int slot, void* ptr, size_t bytes) {
  if (ptr == nullptr || !on_device_(ptr) || bytes == 0) return;
  ops_.copy_from_host(ptr, staging_[slot].data(), bytes);
  staged_bytes_ += bytes;
}

Status HostStagingCommunicator::all_reduce(void* buf, size_t count, DataType dtype, ReduceOp op) {
  std::lock_guard lock(mutex_);
  const size_t bytes = count * element_bytes(dtype);
  void* host = stage_in(0, buf, bytes, true);
  RS_RETURN_IF_ERROR(inner_->all_reduce(host, count, dtype, op));
  stage_out(0, buf, bytes);
  return {};
}

Status HostStagingCommunicator::all_gather(const void* send, void* recv, size_t count, DataType dtype) {
  std::lock_guard lock(mutex_);
  const size_t bytes = count * element_bytes(dtype);
  const size_t recv_bytes = bytes * static_cast<size_t>(size());
  void* host_send = stage_in(0, send, bytes, true);
  void* host_recv = stage_in(1, recv, recv_bytes, false);
  RS_RETURN_IF_ERROR(inner_->all_gather(host_send, host_recv, count, dtype));
  stage_out(1, recv, recv_bytes);
  return {};
}

Status HostStagingCommunicator::reduce_scatter(const void* send, void* recv, size_t recv_count,
                                               DataType dtype) {
  std::lock_guard lock(mutex_);
  const size_t recv_bytes = recv_count * element_bytes(dtype);
  void* host_send = stage_in(0, send, recv_bytes * static_cast<size_t>(size()), true);
  void* host_recv = stage_in(1, recv, recv_bytes, false);
  RS_RETURN_IF_ERROR(inner_->reduce_scatter(host_send, host_recv, recv_count, dtype));
  stage_out(1, recv, recv_bytes);
  return {};
}

Status HostStagingCommunicator::broadcast(void* buf, size_t count, DataType dtype, int root) {
  std::lock_guard lock(mutex_);
  const size_t bytes = count * element_bytes(dtype);
  // Only the root's bytes matter going in; every rank's buffer is overwritten coming out.
  void* host = stage_in(0, buf, bytes, rank() == root);
  RS_RETURN_IF_ERROR(inner_->broadcast(host, count, dtype, root));
  stage_out(0, buf, bytes);
  return {};
}

Status HostStagingCommunicator::all_to_all(const void* send, void* recv, size_t count, DataType dtype) {
  std::lock_guard lock(mutex_);
  const size_t bytes = count * element_bytes(dtype) * static_cast<size_t>(size());
  void* host_send = stage_in(0, send, bytes, true);
  void* host_recv = stage_in(1, recv, bytes, false);
  RS_RETURN_IF_ERROR(inner_->all_to_all(host_send, host_recv, count, dtype));
  stage_out(1, recv, bytes);
  return {};
}

Status HostStagingCommunicator::all_to_all_v(const void* send, std::span<const size_t> send_counts,
                                             std::span<const size_t> send_displs, void* recv,
                                             std::span<const size_t> recv_counts,
                                             std::span<const size_t> recv_displs, DataType dtype) {
  std::lock_guard lock(mutex_);
  const size_t esize = element_bytes(dtype);
  const size_t send_bytes = v_extent(send_counts, send_displs) * esize;
  const size_t recv_bytes = v_extent(recv_counts, recv_displs) * esize;
  void* host_send = stage_in(0, send, send_bytes, true);
  void* host_recv = stage_in(1, recv, recv_bytes, false);
  RS_RETURN_IF_ERROR(inner_->all_to_all_v(host_send, send_counts, send_displs, host_recv,
                                          recv_counts, recv_displs, dtype));
  stage_out(1, recv, recv_bytes);
  return {};
}

Status HostStagingCommunicator::barrier() { return inner_->barrier(); }

std::unique_ptr<Communicator> HostStagingCommunicator::split(const std::string& name, int color, int key) {
  auto sub = inner_->split(name, color, key);
  if (!sub) return nullptr;
  return std::make_unique<HostStagingCommunicator>(std::move(sub), ops_, on_device_, probe_);
}

}  // namespace gpt2
