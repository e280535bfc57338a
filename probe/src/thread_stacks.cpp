// thread_stacks.cpp — the signal round trip of thread_stacks.h: pick a free real-time signal, send
// it to every other thread, let each unwind itself into a static slot, wait with a time limit.
//
// Why static slots: a handler may run late (the kernel had already set up its frame when the
// capture gave up), so the memory it writes must outlive any capture; a slot is claimed with one
// compare-exchange (waiting -> writing) that the capture also uses to abandon it, so a late writer
// never overlaps a reader. Why _Unwind_Backtrace: it walks through the kernel's signal frame into
// the interrupted code, allocates nothing, and (libgcc >= 12 on glibc >= 2.35) finds unwind tables
// with _dl_find_object, without the loader lock a wedged dlopen could hold.
#include "thread_stacks.h"

#include <dirent.h>
#include <errno.h>
#include <gnu/libc-version.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <unwind.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <fmt/format.h>

namespace rankscope::probe {
namespace {

constexpr int kMaxSlots = 1024;
constexpr int kMaxFrames = 128;
// After the limit, a handler caught mid-unwind gets this long to finish before it is abandoned.
constexpr auto kWriterGrace = std::chrono::milliseconds(100);
constexpr auto kPollInterval = std::chrono::microseconds(200);
constexpr auto kExitCheckInterval = std::chrono::milliseconds(20);

enum SlotState : uint32_t { kIdle = 0, kWaiting, kWriting, kDone, kAbandoned };

struct Slot {
  std::atomic<int> tid{0};
  std::atomic<uint32_t> state{kIdle};
  // Written by the handler between claiming (kWriting) and publishing (kDone, release).
  uint32_t depth = 0;
  bool first_is_exact = false;
  uintptr_t frames[kMaxFrames];
};

Slot g_slots[kMaxSlots];
std::atomic<int> g_slot_count{0};
// One capture at a time per process. A flag rather than std::timed_mutex: its timed lock is
// pthread_mutex_clocklock, which ThreadSanitizer does not see (it then reports every unlock).
std::atomic<bool> g_capturing{false};

class CaptureTurn {
 public:
  explicit CaptureTurn(std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      bool expected = false;
      if (g_capturing.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
        held_ = true;
        return;
      }
      if (std::chrono::steady_clock::now() >= deadline) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  ~CaptureTurn() {
    if (held_) g_capturing.store(false, std::memory_order_release);
  }
  CaptureTurn(const CaptureTurn&) = delete;
  CaptureTurn& operator=(const CaptureTurn&) = delete;
  bool held() const { return held_; }

 private:
  bool held_ = false;
};

struct UnwindWalk {
  uintptr_t* frames;
  uint32_t capacity;
  uint32_t depth;
  int first_signal_frame;  // index of the first frame the unwinder marks as interrupted; -1 none
};

_Unwind_Reason_Code record_frame(_Unwind_Context* context, void* arg) {
  auto* walk = static_cast<UnwindWalk*>(arg);
  int before_instruction = 0;
  const uintptr_t pc = _Unwind_GetIPInfo(context, &before_instruction);
  if (pc == 0) return _URC_END_OF_STACK;
  if (before_instruction && walk->first_signal_frame < 0) walk->first_signal_frame = static_cast<int>(walk->depth);
  if (walk->depth >= walk->capacity) return _URC_END_OF_STACK;
  walk->frames[walk->depth++] = pc;
  return _URC_NO_REASON;
}

// Unwinds the calling thread into `frames`. With drop_to_signal_frame, frames above the interrupted
// one (this handler, the signal trampoline, a sanitizer's dispatch) are dropped.
uint32_t unwind_here(uintptr_t* frames, uint32_t capacity, bool drop_to_signal_frame, bool& first_is_exact) {
  UnwindWalk walk{frames, capacity, 0, -1};
  _Unwind_Backtrace(record_frame, &walk);
  first_is_exact = false;
  if (!drop_to_signal_frame || walk.first_signal_frame < 0) return walk.depth;
  const uint32_t skip = static_cast<uint32_t>(walk.first_signal_frame);
  for (uint32_t i = skip; i < walk.depth; ++i) frames[i - skip] = frames[i];
  first_is_exact = true;
  return walk.depth - skip;
}

// Before glibc 2.35 (no _dl_find_object) the unwinder looks tables up under the loader's lock, and
// a thread interrupted while holding it (throwing an exception, inside dlopen) would deadlock in
// its own handler. Distributions with glibc >= 2.35 ship a libgcc (>= 12) that uses it.
Status check_unwinder_is_lock_free() {
  const char* version = ::gnu_get_libc_version();
  int major = 0;
  int minor = 0;
  if (std::sscanf(version, "%d.%d", &major, &minor) == 2 && (major > 2 || (major == 2 && minor >= 35))) return {};
  return unsupported(fmt::format("glibc {} < 2.35: unwinding inside a signal handler could deadlock on the loader lock",
                                 version));
}

int kernel_tid() { return static_cast<int>(::syscall(SYS_gettid)); }

// Async-signal-safe: getpid, gettid, atomics, the unwinder (warmed up by the caller's own unwind).
void on_stack_signal(int, siginfo_t* info, void*) {
  const int saved_errno = errno;
  // Only our own tgkill: another sender of this number (there should be none) is ignored.
  if (info != nullptr && info->si_code == SI_TKILL && info->si_pid == ::getpid()) {
    const int tid = kernel_tid();
    const int count = g_slot_count.load(std::memory_order_acquire);
    for (int i = 0; i < count; ++i) {
      Slot& slot = g_slots[i];
      if (slot.tid.load(std::memory_order_acquire) != tid) continue;
      uint32_t expected = kWaiting;
      if (slot.state.compare_exchange_strong(expected, kWriting, std::memory_order_acq_rel)) {
        bool exact = false;
        slot.depth = unwind_here(slot.frames, kMaxFrames, true, exact);
        slot.first_is_exact = exact;
        slot.state.store(kDone, std::memory_order_release);
      }
      break;
    }
  }
  errno = saved_errno;
}

struct Task {
  int tid = 0;
  std::string name;
  uint64_t blocked = 0;  // SigBlk: bit (sig - 1) set when the thread blocks sig
};

uint64_t signal_bit(int sig) { return uint64_t{1} << (sig - 1); }

std::string read_small_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "re");
  if (!f) return {};
  char buf[4096];
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  return std::string(buf, n);
}

uint64_t blocked_signals(const std::string& status_text) {
  const size_t at = status_text.find("\nSigBlk:");
  if (at == std::string::npos) return 0;
  return std::strtoull(status_text.c_str() + at + 8, nullptr, 16);
}

Result<std::vector<Task>> list_tasks() {
  DIR* dir = ::opendir("/proc/self/task");
  if (!dir) return io_error(fmt::format("cannot list /proc/self/task: {}", std::strerror(errno)));
  std::vector<Task> tasks;
  while (dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    const long tid = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || tid <= 0) continue;
    Task t;
    t.tid = static_cast<int>(tid);
    const std::string base = fmt::format("/proc/self/task/{}/", tid);
    t.name = read_small_file(base + "comm");
    while (!t.name.empty() && t.name.back() == '\n') t.name.pop_back();
    t.blocked = blocked_signals(read_small_file(base + "status"));
    tasks.push_back(std::move(t));
  }
  ::closedir(dir);
  return tasks;
}

