// flight_recorder_test.cpp — what the writer puts in a flight recorder, the reader gets back.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <thread>
#include <vector>

#include "flight_recorder_copies.h"  // format/src: the reader's copy loop, fed torn copies below
#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/flight_recorder_writer.h"
#include "test_files.h"

namespace rankscope::format {
namespace {

class FlightRecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("rs_flight_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    file_ = dir_ / "rank00003.flight";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<FlightRecorderWriter> make(FlightLayoutParams p = {}) {
    FlightIdentity id{3, 8, 1, 4242, "node7", "run-abc", 1000};
    auto w = FlightRecorderWriter::create(file_, id, p);
    EXPECT_TRUE(w.ok()) << w.status().to_string();
    return std::move(w).value();
  }

  std::filesystem::path dir_, file_;
};

TEST_F(FlightRecorderTest, IdentityAndLiveStateRoundTrip) {
  auto w = make();
  w->set_step(17, 5000);
  w->set_phase("forward/block3/attn");
  w->set_process_state(ProcessState::kRunning);
  w->set_clock(-250, 40);
  w->heartbeat(9999);
  auto s = read_flight_recorder(file_);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->rank, 3);
  EXPECT_EQ(s->world_size, 8);
  EXPECT_EQ(s->local_rank, 1);
  EXPECT_EQ(s->pid, 4242);
  EXPECT_EQ(s->host, "node7");
  EXPECT_EQ(s->run_id, "run-abc");
  EXPECT_EQ(s->live.step, 17);
  EXPECT_EQ(s->live.step_begin_ns, 5000);
  EXPECT_EQ(s->live.phase, "forward/block3/attn");
  EXPECT_EQ(s->live.process_state, ProcessState::kRunning);
  EXPECT_EQ(s->live.clock_offset_ns, -250);
  EXPECT_EQ(s->live.clock_uncertainty_ns, 40);
  EXPECT_EQ(s->live.heartbeat_ns, 9999);
  EXPECT_FALSE(s->live.torn);
  EXPECT_TRUE(s->warnings.empty());
}

// A recorder kept in memory and saved on close() is the file the mapped writer leaves, byte for byte.
TEST_F(FlightRecorderTest, InMemoryRecorderSavesTheMappedRecordersBytes) {
  auto fill = [](FlightRecorderWriter& w) {
    w.set_step(4, 700);
    w.set_phase("backward/block1/mlp");
    const int slot = w.claim_thread_slot(11, "main");
    w.push_range(slot, "step", 650);
    const int comm = w.register_comm("tp0", 2, 1);
    const uint64_t seq = w.collective_enqueue(comm, {CollectiveOp::kAllReduceSum, DataType::kFloat32, 256, 1024, -1}, 4, "grad_sync", 800);
    w.collective_complete(comm, seq, 900);
    (void)w.collective_enqueue(comm, {CollectiveOp::kAllGather, DataType::kBFloat16, 64, 128, -1}, 4, "forward/embed", 950);
    w.heartbeat(1000);
  };
  FlightIdentity id{3, 8, 1, 4242, "node7", "run-abc", 1000};
  {
    auto mapped = make();
    fill(*mapped);
    ASSERT_TRUE(mapped->close().ok());
  }
  const auto memory_file = dir_ / "rank00004.flight";
  std::vector<uint64_t> memory((flight_file_bytes({}) + 7) / 8, 0);
  auto in_memory = FlightRecorderWriter::create_in_memory(std::span(reinterpret_cast<uint8_t*>(memory.data()), memory.size() * 8),
                                                          memory_file, id);
  ASSERT_TRUE(in_memory.ok()) << in_memory.status().to_string();
  EXPECT_TRUE(std::filesystem::exists(memory_file));  // created at once, written at close()
  fill(**in_memory);
  ASSERT_TRUE((*in_memory)->close().ok());
  EXPECT_TRUE((*in_memory)->close().ok());  // a second close does nothing
  auto read_bytes = [](const std::filesystem::path& f) {
    std::ifstream in(f, std::ios::binary);
    return std::vector<char>((std::istreambuf_iterator<char>(in)), {});
  };
  EXPECT_EQ(read_bytes(memory_file), read_bytes(file_));
  auto s = read_flight_recorder(memory_file);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->live.step, 4);
  ASSERT_EQ(s->comms.size(), 1u);
  EXPECT_EQ(s->comms[0].ring.size(), 2u);
  // Too little memory, or a folder that does not exist: refused at once.
  EXPECT_FALSE(FlightRecorderWriter::create_in_memory(std::span(reinterpret_cast<uint8_t*>(memory.data()), 64), dir_ / "x.flight", id).ok());
  EXPECT_FALSE(FlightRecorderWriter::create_in_memory(std::span(reinterpret_cast<uint8_t*>(memory.data()), memory.size() * 8),
                                                      dir_ / "no" / "such" / "x.flight", id).ok());
}

