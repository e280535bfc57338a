// mpi_communicator.h — internal to the gpt2_comm_mpi leaf: wraps an MPI_Comm as a Communicator.
//
// Is: the one factory mpi_runtime.cpp uses; the argument is an MPI_Comm* passed as void* so that
// this header needs no mpi.h. Is not: for use outside trainer/comm (use MpiRuntime::world()).
#pragma once

#include <memory>
#include <string>

#include "communicator.h"

namespace gpt2 {

// Takes ownership of *mpi_comm (an MPI_Comm*), which is freed with the communicator.
std::unique_ptr<Communicator> make_mpi_communicator(void* mpi_comm, const std::string& name);

}  // namespace gpt2
