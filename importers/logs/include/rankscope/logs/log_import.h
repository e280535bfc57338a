// log_import.h — a job's logs (NCCL_DEBUG=INFO output, PyTorch's watchdog lines, torchrun's and
// Slurm's output files) turned into the run-directory model hangdoctor reads, plus what only a
// log says: errors, init that never completed, settings and topology.
//
// Is: streaming over files (or stdin), any mix of producers and interleaved ranks, cut and hostile
// lines skipped; the mapping into format::RunDirectory:
//   - NCCL COLL lines (NCCL_DEBUG_SUBSYS=COLL): one communicator per NCCL communicator (matched
//     across processes by commId, else by size and creation order), call i of each member as its
//     seq i; a call is completed once every member printed it (NCCL's lines say when a call was
//     made, never when it finished), else open;
//   - PyTorch's watchdog: one communicator per process group ("pg 0 (default_pg)"), the timed-out
//     work open at its SeqNum, issued and completed from "last enqueued / last completed".
// Ranks are global ranks: a launcher's "[rankN]:" tag, else the rank in the largest communicator the
// process joined. Is not: the diagnosis (analyzers/hang), which cannot tell a log from a recorder.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "rankscope/format/run_directory.h"
#include "rankscope/format/status.h"

namespace rankscope::logs {

// Something a log says that the run model cannot carry: an error a rank printed, init that never
// completed, a setting or topology that costs bandwidth.
struct LogFinding {
  enum class Kind {
    kNetworkError,    // NCCL printed a network error (IB completion error, socket closed)
    kCudaError,       // a CUDA error (NCCL's or PyTorch's)
    kNcclError,       // another NCCL warning or error
    kInitIncomplete,  // a communicator's init never completed
    kWatchdogTimeout, // a rank timed out waiting (PyTorch's watchdog, Gloo): a consequence
    kPeerLost,        // a rank lost its connection to a peer (Gloo, PyTorch): a consequence
    kRankKilled,      // torchrun's table: a rank killed by a signal other than the launcher's SIGTERM
    kRankException,   // a rank raised an exception that is not a timeout or a lost peer
    kCallMismatch,    // ranks failed inside different torch.distributed calls
    kSilentRank,      // ranks that raised nothing while the others timed out or lost peers
    kBehind,          // ranks with fewer collectives outstanding than their group's others (watchdog hung)
    kSetting,
    kTopology,
    kVersion,
  };
  Kind kind = Kind::kSetting;
  std::vector<int> ranks;       // global ranks it concerns (empty: the job, or unknown)
  std::vector<std::string> hosts;
  std::string peer;             // the remote host or address an error names
  std::string text;             // one sentence for the report
  std::string evidence;         // the line it rests on, with "file:line"
  bool problem = true;          // false: informational (a setting that is fine)
};

struct LogImport {
  format::RunDirectory run;     // empty ranks where the log holds no progress evidence
  bool has_progress = false;    // COLL lines or watchdog lines: the classifier has something to judge
  bool pending = false;         // some call was open at the end of the log
  int world_size = 0;
  std::vector<LogFinding> findings;
  std::vector<std::string> versions;  // NCCL versions seen
  std::map<int, std::string> host_of_rank;  // where the log says
  std::map<int, int> pid_of_rank;
  uint64_t lines = 0, nccl_lines = 0, torch_lines = 0, coll_lines = 0;
  std::string summary;          // one line: what was read
  std::vector<std::string> cannot_tell;  // what this log cannot tell, in sentences
};

// NCCL's RAS report (`ncclras`, text or JSON, NCCL 2.24+; src/nccl_ras.h) as a LogImport: no
// progress evidence, its findings (ranks behind on collective counts, dead or unreachable
// processes, init not complete). `source` names where it came from in the summary.
Result<LogImport> import_nccl_ras(std::string_view report, const std::string& source);

// `hangdoctor --nccl-ras [HOST:]PORT`: asks a live job's RAS thread (src/ras_client.h) and reads
// the answer as above; `timeout_s` bounds the connection and each reply.
Result<LogImport> query_and_import_nccl_ras(std::string_view address, double timeout_s);

// True when the first 64 KiB of `path` (a file) hold an NCCL or PyTorch log line.
bool looks_like_log(const std::filesystem::path& path);

// Reads every path (a file, a directory of *.log / *.out / *.err / *.txt files, or "-" for stdin).
// A file holding an NCCL RAS report (text or JSON) is read as one, its findings added.
// `progress`, when set, is called with the bytes read so far and the total (0 for stdin).
Result<LogImport> import_logs(const std::vector<std::filesystem::path>& paths,
                              void (*progress)(uint64_t done, uint64_t total) = nullptr);

}  // namespace rankscope::logs
