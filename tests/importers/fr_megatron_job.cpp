// fr_megatron_job.cpp — the Megatron-LM Flight Recorder dump generator of fr_megatron_job.h.
//
// Is: four steps, each from the source it imitates (the rule cited where it is applied):
//   1. the process groups, as Megatron-LM core_v0.14.0 megatron/core/parallel_state.py
//      initialize_model_parallel creates them and torch names and numbers them;
//   2. each rank's program: every communication op in the order its host enqueues it, with the
//      counters ProcessGroupNCCL records (collective_seq_id, p2p_seq_id, op_id, the Work's seq);
//   3. the progress model, run to its fixpoint (the hang) or to the end (healthy);
//   4. each live rank's dump as FlightRecorder::dump writes it in format 2.9 (the key set and order
//      of the real dumps in tests/fixtures/torch_fr/real-megatron-moe), pickled by TorchStylePickler.
// Is not: a timing model (clocks are plausible and monotonic, not measured), nor Megatron's
// interleaved schedule that the real job ran (virtual pipeline with overlapped p2p: its dumps
// interleave forward and backward work of different microbatches); the gradient buckets and the optimizer's
// reductions at the end of an iteration are plausible stand-ins (fewer per iteration than the real
// dump's counters imply), not Megatron's exact sequence.
//
// Checked: the group table equals what megatron-core 0.16.1's initialize_model_parallel asks
// new_group for (names, descs, members, order; 16 to 1024 ranks), except that 0.16.1 gives the
// expert-parallel group the job's timeout; the TP4 PP2 DP2 job's pg_config, pg_status keys and entry
// keys equal the real dumps' on all 16 ranks (fr_megatron_job_test).
#include "fr_megatron_job.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "torch_style_pickler.h"

namespace rankscope::torch_fr::testing {
namespace {

using pickle::Kind;
using pickle::Value;

// ------------------------------------------------------------------------------------------------
// Small deterministic helpers.

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
uint64_t mix(std::initializer_list<uint64_t> parts) {
  uint64_t h = 0x51ed270b27a3f1c5ULL;
  for (uint64_t p : parts) h = splitmix64(h ^ p);
  return h;
}
double unit_interval(uint64_t h) { return double(h >> 11) * (1.0 / 9007199254740992.0); }

std::string ranks_text(const std::vector<int>& ranks) {  // FlightRecorder's ranks_str: "[0, 1, 2]"
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "]";
}

// ------------------------------------------------------------------------------------------------
// 1. Process groups.

// What each group is for; a rank is in at most one group of each role.
enum Role : uint8_t {
  kWorld, kDpCp, kDp, kCp, kMp, kTp, kPp, kEmb, kPosEmb, kTdpCp, kTdp, kTcp,
  kEp, kEtp, kEtmp, kEtmpp, kEdp, kIdo, kRoleCount
};

struct Group {
  std::string name, desc;
  std::vector<int> ranks;  // ascending: torch's _new_group_with_tag sorts them
  int64_t timeout_ms = 0;
  Role role = kWorld;
};

// parallel_state.generate_masked_orthogonal_rank_groups, line for line.
std::vector<std::vector<int>> masked_rank_groups(int world, const std::vector<int>& sizes, const std::vector<bool>& mask) {
  auto prefix_product = [](const std::vector<int>& a) {
    std::vector<int> r{1};
    for (int v : a) r.push_back(r.back() * v);
    return r;
  };
  auto decompose = [&](int index, const std::vector<int>& shape) {
    const auto stride = prefix_product(shape);
    std::vector<int> idx(shape.size());
    for (size_t i = 0; i < shape.size(); ++i) idx[i] = (index / stride[i]) % shape[i];
    return idx;
  };
  auto inner = [](const std::vector<int>& a, const std::vector<int>& b) {
    int s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
  };
  std::vector<int> masked_shape, unmasked_shape, masked_stride, unmasked_stride;
  const auto global_stride = prefix_product(sizes);
  for (size_t i = 0; i < sizes.size(); ++i) {
    (mask[i] ? masked_shape : unmasked_shape).push_back(sizes[i]);
    (mask[i] ? masked_stride : unmasked_stride).push_back(global_stride[i]);
  }
  const int group_size = prefix_product(masked_shape).back();
  std::vector<std::vector<int>> groups;
  for (int group_index = 0; group_index < world / group_size; ++group_index) {
    const auto group_idx = decompose(group_index, unmasked_shape);
    std::vector<int> ranks;
    for (int rank_in_group = 0; rank_in_group < group_size; ++rank_in_group)
      ranks.push_back(inner(decompose(rank_in_group, masked_shape), masked_stride) + inner(group_idx, unmasked_stride));
    groups.push_back(std::move(ranks));
  }
  return groups;
}

// parallel_state.RankGenerator with Megatron's default order "tp-cp-ep-dp-pp".
struct RankGenerator {
  int world;
  std::vector<std::string> tokens{"tp", "cp", "ep", "dp", "pp"};
  std::vector<int> sizes;
  RankGenerator(int tp, int ep, int dp, int pp, int cp) : world(tp * ep * dp * pp * cp), sizes{tp, cp, ep, dp, pp} {}
  std::vector<std::vector<int>> get_ranks(std::string_view token) const {
    std::vector<bool> mask(tokens.size(), false);
    size_t start = 0;
    while (start <= token.size()) {
      const size_t dash = std::min(token.find('-', start), token.size());
      const auto t = token.substr(start, dash - start);
      for (size_t i = 0; i < tokens.size(); ++i)
        if (tokens[i] == t) mask[i] = true;
      start = dash + 1;
    }
    return masked_rank_groups(world, sizes, mask);
  }
};

// Megatron's distributed_timeout_minutes in the real job: 3 (every entry's timeout_ms is 180000),
// except the expert-parallel group, which core_v0.14.0's parallel_state creates without timeout= and
// so gets torch's default NCCL timeout of 10 minutes (the real all_to_all entries: timeout_ms 600000;
// megatron-core 0.16.1 passes timeout= there too).
constexpr int64_t kTimeoutMs = 180000;
constexpr int64_t kDefaultNcclTimeoutMs = 600000;

std::vector<Group> build_groups(const MegatronLayout& L) {
  const int world = L.world();
  std::vector<Group> groups;
  // torch.distributed.new_group names a group by the global counter _world.group_count, which every
  // rank increments for every new_group call, member or not: names agree across ranks. The default
  // group is "0" with desc "default_pg" (init_process_group).
  auto add = [&](std::vector<int> ranks, const char* desc, Role role, int64_t timeout = kTimeoutMs) {
    std::sort(ranks.begin(), ranks.end());
    groups.push_back({std::to_string(groups.size()), desc, std::move(ranks), timeout, role});
  };
  std::vector<int> all(world);
  std::iota(all.begin(), all.end(), 0);
  add(all, "default_pg", kWorld);
  // initialize_model_parallel with context_parallel_size 1, create_gloo_process_groups False (the real
  // job has no gloo group: names 1..8 are consecutive DATA_PARALLEL_GROUP_WITH_CP groups) and
  // num_distributed_optimizer_instances 1. The expert rank generator has expert tensor parallelism 1
  // and expert parallelism tp*dp, so expert data parallelism is world / (ep * pp) = 1.
  const RankGenerator decoder(L.tp, 1, L.dp, L.pp, 1);
  const int etp = L.moe ? 1 : L.tp, ep = L.ep(), edp = world / (etp * ep * L.pp);
  const RankGenerator expert(etp, ep, edp, L.pp, 1);
  for (auto& r : decoder.get_ranks("dp-cp")) add(r, "DATA_PARALLEL_GROUP_WITH_CP", kDpCp);
  for (auto& r : decoder.get_ranks("dp")) add(r, "DATA_PARALLEL_GROUP", kDp);
  for (auto& r : decoder.get_ranks("cp")) add(r, "CONTEXT_PARALLEL_GROUP", kCp);
  for (auto& r : decoder.get_ranks("tp-pp")) add(r, "MODEL_PARALLEL_GROUP", kMp);
  for (auto& r : decoder.get_ranks("tp")) add(r, "TENSOR_MODEL_PARALLEL_GROUP", kTp);
  for (auto& r : decoder.get_ranks("pp")) {
    // One loop creates the pipeline group, then default_embedding_ranks (first and last stage) and
    // default_position_embedding_ranks (first stage) of it: names 39, 40, 41 for [0, 8] in the real job.
    add(r, "PIPELINE_MODEL_PARALLEL_GROUP", kPp);
    add(r.size() == 1 ? std::vector<int>{r[0]} : std::vector<int>{r.front(), r.back()}, "EMBEDDING_GROUP", kEmb);
    add({r.front()}, "POSITION_EMBEDDING_GROUP", kPosEmb);
  }
  for (auto& r : decoder.get_ranks("tp-dp-cp")) add(r, "TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP", kTdpCp);
  for (auto& r : decoder.get_ranks("tp-dp")) add(r, "TENSOR_AND_DATA_PARALLEL_GROUP", kTdp);
  for (auto& r : decoder.get_ranks("tp-cp")) add(r, "TENSOR_AND_CONTEXT_PARALLEL_GROUP", kTcp);
  for (auto& r : expert.get_ranks("ep")) add(r, "EXPERT_MODEL_PARALLEL_GROUP", kEp, kDefaultNcclTimeoutMs);
  for (auto& r : expert.get_ranks("tp")) add(r, "EXPERT_TENSOR_PARALLEL_GROUP", kEtp);
  for (auto& r : expert.get_ranks("tp-ep")) add(r, "EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP", kEtmp);
  for (auto& r : expert.get_ranks("tp-ep-pp")) add(r, "EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP", kEtmpp);
  for (auto& r : expert.get_ranks("dp")) add(r, "EXPERT_DATA_PARALLEL_GROUP", kEdp);
  // "build the intra distributed optimizer instance group": the tp-ep-pp groups concatenated, one
  // group per intra_partial_expert_data_parallel_size of them (= edp with one optimizer instance).
  std::vector<int> instance;
  int counted = 0;
  for (auto& r : expert.get_ranks("tp-ep-pp")) {
    instance.insert(instance.end(), r.begin(), r.end());
    if (++counted % edp == 0) {
      add(instance, "INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP", kIdo);
      instance.clear();
    }
  }
  return groups;
}

// ------------------------------------------------------------------------------------------------
// 2. Programs.

enum class OpKind : uint8_t {
  kCollective,
  kSend,
  kRecv,
  kBatchMember,  // a send/recv inside startCoalescing..endCoalescing: recorded with no events
  kBatchWork,    // endCoalescing's Work, "nccl:coalesced"
};

// What an entry says about its tensors, shared by the ops that say the same.
struct Signature {
  std::string profiling_name;
  std::vector<int64_t> in, out;  // one tensor each; `tensors` false: none (the coalesced Work)
  const char* in_dtype = "";
  const char* out_dtype = "";
  bool tensors = true;
};

struct Op {
  int32_t group = 0;     // index into the group table
  int32_t sig = 0;       // index into the signature table
  int32_t peer = -1;     // send/recv: the other side's global rank
  int32_t inst = -1;     // the matched instance (collective or send/recv pair); -1 for the Work
  int32_t unit_last = 0; // last op of the GPU unit this op belongs to (a batch runs as one unit)
  int64_t coll_seq = 0;  // collective_seq_id as recorded
  int64_t p2p_seq = 0;   // p2p_seq_id as recorded
  int64_t op_id = 0;
  int64_t work_seq = -1; // the Work's seq_ (what pg_status reports); -1 for a record that is no Work
  OpKind kind = OpKind::kCollective;
  bool backward_thread = false;  // enqueued from the autograd engine's device thread
  bool host_sync_after = false;  // the host waits for this op's completion before going on
};

struct Coords {
  int tp_rank, dp_rank, pp_rank;
  std::array<int32_t, kRoleCount> group;   // group index per role, -1 when not a member
  std::array<int32_t, kRoleCount> pg_id;   // process-local pg_id per role, -1 when not a member
};

struct Ctx {
  MegatronJobSpec spec;
  MegatronLayout L;
  int world = 0, T = 0, fault_mb = 0;
  std::vector<Group> groups;
  std::vector<Coords> coords;
  std::vector<Signature> sigs;
  std::unordered_map<std::string, int32_t> sig_index;

