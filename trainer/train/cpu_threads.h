// cpu_threads.h — how many OpenMP threads each rank of gpt2-train uses.
//
// Is: the rule "the cores of this host divided by the ranks on it", applied once at start-up unless
// the user set OMP_NUM_THREADS. Without it every rank starts one thread per core, so 2 ranks on
// 2 cores run 4 busy-waiting threads and each step slows by 2-4x (measured on the CI machine).
// Is not: thread pinning.
#pragma once

namespace gpt2 {

// Ranks sharing this host, from the launcher's environment (OpenMPI, torchrun, Slurm); 1 if unknown.
int local_ranks_from_environment();

// Sets the OpenMP thread count for this process and returns it (or returns the user's setting).
int configure_cpu_threads();

}  // namespace gpt2
