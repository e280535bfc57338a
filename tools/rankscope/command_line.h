// command_line.h — what the `rankscope` subcommands share in reading their arguments against their
// option tables (format/option_table.h), said in the words their own loops used before the tables:
// "unknown option '--x'" followed by the help, the one input path of a command that takes one.
//
// Is: unknown_option(), one_input(), refuse_first_positional(), read_missing_value_as_empty(). Is not: the tables and
// help texts (each command's file), the checks of a value (option_values.h, report_output.h), what the values mean.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "rankscope/format/option_table.h"

namespace rankscope::cli {

// Says "rankscope COMMAND: unknown option 'ARG'" and the help on stderr; returns 2, the exit code.
int unknown_option(std::string_view command, std::string_view arg, std::string_view help);

// The input path of a command that takes one, from its positionals in order.
struct OneInput {
  std::string path;  // "" when none was given
  // "-" came first: a path to the table, an unknown option to a command that reads no stdin.
  bool dash = false;
  // A second path came first (the command says it takes one).
  std::optional<std::string_view> second;
};
OneInput one_input(std::span<const std::string_view> positionals);

// For a command that takes no path: its first positional refused as an unknown option where it stands,
// `read` then holding what came before it (the command checks that first, as the loop over the
// arguments did).
void refuse_first_positional(std::span<const format::Option> table, std::span<const std::string_view> args,
                             format::OptionsRead& read);

// For a command that words "--json" left last with nothing after it as it words "--json ''" (e.g.
// "--json needs a file name"): the refused value flag read as given an empty value, so the command's
// check of that value speaks for both. An unknown option stays refused.
void read_missing_value_as_empty(std::span<const format::Option> table, format::OptionsRead& read);

}  // namespace rankscope::cli
