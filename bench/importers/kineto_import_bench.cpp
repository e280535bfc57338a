// kineto_import_bench.cpp — `rankscope import-kineto` on synthetic PyTorch profiler traces:
// RANKS traces of about MB megabytes each, plain JSON and gzip, written into a temp folder by this
// bench (never committed). Prints seconds and the importer's peak RSS (wait4's ru_maxrss of the
// child). Budget: 64 ranks x 100 MB in under 60 s and 1 GB on 2 cores; with
// every analysis on (then `rankscope skew`, which adds HTA's analyses and the critical path) under
// 40 s and 1 GB. Asserts nothing about speed; exits non-zero only when an import or the report fails.
//
// The traces have the real ones' shape (shared/data/real-gpu/kineto-gloo-2ranks): per step a
// ProfilerStep#N with data/forward/backward/optimizer annotations, cpu_op events (most of the
// bytes; the main thread's outermost ones become op leaves, docs/KINETO.md), cudaLaunchKernel and
// cuLaunchKernelEx launches with their kernels and ac2g flows, memcpys, and three gloo:all_reduce
// annotations on a Gloo thread. The step body is the same on every rank: it is compressed once and
// each rank's file is its own header plus that body (a gzip file of two members, which zlib reads
// as one stream, as it reads `cat a.gz b.gz`).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "child_process_run.h"

namespace {

namespace fs = std::filesystem;

using Run = rankscope::bench::ChildRun;
constexpr auto run = rankscope::bench::run_child;

// The traceEvents of `steps` steps, without the enclosing brackets; each event ends with ",\n"
// except that the caller closes the array with the last step's trailing marker event.
std::string step_events(size_t target_bytes, int64_t& steps_out) {
  std::string out;
  out.reserve(target_bytes + (1 << 20));
  double t = 4853720448000.0;  // µs, as in the real traces
  int64_t corr = 1000, ext = 1;
  constexpr int kPid = 460, kMain = 460, kAutograd = 510, kGloo = 500;
  auto x = [&](const char* cat, std::string_view name, int tid, double ts, double dur, std::string_view args) {
    fmt::format_to(std::back_inserter(out), R"({{"ph": "X", "cat": "{}", "name": "{}", "pid": {}, "tid": {}, "ts": {:.3f}, "dur": {:.3f}, "args": {{{}}}}},)"
                   "\n", cat, name, kPid, tid, ts, dur, args);
  };
  auto launch = [&](int tid, double ts, bool driver, const std::string& kernel, double kts, double kdur) {
    ++corr;
    x("cpu_op", "aten::addmm", tid, ts - 20, 40, fmt::format(R"("External id": {}, "Record function id": 0, "Ev Idx": {})", ext++, ext));
    x("cpu_op", "aten::view", tid, ts - 18, 2, fmt::format(R"("External id": {}, "Record function id": 0, "Ev Idx": {})", ext++, ext));
    x("cpu_op", "aten::empty", tid, ts - 15, 3, fmt::format(R"("External id": {}, "Record function id": 0, "Ev Idx": {})", ext++, ext));
    x(driver ? "cuda_driver" : "cuda_runtime", driver ? "cuLaunchKernelEx" : "cudaLaunchKernel", tid, ts, 5,
      fmt::format(R"("External id": {}, "cbid": 211, "correlation": {})", ext, corr));
    fmt::format_to(std::back_inserter(out),
                   R"({{"ph": "X", "cat": "kernel", "name": "{}", "pid": 0, "tid": 7, "ts": {:.3f}, "dur": {:.3f}, "args": {{"queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": {}, "registers per thread": 32, "shared memory": 0, "blocks per SM": 1.5, "warps per SM": 6.0, "grid": [198, 1, 1], "block": [128, 1, 1], "est. achieved occupancy %": 9}}}},)"
                   "\n", kernel, kts, kdur, corr);
    fmt::format_to(std::back_inserter(out), R"({{"ph": "s", "id": {}, "pid": {}, "tid": {}, "ts": {:.3f}, "cat": "ac2g", "name": "ac2g"}},)" "\n", corr, kPid, tid, ts);
    fmt::format_to(std::back_inserter(out), R"({{"ph": "f", "id": {}, "pid": 0, "tid": 7, "ts": {:.3f}, "cat": "ac2g", "name": "ac2g", "bp": "e"}},)" "\n", corr, kts);
  };
  int64_t step = 0;
  while (out.size() < target_bytes) {
    ++step;
    const double step_us = 108000;
    x("user_annotation", fmt::format("ProfilerStep#{}", step), kMain, t, step_us, "\"External id\": 1");
    x("user_annotation", "data", kMain, t + 10, 200, "\"External id\": 2");
    launch(kMain, t + 150, false, "Memcpy HtoD (Pageable -> Device)", t + 160, 3);
    double f = t + 300;
    x("user_annotation", "forward", kMain, f, 7000, "\"External id\": 3");
    for (int k = 0; k < 120; ++k) {
      launch(kMain, f + 10 + k * 50, k % 3 == 0, k % 3 == 0 ? "nvjet_tst_128x256_64x4_2x1_v_bz_TNT" : "void at::native::vectorized_elementwise_kernel<4>()",
             f + 20 + k * 50, 30);
    }
    const double b = f + 7100;
    x("user_annotation", "backward", kMain, b, 98000, "\"External id\": 4");
    for (int k = 0; k < 200; ++k) {
      launch(kAutograd, b + 10 + k * 60, k % 3 == 0, k % 3 == 0 ? "nvjet_tst_256x128_64x4_1x2_h_bz_TNN" : "void at::native::reduce_kernel<512, 1>()",
             b + 20 + k * 60, 40);
    }
    for (int k = 0; k < 3; ++k) x("user_annotation", "gloo:all_reduce", kGloo, b + 2000 + k * 30000, 25000, "\"External id\": 5");
    const double o = b + 98100;
    x("user_annotation", "optimizer", kMain, o, 700, "\"External id\": 6");
    for (int k = 0; k < 20; ++k) launch(kMain, o + 10 + k * 30, false, "void multi_tensor_apply_kernel<1>()", o + 20 + k * 30, 20);
    t += step_us + 50;
  }
  steps_out = step;
  out += R"({"ph": "i", "name": "Record Window End", "pid": "", "tid": "", "ts": 0.0, "s": "g"})";
  return out;
}

std::string header(int rank, int world) {
  return fmt::format(R"({{"schemaVersion": 1, "distributedInfo": {{"backend": "gloo", "rank": {}, "world_size": {}, "pg_count": 1, )"
                     R"("pg_config": [{{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cpu:gloo,cuda:gloo", "pg_size": {}, )"
                     R"("ranks": []}}]}}, "cupti_version": 130001, "baseTimeNanoseconds": 1790857026000000000, "traceEvents": [)" "\n",
                     rank, world, world);
}
constexpr const char* kTail = "\n], \"traceName\": \"bench\"}\n";

