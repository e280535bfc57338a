// process_table.cpp — the production ProcessTable: kill(pid, 0) and /proc on this host.
//
// /proc/PID/task/TID/stat is "TID (comm) S ...": the state letter follows the last ')' (comm may
// itself hold spaces and parentheses). wchan is the kernel function a sleeping thread waits in,
// "0" when running.
#include "rankscope/analyzers/hang/process_table.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <system_error>

namespace rankscope::analyzers::hang {
namespace {

std::string read_small_file(const std::filesystem::path& p) {
  std::ifstream f(p);
  if (!f) return {};
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

char state_letter(const std::string& stat) {
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return 0;
  return stat[close + 2];
}

std::string clean_wchan(std::string w) {
  while (!w.empty() && (w.back() == '\n' || w.back() == ' ')) w.pop_back();
  return w == "0" ? std::string() : w;
}

}  // namespace

std::string_view os_run_state_name(OsRunState s) {
  switch (s) {
    case OsRunState::kUnknown: return "unknown";
    case OsRunState::kRunnable: return "runnable";
    case OsRunState::kStopped: return "stopped";
    case OsRunState::kTraced: return "traced";
    case OsRunState::kUninterruptible: return "uninterruptible";
    case OsRunState::kZombie: return "zombie";
  }
  return "unknown";
}

bool is_frozen(OsRunState s) {
  return s == OsRunState::kStopped || s == OsRunState::kTraced || s == OsRunState::kUninterruptible ||
         s == OsRunState::kZombie;
}

OsRunState fold_thread_states(std::string_view letters) {
  if (letters.empty()) return OsRunState::kUnknown;
  auto count = [&](char c) { return std::count(letters.begin(), letters.end(), c); };
  const long stopped = count('T'), traced = count('t'), disk = count('D'), zombie = count('Z') + count('X');
  const long n = long(letters.size());
  if (stopped + traced + disk + zombie < n) return OsRunState::kRunnable;
  if (zombie == n) return OsRunState::kZombie;
  if (disk > 0) return OsRunState::kUninterruptible;
  if (traced > 0) return OsRunState::kTraced;
  if (stopped > 0) return OsRunState::kStopped;
  return OsRunState::kZombie;  // exited threads beside a zombie leader
}

ProcessStatus read_proc_status(const std::filesystem::path& proc_root, int pid) {
  ProcessStatus out;
  const auto dir = proc_root / std::to_string(pid);
  std::error_code ec;
  std::string letters, main_wchan, disk_wchan;
  for (const auto& t : std::filesystem::directory_iterator(dir / "task", ec)) {
    const char c = state_letter(read_small_file(t.path() / "stat"));
    if (c == 0) continue;
    letters.push_back(c);
    if (c == 'D' && disk_wchan.empty()) disk_wchan = clean_wchan(read_small_file(t.path() / "wchan"));
    if (t.path().filename() == std::to_string(pid)) main_wchan = clean_wchan(read_small_file(t.path() / "wchan"));
  }
  if (letters.empty()) {
    // No task directory (very old kernels, or a fake /proc with the process file only).
    const char c = state_letter(read_small_file(dir / "stat"));
    if (c != 0) letters.push_back(c);
    main_wchan = clean_wchan(read_small_file(dir / "wchan"));
  }
  out.threads = int(letters.size());
  out.state = fold_thread_states(letters);
  out.wchan = out.state == OsRunState::kUninterruptible && !disk_wchan.empty() ? disk_wchan : main_wchan;
  return out;
}

Liveness SystemProcessTable::liveness(const std::string& host, int pid) {
  return analyzers::process_liveness(host, pid);
}

std::string SystemProcessTable::local_host() { return analyzers::this_host_name(); }

ProcessStatus SystemProcessTable::status(const std::string& host, int pid) {
  ProcessStatus s;
  s.alive = liveness(host, pid);
  if (s.alive != Liveness::kAlive) return s;
  ProcessStatus proc = read_proc_status(proc_root_, pid);
  proc.alive = s.alive;
  return proc;
}

}  // namespace rankscope::analyzers::hang
