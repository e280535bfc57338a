// option_table.cpp — see option_table.h.
#include "rankscope/format/option_table.h"

namespace rankscope::format {
namespace {

const Option* find_option(std::span<const Option> table, std::string_view arg) {
  for (const Option& o : table)
    if (arg == o.flag || (!o.alias.empty() && arg == o.alias)) return &o;
  return nullptr;
}

}  // namespace

std::optional<std::string_view> ParsedOptions::value(std::string_view flag) const {
  auto it = values.find(flag);
  if (it == values.end()) return std::nullopt;
  return it->second;
}

std::span<const std::string_view> ParsedOptions::all_values(std::string_view flag) const {
  auto it = every_value.find(flag);
  if (it == every_value.end()) return {};
  return it->second;
}

OptionsRead read_options(std::span<const Option> table, std::span<const std::string_view> args) {
  OptionsRead read;
  ParsedOptions& parsed = read.parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (a == "--help" || a == "-h") {
      parsed.help = true;
      return read;
    }
    const Option* o = find_option(table, a);
    const bool looks_like_flag = a.size() > 1 && a[0] == '-';
    if (!o && !looks_like_flag) {
      parsed.positionals.push_back(a);
      continue;
    }
    if (!o || (!o->value.empty() && i + 1 >= args.size())) {
      read.refused = RefusedArgument{i, a, o != nullptr};
      return read;
    }
    if (o->value.empty()) {
      parsed.switches.insert(o->flag);
      continue;
    }
    parsed.values[o->flag] = args[++i];
    parsed.every_value[o->flag].push_back(args[i]);
  }
  return read;
}

Result<ParsedOptions> parse_options(std::span<const Option> table, std::span<const std::string_view> args) {
  OptionsRead read = read_options(table, args);
  if (read.refused)
    return invalid_argument("unknown option or missing value: '" + std::string(read.refused->arg) + "'");
  return std::move(read.parsed);
}

bool takes_value(std::span<const Option> table, std::string_view flag) {
  const Option* o = find_option(table, flag);
  return o && !o->value.empty();
}

std::vector<std::string_view> value_flags(std::span<const Option> table) {
  std::vector<std::string_view> flags;
  for (const Option& o : table) {
    if (o.value.empty()) continue;
    flags.push_back(o.flag);
    if (!o.alias.empty()) flags.push_back(o.alias);
  }
  return flags;
}

std::string options_help(std::span<const Option> table, size_t column) {
  std::string out;
  for (const Option& o : table) {
    std::string head = "  " + std::string(o.flag);
    if (!o.alias.empty()) head += ", " + std::string(o.alias);
    if (!o.value.empty()) head += " " + std::string(o.value);
    head += head.size() + 2 <= column ? std::string(column - head.size(), ' ') : std::string(2, ' ');
    std::string_view help = o.help;
    bool first = true;
    while (true) {
      const size_t nl = help.find('\n');
      out += (first ? head : std::string(column, ' ')) + std::string(help.substr(0, nl)) + "\n";
      first = false;
      if (nl == std::string_view::npos) break;
      help.remove_prefix(nl + 1);
    }
  }
  return out;
}

}  // namespace rankscope::format
