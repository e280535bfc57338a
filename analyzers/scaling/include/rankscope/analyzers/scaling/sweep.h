// sweep.h — the sequence-length sweep directory: its layout and its reader.
//
// Layout (written by `gpt2-train --sweep-seq-len 128,256,512`; docs/FORMAT.md "Sweep directory"):
//
//   SWEEP_DIR/sweep.json          {"schema_version": 1, "kind": "rankscope.seq_len_sweep",
//                                  "parameter": "seq_len",
//                                  "points": [{"seq_len": 128, "run_dir": "seq_len_00128"}, ...]}
//   SWEEP_DIR/seq_len_00128/      one complete run directory per point (run.json, rankNNNNN.*)
//   SWEEP_DIR/seq_len_00256/      ...
//
// `run_dir` is relative to SWEEP_DIR (an absolute path is accepted). The writer adds a point to
// sweep.json after its run finished, so an interrupted sweep lists the points it completed.
// Without sweep.json the reader falls back to the subdirectories of SWEEP_DIR that hold a run.json,
// taking each point's seq_len from run.json's training.seq_len. Is not: the driver that runs the
// sweep (the trainer owns it; analyzers never link the trainer).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "rankscope/format/status.h"

namespace rankscope::analyzers {

inline constexpr int kSweepSchemaVersion = 1;
inline constexpr std::string_view kSweepFile = "sweep.json";

struct SweepPoint {
  int64_t seq_len = 0;
  std::filesystem::path run_dir;  // absolute or relative to the current directory, ready to open
};

struct Sweep {
  std::filesystem::path dir;
  bool from_index = false;         // true when read from sweep.json
  std::vector<SweepPoint> points;  // by increasing seq_len
};

// "seq_len_00128": the point directory name the writer uses.
std::string sweep_point_dir_name(int64_t seq_len);

Result<Sweep> read_sweep(const std::filesystem::path& dir);
// Writes SWEEP_DIR/sweep.json atomically (for the driver and for tests).
Status write_sweep_index(const std::filesystem::path& dir, const std::vector<SweepPoint>& points);

}  // namespace rankscope::analyzers
