// probe_stack_capture_test.cpp — stacks of another process, written by eu-stack or gdb, name its
// functions; a missing tool falls through to the next; no tool at all is an error. Without either
// tool, the in-process capture names the stuck function of the stuck thread (also from the
// watchdog with an empty PATH), bounds its wait on a thread that cannot answer, and leaves the
// program as it was: errno, other handlers, the signal's disposition, a handler already on the
// signal it would have picked.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "../../probe/src/symbolizer.h"
#include "../../probe/src/thread_stacks.h"
#include "../../probe/src/thread_stacks_text.h"
#include "probe_test_util.h"
#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/probe/stack_capture.h"

namespace rankscope::probe {
namespace {

__attribute__((noinline)) void rankscope_test_child_waits_forever(int ready_fd) {
  char c = 'r';
  if (::write(ready_fd, &c, 1) != 1) ::_exit(2);
  for (;;) ::pause();
}

// A child process parked in a named function; killed (by pid) when the test ends.
class ParkedChild {
 public:
  ParkedChild() {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(fds[0]);
      rankscope_test_child_waits_forever(fds[1]);
    }
    ::close(fds[1]);
    char c;
    EXPECT_EQ(::read(fds[0], &c, 1), 1);
    ::close(fds[0]);
  }
  ~ParkedChild() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

std::string read_whole_file(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ProbeStackCapture, DefaultToolNamesTheFunctions) {
  testing::ScratchDir dir;
  ParkedChild child;
  StackCaptureRequest req;
  req.pid = child.pid();
  req.output = dir.path() / "evidence" / "child.stacks.txt";
  req.header = "# test header\n";
  auto r = capture_native_stacks(req);
  ASSERT_TRUE(r.ok()) << r.status().to_string() << "\n" << read_whole_file(req.output);
  std::string text = read_whole_file(req.output);
  EXPECT_EQ(text.rfind("# test header\n", 0), 0u);
  EXPECT_NE(text.find("rankscope_test_child_waits_forever"), std::string::npos) << text;
  if (r->tool == "eu-stack") {
    EXPECT_NE(text.find("# detail: eu-stack -i -s"), std::string::npos) << text;
  }
  EXPECT_LE(r->elapsed_s, r->total_s);
  std::printf("[ stacks ] %s: symbolized stacks after %.3f s, with the detail pass %.3f s\n", r->tool.c_str(),
              r->elapsed_s, r->total_s);
}

TEST(ProbeStackCapture, FallsBackToGdbWhenTheFirstToolIsMissing) {
  testing::ScratchDir dir;
  ParkedChild child;
  StackCaptureRequest req;
  req.pid = child.pid();
  req.output = dir.path() / "gdb.stacks.txt";
  req.tools = {"rankscope-no-such-tool", "gdb"};
  req.time_limit_s = 60;
  auto r = capture_native_stacks(req);
  ASSERT_TRUE(r.ok()) << r.status().to_string() << "\n" << read_whole_file(req.output);
  EXPECT_EQ(r->tool, "gdb");
  EXPECT_NE(read_whole_file(req.output).find("rankscope_test_child_waits_forever"), std::string::npos);
}

TEST(ProbeStackCapture, NoUsableToolIsAnError) {
  testing::ScratchDir dir;
  StackCaptureRequest req;
  req.pid = ::getpid();
  req.output = dir.path() / "none.stacks.txt";
  req.tools = {"rankscope-no-such-tool"};
  auto r = capture_native_stacks(req);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("rankscope-no-such-tool: not found"), std::string::npos)
      << r.status().message();
}


// ---- in-process capture: no eu-stack, no gdb -------------------------------------------------

int this_tid() { return static_cast<int>(::syscall(SYS_gettid)); }

// A thread parked in a named, non-inlined function on a condition variable until released.
class StuckThread {
 public:
  StuckThread() {
    thread_ = std::thread([this] { rankscope_test_thread_stuck_on_condition(); });
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return tid_ != 0; });
  }
  ~StuckThread() { release(); }
  // Wakes the thread and joins it; afterwards errno_after_wake() is what its errno was on waking.
  void release() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      released_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  int tid() const { return tid_; }
  int errno_after_wake() const { return errno_after_wake_; }

  __attribute__((noinline)) void rankscope_test_thread_stuck_on_condition() {
    std::unique_lock<std::mutex> lock(mutex_);
    tid_ = this_tid();
    cv_.notify_all();
    errno = 4321;  // must survive any signal delivered while waiting
    cv_.wait(lock, [this] { return released_; });
    errno_after_wake_ = errno;
    asm volatile("" ::: "memory");  // keeps this frame a real call, not a tail call
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int tid_ = 0;
  bool released_ = false;
  int errno_after_wake_ = 0;
  std::thread thread_;
};

