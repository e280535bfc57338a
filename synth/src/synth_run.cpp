// synth_run.cpp — simulates the job in lockstep and writes its run directory.
//
// Every rank runs the same StepProgram, so the simulation walks the program once per step and
// applies each operation to all ranks that are still running. A collective completes when every
// member of its group arrived at it with the same description; its finish time is the last
// arrival plus a transfer time, which is how stragglers make others wait. A rank that is stopped
// (stalled, crashed, blocked in a collective that cannot complete) stops consuming operations,
// and so everyone who later needs it blocks in turn — the shape of a real hang.
//
// Cost at scale: flight-recorder ranges and gradient arrivals are written only for the last few
// steps before the end (what a snapshot can show anyway); collectives are always written so that
// sequence numbers and rings are exact.
#include <sys/mman.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <system_error>

#include <fmt/format.h>

#include "rankscope/format/clock.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/flight_recorder_writer.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/format/run_metadata.h"
#include "rankscope/synth/synth.h"
#include "step_program.h"

namespace rankscope::synth {
namespace {

using format::CollectiveOp;
using Kind = ProgramOp::Kind;

constexpr int kRoles = 4;  // CommRole::kWorld, kTp, kDp, kEp
constexpr int64_t kNsPerS = 1'000'000'000;
constexpr int kDetailSteps = 3;  // steps before the end whose ranges/gradients reach the recorders

uint64_t mix(uint64_t x) {  // splitmix64 finaliser: cheap, deterministic jitter
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
double unit(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  return double(mix(a ^ mix(b ^ mix(c ^ mix(d)))) >> 11) / double(1ull << 53);
}

// ep{k}: `ep` consecutive positions of one dp group, k = (dp_rank / ep) * tp + tp_rank (Megatron,
// as gpt2-train's process_groups.h).
int ep_index(int rank, int tp, int ep) { return (rank / tp / ep) * tp + rank % tp; }
int ep_rank_of(int rank, int tp, int ep) { return (rank / tp) % ep; }

std::string role_comm_name(CommRole role, int rank, int tp, int ep = 1) {
  switch (role) {
    case CommRole::kWorld: return "world";
    case CommRole::kTp: return fmt::format("tp{}", rank / tp);
    case CommRole::kDp: return fmt::format("dp{}", rank % tp);
    case CommRole::kEp: return fmt::format("ep{}", ep_index(rank, tp, ep));
  }
  return "?";
}

// A pid that existed a moment ago and does not now: a child that has exited and been reaped.
int dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  if (child < 0) return 999'999;  // above the default pid_max of most systems
  int status = 0;
  ::waitpid(child, &status, 0);
  return int(child);
}

std::string this_host() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

enum class RankState { kRunning, kStalled, kCrashed, kBlocked, kFinished };

struct RankSim {
  int rank = 0;
  RankState state = RankState::kRunning;
  int64_t t = 0;          // true time (rank 0's clock)
  int64_t offset_ns = 0;  // own clock = true - offset
  int64_t stop_ns = 0;
  uint64_t next_seq[kRoles] = {0, 0, 0, 0};
  int comm_slot[kRoles] = {-1, -1, -1, -1};
  uint32_t comm_id[kRoles] = {0, 0, 0, 0};
  std::vector<std::pair<uint16_t, int64_t>> stack;      // open ranges, enter time
  int broken_bucket = std::numeric_limits<int>::max();  // drop-grad: buckets >= this never launch
  bool skip_done = false;
  format::StepRecord record;
  std::vector<int64_t> range_total;
  std::vector<uint32_t> range_count;
  std::unique_ptr<format::FlightRecorderWriter> flight;
  std::unique_ptr<format::EventStreamWriter> events;
  std::vector<uint32_t> range_ids;  // event-stream name ids by program range index
  uint32_t counter_id = 0;
  std::vector<uint32_t> moe_counter_ids;  // tokens_received, tokens_dropped, aux_loss, expert{e}.routed...
  double moe_received = 0, moe_aux = 0;   // this step, summed over MoE blocks
  std::vector<double> moe_routed;         // this step, per global expert
  int main_slot = -1;

  int64_t own(int64_t true_ns) const { return true_ns - offset_ns; }
  bool running() const { return state == RankState::kRunning; }
};

class Simulation {
 public:
  Simulation(const SynthOptions& o, FaultSpec fault, const std::filesystem::path& dir)
      : o_(o), fault_(std::move(fault)), dir_(dir) {
    shape_.layers = o.layers;
    shape_.tp = o.tp;
    shape_.dp = o.ranks / o.tp;
    shape_.moe_experts = o.moe_experts;
    shape_.moe_every = std::max(1, o.moe_every);
    program_ = build_step_program(shape_);
    for (int r = 0; r < o.ranks; ++r) {
      tp_groups_.resize(o.ranks / o.tp);
      dp_groups_.resize(o.tp);
      tp_groups_[r / o.tp].push_back(r);
      dp_groups_[r % o.tp].push_back(r);
    }
    if (o.moe()) {
      ep_groups_.resize(size_t(o.ranks / o.ep));
      for (int r = 0; r < o.ranks; ++r) ep_groups_[ep_index(r, o.tp, o.ep)].push_back(r);  // ascending = ep rank order
    }
    world_group_.resize(o.ranks);
    for (int r = 0; r < o.ranks; ++r) world_group_[r] = r;
    fault_range_ =
        fault_.range.empty() ? (fault_.kind == FaultKind::kCrash ? 0 : -1) : program_.range_index(fault_.range);
    fault_param_ = fault_.param.empty() ? -1 : program_.param_index(fault_.param);
  }