  int32_t signature(const std::string& name, std::vector<int64_t> in, const char* din, std::vector<int64_t> out,
                    const char* dout, bool tensors = true) {
    std::string key = name;
    key.push_back('|');
    for (auto d : in) key += std::to_string(d) + ',';
    key += din;
    key.push_back('|');
    for (auto d : out) key += std::to_string(d) + ',';
    key += dout;
    if (!tensors) key += "|none";
    auto [it, fresh] = sig_index.emplace(std::move(key), int32_t(sigs.size()));
    if (fresh) sigs.push_back({name, std::move(in), std::move(out), din, dout, tensors});
    return it->second;
  }
};

constexpr const char* kBF16 = "BFloat16";
constexpr const char* kF32 = "Float";
constexpr const char* kI64 = "Long";
constexpr const char* kU8 = "Byte";
constexpr const char* kI32 = "Int";
constexpr int64_t kVocab = 131072;
constexpr int64_t kGradBucket = 40000000;  // DistributedDataParallelConfig.bucket_size default: 40M elements

// MoE routing: rows each EP rank receives in the dispatch all_to_all of one layer of one microbatch.
// Every rank sends T rows (top-1, dropless); what rank j receives varies a few per cent around T (the
// real dumps: 1951..2086 around 2048) and sums, over the group, to what the group sent.
std::vector<int64_t> received_rows(const Ctx& c, int ep_group, int iteration, int microbatch, int layer) {
  const int e = c.L.ep();
  std::vector<double> w(e);
  double sum = 0;
  for (int j = 0; j < e; ++j) {
    w[j] = 1.0 + 0.08 * (2 * unit_interval(mix({c.spec.seed, 0xA2A, uint64_t(ep_group), uint64_t(iteration),
                                                   uint64_t(microbatch), uint64_t(layer), uint64_t(j)})) - 1);
    sum += w[j];
  }
  const int64_t total = int64_t(e) * c.T;
  std::vector<int64_t> x(e);
  int64_t given = 0;
  for (int j = 0; j < e; ++j) given += x[j] = int64_t(double(total) * w[j] / sum);
  for (int j = 0; given < total; j = (j + 1) % e, ++given) ++x[j];
  return x;
}

// Where a fault hits a rank's program.
struct Anchors {
  int32_t backward_of_fault_mb = -1;  // first op of the backward of microbatch fault_mb, fault iteration
  int32_t dispatch_of_fault_mb = -1;  // first MoE dispatch all_to_all of the forward of that microbatch
};

// One rank's program, built in the order its host enqueues.
class ProgramBuilder {
 public:
  ProgramBuilder(Ctx& c, int rank, std::vector<Op>& ops) : c_(c), L_(c.L), rank_(rank), me_(c.coords[size_t(rank)]), ops_(ops) {
    first_stage_ = me_.pp_rank == 0;
    last_stage_ = me_.pp_rank == L_.pp - 1;
  }

  Anchors build() {
    prologue();
    for (int it = 1; it <= c_.spec.iterations; ++it) {
      iteration_ = it;
      one_forward_one_backward();
      iteration_end();
    }
    return anchors_;
  }

 private:
  struct Counters {  // ProcessGroupNCCL's seqCollective_, seqP2P_ and op_id_ of one group on this rank
    int64_t coll = 0, p2p = 0, op_id = 0;
  };

  // ProcessGroupNCCL::collective: `if (!coalescing_state_) seqCollective_++; op_id_++;`, then initWork
  // records seqCollective_, seqP2P_, op_id_ and the Work's seq_ is seqCollective_ (isP2P false).
  void collective(Role role, const char* op, std::vector<int64_t> in, const char* din, std::vector<int64_t> out,
                  const char* dout) {
    const int32_t g = me_.group[role];
    if (g < 0) throw std::logic_error("fr_megatron_job: rank " + std::to_string(rank_) + " is in no group of role " + std::to_string(role));
    auto& k = counters_[role];
    ++k.coll;
    ++k.op_id;
    Op o;
    o.group = g;
    o.sig = c_.signature(std::string("nccl:") + op, std::move(in), din, std::move(out), dout);
    o.coll_seq = k.coll;
    o.p2p_seq = k.p2p;
    o.op_id = k.op_id;
    o.work_seq = k.coll;
    o.kind = OpKind::kCollective;
    o.backward_thread = backward_;
    o.unit_last = int32_t(ops_.size());
    ops_.push_back(o);
  }

