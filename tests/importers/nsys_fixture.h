// nsys_fixture.h — test utility: writes Nsight Systems SQLite exports of a simulated training job,
// following the documented schema, in three flavours, and the same job as rankscope's probe would
// write its run directory.
//
// Is: a lock-step simulation of W ranks running a scripted step (NVTX ranges, each compute a kernel
// launched by cudaLaunchKernel then waited for; each collective an NCCL kernel that ends together on
// every member, plus jitter), and two writers of its timeline:
//  - write_nsys_fixture(): one export per rank. Flavours: 2024 (schema 3.13.2, ENUM tables, no
//    eventId), 2026 (schema 3.28.1, eventId, extra columns placed before existing ones, event type
//    ids that differ from the historical numbers so only ENUM lookup finds them, NCCL's NVTX
//    ranges), and one with no ENUM tables. Adversarial content (on by default): rows shuffled, a
//    range left open at the end, a range that started before the capture, a start/end range ended
//    on another thread, a second process whose correlation ids collide with the rank's, and one
//    rank's session clock off by `clock_error_ns`.
//  - write_probe_run(): the same timeline as the probe writes a run directory (ranges, GPU time per
//    range as nsys projects it, collectives, clock offsets), for comparisons.
// The expected figures (range counts, CPU and projected GPU time per step) come from the simulation
// itself, not from any SQL. Is not: nsys; no .nsys-rep is involved.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "rankscope/format/vocabulary.h"

namespace rankscope::nsys::testing {

enum class Flavour { k2024, k2026, kNoEnum };
const char* flavour_name(Flavour f);

enum class Identity { kMpiRanks, kRankMark, kEnvironment, kFileName };

using MsFn = std::function<double(int rank, int64_t step)>;

struct SimOp {
  enum Kind { kPush, kPop, kCompute, kCollective } kind = kCompute;
  std::string text;  // kPush: the range's NVTX text
  MsFn ms;           // kCompute: kernel time; kCollective: transfer time after the last arrival
  format::CollectiveOp op = format::CollectiveOp::kAllReduceSum;  // kCollective (all-to-all: its own stream)
};

// The step of skew_fake_run's standard_step (data, forward/embed, blocks of attn and mlp each with a
// TP all-reduce, head, the backward mirror, grad_sync, optimizer), plus an all-to-all in
// forward/moe when `alltoall`. `nested`: short names pushed inside each other (forward > block1 >
// mlp), as most programs do; else our full names (forward/block1/mlp) pushed flat.
std::vector<SimOp> standard_script(int blocks, bool nested, MsFn attn_ms = nullptr, MsFn mlp_ms = nullptr,
                                   MsFn mlp1_extra_ms = nullptr, bool alltoall = true);

struct FixtureSpec {
  Flavour flavour = Flavour::k2026;
  Identity identity = Identity::kRankMark;
  int world = 4;
  int64_t steps = 6;
  std::vector<SimOp> script;              // one iteration, inside the step range
  std::string domain = "rankscope";       // "" = the default domain
  std::string step_text = "step";
  bool step_payload = true;               // the step range carries its number as int64 payload
  std::function<int64_t(int rank)> clock_error_ns;  // error of the rank's session utcEpochNs
  double end_jitter_us = 60;              // collective kernels end within this of each other
  bool adversarial = true;
  bool nccl_ranges = false;               // NCCL's NVTX ranges around each collective (2026 default: on)
  bool sync_marks = false;                // rankscope:sync marks carrying the true time
  std::function<std::string(int rank)> file_name;  // default by identity
  bool one_export = false;                // every rank's processes in one export (nsys profile mpirun ...)
  uint64_t seed = 7;
};

// Per rank, per step index, per range name: {count, CPU ns, projected GPU ns}.
struct Expected {
  std::vector<std::vector<std::map<std::string, std::array<int64_t, 3>>>> ranges;
  std::vector<int64_t> clock_error_ns;          // by rank
  std::vector<std::vector<int64_t>> step_ns;    // by rank, by step index: the step range's length
  std::vector<std::string> files;               // by rank
};

// Writes the exports into `dir` (created) and returns their paths, by rank (one path with one_export).
std::vector<std::filesystem::path> write_nsys_fixture(const std::filesystem::path& dir, const FixtureSpec& spec,
                                                      Expected* expected = nullptr);

// The same job as a probe-written run directory (run.json with training.seq_len/batch when > 0).
void write_probe_run(const std::filesystem::path& dir, const FixtureSpec& spec, int64_t seq_len = 0, int64_t batch = 0);

}  // namespace rankscope::nsys::testing