TEST_F(FlightRecorderTest, RangeStacksPerThread) {
  auto w = make();
  const int main_slot = w->claim_thread_slot(100, "main");
  const int other = w->claim_thread_slot(101, "loader");
  ASSERT_EQ(main_slot, 0);
  ASSERT_EQ(other, 1);
  w->push_range(main_slot, "step", 1);
  w->push_range(main_slot, "forward/embed", 2);
  w->push_range(other, "data", 3);
  w->push_range(main_slot, "forward/block0/attn", 4);
  w->pop_range(main_slot);
  auto s = read_flight_recorder(file_);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->threads.size(), 2u);
  const ThreadSnapshot* m = s->main_thread();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->tid, 100);
  EXPECT_EQ(m->name, "main");
  ASSERT_EQ(m->stack.size(), 2u);
  EXPECT_EQ(m->stack[0].name, "step");
  EXPECT_EQ(m->stack[1].name, "forward/embed");
  EXPECT_EQ(m->stack[1].begin_ns, 2);
  ASSERT_EQ(s->threads[1].stack.size(), 1u);
  EXPECT_EQ(s->threads[1].stack[0].name, "data");
}

TEST_F(FlightRecorderTest, StackDeeperThanStoredIsCountedNotStored) {
  FlightLayoutParams p;
  p.max_range_depth = 2;
  auto w = make(p);
  const int t = w->claim_thread_slot(1, "main");
  for (const char* n : {"a", "b", "c", "d"}) w->push_range(t, n, 0);
  auto s = read_flight_recorder(file_);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->threads[0].depth, 4u);
  ASSERT_EQ(s->threads[0].stack.size(), 2u);
  EXPECT_EQ(s->threads[0].stack[1].name, "b");
}

TEST_F(FlightRecorderTest, CollectivesCarryStateAndSequence) {
  auto w = make();
  const int tp = w->register_comm("tp0", 2, 1);
  const int dp = w->register_comm("dp1", 4, 0);
  CollectiveDesc d{CollectiveOp::kAllReduceSum, DataType::kFloat32, 1024, 4096, -1};
  EXPECT_EQ(w->collective_enqueue(tp, d, 5, "forward/block0/attn", 10), 0u);
  w->collective_complete(tp, 0, 20);
  EXPECT_EQ(w->collective_enqueue(tp, d, 5, "forward/block0/mlp", 30), 1u);
  w->collective_start(tp, 1, 31);
  CollectiveDesc b{CollectiveOp::kBroadcast, DataType::kBFloat16, 8, 16, 2};
  EXPECT_EQ(w->collective_enqueue(dp, b, 5, "grad_sync", 40), 0u);
  auto s = read_flight_recorder(file_);
  ASSERT_TRUE(s.ok());
  const CommSnapshot* c = s->comm("tp0");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->size, 2);
  EXPECT_EQ(c->rank_in_comm, 1);
  EXPECT_EQ(c->next_seq, 2u);
  EXPECT_EQ(c->completed_count, 1u);
  ASSERT_EQ(c->ring.size(), 2u);
  EXPECT_EQ(c->ring[0].state, CollectiveState::kCompleted);
  EXPECT_EQ(c->ring[0].start_ns, 10);  // blocking collective: started when enqueued
  EXPECT_EQ(c->ring[0].end_ns, 20);
  EXPECT_EQ(c->ring[1].state, CollectiveState::kStarted);
  EXPECT_EQ(c->ring[1].range, "forward/block0/mlp");
  EXPECT_EQ(c->ring[1].bytes, 4096u);
  EXPECT_EQ(c->ring[1].step, 5);
  const CommSnapshot* d1 = s->comm("dp1");
  ASSERT_NE(d1, nullptr);
  EXPECT_EQ(d1->ring[0].op, CollectiveOp::kBroadcast);
  EXPECT_EQ(d1->ring[0].dtype, DataType::kBFloat16);
  EXPECT_EQ(d1->ring[0].peer, 2);
  EXPECT_EQ(d1->ring[0].state, CollectiveState::kEnqueued);
  EXPECT_EQ(s->live.collectives_issued, 3u);
  EXPECT_EQ(s->live.collectives_completed, 1u);
}

