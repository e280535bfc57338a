// probe_mpi_check.cpp — a pure-probe multi-process check run under mpirun (ctest label `mpi`).
//
// Every rank records steps, ranges and real MPI allreduces (on "world" and on its "dp{k}" group)
// through the probe, aligns clocks over MPI, and shuts down; then rank 0 reads the whole run
// directory back and checks: every rank's flight recorder is readable and finished, collectives
// match by (communicator, seq) across ranks and are all completed, each event stream holds every
// step, and every non-root rank has a clock offset with an uncertainty. Exit status 0 = pass.
#include <mpi.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "rankscope/format/clock.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/run_directory.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/probe/probe.h"

namespace rp = rankscope::probe;
namespace rf = rankscope::format;

namespace {

constexpr int kSteps = 5;
constexpr int kClockTag = 77;

class MpiClockExchange final : public rp::ClockExchange {
 public:
  int64_t ping_root(int64_t t1_ns) override {
    int64_t t2 = 0;
    MPI_Send(&t1_ns, 1, MPI_INT64_T, 0, kClockTag, MPI_COMM_WORLD);
    MPI_Recv(&t2, 1, MPI_INT64_T, 0, kClockTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return t2;
  }
  void serve(int peer) override {
    int64_t t1 = 0;
    MPI_Recv(&t1, 1, MPI_INT64_T, peer, kClockTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int64_t t2 = rankscope::now_unix_ns();
    MPI_Send(&t2, 1, MPI_INT64_T, peer, kClockTag, MPI_COMM_WORLD);
  }
  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }
};

int failures = 0;
#define CHECK(cond, ...)                               \
  do {                                                 \
    if (!(cond)) {                                     \
      ++failures;                                      \
      std::fprintf(stderr, "CHECK failed: %s: ", #cond); \
      std::fprintf(stderr, __VA_ARGS__);               \
      std::fprintf(stderr, "\n");                      \
    }                                                  \
  } while (0)

void recorded_allreduce(rp::Probe& probe, rp::CommHandle comm, MPI_Comm mpi_comm, std::vector<float>& buf) {
  rf::CollectiveDesc desc;
  desc.op = rf::CollectiveOp::kAllReduceSum;
  desc.dtype = rf::DataType::kFloat32;
  desc.count = buf.size();
  desc.bytes = buf.size() * sizeof(float);
  rp::CollectiveHandle h = probe.collective_enqueue(comm, desc);
  int rc = MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(buf.size()), MPI_FLOAT, MPI_SUM, mpi_comm);
  probe.collective_complete(h, rc != MPI_SUCCESS);
}

void run_rank(const std::string& run_dir, int rank, int world) {
  rp::Options o;
  o.read_environment = false;
  o.run_dir = run_dir;
  o.run_id = "probe-mpi-check";
  o.rank = rank;
  o.world_size = world;
  o.watchdog_timeout_s = 60;
  auto created = rp::Probe::create(o);
  if (!created.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, created.status().to_string().c_str());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  rp::Probe& probe = **created;
  MpiClockExchange exchange;
  rankscope::Status aligned = probe.align_clocks(exchange, 8);
  CHECK(aligned.ok(), "rank %d align_clocks: %s", rank, aligned.to_string().c_str());

  MPI_Comm dp_comm;
  int dp_group = rank % 2;
  MPI_Comm_split(MPI_COMM_WORLD, dp_group, rank, &dp_comm);
  int dp_rank = 0, dp_size = 0;
  MPI_Comm_rank(dp_comm, &dp_rank);
  MPI_Comm_size(dp_comm, &dp_size);
  rp::CommHandle world_h = probe.register_comm("world", world, rank);
  rp::CommHandle dp_h = probe.register_comm("dp" + std::to_string(dp_group), dp_size, dp_rank);

  std::vector<float> grads(4096, 1.0f), loss(1, 1.0f);
  for (int step = 0; step < kSteps; ++step) {
    probe.begin_step(step);
    {
      rp::ScopedRange s(&probe, "step");
      { rp::ScopedRange f(&probe, "forward/block0/attn"); }
      { rp::ScopedRange b(&probe, "backward/block0/attn"); }
      {
        rp::ScopedRange g(&probe, "grad_sync");
        recorded_allreduce(probe, dp_h, dp_comm, grads);
      }
      recorded_allreduce(probe, world_h, MPI_COMM_WORLD, loss);
    }
    probe.end_step();
  }
  probe.shutdown();
  MPI_Comm_free(&dp_comm);
}

void verify(const std::string& run_dir, int world) {
  auto run = rf::open_run_directory(run_dir);
  CHECK(run.ok(), "open_run_directory: %s", run.ok() ? "" : run.status().to_string().c_str());
  if (!run.ok()) return;
  CHECK(run->ranks_readable() == world, "%d of %d ranks readable", run->ranks_readable(), world);
  std::map<std::string, std::vector<uint64_t>> issued;  // comm -> next_seq per rank
  for (const rf::RankFiles& r : run->ranks) {
    if (!r.flight) continue;
    const rf::FlightRecorderSnapshot& f = *r.flight;
    CHECK(f.live.process_state == rf::ProcessState::kFinished, "rank %d not finished", r.rank);
    CHECK(f.live.step == kSteps - 1, "rank %d step %lld", r.rank, static_cast<long long>(f.live.step));
    if (r.rank == 0) {
      CHECK(f.live.clock_offset_ns == 0 && f.live.clock_uncertainty_ns == 0, "rank 0 clock");
    } else {
      CHECK(f.live.clock_uncertainty_ns >= 0, "rank %d has no clock estimate", r.rank);
    }
    for (const rf::CommSnapshot& c : f.comms) {
      issued[c.name].push_back(c.next_seq);
      CHECK(c.completed_count == c.next_seq, "rank %d %s: %llu of %llu completed", r.rank, c.name.c_str(),
            static_cast<unsigned long long>(c.completed_count), static_cast<unsigned long long>(c.next_seq));
      for (const rf::CollectiveSnapshot& s : c.ring) {
        CHECK(s.state == rf::CollectiveState::kCompleted, "rank %d %s #%llu not completed", r.rank, c.name.c_str(),
              static_cast<unsigned long long>(s.seq));
      }
    }
    auto es = rf::read_event_stream(r.events_path);
    CHECK(es.ok(), "rank %d event stream: %s", r.rank, es.ok() ? "" : es.status().to_string().c_str());
    if (!es.ok()) continue;
    CHECK(es->scan.ended, "rank %d stream has no END", r.rank);
    CHECK(es->steps.size() == static_cast<size_t>(kSteps), "rank %d has %zu steps", r.rank, es->steps.size());
    for (size_t i = 0; i < es->steps.size(); ++i) {
      const rf::StepRecord& step = es->steps[i];
      CHECK(step.collectives.size() == 2, "rank %d step %zu: %zu collectives", r.rank, i, step.collectives.size());
      for (const rf::CollectiveEvent& e : step.collectives) {
        CHECK(e.seq == i, "rank %d step %zu: %s seq %llu", r.rank, i, std::string(es->name(e.comm_id)).c_str(),
              static_cast<unsigned long long>(e.seq));
        CHECK(e.end_ns >= e.enqueue_ns && e.end_ns != 0, "rank %d step %zu: bad times", r.rank, i);
      }
    }
  }
  CHECK(issued["world"].size() == static_cast<size_t>(world), "world on %zu ranks", issued["world"].size());
  for (const auto& [comm, counts] : issued) {
    for (uint64_t n : counts) CHECK(n == kSteps, "%s issued %llu", comm.c_str(), static_cast<unsigned long long>(n));
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (argc < 2) {
    if (rank == 0) std::fprintf(stderr, "usage: probe_mpi_check RUN_DIR\n");
    MPI_Finalize();
    return 2;
  }
  run_rank(argv[1], rank, world);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    verify(argv[1], world);
    std::printf("probe_mpi_check: %d ranks, %d steps: %s (%d failed checks)\n", world, kSteps,
                failures == 0 ? "PASS" : "FAIL", failures);
  }
  int local = failures, total = 0;
  MPI_Allreduce(&local, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
