// local_ranks.h — the ranks of a PyTorch job running on this machine, and their Python stacks taken
// with py-spy (`hangdoctor --py-spy`).
//
// Is: find_local_ranks(), which reads /proc: a process whose environment holds RANK and WORLD_SIZE
// (what torchrun, torch.distributed.launch and most launchers give every rank) is a rank, its
// DataLoader workers (children that inherit the same RANK) left out, the job told by
// TORCHELASTIC_RUN_ID (else MASTER_ADDR:MASTER_PORT); and sample_with_py_spy(), `py-spy dump
// --nonblocking` of each rank, all ranks at once, a few rounds apart, read as stack_import.h reads
// py-spy's files. Is not: the judgement (analyzers/hang/stack_verdict.h).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "rankscope/format/status.h"
#include "rankscope/stacks/stack_import.h"

namespace rankscope::stacks {

struct LocalRank {
  int rank = -1;
  int pid = 0;
  int world_size = 0;
  std::string job;  // TORCHELASTIC_RUN_ID, else "MASTER_ADDR:MASTER_PORT"
};

// The ranks of the one PyTorch job on this machine, by rank. An error when there is none (processes
// of other users cannot be read: run as the job's user), or when several jobs run (each named).
Result<std::vector<LocalRank>> find_local_ranks(const std::filesystem::path& proc_root = "/proc");

// `py_spy dump --nonblocking --pid P` of every rank, `rounds` times `interval_s` apart; a rank py-spy
// could not read is a problem line (ptrace permission, the process gone), not an error. An error when
// py-spy cannot be run at all, or read no rank.
Result<StackImport> sample_with_py_spy(const std::vector<LocalRank>& ranks, int rounds, double interval_s,
                                       const std::string& py_spy = "py-spy");

}  // namespace rankscope::stacks
