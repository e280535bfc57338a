// snapshot_stream_test.cpp — the node snapshot stream codec: round trips, and every way a node's
// stream can be wrong (truncated anywhere, bad magic, another version, names that climb out of
// the folder, sizes past the end or past the limits, a decompression bomb, bytes after the end).
// Hostile streams are built by hand here (header + zlib of raw records), since the writer refuses
// to produce them.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "rankscope/format/snapshot_stream.h"

namespace rankscope::format {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

fs::path scratch() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  auto dir = fs::temp_directory_path() / ("rs_snap_" + std::to_string(::getpid()) + "_" + info->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The writer's stream for `entries`, through a memory FILE.
Bytes encode(const std::vector<std::pair<std::string, Bytes>>& entries, bool finish = true) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = ::open_memstream(&buf, &len);
  {
    SnapshotWriter w(f);
    for (const auto& [name, bytes] : entries) EXPECT_TRUE(w.add(name, bytes).ok()) << name;
    if (finish) EXPECT_TRUE(w.finish().ok());
    else std::fflush(f);
  }
  std::fclose(f);
  Bytes out(buf, buf + len);
  std::free(buf);
  return out;
}

void put(Bytes& b, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b.push_back(uint8_t(v >> (8 * i)));
}

// A stream from raw body records, as a hostile node could send it.
Bytes raw_stream(const Bytes& body, uint32_t version = kSnapshotVersion) {
  Bytes out(kSnapshotMagic, kSnapshotMagic + 8);
  put(out, version, 4);
  put(out, 0, 4);
  uLongf n = compressBound(uLong(body.size()));
  Bytes z(n);
  EXPECT_EQ(compress2(z.data(), &n, body.data(), uLong(body.size()), 9), Z_OK);
  out.insert(out.end(), z.begin(), z.begin() + long(n));
  return out;
}

void file_record(Bytes& body, const std::string& name, const Bytes& data, uint64_t declared = UINT64_MAX) {
  body.push_back('F');
  put(body, name.size(), 2);
  body.insert(body.end(), name.begin(), name.end());
  put(body, declared == UINT64_MAX ? data.size() : declared, 8);
  body.insert(body.end(), data.begin(), data.end());
}

void end_record(Bytes& body, uint64_t entries, uint64_t bytes) {
  body.push_back('E');
  put(body, entries, 8);
  put(body, bytes, 8);
}

Bytes pattern(size_t n, uint32_t seed) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = uint8_t((i * 2654435761u + seed) >> 13);
  return b;
}

std::map<std::string, Bytes> decode_all(const Bytes& stream, SnapshotDecodeResult& r, const SnapshotLimits& limits = {}) {
  std::map<std::string, Bytes> got;
  r = decode_snapshot(stream, "test", [&](std::string_view name, std::span<const uint8_t> bytes) {
    got[std::string(name)] = Bytes(bytes.begin(), bytes.end());
    return Status{};
  }, limits);
  return got;
}