TEST_F(FlightRecorderTest, RingKeepsTheLastEntriesAfterWrapping) {
  FlightLayoutParams p;
  p.ring_entries = 8;
  auto w = make(p);
  const int c = w->register_comm("world", 4, 0);
  for (int i = 0; i < 21; ++i) {
    const uint64_t seq = w->collective_enqueue(c, {CollectiveOp::kBarrier, DataType::kUnknown, 0, 0, -1}, i, "x", i);
    w->collective_complete(c, seq, i + 1);
  }
  auto s = read_flight_recorder(file_);
  ASSERT_TRUE(s.ok());
  const auto& ring = s->comms[0].ring;
  ASSERT_EQ(ring.size(), 8u);
  EXPECT_EQ(ring.front().seq, 13u);
  EXPECT_EQ(ring.back().seq, 20u);
  EXPECT_NE(s->comms[0].find(15), nullptr);
  EXPECT_EQ(s->comms[0].find(3), nullptr);
}

TEST_F(FlightRecorderTest, GradientArrivalShowsMissingParameters) {
  auto w = make();
  const int a = w->register_param("h.1.mlp.c_proj.weight", 0, 100);
  const int b = w->register_param("h.0.attn.c_attn.weight", 1, 200);
  const int c = w->register_param("wte.weight", 2, 300);
  w->begin_backward(4, 50);
  w->grad_arrived(a, 51);
  w->grad_arrived(c, 52);
  auto s = read_flight_recorder(file_);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->grad.in_backward);
  EXPECT_EQ(s->grad.backward_step, 4);
  EXPECT_EQ(s->grad.n_arrived, 2u);
  ASSERT_EQ(s->params.size(), 3u);
  EXPECT_EQ(s->params[2].order, 1u);
  auto missing = s->missing_gradients();
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0]->name, "h.0.attn.c_attn.weight");
  EXPECT_EQ(missing[0]->bucket, 1);
  (void)b;
  // The next pass starts with nothing arrived.
  w->end_backward();
  w->begin_backward(5, 60);
  s = read_flight_recorder(file_);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->missing_gradients().size(), 3u);
}

TEST_F(FlightRecorderTest, WatchdogRecordRoundTrip) {
  auto w = make();
  const int c = w->register_comm("tp0", 2, 0);
  w->record_watchdog({WatchdogKind::kCollectiveTimeout, 777, c, 57, 31'000'000'000, "forward/block0/attn",
                      "allreduce #57 on tp0 open for 31 s", "evidence/rank00003-watchdog-1.stacks.txt"});
  auto s = read_flight_recorder(file_);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->watchdog.kind, WatchdogKind::kCollectiveTimeout);
  EXPECT_EQ(s->watchdog.comm_index, c);
  EXPECT_EQ(s->watchdog.comm_seq, 57u);
  EXPECT_EQ(s->watchdog.waited_ns, 31'000'000'000);
  EXPECT_EQ(s->watchdog.event_count, 1u);
  EXPECT_EQ(s->watchdog.range, "forward/block0/attn");
  EXPECT_EQ(s->watchdog.stacks_file, "evidence/rank00003-watchdog-1.stacks.txt");
}