  // ProcessGroupNCCL::send / recv -> pointToPoint. The profiling name is
  // c10::str("nccl:send ", rank_, "->", dstRank) with group-local ranks (recv: "<-"). Unbatched:
  // `seqP2P_++` per op, `op_id_++`, recorded with the current seqCollective_ (unchanged), and the
  // Work's seq_ is seqP2P_ (initWork: `isP2P ? seqP2P_ : seqCollective_`). Inside a coalescing
  // region: seqP2P_ is bumped once per group (`if ((coalescing_state_ & CoalP2P) == 0) seqP2P_++`),
  // op_id_ per op, and the op is recorded with start = end = nullptr (no Work, never completes).
  void p2p(Role role, bool send, int peer_global, bool batched) {
    const int32_t g = me_.group[role];
    const Group& grp = c_.groups[size_t(g)];
    auto local = [&](int global) {
      return int(std::lower_bound(grp.ranks.begin(), grp.ranks.end(), global) - grp.ranks.begin());
    };
    auto& k = counters_[role];
    if (!batched || !batch_bumped_) ++k.p2p;
    if (batched) batch_bumped_ = true;
    ++k.op_id;
    const std::string name = "nccl:" + std::string(send ? "send " : "recv ") + std::to_string(local(rank_)) +
                             (send ? "->" : "<-") + std::to_string(local(peer_global));
    const std::vector<int64_t> shape{c_.T, 1, L_.hidden};  // (seq/tp, micro_batch_size, hidden): get_tensor_shapes
    Op o;
    o.group = g;
    o.sig = c_.signature(name, shape, kBF16, shape, kBF16);
    o.peer = peer_global;
    o.coll_seq = k.coll;
    o.p2p_seq = k.p2p;
    o.op_id = k.op_id;
    o.work_seq = batched ? -1 : k.p2p;
    o.kind = batched ? OpKind::kBatchMember : (send ? OpKind::kSend : OpKind::kRecv);
    o.unit_last = int32_t(ops_.size());
    // A batch member's send/recv direction is kept in `peer` and the signature's name.
    ops_.push_back(o);
  }

  void host_sync() { ops_.back().host_sync_after = true; }

  // p2p_communication.P2PCommunicator._communicate for one call of the schedule.
  void communicate(bool send_next, bool send_prev, bool recv_prev, bool recv_next) {
    const Group& pp = c_.groups[size_t(me_.group[kPp])];
    const int s = me_.pp_rank, n = int(pp.ranks.size());
    const int next = pp.ranks[size_t((s + 1) % n)], prev = pp.ranks[size_t((s + n - 1) % n)];
    if (!send_next && !send_prev && !recv_prev && !recv_next) return;
    if (L_.batch_p2p_comm) {
      // _batched_p2p_ops: P2POps send_prev, recv_prev, send_next, recv_next on the pipeline group, then
      // torch.distributed.batch_isend_irecv, which for NCCL runs them in a _coalescing_manager
      // (startCoalescing .. endCoalescing): one "nccl:coalesced" Work after the per-op records.
      const size_t first = ops_.size();
      batch_bumped_ = false;
      if (send_prev) p2p(kPp, true, prev, true);
      if (recv_prev) p2p(kPp, false, prev, true);
      if (send_next) p2p(kPp, true, next, true);
      if (recv_next) p2p(kPp, false, next, true);
      // ProcessGroupNCCL::endCoalescing: initWork(device, rank_, COALESCED, coalescing_state_ & CoalP2P,
      // "nccl:coalesced", {}, {}, enqueue): no op_id_ bump, the Work's seq_ is seqP2P_, and the record
      // recomputes isP2P = isP2POp(COALESCED) = false.
      auto& k = counters_[kPp];
      Op w;
      w.group = me_.group[kPp];
      w.sig = c_.signature("nccl:coalesced", {}, "", {}, "", false);
      w.coll_seq = k.coll;
      w.p2p_seq = k.p2p;
      w.op_id = k.op_id;
      w.work_seq = k.p2p;
      w.kind = OpKind::kBatchWork;
      ops_.push_back(w);
      for (size_t i = first; i < ops_.size(); ++i) ops_[i].unit_last = int32_t(ops_.size() - 1);
      // `if config.batch_p2p_comm and config.batch_p2p_sync: torch.cuda.synchronize()`.
      host_sync();
      return;
    }
    // _p2p_ops: with a pipeline group of two ranks, one direction goes over the global group
    // ("Use the global process group for one of the two p2p communications to allow the overlap of
    // the independent communications"): even_recv_odd_send_group = torch.distributed.group.WORLD.
    const Role even_send_odd_recv = kPp;
    const Role even_recv_odd_send = n == 2 ? kWorld : kPp;
    if (s % 2 == 0) {
      if (send_next) p2p(even_send_odd_recv, true, next, false);
      if (recv_prev) p2p(even_recv_odd_send, false, prev, false);
      if (send_prev) p2p(even_send_odd_recv, true, prev, false);
      if (recv_next) p2p(even_recv_odd_send, false, next, false);
    } else {
      if (recv_prev) p2p(even_send_odd_recv, false, prev, false);
      if (send_next) p2p(even_recv_odd_send, true, next, false);
      if (recv_next) p2p(even_send_odd_recv, false, next, false);
      if (send_prev) p2p(even_recv_odd_send, true, prev, false);
    }
  }
  // P2PCommunicator's wrappers: each is a no-op at the pipeline's end it does not apply to.
  void recv_forward() { if (!first_stage_) communicate(false, false, true, false); }
  void send_forward() { if (!last_stage_) communicate(true, false, false, false); }
  void recv_backward() { if (!last_stage_) communicate(false, false, false, true); }
  void send_backward() { if (!first_stage_) communicate(false, true, false, false); }
  void send_forward_recv_backward() { if (!last_stage_) communicate(true, false, false, true); }
  void send_backward_recv_forward() { if (!first_stage_) communicate(false, true, true, false); }

  void prologue() {
    // Start-up: torch.distributed.barrier() (ProcessGroupNCCL::barrier all-reduces a one-element
    // tensor) and the embedding synchronisation over EMBEDDING_GROUP of the first and last stage.
    collective(kWorld, "all_reduce", {1}, kF32, {1}, kF32);
    collective(kWorld, "all_reduce", {1}, kF32, {1}, kF32);
    if (L_.pp > 1 && me_.group[kEmb] >= 0) collective(kEmb, "all_reduce", {kVocab / L_.tp, L_.hidden}, kBF16, {kVocab / L_.tp, L_.hidden}, kBF16);
    host_sync();
  }

  // schedules.forward_backward_pipelining_without_interleaving.
  void one_forward_one_backward() {
    const int P = L_.pp, M = L_.microbatches, s = me_.pp_rank;
    const int warmup = std::min(P - s - 1, M), remaining = M - warmup;
    for (int i = 0; i < warmup; ++i) {
      recv_forward();
      forward_step(i);
      send_forward();
    }
    if (remaining > 0) recv_forward();
    for (int i = 0; i < remaining; ++i) {
      forward_step(warmup + i);
      send_forward_recv_backward();
      backward_step(i);
      if (i == remaining - 1) {
        send_backward();
      } else {
        send_backward_recv_forward();
      }
    }
    for (int i = 0; i < warmup; ++i) {
      recv_backward();
      backward_step(remaining + i);
      send_backward();
    }
  }

  std::vector<int64_t> S1H() const { return {L_.seq, 1, L_.hidden}; }
  std::vector<int64_t> T1H() const { return {c_.T, 1, L_.hidden}; }

  // Attention's sequence-parallel gather of the layernorm output (Transformer Engine's fp8 path
  // gathers the fp8 bytes: the real dumps' Byte [2048, 5120] -> [8192, 5120]).
  void attention_input_gather() {
    if (L_.fp8) {
      collective(kTp, "_all_gather_base", {c_.T, L_.hidden}, kU8, {L_.seq, L_.hidden}, kU8);
    } else {
      collective(kTp, "_all_gather_base", T1H(), kBF16, S1H(), kBF16);
    }
  }

