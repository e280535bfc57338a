// inspect_report.h — the state of every rank of a run, as `rankscope inspect` shows it.
//
// Is: a view over a RunDirectory: per rank, heartbeat age, process state, step, open ranges, the
// last collectives of each communicator with their states, the last watchdog event and missing
// gradients; rendered as text for people and as JSON (schema_version 1) for programs.
// Is not: a diagnosis. hangdoctor says who is to blame; inspect only shows.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "rankscope/format/run_directory.h"

namespace rankscope::analyzers {

inline constexpr int kInspectSchemaVersion = 1;

struct InspectOptions {
  int last_collectives = 4;  // per communicator
  int64_t now_ns = 0;        // the reader's clock; 0 = now
};

nlohmann::json inspect_json(const format::RunDirectory& run, const InspectOptions& options);
std::string inspect_text(const format::RunDirectory& run, const InspectOptions& options);

// "3.1 MiB", "512 B"
std::string human_bytes(uint64_t bytes);
// "0.4 ms", "31 s"
std::string human_duration_ns(int64_t ns);

}  // namespace rankscope::analyzers
