// node_launch.h — runs one shell command per node in parallel, under one deadline.
//
// Is: fork + `/bin/sh -c` per command, each in its own process group (so the ssh or srun it starts
// dies with it), stdout kept in memory up to a cap, the tail of stderr kept for the reason, a poll
// loop over every pipe, and at the deadline SIGTERM then SIGKILL to every group still running: a
// node that never answers costs the deadline, never more. Is not: what the commands are (gather.cpp)
// or what their output means.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rankscope::gather {

struct LaunchedCommand {
  std::string command;       // given to /bin/sh -c
  std::vector<uint8_t> out;  // stdout, up to the cap
  std::string err_tail;      // the last 2 KiB of stderr
  bool started = false;      // fork succeeded
  bool timed_out = false;    // killed at the deadline
  bool overflowed = false;   // stdout went past the cap: killed
  int exit_code = -1;        // exit status; 128 + signal when killed by one; -1 unknown
  double seconds = 0;        // from the start of the batch to its end (EOF and exit)
};

// Runs every command (at most `max_parallel` at a time, the rest queued) and returns when all have
// ended or the deadline passed. A command not started by the deadline is marked timed_out.
void run_commands(std::vector<LaunchedCommand>& commands, double deadline_s, uint64_t max_stdout_bytes,
                  int max_parallel);

// Why a command gave no usable answer, in a user's words (the deadline, the stream limit, the launcher,
// the exit status with the last line of stderr); empty when it ran to exit 0. Whether it sent
// anything is the caller's to judge.
std::string why_unanswered(const LaunchedCommand& c, double deadline_s);

// '...' quoting for /bin/sh (and the remote shell ssh hands a command to).
std::string shell_quote(const std::string& word);

}  // namespace rankscope::gather
