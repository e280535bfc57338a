// log_bench.cpp — hangdoctor on the logs of a 1024-rank job (budget: 1 GB read in under
// 5 s on 2 cores, memory bounded by ranks x communicators, not by bytes).
//
// The logs are written first (not timed), in the shapes NCCL 2.23+ and PyTorch 2.5 print
// (docs/log-formats/): one file per node of 8 ranks, torchrun's "[rankN]:" prefix, lines of a node's
// ranks interleaved; per rank its init lines for three communicators (world, a tensor group of 8, a
// data group across nodes), channel and settings lines, then NCCL_DEBUG_SUBSYS=COLL lines for every
// call on them until the wanted size is reached, rank LAGGING one all-reduce short on the world
// communicator, and PyTorch's watchdog lines of the ranks that timed out waiting for it. Then a
// fresh process times `hangdoctor DIR --json FILE` in-process, so the peak RSS it prints is the
// reader's alone. Usage: log_bench [RANKS [MEGABYTES]] (default 1024 1024). Prints numbers and
// whether the verdict names the lagging rank; asserts nothing. `log_bench RANKS MB --write DIR` only
// writes the logs (for a profiler).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "process_usage.h"

#include "rankscope/cli/hangdoctor_app.h"

namespace {

namespace fs = std::filesystem;
constexpr int kRanksPerNode = 8;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Writer {
  std::FILE* f;
  std::string buf;
  void flush() {
    std::fwrite(buf.data(), 1, buf.size(), f);
    buf.clear();
  }
};

// Writes the job's logs into `dir`; returns the lagging rank.
int write_job(const fs::path& dir, int ranks, uint64_t bytes) {
  fs::create_directories(dir);
  const int nodes = (ranks + kRanksPerNode - 1) / kRanksPerNode;
  const int lagging = ranks / 2 + 3;
  // COLL lines per rank to reach the size (about 230 bytes a line).
  const uint64_t calls = std::max<uint64_t>(10, bytes / uint64_t(ranks) / 230);
  for (int n = 0; n < nodes; ++n) {
    Writer w{std::fopen((dir / fmt::format("node{:04d}.log", n)).c_str(), "wb"), {}};
    const std::string host = fmt::format("gpu-node-{:04d}", n);
    auto line = [&](int r, std::string_view level, std::string_view msg) {
      fmt::format_to(std::back_inserter(w.buf), "[rank{}]:{}:{}:{} [{}] NCCL {} {}\n", r, host, 10000 + r, 10000 + r,
                     r % kRanksPerNode, level, msg);
    };
    const int first = n * kRanksPerNode, last = std::min(ranks, first + kRanksPerNode);
    for (int r = first; r < last; ++r) {
      line(r, "INFO", "NCCL version 2.23.4+cuda12.6");
      line(r, "INFO", fmt::format("Bootstrap : Using ib0:10.1.{}.{}<0>", n / 256, n % 256));
      line(r, "INFO", "NCCL_IB_HCA set by environment to mlx5");
      const int tp = r / kRanksPerNode, dp = r % kRanksPerNode;
      line(r, "INFO", fmt::format("ncclCommInitRankConfig comm 0x7f{:06x}01 rank {} nranks {} cudaDev {} nvmlDev {} busId "
                                  "1b000 commId 0x1111222233334444 - Init COMPLETE",
                                  r, r, ranks, r % kRanksPerNode, r % kRanksPerNode));
      line(r, "INFO", fmt::format("ncclCommInitRankConfig comm 0x7f{:06x}02 rank {} nranks {} cudaDev {} nvmlDev {} busId "
                                  "1b000 commId 0x5555{:012x} - Init COMPLETE",
                                  r, r % kRanksPerNode, kRanksPerNode, r % kRanksPerNode, r % kRanksPerNode, tp));
      line(r, "INFO", fmt::format("ncclCommInitRankConfig comm 0x7f{:06x}03 rank {} nranks {} cudaDev {} nvmlDev {} busId "
                                  "1b000 commId 0x6666{:012x} - Init COMPLETE",
                                  r, tp, nodes, r % kRanksPerNode, r % kRanksPerNode, dp));
      line(r, "INFO", "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read");
      line(r, "INFO", fmt::format("Channel 00/0 : {}[0] -> {}[0] [send] via NET/IB/0/GDRDMA", r, (r + 8) % ranks));
    }
    w.flush();
    // Calls: the node's ranks interleaved, as one output file holds them.
    for (uint64_t i = 0; i < calls; ++i) {
      for (int r = first; r < last; ++r) {
        const int which = int(i % 3);
        if (which == 0 && r == lagging && i + 3 >= calls) continue;  // its last world all-reduce, never made
        const int nr = which == 0 ? ranks : which == 1 ? kRanksPerNode : nodes;
        line(r, "INFO", fmt::format("{}: opCount {:x} sendbuff 0x7f5a00000000 recvbuff 0x7f5a00000000 count {} datatype 9 "
                                    "op 0 root 0 comm 0x7f{:06x}0{} [nranks={}] stream 0x55aa00000000",
                                    which == 2 ? "ReduceScatter" : "AllReduce", i / 3, 1 << (10 + which), r, which + 1, nr));
      }
      if (w.buf.size() > (8u << 20)) w.flush();
    }
    for (int r = first; r < last; ++r) {
      if (r == lagging) continue;
      const uint64_t seq = (calls + 2) / 3;
      fmt::format_to(std::back_inserter(w.buf),
                     "[rank{0}]:[E1127 10:00:00.000000000 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0(default_pg) Rank {0}] "
                     "Watchdog caught collective operation timeout: WorkNCCL(SeqNum={1}, OpType=ALLREDUCE, NumelIn=1024, "
                     "NumelOut=1024, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.\n",
                     r, seq);
    }
    w.flush();
    std::fclose(w.f);
  }
  return lagging;
}

int analyze(const fs::path& dir, int lagging) {
  using namespace rankscope;
  const std::string d = dir.string(), json = (dir.parent_path() / "verdict.json").string();
  const bench::TimedRun run = bench::time_hangdoctor_cli({d, "--json", json}, nullptr);
  const double s = run.wall_s, cpu_s = run.usage.cpu_s;
  const int rc = run.exit_code;
  const bench::ProcessUsage usage = run.usage;
  uint64_t bytes = 0;
  for (const auto& e : fs::directory_iterator(dir)) bytes += e.file_size();
  std::printf("hangdoctor on %.0f MB of logs: %.3f s wall, %.3f s CPU, %.0f MB/s, peak RSS %.0f MiB, exit %d\n",
              double(bytes) / 1e6, s, cpu_s, double(bytes) / 1e6 / s, usage.peak_mib, rc);
  std::FILE* jf = std::fopen(json.c_str(), "rb");
  std::string text;
  if (jf) {
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, jf)) > 0) text.append(buf, n);
    std::fclose(jf);
  }
  const auto j = nlohmann::json::parse(text, nullptr, false);
  const bool named = j.is_object() && j.value("culprit_ranks", nlohmann::json::array()) == nlohmann::json::array({lagging});
  std::printf("verdict: %s; names the lagging rank %d: %s\n",
              j.is_object() ? j.value("headline", std::string("?")).substr(0, 160).c_str() : "unreadable", lagging,
              named ? "yes" : "NO");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string_view(argv[1]) == "--analyze") return analyze(argv[2], std::atoi(argv[3]));
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 1024;
  const uint64_t mb = argc > 2 ? uint64_t(std::atoll(argv[2])) : 1024;
  if (ranks < 16 || mb < 1) {
    std::fprintf(stderr, "usage: log_bench [RANKS>=16 [MEGABYTES]]\n");
    return 2;
  }
  if (argc == 5 && std::string_view(argv[3]) == "--write") {  // keep the logs (for a profiler)
    std::printf("lagging rank %d\n", write_job(argv[4], ranks, mb << 20));
    return 0;
  }
  const fs::path root = fs::temp_directory_path() / fmt::format("rs_log_bench_{}", ::getpid());
  const auto t0 = std::chrono::steady_clock::now();
  const int lagging = write_job(root / "logs", ranks, mb << 20);
  std::printf("wrote the logs of %d ranks (%d nodes) in %.1f s\n", ranks, (ranks + kRanksPerNode - 1) / kRanksPerNode,
              seconds_since(t0));
  std::fflush(stdout);
  const pid_t child = fork();
  if (child == 0) {
    execl("/proc/self/exe", argv[0], "--analyze", (root / "logs").c_str(), std::to_string(lagging).c_str(), nullptr);
    _exit(127);
  }
  int status = 0;
  waitpid(child, &status, 0);
  fs::remove_all(root);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
