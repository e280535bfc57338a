// loopback_communicator.cpp — collectives over a group of one: the result is the input.
#include "loopback_communicator.h"

#include <cstring>

#include <fmt/format.h>

namespace gpt2 {
namespace {

// Copies count elements unless source and destination are the same buffer (in-place use).
Status copy_elements(const void* src, void* dst, size_t count, DataType dtype) {
  size_t elem = rankscope::format::dtype_size(dtype);
  if (elem == 0) return rankscope::invalid_argument("loopback communicator: unknown data type");
  if (src != dst && count > 0) std::memmove(dst, src, count * elem);
  return {};
}

}  // namespace

Status LoopbackCommunicator::all_reduce(void*, size_t, DataType dtype, ReduceOp) {
  if (rankscope::format::dtype_size(dtype) == 0)
    return rankscope::invalid_argument("loopback all_reduce: unknown data type");
  return {};
}

Status LoopbackCommunicator::all_gather(const void* send, void* recv, size_t count, DataType dtype) {
  return copy_elements(send, recv, count, dtype);
}

Status LoopbackCommunicator::reduce_scatter(const void* send, void* recv, size_t recv_count,
                                            DataType dtype) {
  return copy_elements(send, recv, recv_count, dtype);
}

Status LoopbackCommunicator::broadcast(void*, size_t, DataType, int root) {
  if (root != 0)
    return rankscope::invalid_argument(fmt::format(
        "loopback broadcast: root {} does not exist in a group of one (use root 0)", root));
  return {};
}

Status LoopbackCommunicator::all_to_all(const void* send, void* recv, size_t count, DataType dtype) {
  return copy_elements(send, recv, count, dtype);
}

Status LoopbackCommunicator::all_to_all_v(const void* send, std::span<const size_t> send_counts,
                                          std::span<const size_t> send_displs, void* recv,
                                          std::span<const size_t> recv_counts,
                                          std::span<const size_t> recv_displs, DataType dtype) {
  if (send_counts.size() != 1 || send_displs.size() != 1 || recv_counts.size() != 1 ||
      recv_displs.size() != 1)
    return rankscope::invalid_argument("loopback all_to_all_v: expected one count and displacement per side");
  if (send_counts[0] != recv_counts[0])
    return rankscope::invalid_argument(fmt::format(
        "loopback all_to_all_v: sends {} elements but receives {}", send_counts[0], recv_counts[0]));
  size_t elem = rankscope::format::dtype_size(dtype);
  if (elem == 0) return rankscope::invalid_argument("loopback all_to_all_v: unknown data type");
  return copy_elements(static_cast<const char*>(send) + send_displs[0] * elem,
                       static_cast<char*>(recv) + recv_displs[0] * elem, send_counts[0], dtype);
}

std::unique_ptr<Communicator> LoopbackCommunicator::split(const std::string& name, int, int) {
  return std::make_unique<LoopbackCommunicator>(name);
}

}  // namespace gpt2
