// kineto_gather.cpp — see kineto_gather.h: launch `kineto-pack` on every node, unpack each stream
// into a folder of its own, import them all as one job.
#include "rankscope/gather/kineto_gather.h"

#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "rankscope/gather/node_launch.h"

namespace rankscope::gather {
namespace {

namespace fs = std::filesystem;

// The node's pack.json: how many traces it had and their size on its disk.
void read_pack_manifest(const fs::path& dir, KinetoNode& node) {
  std::ifstream in(dir / std::string(kineto::kPackManifest));
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object() || !j.contains("files") || !j["files"].is_array()) return;
  for (const auto& f : j["files"]) {
    if (!f.is_object()) continue;
    ++node.traces;
    if (f.contains("bytes") && f["bytes"].is_number_unsigned()) node.trace_bytes += f["bytes"].get<uint64_t>();
  }
}

// A folder beside the run directory (same filesystem as what the import writes), removed at the end.
class ScratchDir {
 public:
  static Result<ScratchDir> beside(const fs::path& run_dir) {
    std::error_code ec;
    const fs::path parent = fs::absolute(run_dir, ec).parent_path();
    fs::create_directories(parent, ec);
    std::string tmpl = (parent / ".rankscope-kineto-nodes-XXXXXX").string();
    if (!::mkdtemp(tmpl.data()))
      return io_error(fmt::format("cannot create a folder in {} for the nodes' streams", parent.string()));
    return ScratchDir(tmpl);
  }
  ScratchDir(ScratchDir&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  explicit ScratchDir(fs::path p) : path_(std::move(p)) {}
  fs::path path_;
};

}  // namespace

int KinetoGatherResult::answered() const {
  int n = 0;
  for (const auto& node : nodes) n += node.answered;
  return n;
}

Result<KinetoGatherResult> import_kineto_from_nodes(const std::vector<GatherTarget>& targets, const fs::path& run_dir,
                                                    const GatherOptions& o, const kineto::ImportOptions& options) {
  if (targets.empty()) return invalid_argument("no node to import from");
  std::set<std::string> seen;
  for (const auto& t : targets) {
    RS_RETURN_IF_ERROR(check_host_name(t.host));
    if (!seen.insert(t.host).second) return invalid_argument(fmt::format("host {} given twice", t.host));
  }
  const auto start = std::chrono::steady_clock::now();
  RS_ASSIGN_OR_RETURN(ScratchDir scratch, ScratchDir::beside(run_dir));

  std::vector<LaunchedCommand> commands(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) commands[i].command = targets[i].command;
  run_commands(commands, o.deadline_s, o.max_stream_bytes, o.max_parallel);

  // Unpacking is per node (its own folder): on every core.
  std::vector<format::SnapshotDecodeResult> decoded(targets.size());
  std::atomic<size_t> next{0};
  auto unpack_some = [&] {
    for (size_t i; (i = next++) < targets.size();) {
      if (!commands[i].out.empty())
        decoded[i] = format::unpack_snapshot(commands[i].out, fmt::format("node {}", targets[i].host),
                                             scratch.path() / targets[i].host, o.limits);
      std::vector<uint8_t>().swap(commands[i].out);
    }
  };
  std::vector<size_t> sizes(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) sizes[i] = commands[i].out.size();
  std::vector<std::thread> workers;
  const size_t threads = std::min<size_t>(targets.size(), std::max(1u, std::thread::hardware_concurrency()));
  for (size_t t = 1; t < threads; ++t) workers.emplace_back(unpack_some);
  unpack_some();
  for (auto& w : workers) w.join();

  KinetoGatherResult result;
  std::vector<kineto::PackedNode> packed;
  for (size_t i = 0; i < targets.size(); ++i) {
    KinetoNode node;
    node.host = targets[i].host;
    node.seconds = commands[i].seconds;
    node.stream_bytes = sizes[i];
    node.reason = why_unanswered(commands[i], o.deadline_s);
    if (node.reason.empty() && sizes[i] == 0)
      node.reason = "the command succeeded but sent nothing (is the remote rankscope the right one?)";
    if (sizes[i] > 0) {
      // A node whose stream failed half-way is not imported in part: its traces are whole or absent,
      // so a rank is never half there without the import knowing.
      if (!decoded[i].status.ok())
        node.reason =
            node.reason.empty() ? decoded[i].status.message() : node.reason + "; " + decoded[i].status.message();
      read_pack_manifest(scratch.path() / node.host, node);
    }
    node.answered = node.reason.empty();
    if (node.answered && node.traces > 0) packed.push_back({node.host, scratch.path() / node.host});
    result.trace_bytes += node.trace_bytes;
    result.stream_bytes += node.stream_bytes;
    result.nodes.push_back(std::move(node));
  }
  if (packed.empty()) {
    std::string why;
    for (const auto& n : result.nodes)
      why += fmt::format("\n  {}: {}", n.host, n.answered ? "no trace there" : n.reason);
    return invalid_argument(fmt::format("no node sent a trace:{}", why));
  }
  RS_ASSIGN_OR_RETURN(result.summary, kineto::import_kineto_packed(packed, run_dir, options));
  for (const auto& n : result.nodes)
    if (!n.answered) result.summary.warnings.push_back(fmt::format("node {} sent no traces: {}", n.host, n.reason));
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace rankscope::gather