TEST(SnapshotStream, RoundTripsEntriesOfEverySize) {
  const std::vector<std::pair<std::string, Bytes>> entries = {
      {"snapshot.json", Bytes{'{', '}'}},
      {"run.json", pattern(1200, 1)},
      {"rank00000.flight", pattern(300'000, 2)},
      {"empty", {}},
      {"nccl/vm.456.f0ec67fd6fd098a2.r0.flight", Bytes(70'000, 0)},
      {"evidence/rank00001-watchdog-17.stacks.txt", pattern(5, 3)}};
  const Bytes stream = encode(entries);
  SnapshotDecodeResult r;
  auto got = decode_all(stream, r);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.version, kSnapshotVersion);
  EXPECT_EQ(r.entries, entries.size());
  ASSERT_EQ(r.names.size(), entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    EXPECT_EQ(r.names[i], entries[i].first);  // stream order is kept: the manifest comes first
    EXPECT_EQ(got[entries[i].first], entries[i].second) << entries[i].first;
  }
  // Zeros compress: the 70 KB zero file costs far less than its size.
  EXPECT_LT(stream.size(), 1200 + 300'000 + 70'000 / 10);
}

TEST(SnapshotStream, WriterRefusesNamesThatCouldEscape) {
  std::FILE* f = std::tmpfile();
  SnapshotWriter w(f);
  EXPECT_FALSE(w.add("../x", std::string_view("a")).ok());
  std::fclose(f);
}

TEST(SnapshotStream, EntryNamesAreCheckedPartByPart) {
  for (const char* ok : {"run.json", "nccl/vm.456.r0.flight", "evidence/a-b_c+d@e=f,g.txt", "a/b/c/d"})
    EXPECT_TRUE(check_snapshot_entry_name(ok).ok()) << ok;
  for (const char* bad : {"", "/etc/passwd", "../x", "a/../../b", "a//b", "./a", "a/", "a/b/c/d/e", "a\\b", "a b",
                          "name\nwith newline", "..", "~root"})
    EXPECT_FALSE(check_snapshot_entry_name(bad).ok()) << bad;
  EXPECT_FALSE(check_snapshot_entry_name(std::string(256, 'a')).ok());
  EXPECT_FALSE(check_snapshot_entry_name(std::string("a\0b", 3)).ok());
}

TEST(SnapshotStream, TruncatedAnywhereIsAnErrorThatKeepsWholeEntries) {
  const std::vector<std::pair<std::string, Bytes>> entries = {
      {"a", pattern(40'000, 1)}, {"b", pattern(40'000, 2)}, {"c", pattern(40'000, 3)}};
  const Bytes stream = encode(entries);
  for (size_t cut : {size_t(0), size_t(5), size_t(16), size_t(17), size_t(100), stream.size() / 3, stream.size() / 2,
                     stream.size() - 20, stream.size() - 1}) {
    SCOPED_TRACE(cut);
    const Bytes part(stream.begin(), stream.begin() + long(cut));
    SnapshotDecodeResult r;
    auto got = decode_all(part, r);
    EXPECT_FALSE(r.status.ok());
    EXPECT_LE(r.entries, entries.size());  // a cut inside the end record leaves every entry whole
    for (size_t i = 0; i < r.entries; ++i) EXPECT_EQ(got[entries[i].first], entries[i].second);
  }
  // A writer that never finished (the node was killed mid-stream): no end record.
  SnapshotDecodeResult r;
  decode_all(encode(entries, /*finish=*/false), r);
  EXPECT_FALSE(r.status.ok());
  EXPECT_NE(r.status.message().find("truncated"), std::string::npos) << r.status.message();
}

TEST(SnapshotStream, BadMagicAndOtherVersionsAreNamed) {
  SnapshotDecodeResult r;
  Bytes junk = {'s', 'r', 'u', 'n', ':', ' ', 'e', 'r', 'r', 'o', 'r', ' ', 'x', 'y', 'z', 'w', '!'};
  decode_all(junk, r);
  EXPECT_EQ(r.status.code(), StatusCode::kCorrupt);
  EXPECT_NE(r.status.message().find("bad magic"), std::string::npos) << r.status.message();

  Bytes body;
  end_record(body, 0, 0);
  decode_all(raw_stream(body, kSnapshotVersion + 1), r);
  EXPECT_EQ(r.status.code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status.message().find("version 2"), std::string::npos) << r.status.message();

  decode_all(raw_stream(body), r);
  EXPECT_TRUE(r.status.ok()) << r.status.message();  // the same body at the right version is fine
  decode_all({}, r);
  EXPECT_NE(r.status.message().find("sent nothing"), std::string::npos);
}

TEST(SnapshotStream, PathTraversalWritesNothingOutside) {
  const fs::path root = scratch();
  const fs::path into = root / "hosts" / "n2";
  for (const std::string evil : {"../../escaped", "/tmp/escaped-abs", "ok/../../escaped", "..", "a/./b"}) {
    SCOPED_TRACE(evil);
    Bytes body;
    file_record(body, "good", pattern(10, 1));
    file_record(body, evil, pattern(10, 2));
    end_record(body, 2, 20);
    auto r = unpack_snapshot(raw_stream(body), "node n2", into);
    EXPECT_EQ(r.status.code(), StatusCode::kCorrupt);
    EXPECT_EQ(r.entries, 1u);  // the entry before it is kept
    EXPECT_TRUE(fs::exists(into / "good"));
  }
  EXPECT_FALSE(fs::exists(root / "escaped"));
  EXPECT_FALSE(fs::exists(root / "hosts" / "escaped"));
  EXPECT_FALSE(fs::exists("/tmp/escaped-abs"));
}

TEST(SnapshotStream, SizesPastTheEndOrTheLimitsStopBeforeInflating) {
  SnapshotDecodeResult r;
  // Declares 1000 bytes, carries 10, then the stream ends.
  Bytes body;
  file_record(body, "short", pattern(10, 1), 1000);
  decode_all(raw_stream(body), r);
  EXPECT_EQ(r.status.code(), StatusCode::kCorrupt);
  EXPECT_NE(r.status.message().find("truncated"), std::string::npos) << r.status.message();

  // Declares 2^60 bytes: refused from the header alone.
  body.clear();
  file_record(body, "huge", {}, uint64_t(1) << 60);
  decode_all(raw_stream(body), r);
  EXPECT_NE(r.status.message().find("over the limit"), std::string::npos) << r.status.message();

  // The end record must count what came.
  body.clear();
  file_record(body, "a", pattern(10, 1));
  end_record(body, 2, 10);
  decode_all(raw_stream(body), r);
  EXPECT_NE(r.status.message().find("end record counts"), std::string::npos) << r.status.message();

  body.clear();
  body.push_back('Q');
  decode_all(raw_stream(body), r);
  EXPECT_NE(r.status.message().find("unknown record tag"), std::string::npos) << r.status.message();
}

TEST(SnapshotStream, DecompressionBombIsStoppedAtTheTotalLimit) {
  // Ten entries of 1 MiB of zeros (about 1 KB each compressed) against a 4 MiB total limit.
  Bytes body;
  for (int i = 0; i < 10; ++i) file_record(body, "zero" + std::to_string(i), Bytes(1 << 20, 0));
  end_record(body, 10, 10u << 20);
  const Bytes stream = raw_stream(body);
  EXPECT_LT(stream.size(), 64'000u);
  SnapshotLimits limits;
  limits.max_total_bytes = 4u << 20;
  SnapshotDecodeResult r;
  decode_all(stream, r, limits);
  EXPECT_EQ(r.status.code(), StatusCode::kCorrupt);
  EXPECT_EQ(r.entries, 4u);
  EXPECT_NE(r.status.message().find("limit"), std::string::npos) << r.status.message();
  limits = {};
  limits.max_entries = 3;
  decode_all(stream, r, limits);
  EXPECT_EQ(r.entries, 3u);
}

TEST(SnapshotStream, BytesAfterTheEndAreRefused) {
  Bytes stream = encode({{"a", pattern(100, 1)}});
  stream.push_back(0);
  SnapshotDecodeResult r;
  decode_all(stream, r);
  EXPECT_EQ(r.status.code(), StatusCode::kCorrupt);
  EXPECT_NE(r.status.message().find("after the end"), std::string::npos) << r.status.message();
  // Damaged compressed bytes in the middle.
  Bytes damaged = encode({{"a", pattern(50'000, 1)}});
  for (size_t i = 40; i < 60; ++i) damaged[i] ^= 0x5a;
  decode_all(damaged, r);
  EXPECT_FALSE(r.status.ok());
}

// The checked-in version-1 stream (tests/fixtures/gather/): readers keep reading every version.
TEST(SnapshotStream, VersionOneFixtureStillDecodes) {
  std::ifstream in(std::string(RANKSCOPE_SOURCE_DIR) + "/tests/fixtures/gather/v1/node.snap", std::ios::binary);
  ASSERT_TRUE(in) << "fixture missing";
  const Bytes stream((std::istreambuf_iterator<char>(in)), {});
  SnapshotDecodeResult r;
  auto got = decode_all(stream, r);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.version, 1u);
  ASSERT_FALSE(r.names.empty());
  EXPECT_EQ(r.names.front(), "snapshot.json");
  EXPECT_TRUE(got.count("run.json"));
  EXPECT_TRUE(got.count("rank00000.flight"));
  EXPECT_TRUE(got.count("rank00001.flight"));
}

}  // namespace
}  // namespace rankscope::format
