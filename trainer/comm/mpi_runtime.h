// mpi_runtime.h — MPI start-up and shut-down, and the communicators and clock exchange built on it.
//
// Is: the owner of MPI_Init_thread (MPI_THREAD_MULTIPLE: the DDP thread reduces gradients while
// the main thread runs tensor-parallel collectives) and MPI_Finalize, the world communicator, and
// the probe's clock-exchange transport over MPI point-to-point messages. mpi.h stays inside this
// leaf's .cpp files (design rule 3).
// Is not: the probe reporting; wrap the communicators in ProbedCommunicator (probed_communicator.h).
#pragma once

#include <memory>
#include <string>

#include "communicator.h"
#include "rankscope/format/status.h"
#include "rankscope/probe/probe.h"

namespace gpt2 {

class MpiRuntime {
 public:
  // True when a launcher that speaks MPI started this process (mpirun, srun with PMI/PMIx).
  static bool launched_by_mpi();
  // MPI_Init_thread with MPI_THREAD_MULTIPLE; fails when the library grants less.
  static rankscope::Result<std::unique_ptr<MpiRuntime>> init(int* argc, char*** argv);
  ~MpiRuntime();  // MPI_Finalize
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  std::string library_version() const;  // "Open MPI v4.1.4, ..." first line
  // MPI_Abort on the world: ends every rank (a rank that failed must not leave the others waiting
  // forever in a collective; their flight recorders keep what they were doing).
  [[noreturn]] void abort(int exit_code);

  // A duplicate of MPI_COMM_WORLD named "world"; errors come back as Status, not aborts.
  std::unique_ptr<Communicator> world();
  // Transport for Probe::align_clocks: blocking point-to-point messages with world rank 0 on a
  // private duplicate of MPI_COMM_WORLD, so they never match a training collective.
  std::unique_ptr<rankscope::probe::ClockExchange> clock_exchange();

 private:
  MpiRuntime() = default;
  int world_rank_ = 0;
  int world_size_ = 1;
};

}  // namespace gpt2