  Result<SynthSummary> run();

 private:
  Status open_rank(RankSim& r, const std::string& run_id, int64_t start_ns);
  void world_barrier();
  void step(int64_t s);
  void enter(RankSim& r, const ProgramOp& op, int64_t s);
  void exit_range(RankSim& r, const ProgramOp& op, int64_t s);
  void collective(const ProgramOp& op, int64_t s);
  void group_collective(const ProgramOp& op, const std::vector<int>& members, int64_t s);
  void end_step(RankSim& r, int64_t s);
  // MoE routing of rank `rank` at step s, block b: rows it routes to each global expert (sum T*K).
  // Computed for every rank once per (step, block) and cached: large ep groups ask for it often.
  const std::vector<int64_t>& route(int rank, int64_t s, int block);
  int64_t received_rows(int rank, int64_t s, int block);
  std::vector<int64_t> draw_route(int rank, int64_t s, int block) const;
  int64_t slots_per_rank() const { return int64_t(shape_.batch) * shape_.seq_len * o_.moe_top_k; }
  // Step s's factor on compute (SynthOptions::step_jitter), one for all ranks.
  double step_factor(int64_t s) const {
    return o_.step_jitter > 0 ? 1.0 + o_.step_jitter * (unit(o_.seed, 0x57e9, uint64_t(s), 0x57e9) - 0.5) : 1.0;
  }
  std::string comm_name(CommRole role, int rank) const { return role_comm_name(role, rank, o_.tp, o_.ep); }
  format::RunMetadata metadata(const std::string& run_id, int64_t start_ns) const;
  const std::vector<std::vector<int>>& groups(CommRole role) const;
  bool detail(int64_t s) const { return s >= detail_from_; }
  bool fault_at(const RankSim& r, FaultKind kind) const { return fault_.kind == kind && fault_.rank == r.rank; }