// The text between "TID <tid>:" and the next "TID " line.
std::string section_of_thread(const std::string& text, int tid) {
  const std::string head = "TID " + std::to_string(tid) + ":\n";
  size_t at = text.find(head);
  if (at == std::string::npos) return "";
  size_t end = text.find("\nTID ", at + head.size());
  return text.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

TEST(ProbeStackCaptureInProcess, NamesTheStuckFunctionOfTheStuckThread) {
  testing::ScratchDir dir;
  StuckThread stuck;
  StackCaptureRequest req;
  req.pid = ::getpid();
  req.output = dir.path() / "evidence" / "own.stacks.txt";
  req.header = "# test header\n";
  req.tools = {"rankscope-no-such-tool", "in-process"};
  auto r = capture_native_stacks(req);
  ASSERT_TRUE(r.ok()) << r.status().to_string() << "\n" << read_whole_file(req.output);
  EXPECT_EQ(r->tool, "in-process");
  std::string text = read_whole_file(req.output);
  EXPECT_EQ(text.rfind("# test header\n", 0), 0u) << text;
  EXPECT_NE(text.find("# tool: in-process (pid " + std::to_string(::getpid())), std::string::npos) << text;
  // libdw when it loads here, else the ELF tables (the probe_stacks_without_libdw ctest hides it).
  const std::string symbols = make_libdw_symbolizer() ? "symbols: libdw)" : "symbols: elf-symtab)";
  EXPECT_NE(text.find(symbols), std::string::npos) << text;
  EXPECT_NE(text.find("PID " + std::to_string(::getpid()) + " - process\n"), std::string::npos) << text;
  std::string thread = section_of_thread(text, stuck.tid());
  EXPECT_NE(thread.find("rankscope_test_thread_stuck_on_condition"), std::string::npos) << text;
  EXPECT_NE(thread.find("\n#0  0x"), std::string::npos) << thread;
  // The capturing thread is in the dump too, inside the capture.
  EXPECT_NE(section_of_thread(text, this_tid()).find("capture_native_stacks"), std::string::npos) << text;
  std::printf("[ stacks ] in-process: symbolized stacks after %.3f s, with the detail pass %.3f s\n", r->elapsed_s,
              r->total_s);
}

TEST(ProbeStackCaptureInProcess, OnlyForTheOwnProcess) {
  testing::ScratchDir dir;
  ParkedChild another_process;
  StackCaptureRequest only_own{another_process.pid(), dir.path() / "child.stacks.txt", "", 10.0, {"in-process"}};
  auto r = capture_native_stacks(only_own);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is not this process"), std::string::npos) << r.status().message();
}

// Sets PATH to an empty directory for one scope, as on a GPU machine without elfutils or gdb.
class EmptyPath {
 public:
  explicit EmptyPath(const std::filesystem::path& dir) {
    if (const char* old = ::getenv("PATH")) saved_ = old;
    ::setenv("PATH", dir.c_str(), 1);
  }
  ~EmptyPath() { ::setenv("PATH", saved_.c_str(), 1); }

 private:
  std::string saved_;
};

TEST(ProbeStackCaptureInProcess, WatchdogWithoutEuStackOrGdbNamesTheStuckThreadsFunction) {
  testing::ScratchDir dir;
  testing::ScratchDir empty_bin;
  EmptyPath no_tools(empty_bin.path());
  Options options = testing::test_options(dir.path());
  options.watchdog_timeout_s = 1.0;  // the watchdog reports the collective below after a second
  options.watchdog_poll_s = 0.05;
  auto probe = Probe::create(options);
  ASSERT_TRUE(probe.ok()) << probe.status().to_string();
  const format::CollectiveDesc never_completes{format::CollectiveOp::kAllReduceSum, format::DataType::kFloat32,
                                               256, 1024};
  CollectiveHandle h = (*probe)->collective_enqueue((*probe)->register_comm("dp0", 2, 0), never_completes);
  StuckThread stuck;  // the rank's "stuck" thread, parked while the collective never completes

  // Waits (without a time assertion) for the watchdog's evidence to name the stuck function.
  std::string stacks;
  std::string stacks_file;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    auto fr = format::read_flight_recorder(format::flight_recorder_path(dir.path(), 0));
    if (fr.ok() && !fr->watchdog.stacks_file.empty()) {
      stacks_file = fr->watchdog.stacks_file;
      stacks = read_whole_file(dir.path() / stacks_file);
      if (section_of_thread(stacks, stuck.tid()).find("rankscope_test_thread_stuck_on_condition") != std::string::npos)
        break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_FALSE(stacks_file.empty()) << "the watchdog recorded no stacks file";
  EXPECT_NE(stacks.find("# rankscope watchdog stacks"), std::string::npos) << stacks;
  const std::string fell_through = "# eu-stack: not found on PATH\n# gdb: not found on PATH\n# tool: in-process";
  EXPECT_NE(stacks.find(fell_through), std::string::npos) << stacks;
  EXPECT_EQ(stacks.find("# tool: eu-stack"), std::string::npos) << stacks;
  EXPECT_NE(section_of_thread(stacks, stuck.tid()).find("rankscope_test_thread_stuck_on_condition"), std::string::npos)
      << stacks;
  (*probe)->collective_complete(h);
}

// A thread in a ptrace stop takes no signal until its tracer lets it go: a thread that cannot
// answer, made on purpose. The tracer is a forked child, killed (by pid) on destruction.
class PtraceStoppedThread {
 public:
  explicit PtraceStoppedThread(int tid) {
    int ready[2];
    if (::pipe(ready) != 0) return;
    const int parent = ::getpid();
    ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);  // under Yama ptrace_scope=1 a child needs this
    tracer_ = ::fork();
    if (tracer_ == 0) {
      ::close(ready[0]);
      const bool seized = ::ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) == 0 &&
                          ::ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) == 0;
      char ok = seized ? 'y' : 'n';
      if (::write(ready[1], &ok, 1) != 1) ::_exit(2);
      for (;;) ::pause();
    }
    ::close(ready[1]);
    char ok = 'n';
    if (tracer_ > 0 && ::read(ready[0], &ok, 1) == 1 && ok == 'y') stopped_ = wait_for_trace_stop(parent, tid);
    ::close(ready[0]);
  }
  ~PtraceStoppedThread() { release(); }
  PtraceStoppedThread(const PtraceStoppedThread&) = delete;
  PtraceStoppedThread& operator=(const PtraceStoppedThread&) = delete;
  // Ends the tracer (our own child, by pid): the tracee is detached and resumes.
  void release() {
    if (tracer_ <= 0) return;
    ::kill(tracer_, SIGKILL);
    ::waitpid(tracer_, nullptr, 0);
    tracer_ = -1;
  }
  bool stopped() const { return stopped_; }

 private:
  static bool wait_for_trace_stop(int pid, int tid) {
    const std::string stat = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/stat";
    for (int i = 0; i < 5000; ++i) {
      std::string text = read_whole_file(stat);
      size_t paren = text.rfind(')');
      if (paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 't') return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }
  int tracer_ = -1;
  bool stopped_ = false;
};

