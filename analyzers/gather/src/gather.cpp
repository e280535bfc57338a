// gather.cpp — launch, decode each node's stream into DIR/hosts/<host>/, merge DIR, write gather.json.
//
// The merge makes DIR an ordinary run directory (hard links into hosts/, copies where the
// filesystem refuses links), so no analyzer learns where a file came from. A rank, an NCCL
// recorder or an evidence file sent by two nodes keeps the first node's copy and says so.
#include "rankscope/analyzers/gather/gather.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "node_launch.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/format/run_metadata.h"

namespace rankscope::gather {
namespace {

namespace fs = std::filesystem;

Status prepare_out_dir(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) return invalid_argument(fmt::format("-o {}: exists and is not a directory", dir.string()));
    const bool empty = fs::is_empty(dir, ec);
    if (!empty && !format::is_gathered_run(dir))
      return invalid_argument(fmt::format("-o {}: not empty and not an earlier gather; refusing to write into it", dir.string()));
    if (!empty)  // an earlier gather: replaced whole, so nothing stale survives
      for (const auto& e : fs::directory_iterator(dir, ec)) fs::remove_all(e.path(), ec);
  }
  fs::create_directories(dir / format::kGatheredHostsDir, ec);
  if (ec) return io_error(fmt::format("-o {}: cannot create: {}", dir.string(), ec.message()));
  return {};
}

Status link_or_copy(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::create_directories(to.parent_path(), ec);
  fs::create_hard_link(from, to, ec);
  if (!ec) return {};
  fs::copy_file(from, to, ec);
  if (ec) return io_error(fmt::format("cannot place {}: {}", to.string(), ec.message()));
  return {};
}

bool same_bytes(const fs::path& a, const fs::path& b) {
  std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
  return std::equal(std::istreambuf_iterator<char>(fa), {}, std::istreambuf_iterator<char>(fb), {});
}

std::string short_host(const std::string& h) { return h.substr(0, h.find('.')); }

// Ranks the manifest says this node's processes hold (probe ranks and the plugin's launcher ranks).
std::vector<int> manifest_ranks(const fs::path& host_dir, std::string& snapshot_host) {
  std::ifstream in(host_dir / format::kSnapshotManifest);
  const auto j = nlohmann::json::parse(in, nullptr, false);
  std::set<int> ranks;
  if (!j.is_object()) return {};
  if (j.contains("host") && j["host"].is_string()) snapshot_host = j["host"].get<std::string>();
  if (!j.contains("processes") || !j["processes"].is_array()) return {};
  for (const auto& p : j["processes"])
    if (p.is_object() && p.contains("ranks") && p["ranks"].is_array())
      for (const auto& r : p["ranks"])
        if (r.is_number_integer() && r.get<int>() >= 0) ranks.insert(r.get<int>());
  return {ranks.begin(), ranks.end()};
}

// Places one node's files into the merged run directory; conflicts land in `problems`.
void merge_node(const fs::path& out, const std::string& host, const std::vector<std::string>& names,
                std::map<std::string, std::string>& owner, std::vector<std::string>& problems) {
  const fs::path host_dir = out / format::kGatheredHostsDir / host;
  for (const auto& name : names) {
    if (name == format::kSnapshotManifest) continue;
    const fs::path from = host_dir / name, to = out / name;
    const auto [it, fresh] = owner.emplace(name, host);
    if (!fresh) {
      if (name == format::kRunMetadataFile && same_bytes(from, to)) continue;  // every node of a shared run.json
      problems.push_back(fmt::format("{} came from {} and from {}; the gathered run uses {}'s", name, it->second, host, it->second));
      continue;
    }
    if (Status s = link_or_copy(from, to); !s.ok()) problems.push_back(s.message());
  }
}

}  // namespace