  const SynthOptions& o_;
  FaultSpec fault_;
  std::filesystem::path dir_;
  ModelShape shape_;
  StepProgram program_;
  // Anonymous memory reserved once for every recorder: one mapping, pages taken as touched.
  struct Arena {
    explicit Arena(size_t bytes) : size(bytes) {
      void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      base = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
    }
    ~Arena() {
      if (base) ::munmap(base, size);
    }
    Arena(const Arena&) = delete;
    Arena& operator=(const Arena&) = delete;
    uint8_t* base = nullptr;
    size_t size = 0;
  };
  std::unique_ptr<Arena> arena_;  // declared before ranks_: the writers it backs go first
  std::vector<RankSim> ranks_;
  std::vector<std::vector<int>> tp_groups_, dp_groups_, ep_groups_;
  std::vector<int> world_group_;
  int fault_range_ = -1;
  int fault_param_ = -1;
  std::pair<int64_t, int> routing_key_{-1, -1};
  std::vector<std::vector<int64_t>> routing_;  // by rank, for routing_key_
  std::vector<int64_t> received_;              // by rank, for routing_key_
  int64_t detail_from_ = 0;
};

const std::vector<std::vector<int>>& Simulation::groups(CommRole role) const {
  return role == CommRole::kTp ? tp_groups_ : role == CommRole::kEp ? ep_groups_ : dp_groups_;
}

const std::vector<int64_t>& Simulation::route(int rank, int64_t s, int block) {
  if (routing_key_ != std::pair(s, block)) {
    routing_key_ = {s, block};
    routing_.resize(ranks_.size());
    for (size_t r = 0; r < ranks_.size(); ++r) routing_[r] = draw_route(int(r), s, block);
    const int L = o_.moe_experts / o_.ep;
    received_.assign(ranks_.size(), 0);
    for (size_t r = 0; r < ranks_.size(); ++r) {
      const int first = ep_rank_of(int(r), o_.tp, o_.ep) * L;
      for (int m : ep_groups_[ep_index(int(r), o_.tp, o_.ep)])
        for (int e = first; e < first + L; ++e) received_[r] += routing_[size_t(m)][size_t(e)];
    }
  }
  return routing_[size_t(rank)];
}

std::vector<int64_t> Simulation::draw_route(int rank, int64_t s, int block) const {
  const int E = o_.moe_experts;
  const int64_t slots = slots_per_rank(), tokens = slots / o_.moe_top_k;
  std::vector<double> w(size_t(E), 0.0);
  double sum = 0;
  for (int e = 0; e < E; ++e) {
    w[e] = 1.0 + 0.3 * (unit(o_.seed, uint64_t(rank), uint64_t(s) * 64 + uint64_t(block), uint64_t(e) + 0xe0) - 0.5);
    if (e == o_.hot_expert) w[e] *= 1.0 + o_.hot_bias;
    sum += w[e];
  }
  // Top-k picks k distinct experts per token: an expert gets at most `tokens` slots.
  std::vector<int64_t> cnt(size_t(E), 0);
  int64_t given = 0;
  for (int e = 0; e < E; ++e) {
    cnt[e] = std::min<int64_t>(tokens, int64_t(double(slots) * w[e] / sum));
    given += cnt[e];
  }
  for (int e = 0; given < slots; e = (e + 1) % E)
    if (cnt[e] < tokens) ++cnt[e], ++given;
  return cnt;
}

int64_t Simulation::received_rows(int rank, int64_t s, int block) {
  (void)route(rank, s, block);
  return received_[size_t(rank)];
}

format::RunMetadata Simulation::metadata(const std::string& run_id, int64_t start_ns) const {
  format::RunMetadata m;
  m.run_id = run_id;
  m.created_ns = start_ns;
  m.program = "rankscope synth";
  m.command_line = o_.command_line;
  m.world_size = o_.ranks;
  m.tp = o_.tp;
  m.dp = o_.ranks / o_.tp;
  m.groups.push_back({"world", world_group_});
  if (o_.tp > 1)
    for (size_t k = 0; k < tp_groups_.size(); ++k) m.groups.push_back({fmt::format("tp{}", k), tp_groups_[k]});
  if (o_.ranks / o_.tp > 1)
    for (size_t k = 0; k < dp_groups_.size(); ++k) m.groups.push_back({fmt::format("dp{}", k), dp_groups_[k]});
  if (o_.moe() && o_.ep > 1)
    for (size_t k = 0; k < ep_groups_.size(); ++k) m.groups.push_back({fmt::format("ep{}", k), ep_groups_[k]});
  const std::string local = o_.local_host ? this_host() : std::string();
  for (int r = 0; r < o_.ranks; ++r)
    m.hosts.push_back(o_.local_host ? local : fmt::format("synth-node{}", r / o_.ranks_per_host));
  m.model = {{"preset", "tiny"},           {"layers", shape_.layers},
             {"heads", shape_.heads},      {"channels", shape_.channels},
             {"vocab_size", shape_.vocab}, {"padded_vocab_size", shape_.padded_vocab()}};
  m.training = {{"seq_len", shape_.seq_len},
                {"batch", shape_.batch},
                {"steps", o_.steps},
                {"vocab_shard", "contiguous"}};
  if (o_.moe()) {
    m.model["moe_experts"] = o_.moe_experts;
    m.model["moe_top_k"] = o_.moe_top_k;
    m.model["moe_every"] = shape_.moe_every;
    m.training["ep"] = o_.ep;
  }
  m.versions = {{"rankscope", RANKSCOPE_VERSION}};
  m.extra["synth"] = {{"fault", describe_fault(fault_)}, {"seed", o_.seed}};
  return m;
}

Status Simulation::open_rank(RankSim& r, const std::string& run_id, int64_t start_ns) {
  const int host_index = r.rank / o_.ranks_per_host;
  // Hosts disagree a little about the time; the recorded offset undoes it.
  r.offset_ns = o_.local_host ? 0 : int64_t(host_index) * 137'000;
  r.t = start_ns;
  format::FlightIdentity id;
  id.rank = r.rank;
  id.world_size = o_.ranks;
  id.local_rank = o_.local_host ? r.rank : r.rank % o_.ranks_per_host;
  const bool crashes = fault_.kind == FaultKind::kCrash && fault_.rank == r.rank;
  id.pid = crashes ? dead_pid() : (o_.live_pid > 0 ? o_.live_pid : 100000 + r.rank);
  id.host = o_.local_host ? this_host() : fmt::format("synth-node{}", host_index);
  id.run_id = run_id;
  id.start_ns = r.own(start_ns);
  format::FlightLayoutParams layout;
  layout.max_threads = 2;
  layout.max_range_depth = 8;
  layout.max_comms = 4;
  layout.ring_entries = o_.ring_entries;
  layout.max_params = uint32_t(std::max<size_t>(8, program_.params.size()));
  // Every rank's recorder is written at once: in one arena of memory, saved at the end, not one
  // mapping a rank (Linux allows 65,530 mappings a process: vm.max_map_count).
  const size_t bytes = (format::flight_file_bytes(layout) + 4095) / 4096 * 4096;
  if (!arena_) {
    arena_ = std::make_unique<Arena>(bytes * size_t(o_.ranks));
    if (!arena_->base) return io_error(fmt::format("cannot reserve {} bytes for {} recorders", arena_->size, o_.ranks));
  }
  RS_ASSIGN_OR_RETURN(r.flight,
                      format::FlightRecorderWriter::create_in_memory(std::span(arena_->base + bytes * size_t(r.rank),
                                                                               bytes),
                                                                     format::flight_recorder_path(dir_, r.rank), id,
                                                                     layout));
  format::EventStreamHeader header;
  header.rank = r.rank;
  header.world_size = o_.ranks;
  header.created_ns = r.own(start_ns);
  header.run_id = run_id;
  // Opened per flush (every 16 steps): 16K ranks' streams never hold 16K descriptors at once.
  RS_ASSIGN_OR_RETURN(r.events, format::EventStreamWriter::create(format::event_stream_path(dir_, r.rank), header,
                                                                  format::EventStreamWriter::FdPolicy::kOpenPerFlush));

  const int64_t uncertainty = o_.local_host ? 2'000 : 9'000;
  r.flight->set_clock(r.offset_ns, uncertainty);
  r.events->write_clock({r.offset_ns, uncertainty, r.own(start_ns), 16, 0});
  r.flight->set_process_state(format::ProcessState::kRunning);
  r.flight->heartbeat(r.own(start_ns));
  r.main_slot = r.flight->claim_thread_slot(id.pid, "main");
  (void)r.flight->claim_thread_slot(id.pid + 1, "watchdog");

  r.range_ids.resize(program_.range_names.size());
  for (size_t i = 0; i < program_.range_names.size(); ++i)
    r.range_ids[i] = r.events->intern(format::NameKind::kRange, program_.range_names[i]);
  r.counter_id = r.events->intern(format::NameKind::kCounter, "embed.local_tokens");
  if (o_.moe()) {
    for (const char* n : {"moe.tokens_received", "moe.tokens_dropped", "moe.aux_loss"})
      r.moe_counter_ids.push_back(r.events->intern(format::NameKind::kCounter, n));
    for (int e = 0; e < o_.moe_experts; ++e)
      r.moe_counter_ids.push_back(r.events->intern(format::NameKind::kCounter, fmt::format("moe.expert{}.routed", e)));
    r.moe_routed.assign(size_t(o_.moe_experts), 0.0);
  }
  const CommRole roles[kRoles] = {CommRole::kWorld, CommRole::kTp, CommRole::kDp, CommRole::kEp};
  for (int k = 0; k < kRoles; ++k) {
    const CommRole role = roles[k];
    int size = o_.ranks, rank_in_comm = r.rank;
    if (role == CommRole::kTp) {
      if (o_.tp == 1) continue;
      size = o_.tp;
      rank_in_comm = r.rank % o_.tp;
    } else if (role == CommRole::kDp) {
      if (o_.ranks / o_.tp == 1) continue;
      size = o_.ranks / o_.tp;
      rank_in_comm = r.rank / o_.tp;
    } else if (role == CommRole::kEp) {
      if (!o_.moe() || o_.ep == 1) continue;
      size = o_.ep;
      rank_in_comm = ep_rank_of(r.rank, o_.tp, o_.ep);
    }
    const std::string name = comm_name(role, r.rank);
    r.comm_slot[k] = r.flight->register_comm(name, size, rank_in_comm);
    r.comm_id[k] = r.events->intern(format::NameKind::kComm, name);
  }
  for (const auto& p : program_.params) (void)r.flight->register_param(p.name, p.bucket, p.numel);
  r.range_total.assign(program_.range_names.size(), 0);
  r.range_count.assign(program_.range_names.size(), 0);
  return {};
}

// The start-up barrier on `world` (clock alignment ends with one): everyone's seq 0.
void Simulation::world_barrier() {
  int64_t last = 0;
  for (auto& r : ranks_) {
    r.t += int64_t(2'000'000 * (1 + unit(o_.seed, r.rank, 0, 0xba)));
    last = std::max(last, r.t);
  }
  for (auto& r : ranks_) {
    format::CollectiveDesc d{CollectiveOp::kBarrier, format::DataType::kUInt8, 0, 0, -1};
    const uint64_t seq = r.flight->collective_enqueue(r.comm_slot[0], d, -1, "", r.own(r.t));
    r.flight->collective_start(r.comm_slot[0], seq, r.own(r.t));
    r.t = last + 30'000;
    r.flight->collective_complete(r.comm_slot[0], seq, r.own(r.t));
    r.next_seq[0] = seq + 1;
  }
}

void Simulation::enter(RankSim& r, const ProgramOp& op, int64_t s) {
  r.stack.emplace_back(op.range, r.t);
  if (detail(s)) {
    r.flight->push_range(r.main_slot, program_.range_names[op.range], r.own(r.t));
    if (r.stack.size() == 2) r.flight->set_phase(program_.range_names[op.range]);
  }
  const bool here = fault_.step == s && fault_range_ == int(op.range);
  if (here && fault_at(r, FaultKind::kStall)) {
    r.state = RankState::kStalled;
    r.stop_ns = r.t;
  } else if (here && fault_at(r, FaultKind::kCrash)) {
    r.state = RankState::kCrashed;
    r.stop_ns = r.t;
  } else if (r.broken_bucket != std::numeric_limits<int>::max() && program_.range_names[op.range] == "grad_sync") {
    // drop-grad: DDP waits for a bucket that will never be launched.
    r.state = RankState::kStalled;
    r.stop_ns = r.t;
  }
}

void Simulation::exit_range(RankSim& r, const ProgramOp& op, int64_t s) {
  r.range_total[op.range] += r.t - r.stack.back().second;
  r.range_count[op.range] += 1;
  r.stack.pop_back();
  if (detail(s)) {
    r.flight->pop_range(r.main_slot);
    if (r.stack.size() == 1) r.flight->set_phase("step");
  }
}

void Simulation::collective(const ProgramOp& op, int64_t s) {
  if (op.role == CommRole::kEp && o_.ep == 1) return;  // every expert is local: no exchange
  if (op.role == CommRole::kWorld) {
    group_collective(op, world_group_, s);
    return;
  }
  for (const auto& g : groups(op.role)) group_collective(op, g, s);
}

void Simulation::group_collective(const ProgramOp& op, const std::vector<int>& members, int64_t s) {
  const int k = int(op.role);
  bool complete = true;
  int64_t last_arrival = 0;
  std::vector<std::pair<int, uint64_t>> arrived;  // rank, seq
  arrived.reserve(members.size());
  for (int m : members) {
    RankSim& r = ranks_[m];
    if (!r.running()) {
      complete = false;
      continue;
    }
    const uint64_t seq = r.next_seq[k];
    const std::string comm = comm_name(op.role, m);
    const bool fault_here =
        !fault_.comm.empty() && fault_.rank == m && int64_t(seq) == fault_.seq && fault_.comm == comm;
    if (fault_here && fault_.kind == FaultKind::kSkip && !r.skip_done) {
      r.skip_done = true;  // leaves the collective out; its next one on `comm` takes this seq
      complete = false;
      continue;
    }
    if (op.role == CommRole::kDp && op.bucket >= r.broken_bucket) {
      complete = false;  // drop-grad: the bucket is never launched on this rank
      continue;
    }
    if (fault_here && fault_.kind == FaultKind::kResize) complete = false;  // sizes disagree: no match
    arrived.emplace_back(m, seq);
    last_arrival = std::max(last_arrival, r.t);
  }

  // An MoE block's all_to_all_v: per-peer counts (elements) of every member, in ep-rank order.
  std::vector<std::vector<size_t>> send_counts, recv_counts;
  if (op.a2a != A2aDirection::kNone) {
    const size_t n = members.size();
    const int per_rank = o_.moe_experts / int(n);
    const uint64_t width = uint64_t(shape_.channels);
    std::vector<std::vector<size_t>> rows(n, std::vector<size_t>(n, 0));  // rows[i][j]: i's tokens for j's experts
    for (size_t i = 0; i < n; ++i) {
      const auto& cnt = route(members[i], s, op.moe_block);
      for (int e = 0; e < o_.moe_experts; ++e) rows[i][size_t(e / per_rank)] += size_t(cnt[e]);
    }
    send_counts.assign(n, std::vector<size_t>(n));
    recv_counts.assign(n, std::vector<size_t>(n));
    const bool dispatch = op.a2a == A2aDirection::kDispatch;
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < n; ++j) {
        send_counts[i][j] = (dispatch ? rows[i][j] : rows[j][i]) * width;
        recv_counts[i][j] = (dispatch ? rows[j][i] : rows[i][j]) * width;
      }
    if (fault_.kind == FaultKind::kA2aMiscount && fault_.step == s && fault_range_ == int(op.range)) {
      for (size_t i = 0; i < n; ++i) {
        if (members[i] != fault_.rank) continue;
        auto& c = recv_counts[i][size_t(fault_.peer)];
        c = size_t(std::max<int64_t>(0, int64_t(c) + fault_.delta * int64_t(width)));
        complete = false;  // sizes disagree: the exchange never matches, every member stays inside
      }
    }
  }

