// stack_capture.cpp — the tools of stack_capture.h tried in order: posix_spawn of eu-stack / gdb
// with a time limit and output to a file, then the in-process capture for the caller's own process.
#include "rankscope/probe/stack_capture.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "symbolizer.h"
#include "thread_stacks.h"
#include "thread_stacks_text.h"

extern char** environ;

namespace rankscope::probe {
namespace {

constexpr const char* kInProcessTool = "in-process";

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string find_on_path(const std::string& tool) {
  if (tool.find('/') != std::string::npos) return ::access(tool.c_str(), X_OK) == 0 ? tool : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t colon = dirs.find(':', start);
    std::string dir = dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (!dir.empty()) {
      std::string candidate = dir + "/" + tool;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return "";
}

std::vector<std::string> tool_argv(const std::string& tool, const std::string& exe, int pid) {
  std::string base = std::filesystem::path(tool).filename().string();
  std::string p = std::to_string(pid);
  if (base == "gdb") {
    return {exe, "-p", p, "-batch", "-nx", "-ex", "set pagination off", "-ex", "thread apply all bt"};
  }
  // Plain eu-stack names functions from the symbol tables in tens of milliseconds even with the
  // CUDA libraries mapped; the DWARF pass (inlined frames, source lines) comes after, as detail.
  return {exe, "-p", p};
}

std::vector<std::string> detail_argv(const std::string& exe, int pid) {
  return {exe, "-i", "-s", "-p", std::to_string(pid)};
}

bool append_text(const std::filesystem::path& file, const std::string& text) {
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

off_t output_bytes(const std::filesystem::path& file) {
  struct stat st {};
  return ::stat(file.c_str(), &st) == 0 ? st.st_size : 0;
}

// Runs one tool; returns its exit status, or a Status when it could not run or ran too long.
Result<int> run_tool(const std::vector<std::string>& argv, const std::filesystem::path& output,
                     double time_limit_s) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output.c_str(), O_WRONLY | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t child = -1;
  int rc = ::posix_spawn(&child, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return io_error(fmt::format("posix_spawn {}: {}", argv[0], std::strerror(rc)));

  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(time_limit_s);
  int status = 0;
  for (;;) {
    pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) break;
    if (done < 0 && errno != EINTR) return io_error(fmt::format("waitpid {}: {}", argv[0], std::strerror(errno)));
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(child, SIGKILL);  // our own child, by pid
      ::waitpid(child, &status, 0);
      return io_error(fmt::format("{} exceeded its {:.1f} s limit and was killed", argv[0], time_limit_s));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return io_error(fmt::format("{} ended by signal {}", argv[0], WIFSIGNALED(status) ? WTERMSIG(status) : -1));
}

// No program and no ptrace: this process's threads unwind themselves (thread_stacks.h).
Result<StackCaptureResult> capture_in_process(const StackCaptureRequest& request,
                                              std::chrono::steady_clock::time_point t0) {
  if (request.pid != ::getpid()) {
    return invalid_argument(fmt::format("pid {} is not this process (pid {})", request.pid, ::getpid()));
  }
  RS_ASSIGN_OR_RETURN(OwnThreadStacks stacks, capture_own_thread_stacks(request.thread_answer_limit_s));
  std::unique_ptr<Symbolizer> symbolizer = make_own_process_symbolizer();
  size_t answered = 0;
  for (const ThreadStack& t : stacks.threads) answered += t.outcome == ThreadStackOutcome::kCaptured;
  std::string text = fmt::format(
      "# tool: {} (pid {}; signal {}; {} of {} threads answered in {:.3f} s; symbols: {})\n", kInProcessTool,
      stacks.pid, stacks.signal, answered, stacks.threads.size(), stacks.elapsed_s, symbolizer->backend());
  text += thread_stacks_text(stacks, *symbolizer, false, request.thread_answer_limit_s);
  if (!append_text(request.output, text)) {
    return io_error(fmt::format("cannot write {}: {}", request.output.string(), std::strerror(errno)));
  }
  StackCaptureResult result;
  result.tool = kInProcessTool;
  result.elapsed_s = seconds_since(t0);
  if (request.detail && symbolizer->has_source_lines()) {
    std::string detail = fmt::format("\n# detail: {} with source lines ({})\n", kInProcessTool, symbolizer->backend());
    detail += thread_stacks_text(stacks, *symbolizer, true, request.thread_answer_limit_s);
    append_text(request.output, detail);
  }
  result.total_s = seconds_since(t0);
  return result;
}

}  // namespace

Result<StackCaptureResult> capture_native_stacks(const StackCaptureRequest& request) {
  auto t0 = std::chrono::steady_clock::now();
  std::error_code ec;
  if (request.output.has_parent_path()) std::filesystem::create_directories(request.output.parent_path(), ec);
  if (!append_text(request.output, request.header)) {
    return io_error(fmt::format("cannot write {}: {}", request.output.string(), std::strerror(errno)));
  }
  // Under Yama ptrace_scope=1 a child may not attach to its parent unless the parent allows it.
  // Allowing any tracer is the documented opt-in for crash handlers; it changes nothing for root.
  if (request.pid == ::getpid()) ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);

  std::vector<std::string> tools = request.tools;
  if (tools.empty()) tools = {"eu-stack", "gdb", kInProcessTool};
  std::string tried;
  for (const std::string& tool : tools) {
    if (tool == kInProcessTool) {
      Result<StackCaptureResult> own = capture_in_process(request, t0);
      if (own.ok()) return own;
      append_text(request.output, fmt::format("\n# {} failed: {}\n", tool, own.status().message()));
      tried += fmt::format("{}: {}; ", tool, own.status().message());
      continue;
    }
    std::string exe = find_on_path(tool);
    if (exe.empty()) {
      tried += fmt::format("{}: not found; ", tool);
      append_text(request.output, fmt::format("# {}: not found on PATH\n", tool));  // why a later tool wrote
      continue;
    }
    off_t before = output_bytes(request.output);
    append_text(request.output, fmt::format("# tool: {} (pid {})\n", tool, request.pid));
    Result<int> rc = run_tool(tool_argv(tool, exe, request.pid), request.output, request.time_limit_s);
    // eu-stack exits 1 when some frames could not be unwound but others were shown: keep that.
    bool produced = output_bytes(request.output) > before + 64;
    if (rc.ok() && (*rc == 0 || (*rc == 1 && produced))) {
      StackCaptureResult result;
      result.tool = tool;
      result.elapsed_s = seconds_since(t0);
      if (request.detail && std::filesystem::path(tool).filename() == "eu-stack") {
        append_text(request.output, "\n# detail: eu-stack -i -s (inlined frames, source lines)\n");
        Result<int> detail = run_tool(detail_argv(exe, request.pid), request.output, request.time_limit_s);
        if (!detail.ok()) append_text(request.output, fmt::format("\n# detail pass failed: {}\n", detail.status().message()));
      }
      result.total_s = seconds_since(t0);
      return result;
    }
    std::string why = rc.ok() ? fmt::format("exit status {}", *rc) : rc.status().message();
    append_text(request.output, fmt::format("\n# {} failed: {}\n", tool, why));
    tried += fmt::format("{}: {}; ", tool, why);
  }
  return io_error(fmt::format("no stack tool succeeded for pid {} ({})", request.pid, tried));
}

}  // namespace rankscope::probe
