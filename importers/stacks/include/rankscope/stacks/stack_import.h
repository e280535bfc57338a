// stack_import.h — every rank's Python stacks, as py-spy and PyTorch's debug server write them.
//
// Is: a reader of
//   - `py-spy dump` output, one file per rank (the rank from the file name's last number: rank3.txt,
//     pyspy_3.txt), several dumps appended in one file being several snapshots ("Process N: ..." then
//     "Thread <tid> (idle|active): "<name>"" and frames "    <function> (<file>:<line>)"; py-spy's
//     src/dump.rs);
//   - Python's faulthandler text ("Thread 0x... (most recent call first):" and frames
//     "  File \"<file>\", line <n> in <function>"), one file per rank;
//   - PyTorch's debug server (torch.distributed.debug.start_debug_server(dump_dir=...), torch 2.15):
//     its periodic `stacks_<YYYYMMDD>_<HHMMSS>.txt` (faulthandler text of every rank, each after
//     "=== Rank N: <address> ==="; torch/distributed/debug/_debug_handlers.py StacksHandler.dump) and
//     `pyspy_dump_<...>.txt` (py-spy's text in the same sections), one snapshot a file; the server's
//     other files (fr_trace_, c10d_health_check_, torchcomms_health_check_) are listed, with what
//     they say they failed to fetch ("PARTIAL DATA: 3/4 workers responded", "Error: 500").
// Is not: the judgement (analyzers/hang/stack_verdict.h).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/format/status.h"

namespace rankscope::stacks {

struct Frame {
  std::string function;
  std::string file;  // as the producer printed it (py-spy shortens to the package-relative path)
  int line = 0;
};

struct Thread {
  std::string id;     // "3010" (py-spy) or "0x00007f..." (faulthandler)
  std::string name;   // "MainThread" (py-spy), "" where the producer prints none
  std::string state;  // "idle" | "active" (py-spy), "" otherwise
  bool current = false;  // faulthandler's "Current thread": the one that printed the dump
  std::vector<Frame> frames;  // innermost first
};

struct Snapshot {
  std::string source;  // the file (and section) it came from
  std::vector<Thread> threads;
};

struct RankStacks {
  int rank = 0;
  std::vector<Snapshot> snapshots;  // oldest first
};

struct StackImport {
  std::map<int, RankStacks> ranks;
  int world_size = 0;                  // the debug server's sections say it; else the highest rank + 1
  std::vector<std::string> problems;   // ranks the server could not fetch, files that held no stack
  std::vector<std::string> server_files;  // what the debug server's other files said, one line a kind
  std::string summary;                 // one line: what was read
};

// True for a file whose first lines are py-spy's, faulthandler's or the debug server's stack text,
// and for a directory holding such files (a debug server's dump_dir, or one file per rank).
bool looks_like_stacks(const std::filesystem::path& path);

// Reads files and directories as above. An error when nothing in them holds a stack.
Result<StackImport> import_stacks(const std::vector<std::filesystem::path>& paths);

// `hangdoctor --torch-debug-server HOST:PORT`: asks a running debug server's frontend (rank 0; only
// on this machine: it has no authentication) for its /stacks page `snapshots` times, `interval_s`
// apart, each answer bounded by `timeout_s`, and reads it as the periodic stacks_ files.
Result<StackImport> query_debug_server(std::string_view address, int snapshots, double interval_s, double timeout_s);

// One text's stacks (py-spy or faulthandler), appended to `into` as one or more snapshots. Exposed
// for tests.
void parse_stack_text(std::string_view text, const std::string& source, std::vector<Snapshot>& into);

}  // namespace rankscope::stacks