  const uint64_t elem = format::dtype_size(op.dtype);
  for (auto [m, seq] : arrived) {
    RankSim& r = ranks_[m];
    const std::string comm = comm_name(op.role, m);
    uint64_t count = op.count;
    if (fault_.kind == FaultKind::kResize && fault_.rank == m && int64_t(seq) == fault_.seq && fault_.comm == comm)
      count = uint64_t(std::llround(double(count) * fault_.factor));
    format::CollectiveDesc d{op.op, op.dtype, count, count * elem, -1};
    if (!send_counts.empty()) {
      const size_t i = size_t(std::find(members.begin(), members.end(), m) - members.begin());
      d.send_counts = send_counts[i];
      d.recv_counts = recv_counts[i];
      d.count = 0;
      for (size_t c : send_counts[i]) d.count += c;
      d.bytes = d.count * elem;
    }
    const int64_t arrive = r.t;
    const uint64_t got =
        r.flight->collective_enqueue(r.comm_slot[k], d, s, program_.range_names[op.range], r.own(arrive));
    r.flight->collective_start(r.comm_slot[k], got, r.own(arrive));
    r.next_seq[k] = got + 1;
    format::CollectiveEvent ev{};
    ev.comm_id = r.comm_id[k];
    ev.op = uint8_t(op.op);
    ev.dtype = uint8_t(op.dtype);
    ev.range_id = r.range_ids[op.range];
    ev.seq = got;
    ev.bytes = d.bytes;
    ev.enqueue_ns = r.own(arrive);
    ev.start_ns = ev.enqueue_ns;
    if (complete) {
      // Ring all-reduce: latency plus 2(n-1)/n of the payload at link_gbps (bytes per ns).
      const int64_t xfer = 20'000 + int64_t(double(d.bytes) * 2.0 * double(members.size() - 1) /
                                            double(members.size()) / std::max(o_.link_gbps, 1e-3));
      r.t = last_arrival + xfer;
      r.flight->collective_complete(r.comm_slot[k], got, r.own(r.t));
      ev.state = uint8_t(format::CollectiveState::kCompleted);
      ev.end_ns = r.own(r.t);
    } else {
      r.state = RankState::kBlocked;
      r.stop_ns = arrive;
      ev.state = uint8_t(format::CollectiveState::kStarted);
    }
    r.record.collectives.push_back(ev);
  }
}

