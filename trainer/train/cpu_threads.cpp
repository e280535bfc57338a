// cpu_threads.cpp — one share of the host's cores per rank.
#include "cpu_threads.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace gpt2 {

int local_ranks_from_environment() {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"}) {
    if (const char* v = std::getenv(var)) {
      const int n = std::atoi(v);
      if (n > 0) return n;
    }
  }
  return 1;
}

int configure_cpu_threads() {
  if (const char* user = std::getenv("OMP_NUM_THREADS"); user && *user) return omp_get_max_threads();
  const int cores = std::max(1, int(std::thread::hardware_concurrency()));
  const int threads = std::max(1, cores / local_ranks_from_environment());
  omp_set_num_threads(threads);
  return threads;
}

}  // namespace gpt2