  void forward_step(int mb) {
    backward_ = false;
    // pretrain_gpt get_batch -> get_batch_on_this_tp_rank: broadcasts over the tensor-parallel group
    // (attention_mask is None without create_attention_mask_in_dataloader).
    const std::vector<int64_t> row{1, L_.seq};
    if (L_.pp == 1) {
      for (const char* dt : {kI64, kI64, kF32, kI64}) collective(kTp, "broadcast", row, dt, row, dt);
    } else if (first_stage_) {
      collective(kTp, "broadcast", row, kI64, row, kI64);  // tokens
      collective(kTp, "broadcast", row, kI64, row, kI64);  // position_ids
    } else if (last_stage_) {
      collective(kTp, "broadcast", row, kI64, row, kI64);  // labels
      collective(kTp, "broadcast", row, kF32, row, kF32);  // loss_mask
    }
    for (int l = 0; l < L_.layers_per_stage; ++l) {
      attention_input_gather();
      collective(kTp, "_reduce_scatter_base", S1H(), kBF16, T1H(), kBF16);  // attention output projection
      if (L_.moe) {
        const int layer = me_.pp_rank * L_.layers_per_stage + l;
        // Router: tokens per expert summed over tensor (and context) parallel ranks for the aux loss.
        collective(kTcp, "all_reduce", {L_.num_experts}, kI64, {L_.num_experts}, kI64);
        // MoEAlltoAllTokenDispatcher.preprocess: num_local_tokens_per_expert gathered over the
        // tensor-and-expert group ([[16]] -> [[128]] in the real job) ...
        collective(kEtmp, "_all_gather_base", {L_.num_experts}, kI64, {int64_t(L_.num_experts) * L_.ep()}, kI64);
        // ... the shared expert's sequence-parallel input gather is launched ...
        collective(kTp, "_all_gather_base", T1H(), kBF16, S1H(), kBF16);
        // ... and the split sizes are copied to the host before the all_to_all (the dispatcher's
        // cuda sync point): the host waits for the count gather here.
        host_sync();
        const auto x = received_rows(c_, me_.group[kEp], iteration_, mb, layer);
        const int64_t mine = x[size_t(ep_index())];
        int64_t sent = c_.T;
        if (iteration_ == c_.spec.fault_iteration && mb == c_.fault_mb) {
          if (anchors_.dispatch_of_fault_mb < 0) anchors_.dispatch_of_fault_mb = int32_t(ops_.size());
          if (c_.spec.fault == MegatronFault::kA2aCountMismatch && l == 0 && rank_ == fault_rank()) sent += 1;
        }
        collective(kEp, "all_to_all", {sent, L_.hidden}, kBF16, {mine, L_.hidden}, kBF16);  // dispatch
        collective(kEp, "all_to_all", {c_.T}, kBF16, {mine}, kBF16);                         // routing probs
        collective(kEp, "all_to_all", {mine, L_.hidden}, kBF16, {c_.T, L_.hidden}, kBF16);  // combine
        collective(kTp, "_reduce_scatter_base", S1H(), kBF16, T1H(), kBF16);               // shared expert out
      } else {
        collective(kTp, "_all_gather_base", T1H(), kBF16, S1H(), kBF16);      // MLP fc1 input
        collective(kTp, "_reduce_scatter_base", S1H(), kBF16, T1H(), kBF16);  // MLP fc2 output
      }
    }
    // Transformer Engine's fp8 amax reduction at the end of the fp8 region, over
    // get_amax_reduction_group = TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP (the real [[264]] Float).
    if (L_.fp8) collective(kTdpCp, "all_reduce", {264}, kF32, {264}, kF32);
    if (last_stage_) {
      // Output layer: sequence-parallel gather, then vocab-parallel cross entropy's three all_reduces
      // of [seq, 1] Float (max logit, target logit, sum of exponentials).
      collective(kTp, "_all_gather_base", T1H(), kBF16, S1H(), kBF16);
      for (int i = 0; i < 3; ++i) collective(kTp, "all_reduce", {L_.seq, 1}, kF32, {L_.seq, 1}, kF32);
    }
  }

  void backward_step(int mb) {
    // The autograd engine runs CUDA backward on its device thread "pt_autograd_<device>".
    backward_ = true;
    if (iteration_ == c_.spec.fault_iteration && mb == c_.fault_mb) anchors_.backward_of_fault_mb = int32_t(ops_.size());
    if (last_stage_) {
      collective(kTp, "_all_gather_base", T1H(), kBF16, S1H(), kBF16);
      collective(kTp, "_reduce_scatter_base", S1H(), kBF16, T1H(), kBF16);
    }
    for (int l = L_.layers_per_stage - 1; l >= 0; --l) {
      if (L_.moe) {
        const int layer = me_.pp_rank * L_.layers_per_stage + l;
        const auto x = received_rows(c_, me_.group[kEp], iteration_, mb, layer);
        const int64_t mine = x[size_t(ep_index())];
        collective(kTp, "_all_gather_base", T1H(), kBF16, S1H(), kBF16);                    // shared expert out
        collective(kEp, "all_to_all", {c_.T, L_.hidden}, kBF16, {mine, L_.hidden}, kBF16);  // combine's grad
        collective(kEp, "all_to_all", {mine, L_.hidden}, kBF16, {c_.T, L_.hidden}, kBF16);  // dispatch's grad
        collective(kTp, "_reduce_scatter_base", S1H(), kBF16, T1H(), kBF16);               // shared expert in
        collective(kEp, "all_to_all", {mine}, kBF16, {c_.T}, kBF16);                         // probs' grad
      } else {
        collective(kTp, "_all_gather_base", T1H(), kBF16, S1H(), kBF16);
        collective(kTp, "_reduce_scatter_base", S1H(), kBF16, T1H(), kBF16);
      }
      // Attention: the gradient's gather and the input's re-gather for the weight gradient, then the
      // reduce-scatter of the input gradient (the real [[8192, 5120]] -> [[2048, 5120]]).
      attention_input_gather();
      attention_input_gather();
      if (L_.fp8) {
        collective(kTp, "_reduce_scatter_base", {L_.seq, L_.hidden}, kBF16, {c_.T, L_.hidden}, kBF16);
      } else {
        collective(kTp, "_reduce_scatter_base", S1H(), kBF16, T1H(), kBF16);
      }
    }
    if (L_.fp8) collective(kTdpCp, "all_reduce", {176}, kF32, {176}, kF32);
    backward_ = false;
  }

  // After the pipeline flush: DistributedDataParallel.finish_grad_sync (distributed optimizer:
  // reduce-scatter per bucket), finalize_model_grads (embedding grads over EMBEDDING_GROUP, the token
  // count broadcast from the last stage over the pipeline group and all-reduced over data parallel
  // ranks), the MoE aux-loss tracker's reduction, the optimizer's found-inf and grad-norm reductions
  // (each read on the host with .item()), the parameter all-gather, and the loss report.
  void iteration_end() {
    backward_ = false;
    const int64_t dense_bucket = kGradBucket - kGradBucket % L_.dp;
    for (int b = 0; b < 2; ++b) collective(kDpCp, "_reduce_scatter_base", {dense_bucket}, kBF16, {dense_bucket / L_.dp}, kBF16);
    const int edp = int(c_.groups[size_t(me_.group[kEdp])].ranks.size());
    if (L_.moe) collective(kEdp, "_reduce_scatter_base", {kGradBucket}, kBF16, {kGradBucket / edp}, kBF16);
    if (L_.pp > 1 && me_.group[kEmb] >= 0)
      collective(kEmb, "all_reduce", {kVocab / L_.tp, L_.hidden}, kBF16, {kVocab / L_.tp, L_.hidden}, kBF16);
    if (L_.pp > 1) collective(kPp, "broadcast", {}, kI32, {}, kI32);  // total_num_tokens: a 0-dim int tensor
    collective(kDpCp, "all_reduce", {}, kI32, {}, kI32);
    const int64_t moe_layers = int64_t(L_.pp) * L_.layers_per_stage;
    if (L_.moe) collective(kTcp, "all_reduce", {moe_layers}, kF32, {moe_layers}, kF32);
    collective(kMp, "all_reduce", {1}, kF32, {1}, kF32);  // found_inf
    host_sync();
    collective(kIdo, "all_reduce", {1}, kF32, {1}, kF32);  // grad norm
    if (L_.moe) collective(kEtmpp, "all_reduce", {1}, kF32, {1}, kF32);  // expert grad norm
    host_sync();
    for (int b = 0; b < 2; ++b) collective(kDpCp, "_all_gather_base", {dense_bucket / L_.dp}, kBF16, {dense_bucket}, kBF16);
    if (L_.moe) collective(kEdp, "_all_gather_base", {kGradBucket / edp}, kBF16, {kGradBucket}, kBF16);
    if (last_stage_) {
      collective(kDpCp, "all_reduce", {2}, kF32, {2}, kF32);  // lm loss and its token count
      host_sync();                                            // the loss .item()
    }
  }