void Simulation::end_step(RankSim& r, int64_t s) {
  r.record.step = s;
  r.record.end_ns = r.own(r.t);
  r.record.ranges.clear();
  for (size_t i = 0; i < r.range_total.size(); ++i) {
    if (r.range_count[i] == 0) continue;
    r.record.ranges.push_back({r.range_ids[i], r.range_count[i], r.range_total[i], 0});
    r.range_total[i] = 0;
    r.range_count[i] = 0;
  }
  // Contiguous vocab shards on real text: the first shard sees ~95% of the tokens (design.md §6).
  const double tokens = double(shape_.batch) * double(shape_.seq_len);
  const int j = r.rank % o_.tp;
  double share = 1.0;
  if (o_.tp > 1) share = j == 0 ? 0.954 : 0.046 * std::ldexp(1.0, -(j - 1)) / (2.0 - std::ldexp(1.0, -(o_.tp - 2)));
  const double jitter = 1.0 + 0.04 * (unit(o_.seed, r.rank, s, 0x70c) - 0.5);
  r.record.counters.clear();
  r.record.counters.push_back({r.counter_id, 0, std::round(tokens * share * jitter)});
  if (o_.moe()) {
    r.record.counters.push_back({r.moe_counter_ids[0], 0, r.moe_received});
    r.record.counters.push_back({r.moe_counter_ids[1], 0, 0.0});  // dropless
    r.record.counters.push_back({r.moe_counter_ids[2], 0, r.moe_aux});
    for (int e = 0; e < o_.moe_experts; ++e)
      r.record.counters.push_back({r.moe_counter_ids[3 + e], 0, r.moe_routed[e]});
    r.moe_received = r.moe_aux = 0;
    std::fill(r.moe_routed.begin(), r.moe_routed.end(), 0.0);
  }
  r.events->write_step(r.record);
  r.record.collectives.clear();
  r.flight->heartbeat(r.own(r.t));
  if (s % 16 == 15) (void)r.events->flush();
  r.broken_bucket = std::numeric_limits<int>::max();
}

