// nccl_communicator.cpp — NcclCommunicator over ncclComm_t (see nccl_communicator.h).
//
// Every call runs the same frame: order after the compute stream (event), stage host buffers into
// device memory, enqueue the NCCL call(s) on the comm stream, copy host results back, order the
// compute stream after the collective (event), and wait on the host when host-synchronous.
#include "comm/nccl/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <functional>

#include "comm/nccl/unique_id_exchange.h"
#include "rankscope/probe/cuda_event_completion.h"

namespace gpt2 {
namespace {

using rankscope::format::DataType;

Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::ok_status();
  return rankscope::internal_error(fmt::format("{}: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e)));
}
Status nccl_status(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return Status::ok_status();
  return rankscope::internal_error(fmt::format("{}: {} (ncclResult {}; last: {})", what, ncclGetErrorString(r),
                                               static_cast<int>(r), ncclGetLastError(nullptr)));
}

#define RS_CUDA_CHECK(expr) RS_RETURN_IF_ERROR(cuda_status((expr), #expr))
#define RS_NCCL_CHECK(expr) RS_RETURN_IF_ERROR(nccl_status((expr), #expr))

// Every communicator carries our group name (tp0, dp1, ep0...) as ncclConfig_t.commName, so that NCCL's
// own logs, RAS and profiler plugins (ours included: it names communicators by it) say which group it is.
// NCCL copies the string during init; `name` only has to outlive the call.
ncclConfig_t named_config(const std::string& name) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.commName = name.c_str();
  return config;
}

rankscope::Result<ncclDataType_t> nccl_type(DataType dt) {
  switch (dt) {
    case DataType::kFloat32: return ncclFloat32;
    case DataType::kBFloat16: return ncclBfloat16;
    case DataType::kFloat16: return ncclFloat16;
    case DataType::kInt32: return ncclInt32;
    case DataType::kInt64: return ncclInt64;
    case DataType::kUInt8: return ncclUint8;
    case DataType::kFloat64: return ncclFloat64;
    case DataType::kUnknown: break;
  }
  return rankscope::invalid_argument("NCCL collective with an unknown data type");
}

bool is_device_pointer(const void* p) {
  if (p == nullptr) return false;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();  // unregistered host memory may report an error on old runtimes: clear it
    return false;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

// A device buffer that grows on demand (host-pointer staging, the barrier's scalar).
struct DeviceScratch {
  void* ptr = nullptr;
  size_t bytes = 0;
  ~DeviceScratch() { cudaFree(ptr); }
  rankscope::Result<void*> get(size_t want) {
    if (want <= bytes && ptr != nullptr) return ptr;
    RS_CUDA_CHECK(cudaFree(ptr));
    ptr = nullptr;
    bytes = 0;
    RS_CUDA_CHECK(cudaMalloc(&ptr, std::max<size_t>(want, 256)));
    bytes = std::max<size_t>(want, 256);
    return ptr;
  }
};

// Extent in elements of a displaced block list: max(displ + count).
size_t extent(std::span<const size_t> counts, std::span<const size_t> displs) {
  size_t end = 0;
  for (size_t i = 0; i < counts.size() && i < displs.size(); i++) end = std::max(end, displs[i] + counts[i]);
  return end;
}

class NcclCommunicatorImpl final : public NcclCommunicator {
 public:
  NcclCommunicatorImpl(std::string name, ncclComm_t comm, const NcclOptions& options)
      : name_(std::move(name)), comm_(comm), options_(options) {}
  ~NcclCommunicatorImpl() override {
    if (stream_) cudaStreamSynchronize(stream_);
    if (comm_) ncclCommDestroy(comm_);
    if (ready_) cudaEventDestroy(ready_);
    if (done_) cudaEventDestroy(done_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  Status init() {
    RS_NCCL_CHECK(ncclCommUserRank(comm_, &rank_));
    RS_NCCL_CHECK(ncclCommCount(comm_, &size_));
    RS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    RS_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    RS_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    return Status::ok_status();
  }

  const std::string& name() const override { return name_; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  CUstream_st* comm_stream() const override { return stream_; }

  rankscope::Result<std::unique_ptr<rankscope::probe::CompletionSource>> completion_of_last() override {
    return rankscope::probe::make_cuda_event_completion(stream_);
  }

  bool stream_ordered() const override { return !options_.host_synchronous; }

  std::unique_ptr<rankscope::probe::CompletionSource> take_pending_start() override {
    return std::move(pending_start_);
  }

  std::unique_ptr<rankscope::probe::CompletionSource> take_pending_completion() override {
    if (!last_call_async_) return nullptr;
    last_call_async_ = false;
    auto completion = completion_of_last();
    if (!completion.ok()) {
      std::fprintf(stderr, "rankscope nccl: WARN %s: %s; completion taken as immediate\n", name_.c_str(),
                   completion.status().to_string().c_str());
      return nullptr;
    }
    return std::move(completion).value();
  }

  Status async_error() override {
    ncclResult_t state = ncclSuccess;
    RS_NCCL_CHECK(ncclCommGetAsyncError(comm_, &state));
    return nccl_status(state, "ncclCommGetAsyncError");
  }

  Status all_reduce(void* buf, size_t count, DataType dtype, ReduceOp op) override {
    RS_ASSIGN_OR_RETURN(ncclDataType_t type, nccl_type(dtype));
    const size_t bytes = count * rankscope::format::dtype_size(dtype);
    const ncclRedOp_t red = op == ReduceOp::kMax ? ncclMax : ncclSum;
    return run(buf, bytes, buf, bytes, [&](const void* s, void* r) {
      return nccl_status(ncclAllReduce(s, r, count, type, red, comm_, stream_), "ncclAllReduce");
    });
  }

  Status all_gather(const void* send, void* recv, size_t count, DataType dtype) override {
    RS_ASSIGN_OR_RETURN(ncclDataType_t type, nccl_type(dtype));
    const size_t bytes = count * rankscope::format::dtype_size(dtype);
    return run(send, bytes, recv, bytes * size_, [&](const void* s, void* r) {
      return nccl_status(ncclAllGather(s, r, count, type, comm_, stream_), "ncclAllGather");
    });
  }

  Status reduce_scatter(const void* send, void* recv, size_t recv_count, DataType dtype) override {
    RS_ASSIGN_OR_RETURN(ncclDataType_t type, nccl_type(dtype));
    const size_t bytes = recv_count * rankscope::format::dtype_size(dtype);
    return run(send, bytes * size_, recv, bytes, [&](const void* s, void* r) {
      return nccl_status(ncclReduceScatter(s, r, recv_count, type, ncclSum, comm_, stream_), "ncclReduceScatter");
    });
  }

  Status broadcast(void* buf, size_t count, DataType dtype, int root) override {
    RS_ASSIGN_OR_RETURN(ncclDataType_t type, nccl_type(dtype));
    if (root < 0 || root >= size_) {
      return rankscope::invalid_argument(fmt::format("broadcast root {} outside {} (size {})", root, name_, size_));
    }
    const size_t bytes = count * rankscope::format::dtype_size(dtype);
    return run(buf, bytes, buf, bytes, [&](const void* s, void* r) {
      return nccl_status(ncclBroadcast(s, r, count, type, root, comm_, stream_), "ncclBroadcast");
    });
  }

  Status all_to_all(const void* send, void* recv, size_t count, DataType dtype) override {
    RS_ASSIGN_OR_RETURN(ncclDataType_t type, nccl_type(dtype));
    const size_t esize = rankscope::format::dtype_size(dtype);
    const size_t bytes = count * esize * size_;
    return run(send, bytes, recv, bytes, [&](const void* s, void* r) {
      return grouped_send_recv(type, [&](int peer) {
        const size_t off = peer * count * esize;
        return std::tuple{static_cast<const char*>(s) + off, count, static_cast<char*>(r) + off, count};
      });
    });
  }

  Status all_to_all_v(const void* send, std::span<const size_t> send_counts, std::span<const size_t> send_displs,
                      void* recv, std::span<const size_t> recv_counts, std::span<const size_t> recv_displs,
                      DataType dtype) override {
    RS_ASSIGN_OR_RETURN(ncclDataType_t type, nccl_type(dtype));
    const auto n = static_cast<size_t>(size_);
    if (send_counts.size() != n || send_displs.size() != n || recv_counts.size() != n || recv_displs.size() != n) {
      return rankscope::invalid_argument(fmt::format("all_to_all_v on {} needs {} counts and displacements", name_, n));
    }
    const size_t esize = rankscope::format::dtype_size(dtype);
    return run(send, extent(send_counts, send_displs) * esize, recv, extent(recv_counts, recv_displs) * esize,
               [&](const void* s, void* r) {
                 return grouped_send_recv(type, [&](int peer) {
                   return std::tuple{static_cast<const char*>(s) + send_displs[peer] * esize, send_counts[peer],
                                     static_cast<char*>(r) + recv_displs[peer] * esize, recv_counts[peer]};
                 });
               });
  }

  Status barrier() override {
    // A one-float all-reduce, always waited for on the host: a barrier that returned early is none.
    RS_ASSIGN_OR_RETURN(void* scalar, barrier_scratch_.get(sizeof(float)));
    RS_RETURN_IF_ERROR(run(scalar, sizeof(float), scalar, sizeof(float), [&](const void* s, void* r) {
      return nccl_status(ncclAllReduce(s, r, 1, ncclFloat32, ncclSum, comm_, stream_), "ncclAllReduce(barrier)");
    }));
    RS_CUDA_CHECK(cudaEventSynchronize(done_));
    last_call_async_ = false;
    return Status::ok_status();
  }

  std::unique_ptr<Communicator> split(const std::string& name, int color, int key) override {
    ncclComm_t child = nullptr;
    ncclConfig_t config = named_config(name);
    Status s = nccl_status(ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &child, &config),
                           "ncclCommSplit");
    if (!s.ok() || child == nullptr) {
      if (!s.ok()) std::fprintf(stderr, "rankscope nccl: WARN split of %s into %s failed: %s\n", name_.c_str(),
                                name.c_str(), s.to_string().c_str());
      return nullptr;  // not a member (negative color), or the failure above
    }
    auto impl = std::make_unique<NcclCommunicatorImpl>(name, child, options_);
    s = impl->init();
    if (!s.ok()) {
      std::fprintf(stderr, "rankscope nccl: WARN %s: %s\n", name.c_str(), s.to_string().c_str());
      return nullptr;
    }
    return impl;
  }

 private:
  using Enqueue = std::function<Status(const void* send, void* recv)>;

  // The frame of every collective (see the file comment). send/recv may be host or device memory;
  // in-place calls pass the same pointer twice.
  Status run(const void* send, size_t send_bytes, void* recv, size_t recv_bytes, const Enqueue& enqueue) {
    // The current device is per thread, and the DDP thread may issue this collective.
    RS_CUDA_CHECK(cudaSetDevice(options_.device));
    if (options_.compute_stream != nullptr) {
      RS_CUDA_CHECK(cudaEventRecord(ready_, options_.compute_stream));
      RS_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready_, 0));
    } else {
      RS_CUDA_CHECK(cudaDeviceSynchronize());
    }
    const bool in_place = send == recv;
    const bool send_host = send_bytes > 0 && !is_device_pointer(send);
    const bool recv_host = recv_bytes > 0 && !is_device_pointer(recv);
    const void* dsend = send;
    void* drecv = recv;
    if (send_host || recv_host) {
      // One staging area: [send | recv], or one block when in place.
      const size_t recv_off = in_place ? 0 : (send_bytes + 255) / 256 * 256;
      RS_ASSIGN_OR_RETURN(void* stage, staging_.get(recv_off + recv_bytes));
      char* base = static_cast<char*>(stage);
      if (send_host) {
        RS_CUDA_CHECK(cudaMemcpyAsync(base, send, send_bytes, cudaMemcpyHostToDevice, stream_));
        dsend = base;
      }
      if (recv_host) drecv = base + recv_off;
      if (in_place) drecv = const_cast<void*>(dsend);
    }
    if (!options_.host_synchronous && !send_host && !recv_host) {
      // Fires once the comm stream is past the wait for the compute stream: the device has reached
      // this collective. A rank whose compute stream never gets there is "behind its host".
      auto started = rankscope::probe::make_cuda_event_completion(stream_);
      pending_start_ = started.ok() ? std::move(started).value() : nullptr;
    }
    RS_RETURN_IF_ERROR(enqueue(dsend, drecv));
    if (recv_host) RS_CUDA_CHECK(cudaMemcpyAsync(recv, drecv, recv_bytes, cudaMemcpyDeviceToHost, stream_));
    RS_CUDA_CHECK(cudaEventRecord(done_, stream_));
    if (options_.compute_stream != nullptr) RS_CUDA_CHECK(cudaStreamWaitEvent(options_.compute_stream, done_, 0));
    last_call_async_ = !(options_.host_synchronous || send_host || recv_host);
    if (!last_call_async_) {
      RS_CUDA_CHECK(cudaEventSynchronize(done_));
      RS_RETURN_IF_ERROR(async_error());
    }
    return Status::ok_status();
  }

  // ncclSend/ncclRecv to and from every peer in one group; block(peer) gives (send ptr, send count,
  // recv ptr, recv count).
  template <class Block>
  Status grouped_send_recv(ncclDataType_t type, Block&& block) {
    RS_NCCL_CHECK(ncclGroupStart());
    Status s = Status::ok_status();
    for (int peer = 0; peer < size_ && s.ok(); peer++) {
      auto [sp, sc, rp, rc] = block(peer);
      if (sc > 0) s = nccl_status(ncclSend(sp, sc, type, peer, comm_, stream_), "ncclSend");
      if (s.ok() && rc > 0) s = nccl_status(ncclRecv(rp, rc, type, peer, comm_, stream_), "ncclRecv");
    }
    // The group must be closed even after a failed call inside it.
    Status end = nccl_status(ncclGroupEnd(), "ncclGroupEnd");
    RS_RETURN_IF_ERROR(s);
    RS_RETURN_IF_ERROR(end);
    return Status::ok_status();
  }

  std::string name_;
  ncclComm_t comm_ = nullptr;
  NcclOptions options_;
  int rank_ = 0;
  int size_ = 1;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;  // recorded on the compute stream before a collective
  cudaEvent_t done_ = nullptr;   // recorded on the comm stream after it
  DeviceScratch staging_;
  DeviceScratch barrier_scratch_;
  bool last_call_async_ = false;  // the last call returned before the collective finished
  std::unique_ptr<rankscope::probe::CompletionSource> pending_start_;
};

}  // namespace

rankscope::Result<std::unique_ptr<NcclCommunicator>> make_nccl_communicator(const NcclOptions& options) {
  if (options.size <= 0 || options.rank < 0 || options.rank >= options.size) {
    return rankscope::invalid_argument(
        fmt::format("NCCL communicator {}: rank {} of size {}", options.name, options.rank, options.size));
  }
  RS_CUDA_CHECK(cudaSetDevice(options.device));
  UniqueIdBytes bytes{};
  ncclUniqueId id{};
  static_assert(sizeof(id.internal) == kNcclUniqueIdBytes, "NCCL_UNIQUE_ID_BYTES changed");
  if (options.rank == 0) {
    RS_NCCL_CHECK(ncclGetUniqueId(&id));
    std::copy(std::begin(id.internal), std::end(id.internal), bytes.begin());
  }
  if (options.bootstrap != nullptr) {
    RS_RETURN_IF_ERROR(broadcast_unique_id(*options.bootstrap, bytes));
  } else if (options.size > 1) {
    if (options.id_dir.empty()) {
      return rankscope::invalid_argument(fmt::format(
          "NCCL communicator {} of {} ranks has neither a bootstrap communicator (MPI) nor an id directory; "
          "hint: pass the run directory",
          options.name, options.size));
    }
    const auto file = unique_id_file(options.id_dir, options.name);
    if (options.rank == 0) {
      RS_RETURN_IF_ERROR(publish_unique_id_file(file, options.job_key, bytes));
    } else {
      RS_ASSIGN_OR_RETURN(bytes, wait_for_unique_id_file(file, options.job_key, options.id_timeout));
    }
  }
  std::copy(bytes.begin(), bytes.end(), std::begin(id.internal));
  ncclComm_t comm = nullptr;
  ncclConfig_t config = named_config(options.name);
  RS_NCCL_CHECK(ncclCommInitRankConfig(&comm, options.size, id, options.rank, &config));
  auto impl = std::make_unique<NcclCommunicatorImpl>(options.name, comm, options);
  RS_RETURN_IF_ERROR(impl->init());
  return std::unique_ptr<NcclCommunicator>(std::move(impl));
}

NcclCommunicator* as_nccl(Communicator* comm) { return dynamic_cast<NcclCommunicator*>(comm); }

std::string nccl_version_string() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "NCCL (version unknown)";
  // NCCL_VERSION(X,Y,Z) = X*10000 + Y*100 + Z since 2.9.
  return fmt::format("NCCL {}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
}

}  // namespace gpt2
