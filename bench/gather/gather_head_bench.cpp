// gather_head_bench.cpp — the head of a gather alone, at sizes this machine cannot run as a job:
// every node's answer simulated (node_simulator.h: one culprit, a slow node, a dead switch), then
// what `hangdoctor --slurm` does with the answers: decode and merge them into a gathered run
// (merge_node_answers), then hangdoctor on it (read, classify, text and JSON). Prints the head's
// CPU seconds for each part, the peak memory and the bytes moved a rank; asserts only that the
// verdict names the culprit and the dead switch's nodes in one finding (exit 1 otherwise).
// Usage: gather_head_bench [NODES [RANKS_PER_NODE [REPEATS]]] (defaults 2048 8 1).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "rankscope/analyzers/hang/rank_list.h"
#include "rankscope/cli/hangdoctor_app.h"
#include "rankscope/gather/node_simulator.h"
#include "self_usage.h"

namespace {

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::printf(
        "usage: gather_head_bench [NODES [RANKS_PER_NODE [REPEATS]]]   (defaults 2048 8 1)\n"
        "The head of a gather alone, on simulated node answers: CPU seconds, peak memory, bytes a rank.\n");
    return 0;
  }
  using namespace rankscope;
  namespace fs = std::filesystem;
  gather::SimulatedJob job;
  job.nodes = argc > 1 ? std::atoi(argv[1]) : 2048;
  job.ranks_per_node = argc > 2 ? std::atoi(argv[2]) : 8;
  const int repeats = argc > 3 ? std::max(1, std::atoi(argv[3])) : 1;
  const fs::path root = fs::temp_directory_path() / fmt::format("rs_gather_head_bench_{}", ::getpid());

  auto t = std::chrono::steady_clock::now();
  auto sim = gather::simulate_gather(job);
  if (!sim.ok()) {
    std::fprintf(stderr, "gather_head_bench: %s\n", sim.status().message().c_str());
    return 2;
  }
  const int ranks = sim->world_size;
  std::printf("simulated %d nodes x %d ranks = %d ranks (culprit rank %d, slow node %s, dead switch %s): %.2f s\n",
              job.nodes, job.ranks_per_node, ranks, sim->culprit,
              sim->slow_node >= 0 ? gather::simulated_host(sim->slow_node).c_str() : "none",
              sim->dead_hosts.empty() ? "none" : fmt::format("{}..{}", sim->dead_hosts.front(), sim->dead_hosts.back()).c_str(),
              since(t));
  std::printf("moved: %.1f MB, %.0f bytes a rank (snapshot streams: manifest + rank summaries, deflated)\n",
              double(sim->stream_bytes) / 1e6, double(sim->stream_bytes) / (ranks - double(sim->dead_ranks.size())));
  const double rss_before = bench::self_usage().peak_mib;

  bool right = true;
  for (int rep = 0; rep < repeats; ++rep) {
    std::vector<gather::NodeAnswer> answers = rep + 1 < repeats ? sim->answers : std::move(sim->answers);
    fs::remove_all(root);
    gather::GatherOptions o;
    o.out_dir = root;
    o.launcher = "slurm";
    o.job_id = "4242";
    o.run_dir = "/scratch/run";
    auto u0 = bench::self_usage();
    t = std::chrono::steady_clock::now();
    auto record = gather::merge_node_answers(answers, o);
    const double merge_wall = since(t);
    auto u1 = bench::self_usage();
    if (!record.ok()) {
      std::fprintf(stderr, "gather_head_bench: %s\n", record.status().message().c_str());
      return 2;
    }
    const std::string dir = root.string(), json = (root.parent_path() / fmt::format("rs_gather_head_bench_{}.json", ::getpid())).string();
    std::vector<std::string_view> args{dir, "--json", json};
    rankscope::cli::HangdoctorEnv env;
    env.out = std::tmpfile();
    env.err = std::tmpfile();
    t = std::chrono::steady_clock::now();
    const int rc = rankscope::cli::run_hangdoctor(args, env);
    const double verdict_wall = since(t);
    auto u2 = bench::self_usage();
    std::fclose(env.out);
    std::fclose(env.err);
    std::ifstream in(json);
    const auto j = nlohmann::json::parse(in, nullptr, false);
    fs::remove(json);
    std::printf("run %d: head cpu: decode + merge %.2f s (wall %.2f), verdict %.2f s (wall %.2f, exit %d); total %.2f s cpu\n",
                rep + 1, u1.cpu_s - u0.cpu_s, merge_wall, u2.cpu_s - u1.cpu_s, verdict_wall, rc, u2.cpu_s - u0.cpu_s);
    if (rep + 1 < repeats) continue;
    std::printf("peak memory: %.0f MiB (%.0f MiB before the head's work: the simulated answers)\n", u2.peak_mib, rss_before);
    if (!j.is_object()) {
      std::fprintf(stderr, "gather_head_bench: no JSON verdict\n");
      return 1;
    }
    std::printf("verdict: %s\n", j.value("headline", std::string()).c_str());
    std::vector<int> culprits = j.value("culprit_ranks", std::vector<int>());
    std::string grouped;
    int dead_lines = 0;
    if (j.contains("gather") && j["gather"].contains("findings"))
      for (const auto& line : j["gather"]["findings"]) {
        const std::string s = line.get<std::string>();
        std::printf("  gather: %s\n", s.c_str());
        if (s.find("unreachable") != std::string::npos) ++dead_lines, grouped = s;
      }
    const bool names_culprit = culprits == std::vector<int>{sim->culprit};
    const bool one_finding = dead_lines == 1 &&
                             grouped.find(fmt::format("{} nodes", sim->dead_hosts.size())) != std::string::npos &&
                             grouped.find(analyzers::hang::compress_ranks(sim->dead_ranks)) != std::string::npos;
    std::printf("names the culprit (rank %d) alone: %s; the dead switch's %zu nodes in one finding: %s\n", sim->culprit,
                names_culprit ? "yes" : "no", sim->dead_hosts.size(), one_finding || sim->dead_hosts.empty() ? "yes" : "no");
    right = names_culprit && (one_finding || sim->dead_hosts.empty());
  }
  fs::remove_all(root);
  return right ? 0 : 1;
}
