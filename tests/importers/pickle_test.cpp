// pickle_test.cpp — the pickle reader on PyTorch-style bytes (our writer), on bytes CPython's pickle
// module wrote (checked-in fixtures, protocols 2 and 4), and on files it must refuse.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "rankscope/pickle/unpickler.h"
#include "torch_style_pickler.h"

namespace rankscope::pickle {
namespace {

using namespace testing;  // NOLINT

std::vector<uint8_t> fixture(const std::string& name) {
  std::ifstream in(std::string(RANKSCOPE_SOURCE_DIR) + "/tests/fixtures/torch_fr/" + name, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(Pickle, TorchStyleRoundTripKeepsEveryKind) {
  Value frame = dict({{"name", str("forward")}, {"filename", str("train.py")}, {"line", num(42)}});
  Value root = dict({{"version", str("2.10")},
                     {"neg", num(-1)},
                     {"mid", num(300)},
                     {"big", num(1732400000000000123)},
                     {"i32", num(100000)},
                     {"f", Value::floating(1.25)},
                     {"t", Value::boolean(true)},
                     {"n", Value()},
                     {"pg", tuple({str("1"), str("tp0")})},
                     {"frames", list({frame, frame})}});
  const auto bytes = TorchStylePickler().write(root);
  ASSERT_EQ(bytes[0], 0x80);
  ASSERT_EQ(bytes[1], 0x02);
  auto r = unpickle(bytes);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Value& v = r->root;
  EXPECT_FALSE(r->truncated);
  EXPECT_EQ(r->protocol, 2);
  EXPECT_EQ(*v.find("version")->as_string(), "2.10");
  EXPECT_EQ(*v.find("neg")->as_int(), -1);
  EXPECT_EQ(*v.find("mid")->as_int(), 300);
  EXPECT_EQ(*v.find("big")->as_int(), 1732400000000000123);
  EXPECT_EQ(*v.find("i32")->as_int(), 100000);
  EXPECT_DOUBLE_EQ(*v.find("f")->as_double(), 1.25);
  EXPECT_EQ(*v.find("t")->as_bool(), true);
  EXPECT_TRUE(v.find("n")->is_none());
  ASSERT_EQ(v.find("pg")->kind(), Kind::kTuple);
  EXPECT_EQ(*v.find("pg")->items()[1].as_string(), "tp0");
  const auto& frames = v.find("frames")->items();
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_TRUE(frames[0].same_node(frames[1])) << "a shared frame dict is one memo entry";
  EXPECT_EQ(*frames[1].find("line")->as_int(), 42);
}

TEST(Pickle, MemoIdsPastTwoFiftyFiveUseTheLongForms) {
  Value l = Value::container(Kind::kList);
  for (int i = 0; i < 600; ++i) list_push(l, str("s" + std::to_string(i)));
  for (int i = 0; i < 600; ++i) list_push(l, str("s" + std::to_string(i)));  // BINGET / LONG_BINGET
  const auto bytes = TorchStylePickler().write(l);
  ASSERT_NE(std::find(bytes.begin(), bytes.end(), uint8_t('r')), bytes.end());
  auto r = unpickle(bytes);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->root.items().size(), 1200u);
  EXPECT_EQ(*r->root.items()[1100].as_string(), "s500");
}

void expect_stdlib_dump(const std::string& name, int protocol) {
  auto r = unpickle(fixture(name));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->protocol, protocol);
  const Value& v = r->root;
  EXPECT_EQ(*v.find("version")->as_string(), "2.10");
  EXPECT_EQ(*v.find("pg_config")->find("1")->find("ranks")->as_string(), "[0, 1]");
  EXPECT_EQ(*v.find("pg_status")->find("1")->find("last_started_collective")->as_int(), -1);
  const auto& entries = v.find("entries")->items();
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(*entries[2].find("collective_seq_id")->as_int(), 3);
  EXPECT_EQ(*entries[2].find("time_created_ns")->as_int(), 1732400000000000003);
  EXPECT_EQ(*entries[2].find("state")->as_string(), "scheduled");
  EXPECT_DOUBLE_EQ(*entries[0].find("duration_ms")->as_double(), 1.5);
  EXPECT_TRUE(entries[2].find("time_discovered_completed_ns")->is_none());
  EXPECT_EQ(*entries[1].find("retired")->as_bool(), true);
  EXPECT_EQ(*entries[0].find("process_group")->items()[1].as_string(), "tp0");
  EXPECT_EQ(*entries[1].find("input_sizes")->items()[0].items()[1].as_int(), 768);
  EXPECT_EQ(*entries[0].find("frames")->items()[0].find("name")->as_string(), "forward");
  EXPECT_TRUE(entries[0].find("frames")->items()[0].same_node(entries[2].find("frames")->items()[0]));
}

TEST(Pickle, ReadsCPythonProtocol2) { expect_stdlib_dump("stdlib_p2.pickle", 2); }
TEST(Pickle, ReadsCPythonProtocol4) { expect_stdlib_dump("stdlib_p4.pickle", 4); }

TEST(Pickle, TorchListBuilderGlobalGivesItsList) {
  const char raw[] = "\x80\x02" "ctorch.jit._pickle\nbuild_intlist\n" "]q\x00(K\x01K\x02" "e\x85R.";
  const std::string s(raw, sizeof(raw) - 1);
  auto r = unpickle(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->root.items().size(), 2u);
  EXPECT_EQ(*r->root.items()[1].as_int(), 2);
}

Result<Unpickled> unpickle_text(const std::string& s) {
  return unpickle(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
}

TEST(Pickle, RefusesCodeExecution) {
  auto r = unpickle_text(std::string("\x80\x02" "cos\nsystem\nX\x02\x00\x00\x00ls\x85R.", 23));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(r.status().message().find("refuses global os.system"), std::string::npos) << r.status().message();
  EXPECT_FALSE(unpickle_text("\x80\x02]b.").ok()) << "BUILD";
  EXPECT_FALSE(unpickle_text("\x80\x02]K\x01P.").ok()) << "BINPERSID";
}

TEST(Pickle, RefusesAContainerInsideItself) {
  // EMPTY_LIST, BINPUT 0, MARK, BINGET 0, APPENDS, STOP
  auto r = unpickle_text(std::string("\x80\x02]q\x00(h\x00" "e.", 10));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cycle"), std::string::npos) << r.status().message();
}

TEST(Pickle, NestingPastTheLimitIsAnError) {
  std::string s = "\x80\x02";
  for (int i = 0; i < 100; ++i) s += "](";
  for (int i = 0; i < 100; ++i) s += "e";
  s += ".";
  auto r = unpickle_text(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nesting deeper than 64"), std::string::npos) << r.status().message();
}

TEST(Pickle, ExponentialSharingIsCapped) {
  // l0 = [1]; l(k+1) = [lk, lk]: 60 levels would be 2^60 values to walk.
  std::string s = std::string("\x80\x02](K\x01" "eq\x00", 9);
  for (int i = 0; i < 60; ++i) {
    s += std::string("](h") + char(i) + "h" + char(i) + "eq" + char(i + 1);
  }
  s += ".";
  auto r = unpickle_text(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("expand"), std::string::npos) << r.status().message();
}

TEST(Pickle, HugeLengthFieldIsAnErrorNotAnAllocation) {
  auto r = unpickle_text(std::string("\x80\x02X\xff\xff\xff\x7f" "abc", 9));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("string of 2147483647 bytes"), std::string::npos) << r.status().message();
}

TEST(Pickle, UnknownMemoIdIsAnError) {
  auto r = unpickle_text(std::string("\x80\x02h\x07.", 5));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("memo id 7"), std::string::npos) << r.status().message();
}

TEST(Pickle, TruncatedDumpSalvagesCompleteEntries) {
  Value entries = Value::container(Kind::kList);
  for (int i = 0; i < 5; ++i) list_push(entries, dict({{"seq", num(i)}, {"state", str("completed")}}));
  const auto bytes = TorchStylePickler().write(dict({{"version", str("2.10")}, {"entries", entries}}));
  // Cut inside the last entry: after its "seq" value, before "state".
  std::string text(bytes.begin(), bytes.end());
  const size_t cut = text.rfind("K\x04") + 2;
  auto r = unpickle(std::span<const uint8_t>(bytes.data(), cut));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->truncated);
  EXPECT_TRUE(r->root.partial());
  EXPECT_EQ(*r->root.find("version")->as_string(), "2.10");
  const auto& got = r->root.find("entries")->items();
  ASSERT_EQ(got.size(), 5u);
  EXPECT_FALSE(got[3].partial());
  EXPECT_TRUE(got[4].partial()) << "the entry the file ended in is flagged";
  EXPECT_EQ(got[4].find("state"), nullptr);
}

TEST(Pickle, FileErrorsNameTheFile) {
  auto r = unpickle_file("/nonexistent/comm_lib_trace_rank_3");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("comm_lib_trace_rank_3"), std::string::npos);
}

}  // namespace
}  // namespace rankscope::pickle
