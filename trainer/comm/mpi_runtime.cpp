// mpi_runtime.cpp — MPI_Init_thread/MPI_Finalize, the world communicator, the clock exchange.
#include "mpi_runtime.h"

#include <cstdlib>

#include <fmt/format.h>
#include <mpi.h>

#include "mpi_communicator.h"
#include "rankscope/format/clock.h"

namespace gpt2 {
namespace {

// Message tags of the clock exchange; on a private communicator, so any values do.
constexpr int kPingTag = 7101;
constexpr int kPongTag = 7102;

class MpiClockExchange final : public rankscope::probe::ClockExchange {
 public:
  MpiClockExchange() {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  }
  ~MpiClockExchange() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  int64_t ping_root(int64_t t1_ns) override {
    int64_t t2 = 0;
    MPI_Send(&t1_ns, 1, MPI_INT64_T, 0, kPingTag, comm_);
    MPI_Recv(&t2, 1, MPI_INT64_T, 0, kPongTag, comm_, MPI_STATUS_IGNORE);
    return t2;
  }

  void serve(int peer) override {
    int64_t t1 = 0;
    MPI_Recv(&t1, 1, MPI_INT64_T, peer, kPingTag, comm_, MPI_STATUS_IGNORE);
    // Read the clock after the ping arrived and right before the reply leaves.
    int64_t t2 = rankscope::now_unix_ns();
    MPI_Send(&t2, 1, MPI_INT64_T, peer, kPongTag, comm_);
  }

  void barrier() override { MPI_Barrier(comm_); }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace

bool MpiRuntime::launched_by_mpi() {
  // OpenMPI's mpirun, MPICH/Hydra and Slurm's PMI/PMIx all export one of these.
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    if (std::getenv(var) != nullptr) return true;
  }
  return false;
}

rankscope::Result<std::unique_ptr<MpiRuntime>> MpiRuntime::init(int* argc, char*** argv) {
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
    return rankscope::internal_error("MPI_Init_thread failed (is the job launched with mpirun?)");
  if (provided < MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    return rankscope::unsupported(
        "the MPI library does not grant MPI_THREAD_MULTIPLE, which the DDP gradient thread needs "
        "(hint: use an MPI built with thread support, e.g. Debian's OpenMPI 4.1)");
  }
  std::unique_ptr<MpiRuntime> rt(new MpiRuntime());
  MPI_Comm_rank(MPI_COMM_WORLD, &rt->world_rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &rt->world_size_);
  return rt;
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::string MpiRuntime::library_version() const {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string v(text, len);
  auto cut = v.find_first_of(",\n");
  return cut == std::string::npos ? v : v.substr(0, cut);
}

void MpiRuntime::abort(int exit_code) {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; this only satisfies [[noreturn]]
}

std::unique_ptr<Communicator> MpiRuntime::world() {
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  return make_mpi_communicator(&dup, "world");
}

std::unique_ptr<rankscope::probe::ClockExchange> MpiRuntime::clock_exchange() {
  return std::make_unique<MpiClockExchange>();
}

}  // namespace gpt2
