// probe_stack_capture_test.cpp — stacks of another process, written by eu-stack or gdb, name its
// functions; a missing tool falls through to the next; no tool at all is an error.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "probe_test_util.h"
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

std::string read_text(const std::filesystem::path& file) {
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
  ASSERT_TRUE(r.ok()) << r.status().to_string() << "\n" << read_text(req.output);
  std::string text = read_text(req.output);
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
  ASSERT_TRUE(r.ok()) << r.status().to_string() << "\n" << read_text(req.output);
  EXPECT_EQ(r->tool, "gdb");
  EXPECT_NE(read_text(req.output).find("rankscope_test_child_waits_forever"), std::string::npos);
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

}  // namespace
}  // namespace rankscope::probe