  int ep_index() const {
    const Group& g = c_.groups[size_t(me_.group[kEp])];
    return int(std::lower_bound(g.ranks.begin(), g.ranks.end(), rank_) - g.ranks.begin());
  }
  int fault_rank() const { return c_.spec.fault_ranks.empty() ? c_.world / 2 + 1 : c_.spec.fault_ranks.front(); }

  Ctx& c_;
  const MegatronLayout& L_;
  int rank_;
  const Coords& me_;
  std::vector<Op>& ops_;
  std::array<Counters, kRoleCount> counters_{};
  bool first_stage_ = false, last_stage_ = false, backward_ = false, batch_bumped_ = false;
  int iteration_ = 0;
  Anchors anchors_;
};

// ------------------------------------------------------------------------------------------------
// 3. Progress.

struct Participant {
  int32_t rank, op;
};

struct Sim {
  Ctx c;
  std::vector<std::vector<Op>> ops;
  std::vector<Anchors> anchors;
  // Instances: a collective (every member of its group) or a send/recv pair.
  std::vector<int32_t> need, arrived;
  std::vector<int64_t> ready_ns;
  std::vector<uint8_t> never_completes;
  std::vector<int64_t> part_begin;
  std::vector<Participant> parts;
  // Per rank.
  std::vector<int32_t> host_pos, gpu_pos, host_stop, gpu_stop, reports_below, pending;
  std::vector<uint8_t> posted, sync_stuck_from_fault, dumps;
  std::vector<int64_t> host_ns, gpu_free_ns;
  std::vector<std::vector<int64_t>> created_ns, completed_ns;
  std::vector<int> culprits;
  std::string fault_text;
};

int64_t tensor_bytes(const Signature& s) {
  auto elem = [](const char* dt) -> int64_t {
    const std::string_view d = dt;
    return d == "Float" || d == "Int" ? 4 : d == "Long" ? 8 : d == "Byte" ? 1 : 2;
  };
  int64_t n = 1;
  for (auto d : s.out) n *= d;
  return s.tensors ? n * elem(s.out_dtype) : 0;
}

// Host time spent between enqueuing the previous op and this one (kernel launches, Python); the GPU
// spends more on the compute between two communication ops, so the host runs ahead of it.
int64_t host_gap_ns(const Sim& s, int rank, int op) {
  const Op& o = s.ops[size_t(rank)][size_t(op)];
  const double jitter = 0.7 + 0.6 * unit_interval(mix({s.c.spec.seed, 0x40, uint64_t(rank), uint64_t(op)}));
  const int64_t base = o.kind == OpKind::kCollective ? 120000 : 40000;
  return int64_t(double(base) * jitter);
}
int64_t gpu_compute_before_ns(const Sim& s, int rank, int op) { return 4 * host_gap_ns(s, rank, op); }
int64_t duration_ns(const Sim& s, int rank, int op) {
  const Op& o = s.ops[size_t(rank)][size_t(op)];
  const double gbps = o.kind == OpKind::kCollective ? 150.0 : 40.0;  // bytes per ns
  return 8000 + int64_t(double(tensor_bytes(s.c.sigs[size_t(o.sig)])) / gbps);
}

void assign_instances(Sim& s) {
  const int world = s.c.world;
  // Collectives: the k-th collective of a group on every member is one instance (every member runs
  // the same collectives on it in the same order).
  std::vector<int64_t> coll_count(s.c.groups.size(), 0);
  for (int r = 0; r < world; ++r)
    for (const Op& o : s.ops[size_t(r)])
      if (o.kind == OpKind::kCollective) coll_count[size_t(o.group)] = std::max(coll_count[size_t(o.group)], o.coll_seq);
  std::vector<int64_t> coll_base(s.c.groups.size(), 0);
  int64_t next = 0;
  for (size_t g = 0; g < s.c.groups.size(); ++g) {
    coll_base[g] = next;
    next += coll_count[g];
  }
  s.need.assign(size_t(next), 0);
  for (size_t g = 0; g < s.c.groups.size(); ++g)
    for (int64_t k = 0; k < coll_count[g]; ++k) s.need[size_t(coll_base[g] + k)] = int32_t(s.c.groups[g].ranks.size());
  for (int r = 0; r < world; ++r)
    for (Op& o : s.ops[size_t(r)])
      if (o.kind == OpKind::kCollective) o.inst = int32_t(coll_base[size_t(o.group)] + o.coll_seq - 1);
  // Send/recv: the k-th send from a to b on a group meets the k-th receive by b from a on it (each pair
  // has its own communicator: getKeySendRecv, or the batch's group communicator in order).
  auto is_send = [&](const Op& o) {
    const auto& n = s.c.sigs[size_t(o.sig)].profiling_name;
    return n.compare(0, 10, "nccl:send ") == 0;
  };
  auto key = [](int64_t g, int64_t a, int64_t b) { return (uint64_t(g) << 42) | (uint64_t(a) << 21) | uint64_t(b); };
  std::unordered_map<uint64_t, std::vector<int32_t>> sends;
  for (int r = 0; r < world; ++r)
    for (Op& o : s.ops[size_t(r)])
      if ((o.kind == OpKind::kSend || o.kind == OpKind::kBatchMember) && is_send(o)) {
        o.inst = int32_t(s.need.size());
        s.need.push_back(2);
        sends[key(o.group, r, o.peer)].push_back(o.inst);
      }
  std::unordered_map<uint64_t, size_t> received;
  for (int r = 0; r < world; ++r)
    for (Op& o : s.ops[size_t(r)])
      if ((o.kind == OpKind::kRecv || o.kind == OpKind::kBatchMember) && !is_send(o)) {
        const uint64_t k = key(o.group, o.peer, r);
        auto it = sends.find(k);
        const size_t i = received[k]++;
        if (it == sends.end() || i >= it->second.size())
          throw std::logic_error("fr_megatron_job: rank " + std::to_string(r) + " receives from " + std::to_string(o.peer) +
                                 " more often than it sends");
        o.inst = it->second[i];
      }
  // Participants, grouped by instance.
  const size_t n = s.need.size();
  s.part_begin.assign(n + 1, 0);
  for (int r = 0; r < world; ++r)
    for (const Op& o : s.ops[size_t(r)])
      if (o.inst >= 0) ++s.part_begin[size_t(o.inst) + 1];
  for (size_t i = 0; i < n; ++i) {
    if (s.part_begin[i + 1] != s.need[i])
      throw std::logic_error("fr_megatron_job: instance " + std::to_string(i) + " has " + std::to_string(s.part_begin[i + 1]) +
                             " participants, expected " + std::to_string(s.need[i]));
    s.part_begin[i + 1] += s.part_begin[i];
  }
  s.parts.resize(size_t(s.part_begin[n]));
  std::vector<int64_t> fill(s.part_begin.begin(), s.part_begin.end() - 1);
  for (int r = 0; r < world; ++r)
    for (size_t i = 0; i < s.ops[size_t(r)].size(); ++i) {
      const Op& o = s.ops[size_t(r)][i];
      if (o.inst >= 0) s.parts[size_t(fill[size_t(o.inst)]++)] = {r, int32_t(i)};
    }
  s.arrived.assign(n, 0);
  s.ready_ns.assign(n, 0);
  s.never_completes.assign(n, 0);
}

// A rank's GPU runs its communication ops one after the other in enqueue order. That holds for the
// job modelled: every op is issued on a NCCL stream that first waits for the current stream
// (ProcessGroupNCCL::collective / pointToPoint: syncStream), and Megatron waits on each p2p request
// (_communicate: req.wait() makes the current stream wait for the p2p's end event) before the next
// layer's collectives are issued; a batch (ncclGroupStart..End) runs as one unit whose sends and
// receives progress together.
class Progress {
 public:
  explicit Progress(Sim& s) : s_(s) {}

