// log_startup.h — the start-up as a job's log tells it (`rankscope startup LOG`): NCCL's init left
// incomplete, settings from the environment that take a transport away or replace the topology,
// topology searches, mixed versions (docs/LOGS.md).
//
// Is: the log import's findings of those kinds, their JSON and their text. Is not: the log's
// reading (importers/logs) or its verdict on a hang (analyzers/hang).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rankscope/logs/log_import.h"

namespace rankscope::analyzers {

struct LogStartupFinding {
  std::string kind;  // setting | topology | version | init_incomplete
  bool problem = false;
  std::vector<int> ranks;
  std::vector<std::string> hosts;
  std::string text, evidence;
};

struct LogStartupReport {
  std::string summary;  // what the log import read
  std::vector<LogStartupFinding> findings;
  std::vector<std::string> nccl_versions;
  int problems = 0;  // findings that are problems
};

LogStartupReport startup_from_log(const logs::LogImport& log);
nlohmann::json log_startup_json(const LogStartupReport& r);
std::string log_startup_text(const LogStartupReport& r);

}  // namespace rankscope::analyzers