std::atomic<int> g_usr1_calls{0};
std::atomic<int> g_taken_signal_calls{0};
void count_usr1(int) { g_usr1_calls.fetch_add(1); }
void count_taken_signal(int) { g_taken_signal_calls.fetch_add(1); }

TEST(ProbeStackCaptureInProcess, ManyThreadsAllAnswerAndTheProgramIsUnharmed) {
  // A handler the program already has on the signal the capture would try first, and one on SIGUSR1.
  const int taken = SIGRTMAX - 1;
  g_usr1_calls.store(0);
  g_taken_signal_calls.store(0);
  struct sigaction program_handler {};
  program_handler.sa_handler = count_taken_signal;
  struct sigaction old_taken {}, old_usr1 {};
  ASSERT_EQ(::sigaction(taken, &program_handler, &old_taken), 0);
  program_handler.sa_handler = count_usr1;
  ASSERT_EQ(::sigaction(SIGUSR1, &program_handler, &old_usr1), 0);

  // Busy threads watch their own errno and count their iterations; parked ones wait on a condition.
  constexpr int kBusy = 48;
  constexpr int kParked = 48;
  std::atomic<bool> stop{false};
  std::atomic<int> errno_changed{0};
  std::vector<std::atomic<long>> progress(kBusy);
  std::vector<std::atomic<int>> busy_tid(kBusy);
  std::vector<std::thread> busy;
  for (int i = 0; i < kBusy; ++i) {
    busy.emplace_back([&, i] {
      busy_tid[i].store(this_tid());
      errno = 777;
      while (!stop.load(std::memory_order_relaxed)) {
        if (errno != 777) errno_changed.fetch_add(1);
        progress[i].fetch_add(1, std::memory_order_relaxed);
        std::this_thread::yield();
      }
    });
  }
  std::vector<std::unique_ptr<StuckThread>> parked;
  for (int i = 0; i < kParked; ++i) parked.push_back(std::make_unique<StuckThread>());
  std::vector<int> ours;
  for (int i = 0; i < kBusy; ++i) {
    while (busy_tid[i].load() == 0) std::this_thread::yield();
    ours.push_back(busy_tid[i].load());
  }
  for (auto& p : parked) ours.push_back(p->tid());

  // The limit only bounds a thread that cannot answer (next test); these all can, so it is never met.
  auto stacks = capture_own_thread_stacks(60.0);
  ASSERT_TRUE(stacks.ok()) << stacks.status().to_string();
  EXPECT_NE(stacks->signal, taken);
  int captured = 0;
  for (const ThreadStack& t : stacks->threads) {
    captured += t.outcome == ThreadStackOutcome::kCaptured;
    if (std::find(ours.begin(), ours.end(), t.tid) == ours.end()) continue;
    EXPECT_EQ(t.outcome, ThreadStackOutcome::kCaptured) << t.tid << " " << thread_stack_outcome_text(t.outcome);
    EXPECT_FALSE(t.frames.empty()) << t.tid;
  }
  EXPECT_GE(captured, kBusy + kParked + 1);
  std::printf("[ stacks ] %zu threads, %d captured in %.3f s, signal %d\n", stacks->threads.size(), captured,
              stacks->elapsed_s, stacks->signal);

  // The program goes on: the capture's signal is back to its default, the program's handlers are
  // its own and were not called by the capture, every thread still runs, errno was kept.
  struct sigaction after {};
  ASSERT_EQ(::sigaction(stacks->signal, nullptr, &after), 0);
  EXPECT_EQ(after.sa_handler, SIG_DFL);
  EXPECT_EQ(g_taken_signal_calls.load(), 0);
  ASSERT_EQ(::sigaction(taken, nullptr, &after), 0);
  EXPECT_EQ(after.sa_handler, count_taken_signal);
  ::raise(SIGUSR1);
  EXPECT_EQ(g_usr1_calls.load(), 1);

  std::vector<long> seen(kBusy);
  for (int i = 0; i < kBusy; ++i) seen[i] = progress[i].load();
  for (int i = 0; i < kBusy; ++i)
    while (progress[i].load() == seen[i]) std::this_thread::yield();  // each busy thread moves on
  stop.store(true);
  for (std::thread& t : busy) t.join();
  EXPECT_EQ(errno_changed.load(), 0);
  for (auto& p : parked) {
    p->release();  // every parked thread wakes, its errno as it left it
    EXPECT_EQ(p->errno_after_wake(), 4321);
  }
  ::sigaction(taken, &old_taken, nullptr);
  ::sigaction(SIGUSR1, &old_usr1, nullptr);
}

