// log.cpp — the Logger of log.h: environment parsing and the single write(2) per line.
#include "rankscope/probe/log.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace rankscope::probe {
namespace {

constexpr LogSubsys kAllSubsys[] = {LogSubsys::kInit,  LogSubsys::kRange, LogSubsys::kColl,
                                    LogSubsys::kWatchdog, LogSubsys::kClock, LogSubsys::kCupti,
                                    LogSubsys::kNvtx,  LogSubsys::kCuda,  LogSubsys::kStream};

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'a' && x <= 'z') x = static_cast<char>(x - 'a' + 'A');
    if (y >= 'a' && y <= 'z') y = static_cast<char>(y - 'a' + 'A');
    if (x != y) return false;
  }
  return true;
}

uint32_t parse_subsys_mask(std::string_view list) {
  if (list.empty()) return 0xffffffffu;
  bool invert = false;
  if (list.front() == '^') {
    invert = true;
    list.remove_prefix(1);
  }
  uint32_t mask = 0;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    if (iequals(item, "ALL")) mask = 0xffffffffu;
    for (LogSubsys s : kAllSubsys) {
      if (iequals(item, subsys_name(s))) mask |= static_cast<uint32_t>(s);
    }
  }
  return invert ? ~mask : mask;
}

// One write(2) per line so lines of concurrent threads and ranks do not interleave.
void write_line(const std::string& line) {
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace

std::string_view subsys_name(LogSubsys subsys) {
  switch (subsys) {
    case LogSubsys::kInit: return "INIT";
    case LogSubsys::kRange: return "RANGE";
    case LogSubsys::kColl: return "COLL";
    case LogSubsys::kWatchdog: return "WATCHDOG";
    case LogSubsys::kClock: return "CLOCK";
    case LogSubsys::kCupti: return "CUPTI";
    case LogSubsys::kNvtx: return "NVTX";
    case LogSubsys::kCuda: return "CUDA";
    case LogSubsys::kStream: return "STREAM";
  }
  return "?";
}

Logger Logger::configured(bool info, std::string_view subsys_list, int rank) {
  Logger logger;
  logger.info_ = info;
  logger.subsys_mask_ = parse_subsys_mask(subsys_list);
  logger.rank_ = rank;
  return logger;
}

Logger Logger::from_environment(int rank) {
  const char* level = std::getenv("RANKSCOPE_DEBUG");
  const char* subsys = std::getenv("RANKSCOPE_DEBUG_SUBSYS");
  bool info = level != nullptr && (iequals(level, "INFO") || iequals(level, "TRACE"));
  return configured(info, subsys ? std::string_view(subsys) : std::string_view{}, rank);
}

void Logger::notice(std::string_view line) const {
  write_line(fmt::format("rankscope: {}\n", line));
}

void Logger::emit(std::string_view level, LogSubsys subsys, const std::string& message) const {
  if (rank_ >= 0) {
    write_line(fmt::format("rankscope[rank {}] {} {}: {}\n", rank_, level, subsys_name(subsys), message));
  } else {
    write_line(fmt::format("rankscope {} {}: {}\n", level, subsys_name(subsys), message));
  }
}

}  // namespace rankscope::probe
