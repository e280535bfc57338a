// command_line.cpp — see command_line.h.
#include "command_line.h"

#include <cstdio>

namespace rankscope::cli {

int unknown_option(std::string_view command, std::string_view arg, std::string_view help) {
  std::fprintf(stderr, "rankscope %.*s: unknown option '%.*s'\n\n%.*s", int(command.size()), command.data(),
               int(arg.size()), arg.data(), int(help.size()), help.data());
  return 2;
}

OneInput one_input(std::span<const std::string_view> positionals) {
  OneInput input;
  for (const std::string_view p : positionals) {
    if (p == "-") {
      input.dash = true;
      return input;
    }
    if (!input.path.empty()) {
      input.second = p;
      return input;
    }
    input.path = p;  // an empty argument leaves it empty: the next one is the path
  }
  return input;
}

void refuse_first_positional(std::span<const format::Option> table, std::span<const std::string_view> args,
                             format::OptionsRead& read) {
  if (read.parsed.positionals.empty()) return;
  const std::string_view first = read.parsed.positionals.front();
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].data() != first.data()) continue;  // a positional is a view of its argument itself
    read = format::read_options(table, args.first(i));
    read.refused = format::RefusedArgument{i, first, false};
    return;
  }
}

void read_missing_value_as_empty(std::span<const format::Option> table, format::OptionsRead& read) {
  if (!read.refused || !read.refused->missing_value) return;
  for (const format::Option& o : table) {
    if (read.refused->arg != o.flag && read.refused->arg != o.alias) continue;
    read.parsed.values[o.flag] = std::string_view();
    read.parsed.every_value[o.flag].push_back(std::string_view());
    read.refused.reset();
    return;
  }
}

}  // namespace rankscope::cli
