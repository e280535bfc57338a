// command_boundary_test.cpp — the exception boundary every command's main runs inside
// (format/command_boundary.h): what was printed stays, then one line naming the input, exit 2.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "rankscope/format/command_boundary.h"

namespace rankscope::format {
namespace {

std::string drain(std::FILE* f) {
  std::string text;
  std::rewind(f);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
  return text;
}

struct Guarded {
  int code = -1;
  std::string out, err;
};

Guarded guarded(const std::function<int(std::FILE*)>& body, std::string input = "runs/x") {
  CommandBoundary b{"rankscope skew", std::move(input), "could not be analysed", std::tmpfile(), std::tmpfile()};
  Guarded g;
  g.code = run_guarded(b, [&] { return body(b.out); });
  g.out = drain(b.out);
  g.err = drain(b.err);
  return g;
}

// No C++ in a message for the user: no type names, no library function names, no source location.
void expect_plain(const std::string& line) {
  for (const char* word : {"std::", "map::at", "vector::", "basic_string", ".cpp", ".h:", "what()", "bad_alloc",
                           "out_of_range", "terminate"})
    EXPECT_EQ(line.find(word), std::string::npos) << word << " in: " << line;
}

TEST(CommandBoundary, TheBodysExitCodeWhenNothingIsThrown) {
  auto g = guarded([](std::FILE* out) {
    std::fputs("fine\n", out);
    return 1;
  });
  EXPECT_EQ(g.code, 1);
  EXPECT_EQ(g.out, "fine\n");
  EXPECT_EQ(g.err, "");
}

TEST(CommandBoundary, AThrowAfterAPartialReportKeepsItAndAddsOneLine) {
  auto g = guarded([](std::FILE* out) -> int {
    std::fputs("rank 3 is 40% slower than the median at forward/block2/mlp\n", out);  // found before the throw
    std::vector<int> v;
    return v.at(7);  // std::out_of_range from inside the analysis
  });
  EXPECT_EQ(g.code, 2);
  EXPECT_EQ(g.out, "rank 3 is 40% slower than the median at forward/block2/mlp\n");
  EXPECT_EQ(g.err,
            "rankscope skew: runs/x: could not be analysed: a number or a name in it lies outside what the analysis "
            "handles (an internal error; please report it with the input)\n");
  expect_plain(g.err);
}

TEST(CommandBoundary, EveryKindOfThrowIsOnePlainLine) {
  const std::vector<std::function<void()>> throws = {
      [] { throw std::bad_alloc(); },
      [] { throw std::length_error("vector::_M_default_append"); },
      [] { throw std::out_of_range("map::at"); },
      [] { throw std::invalid_argument("stoi"); },
      [] { throw std::runtime_error("basic_string::_M_create"); },
      [] { throw std::system_error(std::make_error_code(std::errc::too_many_files_open), "std::thread"); },
      [] { throw std::filesystem::filesystem_error("directory_iterator::directory_iterator", "runs/x/evidence",
                                                   std::make_error_code(std::errc::permission_denied)); },
      [] { throw 42; },
  };
  for (const auto& t : throws) {
    auto g = guarded([&](std::FILE*) -> int {
      t();
      return 0;
    });
    EXPECT_EQ(g.code, 2);
    EXPECT_EQ(g.out, "");
    ASSERT_FALSE(g.err.empty());
    EXPECT_EQ(g.err.find('\n'), g.err.size() - 1) << g.err;  // one line
    EXPECT_EQ(g.err.rfind("rankscope skew: runs/x: could not be analysed: ", 0), 0u) << g.err;
    expect_plain(g.err);
  }
  auto oom = guarded([](std::FILE*) -> int { throw std::bad_alloc(); });
  EXPECT_NE(oom.err.find("it asked for more memory than there is"), std::string::npos) << oom.err;
  auto denied = guarded([](std::FILE*) -> int {
    throw std::filesystem::filesystem_error("x", "runs/x/evidence", std::make_error_code(std::errc::permission_denied));
  });
  EXPECT_NE(denied.err.find("Permission denied (runs/x/evidence)"), std::string::npos) << denied.err;
}

TEST(CommandBoundary, TheInputIsThePathNotAnOptionOrItsValue) {
  const auto here = std::filesystem::temp_directory_path().string();
  const std::string_view flags[] = {"--json", "--warmup-steps"};
  auto input = [&](std::vector<std::string_view> args) { return command_input(args, flags); };
  EXPECT_EQ(input({"--json", "out.json", "runs/x"}), "runs/x");
  EXPECT_EQ(input({"--warmup-steps", "3", "--quiet", "runs/x"}), "runs/x");
  EXPECT_EQ(input({"-"}), "-");
  EXPECT_EQ(input({}), "the input");
  EXPECT_EQ(input({"--quiet"}), "the input");
  // A path that exists wins over a word that names nothing (an output named before the input).
  EXPECT_EQ(input({"report.html", here}), here);
}

}  // namespace
}  // namespace rankscope::format
