// mpi_communicator.cpp — the Communicator over an MPI communicator (CPU collectives).
//
// Is: a thin mapping of each collective onto its MPI call, with MPI errors turned into Status
// (the communicator's error handler is MPI_ERRORS_RETURN) and element counts checked against
// MPI's int range. bf16 (the GPU trainer's activations when it stages TP collectives through the host)
// has no MPI type: it moves as 2-byte elements and reduces with our own MPI ops, which widen to fp32,
// combine and round once (as NCCL's bf16 sum does). Is not: probe reporting (ProbedCommunicator does
// that) nor fault injection.
#include "mpi_communicator.h"

#include <climits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <mpi.h>

#include "rankscope/format/bfloat16.h"

namespace gpt2 {
namespace {

using rankscope::format::bf16_to_float;
using rankscope::format::dtype_name;
using rankscope::format::float_to_bf16;

rankscope::Result<MPI_Datatype> mpi_type(DataType dtype) {
  switch (dtype) {
    case DataType::kBFloat16: return MPI_UINT16_T;  // moved as bits; reduced by bf16_op()
    case DataType::kFloat32: return MPI_FLOAT;
    case DataType::kFloat64: return MPI_DOUBLE;
    case DataType::kInt32: return MPI_INT32_T;
    case DataType::kInt64: return MPI_INT64_T;
    case DataType::kUInt8: return MPI_UINT8_T;
    default:
      return rankscope::invalid_argument(fmt::format(
          "MPI communicator: data type {} is not supported here (fp32, fp64, bf16, int32, int64, uint8 are)",
          dtype_name(dtype)));
  }
}

// inout[i] = in[i] (+ or max) inout[i], in fp32, rounded once.
template <bool kMax>
void bf16_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; i++) {
    const float x = bf16_to_float(a[i]), y = bf16_to_float(b[i]);
    b[i] = float_to_bf16(kMax ? (x > y ? x : y) : x + y);
  }
}

// Created once per process, after MPI_Init (the communicator exists), never freed: MPI frees user
// ops at MPI_Finalize.
MPI_Op bf16_op(ReduceOp op) {
  static MPI_Op sum = [] {
    MPI_Op o;
    MPI_Op_create(&bf16_reduce<false>, /*commute=*/1, &o);
    return o;
  }();
  static MPI_Op max = [] {
    MPI_Op o;
    MPI_Op_create(&bf16_reduce<true>, /*commute=*/1, &o);
    return o;
  }();
  return op == ReduceOp::kSum ? sum : max;
}

MPI_Op mpi_op(ReduceOp op, DataType dtype) {
  if (dtype == DataType::kBFloat16) return bf16_op(op);
  return op == ReduceOp::kSum ? MPI_SUM : MPI_MAX;
}

rankscope::Result<int> mpi_count(size_t count, const char* what) {
  if (count > static_cast<size_t>(INT_MAX))
    return rankscope::invalid_argument(fmt::format(
        "MPI communicator: {} of {} elements exceeds MPI's int count; split the buffer", what, count));
  return static_cast<int>(count);
}