TEST_F(FlightRecorderTest, LearnedBoundsAndSuspectedHangRoundTrip) {
  auto w = make();
  const int c = w->register_comm("tp0", 2, 0);
  BoundDesc site;
  site.kind = BoundKind::kCollective;
  site.comm_index = c;
  site.comm = "tp0";
  site.site = "forward/embed";
  site.samples = 40;
  site.warmup = 10;
  site.quantile_ns = 3'800'000;
  site.bound_ns = 3'000'000'000;
  site.updated_ns = 555;
  site.quantile_permille = 950;
  site.window = 64;
  w->write_bound(0, site);
  BoundDesc step = site;
  step.kind = BoundKind::kStep;
  step.comm_index = -1;
  step.comm = "";
  step.site = "step";
  step.bound_ns = 0;  // still warming up
  w->write_bound(1, step);
  w->record_watchdog({WatchdogKind::kSuspectedHang, 777, c, 57, 3'100'000'000, "forward/embed", "past its learned bound", ""});
  auto s = read_flight_recorder(file_);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->bounds.size(), 2u);
  const auto* b = s->bound(BoundKind::kCollective, "tp0", "forward/embed");
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(b->armed());
  EXPECT_EQ(b->samples, 40u);
  EXPECT_EQ(b->quantile_ns, 3'800'000);
  EXPECT_EQ(b->bound_ns, 3'000'000'000);
  EXPECT_EQ(b->quantile_permille, 950u);
  EXPECT_EQ(s->bound(BoundKind::kCollective, "tp0", "forward/head"), nullptr);
  ASSERT_NE(s->bound(BoundKind::kStep), nullptr);
  EXPECT_FALSE(s->bound(BoundKind::kStep)->armed());
  EXPECT_EQ(s->watchdog.kind, WatchdogKind::kSuspectedHang);
  EXPECT_EQ(watchdog_kind_name(s->watchdog.kind), "suspected_hang");
}

TEST_F(FlightRecorderTest, TornRecordIsReportedNotTrusted) {
  auto w = make();
  const int c = w->register_comm("tp0", 2, 0);
  w->collective_enqueue(c, {CollectiveOp::kAllReduceSum, DataType::kFloat32, 4, 16, -1}, 1, "x", 5);
  // Simulate a writer killed between seqlock begin and end: the guard word stays odd.
  auto* header = reinterpret_cast<FlightHeader*>(w->mapped_bytes());
  auto* rec = reinterpret_cast<CollectiveRecord*>(w->mapped_bytes() + header->comms_offset + sizeof(CommSlotHeader));
  rec->guard += 1;
  header->live.seq += 1;
  auto s = read_flight_recorder(file_);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->comms[0].ring.size(), 1u);
  EXPECT_TRUE(s->comms[0].ring[0].torn);
  EXPECT_TRUE(s->live.torn);
  EXPECT_GE(s->warnings.size(), 2u);
}

TEST_F(FlightRecorderTest, ReadableWhileAWriterThreadIsBusy) {
  auto w = make();
  const int t = w->claim_thread_slot(1, "main");
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int i = 0; !stop; ++i) {
      w->push_range(t, i % 2 ? "forward/block1/attn" : "backward/block0/mlp", i);
      w->pop_range(t);
    }
  });
  for (int i = 0; i < 200; ++i) {
    auto s = read_flight_recorder(file_);
    ASSERT_TRUE(s.ok());
    const auto* m = s->main_thread();
    ASSERT_NE(m, nullptr);
    if (!m->torn && !m->stack.empty()) {
      EXPECT_TRUE(m->stack[0].name == "forward/block1/attn" || m->stack[0].name == "backward/block0/mlp")
          << m->stack[0].name;
    }
  }
  stop = true;
  writer.join();
}

// The kernel copies a file in no promised order while the writer runs, so one copy can hold the
// sequence word from before an update and the name from during it: the word in that copy is even
// and equal to itself. Here the second copy is torn that way on purpose (word and first 8 name
// bytes copied, then the writer replaces the range, then the rest copied).
TEST_F(FlightRecorderTest, ACopyTornWhileTheWordLooksSettledIsNotTrusted) {
  auto w = make();
  const int t = w->claim_thread_slot(1, "main");
  w->push_range(t, "forward/block1/attn", 1);
  const auto* h = reinterpret_cast<const FlightHeader*>(w->mapped_bytes());
  const size_t size = h->file_bytes;
  const size_t name_at = h->threads_offset + sizeof(ThreadSlotHeader) + offsetof(OpenRange, name);
  // The first copy is whole; the later ones are the extents the writer can change, the first of
  // which starts at 0 and holds the header and the thread slots.
  const std::vector<FileExtent> extents = writable_extents({w->mapped_bytes(), size});
  ASSERT_FALSE(extents.empty());
  ASSERT_EQ(extents[0].offset, 0u);
  ASSERT_GE(extents[0].bytes, name_at + 8);
  auto part_of_a_copy = [&](uint64_t offset, size_t n) {
    return (offset == 0 && n == size) ||
           std::any_of(extents.begin(), extents.end(), [&](const FileExtent& e) { return e.offset == offset && e.bytes == n; });
  };
  int copies = 0, section_reads = 0;
  std::vector<uint8_t> torn_copy;
  const ReadFile read = [&](uint64_t offset, std::span<uint8_t> out) {
    const uint8_t* live = w->mapped_bytes();
    if (!part_of_a_copy(offset, out.size())) {
      ++section_reads;
      std::memcpy(out.data(), live + offset, out.size());
    } else if (offset == 0 && ++copies == 2) {
      std::memcpy(out.data(), live, name_at + 8);
      w->pop_range(t);
      w->push_range(t, "backward/block0/mlp", 2);
      std::memcpy(out.data() + name_at + 8, live + name_at + 8, out.size() - name_at - 8);
      torn_copy.assign(live, live + size);
      std::copy(out.begin(), out.end(), torn_copy.begin());
    } else {
      std::memcpy(out.data(), live + offset, out.size());
    }
    return Status::ok_status();
  };
  auto s = read_flight_recorder_copies(size, read, "torn-on-purpose");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(copies, 3);
  EXPECT_EQ(section_reads, 3) << "the torn stack is read again on its own: word, section, word";
  const ThreadSnapshot* m = s->main_thread();
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(m->torn);
  ASSERT_EQ(m->stack.size(), 1u);
  EXPECT_EQ(m->stack[0].name, "backward/block0/mlp");
  EXPECT_EQ(m->stack[0].begin_ns, 2);
  // The torn copy alone passes the in-copy check: what the window above had to catch.
  auto alone = parse_flight_recorder(torn_copy, "torn copy alone");
  ASSERT_TRUE(alone.ok());
  ASSERT_EQ(alone->main_thread()->stack.size(), 1u);
  EXPECT_EQ(alone->main_thread()->stack[0].name, "forward//block0/mlp");
}