void Simulation::step(int64_t s) {
  for (auto& r : ranks_) {
    if (!r.running()) continue;
    r.record.begin_ns = r.own(r.t);
    r.flight->set_step(s, r.own(r.t));
    r.t += int64_t(o_.host_gap_ms * 1e6);
  }
  const bool delay_step = fault_.kind == FaultKind::kDelay && (fault_.step < 0 || fault_.step == s);
  for (size_t i = 0; i < program_.ops.size(); ++i) {
    const ProgramOp& op = program_.ops[i];
    if (op.kind == Kind::kCollective) {
      collective(op, s);
      continue;
    }
    for (auto& r : ranks_) {
      if (!r.running()) continue;
      switch (op.kind) {
        case Kind::kEnter: enter(r, op, s); break;
        case Kind::kExit:
          exit_range(r, op, s);
          if (r.stack.empty()) end_step(r, s);
          break;
        case Kind::kCompute: {
          const double speed = 1.0 + 0.02 * (unit(o_.seed, r.rank, 0x5eed, 1) - 0.5);
          const double jitter = 1.0 + 0.06 * (unit(o_.seed, r.rank, s, i) - 0.5);
          r.t += int64_t(double(op.ns) * speed * jitter * step_factor(s));
          if (delay_step && fault_.rank == r.rank && fault_range_ == int(op.range)) r.t += int64_t(fault_.ms * 1e6);
          break;
        }
        case Kind::kExpertCompute: {
          // Expert GEMMs over the rows this rank received: time follows the load.
          const int64_t rows = received_rows(r.rank, s, op.moe_block);
          const double jitter = 1.0 + 0.06 * (unit(o_.seed, r.rank, s, i) - 0.5);
          r.t += int64_t(double(op.ns) * double(rows) / double(slots_per_rank()) * jitter * step_factor(s));
          if (delay_step && fault_.rank == r.rank && fault_range_ == int(op.range)) r.t += int64_t(fault_.ms * 1e6);
          if (program_.range_names[op.range].rfind("forward/", 0) == 0) {
            const auto& cnt = route(r.rank, s, op.moe_block);
            double aux = 0;
            for (int e = 0; e < o_.moe_experts; ++e) {
              r.moe_routed[e] += double(cnt[e]);
              const double f = double(cnt[e]) / double(slots_per_rank());
              aux += f * f;
            }
            r.moe_received += double(rows);
            r.moe_aux += aux * o_.moe_experts;  // Switch loss with P ~ f: 1.0 when balanced
          }
          break;
        }
        case Kind::kBeginBackward:
          if (detail(s)) r.flight->begin_backward(s, r.own(r.t));
          break;
        case Kind::kGradReady:
          if (fault_at(r, FaultKind::kDropGrad) && (fault_.step < 0 || fault_.step == s) && op.param == fault_param_) {
            r.broken_bucket = std::min(r.broken_bucket, program_.params[op.param].bucket);
            break;
          }
          if (detail(s)) r.flight->grad_arrived(op.param, r.own(r.t));
          break;
        case Kind::kEndBackward:
          if (detail(s)) r.flight->end_backward();
          break;
        case Kind::kCollective: break;
      }
    }
  }
}

