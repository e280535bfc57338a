// node_simulator.cpp — builds each simulated node's snapshot stream (node_simulator.h).
//
// Times, on rank 0's clock (every rank aligned, offset 0): the hung step began at B = now -
// stuck_s - 0.9 s; forward takes 0.3 s (two tp all-reduces a layer), backward 0.55 s (two a
// layer), and at B + 0.9 s every rank whose group finished enters the gradient all-reduce on dp
// and waits; the slow node enters it slow_node_late_s later. The culprit stopped inside the last
// layer's MLP at B + 0.27 s, so its tp peers wait in that MLP's all-reduce from B + 0.28 s.
#include "rankscope/gather/node_simulator.h"

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "rankscope/format/json_text.h"
#include "rankscope/format/name_pool.h"
#include "rankscope/format/rank_summary.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/format/run_metadata.h"
#include "rankscope/format/snapshot_stream.h"

namespace rankscope::gather {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSecond = 1'000'000'000;
constexpr int kClosedKept = 4;  // closed records a rank's summary keeps per communicator

struct Layout {
  const SimulatedJob& job;
  int world = 0;
  int tp_per_step = 0;
  int64_t step_begin = 0;
  int64_t sync_at = 0;
  int culprit = 0, culprit_node = 0, slow_node = -1;
  uint64_t culprit_seq = 0;  // the tp all-reduce the culprit's peers wait in
};

format::CollectiveSnapshot record(uint64_t seq, format::CollectiveOp op, uint64_t count, int64_t enqueue, int64_t end,
                                  int64_t step, std::string_view range) {
  format::CollectiveSnapshot r;
  r.seq = seq;
  r.op = op;
  r.dtype = format::DataType::kBFloat16;
  r.count = count;
  r.bytes = count * 2;
  r.enqueue_ns = enqueue;
  r.start_ns = enqueue + 20'000;
  r.end_ns = end;
  r.state = end ? format::CollectiveState::kCompleted : format::CollectiveState::kStarted;
  r.step = step;
  r.range = format::intern_name(range);
  return r;
}

// The tp all-reduce `i` of a step (0..4L-1): its call site and when it was entered, from the step's start.
std::pair<std::string, int64_t> tp_call(const Layout& l, int i) {
  const int layers = l.job.layers;
  const bool forward = i < 2 * layers;
  const int k = forward ? i : i - 2 * layers;
  const int block = forward ? k / 2 : layers - 1 - k / 2;
  const char* part = (k % 2 == 0) == forward ? "attn" : "mlp";
  const int64_t at = forward ? 300 * kMs * (k + 1) / (2 * layers) : 300 * kMs + 550 * kMs * (k + 1) / (2 * layers);
  return {fmt::format("{}/block{}/{}", forward ? "forward" : "backward", block, part), at - 5 * kMs};
}

// One rank's flight recorder as the hang left it.
format::FlightRecorderSnapshot rank_snapshot(const Layout& l, int rank) {
  const SimulatedJob& job = l.job;
  const int node = rank / job.ranks_per_node, local = rank % job.ranks_per_node;
  const bool in_culprit_group = node == l.culprit_node, is_culprit = rank == l.culprit;
  const int64_t late = node == l.slow_node ? int64_t(job.slow_node_late_s * kSecond) : 0;
  const int64_t S = job.step;
  format::FlightRecorderSnapshot s;
  s.schema_version = 1;
  s.rank = rank;
  s.world_size = l.world;
  s.local_rank = local;
  s.pid = 4000 + local;
  s.host = simulated_host(node);
  s.run_id = fmt::format("sim-{}", l.world);
  s.boot_id = fmt::format("boot-{}", node);
  s.start_ns = job.now_ns - 3600 * kSecond;
  s.ring_entries = 64;
  s.live.heartbeat_ns = job.now_ns - int64_t((uint64_t(rank) * 2654435761u) % 100) * kMs;  // beats every 100 ms
  s.live.step = S;
  s.live.process_state = format::ProcessState::kRunning;
  s.live.step_begin_ns = l.step_begin;
  s.live.clock_uncertainty_ns = 20'000;
  s.live.phase = in_culprit_group ? "forward" : "grad_sync";
  format::BoundSnapshot step_bound;
  step_bound.kind = format::BoundKind::kStep;
  step_bound.site = format::intern_name("step");
  step_bound.samples = 256;
  step_bound.warmup = 20;
  step_bound.quantile_ns = 1000 * kMs;
  step_bound.bound_ns = 10 * kSecond;
  step_bound.updated_ns = l.step_begin;
  step_bound.quantile_permille = 950;
  step_bound.window = 256;
  s.bounds.push_back(step_bound);
  s.grad.backward_step = in_culprit_group ? S - 1 : S;
  s.grad.n_params = s.grad.n_arrived = 148;
  s.grad.backward_begin_ns = in_culprit_group ? l.step_begin - 700 * kMs : l.step_begin + 300 * kMs + late;

  format::ThreadSnapshot main;
  main.tid = s.pid;
  main.name = "python3";
  main.stack.push_back({format::intern_name("step"), l.step_begin});
  const auto [culprit_site, culprit_at] = tp_call(l, int(l.culprit_seq % uint64_t(l.tp_per_step)));
  if (in_culprit_group) {
    main.stack.push_back({format::intern_name(culprit_site), l.step_begin + culprit_at - 10 * kMs});
    if (is_culprit)
      main.stack.push_back({format::intern_name(culprit_site + "/fc2"), l.step_begin + culprit_at - 8 * kMs});
  } else {
    main.stack.push_back({format::intern_name("grad_sync"), l.sync_at + late});
  }
  main.depth = uint32_t(main.stack.size());
  s.threads.push_back(std::move(main));

  // tp{node}: the steps before whole, this step up to where the group is.
  format::CommSnapshot tp;
  tp.index = 0;
  tp.name = fmt::format("tp{}", node);
  tp.size = job.ranks_per_node;
  tp.rank_in_comm = local;
  const uint64_t step_base = uint64_t(S) * uint64_t(l.tp_per_step);
  tp.next_seq =
      in_culprit_group ? (is_culprit ? l.culprit_seq : l.culprit_seq + 1) : step_base + uint64_t(l.tp_per_step);
  const uint64_t closed = in_culprit_group ? l.culprit_seq : tp.next_seq;
  tp.completed_count = closed;
  for (uint64_t seq = closed >= kClosedKept ? closed - kClosedKept : 0; seq < closed; ++seq) {
    const int64_t step = int64_t(seq / uint64_t(l.tp_per_step));
    const auto [site, at] = tp_call(l, int(seq % uint64_t(l.tp_per_step)));
    const int64_t begin = l.step_begin - (S - step) * kSecond + (step == S ? late : 0) + at;
    tp.ring.push_back(record(seq, format::CollectiveOp::kAllReduceSum, 4u << 20, begin, begin + 3 * kMs, step, site));
  }
  if (in_culprit_group && !is_culprit)
    tp.ring.push_back(record(l.culprit_seq, format::CollectiveOp::kAllReduceSum, 4u << 20, l.step_begin + culprit_at, 0,
                             S, culprit_site));
  s.comms.push_back(std::move(tp));

  // dp{local}: one gradient all-reduce a step; this step's open except in the culprit's group.
  format::CommSnapshot dp;
  dp.index = 1;
  dp.name = fmt::format("dp{}", local);
  dp.size = job.nodes;
  dp.rank_in_comm = node;
  dp.next_seq = uint64_t(S) + (in_culprit_group ? 0 : 1);
  dp.completed_count = uint64_t(S);
  for (int64_t step = std::max<int64_t>(0, S - kClosedKept); step < S; ++step) {
    const int64_t at = l.sync_at - (S - step) * kSecond;
    dp.ring.push_back(
        record(uint64_t(step), format::CollectiveOp::kAllReduceSum, 16u << 20, at, at + 40 * kMs, step, "grad_sync"));
  }
  if (!in_culprit_group)
    dp.ring.push_back(
        record(uint64_t(S), format::CollectiveOp::kAllReduceSum, 16u << 20, l.sync_at + late, 0, S, "grad_sync"));
  s.comms.push_back(std::move(dp));

  uint64_t issued = 0, completed = 0;
  for (const auto& c : s.comms) issued += c.next_seq, completed += c.completed_count;
  s.live.collectives_issued = issued;
  s.live.collectives_completed = completed;
  return s;
}

std::string run_json(const Layout& l) {
  format::RunMetadata meta;
  meta.run_id = fmt::format("sim-{}", l.world);
  meta.created_ns = l.job.now_ns - 3600 * kSecond;
  meta.program = "rankscope node simulator";
  meta.world_size = l.world;
  meta.tp = l.job.ranks_per_node;
  meta.dp = l.job.nodes;
  for (int n = 0; n < l.job.nodes; ++n) {
    format::CommGroup g{fmt::format("tp{}", n), {}};
    for (int k = 0; k < l.job.ranks_per_node; ++k) g.ranks.push_back(n * l.job.ranks_per_node + k);
    meta.groups.push_back(std::move(g));
  }
  for (int k = 0; k < l.job.ranks_per_node; ++k) {
    format::CommGroup g{fmt::format("dp{}", k), {}};
    for (int n = 0; n < l.job.nodes; ++n) g.ranks.push_back(n * l.job.ranks_per_node + k);
    meta.groups.push_back(std::move(g));
  }
  for (int r = 0; r < l.world; ++r) meta.hosts.push_back(simulated_host(r / l.job.ranks_per_node));
  return format::json_text(format::to_json(meta));
}

// One node's stream, as `rankscope snapshot` writes it.
Result<std::vector<uint8_t>> node_stream(const Layout& l, int node, const std::string* run_json_text) {
  const SimulatedJob& job = l.job;
  format::RankSummaryWriter summaries;
  nlohmann::json processes = nlohmann::json::array(), summarized = nlohmann::json::array();
  for (int k = 0; k < job.ranks_per_node; ++k) {
    const int rank = node * job.ranks_per_node + k;
    summaries.add(rank_snapshot(l, rank));
    summarized.push_back(rank);
    processes.push_back({{"host", simulated_host(node)},
                         {"pid", 4000 + k},
                         {"ranks", {rank}},
                         {"alive", "alive"},
                         {"state", "runnable"},
                         {"wchan", ""},
                         {"threads", 12}});
  }
  nlohmann::json files = {format::kRankSummaryEntry};
  if (run_json_text) files.push_back(format::kRunMetadataFile);
  const nlohmann::json manifest = {{"format", "rankscope-snapshot"},
                                   {"version", format::kSnapshotVersion},
                                   {"host", simulated_host(node)},
                                   {"boot_id", fmt::format("boot-{}", node)},
                                   {"taken_unix_ms", job.now_ns / kMs},
                                   {"run_dir", "/scratch/run"},
                                   {"rankscope_version", "simulated"},
                                   {"processes", processes},
                                   {"files", files},
                                   {"summarized", summarized},
                                   {"skipped", nlohmann::json::array()}};
  char* buffer = nullptr;
  size_t size = 0;
  std::FILE* out = ::open_memstream(&buffer, &size);
  if (!out) return io_error("cannot open a memory stream");
  Status status;
  {
    format::SnapshotWriter writer(out);
    status = writer.add(format::kSnapshotManifest, format::json_text(manifest, 1));
    if (status.ok()) status = writer.add(format::kRankSummaryEntry, summaries.finish());
    if (status.ok() && run_json_text) status = writer.add(format::kRunMetadataFile, *run_json_text);
    if (status.ok()) status = writer.finish();
  }
  std::fclose(out);
  std::vector<uint8_t> bytes(buffer, buffer + size);
  std::free(buffer);
  if (!status.ok()) return status;
  return bytes;
}

}  // namespace

