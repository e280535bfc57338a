// local_ranks.cpp — see local_ranks.h.
#include "rankscope/stacks/local_ranks.h"

#include <sys/wait.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

namespace rankscope::stacks {
namespace {

namespace fs = std::filesystem;

struct ProcessEnv {
  int pid = 0;
  int ppid = 0;
  std::map<std::string, std::string> env;
};

bool parse_int(std::string_view s, int& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

// The parent pid from /proc/<pid>/stat ("pid (comm) state ppid ..."; comm may hold spaces and ')').
int parent_of(const fs::path& dir) {
  std::ifstream in(dir / "stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 1));
  std::string state;
  int ppid = 0;
  rest >> state >> ppid;
  return ppid;
}

// A process's environment when it names a rank (RANK and WORLD_SIZE); nullopt otherwise or unreadable.
std::optional<ProcessEnv> rank_process(const fs::path& dir, int pid) {
  std::ifstream in(dir / "environ", std::ios::binary);
  if (!in) return std::nullopt;
  ProcessEnv p;
  p.pid = pid;
  std::string var;
  while (std::getline(in, var, '\0')) {
    const size_t eq = var.find('=');
    if (eq != std::string::npos) p.env[var.substr(0, eq)] = var.substr(eq + 1);
  }
  if (!p.env.count("RANK") || !p.env.count("WORLD_SIZE")) return std::nullopt;
  p.ppid = parent_of(dir);
  return p;
}

std::string job_of(const ProcessEnv& p) {
  if (auto it = p.env.find("TORCHELASTIC_RUN_ID"); it != p.env.end() && !it->second.empty()) return it->second;
  auto at = [&](const char* k) { auto it = p.env.find(k); return it == p.env.end() ? std::string("?") : it->second; };
  return at("MASTER_ADDR") + ":" + at("MASTER_PORT");
}

// The command's output and exit status (-1 when it could not be started).
std::pair<std::string, int> run_command(const std::string& command) {
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return {"", -1};
  std::string out;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = ::pclose(pipe);
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string first_line(const std::string& text) {
  const size_t start = text.find_first_not_of(" \n");
  if (start == std::string::npos) return "";
  return text.substr(start, text.find('\n', start) - start);
}

}  // namespace

Result<std::vector<LocalRank>> find_local_ranks(const fs::path& proc_root) {
  std::error_code ec;
  std::map<int, ProcessEnv> by_pid;
  for (const auto& e : fs::directory_iterator(proc_root, ec)) {
    int pid = 0;
    if (!parse_int(e.path().filename().string(), pid)) continue;
    if (auto p = rank_process(e.path(), pid)) by_pid[pid] = std::move(*p);
  }
  if (ec) return io_error(fmt::format("{}: cannot list processes: {}", proc_root.string(), ec.message()));
  std::map<std::string, std::vector<LocalRank>> jobs;
  for (const auto& [pid, p] : by_pid) {
    // A DataLoader worker (or any child) inherits its rank's environment: the rank is the process
    // whose parent is not a process of the same rank.
    if (auto parent = by_pid.find(p.ppid); parent != by_pid.end() && parent->second.env.at("RANK") == p.env.at("RANK"))
      continue;
    LocalRank r;
    r.pid = pid;
    r.job = job_of(p);
    if (!parse_int(p.env.at("RANK"), r.rank) || !parse_int(p.env.at("WORLD_SIZE"), r.world_size) || r.rank < 0) continue;
    jobs[r.job].push_back(r);
  }
  if (jobs.empty())
    return not_found("no process of a PyTorch job on this machine (none whose environment holds RANK and WORLD_SIZE "
                     "that this user can read; run hangdoctor as the job's user, on a node of the job)");
  if (jobs.size() > 1) {
    std::string names;
    for (const auto& [job, ranks] : jobs) names += fmt::format("{}{} ({} rank{})", names.empty() ? "" : ", ", job, ranks.size(), ranks.size() == 1 ? "" : "s");
    return invalid_argument(fmt::format("{} PyTorch jobs run on this machine: {}; give the job's files instead", jobs.size(), names));
  }
  auto ranks = std::move(jobs.begin()->second);
  std::sort(ranks.begin(), ranks.end(), [](const LocalRank& a, const LocalRank& b) { return a.rank < b.rank; });
  return ranks;
}

Result<StackImport> sample_with_py_spy(const std::vector<LocalRank>& ranks, int rounds, double interval_s,
                                       const std::string& py_spy) {
  StackImport out;
  std::vector<std::pair<std::string, int>> results(ranks.size());
  int taken = 0;
  for (int round = 0; round < std::max(1, rounds); ++round) {
    if (round > 0) std::this_thread::sleep_for(std::chrono::milliseconds(int64_t(interval_s * 1000)));
    // Every rank at once: a round is one moment of the job.
    std::vector<std::thread> workers;
    for (size_t i = 0; i < ranks.size(); ++i)
      workers.emplace_back([&, i] {
        results[i] = run_command(fmt::format("{} dump --nonblocking --pid {} 2>&1", shell_quote(py_spy), ranks[i].pid));
      });
    for (auto& w : workers) w.join();
    for (size_t i = 0; i < ranks.size(); ++i) {
      const auto& [text, status] = results[i];
      if (status == 127) return not_found(fmt::format("{}: not found (pip install py-spy, or put it on PATH)", py_spy));
      const std::string source = fmt::format("py-spy dump --pid {} (rank {}, round {})", ranks[i].pid, ranks[i].rank, round + 1);
      RankStacks& rs = out.ranks[ranks[i].rank];
      rs.rank = ranks[i].rank;
      const size_t before = rs.snapshots.size();
      if (status == 0) parse_stack_text(text, source, rs.snapshots);
      if (rs.snapshots.size() == before)
        out.problems.push_back(fmt::format("py-spy could not read rank {} (pid {}): {}", ranks[i].rank, ranks[i].pid,
                                           first_line(text).empty() ? "no output" : first_line(text)));
      else
        ++taken;
    }
  }
  std::erase_if(out.ranks, [](const auto& kv) { return kv.second.snapshots.empty(); });
  if (out.ranks.empty())
    return io_error(fmt::format("py-spy read no rank{}", out.problems.empty() ? "" : ": " + out.problems.front()));
  out.world_size = ranks.front().world_size;
  out.summary = fmt::format("took the stacks of {} local rank{} of job {} with py-spy: {} snapshot{} in {} round{} {:.0f} s apart",
                            out.ranks.size(), out.ranks.size() == 1 ? "" : "s", ranks.front().job, taken, taken == 1 ? "" : "s",
                            std::max(1, rounds), rounds == 1 ? "" : "s", interval_s);
  return out;
}

}  // namespace rankscope::stacks
