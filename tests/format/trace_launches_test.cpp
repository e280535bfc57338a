// trace_launches_test.cpp — the TRACE_LAUNCHES record (type 8): round trip, a reader that does not
// know it (the visitor's default) still reads every other record, and a malformed one stops the
// scan with a warning while the records before it are kept.
#include <gtest/gtest.h>

#include <zlib.h>

#include <cstring>

#include "rankscope/format/event_stream.h"
#include "test_files.h"

namespace rankscope::format {
namespace trace_launches_test {

using testing::read_bytes;
using testing::scratch_dir;
using testing::write_bytes;

TraceLaunch launch(EventStreamWriter& w, const char* api, const char* kernel, int64_t at) {
  return {w.intern(NameKind::kApi, api), w.intern(NameKind::kKernel, kernel), 4242, 7, 0, uint32_t(at),
          at, at + 5'000, at + 40'000, at + 90'000};
}

// Writes step 3 with its kernels and launches, then step 4's STEP record and END.
void write_sample(const std::filesystem::path& file) {
  auto w = EventStreamWriter::create(file, {kEventsSchemaVersion, 0, 1, 1, "launches"});
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EventStreamWriter& writer = **w;
  StepRecord s3{3, 1'000'000, 2'000'000, {}, {}, {}};
  writer.write_step(s3);
  const TraceLaunch a = launch(writer, "cudaLaunchKernel", "gemm_kernel", 1'100'000);
  const TraceLaunch b = launch(writer, "cuLaunchKernelEx", "nvjet_sm90", 1'200'000);
  const TraceKernel ka{a.kernel_id, 0, a.stream, a.device, a.gpu_begin_ns, a.gpu_end_ns};
  const TraceKernel kb{b.kernel_id, 0, b.stream, b.device, b.gpu_begin_ns, b.gpu_end_ns};
  const TraceKernel kernels[] = {ka, kb};
  const TraceLaunch launches[] = {a, b};
  writer.write_trace_kernels(3, kernels);
  writer.write_trace_launches(3, launches);
  StepRecord s4{4, 2'000'000, 3'000'000, {}, {}, {}};
  writer.write_step(s4);
  writer.write_end(3'000'000);
  ASSERT_TRUE(writer.flush().ok());
}

TEST(TraceLaunches, RoundTripKeepsEveryFieldAndTheApiName) {
  const auto dir = scratch_dir("launches");
  const auto file = dir / "rank00000.events";
  write_sample(file);
  auto s = read_event_stream(file);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ASSERT_EQ(s->traces.size(), 1u);
  const auto& t = s->traces[0];
  EXPECT_EQ(t.step, 3);
  ASSERT_EQ(t.launches.size(), 2u);
  ASSERT_EQ(t.kernels.size(), 2u);
  const TraceLaunch& b = t.launches[1];
  EXPECT_EQ(s->name(b.api_id), "cuLaunchKernelEx");
  EXPECT_EQ(s->name_kinds[b.api_id], NameKind::kApi);
  EXPECT_EQ(s->name(b.kernel_id), "nvjet_sm90");
  EXPECT_EQ(b.tid, 4242u);
  EXPECT_EQ(b.stream, 7u);
  EXPECT_EQ(b.correlation, 1'200'000u);
  EXPECT_EQ(b.launch_begin_ns, 1'200'000);
  EXPECT_EQ(b.launch_end_ns, 1'205'000);
  EXPECT_EQ(b.gpu_begin_ns, 1'240'000);
  EXPECT_EQ(b.gpu_end_ns, 1'290'000);
  // Self-contained: the launch's op is the TRACE_KERNELS record with the same stream and times.
  EXPECT_EQ(t.kernels[1].begin_ns, b.gpu_begin_ns);
  EXPECT_EQ(t.kernels[1].name_id, b.kernel_id);
  EXPECT_EQ(s->steps.size(), 2u);
  EXPECT_TRUE(s->scan.ended);
  EXPECT_TRUE(s->scan.warnings.empty());
  std::filesystem::remove_all(dir);
}

// A reader written before TRACE_LAUNCHES (no on_trace_launches override) reads the rest unchanged.
TEST(TraceLaunches, AReaderThatDoesNotKnowTheRecordReadsEverythingElse) {
  struct OldReader final : EventStreamVisitor {
    int steps = 0;
    size_t kernels = 0;
    bool ended = false;
    void on_step(const StepRecord&) override { ++steps; }
    void on_trace_kernels(int64_t, std::span<const TraceKernel> k) override { kernels += k.size(); }
    void on_end(int64_t) override { ended = true; }
  };
  const auto dir = scratch_dir("launches");
  const auto file = dir / "rank00000.events";
  write_sample(file);
  OldReader old;
  auto scan = scan_event_stream(file, old);
  ASSERT_TRUE(scan.ok());
  EXPECT_EQ(old.steps, 2) << "the STEP record after TRACE_LAUNCHES is read";
  EXPECT_EQ(old.kernels, 2u);
  EXPECT_TRUE(old.ended);
  EXPECT_TRUE(scan->warnings.empty());
  std::filesystem::remove_all(dir);
}

// A TRACE_LAUNCHES record whose count claims more launches than its payload holds (checksum
// recomputed, so only the count is wrong) stops the scan there with a warning; what came before stays.
TEST(TraceLaunches, ACountLargerThanThePayloadIsAMalformedRecord) {
  const auto dir = scratch_dir("launches");
  const auto file = dir / "rank00000.events";
  write_sample(file);
  auto bytes = read_bytes(file);
  // Find the record of type 8 by walking the framing: [type][len][payload][crc].
  size_t off = 64;
  bool patched = false;
  while (off + 12 <= bytes.size()) {
    uint32_t type = 0, len = 0;
    std::memcpy(&type, &bytes[off], 4);
    std::memcpy(&len, &bytes[off + 4], 4);
    if (type == uint32_t(RecordType::kTraceLaunches)) {
      const uint32_t huge = 1000;
      std::memcpy(&bytes[off + 8 + 8], &huge, 4);  // ArrayPrefix: step i64, then count u32
      uLong crc = crc32(0L, Z_NULL, 0);
      crc = crc32(crc, &bytes[off], 8 + len);
      const uint32_t c = uint32_t(crc);
      std::memcpy(&bytes[off + 8 + len], &c, 4);
      patched = true;
      break;
    }
    off += 12 + len;
  }
  ASSERT_TRUE(patched);
  write_bytes(file, bytes);
  auto s = read_event_stream(file);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->scan.warnings.size(), 1u);
  EXPECT_NE(s->scan.warnings[0].find("malformed record of type 8"), std::string::npos) << s->scan.warnings[0];
  ASSERT_EQ(s->traces.size(), 1u);
  EXPECT_EQ(s->traces[0].kernels.size(), 2u) << "the kernels written before it are kept";
  EXPECT_TRUE(s->traces[0].launches.empty());
  EXPECT_EQ(s->steps.size(), 1u) << "records after it are not read";
  std::filesystem::remove_all(dir);
}

}  // namespace trace_launches_test
}  // namespace rankscope::format
