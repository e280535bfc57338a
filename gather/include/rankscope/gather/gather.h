// gather.h — runs the snapshot on every node of a job and unpacks the streams into one run directory.
//
// Is: the nodes to ask (from Slurm: `squeue` + `scontrol show hostnames`, then one `srun --jobid J
// --overlap -N N --label` step for all of them whose output is split by task (FanOutLaunch), or one
// `srun ... -N 1 -w NODE` each; or from a hosts file and an --exec template such as 'ssh {host}'),
// the parallel launch under one deadline (node_launch.h), then merge_node_answers: the bounded decoding of each stream
// (its manifest, rank summaries and run.json kept in memory and merged into one file each for the job:
// DIR/snapshots.json, DIR/summaries.ranks, DIR/run.json; whole files into DIR/hosts/<host>/), the
// merge into DIR as an ordinary run directory, and DIR/gather.json (format/gathered_run.h). One node's silence, error
// or hostile stream is recorded for that node; the others' data is kept. Is not: the snapshot
// itself (node_snapshot.h), nor the diagnosis of what was gathered.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "rankscope/format/gathered_run.h"
#include "rankscope/format/snapshot_stream.h"
#include "rankscope/format/status.h"

namespace rankscope::gather {

struct GatherTarget {
  std::string host;     // the node's name, also its folder under DIR/hosts/
  std::string command;  // shell command whose stdout is the node's snapshot stream
};

struct GatherOptions {
  std::filesystem::path out_dir;  // created; an empty folder or an earlier gather (replaced)
  std::string run_dir;            // RUN_DIR as the nodes see it (recorded)
  std::string launcher = "exec";  // recorded: "slurm" or "exec"
  std::string job_id;             // recorded
  double deadline_s = 20;
  int max_parallel = 256;                  // commands running at once
  uint64_t max_stream_bytes = 1ull << 30;  // per node, compressed
  format::SnapshotLimits limits;
};

// Host names become folder names and land in shell commands: [A-Za-z0-9._-], not starting with
// '-' or '.', at most 253 bytes.
Status check_host_name(std::string_view host);

// The hosts file: one host per line; blank lines and '#' comments ignored; duplicates refused.
Result<std::vector<std::string>> read_hosts_file(const std::filesystem::path& file);

// `snapshot_command` is the whole command a node runs (already quoted); the template's {host}
// (required) is replaced by the host, the snapshot command appended after a space.
Result<std::vector<GatherTarget>> exec_targets(const std::vector<std::string>& hosts, const std::string& exec_template,
                                               const std::string& snapshot_command);

// Asks Slurm for the job's nodes (squeue, scontrol; within `deadline_s`) and builds one srun per
// node. Errors: Slurm's commands missing, a job that does not exist, is not running, or belongs to
// another user (only its owner or root may srun --overlap into it).
Result<std::vector<GatherTarget>> slurm_targets(const std::string& job_id, const std::string& snapshot_command,
                                                double deadline_s);

// Runs the targets and fills options.out_dir. Fails only for bad options (out_dir not usable, no
// targets); every node's failure is a line of the record.
Result<format::GatherRecord> gather_nodes(const std::vector<GatherTarget>& targets, const GatherOptions& options);

// What one node sent and how its command ended: the launcher's part of a gather (or a simulator's).
struct NodeAnswer {
  std::string host;
  std::vector<uint8_t> stream;  // its stdout: a snapshot stream, whole or not
  std::string reason;           // why the command gave no clean answer (node_launch.h); "" when it did
  // Where one command served many nodes: why this node's stream may have stopped short (the shared
  // command's end), said only when its stream is empty or incomplete.
  std::string reason_if_incomplete;
  double seconds = 0;
};

// One launch for every node of a Slurm job (the shape of its fan-out tree: one job step, slurmd
// forwarding the launch down a tree): `command` runs the snapshot on every node at once, each writing
// its stream as base64 lines (`rankscope snapshot --text`) that srun labels with the task id, task i
// running on hosts[i]. `one_each` is the per-node launch of the same snapshot, for nodes the one step
// left silent while time was left (a node whose slurmd could not take the launch).
struct FanOutLaunch {
  std::string job_id;
  std::vector<std::string> hosts;
  std::string command;
  std::vector<GatherTarget> one_each;
};

// Asks Slurm for the job's nodes (as slurm_targets) and builds the one srun for all of them:
// `srun --jobid J --overlap -N N --ntasks-per-node 1 -n N --label --quiet TEXT_SNAPSHOT`.
Result<FanOutLaunch> slurm_fan_out(const std::string& job_id, const std::string& text_snapshot_command,
                                   const std::string& snapshot_command, double deadline_s);

// Runs the one launch, splits its output by task into the nodes' streams, asks the nodes it left
// silent one at a time within what is left of the deadline, then merge_node_answers.
Result<format::GatherRecord> gather_fan_out(const FanOutLaunch& launch, const GatherOptions& options);

// The head's part of a gather: decodes every answer (on all cores), merges them into
// options.out_dir (created; expected empty) and writes gather.json, whose `seconds` adds `launch_s`.
// The streams are released as they are merged.
Result<format::GatherRecord> merge_node_answers(std::vector<NodeAnswer>& answers, const GatherOptions& options,
                                                double launch_s = 0);

}  // namespace rankscope::gather
