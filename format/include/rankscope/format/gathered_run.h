// gathered_run.h — a run directory assembled from the snapshots of many nodes, and its record.
//
// Is: the layout `rankscope gather` writes and every reader may rely on (docs/FORMAT.md "Gathered
// run directory"): DIR/snapshots.json holds every node's manifest (the state of its ranks'
// processes), DIR/summaries.ranks every node's rank summaries end to end, DIR/run.json the first
// node's; DIR/hosts/<host>/ holds the whole files that node sent (recorders sent whole, the NCCL
// plugin's files, stacks; a run.json that differs from the first); DIR itself is an ordinary run
// directory whose other files are hard links into hosts/ (copies where links fail), so analyzers
// read it unchanged; DIR/gather.json says which nodes were asked, which answered
// and why the others did not. Is not: the gathering itself (gather/) or the codec
// (snapshot_stream.h).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/format/status.h"

namespace rankscope::format {

inline constexpr std::string_view kGatherRecordFile = "gather.json";
inline constexpr std::string_view kGatheredHostsDir = "hosts";
// Every node's snapshot.json: a JSON array of {"node": HOST, "snapshot": MANIFEST}, one node a line.
inline constexpr std::string_view kGatheredManifests = "snapshots.json";
// The processes of every node's manifest, what hangdoctor reads of them, one a line, tab-separated:
// node, boot_id, host, pid, alive, state, wchan, threads (a first line starting '#' names them).
inline constexpr std::string_view kGatheredProcesses = "processes.tsv";
inline constexpr int kGatherRecordVersion = 1;

struct GatheredNode {
  std::string host;                 // as the gather named it (Slurm node name, hosts-file line)
  bool answered = false;            // a whole, valid snapshot arrived
  std::string reason;               // why not (or what was odd about an answer); "" when clean
  double seconds = 0;               // from launch to the end of its stream
  uint64_t stream_bytes = 0;        // compressed bytes received
  uint64_t bytes = 0;               // unpacked bytes
  int files = 0;                    // entries unpacked (also those kept from a broken stream)
  std::string snapshot_host;        // the node's own host name (gethostname), from its manifest
  std::vector<int> ranks;           // ranks whose flight recorders it sent
  std::vector<int> missing_ranks;   // unreachable nodes: ranks nobody sent and that are likely its
};

struct GatherRecord {
  int version = kGatherRecordVersion;
  std::string launcher;             // "slurm" or "exec"
  std::string job_id;               // Slurm job id; "" for exec
  std::string run_dir;              // RUN_DIR as the nodes see it
  double seconds = 0;               // the whole gather
  double deadline_s = 0;
  uint64_t stream_bytes = 0;        // compressed bytes moved, all nodes
  int world_size = 0;               // from run.json; 0 when no node sent one
  std::vector<int> ranks_missing;   // 0..world_size-1 with no flight recorder in the gathered run
  std::vector<GatheredNode> nodes;
  std::vector<std::string> problems;  // conflicts while merging (one rank sent by two nodes, ...)

  int answered() const;
};

bool is_gathered_run(const std::filesystem::path& dir);
Status write_gather_record(const std::filesystem::path& dir, const GatherRecord& record);
Result<GatherRecord> read_gather_record(const std::filesystem::path& dir);

}  // namespace rankscope::format
