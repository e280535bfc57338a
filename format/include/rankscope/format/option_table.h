// option_table.h — a command's options declared once: its parser, the "does this flag take a value"
// question that the exception boundary and the gathering front-end ask, and the options block of its
// --help, all read from one table.
//
// Is: Option (a flag, its short alias, the name of its value, its help), parse_options() over the
// arguments (read_options() for a command that words a refused argument itself), takes_value()/
// value_flags(), options_help(). Is not: what an option means (the command checks and uses the
// values), the usage lines and prose around the options block.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/format/status.h"

namespace rankscope::format {

struct Option {
  std::string_view flag;        // "--json"
  std::string_view value;       // the value's name in help ("FILE"); empty for a switch
  std::string_view help;        // lines separated by '\n'; the first stands beside the flag
  std::string_view alias = {};  // "-q"
};

struct ParsedOptions {
  bool help = false;                                    // --help or -h came (parsing stopped there)
  std::map<std::string_view, std::string_view> values;  // by flag; a repeated flag's last value
  std::map<std::string_view, std::vector<std::string_view>> every_value;  // by flag, each value in order
  std::set<std::string_view> switches;                  // by flag (an alias is stored as its flag)
  std::vector<std::string_view> positionals;            // in order; "-" is one (stdin)

  bool has(std::string_view flag) const { return switches.count(flag) > 0 || values.count(flag) > 0; }
  std::optional<std::string_view> value(std::string_view flag) const;
  // Each value `flag` was given, in order (a repeatable flag: --comm-kernel A --comm-kernel B); empty when none.
  std::span<const std::string_view> all_values(std::string_view flag) const;
};

// The argument parse_options() refuses: one starting with '-' that is not in the table, or a value flag
// with nothing after it.
struct RefusedArgument {
  size_t index = 0;  // in the arguments
  std::string_view arg;
  bool missing_value = false;  // a value flag, the last argument
};

// What read_options() read: every argument before the refused one (all of them when none is).
struct OptionsRead {
  ParsedOptions parsed;
  std::optional<RefusedArgument> refused;
};

// Reads `args` against `table`: a flag with a value takes the next argument whatever it is ("--json -").
// An argument starting with '-' that is not in the table, or a value flag with nothing after it, is
// "unknown option or missing value: '<arg>'" (kInvalidArgument).
Result<ParsedOptions> parse_options(std::span<const Option> table, std::span<const std::string_view> args);

// parse_options() for a command that says in its own words what is wrong ("--json needs a file name"),
// and checks what came before a refused argument first, as a loop over the arguments in order would.
OptionsRead read_options(std::span<const Option> table, std::span<const std::string_view> args);

bool takes_value(std::span<const Option> table, std::string_view flag);
// The flags that take a value, each followed by its alias where it has one ("--out", "-o").
std::vector<std::string_view> value_flags(std::span<const Option> table);

// The options block of a --help: "  --json FILE" padded to `column` (or two spaces where longer), the
// help's first line beside it, its further lines indented to `column`; one line ending in '\n' each.
std::string options_help(std::span<const Option> table, size_t column = 23);

}  // namespace rankscope::format
