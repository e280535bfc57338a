// option_table_test.cpp — a command's option table: parsing, the value flags, and the help block.
#include "rankscope/format/option_table.h"

#include <gtest/gtest.h>

namespace rankscope::format {
namespace {

constexpr Option kTable[] = {
    {"--json", "FILE", "also write JSON; '-' for stdout,\nwhich then carries only the JSON"},
    {"--quiet", "", "no text report", "-q"},
    {"--torch-debug-server", "HOST:PORT", "ask a running server"},
};

Result<ParsedOptions> parse(std::initializer_list<std::string_view> args) {
  const std::vector<std::string_view> v(args);
  return parse_options(kTable, v);
}

TEST(OptionTable, ValuesSwitchesAndPositionalsInAnyOrder) {
  auto p = parse({"run", "--json", "-", "-q", "more.log", "-"});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->value("--json"), "-");  // a value may look like a flag or stdin
  EXPECT_TRUE(p->has("--quiet"));     // the alias is stored under its flag
  EXPECT_FALSE(p->has("--torch-debug-server"));
  EXPECT_EQ(p->positionals, (std::vector<std::string_view>{"run", "more.log", "-"}));
  EXPECT_FALSE(p->help);
}

TEST(OptionTable, AnUnknownFlagOrAMissingValueIsNamed) {
  auto unknown = parse({"run", "--jsn", "x"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(), "unknown option or missing value: '--jsn'");
  auto missing = parse({"run", "--json"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "unknown option or missing value: '--json'");
}

TEST(OptionTable, ARepeatedFlagKeepsEveryValueInOrder) {
  auto p = parse({"--json", "a", "run", "--json", "b"});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->value("--json"), "b");  // the last one is the flag's value
  const auto all = p->all_values("--json");
  EXPECT_EQ(std::vector<std::string_view>(all.begin(), all.end()), (std::vector<std::string_view>{"a", "b"}));
  EXPECT_TRUE(p->all_values("--torch-debug-server").empty());
}

TEST(OptionTable, ReadOptionsNamesTheRefusedArgumentAndKeepsWhatCameBefore) {
  const std::vector<std::string_view> unknown = {"run", "--json", "x", "--jsn", "more"};
  const OptionsRead u = read_options(kTable, unknown);
  ASSERT_TRUE(u.refused);
  EXPECT_EQ(u.refused->index, 3u);
  EXPECT_EQ(u.refused->arg, "--jsn");
  EXPECT_FALSE(u.refused->missing_value);
  EXPECT_EQ(u.parsed.value("--json"), "x");
  EXPECT_EQ(u.parsed.positionals, (std::vector<std::string_view>{"run"}));  // not "more", after it

  const std::vector<std::string_view> missing = {"run", "-q", "--json"};
  const OptionsRead m = read_options(kTable, missing);
  ASSERT_TRUE(m.refused);
  EXPECT_EQ(m.refused->index, 2u);
  EXPECT_TRUE(m.refused->missing_value);
  EXPECT_TRUE(m.parsed.has("--quiet"));

  const std::vector<std::string_view> fine = {"run", "--json", "-"};
  EXPECT_FALSE(read_options(kTable, fine).refused);
}

TEST(OptionTable, HelpStopsParsingWhereItStands) {
  auto p = parse({"run", "-h", "--bogus"});
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->help);
  EXPECT_FALSE(parse({"--bogus", "--help"}).ok());  // what comes before it is still read
}

TEST(OptionTable, ValueFlagsComeFromTheTable) {
  EXPECT_TRUE(takes_value(kTable, "--json"));
  EXPECT_FALSE(takes_value(kTable, "--quiet"));
  EXPECT_FALSE(takes_value(kTable, "-q"));
  EXPECT_FALSE(takes_value(kTable, "--other"));
  EXPECT_EQ(value_flags(kTable), (std::vector<std::string_view>{"--json", "--torch-debug-server"}));
  constexpr Option kWithAlias[] = {{"--out", "DIR", "where", "-o"}, {"--quiet", "", "no text", "-q"}};
  EXPECT_EQ(value_flags(kWithAlias), (std::vector<std::string_view>{"--out", "-o"}));  // "-o X": X is no input
}

TEST(OptionTable, HelpBlockAlignsEachFlagsTextAtOneColumn) {
  EXPECT_EQ(options_help(kTable),
            "  --json FILE          also write JSON; '-' for stdout,\n"
            "                       which then carries only the JSON\n"
            "  --quiet, -q          no text report\n"
            "  --torch-debug-server HOST:PORT  ask a running server\n");
}

}  // namespace
}  // namespace rankscope::format