TEST(ProbeStackCaptureInProcess, AThreadThatCannotAnswerDoesNotHoldTheCaptureUp) {
  StuckThread answers;
  StuckThread stopped;
  PtraceStoppedThread cannot_answer(stopped.tid());
  if (!cannot_answer.stopped()) GTEST_SKIP() << "ptrace is not permitted here: cannot make a thread that cannot answer";

  // Without a limit this would wait for ever: the stopped thread takes no signal until released.
  auto stacks = capture_own_thread_stacks(0.5);
  ASSERT_TRUE(stacks.ok()) << stacks.status().to_string();
  bool saw_stopped = false;
  for (const ThreadStack& t : stacks->threads) {
    if (t.tid != stopped.tid()) continue;
    saw_stopped = true;
    EXPECT_EQ(t.outcome, ThreadStackOutcome::kNoAnswer) << thread_stack_outcome_text(t.outcome);
  }
  EXPECT_TRUE(saw_stopped);
  std::printf("[ stacks ] a ptrace-stopped thread among %zu: capture returned after %.3f s (answer limit 0.5 s)\n",
              stacks->threads.size(), stacks->elapsed_s);

  // Its signal was still pending when the capture put SIG_DFL back; had it not been discarded, the
  // release below would end this process (a real-time signal's default action).
  cannot_answer.release();
  stopped.release();
  EXPECT_EQ(stopped.errno_after_wake(), 4321);
}