  void run() {
    const int world = s_.c.world;
    queued_.assign(size_t(world), 1);
    for (int r = world - 1; r >= 0; --r) queue_.push_back(r);
    while (!queue_.empty()) {
      const int r = queue_.back();
      queue_.pop_back();
      queued_[size_t(r)] = 0;
      advance_host(r);
      post_head(r);
    }
  }

 private:
  void push(int r) {
    if (!queued_[size_t(r)]) {
      queued_[size_t(r)] = 1;
      queue_.push_back(r);
    }
  }

  // The host enqueues in program order; after an op marked host_sync_after it waits until its GPU
  // completed that op (a GPU-error rank's host never returns from a sync at or after its fault).
  void advance_host(int r) {
    auto& ops = s_.ops[size_t(r)];
    int32_t& pos = s_.host_pos[size_t(r)];
    while (pos < int32_t(ops.size()) && pos < s_.host_stop[size_t(r)]) {
      if (pos > 0 && ops[size_t(pos - 1)].host_sync_after) {
        const int32_t k = pos - 1;
        if (s_.sync_stuck_from_fault[size_t(r)] && k >= s_.reports_below[size_t(r)]) break;
        if (s_.gpu_pos[size_t(r)] <= k) break;
        s_.host_ns[size_t(r)] = std::max(s_.host_ns[size_t(r)], s_.completed_ns[size_t(r)][size_t(k)]) + 15000;
      }
      s_.host_ns[size_t(r)] += host_gap_ns(s_, r, pos);
      s_.created_ns[size_t(r)][size_t(pos)] = s_.host_ns[size_t(r)];
      ++pos;
    }
  }

  // The GPU starts its next unit (one op, or a whole batch) once the host enqueued all of it; each of
  // the unit's instances completes when every participant's GPU reached it.
  void post_head(int r) {
    if (s_.posted[size_t(r)]) return;
    auto& ops = s_.ops[size_t(r)];
    const int32_t head = s_.gpu_pos[size_t(r)];
    if (head >= int32_t(ops.size()) || head >= s_.gpu_stop[size_t(r)]) return;
    const int32_t last = ops[size_t(head)].unit_last;
    if (last >= s_.host_pos[size_t(r)]) return;
    s_.posted[size_t(r)] = 1;
    const int64_t ready = std::max(s_.created_ns[size_t(r)][size_t(last)], s_.gpu_free_ns[size_t(r)] + gpu_compute_before_ns(s_, r, head));
    int32_t pending = 0;
    for (int32_t i = head; i <= last; ++i)
      if (ops[size_t(i)].inst >= 0) ++pending;
    s_.pending[size_t(r)] = pending;
    if (pending == 0) return finish_unit(r, ready);  // not reached: every unit holds a send, recv or collective
    for (int32_t i = head; i <= last; ++i) {
      const int32_t inst = ops[size_t(i)].inst;
      if (inst < 0) continue;
      s_.ready_ns[size_t(inst)] = std::max(s_.ready_ns[size_t(inst)], ready);
      if (++s_.arrived[size_t(inst)] == s_.need[size_t(inst)] && !s_.never_completes[size_t(inst)]) complete(inst, r, i);
    }
  }

  void complete(int32_t inst, int r_any, int32_t op_any) {
    const int64_t end = s_.ready_ns[size_t(inst)] + duration_ns(s_, r_any, op_any);
    for (int64_t p = s_.part_begin[size_t(inst)]; p < s_.part_begin[size_t(inst) + 1]; ++p) {
      const Participant part = s_.parts[size_t(p)];
      s_.completed_ns[size_t(part.rank)][size_t(part.op)] = end;
      unit_end_[part.rank] = std::max(unit_end_[part.rank], end);
      if (--s_.pending[size_t(part.rank)] == 0) finish_unit(part.rank, unit_end_[part.rank]);
    }
  }

  void finish_unit(int r, int64_t end) {
    auto& ops = s_.ops[size_t(r)];
    const int32_t head = s_.gpu_pos[size_t(r)];
    const int32_t last = ops[size_t(head)].unit_last;
    for (int32_t i = head; i <= last; ++i)  // the Work of a batch ends with its last member
      if (ops[size_t(i)].inst < 0) s_.completed_ns[size_t(r)][size_t(i)] = end;
    s_.gpu_free_ns[size_t(r)] = end;
    s_.gpu_pos[size_t(r)] = last + 1;
    s_.posted[size_t(r)] = 0;
    unit_end_.erase(r);
    push(r);
  }

