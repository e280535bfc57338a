// startup_facts.h — what the start-up of a gpt2-train process needs to know about itself: when the
// process started (for the init/launch range) and the settings that change its behaviour.
//
// Is: process_start_unix_ns() from /proc (the kernel's start time of this process, in clock ticks
// since boot, plus the boot time), and behaviour_settings(): the environment variables and thread
// counts a user may have set on one rank and not another (CUDA_LAUNCH_BLOCKING, NCCL_*,
// OMP_NUM_THREADS, OMP_WAIT_POLICY, TORCH_NCCL_*, RANKSCOPE_*), as a flat JSON object. Both read
// from a root directory so tests use a fake /proc. Is not: the judgement of which settings harm
// (analyzers/startup/config_findings.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "comm/communicator.h"

namespace gpt2 {

// 0 when /proc cannot tell (not Linux, unreadable): the caller then skips init/launch.
int64_t process_start_unix_ns(const std::filesystem::path& proc_root = "/proc");

// {"CUDA_LAUNCH_BLOCKING": "1", "OMP_NUM_THREADS": "2", "threads.openmp": 2, ...}: every variable
// of the families above that is set in `environ`, and the thread counts this process runs with.
nlohmann::json behaviour_settings(char** environ_ptr, int openmp_threads);

// Collective over `comm`: every member's `mine` (at most 64 KiB), by rank in `comm`.
rankscope::Result<std::vector<std::string>> gather_strings(Communicator& comm, const std::string& mine);

}  // namespace gpt2
