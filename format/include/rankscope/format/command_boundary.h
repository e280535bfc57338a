// command_boundary.h — the exception boundary every command's main runs inside (hangdoctor and each
// `rankscope` subcommand).
//
// Is: run_guarded(), which runs a command and turns anything it throws (a bug an input found: an
// out-of-range index, an allocation sized by a number in a file) into exit 2 and one line on the error
// stream naming the input and what could not be done, in words: no C++ type name, no source location.
// What the command already wrote (a summary line, a verdict) is kept and flushed before that line, so
// what was found before the failure is still printed. Is not: the commands' ordinary errors (a file
// they cannot read is a Status they report themselves, also exit 2).
#pragma once

#include <cstdio>
#include <exception>
#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace rankscope::format {

// What the command was asked to read, for the message: the first argument that is neither an option
// nor the value of one of `value_flags` (flags followed by a value, e.g. "--json"); a path that exists
// wins over one that does not (an output file named before the input); "the input" when none.
std::string command_input(std::span<const std::string_view> args, std::span<const std::string_view> value_flags);

// What a caught exception means for the user, as a phrase ("it asked for more memory than there is").
std::string describe_failure(const std::exception_ptr& failure);

struct CommandBoundary {
  std::string_view tool;                            // "hangdoctor", "rankscope skew"
  std::string input;                                // command_input(...)
  std::string_view failed = "could not be analysed";  // what could not be done
  std::FILE* out = stdout;                          // flushed before the line: the partial report
  std::FILE* err = stderr;
};

// body()'s exit code, or 2 and "TOOL: INPUT: FAILED: WHY (an internal error; please report it with
// the input)" when it throws.
int run_guarded(const CommandBoundary& boundary, const std::function<int()>& body);

}  // namespace rankscope::format