std::string simulated_host(int node) { return fmt::format("n{:05d}", node); }

Result<SimulatedGather> simulate_gather(const SimulatedJob& job) {
  if (job.nodes < 1 || job.ranks_per_node < 2 || job.layers < 1 || job.step < 1)
    return invalid_argument("a simulated job needs a node or more, two ranks a node or more, a layer and a step");
  Layout l{job};
  l.world = job.nodes * job.ranks_per_node;
  l.tp_per_step = 4 * job.layers;
  l.step_begin = job.now_ns - int64_t(job.stuck_s * kSecond) - 900 * kMs;
  l.sync_at = l.step_begin + 900 * kMs;
  l.culprit =
      job.culprit >= 0 ? job.culprit : (job.nodes / 2) * job.ranks_per_node + std::min(3, job.ranks_per_node - 1);
  if (l.culprit >= l.world)
    return invalid_argument(fmt::format("culprit rank {} is outside a job of {} ranks", l.culprit, l.world));
  l.culprit_node = l.culprit / job.ranks_per_node;
  l.culprit_seq =
      uint64_t(job.step) * uint64_t(l.tp_per_step) + uint64_t(2 * job.layers - 1);  // the last forward MLP's
  l.slow_node = job.slow_node == -1 ? job.nodes / 4 : job.slow_node;
  if (l.slow_node == l.culprit_node || l.slow_node >= job.nodes) l.slow_node = -2;
  int dead_first = job.dead_switch_first >= 0 ? job.dead_switch_first : (3 * job.nodes / 4) / 32 * 32;
  const int dead_count = std::min(job.dead_switch_nodes, job.nodes);
  if (dead_count > 0 && dead_first + dead_count > job.nodes)
    return invalid_argument("the dead switch's nodes are outside the job");
  if (dead_count > 0 && l.culprit_node >= dead_first && l.culprit_node < dead_first + dead_count)
    return invalid_argument("the culprit sits behind the dead switch: nothing could name it");

  SimulatedGather g;
  g.world_size = l.world;
  g.culprit = l.culprit;
  g.slow_node = l.slow_node >= 0 ? l.slow_node : -1;
  const std::string meta = run_json(l);
  g.answers.resize(size_t(job.nodes));
  for (int n = 0; n < job.nodes; ++n) {
    NodeAnswer& a = g.answers[size_t(n)];
    a.host = simulated_host(n);
    if (dead_count > 0 && n >= dead_first && n < dead_first + dead_count) {
      a.reason = "no answer within the 20.0 s deadline";
      a.seconds = 20;
      g.dead_hosts.push_back(a.host);
      for (int k = 0; k < job.ranks_per_node; ++k) g.dead_ranks.push_back(n * job.ranks_per_node + k);
      continue;
    }
    RS_ASSIGN_OR_RETURN(a.stream, node_stream(l, n, n == 0 ? &meta : nullptr));
    a.seconds = 0.2;
    g.stream_bytes += a.stream.size();
  }
  return g;
}

}  // namespace rankscope::gather
