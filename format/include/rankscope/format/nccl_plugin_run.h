// nccl_plugin_run.h — a run directory written by the NCCL profiler plugin, read as a rankscope run.
//
// Is: the reader side of probe/nccl (librankscope-nccl.so) and probe/nvtx (librankscope-nvtx.so).
// They write RUN_DIR/nccl/: one flight recorder per process and NCCL communicator
// (<host>.<pid>.<hash>.r<commrank>.flight, its NcclCommInfo section naming the communicator by the
// hash every member shares), one per process for the job's NVTX ranges (<host>.<pid>.nvtx.flight)
// and a process.json per process (<host>.<pid>.process.json: the launcher's rank, command line,
// settings; run.json's equivalent, since no process knows the whole job). This folds them into the
// model every analyzer reads: one rank per process (the launcher's global rank, else the process's
// rank in the communicator spanning every process), each with one CommSlot per communicator, and a
// synthesised RunMetadata whose groups are the communicators' memberships rebuilt from the files.
// Is not: the writer (probe/nccl) or any interpretation.
#pragma once

#include <filesystem>

#include "rankscope/format/run_directory.h"

namespace rankscope::format {

inline constexpr std::string_view kNcclPluginDir = "nccl";

// True when `run_dir`/nccl holds at least one flight recorder.
bool has_nccl_plugin_files(const std::filesystem::path& run_dir);

// The communicator's name as analyzers show it: ncclConfig_t.commName when the job set one (with
// "@" and the hash's first 8 hex digits when another communicator has the same name), else
// "nccl-<hash as 16 hex digits>".
std::string nccl_comm_display_name(uint64_t hash, std::string_view comm_name, bool name_shared);

// Fails only when the directory holds no readable plugin recorder; problems land in `problems`.
Result<RunDirectory> open_nccl_plugin_run(const std::filesystem::path& run_dir, const OpenOptions& options = {});

}  // namespace rankscope::format
