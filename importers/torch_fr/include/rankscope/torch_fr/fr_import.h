// fr_import.h — a job's Flight Recorder dumps turned into the run-directory model hangdoctor reads.
//
// Is: discovery (a directory of dumps, or a file prefix such as ~/.cache/torch/comm_lib_trace_rank_,
// the rank taken from each file name's trailing number), one version for all ranks (mixed versions
// are refused), and the mapping into format::RunDirectory: one communicator per process group,
// named by its desc (plus ":<name>" where descs repeat), keyed by group name and members — never by
// pg_id or record_id; seq = collective_seq_id (issued = last enqueued + 1) from pg_status (fr_pg_status.h);
// send/recv on a pair communicator "<group> p2p <a>-<b>" (fr_p2p.h); each entry's state by its backend's rule
// (fr_entry_state.h); every rank's heartbeat at a lower bound of when the dumps were written
// (fr_dump_time.h). The classifier cannot tell where its evidence came from. Is not: the diagnosis
// (analyzers/hang).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "rankscope/format/run_directory.h"
#include "rankscope/format/status.h"

namespace rankscope::torch_fr {

struct FrImport {
  format::RunDirectory run;
  std::string version;
  std::vector<int> found;     // ranks with a readable dump
  std::vector<int> missing;   // members of some group whose dump is absent or unreadable
  std::vector<int> partial;   // dumps that ended early (read as far as they went)
  bool timing = false;        // TORCH_NCCL_ENABLE_TIMING was on (a start or a duration was seen)
  bool event_backend = false; // some entry's backend records device events (NCCL), so `timing` means something
  std::vector<std::string> backends;  // profiling-name prefixes seen: "nccl", "gloo"
  size_t entries = 0;         // entries read over all dumps (0: dumped without collectives)
  // Some entry never completed. Without one the dumps were taken on demand from a job that was not
  // stuck (the watchdog dumps only on a timeout), and hangdoctor reads them as healthy.
  bool pending = false;
  // pg_status rows read over all dumps, and whether one has work enqueued and not completed: dumps
  // with only active entries (or a rank holding the GIL) can hold no entry and still say where each
  // rank stands.
  size_t status_rows = 0;
  bool status_pending = false;
  // The run's "now" (every heartbeat) is only a lower bound on when the dumps were written; this
  // sentence says what it rests on (fr_dump_time.h), and timeout_s the watchdog timeout it used.
  std::string time_basis;
  double timeout_s = 0;
  std::string summary;        // one line: what was read
};

// True when `path` names Flight Recorder dumps (a directory holding some, or a prefix of some).
bool looks_like_fr_dumps(const std::filesystem::path& path);

Result<FrImport> import_fr_dumps(const std::filesystem::path& path);

}  // namespace rankscope::torch_fr
