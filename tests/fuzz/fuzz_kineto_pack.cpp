// fuzz_kineto_pack.cpp — libFuzzer target: what the head of `rankscope import-kineto --slurm` reads
// from the nodes (importers/kineto/src/trace_wire.cpp through import_kineto_packed; kineto_gather.h).
//
// Is: the input cut at kFileSeparator into up to two nodes' shares. A share that starts with the
// snapshot stream's magic is unpacked as the head unpacks a node's stdout (format/snapshot_stream.h);
// any other share is written as that node's one packed trace (trace-000000.rkw), so mutations reach
// the wire decoder without having to survive zlib. Then import_kineto_packed() into a fresh run
// directory: decoding, ranks, clocks, the rank builder. Is not: the launch (node_launch.h) or a check
// of what was imported (tests/importers/kineto_pack_test.cpp).
// Seeds: with RANKSCOPE_FUZZ_WRITE_SEEDS=DIR and RANKSCOPE_FUZZ_SEED_TRACES=T1:T2:..., the binary packs
// each trace as a node would, writes the stream and its raw trace-*.rkw into DIR and exits
// (scripts/fuzz-seeds.sh): the seeds come from this build's own encoder, never from a copy of it.
#include <stdio.h>

#include <cstddef>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "rankscope/format/snapshot_stream.h"
#include "rankscope/kineto/kineto_import.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* out = std::getenv("RANKSCOPE_FUZZ_WRITE_SEEDS");
  const char* traces = std::getenv("RANKSCOPE_FUZZ_SEED_TRACES");
  if (!out || !traces) return 0;
  namespace fs = std::filesystem;
  fs::create_directories(out);
  std::string list = traces;
  int written = 0;
  for (size_t at = 0; at <= list.size();) {
    const size_t end = std::min(list.find(':', at), list.size());
    const std::string trace = list.substr(at, end - at);
    at = end + 1;
    if (trace.empty()) continue;
    char* buffer = nullptr;
    size_t size = 0;
    std::FILE* stream = ::open_memstream(&buffer, &size);
    const bool packed = stream && rankscope::kineto::pack_traces({trace}, stream, "seed", 1).ok();
    if (stream) std::fclose(stream);
    if (packed) {
      const std::string name = fs::path(trace).parent_path().filename().string() + "_" + fs::path(trace).filename().string();
      const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(buffer), size);
      rankscope::fuzz::write_bytes(fs::path(out) / (name + ".stream"), bytes);
      (void)rankscope::format::decode_snapshot(bytes, "seed", [&](std::string_view entry, std::span<const uint8_t> payload) {
        if (entry.ends_with(".rkw")) rankscope::fuzz::write_bytes(fs::path(out) / (name + ".rkw"), payload), ++written;
        return rankscope::Status();
      });
    }
    std::free(buffer);
  }
  std::fprintf(stderr, "fuzz_kineto_pack: %d packed traces written as seeds into %s\n", written, out);
  std::exit(written > 0 ? 0 : 1);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = rankscope::fuzz;
  const auto nodes_dir = fuzz::scratch().fresh_subdir("nodes");
  const auto run_dir = fuzz::scratch().path() / "run";
  std::vector<rankscope::kineto::PackedNode> nodes;
  const auto parts = fuzz::split_files(std::span<const uint8_t>(data, size), 2);
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string host = "n" + std::to_string(i + 1);
    const auto dir = nodes_dir / host;
    std::filesystem::create_directories(dir);
    constexpr std::string_view kSnapMagic = "RSSNAP";
    if (parts[i].size() >= kSnapMagic.size() && std::memcmp(parts[i].data(), kSnapMagic.data(), kSnapMagic.size()) == 0) {
      rankscope::format::SnapshotLimits limits;
      limits.max_entry_bytes = 64ull << 20;
      limits.max_total_bytes = 256ull << 20;
      (void)rankscope::format::unpack_snapshot(parts[i], "node " + host, dir, limits);
    } else {
      fuzz::write_bytes(dir / "trace-000000.rkw", parts[i]);
    }
    nodes.push_back({host, dir});
  }
  rankscope::kineto::ImportOptions options;
  options.threads = 1;  // the fuzzer's process stays single-threaded: findings reproduce
  auto summary = rankscope::kineto::import_kineto_packed(nodes, run_dir, options);
  if (!summary.ok()) (void)summary.status().user_text();
  return 0;
}
