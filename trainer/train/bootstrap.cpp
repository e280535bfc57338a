// bootstrap.cpp — MPI or a world of one; host names and the run directory agreed by all ranks.
#include "bootstrap.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <ctime>

#include <fmt/format.h>

#include "comm/loopback_communicator.h"
#include "rankscope/format/clock.h"
#if GPT2_HAVE_MPI
#include "comm/mpi_runtime.h"
#endif

namespace gpt2 {
namespace {
constexpr size_t kNameBytes = 256;  // fixed-size fields keep the exchanges single collectives
}

#if !GPT2_HAVE_MPI
// This build has no MPI: the class is declared for the unique_ptr only.
class MpiRuntime {
 public:
  [[noreturn]] void abort(int code) { std::_Exit(code); }
  std::string library_version() const { return ""; }
};
#endif

Bootstrap::~Bootstrap() {
  world_.reset();  // MPI communicators are freed before MPI_Finalize
}

rankscope::Result<std::unique_ptr<Bootstrap>> Bootstrap::start(int* argc, char*** argv) {
  std::unique_ptr<Bootstrap> b(new Bootstrap());
  b->started_ns_ = rankscope::now_unix_ns();
#if GPT2_HAVE_MPI
  if (MpiRuntime::launched_by_mpi()) {
    RS_ASSIGN_OR_RETURN(b->mpi_, MpiRuntime::init(argc, argv));
    b->rank_ = b->mpi_->world_rank();
    b->world_size_ = b->mpi_->world_size();
    b->world_ = b->mpi_->world();
    b->ready_ns_ = rankscope::now_unix_ns();
    return b;
  }
#else
  (void)argc;
  (void)argv;
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr && std::string(std::getenv("OMPI_COMM_WORLD_SIZE")) != "1")
    return rankscope::unsupported("launched by mpirun, but this gpt2-train was built without MPI "
                                  "(hint: install libopenmpi-dev and reconfigure)");
#endif
  b->world_ = std::make_unique<LoopbackCommunicator>("world");
  b->ready_ns_ = rankscope::now_unix_ns();
  return b;
}

void Bootstrap::renew_world() {
#if GPT2_HAVE_MPI
  if (mpi_) {
    world_ = mpi_->world();
    return;
  }
#endif
  world_ = std::make_unique<LoopbackCommunicator>("world");
}

std::string Bootstrap::mpi_version() const { return mpi_ ? mpi_->library_version() : ""; }

rankscope::Result<std::vector<std::string>> Bootstrap::gather_hosts() {
  std::array<char, kNameBytes> mine{};
  gethostname(mine.data(), mine.size() - 1);
  std::vector<char> all(kNameBytes * static_cast<size_t>(world_size_));
  RS_RETURN_IF_ERROR(world_->all_gather(mine.data(), all.data(), kNameBytes, DataType::kUInt8));
  std::vector<std::string> hosts;
  for (int r = 0; r < world_size_; ++r) hosts.emplace_back(all.data() + r * kNameBytes);
  return hosts;
}

rankscope::Result<std::string> Bootstrap::agree_run_dir(const std::string& requested) {
  std::array<char, kNameBytes> name{};
  if (rank_ == 0) {
    std::string chosen = requested;
    if (chosen.empty()) {
      const std::time_t t = std::time(nullptr);
      std::tm tm{};
      localtime_r(&t, &tm);
      char stamp[32];
      std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
      chosen = fmt::format("runs/{}", stamp);
    }
    if (chosen.size() >= kNameBytes)
      return rankscope::invalid_argument(fmt::format("--run-dir {}: longer than {} bytes", chosen, kNameBytes - 1));
    std::copy(chosen.begin(), chosen.end(), name.begin());
  }
  RS_RETURN_IF_ERROR(world_->broadcast(name.data(), kNameBytes, DataType::kUInt8, 0));
  return std::string(name.data());
}

std::unique_ptr<rankscope::probe::ClockExchange> Bootstrap::clock_exchange() {
#if GPT2_HAVE_MPI
  if (mpi_) return mpi_->clock_exchange();
#endif
  return nullptr;
}

void Bootstrap::abort_job(int exit_code) {
  if (mpi_ && world_size_ > 1) mpi_->abort(exit_code);
}

}  // namespace gpt2