std::string gzip_member(std::string_view text) {
  z_stream z{};
  deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);  // level 1: a fast writer, as PyTorch's is not
  std::string out(deflateBound(&z, uLong(text.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = uInt(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

void write_traces(const fs::path& dir, int ranks, size_t bytes) {
  int64_t steps = 0;
  const std::string body = step_events(bytes, steps) + kTail;
  const std::string body_gz = gzip_member(body);
  fs::create_directories(dir / "plain");
  fs::create_directories(dir / "gzip");
  for (int r = 0; r < ranks; ++r) {
    const std::string h = header(r, ranks);
    std::ofstream(dir / "plain" / fmt::format("rank{}.json", r), std::ios::binary) << h << body;
    std::ofstream(dir / "gzip" / fmt::format("rank{}.json.gz", r), std::ios::binary) << gzip_member(h) << body_gz;
  }
  std::printf("kineto_import_bench: %d ranks x %.1f MB (%lld steps each; gzip %.1f MB each)\n", ranks, double(body.size()) / 1e6,
              static_cast<long long>(steps), double(body_gz.size()) / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 64;
  const double mb = argc > 2 ? std::atof(argv[2]) : 100.0;
  if (ranks <= 0 || mb <= 0) {
    std::fprintf(stderr, "usage: kineto_import_bench [RANKS] [MB per trace]\n");
    return 2;
  }
  const fs::path dir = fs::temp_directory_path() / fmt::format("rs_kineto_bench_{}", ::getpid());
  fs::remove_all(dir);
  // Written by a child, so that this process (whose children's peak RSS is measured) stays small.
  const auto tw = std::chrono::steady_clock::now();
  std::fflush(stdout);
  const pid_t writer = ::fork();
  if (writer == 0) {
    write_traces(dir, ranks, size_t(mb * 1e6));
    std::fflush(stdout);
    std::_Exit(0);
  }
  int wstatus = 0;
  ::waitpid(writer, &wstatus, 0);
  std::printf("  traces written in %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - tw).count());
  const std::string rankscope = std::string(RANKSCOPE_BINARY_DIR) + "/bin/rankscope";
  int rc = 0;
  for (const char* kind : {"plain", "gzip"}) {
    const Run r = run({rankscope, "import-kineto", (dir / kind).string(), "-o", (dir / fmt::format("run-{}", kind)).string(), "-q"});
    std::printf("  import-kineto %-5s: %.2f s wall, %.2f s CPU, peak RSS %.0f MB (rc %d)\n", kind, r.seconds, r.cpu_seconds,
                r.peak_mb, r.rc);
    if (r.rc != 0) rc = 1;
  }
  // The second budget: the import with every analysis on (skew's report holds HTA's analyses and
  // the critical path of the traced steps) under 40 s and 1 GB for 64 ranks x 100 MB.
  const Run skew = run({rankscope, "skew", (dir / "run-plain").string(), "--json", (dir / "skew.json").string(), "-q"});
  std::printf("  skew (+ kernels, critical path): %.2f s wall, %.2f s CPU, peak RSS %.0f MB (rc %d)\n", skew.seconds,
              skew.cpu_seconds, skew.peak_mb, skew.rc);
  if (skew.rc != 0) rc = 1;
  if (std::getenv("RANKSCOPE_BENCH_KEEP")) std::printf("  kept: %s\n", dir.c_str());  // to profile by hand
  else fs::remove_all(dir);
  return rc;
}
