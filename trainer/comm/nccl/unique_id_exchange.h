// unique_id_exchange.h — how the 128 bytes of an ncclUniqueId get from rank 0 to every rank.
//
// Is: two transports. Over a host Communicator (MPI, when the job was launched by mpirun): one
// broadcast from rank 0. Through a file in the run directory (torchrun/Slurm-style launches without
// MPI): rank 0 writes <dir>/nccl_unique_id.<comm> atomically (temporary file, fsync, rename), the
// others poll for it with a timeout. The file carries a job key (the run id) so a file left by an
// earlier job in the same directory is never taken for this one's.
// Is not: NCCL — the id is opaque bytes here, so this logic is tested on any machine
// (tests/gpu/nccl_bootstrap_test.cpp).
#pragma once

#include <array>
#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>

#include "comm/communicator.h"
#include "rankscope/format/status.h"

namespace gpt2 {

constexpr size_t kNcclUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
using UniqueIdBytes = std::array<char, kNcclUniqueIdBytes>;

// <dir>/nccl_unique_id.<comm_name>
std::filesystem::path unique_id_file(const std::filesystem::path& dir, std::string_view comm_name);

// Rank 0: writes the id with `job_key` so that readers appear to see it at once or not at all.
rankscope::Status publish_unique_id_file(const std::filesystem::path& file, std::string_view job_key,
                                         const UniqueIdBytes& id);

// Other ranks: polls every `poll` until the file exists with `job_key`, or fails (kNotFound, with a
// hint) after `timeout`. A file with another key (an earlier job) is ignored, as if absent.
rankscope::Result<UniqueIdBytes> wait_for_unique_id_file(const std::filesystem::path& file,
                                                         std::string_view job_key,
                                                         std::chrono::milliseconds timeout,
                                                         std::chrono::milliseconds poll =
                                                             std::chrono::milliseconds(10));

// Over a host-memory communicator (MPI): rank 0's `id` replaces every other rank's.
rankscope::Status broadcast_unique_id(Communicator& bootstrap, UniqueIdBytes& id);

}  // namespace gpt2