Result<SynthSummary> Simulation::run() {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return io_error(fmt::format("cannot create {}: {}", dir_.string(), ec.message()));

  // The step the fault strikes bounds the simulation; ranges and gradients are detailed before it.
  int64_t last_step = o_.steps - 1;
  if (fault_.kind == FaultKind::kStall || fault_.kind == FaultKind::kCrash || fault_.kind == FaultKind::kA2aMiscount ||
      (fault_.kind == FaultKind::kDropGrad && fault_.step >= 0))
    last_step = fault_.step;
  if (fault_.kind == FaultKind::kDropGrad && fault_.step < 0) last_step = 0;
  if (fault_.kind == FaultKind::kSkip || fault_.kind == FaultKind::kResize) {
    const CommRole role = fault_.comm.rfind("tp", 0) == 0 ? CommRole::kTp
                          : fault_.comm == "world"        ? CommRole::kWorld
                                                          : CommRole::kDp;
    const int per_step = std::max(1, program_.collectives_per_step(role));
    last_step = (fault_.seq - (role == CommRole::kWorld ? 1 : 0)) / per_step;
  }
  detail_from_ = std::max<int64_t>(0, last_step - kDetailSteps + 1);

  const int64_t nominal_step_ns = 100'000'000;
  const int64_t start_ns =
      o_.start_ns != 0 ? o_.start_ns
                       : now_unix_ns() - int64_t(o_.steps) * nominal_step_ns - int64_t(o_.idle_s * double(kNsPerS));
  const std::string run_id = fmt::format("synth-{}", start_ns / 1'000'000);
  ranks_.resize(o_.ranks);
  for (int r = 0; r < o_.ranks; ++r) {
    ranks_[r].rank = r;
    RS_RETURN_IF_ERROR(open_rank(ranks_[r], run_id, start_ns));
  }
  world_barrier();

  int64_t s = 0;
  for (; s < o_.steps; ++s) {
    if (std::none_of(ranks_.begin(), ranks_.end(), [](const RankSim& r) { return r.running(); })) break;
    step(s);
  }

  // The snapshot: a hung job `idle_s` after its last activity, or a finished one at its end.
  SynthSummary summary;
  summary.fault = fault_;
  int64_t last_activity = 0;
  bool stuck = false;
  for (const auto& r : ranks_) {
    if (r.running())
      last_activity = std::max(last_activity, r.t);
    else {
      stuck = true;
      last_activity = std::max(last_activity, r.stop_ns);
    }
  }
  const int64_t snapshot = stuck ? last_activity + int64_t(o_.idle_s * double(kNsPerS)) : last_activity;
  summary.snapshot_ns = snapshot;
  summary.hang_step = stuck ? last_step : -1;
  for (auto& r : ranks_) {
    switch (r.state) {
      case RankState::kRunning:  // completed every step
        r.state = RankState::kFinished;
        r.flight->set_process_state(format::ProcessState::kFinished);
        r.events->write_end(r.own(r.t));
        break;
      case RankState::kCrashed: r.flight->heartbeat(r.own(r.stop_ns)); break;
      default:  // alive and stuck: the watchdog thread keeps ticking
        r.flight->heartbeat(r.own(snapshot));
        break;
    }
  }
  for (auto& r : ranks_) {
    RS_RETURN_IF_ERROR(r.events->flush());
    r.events.reset();
    RS_RETURN_IF_ERROR(r.flight->close());
    r.flight.reset();
  }
  RS_RETURN_IF_ERROR(format::write_run_metadata(dir_, metadata(run_id, start_ns)));
  for (const auto& e : std::filesystem::directory_iterator(dir_, ec))
    if (e.is_regular_file()) summary.bytes_written += e.file_size();
  return summary;
}

}  // namespace

