// stack_capture.cpp — eu-stack (or gdb) on culprit ranks; stacks stored as run-directory evidence.
#include "rankscope/analyzers/hang/stack_capture.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include <fmt/format.h>

#include "rankscope/format/clock.h"
#include "rankscope/format/run_directory_layout.h"

namespace rankscope::analyzers::hang {
namespace {

// Runs `command` (built from numbers only, so no quoting issue) and returns its output.
Result<std::string> run_command(const std::string& command, int& exit_status) {
  std::FILE* p = ::popen(command.c_str(), "r");
  if (!p) return io_error(fmt::format("cannot run '{}'", command));
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

bool has_frames(const std::string& text) {
  return text.find("#0") != std::string::npos || text.find("#1") != std::string::npos;
}

}  // namespace

Result<std::string> ExternalStackCollector::collect(int pid) {
  int status = 0;
  // Time limits (coreutils `timeout`, SIGKILL after the grace period): a debugger that wedges on a
  // stuck process must not wedge hangdoctor too. Same limits as the probe's watchdog capture.
  auto eu = run_command(fmt::format("timeout -k 2 10 eu-stack -p {} 2>&1", pid), status);
  if (eu.ok() && status == 0 && has_frames(*eu)) return eu;
  auto gdb = run_command(fmt::format("timeout -k 2 20 gdb -p {} -batch -nx -ex 'thread apply all bt' 2>&1", pid), status);
  if (gdb.ok() && has_frames(*gdb)) return gdb;
  return io_error(fmt::format("neither eu-stack nor gdb could read the stacks of pid {} (hint: are elfutils or gdb "
                              "installed, and may this user ptrace it?): {}",
                              pid, eu.ok() ? eu->substr(0, 200) : eu.status().message()));
}

StackCaptureReport capture_stacks(Diagnosis& d, const std::filesystem::path& run_dir, ProcessTable& processes,
                                  StackCollector& collector, int max_ranks) {
  StackCaptureReport report;
  std::vector<int> wanted = d.culprit_ranks;
  if (wanted.empty() && d.collective)  // nobody to blame: look at those stuck inside it
    for (const auto& r : d.ranks)
      if (r.waiting && r.waiting->comm == d.collective->comm && r.waiting->seq == d.collective->seq) wanted.push_back(r.rank);
  std::error_code ec;
  for (int rank : wanted) {
    if (report.captured >= max_ranks) break;
    auto it = std::find_if(d.ranks.begin(), d.ranks.end(), [&](const RankReport& r) { return r.rank == rank; });
    if (it == d.ranks.end() || it->pid <= 0) continue;
    if (processes.liveness(it->host, it->pid) != Liveness::kAlive) {
      report.notes.push_back(fmt::format("rank {}: pid {} on {} is not a live process on this host; no stacks", rank,
                                         it->pid, it->host));
      continue;
    }
    auto text = collector.collect(it->pid);
    if (!text.ok()) {
      report.notes.push_back(fmt::format("rank {}: {}", rank, text.status().message()));
      continue;
    }
    const auto file = format::evidence_path(run_dir, rank, "hangdoctor", now_unix_ns() / 1'000'000);
    std::filesystem::create_directories(file.parent_path(), ec);
    std::ofstream out(file);
    out << fmt::format("# hangdoctor --stacks: rank {} pid {} on {}\n", rank, it->pid, it->host) << *text;
    if (!out) {
      report.notes.push_back(fmt::format("rank {}: cannot write {}", rank, file.string()));
    } else {
      it->stacks_file = std::filesystem::relative(file, run_dir, ec).string();
    }
    it->stacks = std::move(*text);
    ++report.captured;
  }
  return report;
}

}  // namespace rankscope::analyzers::hang
