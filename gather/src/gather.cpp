// gather.cpp — launch, decode each node's stream into DIR/hosts/<host>/, merge DIR, write gather.json.
//
// The merge makes DIR an ordinary run directory (hard links into hosts/, copies where the
// filesystem refuses links), so no analyzer learns where a file came from. A rank, an NCCL
// recorder or an evidence file sent by two nodes keeps the first node's copy and says so.
#include "rankscope/gather/gather.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "rankscope/format/rank_summary.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/format/run_metadata.h"
#include "rankscope/gather/node_launch.h"
#include "rankscope/gather/text_stream.h"

namespace rankscope::gather {
namespace {

namespace fs = std::filesystem;

Status prepare_out_dir(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec))
      return invalid_argument(fmt::format("-o {}: exists and is not a directory", dir.string()));
    const bool empty = fs::is_empty(dir, ec);
    if (!empty && !format::is_gathered_run(dir))
      return invalid_argument(
          fmt::format("-o {}: not empty and not an earlier gather; refusing to write into it", dir.string()));
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

std::string short_host(const std::string& h) { return h.substr(0, h.find('.')); }

// What one node's stream decoded to: its manifest, summaries and run.json kept in memory (they are
// merged into one file each for the whole job), everything else written to DIR/hosts/<host>/.
struct DecodedNode {
  format::SnapshotDecodeResult result;
  std::string manifest;
  std::vector<uint8_t> summaries, run_json;
  bool has_manifest = false, has_summaries = false, has_run_json = false;
  std::vector<std::string> files;  // entries written under hosts/<host>/
};

DecodedNode decode_node(const NodeAnswer& a, const fs::path& out, const format::SnapshotLimits& limits) {
  DecodedNode d;
  const fs::path host_dir = out / format::kGatheredHostsDir / a.host;
  auto visit = [&](std::string_view name, std::span<const uint8_t> bytes) -> Status {
    if (name == format::kSnapshotManifest) {
      d.manifest.assign(bytes.begin(), bytes.end());
      d.has_manifest = true;
    } else if (name == format::kRankSummaryEntry) {
      d.summaries.assign(bytes.begin(), bytes.end());
      d.has_summaries = true;
    } else if (name == format::kRunMetadataFile) {
      d.run_json.assign(bytes.begin(), bytes.end());
      d.has_run_json = true;
    } else {
      RS_RETURN_IF_ERROR(format::write_snapshot_entry(host_dir, name, bytes));
      d.files.emplace_back(name);
    }
    return {};
  };
  d.result = format::decode_snapshot(a.stream, fmt::format("node {}", a.host), visit, limits);
  return d;
}

// The manifest's facts the record keeps: the node's own name, its processes' ranks, the ranks it summarized.
struct ManifestFacts {
  nlohmann::json json;
  std::string host;
  std::vector<int> ranks, summarized;
};

ManifestFacts read_manifest(const std::string& text) {
  ManifestFacts m;
  m.json = nlohmann::json::parse(text, nullptr, false);
  const auto& j = m.json;
  if (!j.is_object()) return m;
  if (j.contains("host") && j["host"].is_string()) m.host = j["host"].get<std::string>();
  std::set<int> ranks;
  if (j.contains("processes") && j["processes"].is_array())
    for (const auto& p : j["processes"])
      if (p.is_object() && p.contains("ranks") && p["ranks"].is_array())
        for (const auto& r : p["ranks"])
          if (r.is_number_integer() && r.get<int>() >= 0) ranks.insert(r.get<int>());
  m.ranks.assign(ranks.begin(), ranks.end());
  if (j.contains("summarized") && j["summarized"].is_array())
    for (const auto& r : j["summarized"])
      if (r.is_number_integer() && r.get<int>() >= 0) m.summarized.push_back(r.get<int>());
  std::sort(m.summarized.begin(), m.summarized.end());
  return m;
}

// A field of processes.tsv: no tab or line break can split it.
std::string tsv_field(std::string s) {
  for (char& c : s)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return s.empty() ? "-" : s;
}

void append_processes(const std::string& node, const nlohmann::json& manifest, std::string& out) {
  const std::string boot =
      manifest.contains("boot_id") && manifest["boot_id"].is_string() ? manifest["boot_id"].get<std::string>() : "";
  if (!manifest.contains("processes") || !manifest["processes"].is_array()) return;
  for (const auto& p : manifest["processes"]) {
    if (!p.is_object()) continue;
    const auto text = [&](const char* key) {
      return p.contains(key) && p[key].is_string() ? p[key].get<std::string>() : "";
    };
    const auto number = [&](const char* key) {
      return p.contains(key) && p[key].is_number_integer() ? p[key].get<int64_t>() : 0;
    };
    out +=
        fmt::format("{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n", node, tsv_field(boot), tsv_field(text("host")), number("pid"),
                    tsv_field(text("alive")), tsv_field(text("state")), tsv_field(text("wchan")), number("threads"));
  }
}

// Everything the merge builds across nodes, in node order (the first node's copy of a name wins).
struct Merge {
  std::map<std::string, std::string> owner;  // entry name -> the node whose copy DIR uses
  std::vector<uint8_t> run_json;
  std::vector<uint8_t> summaries;  // every node's block, end to end
  std::string manifests;           // snapshots.json
  std::string processes = "# node\tboot_id\thost\tpid\talive\tstate\twchan\tthreads\n";  // processes.tsv
  std::vector<uint8_t> has_rank;  // by rank: a recorder or a summary arrived
  void mark(int r) {
    if (r < 0 || r >= (1 << 24)) return;
    if (size_t(r) >= has_rank.size()) has_rank.resize(size_t(r) + 1, 0);
    has_rank[size_t(r)] = 1;
  }
  bool has(int r) const { return r >= 0 && size_t(r) < has_rank.size() && has_rank[size_t(r)]; }
};

// Places one node's whole files into the merged run directory; conflicts land in `problems`.
void merge_files(const fs::path& out, const std::string& host, const std::vector<std::string>& names, Merge& m,
                 std::vector<std::string>& problems) {
  const fs::path host_dir = out / format::kGatheredHostsDir / host;
  for (const auto& name : names) {
    const fs::path from = host_dir / name, to = out / name;
    const auto [it, fresh] = m.owner.emplace(name, host);
    if (!fresh) {
      problems.push_back(
          fmt::format("{} came from {} and from {}; the gathered run uses {}'s", name, it->second, host, it->second));
      continue;
    }
    if (Status s = link_or_copy(from, to); !s.ok())
      problems.push_back(s.message());
    else if (auto r = format::rank_of_file_name(name, ".flight"))
      m.mark(*r);
  }
}

Status write_bytes(const fs::path& file, std::span<const uint8_t> bytes) {
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  if (!out) return io_error(fmt::format("cannot write {}", file.string()));
  return {};
}

// One node's part of the record, and its share of the merge.
format::GatheredNode merge_node(const NodeAnswer& a, DecodedNode& d, const fs::path& out, Merge& m,
                                std::vector<std::string>& problems) {
  format::GatheredNode node;
  node.host = a.host;
  node.seconds = a.seconds;
  node.stream_bytes = a.stream.size();
  node.reason = a.reason;
  if (a.stream.empty()) {
    if (node.reason.empty()) node.reason = a.reason_if_incomplete;
    if (node.reason.empty())
      node.reason = "the command succeeded but sent nothing (is the remote rankscope the right one?)";
    return node;
  }
  // Whatever arrived was decoded, even from a node that failed: whole entries are kept.
  node.files = int(d.result.entries);
  node.bytes = d.result.bytes;
  node.answered = d.result.status.ok() && node.reason.empty();
  if (!d.result.status.ok() && node.reason.empty()) node.reason = a.reason_if_incomplete;
  if (!d.result.status.ok())
    node.reason = node.reason.empty() ? d.result.status.message() : node.reason + "; " + d.result.status.message();
  ManifestFacts facts;
  if (d.has_manifest) {
    facts = read_manifest(d.manifest);
    node.snapshot_host = facts.host;
    if (facts.json.is_object()) {
      // The manifest as the node wrote it (valid JSON: it parsed), and its processes as lines.
      m.manifests += fmt::format("{}{{\"node\": \"{}\", \"snapshot\": {}}}", m.manifests.empty() ? "[\n" : ",\n",
                                 a.host, d.manifest);
      append_processes(a.host, facts.json, m.processes);
    } else
      problems.push_back(fmt::format("{}: its {} is damaged", a.host, format::kSnapshotManifest));
  }
  if (d.has_run_json) {
    const auto [it, fresh] = m.owner.emplace(std::string(format::kRunMetadataFile), a.host);
    if (fresh) {
      m.run_json = d.run_json;
      if (Status s = write_bytes(out / format::kRunMetadataFile, m.run_json); !s.ok()) problems.push_back(s.message());
    } else if (d.run_json != m.run_json) {  // every node of a shared run.json sends the same bytes
      (void)format::write_snapshot_entry(out / format::kGatheredHostsDir / a.host, format::kRunMetadataFile,
                                         d.run_json);
      problems.push_back(fmt::format("{} came from {} and from {}; the gathered run uses {}'s",
                                     format::kRunMetadataFile, it->second, a.host, it->second));
    }
  }
  if (d.has_summaries) {
    m.summaries.insert(m.summaries.end(), d.summaries.begin(), d.summaries.end());
    for (int r : facts.summarized) m.mark(r);
  }
  merge_files(out, a.host, d.files, m, problems);
  node.ranks = facts.ranks;
  if (!node.answered) {
    // The manifest comes first in a stream, so a node cut off later names ranks whose evidence
    // never came: those are its missing ranks, not ranks it sent.
    const fs::path host_dir = out / format::kGatheredHostsDir / a.host;
    std::vector<int> arrived;
    std::error_code ec;
    for (int r : node.ranks) {
      const bool summarized =
          d.has_summaries && std::binary_search(facts.summarized.begin(), facts.summarized.end(), r);
      (summarized || fs::exists(format::flight_recorder_path(host_dir, r), ec) ? arrived : node.missing_ranks)
          .push_back(r);
    }
    node.ranks = std::move(arrived);
  }
  return node;
}

// Ranks nobody sent, and the unreachable node each most likely ran on.
void place_missing_ranks(const Merge& m, format::GatherRecord& record) {
  if (m.run_json.empty()) return;
  const auto j = nlohmann::json::parse(m.run_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return;
  auto meta = format::run_metadata_from_json(j, format::kRunMetadataFile);
  if (!meta.ok()) return;
  record.world_size = meta->world_size;
  for (int r = 0; r < record.world_size; ++r)
    if (!m.has(r)) record.ranks_missing.push_back(r);
  std::set<int> placed;  // missing ranks a failed node's manifest already claims
  for (const auto& n : record.nodes) placed.insert(n.missing_ranks.begin(), n.missing_ranks.end());
  std::vector<format::GatheredNode*> silent;  // failed nodes that said nothing of their ranks
  std::map<std::string, format::GatheredNode*> silent_by_host;
  for (auto& n : record.nodes)
    if (!n.answered && n.ranks.empty() && n.missing_ranks.empty())
      silent.push_back(&n), silent_by_host[short_host(n.host)] = &n;
  std::vector<int> unplaced;
  for (int r : record.ranks_missing) {
    if (placed.count(r)) continue;
    format::GatheredNode* home = nullptr;
    if (size_t(r) < meta->hosts.size())
      if (auto it = silent_by_host.find(short_host(meta->hosts[size_t(r)])); it != silent_by_host.end())
        home = it->second;
    if (home)
      home->missing_ranks.push_back(r);
    else
      unplaced.push_back(r);
  }
  // One silent node: the ranks nobody sent were its (run.json need not say where each rank ran).
  if (silent.size() == 1)
    silent[0]->missing_ranks.insert(silent[0]->missing_ranks.end(), unplaced.begin(), unplaced.end());
  if (silent.size() == 1) std::sort(silent[0]->missing_ranks.begin(), silent[0]->missing_ranks.end());
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

  std::vector<NodeAnswer> answers(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    answers[i].host = targets[i].host;
    answers[i].stream = std::move(commands[i].out);
    answers[i].reason = why_unanswered(commands[i], o.deadline_s);
    answers[i].seconds = commands[i].seconds;
  }
  const double launch_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return merge_node_answers(answers, o, launch_s);
}

Result<format::GatherRecord> gather_fan_out(const FanOutLaunch& launch, const GatherOptions& o) {
  if (launch.hosts.empty()) return invalid_argument("no node to gather from");
  std::set<std::string> seen;
  for (const auto& h : launch.hosts) {
    RS_RETURN_IF_ERROR(check_host_name(h));
    if (!seen.insert(h).second) return invalid_argument(fmt::format("host {} given twice", h));
  }
  RS_RETURN_IF_ERROR(prepare_out_dir(o.out_dir));
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };

  std::vector<LaunchedCommand> one(1);
  one[0].command = launch.command;
  run_commands(one, o.deadline_s, o.max_stream_bytes, 1);
  LabeledStreams split =
      split_labeled_base64(std::string_view(reinterpret_cast<const char*>(one[0].out.data()), one[0].out.size()),
                           launch.hosts.size());
  std::vector<uint8_t>().swap(one[0].out);
  std::string why = why_unanswered(one[0], o.deadline_s);
  if (why.empty()) why = "it ended without this node's whole stream";
  std::vector<NodeAnswer> answers(launch.hosts.size());
  std::vector<size_t> silent;
  for (size_t i = 0; i < answers.size(); ++i) {
    answers[i].host = launch.hosts[i];
    answers[i].stream = std::move(split.by_task[i]);
    answers[i].reason_if_incomplete = "the one srun step for every node: " + why;
    answers[i].seconds = one[0].seconds;
    if (answers[i].stream.empty()) silent.push_back(i);
  }
  // A node the one step could not reach (its slurmd did not take the launch) while time is left:
  // asked again alone, with what is left of the deadline; it then answers for itself.
  const double left = o.deadline_s - elapsed();
  std::vector<std::string> problems = std::move(split.problems);
  if (!silent.empty() && !one[0].timed_out && left > 1 && launch.one_each.size() == launch.hosts.size()) {
    std::vector<LaunchedCommand> again(silent.size());
    for (size_t k = 0; k < silent.size(); ++k) again[k].command = launch.one_each[silent[k]].command;
    run_commands(again, left, o.max_stream_bytes, o.max_parallel);
    std::vector<std::string> hosts;
    for (size_t k = 0; k < silent.size(); ++k) {
      NodeAnswer& a = answers[silent[k]];
      hosts.push_back(a.host);
      a.stream = std::move(again[k].out);
      a.reason = why_unanswered(again[k], left);
      a.reason_if_incomplete.clear();
      a.seconds = elapsed();
    }
    problems.push_back(fmt::format("the one srun step for every node sent nothing from {} ({}); asked {} alone",
                                   fmt::join(hosts, ", "), why, hosts.size() == 1 ? "it" : "them"));
  }
  auto record = merge_node_answers(answers, o, elapsed());
  if (record.ok() && !problems.empty()) {
    record->problems.insert(record->problems.end(), problems.begin(), problems.end());
    RS_RETURN_IF_ERROR(format::write_gather_record(o.out_dir, *record));
  }
  return record;
}

Result<format::GatherRecord> merge_node_answers(std::vector<NodeAnswer>& answers, const GatherOptions& o,
                                                double launch_s) {
  const auto start = std::chrono::steady_clock::now();
  std::error_code ec;
  fs::create_directories(o.out_dir / format::kGatheredHostsDir, ec);
  if (ec) return io_error(fmt::format("-o {}: cannot create: {}", o.out_dir.string(), ec.message()));
  format::GatherRecord record;
  record.launcher = o.launcher;
  record.job_id = o.job_id;
  record.run_dir = o.run_dir;
  record.deadline_s = o.deadline_s;
  // Decoding is independent per node (its own folder): spread over the cores. Merging is not (a
  // name two nodes send goes to the first): in node order, after.
  std::vector<DecodedNode> decoded(answers.size());
  std::atomic<size_t> next{0};
  auto decode_some = [&] {
    for (size_t i; (i = next++) < answers.size();)
      if (!answers[i].stream.empty()) decoded[i] = decode_node(answers[i], o.out_dir, o.limits);
  };
  std::vector<std::thread> workers;
  const size_t threads = std::min<size_t>(answers.size(), std::max(1u, std::thread::hardware_concurrency()));
  for (size_t t = 1; t < threads; ++t) workers.emplace_back(decode_some);
  decode_some();
  for (auto& w : workers) w.join();

  Merge m;
  for (size_t i = 0; i < answers.size(); ++i) {
    record.stream_bytes += answers[i].stream.size();
    record.nodes.push_back(merge_node(answers[i], decoded[i], o.out_dir, m, record.problems));
    std::vector<uint8_t>().swap(answers[i].stream);  // decoded now
    decoded[i] = DecodedNode();
  }
  if (!m.summaries.empty())
    if (Status s = write_bytes(o.out_dir / format::kRankSummaryEntry, m.summaries); !s.ok())
      record.problems.push_back(s.message());
  if (!m.manifests.empty()) m.manifests += "\n]\n";
  if (Status s = write_bytes(o.out_dir / format::kGatheredProcesses,
                             std::span(reinterpret_cast<const uint8_t*>(m.processes.data()), m.processes.size()));
      !s.ok())
    record.problems.push_back(s.message());
  if (!m.manifests.empty())
    if (Status s = write_bytes(o.out_dir / format::kGatheredManifests,
                               std::span(reinterpret_cast<const uint8_t*>(m.manifests.data()), m.manifests.size()));
        !s.ok())
      record.problems.push_back(s.message());
  place_missing_ranks(m, record);
  record.seconds = launch_s + std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RS_RETURN_IF_ERROR(format::write_gather_record(o.out_dir, record));
  return record;
}

}  // namespace rankscope::gather