// The highest real-time signal (away from SIGRTMIN and SIGRTMAX themselves, the usual picks) with
// the default disposition that no thread blocks, except threads that block every candidate: those
// mask signals wholesale (helper threads often do) rather than wait for one in particular.
Result<int> choose_signal(const std::vector<Task>& others) {
  uint64_t blanket_mask = 0;
  for (int sig = SIGRTMAX - 1; sig > SIGRTMIN; --sig) blanket_mask |= signal_bit(sig);
  uint64_t blocked_somewhere = 0;
  for (const Task& t : others)
    if ((t.blocked & blanket_mask) != blanket_mask) blocked_somewhere |= t.blocked;
  for (int sig = SIGRTMAX - 1; sig > SIGRTMIN; --sig) {
    if (blocked_somewhere & signal_bit(sig)) continue;
    struct sigaction current {};
    if (::sigaction(sig, nullptr, &current) != 0) continue;
    const bool has_handler = (current.sa_flags & SA_SIGINFO) ? current.sa_sigaction != nullptr
                                                              : current.sa_handler != SIG_DFL;
    if (!has_handler) return sig;
  }
  return io_error("every real-time signal is handled or blocked by the program; none is free for stack capture");
}

bool thread_gone(int pid, int tid) { return ::syscall(SYS_tgkill, pid, tid, 0) != 0 && errno == ESRCH; }