Result<FaultSpec> resolve_fault(const SynthOptions& o) {
  if (o.ranks < 1) return invalid_argument(fmt::format("--ranks {}: need at least one rank", o.ranks));
  if (o.steps < 1) return invalid_argument(fmt::format("--steps {}: need at least one step", o.steps));
  if (o.tp < 1 || o.ranks % o.tp != 0)
    return invalid_argument(
        fmt::format("--tp {}: must divide --ranks {} (hint: TP groups are consecutive ranks)", o.tp, o.ranks));
  if (o.layers < 1 || o.layers > 64) return invalid_argument(fmt::format("--layers {}: must be 1..64", o.layers));
  if (o.ring_entries < 8) return invalid_argument("ring_entries must be at least 8");
  if (o.ranks_per_host < 1) return invalid_argument("ranks_per_host must be at least 1");
  const int dp = o.ranks / o.tp;
  if (o.moe_experts < 0 || o.moe_experts > 1024)
    return invalid_argument(fmt::format("--moe-experts {}: must be 0..1024", o.moe_experts));
  if (o.moe()) {
    if (o.ep < 1 || dp % o.ep != 0)
      return invalid_argument(
          fmt::
              format("--ep {}: must divide the data-parallel size {} (hint: expert groups are carved out of dp groups)",
                     o.ep, dp));
    if (o.moe_experts % o.ep != 0)
      return invalid_argument(fmt::format("--moe-experts {}: must be a multiple of --ep {}", o.moe_experts, o.ep));
    if (o.moe_top_k < 1 || o.moe_top_k > std::min(2, o.moe_experts))
      return invalid_argument(fmt::format("--moe-top-k {}: must be 1 or 2 and at most the experts", o.moe_top_k));
    if (o.moe_every < 1) return invalid_argument("--moe-every must be at least 1");
    if (o.hot_expert >= o.moe_experts)
      return invalid_argument(fmt::format("--moe-hot-expert {}: only {} experts", o.hot_expert, o.moe_experts));
    if (o.hot_bias < 0) return invalid_argument("--moe-hot-bias must be >= 0");
  } else if (o.ep != 1) {
    return invalid_argument("--ep needs --moe-experts");
  }
  FaultSpec f = o.fault;
  if (f.kind == FaultKind::kNone) return f;
  ModelShape shape;
  shape.layers = o.layers;
  shape.tp = o.tp;
  shape.dp = dp;
  shape.moe_experts = o.moe_experts;
  shape.moe_every = std::max(1, o.moe_every);
  const StepProgram program = build_step_program(shape);
  const int64_t mid_step = o.steps / 2;
  if (f.rank < 0) f.rank = o.ranks > 1 ? 1 : 0;
  if (f.rank >= o.ranks)
    return invalid_argument(
        fmt::format("--fault {}: rank {} is not below --ranks {}", fault_kind_name(f.kind), f.rank, o.ranks));
  if (f.step >= o.steps)
    return invalid_argument(
        fmt::format("--fault {}: step {} is not below --steps {}", fault_kind_name(f.kind), f.step, o.steps));
  auto check_range = [&]() -> Status {
    if (program.range_index(f.range) < 0) {
      std::string names;
      for (const auto& n : program.range_names) names += (names.empty() ? "" : ", ") + n;
      return invalid_argument(
          fmt::format("--fault {}: unknown range '{}' (hint: one of {})", fault_kind_name(f.kind), f.range, names));
    }
    return {};
  };
  switch (f.kind) {
    case FaultKind::kStall:
    case FaultKind::kDelay:
      if (f.range.empty()) f.range = f.kind == FaultKind::kStall ? "forward/embed" : "forward/block0/mlp";
      RS_RETURN_IF_ERROR(check_range());
      if (f.step < 0 && f.kind == FaultKind::kStall) f.step = mid_step;
      break;
    case FaultKind::kCrash:
      if (!f.range.empty()) RS_RETURN_IF_ERROR(check_range());
      if (f.step < 0) f.step = mid_step;
      break;
    case FaultKind::kDropGrad:
      if (dp < 2)
        return invalid_argument(
            "--fault drop-grad: needs data parallelism (--ranks / --tp >= 2): gradients are only reduced over dp "
            "groups");
      if (f.param.empty()) f.param = "h.0.mlp.c_fc.weight";
      if (program.param_index(f.param) < 0)
        return invalid_argument(
            fmt::
                format("--fault drop-grad: unknown param '{}' (hint: HF names such as wte.weight, h.0.mlp.c_fc.weight)",
                       f.param));
      if (f.step < 0) f.step = mid_step;
      break;
    case FaultKind::kSkip:
    case FaultKind::kResize: {
      if (o.ranks < 2)
        return invalid_argument(fmt::format("--fault {}: needs at least two ranks", fault_kind_name(f.kind)));
      if (f.comm.empty()) f.comm = role_comm_name(o.tp > 1 ? CommRole::kTp : CommRole::kDp, f.rank, o.tp);
      CommRole role;
      if (f.comm == "world") {
        return invalid_argument(
            fmt::format("--fault {}: comm world carries only the start-up barrier here (hint: use a tp or dp "
                        "communicator)",
                        fault_kind_name(f.kind)));
      } else if (f.comm.rfind("tp", 0) == 0 && o.tp > 1) {
        role = CommRole::kTp;
      } else if (f.comm.rfind("dp", 0) == 0 && dp > 1) {
        role = CommRole::kDp;
      } else {
        return invalid_argument(
            fmt::format("--fault {}: no communicator '{}' in this layout", fault_kind_name(f.kind), f.comm));
      }
      if (role_comm_name(role, f.rank, o.tp) != f.comm)
        return invalid_argument(
            fmt::format("--fault {}: rank {} is not a member of {}", fault_kind_name(f.kind), f.rank, f.comm));
      const int per_step = program.collectives_per_step(role);
      if (f.seq < 0) f.seq = int64_t(mid_step) * per_step + (per_step > 1 ? 1 : 0);
      if (f.seq >= int64_t(o.steps) * per_step)
        return invalid_argument(fmt::format("--fault {}: {} has only {} collectives in {} steps",
                                            fault_kind_name(f.kind), f.comm, int64_t(o.steps) * per_step, o.steps));
      if (f.kind == FaultKind::kResize && f.factor == 1.0)
        return invalid_argument("--fault resize: factor 1 changes nothing");
      break;
    }
    case FaultKind::kA2aMiscount: {
      if (!o.moe() || o.ep < 2)
        return invalid_argument(
            "--fault a2a-miscount: needs experts spread over ranks (--moe-experts E --ep N, N >= 2)");
      if (f.range.empty()) f.range = "forward/block0/moe/combine";
      RS_RETURN_IF_ERROR(check_range());
      if (f.range.find("/moe/combine") == std::string::npos && f.range.find("/moe/dispatch") == std::string::npos)
        return invalid_argument(
            fmt::
                format("--fault a2a-miscount: range {} has no all_to_all_v (hint: .../moe/combine or .../moe/dispatch)",
                       f.range));
      const int own = ep_rank_of(f.rank, o.tp, o.ep);
      if (f.peer < 0) f.peer = (own + 1) % o.ep;
      if (f.peer >= o.ep || f.peer == own)
        return invalid_argument(
            fmt::format("--fault a2a-miscount: peer {} must be another rank of the ep group (0..{})", f.peer,
                        o.ep - 1));
      if (f.delta == 0) f.delta = 1;
      if (f.step < 0) f.step = mid_step;
      break;
    }
    case FaultKind::kNone: break;
  }
  return f;
}

Result<SynthSummary> write_synthetic_run(const std::filesystem::path& dir, const SynthOptions& options) {
  RS_ASSIGN_OR_RETURN(FaultSpec fault, resolve_fault(options));
  Simulation sim(options, std::move(fault), dir);
  return sim.run();
}

}  // namespace rankscope::synth
