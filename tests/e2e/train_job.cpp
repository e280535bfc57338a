// train_job.cpp — fork/exec with a process group, deadlines, and cleanup of every rank.
#include "train_job.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "rankscope/format/event_stream.h"
#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/run_directory_layout.h"

namespace e2e {

std::string gpt2_train_path() { return std::string(RANKSCOPE_BINARY_DIR) + "/bin/gpt2-train"; }
std::string mpirun_path() { return RANKSCOPE_TEST_MPIRUN; }

std::vector<std::string> train_command(int np, const std::vector<std::string>& args) {
  std::vector<std::string> argv;
  if (np > 0) {
    // --bind-to none: ranks share the 2 cores of CI instead of being pinned onto the same one.
    argv = {mpirun_path(), "-np", std::to_string(np), "--oversubscribe", "--bind-to", "none"};
  }
  argv.push_back(gpt2_train_path());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

Job::Job(const std::vector<std::string>& argv, const std::filesystem::path& log,
         const std::filesystem::path& run_dir)
    : log_(log), run_dir_(run_dir) {
  pid_ = fork();
  if (pid_ == 0) {
    setpgid(0, 0);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
    // One compute thread per rank: several ranks share two cores.
    setenv("OMP_NUM_THREADS", "1", 0);
    setenv("OPENBLAS_NUM_THREADS", "1", 0);
    std::vector<char*> cargv;
    for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  setpgid(pid_, pid_);
}

Job::~Job() { kill_all(); }

bool Job::running() {
  if (pid_ <= 0) return false;
  int st = 0;
  pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    pid_ = -1;
    return false;
  }
  return true;
}

int Job::wait(std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (running()) {
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return status_;
}

void Job::kill_all() {
  if (pid_ > 0) ::kill(-pid_, SIGKILL);
  // Ranks may have left mpirun's process group; their pids are in the flight recorders.
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir_, ec)) {
    if (entry.path().extension() != ".flight") continue;
    auto snap = rankscope::format::read_flight_recorder(entry.path());
    if (snap.ok() && snap->pid > 0 && snap->pid != getpid()) ::kill(snap->pid, SIGKILL);
  }
  if (pid_ > 0) {
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
  }
}

std::string Job::output() const {
  std::ifstream in(log_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int run_to_end(const std::vector<std::string>& argv, const std::filesystem::path& run_dir,
               std::chrono::seconds timeout, std::string* output) {
  std::filesystem::create_directories(run_dir);
  Job job(argv, run_dir / "job.log", run_dir);
  int code = job.wait(timeout);
  if (code < 0) job.kill_all();
  if (output) *output = job.output();
  return code;
}

std::vector<double> read_losses(const std::filesystem::path& run_dir) {
  std::vector<double> losses;
  std::ifstream in(run_dir / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.contains("loss")) losses.push_back(j["loss"].get<double>());
  }
  return losses;
}

double counter_total(const std::filesystem::path& run_dir, int rank, const std::string& counter) {
  auto stream = rankscope::format::read_event_stream(rankscope::format::event_stream_path(run_dir, rank));
  if (!stream.ok()) return -1;
  auto id = stream->find_name(counter);
  if (!id) return 0;
  double total = 0;
  for (const auto& step : stream->steps)
    for (const auto& c : step.counters)
      if (c.name_id == *id) total += c.value;
  return total;
}

std::filesystem::path fresh_run_dir(const std::string& name) {
  auto dir = std::filesystem::path(RANKSCOPE_BINARY_DIR) / "e2e-runs" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace e2e