void sleep_briefly() {
  struct timespec ts {0, static_cast<long>(std::chrono::nanoseconds(kPollInterval).count())};
  ::nanosleep(&ts, nullptr);
}

// Claims `count` free slots (skipping any a wedged writer still holds) for `tids`; returns the slot
// index of each, -1 when none was left.
std::vector<int> assign_slots(const std::vector<int>& tids) {
  std::vector<int> index(tids.size(), -1);
  int next = 0;
  int used = 0;
  for (size_t k = 0; k < tids.size(); ++k) {
    while (next < kMaxSlots && g_slots[next].state.load(std::memory_order_acquire) == kWriting) ++next;
    if (next >= kMaxSlots) break;
    Slot& slot = g_slots[next];
    slot.state.store(kIdle, std::memory_order_relaxed);
    slot.tid.store(tids[k], std::memory_order_relaxed);
    slot.state.store(kWaiting, std::memory_order_release);
    index[k] = next;
    used = ++next;
  }
  g_slot_count.store(used, std::memory_order_release);
  return index;
}

// Gives up on a slot that has not answered; true when its stack arrived after all.
bool settle_slot(Slot& slot) {
  uint32_t expected = kWaiting;
  if (slot.state.compare_exchange_strong(expected, kAbandoned, std::memory_order_acq_rel)) return false;
  const auto grace_end = std::chrono::steady_clock::now() + kWriterGrace;
  while (slot.state.load(std::memory_order_acquire) == kWriting && std::chrono::steady_clock::now() < grace_end)
    sleep_briefly();
  return slot.state.load(std::memory_order_acquire) == kDone;
}

}  // namespace

const char* thread_stack_outcome_text(ThreadStackOutcome outcome) {
  switch (outcome) {
    case ThreadStackOutcome::kCaptured: return "captured";
    case ThreadStackOutcome::kNoAnswer: return "no answer within the time limit (blocked in the kernel?)";
    case ThreadStackOutcome::kBlocked: return "the thread blocks the capture signal";
    case ThreadStackOutcome::kExited: return "the thread exited";
    case ThreadStackOutcome::kTooMany: return "more threads than capture slots";
  }
  return "?";
}

