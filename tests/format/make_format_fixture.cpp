// make_format_fixture.cpp — writes the small run directory checked in under
// tests/fixtures/format/v<N>/ for the current schema versions. Run it once when a schema version is
// bumped (`make_format_fixture tests/fixtures/format/v2`) and keep the old directories: every
// supported version's fixture stays in the tests (fixture_compat_test.cpp).
#include <cstdio>
#include <filesystem>

#include "rankscope/format/event_stream.h"
#include "rankscope/format/flight_recorder_writer.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/format/run_metadata.h"

using namespace rankscope::format;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_format_fixture OUT_DIR\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  RunMetadata m;
  m.run_id = "fixture";
  m.created_ns = 1'700'000'000'000'000'000;
  m.program = "make_format_fixture";
  m.world_size = 2;
  m.tp = 2;
  m.groups = {{"world", {0, 1}}, {"tp0", {0, 1}}};
  m.hosts = {"fixture-host", "fixture-host"};
  if (auto s = write_run_metadata(dir, m); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.to_string().c_str());
    return 1;
  }
  FlightLayoutParams small;
  small.max_threads = 2;
  small.max_range_depth = 4;
  small.max_comms = 2;
  small.ring_entries = 4;
  small.max_params = 2;
  for (int rank = 0; rank < 2; ++rank) {
    const int64_t t0 = m.created_ns;
    auto fr = FlightRecorderWriter::create(flight_recorder_path(dir, rank),
                                           {rank, 2, rank, 1000 + rank, "fixture-host", "fixture", t0}, small);
    auto ev = EventStreamWriter::create(event_stream_path(dir, rank), {kEventsSchemaVersion, rank, 2, t0, "fixture"});
    if (!fr.ok() || !ev.ok()) return 1;
    auto& f = **fr;
    auto& e = **ev;
    const int th = f.claim_thread_slot(1, "main");
    const int tp = f.register_comm("tp0", 2, rank);
    const int wte = f.register_param("wte.weight", 0, 64);
    f.set_process_state(ProcessState::kRunning);
    // Step 0 completes on both ranks; in step 1 rank 1 is stuck in forward/embed and never calls
    // the all-reduce that rank 0 waits in.
    for (int64_t step = 0; step < 2; ++step) {
      const int64_t b = t0 + step * 1'000'000;
      f.set_step(step, b);
      f.push_range(th, "step", b);
      f.push_range(th, "forward/embed", b + 10);
      if (step == 1 && rank == 1) break;
      const uint64_t seq = f.collective_enqueue(tp, {CollectiveOp::kAllReduceSum, DataType::kFloat32, 256, 1024, -1},
                                                step, "forward/embed", b + 100 + rank * 50);
      if (step == 1) break;
      f.collective_complete(tp, seq, b + 200);
      f.pop_range(th);
      f.begin_backward(step, b + 300);
      f.grad_arrived(wte, b + 400);
      f.end_backward();
      f.pop_range(th);
      StepRecord s;
      s.step = step;
      s.begin_ns = b;
      s.end_ns = b + 500;
      s.ranges.push_back({e.intern(NameKind::kRange, "forward/embed"), 1, 190 - rank * 50, 0});
      s.collectives.push_back({e.intern(NameKind::kComm, "tp0"), uint8_t(CollectiveOp::kAllReduceSum),
                               uint8_t(DataType::kFloat32), uint8_t(CollectiveState::kCompleted), 0,
                               e.intern(NameKind::kRange, "forward/embed"), 0, seq, 1024, b + 100 + rank * 50,
                               b + 100 + rank * 50, b + 200});
      s.counters.push_back({e.intern(NameKind::kCounter, "embed.local_tokens"), 0, rank == 0 ? 3942.0 : 154.0});
      e.write_step(s);
      if (!e.flush().ok()) return 1;
    }
    f.heartbeat(t0 + 2'000'000);
  }
  std::printf("wrote %s\n", dir.c_str());
  return 0;
}
