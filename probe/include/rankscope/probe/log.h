// log.h — NCCL-style logging for the probe and its plug-ins: WARN always printed, INFO filtered.
//
// Is: a small value type configured once from the environment (RANKSCOPE_DEBUG=WARN|INFO,
// RANKSCOPE_DEBUG_SUBSYS=WATCHDOG,CLOCK,... or ALL, a leading ^ inverts the list, as NCCL_DEBUG_SUBSYS
// does) and passed by value to whoever logs, so there is no global logger state. Lines go to stderr
// prefixed with "rankscope[rank N]". Is not: a log file or a sink registry; user-facing one-line
// notices ("rankscope: GPU kernel timing unavailable (...)") use notice(), always printed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace rankscope::probe {

enum class LogSubsys : uint32_t {
  kInit = 1u << 0,
  kRange = 1u << 1,
  kColl = 1u << 2,
  kWatchdog = 1u << 3,
  kClock = 1u << 4,
  kCupti = 1u << 5,
  kNvtx = 1u << 6,
  kCuda = 1u << 7,
  kStream = 1u << 8,
};

std::string_view subsys_name(LogSubsys subsys);

class Logger {
 public:
  Logger() = default;
  // Reads RANKSCOPE_DEBUG and RANKSCOPE_DEBUG_SUBSYS.
  static Logger from_environment(int rank = -1);
  // For tests and programs that configure logging themselves. `subsys_list` as the env variable.
  static Logger configured(bool info, std::string_view subsys_list, int rank = -1);

  void set_rank(int rank) { rank_ = rank; }
  bool info_enabled(LogSubsys subsys) const {
    return info_ && (subsys_mask_ & static_cast<uint32_t>(subsys)) != 0;
  }

  template <class... Args>
  void warn(LogSubsys subsys, fmt::format_string<Args...> format, Args&&... args) const {
    emit("WARN", subsys, fmt::format(format, std::forward<Args>(args)...));
  }
  template <class... Args>
  void info(LogSubsys subsys, fmt::format_string<Args...> format, Args&&... args) const {
    if (info_enabled(subsys)) emit("INFO", subsys, fmt::format(format, std::forward<Args>(args)...));
  }
  // "rankscope: <line>" — one line a user should see once (a degraded capability).
  void notice(std::string_view line) const;

 private:
  void emit(std::string_view level, LogSubsys subsys, const std::string& message) const;

  bool info_ = false;
  uint32_t subsys_mask_ = 0xffffffffu;
  int rank_ = -1;
};

}  // namespace rankscope::probe
