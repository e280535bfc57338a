// train_job.h — test helper: run gpt2-train (alone or under mpirun) with a deadline, and clean up.
//
// Is: a child process in its own process group with output captured to a log file; waiting with a
// timeout; killing the whole group plus every rank pid the run's flight recorders name, so a hung
// or half-dead MPI job never outlives its test. Also readers of what a run leaves behind
// (metrics.jsonl losses, per-rank counters from the event streams). Is not: a test.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace e2e {

// gpt2-train's path in the build tree and mpirun's.
std::string gpt2_train_path();
std::string mpirun_path();

// Arguments for `np` ranks: ["mpirun", "-np", np, "--oversubscribe", ..., gpt2-train, args...],
// or just [gpt2-train, args...] when np == 0 (a plain single process without MPI).
std::vector<std::string> train_command(int np, const std::vector<std::string>& args);

class Job {
 public:
  // Starts argv with stdout+stderr to `log`, environment plus OMPI's run-as-root permissions.
  Job(const std::vector<std::string>& argv, const std::filesystem::path& log,
      const std::filesystem::path& run_dir);
  ~Job();  // kill_all()
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  bool running();
  // Waits up to `timeout`; returns the exit status (as from waitpid: WEXITSTATUS or 128+signal),
  // or -1 on timeout (the job is left running).
  int wait(std::chrono::seconds timeout);
  // SIGKILL to the process group and to every pid in the run's flight recorders; reaps the child.
  void kill_all();
  std::string output() const;  // the log so far

 private:
  pid_t pid_ = -1;
  int status_ = -1;
  std::filesystem::path log_;
  std::filesystem::path run_dir_;
};

// Runs to completion (or kills at the deadline); returns the exit status, -1 on timeout.
int run_to_end(const std::vector<std::string>& argv, const std::filesystem::path& run_dir,
               std::chrono::seconds timeout, std::string* output = nullptr);

// metrics.jsonl's "loss" per step, in step order.
std::vector<double> read_losses(const std::filesystem::path& run_dir);
// Sum over all steps of the named counter in rank r's event stream.
double counter_total(const std::filesystem::path& run_dir, int rank, const std::string& counter);
// A fresh directory under the build tree for one test's run.
std::filesystem::path fresh_run_dir(const std::string& name);

}  // namespace e2e
