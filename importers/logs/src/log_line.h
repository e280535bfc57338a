// log_line.h — one line of a job's log split into what printed it and what it says.
//
// Is: recognition of the two producers hangdoctor reads from a log, wherever they sit in a line:
//   NCCL (debug.cc):   "<host>:<pid>:<tid> [<cudaDev>] [<file>:<line>] NCCL <INFO|WARN|TRACE|CALL> <message>"
//   PyTorch (c10's glog-style logger): "[E1127 03:04:05.123456 12345 ProcessGroupNCCL.cpp:632] <message>",
//                      before 2.0 also "[E ProcessGroupNCCL.cpp:455] <message>"
// and the launcher prefixes in front of either: torchrun's "[rank3]:" (c10's rank prefix) and
// "[default3]:" (elastic's --tee role prefix, the local rank), srun --label's "3: ". Whatever else
// a line holds (a Python traceback, a program's own output) is kOther. Nothing is copied: every
// view points into the caller's buffer. Is not: the meaning of a message (nccl_message.h,
// torch_message.h). Formats: docs/log-formats/.
#pragma once

#include <string_view>

namespace rankscope::logs {

enum class Producer { kOther, kNccl, kTorch };

struct LogLine {
  Producer producer = Producer::kOther;
  // Launcher prefixes: the global rank of "[rankN]:" or "N: " (srun), the local rank of
  // "[defaultN]:" (-1 where absent).
  int tagged_rank = -1;
  int tagged_local_rank = -1;
  // NCCL: where it was printed. `device` is the CUDA device ordinal in the process, not a rank.
  std::string_view host;
  int pid = -1;
  int tid = -1;
  int device = -1;             // -1: not printed (NCCL CALL lines)
  char level = 0;              // NCCL: 'I' INFO, 'W' WARN, 'T' TRACE, 'C' CALL; PyTorch: E W I F
  std::string_view source;     // PyTorch: "ProcessGroupNCCL.cpp:632"; NCCL WARN: "transport/net_ib.cc:1295"
  std::string_view message;    // after the producer's prefix (the whole line for kOther)
};

// Splits one line (without its newline). Never fails: what is not recognised is kOther.
LogLine split_log_line(std::string_view line);

// Parsing helpers shared by the message readers.
// The decimal (or 0x hex where `hex`) number at the start of `s`; advances `s` past it.
bool take_number(std::string_view& s, long long& out, bool hex = false);
// The value after "key" in `s` ("count 1024", "SeqNum=41"): the text up to the next space, comma
// or ')' — empty when the key is absent.
std::string_view value_after(std::string_view s, std::string_view key);
bool number_after(std::string_view s, std::string_view key, long long& out, bool hex = false);

}  // namespace rankscope::logs
