// process_table.h — "is the process that wrote this flight recorder still alive, and can it run?",
// as an interface.
//
// Is: the questions the hang classifier asks the operating system, behind a small interface so
// tests can hand it a fake process table (dynolog's fake /proc idea) and production uses kill(pid,0)
// plus /proc/PID/task/*/stat and wchan on this host. Is not: a remote probe; processes on other
// hosts are kUnknown and the classifier falls back on heartbeat age, unless the run was gathered
// (snapshot_process_table.h answers from the states each node recorded).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "process_liveness.h"

namespace rankscope::analyzers::hang {

using analyzers::Liveness;

// What the kernel says the process's threads are doing, folded into one answer.
enum class OsRunState {
  kUnknown,        // not on this host, or /proc unreadable
  kRunnable,       // at least one thread runs or sleeps normally (R, S, I): it can make progress
  kStopped,        // every thread stopped by a signal (T: SIGSTOP, SIGTSTP)
  kTraced,         // every thread held by a tracer (t: a debugger attached and stopped it)
  kUninterruptible,// no thread can run and one is in uninterruptible sleep (D: I/O, a driver)
  kZombie,         // exited, not yet reaped (Z)
};
std::string_view os_run_state_name(OsRunState s);  // "unknown", "runnable", "stopped", ...
// True for the states in which no thread of the process can run.
bool is_frozen(OsRunState s);

struct ProcessStatus {
  Liveness alive = Liveness::kUnknown;
  OsRunState state = OsRunState::kUnknown;
  std::string wchan;  // kernel function the main (or the D) thread sleeps in; "" when unknown
  int threads = 0;    // threads seen in /proc/PID/task
};

class ProcessTable {
 public:
  virtual ~ProcessTable() = default;
  virtual Liveness liveness(const std::string& host, int pid) = 0;
  virtual std::string local_host() = 0;
  // False when a writer on `host` with this boot id ("" when it recorded none) is one this table
  // cannot answer for. By default: a writer of this machine's name with another boot id (a host of
  // the same name booted another time); other hosts' writers are left to liveness() (the local
  // table says unknown, a test's fake table knows them).
  virtual bool speaks_for_boot(const std::string& host, const std::string& boot_id) {
    return host != local_host() || boot_id.empty() || boot_id == analyzers::this_boot_id();
  }
  // Liveness plus the threads' run state; the default knows only liveness.
  virtual ProcessStatus status(const std::string& host, int pid) {
    ProcessStatus s;
    s.alive = liveness(host, pid);
    return s;
  }
};

// Folds per-thread state letters (from /proc/PID/task/TID/stat: R S D T t Z X I ...) into one
// answer: frozen only when no thread can run.
OsRunState fold_thread_states(std::string_view letters);

// The real one: kill(pid, 0) and `proc_root`/PID/task/*/{stat,wchan} when `host` is this machine,
// kUnknown otherwise. `proc_root` is /proc except in tests (a fake /proc tree).
class SystemProcessTable final : public ProcessTable {
 public:
  explicit SystemProcessTable(std::filesystem::path proc_root = "/proc") : proc_root_(std::move(proc_root)) {}
  Liveness liveness(const std::string& host, int pid) override;
  std::string local_host() override;
  ProcessStatus status(const std::string& host, int pid) override;

 private:
  std::filesystem::path proc_root_;
};

// Reads `proc_root`/PID/task/*/stat and wchan with no liveness check (the part tests fake).
ProcessStatus read_proc_status(const std::filesystem::path& proc_root, int pid);

}  // namespace rankscope::analyzers::hang