Status check(int rc, const std::string& comm, const char* call) {
  if (rc == MPI_SUCCESS) return {};
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return rankscope::internal_error(
      fmt::format("{} on communicator {} failed: {}", call, comm, std::string(text, len)));
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, std::string name) : comm_(comm), name_(std::move(name)) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  const std::string& name() const override { return name_; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status all_reduce(void* buf, size_t count, DataType dtype, ReduceOp op) override {
    RS_ASSIGN_OR_RETURN(MPI_Datatype t, mpi_type(dtype));
    RS_ASSIGN_OR_RETURN(int n, mpi_count(count, "all_reduce"));
    return check(MPI_Allreduce(MPI_IN_PLACE, buf, n, t, mpi_op(op, dtype), comm_), name_, "MPI_Allreduce");
  }

  Status all_gather(const void* send, void* recv, size_t count, DataType dtype) override {
    RS_ASSIGN_OR_RETURN(MPI_Datatype t, mpi_type(dtype));
    RS_ASSIGN_OR_RETURN(int n, mpi_count(count, "all_gather"));
    return check(MPI_Allgather(send, n, t, recv, n, t, comm_), name_, "MPI_Allgather");
  }

  Status reduce_scatter(const void* send, void* recv, size_t recv_count, DataType dtype) override {
    RS_ASSIGN_OR_RETURN(MPI_Datatype t, mpi_type(dtype));
    RS_ASSIGN_OR_RETURN(int n, mpi_count(recv_count, "reduce_scatter"));
    return check(MPI_Reduce_scatter_block(send, recv, n, t, mpi_op(ReduceOp::kSum, dtype), comm_), name_,
                 "MPI_Reduce_scatter_block");
  }

  Status broadcast(void* buf, size_t count, DataType dtype, int root) override {
    if (root < 0 || root >= size_)
      return rankscope::invalid_argument(
          fmt::format("broadcast on {}: root {} is outside 0..{}", name_, root, size_ - 1));
    RS_ASSIGN_OR_RETURN(MPI_Datatype t, mpi_type(dtype));
    RS_ASSIGN_OR_RETURN(int n, mpi_count(count, "broadcast"));
    return check(MPI_Bcast(buf, n, t, root, comm_), name_, "MPI_Bcast");
  }

  Status all_to_all(const void* send, void* recv, size_t count, DataType dtype) override {
    RS_ASSIGN_OR_RETURN(MPI_Datatype t, mpi_type(dtype));
    RS_ASSIGN_OR_RETURN(int n, mpi_count(count, "all_to_all"));
    return check(MPI_Alltoall(send, n, t, recv, n, t, comm_), name_, "MPI_Alltoall");
  }

  Status all_to_all_v(const void* send, std::span<const size_t> send_counts,
                      std::span<const size_t> send_displs, void* recv,
                      std::span<const size_t> recv_counts, std::span<const size_t> recv_displs,
                      DataType dtype) override {
    const size_t n = static_cast<size_t>(size_);
    if (send_counts.size() != n || send_displs.size() != n || recv_counts.size() != n ||
        recv_displs.size() != n)
      return rankscope::invalid_argument(fmt::format(
          "all_to_all_v on {}: expected {} counts and displacements per side", name_, n));
    RS_ASSIGN_OR_RETURN(MPI_Datatype t, mpi_type(dtype));
    std::vector<int> sc(n), sd(n), rc(n), rd(n);
    for (size_t i = 0; i < n; ++i) {
      RS_ASSIGN_OR_RETURN(sc[i], mpi_count(send_counts[i], "all_to_all_v send count"));
      RS_ASSIGN_OR_RETURN(sd[i], mpi_count(send_displs[i], "all_to_all_v send displacement"));
      RS_ASSIGN_OR_RETURN(rc[i], mpi_count(recv_counts[i], "all_to_all_v recv count"));
      RS_ASSIGN_OR_RETURN(rd[i], mpi_count(recv_displs[i], "all_to_all_v recv displacement"));
    }
    return check(MPI_Alltoallv(send, sc.data(), sd.data(), t, recv, rc.data(), rd.data(), t, comm_),
                 name_, "MPI_Alltoallv");
  }

  Status barrier() override { return check(MPI_Barrier(comm_), name_, "MPI_Barrier"); }

  std::unique_ptr<Communicator> split(const std::string& name, int color, int key) override {
    MPI_Comm sub = MPI_COMM_NULL;
    if (MPI_Comm_split(comm_, color, key, &sub) != MPI_SUCCESS || sub == MPI_COMM_NULL) return nullptr;
    return std::make_unique<MpiCommunicator>(sub, name);
  }

 private:
  MPI_Comm comm_;
  std::string name_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(void* mpi_comm, const std::string& name) {
  return std::make_unique<MpiCommunicator>(*static_cast<MPI_Comm*>(mpi_comm), name);
}

}  // namespace gpt2
