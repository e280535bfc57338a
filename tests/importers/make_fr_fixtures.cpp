// make_fr_fixtures.cpp — writes the checked-in Flight Recorder fixtures under
// DIR/<scenario>/comm_lib_trace_rank_<r> (usage: make_fr_fixtures DIR). The tests check that this
// writer still reproduces the checked-in bytes, so regenerate with it, never by hand.
//
// Also writes a simulated Megatron-LM job's dumps (fr_megatron_job.h) for a human to run hangdoctor
// on: make_fr_fixtures --megatron TPxPPxDP FAULT RANKS OUTDIR [key=value ...] writes OUTDIR/_dump_<rank>
// (FAULT: none, gpu_error, gil_held, killed, stage_stall, a2a_count_mismatch; RANKS: "9,14" or "-";
// keys: iterations, fault_iteration, microbatches, layers, ring, seed, only_active=0|1, moe=0|1,
// fp8=0|1, batch_p2p=0|1, prefix). It prints the job's description and culprits. Nothing it writes is
// checked in.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "fr_fixture_writer.h"
#include "fr_megatron_job.h"
#include "fr_scenarios.h"
#include "fr_fixture_set.h"

namespace {

using rankscope::torch_fr::testing::MegatronFault;

int usage() {
  std::fprintf(stderr,
               "usage: make_fr_fixtures DIR\n"
               "       make_fr_fixtures --megatron TPxPPxDP FAULT RANKS OUTDIR [key=value ...]\n"
               "         FAULT: none gpu_error gil_held killed stage_stall a2a_count_mismatch; RANKS: 9,14 or -\n"
               "         keys: iterations fault_iteration microbatches layers ring seed only_active moe fp8 batch_p2p prefix\n");
  return 2;
}

bool parse_fault(const std::string& s, MegatronFault& f) {
  if (s == "none") f = MegatronFault::kNone;
  else if (s == "gpu_error") f = MegatronFault::kGpuError;
  else if (s == "gil_held") f = MegatronFault::kGilHeld;
  else if (s == "killed") f = MegatronFault::kKilled;
  else if (s == "stage_stall") f = MegatronFault::kStageStall;
  else if (s == "a2a_count_mismatch") f = MegatronFault::kA2aCountMismatch;
  else return false;
  return true;
}

int megatron(int argc, char** argv) {
  if (argc < 6) return usage();
  rankscope::torch_fr::testing::MegatronJobSpec spec;
  auto& L = spec.layout;
  if (std::sscanf(argv[2], "%dx%dx%d", &L.tp, &L.pp, &L.dp) != 3 || L.tp < 1 || L.pp < 1 || L.dp < 1) return usage();
  if (!parse_fault(argv[3], spec.fault)) return usage();
  const std::string ranks = argv[4];
  if (ranks != "-") {
    size_t start = 0;
    while (start < ranks.size()) {
      const size_t comma = std::min(ranks.find(',', start), ranks.size());
      spec.fault_ranks.push_back(std::atoi(ranks.substr(start, comma - start).c_str()));
      start = comma + 1;
    }
  }
  std::string prefix = "_dump_";
  for (int i = 6; i < argc; ++i) {
    const std::string kv = argv[i];
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) return usage();
    const std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
    const long n = std::atol(v.c_str());
    if (k == "iterations") spec.iterations = int(n);
    else if (k == "fault_iteration") spec.fault_iteration = int(n);
    else if (k == "microbatches") L.microbatches = int(n);
    else if (k == "layers") L.layers_per_stage = int(n);
    else if (k == "ring") spec.ring = int(n);
    else if (k == "seed") spec.seed = uint64_t(n);
    else if (k == "only_active") spec.only_active = n != 0;
    else if (k == "moe") L.moe = n != 0;
    else if (k == "fp8") L.fp8 = n != 0;
    else if (k == "batch_p2p") L.batch_p2p_comm = n != 0;
    else if (k == "prefix") prefix = v;
    else return usage();
  }
  try {
    uint64_t bytes = 0;
    const auto job = rankscope::torch_fr::testing::write_megatron_job(spec, argv[5], prefix, &bytes);
    std::printf("%s\nculprits:", job.description.c_str());
    for (int r : job.culprits) std::printf(" %d", r);
    std::printf("\nwrote %.1f MB to %s\n", double(bytes) / 1e6, argv[5]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_fr_fixtures: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "--megatron") return megatron(argc, argv);
  if (argc != 2) return usage();
  for (const auto& [rel, bytes] : rankscope::torch_fr::testing::fixture_set()) {
    rankscope::torch_fr::testing::write_file(std::filesystem::path(argv[1]) / rel, bytes);
  }
  return 0;
}