// A writer caught mid-update by every read, whole copies and section reads alike, leaves the
// section marked torn: never a guess.
TEST_F(FlightRecorderTest, AWriterBusyInEveryReadLeavesTheSectionTorn) {
  auto w = make();
  const int t = w->claim_thread_slot(1, "main");
  const auto* h = reinterpret_cast<const FlightHeader*>(w->mapped_bytes());
  const size_t size = h->file_bytes;
  int copies = 0, reads = 0;  // every copy, whole or of the writable extents, starts at offset 0
  const ReadFile read = [&](uint64_t offset, std::span<uint8_t> out) {
    ++reads;
    w->push_range(t, reads % 2 ? "forward/block1/attn" : "backward/block0/mlp", reads);
    w->pop_range(t);
    if (offset == 0) ++copies;
    std::memcpy(out.data(), w->mapped_bytes() + offset, out.size());
    return Status::ok_status();
  };
  auto s = read_flight_recorder_copies(size, read, "always-moving");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(copies, 10);  // three, then one per further window, eight windows
  EXPECT_GT(reads, copies);
  EXPECT_TRUE(s->main_thread()->torn);
}

// After the first whole copy, only what a writer can still change is read again: unclaimed
// communicator slots, unused bound slots and the peer counts of communicators that made no
// all_to_all_v are not. The snapshot is the one whole copies give.
TEST_F(FlightRecorderTest, LaterCopiesReadOnlyWhatTheWriterCanChange) {
  auto w = make();  // four communicator slots by default
  const int tp = w->register_comm("tp0", 2, 1);
  w->claim_thread_slot(1, "main");
  w->push_range(0, "forward/block0/attn", 5);
  const uint64_t seq = w->collective_enqueue(tp, {CollectiveOp::kAllReduceSum, DataType::kFloat32, 8, 32, -1}, 1,
                                             "forward/block0/attn", 10);
  w->collective_complete(tp, seq, 20);
  BoundDesc b;
  b.kind = BoundKind::kStep;
  b.site = "step";
  b.samples = 3;
  w->write_bound(0, b);
  const auto* h = reinterpret_cast<const FlightHeader*>(w->mapped_bytes());
  const size_t size = h->file_bytes;
  ASSERT_GE(h->layout.max_comms, 2u);

  const std::vector<FileExtent> extents = writable_extents({w->mapped_bytes(), size});
  ASSERT_FALSE(extents.empty());
  auto covered = [&](uint64_t at) {
    return std::any_of(extents.begin(), extents.end(), [&](const FileExtent& e) { return at >= e.offset && at < e.offset + e.bytes; });
  };
  EXPECT_TRUE(covered(offsetof(FlightHeader, live)));
  EXPECT_TRUE(covered(h->comms_offset + sizeof(CommSlotHeader)));                       // tp0's ring
  EXPECT_FALSE(covered(h->comms_offset + h->comm_slot_bytes));                         // slot 1: unclaimed
  EXPECT_TRUE(covered(h->bounds.bounds_offset));                                       // bound 0: in use
  EXPECT_FALSE(covered(h->bounds.bounds_offset + sizeof(BoundSlot)));                  // bound 1: never written
  for (size_t i = 1; i < extents.size(); ++i) EXPECT_LT(extents[i - 1].offset + extents[i - 1].bytes, extents[i].offset);

  size_t bytes_read = 0;
  std::vector<size_t> per_copy;
  const ReadFile read = [&](uint64_t offset, std::span<uint8_t> out) {
    if (offset == 0) per_copy.push_back(0);
    per_copy.back() += out.size();
    bytes_read += out.size();
    std::memcpy(out.data(), w->mapped_bytes() + offset, out.size());
    return Status::ok_status();
  };
  auto s = read_flight_recorder_copies(size, read, "extents");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ASSERT_EQ(per_copy.size(), 3u);
  EXPECT_EQ(per_copy[0], size);
  EXPECT_LT(per_copy[1], size - h->comm_slot_bytes);
  EXPECT_EQ(per_copy[1], per_copy[2]);
  auto whole = read_flight_recorder(file_);
  ASSERT_TRUE(whole.ok());
  ASSERT_EQ(s->comms.size(), 1u);
  ASSERT_EQ(s->comms[0].ring.size(), 1u);
  EXPECT_EQ(s->comms[0].ring[0].range, whole->comms[0].ring[0].range);
  EXPECT_EQ(s->comms[0].ring[0].end_ns, 20);
  ASSERT_EQ(s->bounds.size(), 1u);
  EXPECT_EQ(s->bounds[0].samples, 3u);
  ASSERT_EQ(s->main_thread()->stack.size(), 1u);
  EXPECT_EQ(s->main_thread()->stack[0].name, "forward/block0/attn");
  EXPECT_TRUE(s->warnings.empty());
}

