// nccl_plugin_bench.cpp — the NCCL profiler plugin's cost: ns of plugin callbacks per collective.
//
// dlopens librankscope-nccl.so, initialises one communicator through ncclProfiler_v5 and replays, on
// one thread, the callbacks NCCL makes for one collective: CollApi start/stop, KernelLaunch
// start/stop, Coll start/stop and, per channel (2), KernelCh start, KernelChStop and stop. Reports
// the median over rounds of ns per collective, with KernelCh events (the default mask) and without
// them (the host stop completes it). No GPU and no NCCL: this is the plugin's own share; on a GPU the
// budget is <= 1% of a training step. Prints numbers; asserts nothing about speed (label bench).
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "nccl_profiler_abi.h"

namespace abi = rankscope::nccl_plugin::abi;

namespace {

double ns_per_collective(abi::ProfilerV5* p, void* ctx, bool kernel_channels, int n) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    abi::DescrV5 api{};
    api.type = abi::kCollApi;
    api.collApi.func = "AllReduce";
    api.collApi.count = 1024;
    api.collApi.datatype = "ncclFloat32";
    void* h_api = nullptr;
    p->startEvent(ctx, &h_api, &api);
    abi::DescrV5 launch{};
    launch.type = abi::kKernelLaunch;
    void* h_launch = nullptr;
    p->startEvent(ctx, &h_launch, &launch);
    abi::DescrV5 coll{};
    coll.type = abi::kColl;
    coll.parentObj = h_api;
    coll.coll.seqNumber = uint64_t(i);
    coll.coll.func = "AllReduce";
    coll.coll.count = 1024;
    coll.coll.datatype = "ncclFloat32";
    coll.coll.nChannels = kernel_channels ? 2 : 0;
    void* h_coll = nullptr;
    p->startEvent(ctx, &h_coll, &coll);
    p->stopEvent(h_coll);
    p->stopEvent(h_launch);
    p->stopEvent(h_api);
    if (kernel_channels)
      for (int c = 0; c < 2; ++c) {
        abi::DescrV5 ch{};
        ch.type = abi::kKernelCh;
        ch.parentObj = h_coll;
        ch.kernelCh.channelId = uint8_t(c);
        void* h_ch = nullptr;
        p->startEvent(ctx, &h_ch, &ch);
        abi::StateArgsV5 a{};
        p->recordEventState(h_ch, abi::kStateKernelChStop, &a);
        p->stopEvent(h_ch);
      }
  }
  return double(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count()) / n;
}

double median_run(const char* so, const char* mask, bool kernel_channels) {
  setenv("RANKSCOPE_NCCL_MASK", mask, 1);
  void* lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "nccl_plugin_bench: %s\n", dlerror());
    std::exit(1);
  }
  auto* p = static_cast<abi::ProfilerV5*>(dlsym(lib, "ncclProfiler_v5"));
  void* ctx = nullptr;
  int m = 0;
  p->init(&ctx, 0x1234abcdull, &m, "bench", 1, 1, 0, nullptr);
  std::vector<double> rounds;
  ns_per_collective(p, ctx, kernel_channels, 20000);  // warm-up
  for (int r = 0; r < 15; ++r) rounds.push_back(ns_per_collective(p, ctx, kernel_channels, 20000));
  p->finalize(ctx);
  dlclose(lib);
  std::sort(rounds.begin(), rounds.end());
  return rounds[rounds.size() / 2];
}

}  // namespace

// What one read of the recorders' clock costs here (a system call on VMs without a TSC clock).
double clock_read_ns() {
  timespec t{};
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 200000; ++i) clock_gettime(CLOCK_REALTIME, &t);
  return double(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count()) / 200000;
}

int main() {
  const auto dir = std::filesystem::temp_directory_path() / "rankscope_nccl_plugin_bench";
  std::filesystem::remove_all(dir);
  setenv("RANKSCOPE_RUN_DIR", dir.c_str(), 1);
  const double with_kernel = median_run(NCCL_PLUGIN_SO, "1862", true);
  const double host_only = median_run(NCCL_PLUGIN_SO, "1798", false);
  std::printf("nccl plugin: %.0f ns per collective (API + Coll + 2 KernelCh channels, default mask 1862)\n", with_kernel);
  std::printf("nccl plugin: %.0f ns per collective (API + Coll, no KernelCh: mask 1798)\n", host_only);
  std::printf("of which clock reads: 4 (3 without KernelCh) x %.0f ns (CLOCK_REALTIME here)\n", clock_read_ns());
  std::printf("budget: 1%% of a 100 ms step with 200 collectives = 5000 ns per collective\n");
  std::filesystem::remove_all(dir);
  return 0;
}