Result<format::GatherRecord> gather_nodes(const std::vector<GatherTarget>& targets, const GatherOptions& o) {
  if (targets.empty()) return invalid_argument("no node to gather from");
  std::set<std::string> seen;
  for (const auto& t : targets) {
    RS_RETURN_IF_ERROR(check_host_name(t.host));
    if (!seen.insert(t.host).second) return invalid_argument(fmt::format("host {} given twice", t.host));
  }
  RS_RETURN_IF_ERROR(prepare_out_dir(o.out_dir));
  const auto start = std::chrono::steady_clock::now();

  std::vector<LaunchedCommand> commands(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) commands[i].command = targets[i].command;
  run_commands(commands, o.deadline_s, o.max_stream_bytes, o.max_parallel);

  format::GatherRecord record;
  record.launcher = o.launcher;
  record.job_id = o.job_id;
  record.run_dir = o.run_dir;
  record.deadline_s = o.deadline_s;
  // Decoding is independent per node (its own folder): spread over the cores. Merging is not (a
  // name two nodes send goes to the first): in node order, after.
  std::vector<format::SnapshotDecodeResult> decoded(targets.size());
  std::atomic<size_t> next{0};
  auto decode_some = [&] {
    for (size_t i; (i = next++) < targets.size();)
      if (!commands[i].out.empty())
        decoded[i] = format::unpack_snapshot(commands[i].out, fmt::format("node {}", targets[i].host),
                                             o.out_dir / format::kGatheredHostsDir / targets[i].host, o.limits);
  };
  std::vector<std::thread> workers;
  const size_t threads = std::min<size_t>(targets.size(), std::max(1u, std::thread::hardware_concurrency()));
  for (size_t t = 1; t < threads; ++t) workers.emplace_back(decode_some);
  decode_some();
  for (auto& w : workers) w.join();

  std::map<std::string, std::string> owner;  // entry name -> the node whose copy DIR uses
  for (size_t i = 0; i < targets.size(); ++i) {
    auto& c = commands[i];
    format::GatheredNode node;
    node.host = targets[i].host;
    node.seconds = c.seconds;
    node.stream_bytes = c.out.size();
    record.stream_bytes += c.out.size();
    node.reason = why_unanswered(c, o.deadline_s);
    if (!c.out.empty()) {
      // Whatever arrived was decoded, even from a node that failed: whole entries are kept.
      const auto& d = decoded[i];
      node.files = int(d.entries);
      node.bytes = d.bytes;
      node.answered = d.status.ok() && node.reason.empty();
      if (!d.status.ok()) node.reason = node.reason.empty() ? d.status.message() : node.reason + "; " + d.status.message();
      merge_node(o.out_dir, node.host, d.names, owner, record.problems);
      const fs::path host_dir = o.out_dir / format::kGatheredHostsDir / node.host;
      node.ranks = manifest_ranks(host_dir, node.snapshot_host);
      if (!node.answered) {
        // The manifest comes first in a stream, so a node cut off later names ranks whose recorders
        // never came: those are its missing ranks, not ranks it sent.
        std::vector<int> arrived;
        std::error_code ec;
        for (int r : node.ranks)
          (fs::exists(format::flight_recorder_path(host_dir, r), ec) ? arrived : node.missing_ranks).push_back(r);
        node.ranks = std::move(arrived);
      }
    } else if (node.reason.empty()) {
      node.reason = "the command succeeded but sent nothing (is the remote rankscope the right one?)";
    }
    std::vector<uint8_t>().swap(c.out);  // the stream is on disk now
    record.nodes.push_back(std::move(node));
  }

  // Ranks nobody sent, and the unreachable node each most likely ran on.
  if (auto meta = format::read_run_metadata(o.out_dir); meta.ok()) {
    record.world_size = meta->world_size;
    std::error_code ec;
    for (int r = 0; r < record.world_size; ++r)
      if (!fs::exists(format::flight_recorder_path(o.out_dir, r), ec)) record.ranks_missing.push_back(r);
    std::set<int> placed;  // missing ranks a failed node's manifest already claims
    for (const auto& n : record.nodes) placed.insert(n.missing_ranks.begin(), n.missing_ranks.end());
    std::vector<format::GatheredNode*> silent;  // failed nodes that said nothing of their ranks
    for (auto& n : record.nodes)
      if (!n.answered && n.ranks.empty() && n.missing_ranks.empty()) silent.push_back(&n);
    std::vector<int> unplaced;
    for (int r : record.ranks_missing) {
      if (placed.count(r)) continue;
      format::GatheredNode* home = nullptr;
      if (size_t(r) < meta->hosts.size())
        for (auto* n : silent)
          if (short_host(n->host) == short_host(meta->hosts[size_t(r)])) home = n;
      if (home) home->missing_ranks.push_back(r);
      else unplaced.push_back(r);
    }
    // One silent node: the ranks nobody sent were its (run.json need not say where each rank ran).
    if (silent.size() == 1) silent[0]->missing_ranks.insert(silent[0]->missing_ranks.end(), unplaced.begin(), unplaced.end());
    if (silent.size() == 1) std::sort(silent[0]->missing_ranks.begin(), silent[0]->missing_ranks.end());
  }
  record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RS_RETURN_IF_ERROR(format::write_gather_record(o.out_dir, record));
  return record;
}

}  // namespace rankscope::gather
