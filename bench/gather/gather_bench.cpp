// gather_bench.cpp — snapshot + gather + verdict at scale (budget: 4096 ranks on 4 nodes
// in < 5 s and < 50 MB moved). Writes a synthetic run (one rank stalled), splits its recorders over
// NODES per-"host" folders, then times what `hangdoctor RUN --hosts FILE --exec …` does through a
// fake launcher (`sh node.sh HOST cmd…` runs the real `rankscope snapshot` in that host's folder),
// each node's snapshot running in parallel: launch, compress, stream, decode, merge, diagnose.
// Prints seconds and bytes; asserts only that every node answered and the verdict is right.
// Usage: gather_bench [RANKS [NODES [STEPS]]] (defaults 256 4 10).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "rankscope/analyzers/hang/classifier.h"
#include "rankscope/analyzers/hang/snapshot_process_table.h"
#include "rankscope/format/run_directory.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/gather/gather.h"
#include "rankscope/synth/synth.h"

namespace {

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// CPU seconds (user + system) of `who`: on a shared, loaded machine wall time says more about the
// neighbours than about us; CPU time says what the work costs.
double cpu_seconds(int who) {
  rusage u{};
  ::getrusage(who, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace rankscope;
  namespace fs = std::filesystem;
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 256;
  const int nodes = argc > 2 ? std::atoi(argv[2]) : 4;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 10;
  if (ranks < nodes || nodes < 1 || ranks % nodes != 0) {
    std::fprintf(stderr, "gather_bench: RANKS must be a multiple of NODES\n");
    return 2;
  }
  const fs::path root = fs::temp_directory_path() / fmt::format("rs_gather_bench_{}", ::getpid());
  fs::remove_all(root);

  synth::SynthOptions o;
  o.ranks = ranks;
  o.steps = steps;
  o.tp = ranks % 8 == 0 ? 8 : 1;
  o.local_host = true;  // the snapshots ship recorders of their own host
  o.fault = *synth::parse_fault("stall:rank=5,range=backward/block1/mlp");
  auto t = std::chrono::steady_clock::now();
  auto summary = synth::write_synthetic_run(root / "local", o);
  if (!summary.ok()) {
    std::fprintf(stderr, "gather_bench: %s\n", summary.status().to_string().c_str());
    return 2;
  }
  // Split: node k holds its ranks' recorders (moved, not copied); run.json on node 0.
  const int per = ranks / nodes;
  uint64_t recorder_bytes = 0;
  std::vector<std::string> hosts;
  for (int k = 0; k < nodes; ++k) {
    hosts.push_back(fmt::format("node{}", k));
    const fs::path dir = root / hosts.back() / "run";
    fs::create_directories(dir);
    if (k == 0) fs::rename(root / "local" / "run.json", dir / "run.json");
    for (int r = k * per; r < (k + 1) * per; ++r) {
      recorder_bytes += fs::file_size(format::flight_recorder_path(root / "local", r));
      fs::rename(format::flight_recorder_path(root / "local", r), format::flight_recorder_path(dir, r));
    }
  }
  fs::remove_all(root / "local");  // the event streams: never shipped
  std::printf("synth: %d ranks (tp %d) on %d nodes, %d steps, stall on rank 5: %.2f s; recorders %.1f MB (%.0f kB a rank)\n",
              ranks, o.tp, nodes, steps, since(t), double(recorder_bytes) / 1e6, double(recorder_bytes) / ranks / 1e3);

  {
    std::ofstream script(root / "node.sh");
    script << "#!/bin/sh\nroot=$(dirname \"$0\"); host=$1; shift\ncd \"$root/$host\" && exec \"$@\"\n";
  }
  auto targets = gather::exec_targets(hosts, "sh " + (root / "node.sh").string() + " {host}",
                                      "'" RANKSCOPE_BINARY_DIR "/bin/rankscope' snapshot run");
  if (!targets.ok()) return 2;
  gather::GatherOptions go;
  go.out_dir = root / "gathered";
  go.run_dir = "run";
  go.deadline_s = 120;
  t = std::chrono::steady_clock::now();
  const double self0 = cpu_seconds(RUSAGE_SELF), children0 = cpu_seconds(RUSAGE_CHILDREN);
  auto record = gather::gather_nodes(*targets, go);
  const double gather_s = since(t);
  const double snapshot_cpu = cpu_seconds(RUSAGE_CHILDREN) - children0, gather_cpu = cpu_seconds(RUSAGE_SELF) - self0;
  if (!record.ok() || record->answered() != nodes) {
    std::fprintf(stderr, "gather_bench: gather failed: %s\n",
                 record.ok() ? record->nodes[0].reason.c_str() : record.status().message().c_str());
    return 1;
  }
  uint64_t unpacked = 0;
  for (const auto& n : record->nodes) unpacked += n.bytes;

  t = std::chrono::steady_clock::now();
  const double verdict_cpu0 = cpu_seconds(RUSAGE_SELF);
  auto run = format::open_run_directory(go.out_dir);
  auto processes = analyzers::hang::SnapshotProcessTable::load(go.out_dir);
  if (!run.ok() || !processes.ok()) return 2;
  const analyzers::hang::Diagnosis d = analyzers::hang::diagnose(*run, *processes);
  const double verdict_s = since(t);
  const double verdict_cpu = cpu_seconds(RUSAGE_SELF) - verdict_cpu0;

  std::printf("gather (%d snapshots in parallel, decode, merge): %.2f s; moved %.2f MB compressed (%.1f kB a rank, "
              "%.0fx smaller than the %.1f MB unpacked)\n",
              nodes, gather_s, double(record->stream_bytes) / 1e6, double(record->stream_bytes) / ranks / 1e3,
              double(unpacked) / double(std::max<uint64_t>(record->stream_bytes, 1)), double(unpacked) / 1e6);
  std::printf("cpu: snapshots %.2f s (%.2f s a node), gather's decode and merge %.2f s, verdict %.2f s\n", snapshot_cpu,
              snapshot_cpu / nodes, gather_cpu, verdict_cpu);
  std::printf("verdict on the gathered run: %.2f s\n", verdict_s);
  std::printf("gather + verdict: %.2f s, %.2f MB moved (budget for 4096 ranks on 4 nodes: < 5 s, < 50 MB)\n",
              gather_s + verdict_s, double(record->stream_bytes) / 1e6);
  std::printf("verdict: %s\n", d.headline.c_str());
  fs::remove_all(root);
  const bool right = d.verdict == analyzers::hang::Verdict::kHang && d.culprit_ranks == std::vector<int>{5};
  if (!right) std::fprintf(stderr, "gather_bench: wrong diagnosis\n");
  return right ? 0 : 1;
}