TEST(ProbeStackCaptureInProcess, TwoCapturesAtOnceBothSucceed) {
  StuckThread stuck;
  Result<OwnThreadStacks> first = internal_error("not run");
  Result<OwnThreadStacks> second = internal_error("not run");
  // 60 s is a limit never met (every thread here answers): the second capture waits for the first.
  std::thread a([&] { first = capture_own_thread_stacks(60.0); });
  std::thread b([&] { second = capture_own_thread_stacks(60.0); });
  a.join();
  b.join();
  for (const Result<OwnThreadStacks>* r : {&first, &second}) {
    ASSERT_TRUE(r->ok()) << r->status().to_string();
    bool found = false;
    for (const ThreadStack& t : (*r)->threads)
      if (t.tid == stuck.tid()) found = t.outcome == ThreadStackOutcome::kCaptured && !t.frames.empty();
    EXPECT_TRUE(found);
  }
}

__attribute__((noinline)) uintptr_t rankscope_test_named_function_address() {
  asm volatile("" ::: "memory");
  return reinterpret_cast<uintptr_t>(__builtin_return_address(0));
}

__attribute__((noinline)) uintptr_t rankscope_test_symbolized_caller() {
  uintptr_t ra = rankscope_test_named_function_address();
  asm volatile("" ::: "memory");
  return ra;
}

TEST(ProbeSymbolizer, ElfTablesNameAFunctionOfTheExecutable) {
  // A return address inside rankscope_test_symbolized_caller, a local (not exported) symbol.
  const uintptr_t inside = rankscope_test_symbolized_caller() - 1;
  auto elf = make_elf_table_symbolizer();
  FrameSymbol s = elf->symbolize(inside, false);
  EXPECT_NE(s.function.find("rankscope_test_symbolized_caller"), std::string::npos) << s.function;
  EXPECT_FALSE(s.module.empty());
  EXPECT_EQ(elf->symbolize(0x10, false).function, "");  // nothing mapped there: no name, no crash
}

TEST(ProbeSymbolizer, LibdwNamesTheFunctionAndItsSourceLine) {
  auto libdw = make_libdw_symbolizer();
  if (!libdw) GTEST_SKIP() << "libdw.so.1 cannot be loaded here (or the build had no libdwfl.h)";
  const uintptr_t inside = rankscope_test_symbolized_caller() - 1;
  FrameSymbol s = libdw->symbolize(inside, true);
  EXPECT_NE(s.function.find("rankscope_test_symbolized_caller"), std::string::npos) << s.function;
#if RANKSCOPE_TEST_HAS_DEBUG_INFO
  EXPECT_NE(s.source.find("probe_stack_capture_test.cpp:"), std::string::npos) << s.source;
#else
  EXPECT_EQ(s.source, "") << "a build without -g has no line table to read";
#endif
}