  Sim& s_;
  std::vector<int> queue_;
  std::vector<uint8_t> queued_;
  std::unordered_map<int, int64_t> unit_end_;
};

// ------------------------------------------------------------------------------------------------
// The job: groups, programs, faults, progress.

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

std::unique_ptr<Sim> simulate(const MegatronJobSpec& spec) {
  auto sim = std::make_unique<Sim>();
  Sim& s = *sim;
  Ctx& c = s.c;
  c.spec = spec;
  c.L = spec.layout;
  const MegatronLayout& L = c.L;
  if (L.tp < 1 || L.pp < 1 || L.dp < 1 || L.microbatches < 1 || L.layers_per_stage < 1 || L.seq % L.tp != 0)
    throw std::invalid_argument("fr_megatron_job: bad layout");
  if (spec.iterations < 1 || spec.ring < 1) throw std::invalid_argument("fr_megatron_job: iterations and ring must be positive");
  if (spec.fault != MegatronFault::kNone && (spec.fault_iteration < 1 || spec.fault_iteration > spec.iterations))
    throw std::invalid_argument("fr_megatron_job: fault_iteration must lie in 1..iterations");
  if (spec.fault == MegatronFault::kA2aCountMismatch && !L.moe)
    throw std::invalid_argument("fr_megatron_job: an all_to_all count mismatch needs MoE layers");
  c.world = L.world();
  c.T = L.seq / L.tp;
  c.fault_mb = L.microbatches / 2;
  c.groups = build_groups(L);

  // Membership and process-local pg_ids. ProcessGroupNCCL's constructor takes
  // `local_id_(process_group_id++)` from a per-process counter, and a rank constructs a backend only
  // for the groups it belongs to, in creation order: rank 0 of the real job numbers its 18 groups
  // 0..17, of which pg_config/pg_status show the 13 it used (5 gaps: DATA_PARALLEL_GROUP,
  // CONTEXT_PARALLEL_GROUP, POSITION_EMBEDDING_GROUP, TENSOR_AND_DATA_PARALLEL_GROUP,
  // EXPERT_TENSOR_PARALLEL_GROUP never run a collective).
  c.coords.resize(size_t(c.world));
  std::vector<int32_t> next_pg_id(size_t(c.world), 0);
  for (int r = 0; r < c.world; ++r) {
    Coords& k = c.coords[size_t(r)];
    k.tp_rank = r % L.tp;
    k.dp_rank = (r / L.tp) % L.dp;
    k.pp_rank = r / (L.tp * L.dp);
    k.group.fill(-1);
    k.pg_id.fill(-1);
  }
  for (size_t g = 0; g < c.groups.size(); ++g)
    for (int m : c.groups[g].ranks) {
      Coords& k = c.coords[size_t(m)];
      k.group[c.groups[g].role] = int32_t(g);
      k.pg_id[c.groups[g].role] = next_pg_id[size_t(m)]++;
    }

  s.ops.resize(size_t(c.world));
  s.anchors.resize(size_t(c.world));
  for (int r = 0; r < c.world; ++r) s.anchors[size_t(r)] = ProgramBuilder(c, r, s.ops[size_t(r)]).build();
  assign_instances(s);

  const size_t world = size_t(c.world);
  s.host_pos.assign(world, 0);
  s.gpu_pos.assign(world, 0);
  s.pending.assign(world, 0);
  s.posted.assign(world, 0);
  s.sync_stuck_from_fault.assign(world, 0);
  s.dumps.assign(world, 1);
  s.host_ns.assign(world, 0);
  s.gpu_free_ns.assign(world, 0);
  s.host_stop.resize(world);
  s.gpu_stop.resize(world);
  s.reports_below.resize(world);
  s.created_ns.resize(world);
  s.completed_ns.resize(world);
  for (size_t r = 0; r < world; ++r) {
    const auto n = int32_t(s.ops[r].size());
    s.host_stop[r] = s.gpu_stop[r] = s.reports_below[r] = n;
    s.created_ns[r].assign(size_t(n), 0);
    s.completed_ns[r].assign(size_t(n), 0);
  }

  // Faults.
  std::vector<int> fault_ranks = spec.fault_ranks;
  if (fault_ranks.empty()) fault_ranks.push_back(c.world / 2 + 1);
  for (int r : fault_ranks)
    if (r < 0 || r >= c.world) throw std::invalid_argument("fr_megatron_job: fault rank " + std::to_string(r) + " out of range");
  std::sort(fault_ranks.begin(), fault_ranks.end());
  fault_ranks.erase(std::unique(fault_ranks.begin(), fault_ranks.end()), fault_ranks.end());
  const std::string where = "iteration " + std::to_string(spec.fault_iteration) + ", backward of microbatch " + std::to_string(c.fault_mb);
  auto anchor = [&](int r) { return s.anchors[size_t(r)].backward_of_fault_mb; };
  switch (spec.fault) {
    case MegatronFault::kNone:
      s.fault_text = "no fault: dumped at a quiet point after the last iteration";
      break;
    case MegatronFault::kGpuError:
      for (int r : fault_ranks) {
        s.reports_below[size_t(r)] = anchor(r);
        s.sync_stuck_from_fault[size_t(r)] = 1;
      }
      s.culprits = fault_ranks;
      s.fault_text = "GPU error on rank(s) " + rank_list(fault_ranks) + " at " + where +
                     ": from there on their watchdogs see no completion while their GPUs still run what was enqueued; "
                     "their hosts block at the next host-sync point";
      break;
    case MegatronFault::kGilHeld:
      for (int r : fault_ranks) s.host_stop[size_t(r)] = anchor(r);
      s.culprits = fault_ranks;
      s.fault_text = "rank(s) " + rank_list(fault_ranks) + " hold the GIL from " + where +
                     ": their hosts enqueue nothing more, what they enqueued completes";
      break;
    case MegatronFault::kKilled:
      for (int r : fault_ranks) {
        const int32_t a = anchor(r);
        s.host_stop[size_t(r)] = a;
        // The process dies when its host reaches the anchor; its GPU had drained to the host's last
        // sync point (the host saw that complete) and what was enqueued after it dies with the process.
        int32_t last_sync = -1;
        for (int32_t i = 0; i < a; ++i)
          if (s.ops[size_t(r)][size_t(i)].host_sync_after) last_sync = i;
        s.gpu_stop[size_t(r)] = last_sync + 1;
        s.dumps[size_t(r)] = 0;
      }
      s.culprits = fault_ranks;
      s.fault_text = "rank(s) " + rank_list(fault_ranks) + " killed at " + where + " (no dump)";
      break;
    case MegatronFault::kStageStall: {
      const int stage = c.coords[size_t(spec.fault_ranks.empty() ? fault_ranks.front() : spec.fault_ranks.front())].pp_rank;
      std::vector<int> stage_ranks;
      for (int r = 0; r < c.world; ++r)
        if (c.coords[size_t(r)].pp_rank == stage) {
          s.host_stop[size_t(r)] = anchor(r);
          stage_ranks.push_back(r);
        }
      s.culprits = stage_ranks;
      s.fault_text = "pipeline stage " + std::to_string(stage) + " (ranks " + rank_list(stage_ranks) +
                     ") stalls on the host at " + where;
      break;
    }
    case MegatronFault::kA2aCountMismatch: {
      const int r = spec.fault_ranks.empty() ? fault_ranks.front() : spec.fault_ranks.front();
      const int32_t op = s.anchors[size_t(r)].dispatch_of_fault_mb;
      s.never_completes[size_t(s.ops[size_t(r)][size_t(op)].inst)] = 1;
      s.culprits = {r};
      s.fault_text = "rank " + std::to_string(r) + "'s first MoE dispatch all_to_all of iteration " +
                     std::to_string(spec.fault_iteration) + ", forward of microbatch " + std::to_string(c.fault_mb) +
                     " has an input of " + std::to_string(c.T + 1) + " rows where the group's receive counts expect " +
                     std::to_string(c.T) + " from it (inputs and outputs over the group differ by one row): no member "
                     "completes it";
      break;
    }
  }

  Progress(s).run();

  bool finished = true;
  for (size_t r = 0; r < world; ++r) finished &= s.gpu_pos[r] == int32_t(s.ops[r].size());
  if (spec.fault == MegatronFault::kNone && !finished)
    throw std::logic_error("fr_megatron_job: the healthy job did not run to its end (a schedule that deadlocks)");
  if (spec.fault != MegatronFault::kNone && finished)
    throw std::logic_error("fr_megatron_job: the fault did not stop the job");
  return sim;
}

// ------------------------------------------------------------------------------------------------
// 4. Dumps.

// Wall clocks: one epoch for the job, an offset per node (clocks of different hosts disagree by up to
// a millisecond), the watchdog polling every 100 ms (kWatchdogThreadSleepMillis) with a phase per rank.
constexpr int64_t kEpochNs = 1758580155000000000;
int64_t node_offset_ns(const Sim& s, int rank) {
  const int node = rank / std::max(1, s.c.L.gpus_per_node);
  return int64_t(mix({s.c.spec.seed, 0xC10C, uint64_t(node)}) % 2000000) - 1000000;
}
int64_t discovered_ns(const Sim& s, int rank, int64_t completed) {
  constexpr int64_t kPoll = 100000000;
  const int64_t phase = int64_t(mix({s.c.spec.seed, 0x5EE, uint64_t(rank)}) % uint64_t(kPoll));
  return completed + ((phase - completed) % kPoll + kPoll) % kPoll;
}

// The dump's keys, each one shared string value (the pickler memoizes strings by content anyway).
enum Key : uint8_t {
  kVersion, kPgConfig, kNcclVersion, kPgStatus, kEntries, kName, kDesc, kRanks, kLastEnqueued, kLastStarted,
  kLastCompleted, kRecordId, kPgId, kProcessGroup, kThreadName, kThreadId, kCollectiveSeqId, kP2pSeqId, kOpId,
  kProfilingName, kTimeCreated, kInputSizes, kInputDtypes, kOutputSizes, kOutputDtypes, kState,
  kTimeDiscoveredStarted, kTimeDiscoveredCompleted, kRetired, kTimeoutKey, kIsP2p
};
constexpr const char* kKeyNames[] = {
    "version", "pg_config", "nccl_version", "pg_status", "entries", "name", "desc", "ranks",
    "last_enqueued_collective", "last_started_collective", "last_completed_collective", "record_id", "pg_id",
    "process_group", "thread_name", "thread_id", "collective_seq_id", "p2p_seq_id", "op_id", "profiling_name",
    "time_created_ns", "input_sizes", "input_dtypes", "output_sizes", "output_dtypes", "state",
    "time_discovered_started_ns", "time_discovered_completed_ns", "retired", "timeout_ms", "is_p2p"};

class DumpWriter {
 public:
  explicit DumpWriter(const Sim& s) : s_(s) {
    for (const char* k : kKeyNames) keys_.push_back(Value::string(k));
  }