// The later copies do not even hold the rings of unclaimed communicator slots: the reader's reused
// buffers keep there whatever the previous recorder had. A recorder read right after one with two
// busy communicators must show only its own one, with its own records.
TEST_F(FlightRecorderTest, UnclaimedRingsInLaterCopiesAreNeverRead) {
  auto busy = make();
  const int a = busy->register_comm("tp0", 2, 0);
  const int b = busy->register_comm("dp0", 4, 1);
  for (int i = 0; i < 8; ++i)
    for (int c : {a, b}) {
      const uint64_t seq = busy->collective_enqueue(c, {CollectiveOp::kAllGather, DataType::kBFloat16, 64, 128, -1}, 1,
                                                    "busy/site", 100 + i);
      busy->collective_complete(c, seq, 200 + i);
    }
  auto first = read_flight_recorder(file_);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->comms.size(), 2u);
  busy.reset();

  file_ = dir_ / "rank00004.flight";
  auto quiet = make();
  const int only = quiet->register_comm("tp1", 2, 1);
  const uint64_t seq = quiet->collective_enqueue(only, {CollectiveOp::kAllReduceSum, DataType::kFloat32, 8, 32, -1}, 2,
                                                 "quiet/site", 10);
  quiet->collective_complete(only, seq, 20);
  const auto* h = reinterpret_cast<const FlightHeader*>(quiet->mapped_bytes());
  const std::vector<FileExtent> rings = unclaimed_rings({quiet->mapped_bytes(), size_t(h->file_bytes)});
  ASSERT_EQ(rings.size(), h->layout.max_comms - 1);
  EXPECT_EQ(rings[0].offset, h->comms_offset + h->comm_slot_bytes + sizeof(CommSlotHeader));
  EXPECT_EQ(rings[0].bytes, h->comm_slot_bytes - sizeof(CommSlotHeader));

  auto s = read_flight_recorder(file_);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ASSERT_EQ(s->comms.size(), 1u);
  EXPECT_EQ(s->comms[0].name, "tp1");
  ASSERT_EQ(s->comms[0].ring.size(), 1u);
  EXPECT_EQ(s->comms[0].ring[0].range, "quiet/site");
  EXPECT_EQ(s->comms[0].ring[0].end_ns, 20);
  EXPECT_TRUE(s->warnings.empty());
}

