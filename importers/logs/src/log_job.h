// log_job.h — what a job's log says, per process, per communicator and per rank, gathered while
// the lines stream past (memory grows with ranks x communicators, never with the log's bytes).
//
// Is: the model the NCCL and PyTorch message readers fill (nccl_message.cpp, torch_message.cpp)
// and the run-directory mapping reads (log_run.cpp). Is not: any judgement.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "log_line.h"
#include "rankscope/format/vocabulary.h"

namespace rankscope::logs {

// One NCCL call from a COLL line ("AllReduce: opCount 4a8 ... count 1024 datatype 7 op 0 root 0 comm
// 0x... [nranks=2] stream 0x...").
struct NcclCall {
  format::CollectiveOp op = format::CollectiveOp::kUnknown;
  format::DataType dtype = format::DataType::kUnknown;
  std::string_view op_name;   // as NCCL names it (static storage): "AllReduce", "Send"
  int datatype = -1;          // ncclDataType_t as printed
  int red_op = -1;            // ncclRedOp_t as printed
  int root = -1;              // root, or the peer of a Send/Recv
  uint64_t count = 0;
  uint64_t op_count = 0;
};

// Send/recv between one member and one peer of its communicator.
struct P2pCalls {
  uint64_t sends = 0, recvs = 0;
  uint64_t calls = 0;      // both directions, in the order made
  NcclCall last;
};

// One process's member of one NCCL communicator, from its init lines.
struct CommMember {
  std::string host;
  int pid = -1;
  int device = -1;
  std::string pointer;         // "0x55b6aa64a990": unique within the process
  std::string comm_id;         // "commId 0x..." (NCCL 2.2x+), "" where not printed
  int rank = -1;               // rank in the communicator
  int nranks = 0;
  int ordinal = 0;             // how many communicators of this size the process made before it
  bool init_started = false;
  bool init_completed = false;
  int coll_channels = -1;      // "24 coll channels, ..." (-1 not printed)
  uint64_t calls = 0;          // COLL lines seen
  static constexpr size_t kKeep = 64;
  std::array<NcclCall, kKeep> last{};  // the last kKeep calls, call i at last[i % kKeep]
  uint64_t first_line = 0;
  std::map<int, P2pCalls> p2p;         // Send/Recv lines by peer (rank in the communicator)
};

// A WARN (or ABORT) line NCCL printed, or an error PyTorch printed, on one process.
struct ErrorLine {
  enum class What { kNetwork, kCuda, kNccl, kTimeout, kMismatch, kOther };
  What what = What::kOther;
  std::string text;        // the message, cut to 300 characters
  std::string peer;        // "10.0.0.2<43134>" where the message names a remote address
  uint64_t line = 0;       // 1-based line number in its file
  std::string file;
  int rank = -1;           // the global rank that printed it, where a prefix says
  int local_rank = -1;     // torchrun's [defaultN]: tag, where that is all the line says
  std::string host;        // where NCCL printed it
};

struct ProcessLog {
  std::string host;
  int pid = -1;
  int tagged_rank = -1;                      // from a launcher prefix on its lines
  std::string version;                       // "2.27.7+cuda13.0"
  std::map<std::string, std::string> settings;  // NCCL_* set by environment
  std::map<std::string, int> transports;     // "P2P", "SHM", "NET/IB", "NET/Socket", "NVLS", "CollNet": channel lines
  std::string bootstrap_address;             // "192.168.0.3" from "Bootstrap : Using eth0:192.168.0.3<0>"
  std::string network;                       // "IB", "Socket" from "Using network X"
  int search_channels = -1;                  // the topology search's best ring: nChannels, bw per channel, type
  double search_bw = 0;
  std::string search_type;
  std::vector<ErrorLine> errors;             // the first kKeepErrors
  uint64_t error_count = 0;
  static constexpr size_t kKeepErrors = 8;
};

// PyTorch's watchdog, per (global or group) rank and process group.
struct TorchWork {
  int64_t seq = -1;
  std::string op_type;     // "ALLREDUCE", "_ALLGATHER_BASE"
  uint64_t numel_in = 0, numel_out = 0;
  int64_t timeout_ms = 0, ran_ms = 0;
};
struct TorchPgLog {
  std::string pg;           // the group's id as the prefix named it ("0", "3"); "" where it names none
                            // ("[Rank N]" before 2.3, and 2.4's timeout line)
  std::string pg_desc;      // "default_pg" where named
  int rank = -1;            // the rank in the prefix "[... Rank N]" (the group's rank)
  int global_rank = -1;     // the launcher's "[rankN]:" tag on its line, where present
  std::optional<TorchWork> timed_out;
  int64_t last_enqueued = -1, last_completed = -1;
  int64_t failing_seq = -1; // "... at work: 41, last enqueued ...": the work the watchdog failed on
  bool watchdog_stuck = false;  // "watchdog got stuck" / "Heartbeat monitor timed out": state unknown
  int64_t outstanding = -1;     // "workMetaList_.size()=N" (2.3-2.4's heartbeat monitor): works not completed
  uint64_t line = 0;
  std::string file;
};

// How one rank's process ended, from its Python traceback and the launcher's failure table.
struct RankFailure {
  std::string call;        // the torch.distributed function its traceback went through: "all_reduce"
  std::string error;       // the exception's line, cut to 300 characters
  ErrorLine::What what = ErrorLine::What::kOther;  // kTimeout and kNetwork are what waiting ranks raise
  bool exited = false;     // listed in torchrun's failure table
  int exitcode = 0;        // negative: killed by signal -exitcode
  bool root_cause = false; // torchrun's "Root Cause (first observed failure)"
  std::string host;
  uint64_t line = 0;
  std::string file;
};

struct LogJob {
  std::map<std::pair<std::string, int>, ProcessLog> processes;         // (host, pid)
  std::map<std::tuple<std::string, int, std::string>, CommMember> members;  // (host, pid, pointer)
  std::map<std::pair<int, std::string>, TorchPgLog> torch;             // (rank as printed, pg)
  std::map<int, uint64_t> tagged_ranks;                                // launcher-tagged rank -> lines
  std::map<int, uint64_t> tagged_local_ranks;                          // "[defaultN]:" -> lines
  std::map<int, RankFailure> failures;  // by global rank
  // TORCH_DISTRIBUTED_DEBUG=DETAIL: "Rank 0 is running collective: ..., but Rank 1 is running
  // collective: ...": the rank each message names as the odd one, and who named it.
  std::map<int, std::set<int>> named_odd;
  // monitored_barrier (ProcessGroupGloo::monitoredBarrier): "[Rank 0]: Rank 2 failed to pass
  // monitoredBarrier in 3000 ms", "[Rank 0]: Ranks 1, 2 failed ...", printed by the group's rank 0.
  // The numbers are GROUP ranks: by the printing process's global rank, the group ranks it named.
  std::map<int, std::set<int>> barrier_absent;
  std::map<int, std::string> traceback_call;  // a traceback being read: the last torch.distributed frame
  std::map<int, std::pair<int, uint64_t>> local_exits;  // "failed (exitcode: -9) local_rank: 3": local rank -> (code, line)
  int table_rank = -1;                  // torchrun's failure table: the entry being read
  std::string table_host;
  bool table_root = false;
  std::vector<ErrorLine> other_errors;  // errors no process could be tied to (Python tracebacks)
  uint64_t lines = 0, nccl_lines = 0, torch_lines = 0, coll_lines = 0;
  std::vector<std::string> files;
  // Indexes kept while reading, so a line costs the same however many communicators came before.
  std::map<std::tuple<std::string, int, int>, CommMember*> newest_on_device;  // (host, pid, device)
  std::map<std::tuple<std::string, int, int, int>, int> made_of_size;        // (host, pid, device, nranks)
  std::map<int, std::vector<std::string>> hosts_of_pid;                      // hosts seen with each pid
  std::unordered_map<uint64_t, CommMember*> member_index;                    // hash of (host, pid, pointer)

  ProcessLog& process(std::string_view host, int pid);
  // The process of (host, pid) when one of the last few looked up is it; null otherwise. A host
  // found here is one hosts_of_pid already holds.
  ProcessLog* recent_process(std::string_view host, int pid);

 private:
  // A node's log interleaves its ranks' lines: the processes looked up last, newest first, so a
  // line costs no map lookup (and no key string) while they repeat.
  static constexpr size_t kRecent = 16;
  std::array<ProcessLog*, kRecent> recent_{};
};

// Adds what `from` read (other files) to `into` (log_merge.cpp).
void merge_job(LogJob& into, LogJob&& from);

// Reads one line into `job` (`file` and `line_no` only say where, for the evidence).
void read_line(LogJob& job, const LogLine& line, const std::string& file, uint64_t line_no);

// Both readers: nccl_message.cpp and torch_message.cpp.
void read_nccl_message(LogJob& job, const LogLine& line, const std::string& file, uint64_t line_no);
// True when the message was PyTorch's (whatever its producer prefix: exceptions echo them).
bool read_torch_message(LogJob& job, const LogLine& line, const std::string& file, uint64_t line_no);

}  // namespace rankscope::logs
