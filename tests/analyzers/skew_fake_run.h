// skew_fake_run.h — fabricates small, deterministic run directories for the skew, scaling, trace
// and HTML tests, through the format library's own writers (so the bytes are the real format).
//
// Is: a lock-step simulator of a few ranks running a scripted step (ranges, compute, collectives
// on TP/DP groups laid out as Megatron does), with per-rank/per-step durations, counters and clock
// offsets chosen by the test. Each rank's times are written on its own clock (aligned minus its
// offset), so the analyzers must use the ClockRecord to line ranks up. Is not: `rankscope synth`
// (synth/) or a model of real training.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rankscope/format/event_stream.h"

namespace rankscope::testing {

struct FakeOp {
  enum Kind { kPush, kPop, kCompute, kCollective } kind = kCompute;
  std::string name;                                  // range name (push) or comm role "tp"/"dp"/"world"
  std::function<double(int rank, int64_t step)> ms;  // compute time, or transfer time of a collective
};

struct FakeRunSpec {
  int world_size = 2;
  int tp = 2;                    // TP groups are consecutive ranks; DP groups strided
  int64_t steps = 10;
  std::vector<FakeOp> script;    // one step
  std::function<std::vector<std::pair<std::string, double>>(int rank, int64_t step)> counters;
  std::function<int64_t(int rank)> clock_offset_ns;  // aligned = own + offset
  nlohmann::json model = nlohmann::json::object();
  nlohmann::json training = nlohmann::json::object();
  int64_t trace_first = -1, trace_last = -1;         // capture window: also write TraceRanges
  double idle_ms_before_step = 0.0;                  // gap between steps (not in any step)
  double kernel_fraction = 0.0;                      // RangeAggregate.kernel_ns = this x total (a GPU run)
};

// The scripted step of the brief: data, forward/embed, block0 attn and mlp (each ending with a TP
// all-reduce inside the range), forward/head, the backward mirror, grad_sync (DP all-reduce when
// dp > 1) and optimizer. `mlp_extra_ms(rank, step)` is added to forward/block0/mlp's compute.
std::vector<FakeOp> standard_step(int blocks, std::function<double(int, int64_t)> mlp_extra_ms,
                                  std::function<double(int, int64_t)> attn_ms = nullptr,
                                  std::function<double(int, int64_t)> mlp_ms = nullptr);

// Writes run.json and rankNNNNN.events for every rank into `dir` (created).
void write_fake_run(const std::filesystem::path& dir, const FakeRunSpec& spec);

// A one-rank run written by hand: run.json (world 1, the given run id and start) and rank 0's event
// stream writer, for tests that write the records themselves. Throws when the files cannot be made.
std::unique_ptr<format::EventStreamWriter> one_rank_run(const std::filesystem::path& dir, const std::string& run_id,
                                                       int64_t created_ns);

// A fresh empty directory under the system temp dir, unique per call.
std::filesystem::path fresh_temp_dir(const std::string& prefix);

// Validates `doc` against reports/schemas/<schema_file> with python3's jsonschema (Debian
// python3-jsonschema). "" when valid, the validator's message when not; nullopt when python3 or
// jsonschema is missing (the caller skips).
std::optional<std::string> schema_violation(const nlohmann::json& doc, const std::string& schema_file);

}  // namespace rankscope::testing