// A file whose layout does not validate is read in whole copies: the parse names the error.
TEST_F(FlightRecorderTest, NoExtentsForACorruptLayout) {
  auto w = make();
  const auto* h = reinterpret_cast<const FlightHeader*>(w->mapped_bytes());
  std::vector<uint8_t> bytes(w->mapped_bytes(), w->mapped_bytes() + h->file_bytes);
  EXPECT_FALSE(writable_extents(bytes).empty());
  reinterpret_cast<FlightHeader*>(bytes.data())->comm_slot_bytes += 8;
  EXPECT_TRUE(writable_extents(bytes).empty());
  EXPECT_TRUE(writable_extents(std::span<const uint8_t>(bytes).first(100)).empty());
}

TEST_F(FlightRecorderTest, AFailingCopyIsAnErrorNotASnapshot) {
  auto w = make();
  const ReadFile read = [](uint64_t, std::span<uint8_t>) { return io_error("rank00003.flight: cannot read: gone"); };
  auto s = read_flight_recorder_copies(4096, read, "gone");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kIo);
}

// The watchdog thread sets the process state (abort) while the main thread writes the phase: the
// phase read back is always one the main thread wrote, never a mix.
TEST_F(FlightRecorderTest, PhaseStaysWholeWhileAnotherThreadSetsTheProcessState) {
  auto w = make();
  std::atomic<bool> stop{false};
  std::thread main_thread([&] {
    for (int i = 0; !stop; ++i) w->set_phase(i % 2 ? "forward/block1/attn" : "backward/block0/mlp");
  });
  std::thread watchdog([&] {
    for (int i = 0; !stop; ++i) w->set_process_state(i % 2 ? ProcessState::kRunning : ProcessState::kAborted);
  });
  for (int i = 0; i < 200; ++i) {
    auto s = read_flight_recorder(file_);
    ASSERT_TRUE(s.ok());
    if (!s->live.torn && !s->live.phase.empty()) {
      EXPECT_TRUE(s->live.phase == "forward/block1/attn" || s->live.phase == "backward/block0/mlp") << s->live.phase;
    }
  }
  stop = true;
  main_thread.join();
  watchdog.join();
  // Both writers stopped: the word is even again (a lost increment would leave it odd for good).
  auto s = read_flight_recorder(file_);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->live.torn);
}

// Recorders written on an H100 (a finished d12 run and the NCCL plugin's files): nobody writes them
// any more, so the copies agree and the reader must give what one copy gives, with nothing torn.
TEST(FlightRecorderRealGpu, RecordersFromAGpuMachineReadAsOneCopyWithNothingTorn) {
  const std::filesystem::path root = RANKSCOPE_REAL_GPU_DATA;
  if (!std::filesystem::is_directory(root)) GTEST_SKIP() << root << " absent (real H100 data; not in every checkout)";
  int seen = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    if (e.path().extension() != ".flight") continue;
    ++seen;
    auto read = read_flight_recorder(e.path());
    ASSERT_TRUE(read.ok()) << read.status().to_string();
    const std::vector<uint8_t> bytes = testing::read_bytes(e.path());
    auto one = parse_flight_recorder(bytes, e.path().string());
    ASSERT_TRUE(one.ok()) << one.status().to_string();
    EXPECT_EQ(read->warnings, one->warnings) << e.path();
    EXPECT_FALSE(read->live.torn);
    EXPECT_EQ(read->live.process_state, one->live.process_state);
    EXPECT_EQ(read->live.step, one->live.step);
    ASSERT_EQ(read->threads.size(), one->threads.size()) << e.path();
    for (size_t t = 0; t < read->threads.size(); ++t) {
      EXPECT_EQ(read->threads[t].name, one->threads[t].name);
      EXPECT_EQ(read->threads[t].depth, one->threads[t].depth);
    }
    ASSERT_EQ(read->comms.size(), one->comms.size()) << e.path();
    for (size_t c = 0; c < read->comms.size(); ++c) {
      EXPECT_EQ(read->comms[c].name, one->comms[c].name);
      ASSERT_EQ(read->comms[c].ring.size(), one->comms[c].ring.size());
      for (size_t r = 0; r < read->comms[c].ring.size(); ++r) {
        EXPECT_FALSE(read->comms[c].ring[r].torn);
        EXPECT_EQ(read->comms[c].ring[r].range, one->comms[c].ring[r].range);
      }
    }
  }
  EXPECT_GE(seen, 1) << "no .flight file under " << root;
}

}  // namespace
}  // namespace rankscope::format