  std::vector<uint8_t> dump(int rank) const {
    const auto& ops = s_.ops[size_t(rank)];
    const Coords& me = s_.c.coords[size_t(rank)];
    const int32_t enqueued = s_.host_pos[size_t(rank)];
    auto reported = [&](int32_t i) {
      return s_.gpu_pos[size_t(rank)] > i && i < s_.reports_below[size_t(rank)] && ops[size_t(i)].kind != OpKind::kBatchMember;
    };
    // Groups this rank used: record_pg_ranks runs when the communicator is created (initNCCLComm, on
    // the first op), and pg_status gets a group at its first record (all_pg_status_[pg_id]).
    struct Status {
      int64_t enqueued = -1, completed = -1;
    };
    std::map<int32_t, Status> by_pg_id;         // FlightRecorder's all_pg_status_: a std::map by pg_id
    std::map<std::string, int32_t> by_name;     // pg_name_to_ranks_: a std::map by (name, desc)
    std::unordered_map<int32_t, int32_t> pg_id_of_group;
    for (int role = 0; role < kRoleCount; ++role)
      if (me.group[size_t(role)] >= 0) pg_id_of_group[me.group[size_t(role)]] = me.pg_id[size_t(role)];
    for (int32_t i = 0; i < enqueued; ++i) {
      const Op& o = ops[size_t(i)];
      const int32_t pg = pg_id_of_group.at(o.group);
      Status& st = by_pg_id[pg];
      by_name.emplace(s_.c.groups[size_t(o.group)].name, o.group);
      // workEnqueue: pgStatus_->lastEnqueuedSeq = work->seq_; the watchdog, for each completed work in
      // list order: pgStatus_->lastCompletedSeq = work->seq_.
      if (o.work_seq >= 0) {
        st.enqueued = o.work_seq;
        if (reported(i)) st.completed = o.work_seq;
      }
    }
    using namespace pickle::testing;  // NOLINT
    Value root = Value::container(Kind::kDict);
    put(root, kVersion, str("2.9"));
    Value pg_config = Value::container(Kind::kDict);
    for (const auto& [name, g] : by_name) {
      const Group& grp = s_.c.groups[size_t(g)];
      Value info = Value::container(Kind::kDict);
      put(info, kName, str(grp.name));
      put(info, kDesc, str(grp.desc));
      put(info, kRanks, str(ranks_text(grp.ranks)));
      dict_set(pg_config, name, info);
    }
    put(root, kPgConfig, pg_config);
    put(root, kNcclVersion, str("2.27.3"));
    Value pg_status = Value::container(Kind::kDict);
    for (const auto& [pg, st] : by_pg_id) {
      Value v = Value::container(Kind::kDict);
      put(v, kLastEnqueued, num(st.enqueued));
      put(v, kLastStarted, num(-1));  // no start events without TORCH_NCCL_ENABLE_TIMING
      put(v, kLastCompleted, num(st.completed));
      dict_set(pg_status, std::to_string(pg), v);
    }
    put(root, kPgStatus, pg_status);
    // The ring keeps the newest `ring` records; dump_entries returns them oldest first and
    // getCollectiveTrace skips completed ones when onlyActive.
    Value entries = Value::container(Kind::kList);
    const int local_device = rank % std::max(1, s_.c.L.gpus_per_node);
    const Value main_name = str("python3"), main_id = str("23456244340032");
    const Value autograd_name = str("pt_autograd_" + std::to_string(local_device));
    const Value autograd_id = str(std::to_string(23437665154752LL - 2101248LL * local_device));
    const int64_t offset = node_offset_ns(s_, rank);
    for (int32_t i = std::max(0, enqueued - s_.c.spec.ring); i < enqueued; ++i) {
      const Op& o = ops[size_t(i)];
      const bool done = reported(i);
      if (s_.c.spec.only_active && done) continue;
      const Group& grp = s_.c.groups[size_t(o.group)];
      const Signature& sig = s_.c.sigs[size_t(o.sig)];
      Value e = Value::container(Kind::kDict);
      e.node()->entries.reserve(20);
      put(e, kRecordId, num(i));
      put(e, kPgId, num(pg_id_of_group.at(o.group)));
      put(e, kProcessGroup, tuple({str(grp.name), str(grp.desc)}));
      put(e, kThreadName, o.backward_thread ? autograd_name : main_name);
      put(e, kThreadId, o.backward_thread ? autograd_id : main_id);
      put(e, kCollectiveSeqId, num(o.coll_seq));
      put(e, kP2pSeqId, num(o.p2p_seq));
      put(e, kOpId, num(o.op_id));
      put(e, kProfilingName, str(sig.profiling_name));
      put(e, kTimeCreated, num(kEpochNs + offset + s_.created_ns[size_t(rank)][size_t(i)]));
      put(e, kInputSizes, sizes(sig, sig.in));
      put(e, kInputDtypes, dtypes(sig, sig.in_dtype));
      put(e, kOutputSizes, sizes(sig, sig.out));
      put(e, kOutputDtypes, dtypes(sig, sig.out_dtype));
      put(e, kState, str(done ? "completed" : "scheduled"));
      put(e, kTimeDiscoveredStarted, Value());
      put(e, kTimeDiscoveredCompleted,
          done ? num(kEpochNs + offset + discovered_ns(s_, rank, s_.completed_ns[size_t(rank)][size_t(i)])) : Value());
      put(e, kRetired, Value::boolean(done));  // the watchdog retires what it saw complete
      put(e, kTimeoutKey, num(grp.timeout_ms));
      put(e, kIsP2p, Value::boolean(o.kind == OpKind::kSend || o.kind == OpKind::kRecv || o.kind == OpKind::kBatchMember));
      list_push(entries, e);
    }
    put(root, kEntries, entries);
    return pickle::testing::TorchStylePickler().write(root);
  }

 private:
  void put(Value& d, Key key, Value v) const { d.node()->entries.emplace_back(keys_[key], std::move(v)); }
  static Value sizes(const Signature& sig, const std::vector<int64_t>& dims) {
    Value outer = Value::container(Kind::kList);
    if (!sig.tensors) return outer;
    Value inner = Value::container(Kind::kList);
    for (auto d : dims) pickle::testing::list_push(inner, Value::integer(d));
    pickle::testing::list_push(outer, inner);
    return outer;
  }
  static Value dtypes(const Signature& sig, const char* dt) {
    Value l = Value::container(Kind::kList);
    if (sig.tensors) pickle::testing::list_push(l, Value::string(dt));
    return l;
  }

  const Sim& s_;
  std::vector<Value> keys_;
};

std::string describe(const Sim& s) {
  const MegatronLayout& L = s.c.L;
  std::string d = "Megatron-LM " + std::string(L.moe ? "MoE" : "dense") + " TP" + std::to_string(L.tp) + " PP" +
                  std::to_string(L.pp) + " DP" + std::to_string(L.dp);
  if (L.moe) d += " EP" + std::to_string(L.ep());
  d += " (" + std::to_string(s.c.world) + " ranks, " + std::to_string(s.c.groups.size()) + " process groups created), 1F1B with " +
       std::to_string(L.microbatches) + " microbatches x " + std::to_string(L.layers_per_stage) + " layers per stage, " +
       (L.batch_p2p_comm ? "batched" : "unbatched") + " p2p, " + std::to_string(s.c.spec.iterations) + " iterations; " +
       s.fault_text + ".";
  int finished = 0;
  for (int r = 0; r < s.c.world; ++r) finished += s.gpu_pos[size_t(r)] == int32_t(s.ops[size_t(r)].size());
  d += " " + std::to_string(finished) + " of " + std::to_string(s.c.world) + " ranks ran to the end.";
  if (!s.culprits.empty()) d += " Culprits: " + rank_list(s.culprits) + ".";
  return d;
}

}  // namespace

std::vector<MegatronGroup> megatron_groups(const MegatronLayout& layout) {
  std::vector<MegatronGroup> out;
  for (auto& g : build_groups(layout)) out.push_back({g.name, g.desc, g.ranks, g.timeout_ms});
  return out;
}

MegatronJob megatron_job(const MegatronJobSpec& spec) {
  const auto sim = simulate(spec);
  MegatronJob job;
  const DumpWriter writer(*sim);
  for (int r = 0; r < sim->c.world; ++r)
    if (sim->dumps[size_t(r)]) job.dumps[r] = writer.dump(r);
  job.culprits = sim->culprits;
  job.description = describe(*sim);
  return job;
}

MegatronJob write_megatron_job(const MegatronJobSpec& spec, const std::filesystem::path& dir, const std::string& prefix,
                               uint64_t* bytes_written) {
  const auto sim = simulate(spec);
  std::filesystem::create_directories(dir);
  const DumpWriter writer(*sim);
  uint64_t total = 0;
  for (int r = 0; r < sim->c.world; ++r) {
    if (!sim->dumps[size_t(r)]) continue;
    const auto bytes = writer.dump(r);
    std::ofstream out(dir / (prefix + std::to_string(r)), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    if (!out) throw std::runtime_error("fr_megatron_job: cannot write " + (dir / (prefix + std::to_string(r))).string());
    total += bytes.size();
  }
  if (bytes_written) *bytes_written = total;
  MegatronJob job;
  job.culprits = sim->culprits;
  job.description = describe(*sim);
  return job;
}

}  // namespace rankscope::torch_fr::testing
