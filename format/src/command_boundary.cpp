// command_boundary.cpp — anything a command throws becomes exit 2 and one line (command_boundary.h).
#include "rankscope/format/command_boundary.h"

#include <algorithm>
#include <filesystem>
#include <new>
#include <stdexcept>
#include <system_error>

namespace rankscope::format {

std::string command_input(std::span<const std::string_view> args, std::span<const std::string_view> value_flags) {
  std::string first;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (std::find(value_flags.begin(), value_flags.end(), a) != value_flags.end()) {
      ++i;  // its value is not the input
      continue;
    }
    if (a.empty() || (a[0] == '-' && a != "-")) continue;
    std::error_code ec;
    if (a == "-" || std::filesystem::exists(std::filesystem::path(a), ec)) return std::string(a);
    if (first.empty()) first = a;
  }
  return first.empty() ? std::string("the input") : first;
}

std::string describe_failure(const std::exception_ptr& failure) {
  try {
    if (failure) std::rethrow_exception(failure);
  } catch (const std::bad_alloc&) {
    return "it asked for more memory than there is";
  } catch (const std::length_error&) {
    return "it asked for more memory than there is";
  } catch (const std::filesystem::filesystem_error& e) {
    const std::string path = e.path1().empty() ? std::string() : " (" + e.path1().string() + ")";
    return "a file could not be read or written: " + e.code().message() + path;
  } catch (const std::system_error& e) {
    return "a system call failed: " + e.code().message();
  } catch (const std::out_of_range&) {
    return "a number or a name in it lies outside what the analysis handles";
  } catch (const std::exception&) {
    return "it led the analysis into a case it does not handle";
  } catch (...) {
    return "it led the analysis into a case it does not handle";
  }
  return "it led the analysis into a case it does not handle";
}

int run_guarded(const CommandBoundary& boundary, const std::function<int()>& body) {
  std::exception_ptr failure;
  try {
    return body();
  } catch (...) {
    failure = std::current_exception();
  }
  // The partial report first (a summary, a verdict already printed), then the one line.
  if (boundary.out) std::fflush(boundary.out);
  const std::string why = describe_failure(failure);
  std::fprintf(boundary.err, "%.*s: %s: %.*s: %s (an internal error; please report it with the input)\n",
               int(boundary.tool.size()), boundary.tool.data(), boundary.input.c_str(), int(boundary.failed.size()),
               boundary.failed.data(), why.c_str());
  std::fflush(boundary.err);
  return 2;
}

}  // namespace rankscope::format
