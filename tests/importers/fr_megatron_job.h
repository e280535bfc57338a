// fr_megatron_job.h — test utility: PyTorch Flight Recorder dumps (format 2.9, one pickle per rank)
// of a simulated Megatron-LM job with tensor, pipeline, data and expert parallelism, healthy or hung
// by an injected fault, shaped like the dumps of the real 16-GPU Megatron MoE job in
// tests/fixtures/torch_fr/real-megatron-moe (NVIDIA/nvidia-resiliency-ext's FR traces).
//
// Is: a generator written from the rules of the sources it imitates, each cited where it is used in
// fr_megatron_job.cpp —
//   - the process groups of Megatron-LM's parallel_state.initialize_model_parallel (core_v0.14.0),
//     named by torch's global group counter and numbered per process (pg_id) the way
//     ProcessGroupNCCL numbers them, with pg_config / pg_status holding only the groups whose
//     communicator was used, as FlightRecorder's record_pg_ranks / record do;
//   - a 1F1B pipeline schedule (schedules.forward_backward_pipelining_without_interleaving) with
//     p2p_communication._p2p_ops (or _batched_p2p_ops), per-layer sequence-parallel and MoE
//     collectives, and the gradient / optimizer collectives at the end of each iteration;
//   - ProcessGroupNCCL's sequence numbers (collective_seq_id, p2p_seq_id, op_id, the work's seq
//     that pg_status reports) and FlightRecorder's dump (ring, only-active filter, states, keys);
//   - an event-driven progress model: hosts enqueue in program order and block only at host-sync
//     points, GPUs run their ops in enqueue order, a collective completes when every member's GPU
//     reached it, a send/recv pair when both sides did; the job runs to its fixpoint (the hang).
// Deterministic: the same spec gives the same bytes.
//
// Is not: PyTorch or Megatron (no tensors, no timing model beyond plausible clocks), nor a
// reproduction of the real job's interleaved (virtual-pipeline) schedule; and it makes no claim
// about what hangdoctor should conclude beyond naming the ranks the fault was injected on.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace rankscope::torch_fr::testing {

struct MegatronLayout {
  int tp = 4, pp = 2, dp = 2;
  bool moe = true;               // MoE layers: expert parallelism over tp*dp ranks of a stage (EP = tp*dp,
                                 // expert tensor parallelism 1, as the real job: EP groups [0..7], [8..15])
  int microbatches = 4;          // per iteration and data-parallel replica
  int layers_per_stage = 2;
  int hidden = 5120;
  int seq = 8192;                // sequence length of a microbatch (batch size 1); with sequence parallelism
                                 // each TP rank holds seq/tp tokens: 2048-row tensors for TP4, as the real dumps
  int num_experts = 16;          // router width: the [[16]] -> [[16 * EP]] token-count all-gather
  int gpus_per_node = 8;         // node = rank / gpus_per_node: clock offsets, autograd thread names
  bool fp8 = true;               // Transformer Engine fp8: Byte all-gathers and the amax all_reduces
  bool batch_p2p_comm = false;   // Megatron's _batched_p2p_ops (batch_isend_irecv) instead of _p2p_ops

  int world() const { return tp * pp * dp; }
  int ep() const { return moe ? tp * dp : 1; }
};

// Each fault hits in iteration fault_iteration at the first op of the backward of microbatch
// microbatches/2 (kA2aCountMismatch: that microbatch's first MoE dispatch).
enum class MegatronFault {
  kNone,               // healthy: dumped at a quiet point after the last iteration, nothing open (with
                       // only_active no entries at all; with batch_p2p_comm the per-op send/recv
                       // records stay open, as PyTorch never completes them)
  kGpuError,           // the rank's watchdog stops seeing completions; its GPU still runs what its host
                       // enqueued, and the host blocks at its next host-sync point (the MoE token-count
                       // copy to the host, the optimizer's .item())
  kGilHeld,            // the rank's host stops enqueueing; what it enqueued completes
  kKilled,             // the rank's host stops; its GPU had drained to the host's last sync point and
                       // what was enqueued after it never runs; it writes no dump
  kStageStall,         // every rank of one pipeline stage stops enqueueing at the same point
  kA2aCountMismatch,   // one rank's MoE dispatch all_to_all has one input row too many: every EP member
                       // enqueues it, none completes it
};

struct MegatronJobSpec {
  MegatronLayout layout;
  MegatronFault fault = MegatronFault::kNone;
  // The ranks the fault hits. kStageStall: the stage of the first rank listed (all its ranks stall);
  // kA2aCountMismatch: the first rank listed. Empty: rank world/2 + 1 (rank 9 of 16, as the real job).
  std::vector<int> fault_ranks;
  int fault_iteration = 3;   // 1-based
  int iterations = 5;        // what a healthy job runs; a hung job stops earlier
  bool only_active = true;   // TORCH_INCLUDE_ONLY_ACTIVE: only entries not completed (as the real dumps)
  int ring = 2000;           // TORCH_FR_BUFFER_SIZE: entries the recorder keeps
  uint64_t seed = 1;         // MoE routing and clock jitter
};

struct MegatronJob {
  std::map<int, std::vector<uint8_t>> dumps;  // rank -> pickle bytes; a killed rank has none
  std::vector<int> culprits;                  // the ranks hangdoctor must name (empty for kNone)
  std::string description;                    // one paragraph: layout, groups, fault, where each rank stopped
};

MegatronJob megatron_job(const MegatronJobSpec& spec);

// The same job written to DIR/<prefix><rank> one rank at a time (for large jobs: no dump is kept in
// memory). Returns the job without its dumps, and the number of bytes written through `bytes_written`.
MegatronJob write_megatron_job(const MegatronJobSpec& spec, const std::filesystem::path& dir,
                               const std::string& prefix = "_dump_", uint64_t* bytes_written = nullptr);

// One process group as Megatron creates it and torch names it.
struct MegatronGroup {
  std::string name;         // torch's global group counter ("0" is the default group)
  std::string desc;         // Megatron's group_desc ("default_pg" for the default group)
  std::vector<int> ranks;   // global ranks, ascending
  int64_t timeout_ms = 0;
};

// Every group of the layout in creation order (every rank creates every group, members or not).
std::vector<MegatronGroup> megatron_groups(const MegatronLayout& layout);

}  // namespace rankscope::torch_fr::testing
