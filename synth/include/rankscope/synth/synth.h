// synth.h — fabricates a run directory of a GPT-2-like job, healthy or with one fault.
//
// Is: a deterministic simulation of a TP x DP training job (tp{k} groups of consecutive ranks,
// dp{k} groups strided, as Megatron lays them out) that writes run.json, one flight recorder and
// one event stream per rank through the format library's writers, exactly as the probe would:
// ranges named as in design.md §2, every collective with its (communicator, seq), arrival and finish
// times, gradient arrivals with DDP buckets and the `embed.local_tokens` counter. A fault of the
// same kinds as gpt2-train's `--inject` (stall, skip, resize, crash, drop-grad, delay) freezes the
// job the way that fault would. Used for scale tests and benchmarks (1024 ranks x 1000 steps stay
// well under 1 GB) and by users to test their pipelines.
// Is not: a model of any real numerics, nor a substitute for the end-to-end tests on gpt2-train.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/format/status.h"

namespace rankscope::synth {

// kA2aMiscount: (MoE) one rank expects `delta` rows more from one peer in a combine all_to_all_v
// than that peer sends, as gpt2-train's --inject a2a-miscount; the ep group blocks inside it.
enum class FaultKind { kNone, kStall, kSkip, kResize, kCrash, kDropGrad, kDelay, kA2aMiscount };

std::string_view fault_kind_name(FaultKind kind);

// One fault. Unset fields (-1 / empty) get defaults that fit the layout (see resolve_fault).
struct FaultSpec {
  FaultKind kind = FaultKind::kNone;
  int rank = -1;
  int64_t step = -1;
  std::string range;    // stall, crash (optional: the step itself), delay
  std::string comm;     // skip, resize
  int64_t seq = -1;     // skip, resize
  double factor = 2.0;  // resize
  std::string param;    // drop-grad
  double ms = 20.0;     // delay
  int64_t delta = 0;    // a2a-miscount: rows (negative: fewer); 0 -> 1
  int peer = -1;        // a2a-miscount: the EP rank (in ep{k}) whose rows are miscounted; -1 -> the next one
};

// Parses "KIND:key=value,..." (the keys of gpt2-train's --inject: rank, step, range, comm, seq,
// factor, param, ms, delta, peer). Errors name the bad part and list what is allowed.
Result<FaultSpec> parse_fault(std::string_view text);
// "stall:rank=1,range=forward/embed,step=5" for a resolved spec.
std::string describe_fault(const FaultSpec& fault);

struct SynthOptions {
  int ranks = 2;
  int steps = 10;
  int tp = 1;      // tensor-parallel group size; must divide ranks
  int layers = 2;  // transformer blocks (ranges and collectives per step grow with it)
  FaultSpec fault;
  double idle_s = 60;       // how long the job has been stuck when the snapshot is taken
  int ranks_per_host = 8;   // hosts are named synth-node{k}
  bool local_host = false;  // every rank claims this machine's host name (pid checks apply)
  int live_pid = 0;         // pid written for ranks that are alive; 0: fake pids 100000+rank
  uint64_t seed = 1;        // per-rank jitter
  // A step-wide factor on every rank's compute, uniform in 1 +- step_jitter/2, drawn per step: a
  // noisier run whose typical step is the same (the machine, not the job, varies).
  double step_jitter = 0;
  // The links' bandwidth a collective's payload crosses (ring all-reduce: 2(n-1)/n of it), GB/s.
  double link_gbps = 5.0;
  // Host time at the start of every step before any range (work the program does not mark: a data
  // loader outside a range): idle in the step's breakdown.
  double host_gap_ms = 0;
  int64_t start_ns = 0;        // 0: chosen so the snapshot is "now"
  uint32_t ring_entries = 64;  // collectives kept per communicator in the flight recorders
  std::vector<std::string> command_line;
  // Mixture of experts; moe_experts 0 is the dense MLP. Experts are sharded over ep{k}
  // groups of `ep` data-parallel ranks (Megatron layout, as gpt2-train --ep); block i is an MoE block
  // when i % moe_every == 0. Its MLP range is forward|backward/block{i}/moe (not .../mlp), with the
  // phases .../moe/router|dispatch|experts|combine inside; the dispatch is an all_to_all of counts then an all_to_all_v
  // of rows (with per-peer counts in the flight recorder), the combine the reverse all_to_all_v; expert compute time
  // follows the rows a rank receives. Counters per step: moe.tokens_received, moe.tokens_dropped,
  // moe.aux_loss, moe.expert{e}.routed (summed over the MoE blocks).
  int moe_experts = 0;
  int moe_top_k = 2;
  int moe_every = 1;
  int ep = 1;
  int hot_expert = -1;  // route skew: this expert's router weight is multiplied by 1 + hot_bias
  double hot_bias = 2.0;
  bool moe() const { return moe_experts > 0; }
};

struct SynthSummary {
  FaultSpec fault;             // resolved: every default filled in
  int64_t hang_step = -1;      // step the fault froze the job at; -1 when it finished
  uint64_t bytes_written = 0;  // all files of the run directory
  int64_t snapshot_ns = 0;     // the time the run directory describes (rank 0's clock)
};

// Checks `options` and fills the fault's defaults for this layout, without writing anything.
Result<FaultSpec> resolve_fault(const SynthOptions& options);

// Writes the run directory `dir` (created; existing rank files are replaced).
Result<SynthSummary> write_synthetic_run(const std::filesystem::path& dir, const SynthOptions& options);

}  // namespace rankscope::synth
