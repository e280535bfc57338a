// nccl_ras.h — the report of NCCL's RAS subsystem (NCCL 2.24+, `ncclras` or a raw query of the RAS
// client socket) read into what a hang diagnosis needs, and turned into LogFindings.
//
// Is: a parser for both shapes RAS prints (docs/log-formats/nccl.md §g; src/ras/client_support.cc):
//   - text (2.24+): "NCCL version", "Job summary", the "Communicators" group table, then the "Errors"
//     and "Warnings" sections ("DEAD", "INCOMPLETE", "TIMEOUT", "#G-C (hash) INCOMPLETE|ERROR|MISMATCH");
//     2.24/2.25 print "collective operation counts" and "The missing rank(s): 1,2", 2.26+ print one
//     block per collective type ("AllGather operation counts") and one "Rank N -- GPU ..." per rank;
//   - JSON (2.28.7+, `ncclras -f json`): every reporting rank with its status and per-collective
//     counts, every missing rank with unresponsive/considered_dead. 2.28.7 and 2.28.9 print invalid
//     JSON for missing ranks (no comma after "nvml_dev"); that one defect is repaired.
// Leading protocol lines of a raw socket capture ("SERVER PROTOCOL 2", "OK") are skipped.
// Ranks in RAS output are communicator ranks; ras_findings calls them global ranks only for a
// communicator as large as the job (the default process group: comm rank == global rank).
// Is not: the socket client (ras_client.h) nor the diagnosis (analyzers/hang). RAS prints a snapshot
// gathered asynchronously: ranks of a healthy job can differ by one operation for an instant.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/format/status.h"
#include "rankscope/logs/log_import.h"

namespace rankscope::logs {

// Where RAS says a rank or process lives: "Rank 12 -- GPU 4 managed by process 323032 on node
// 10.137.190.124", "Process 4242 on node 10.0.0.2 managing GPU 3". Hosts are IP addresses (RAS does
// no DNS look-up); -1 / empty where RAS printed "[process information not found]".
struct RasLocation {
  int rank = -1;        // communicator rank; -1 for a process line
  int pid = -1;
  std::string host;
  std::string gpus;     // as printed: "4", "4 (NVML 5)", "0,1"
};

// Ranks of one communicator that share one value: an operation count or a status.
struct RasRankGroup {
  int64_t value = 0;            // operation count (0: "have not launched any operations")
  std::string status;           // for status groups: RUNNING, INIT, FINALIZE, ABORT, NOCOMM/UNKNOWN
  int ranks_count = 0;          // how many ranks RAS says hold it
  std::vector<RasLocation> ranks;  // the ones it listed (RAS lists outliers only; JSON: all)
};

// "Communicator ranks have different <collective> operation counts" and its groups, in RAS's order
// (most frequent first). `collective` is "collective" for 2.24/2.25, which counted all types together.
struct RasCountMismatch {
  std::string collective;
  std::vector<RasRankGroup> groups;
};

// One reporting rank, as JSON gives it (text prints only outliers).
struct RasRank {
  int rank = -1;
  std::string host;
  int pid = -1;
  int cuda_dev = -1, nvml_dev = -1;
  int init_state = 0;     // ncclResult_t: 0 ready, 7 (ncclInProgress) still initialising, else error
  int async_error = 0;    // ncclResult_t as above
  bool finalize_called = false, destroy_flag = false, abort_flag = false;
  std::map<std::string, uint64_t> collective_counts;  // "AllReduce" -> operations launched
  std::string status() const;  // RAS's rule: ABORT > FINALIZE > RUNNING (init_state 0) > INIT
};

// A rank of the communicator whose process sent no data about it.
struct RasMissingRank {
  RasLocation where;
  bool unresponsive = false;     // its process did not answer (JSON); text: listed under INCOMPLETE
  bool considered_dead = false;  // unreachable for 60 s
};

struct RasCommunicator {
  std::string hash;            // 16 lower-case hex digits, no "0x" (= commId of NCCL's Init lines)
  std::string secondary_hash;  // JSON only: "0x<host hash>:0x<pid hash>"
  std::string label;           // text only: "#0-0" (group 0, first comm of the group)
  int group = -1;              // text: index into RasReport::groups
  int size = 0;                // ranks in the communicator (text: the group's "Ranks per comm")
  int missing_ranks_count = 0;
  std::vector<RasRank> ranks;                 // JSON
  std::vector<RasMissingRank> missing_ranks;  // JSON; text: the ranks listed under INCOMPLETE
  std::vector<std::string> errors;            // "INCOMPLETE", "ERROR", "MISMATCH" (text: per entry)
  std::vector<RasCountMismatch> count_mismatches;
  std::vector<RasRankGroup> status_groups;    // "Communicator ranks have different status"
  std::vector<std::string> error_lines;       // ERROR entry body: "Asynchronous error on 1 rank", ...
  std::vector<RasLocation> error_ranks;       // ranks the ERROR entry names
};

// One row of the text "Communicators" table: comms grouped by size, nodes, status and errors.
struct RasCommGroup {
  int group = -1, comms = 0, nodes = 0;
  std::string ranks_per_node;  // "8" or "7-8"
  int ranks_per_comm = 0, ranks_in_group = 0;
  std::string status;          // RUNNING, INIT, FINALIZE, ABORT, NOCOMM (2.24/2.25: UNKNOWN)
  std::string errors;          // OK, MISMATCH, INCOMPLETE, ERROR or a comma list of them
};

// One entry of the Errors or Warnings section, verbatim: its title line and indented body.
struct RasMessage {
  bool error = false;          // in "Errors" (else "Warnings")
  std::string title;           // "DEAD", "#0-0 (fa93daea854b060b) MISMATCH"
  std::vector<std::string> lines;
};

struct RasReport {
  bool json = false;
  bool complete = true;        // text: false when it ends before its Warnings section (cut)
  std::vector<std::string> nccl_versions;  // "2.26.2"; one per report read
  std::string cuda_compiled;   // text: "12.6"
  int cuda_runtime = -1, cuda_driver = -1;
  std::string timestamp;       // JSON: the server's local time
  // Job summary (text; JSON: derived from the ranks). -1: not printed.
  int nodes = -1, processes = -1, gpus = -1;
  int processes_per_node = -1, gpus_per_process = -1;  // -1 where they differ between nodes
  std::vector<std::string> outlier_nodes;  // "Node 10.0.0.3 running processes 11,12"
  std::vector<RasCommGroup> groups;
  std::vector<RasCommunicator> communicators;
  // Processes that sent nothing (job-level INCOMPLETE) and those RAS considers dead.
  int unreachable_processes_count = 0;
  std::vector<RasLocation> unreachable_processes;
  int dead_processes_count = 0;
  std::vector<RasLocation> dead_processes;
  int timeouts = 0;            // communication timeouts while gathering
  double collection_time_s = -1;
  std::vector<RasMessage> messages;
};

// Reads one RAS report, text or JSON (chosen by its first non-blank character). Fails with a
// message for a user on input that is not RAS output, JSON that is cut or malformed, and text that
// ends before its communicator table.
Result<RasReport> parse_nccl_ras(std::string_view text);

// What the report means for a hang, one sentence each: count mismatches (kSilentRank: the ranks that
// are behind), dead or unreachable processes (kNetworkError), missing ranks, init not complete,
// errors RAS saw, gathering timeouts, and the version (kVersion, informational).
std::vector<LogFinding> ras_findings(const RasReport& report);

}  // namespace rankscope::logs
