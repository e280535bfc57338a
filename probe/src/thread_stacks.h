// thread_stacks.h — raw native stacks (return addresses) of every thread of this process, taken
// from inside the process with no outside tool.
//
// Is: the signal round trip. Each thread listed in /proc/self/task is sent a dedicated real-time
// signal (tgkill); its handler unwinds its own stack (_Unwind_Backtrace) into a preallocated slot and
// says so; the caller waits, up to a time limit, for every answer. The calling thread unwinds itself
// directly. Is not: symbolisation (symbolizer.h) or text output (stack_capture.cpp), and not a way to
// read another process (that is eu-stack's or gdb's job).
//
// Not disturbing the program: the signal is one no handler, sigwait or signalfd of the program uses
// (SIG_DFL and not blocked by any thread that does not block them all); the previous disposition is
// restored afterwards, with any instance still pending discarded first (so a late delivery never
// meets SIG_DFL, which would end the process); the handler keeps errno, allocates nothing, and
// writes only into static slots; two captures at once are serialised. What remains visible: a thread
// woken inside a non-restartable call (poll, epoll_wait, nanosleep) sees EINTR, as with any signal.
// Refused on glibc < 2.35, where the unwinder takes the loader's lock (a handler could deadlock).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rankscope/format/status.h"

namespace rankscope::probe {

enum class ThreadStackOutcome {
  kCaptured,   // the handler answered (or it is the calling thread)
  kNoAnswer,   // signalled, no answer within the limit (e.g. uninterruptible sleep in a driver)
  kBlocked,    // the thread blocks the signal, so it was not sent (it would stay pending)
  kExited,     // listed but gone before it answered
  kTooMany,    // more threads than the preallocated slots
};

struct ThreadStack {
  int tid = 0;
  std::string name;              // /proc/self/task/TID/comm
  ThreadStackOutcome outcome = ThreadStackOutcome::kCaptured;
  bool is_caller = false;        // the thread that took the capture
  // frames[0] is the innermost frame. When first_is_exact it is the very instruction the signal
  // interrupted; every other entry is a return address (look up pc - 1 to stay inside the call).
  bool first_is_exact = false;
  std::vector<uintptr_t> frames;
};

struct OwnThreadStacks {
  int pid = 0;
  int signal = 0;                // the real-time signal used (0 when there was no other thread)
  double elapsed_s = 0;
  std::vector<ThreadStack> threads;  // the caller first, then in /proc/self/task order
};

// Fails only when no usable signal is free or the process's task list cannot be read; threads that
// do not answer are reported in the result, never waited on past time_limit_s.
Result<OwnThreadStacks> capture_own_thread_stacks(double time_limit_s);

const char* thread_stack_outcome_text(ThreadStackOutcome outcome);

}  // namespace rankscope::probe