Result<OwnThreadStacks> capture_own_thread_stacks(double time_limit_s) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto limit = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(time_limit_s > 0 ? time_limit_s : 0));
  RS_RETURN_IF_ERROR(check_unwinder_is_lock_free());
  CaptureTurn turn(t0 + limit);
  if (!turn.held()) return io_error("another in-process stack capture is still running");

  OwnThreadStacks out;
  out.pid = ::getpid();
  const int self = kernel_tid();
  // The caller's own stack first; this also warms the unwinder up (its first call may resolve
  // symbols and register tables) before any handler needs it.
  ThreadStack caller;
  caller.tid = self;
  caller.is_caller = true;
  {
    uintptr_t frames[kMaxFrames];
    bool exact = false;
    const uint32_t depth = unwind_here(frames, kMaxFrames, false, exact);
    caller.frames.assign(frames, frames + depth);
  }
  RS_ASSIGN_OR_RETURN(std::vector<Task> tasks, list_tasks());
  std::vector<Task> others;
  for (Task& t : tasks) {
    if (t.tid == self) caller.name = t.name;
    else others.push_back(std::move(t));
  }
  out.threads.push_back(std::move(caller));
  if (others.empty()) {
    out.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
  }

  RS_ASSIGN_OR_RETURN(out.signal, choose_signal(others));
  struct sigaction handler {};
  handler.sa_sigaction = on_stack_signal;
  handler.sa_flags = SA_SIGINFO | SA_RESTART;  // restartable calls resume as if nothing happened
  sigfillset(&handler.sa_mask);                // nothing nests inside the unwind
  struct sigaction previous {};
  if (::sigaction(out.signal, &handler, &previous) != 0)
    return io_error(fmt::format("sigaction({}): {}", out.signal, std::strerror(errno)));

  std::vector<int> to_signal;
  for (const Task& t : others)
    if ((t.blocked & signal_bit(out.signal)) == 0) to_signal.push_back(t.tid);
  const std::vector<int> slot_of = assign_slots(to_signal);
  std::vector<ThreadStackOutcome> outcome(to_signal.size(), ThreadStackOutcome::kNoAnswer);
  std::vector<bool> pending(to_signal.size(), false);
  for (size_t k = 0; k < to_signal.size(); ++k) {
    if (slot_of[k] < 0) {
      outcome[k] = ThreadStackOutcome::kTooMany;
    } else if (::syscall(SYS_tgkill, out.pid, to_signal[k], out.signal) != 0) {
      outcome[k] = ThreadStackOutcome::kExited;
      g_slots[slot_of[k]].state.store(kAbandoned, std::memory_order_release);
    } else {
      pending[k] = true;
    }
  }

  const auto deadline = t0 + limit;
  auto next_exit_check = std::chrono::steady_clock::now() + kExitCheckInterval;
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    const bool check_exits = now >= next_exit_check;
    if (check_exits) next_exit_check = now + kExitCheckInterval;
    size_t waiting = 0;
    for (size_t k = 0; k < to_signal.size(); ++k) {
      if (!pending[k]) continue;
      Slot& slot = g_slots[slot_of[k]];
      if (slot.state.load(std::memory_order_acquire) == kDone) {
        outcome[k] = ThreadStackOutcome::kCaptured;
        pending[k] = false;
      } else if (check_exits && thread_gone(out.pid, to_signal[k])) {
        outcome[k] = settle_slot(slot) ? ThreadStackOutcome::kCaptured : ThreadStackOutcome::kExited;
        pending[k] = false;
      } else {
        ++waiting;
      }
    }
    if (waiting == 0 || now >= deadline) break;
    sleep_briefly();
  }
  for (size_t k = 0; k < to_signal.size(); ++k)
    if (pending[k] && settle_slot(g_slots[slot_of[k]])) outcome[k] = ThreadStackOutcome::kCaptured;

  // SIG_IGN discards instances still pending in any thread (POSIX), so restoring SIG_DFL afterwards
  // cannot let a late delivery end the process.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(out.signal, &ignore, nullptr);
  ::sigaction(out.signal, &previous, nullptr);

  for (size_t k = 0; k < to_signal.size(); ++k) {
    ThreadStack ts;
    ts.tid = to_signal[k];
    ts.outcome = outcome[k];
    if (outcome[k] == ThreadStackOutcome::kCaptured) {
      const Slot& slot = g_slots[slot_of[k]];
      ts.first_is_exact = slot.first_is_exact;
      ts.frames.assign(slot.frames, slot.frames + slot.depth);
    }
    out.threads.push_back(std::move(ts));
  }
  for (const Task& t : others) {
    if (t.blocked & signal_bit(out.signal)) {
      ThreadStack ts;
      ts.tid = t.tid;
      ts.outcome = ThreadStackOutcome::kBlocked;
      out.threads.push_back(std::move(ts));
    }
  }
  for (ThreadStack& ts : out.threads)  // at most 1024 x 1024 comparisons, once per capture
    for (const Task& t : others)
      if (t.tid == ts.tid) ts.name = t.name;
  out.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace rankscope::probe