TEST(ProbeSymbolizer, DemanglesAndKeepsSymbolVersions) {
  EXPECT_EQ(demangle_symbol("_ZN9rankscope5probe3fooEv"), "rankscope::probe::foo()");
  EXPECT_EQ(demangle_symbol("__libc_start_main@@GLIBC_2.34"), "__libc_start_main@@GLIBC_2.34");
  EXPECT_EQ(demangle_symbol("_Z3barv@@V1"), "bar()@@V1");
}

// Names every address "f<hex>" in module "m" and remembers what it was asked.
class RecordingSymbolizer final : public Symbolizer {
 public:
  std::vector<uintptr_t> asked;
  const char* backend() const override { return "recording"; }
  bool has_source_lines() const override { return true; }
  FrameSymbol symbolize(uintptr_t address, bool with_source) override {
    asked.push_back(address);
    char name[32];
    std::snprintf(name, sizeof(name), "f%lx", static_cast<unsigned long>(address));
    return {name, "m", with_source ? "x.cpp:1:2" : ""};
  }
};

TEST(ProbeThreadStacksText, EuStackShapeAndReturnAddressesLookedUpInsideTheCall) {
  OwnThreadStacks stacks;
  stacks.pid = 42;
  ThreadStack caller;
  caller.tid = 42;
  caller.name = "rs-watchdog";
  caller.is_caller = true;
  caller.frames = {0x1000, 0x2000};
  ThreadStack interrupted;
  interrupted.tid = 43;
  interrupted.first_is_exact = true;
  interrupted.frames = {0x3000, 0x2000};
  ThreadStack silent;
  silent.tid = 44;
  silent.name = "cuda-EvtHandlr";
  silent.outcome = ThreadStackOutcome::kNoAnswer;
  stacks.threads = {caller, interrupted, silent};
  RecordingSymbolizer symbols;
  EXPECT_EQ(thread_stacks_text(stacks, symbols, false, 1.0),
            "PID 42 - process\n"
            "TID 42:\n"
            "# name: rs-watchdog (this thread took the capture)\n"
            "#0  0x0000000000001000 ffff - m\n"
            "#1  0x0000000000002000 f1fff - m\n"
            "TID 43:\n"
            "#0  0x0000000000003000 f3000 - m\n"
            "#1  0x0000000000002000 f1fff - m\n"
            "TID 44:\n"
            "# name: cuda-EvtHandlr\n"
            "# no stack: no answer within the time limit (blocked in the kernel?) (1.0 s)\n");
  // Each distinct address once; the interrupted instruction itself, return addresses minus one.
  EXPECT_EQ(symbols.asked, (std::vector<uintptr_t>{0xfff, 0x1fff, 0x3000}));
  std::string detail = thread_stacks_text(stacks, symbols, true, 1.0);
  EXPECT_NE(detail.find("#0  0x0000000000003000 f3000 - m\n    x.cpp:1:2\n"), std::string::npos) << detail;
}

TEST(ProbeThreadStacksText, ElfTablesAloneNameTheStuckThreadsFunction) {
  StuckThread stuck;  // as on a machine without libdw: the ELF symbol tables only
  auto stacks = capture_own_thread_stacks(60.0);
  ASSERT_TRUE(stacks.ok()) << stacks.status().to_string();
  auto elf = make_elf_table_symbolizer();
  std::string text = thread_stacks_text(*stacks, *elf, false, 60.0);
  EXPECT_NE(section_of_thread(text, stuck.tid()).find("rankscope_test_thread_stuck_on_condition"), std::string::npos)
      << text;
  EXPECT_NE(section_of_thread(text, stuck.tid()).find("pthread_cond_wait"), std::string::npos) << text;
}

}  // namespace
}  // namespace rankscope::probe
