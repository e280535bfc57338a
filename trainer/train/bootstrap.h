// bootstrap.h — how this process joins the job: MPI when a launcher started it, else alone.
//
// Is: the start of every gpt2-train process before the probe exists: MPI_Init_thread under
// mpirun/srun (or a loopback world of one), the world communicator WITHOUT probe reporting (the
// probe is created with what bootstrap learns), this rank's host name, and the run-directory name
// agreed by all ranks (rank 0's clock decides "runs/<date-time>", broadcast to the others).
// Is not: group splitting (comm/process_groups.h) nor the probe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "rankscope/probe/probe.h"

namespace gpt2 {

class MpiRuntime;

class Bootstrap {
 public:
  static rankscope::Result<std::unique_ptr<Bootstrap>> start(int* argc, char*** argv);
  ~Bootstrap();

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  bool uses_mpi() const { return mpi_ != nullptr; }
  std::string mpi_version() const;

  // The world communicator, handed over once (to be wrapped by the probe decorator).
  std::unique_ptr<Communicator> take_world() { return std::move(world_); }
  // A fresh world communicator (a new MPI_Comm_dup) for the next run of a sweep in this process.
  void renew_world();
  // Collective: every rank's host name, by rank. Call before take_world().
  rankscope::Result<std::vector<std::string>> gather_hosts();
  // When start() was entered and returned (now_unix_ns): the MPI start, for init/comm.
  int64_t started_ns() const { return started_ns_; }
  int64_t ready_ns() const { return ready_ns_; }
  // Collective: `requested` if not empty, else runs/<rank 0's date-time>. Call before take_world().
  rankscope::Result<std::string> agree_run_dir(const std::string& requested);
  // Clock-alignment transport for the probe; null in a single process.
  std::unique_ptr<rankscope::probe::ClockExchange> clock_exchange();
  // Ends the whole job after an error on this rank (MPI_Abort), or returns when alone.
  void abort_job(int exit_code);

 private:
  Bootstrap() = default;
  std::unique_ptr<MpiRuntime> mpi_;
  std::unique_ptr<Communicator> world_;
  int rank_ = 0;
  int world_size_ = 1;
  int64_t started_ns_ = 0;
  int64_t ready_ns_ = 0;
};

}  // namespace gpt2
