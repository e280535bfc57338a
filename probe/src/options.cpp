// options.cpp — Options::apply_environment and the launcher environments (OpenMPI, PMI, Slurm,
// torchrun) that say which rank this process is.
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "rankscope/probe/probe.h"

namespace rankscope::probe {
namespace {

std::optional<std::string_view> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string_view(v);
}

Result<double> parse_double(const char* name, std::string_view text) {
  std::string s(text);
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || errno != 0 || end != s.c_str() + s.size()) {
    return invalid_argument(fmt::format("{}={}: expected a number of seconds", name, s));
  }
  return v;
}

Result<int64_t> parse_int(const char* name, std::string_view text) {
  std::string s(text);
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || errno != 0 || end != s.c_str() + s.size()) {
    return invalid_argument(fmt::format("{}={}: expected an integer", name, s));
  }
  return static_cast<int64_t>(v);
}

Result<bool> parse_bool(const char* name, std::string_view text) {
  if (text == "1" || text == "true" || text == "yes" || text == "on") return true;
  if (text == "0" || text == "false" || text == "no" || text == "off" || text.empty()) return false;
  return invalid_argument(fmt::format("{}={}: expected 1/0, true/false, yes/no or on/off", name, text));
}

#define RS_ENV_NUMBER(var, field, parse)                  \
  if (auto v = env(var)) {                                \
    RS_ASSIGN_OR_RETURN(auto parsed, parse(var, *v));     \
    field = parsed;                                       \
  }

// Rank, world size and local rank from the first launcher whose variables are present.
Status apply_launcher_environment(Options& o) {
  struct Launcher {
    const char* rank;
    const char* size;
    const char* local_rank;
  };
  static constexpr Launcher kLaunchers[] = {
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
      {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
      {"RANK", "WORLD_SIZE", "LOCAL_RANK"},
  };
  for (const Launcher& l : kLaunchers) {
    auto rank = env(l.rank);
    auto size = env(l.size);
    if (!rank || !size) continue;
    RS_ASSIGN_OR_RETURN(int64_t r, parse_int(l.rank, *rank));
    RS_ASSIGN_OR_RETURN(int64_t n, parse_int(l.size, *size));
    if (n <= 0 || r < 0 || r >= n) {
      return invalid_argument(fmt::format("{}={} and {}={} do not describe a rank in a world", l.rank, r, l.size, n));
    }
    o.rank = static_cast<int>(r);
    o.world_size = static_cast<int>(n);
    if (auto local = env(l.local_rank)) {
      RS_ASSIGN_OR_RETURN(int64_t lr, parse_int(l.local_rank, *local));
      o.local_rank = static_cast<int>(lr);
    }
    return {};
  }
  return {};
}

}  // namespace

Result<std::pair<int64_t, int64_t>> parse_step_window(std::string_view text) {
  auto bad = [&] {
    return invalid_argument(fmt::format("step window '{}': expected A-B or A (steps, inclusive, A <= B)", text));
  };
  size_t dash = text.find('-');
  std::string_view a = text.substr(0, dash);
  std::string_view b = dash == std::string_view::npos ? a : text.substr(dash + 1);
  auto first = parse_int("step", a);
  auto last = parse_int("step", b);
  if (!first.ok() || !last.ok() || *first < 0 || *last < *first) return bad();
  return std::pair<int64_t, int64_t>{*first, *last};
}

Status Options::apply_environment() {
  if (auto v = env("RANKSCOPE_RUN_DIR"); v && !v->empty()) run_dir = std::string(*v);
  if (auto v = env("RANKSCOPE_RUN_ID"); v && !v->empty()) run_id = std::string(*v);
  RS_ENV_NUMBER("RANKSCOPE_WATCHDOG_TIMEOUT", watchdog_timeout_s, parse_double);
  RS_ENV_NUMBER("RANKSCOPE_WATCHDOG_POLL", watchdog_poll_s, parse_double);
  RS_ENV_NUMBER("RANKSCOPE_WATCHDOG_ABORT", watchdog_abort, parse_bool);
  RS_ENV_NUMBER("RANKSCOPE_WATCHDOG_STACKS", watchdog_stacks, parse_bool);
  RS_ENV_NUMBER("RANKSCOPE_HANG_BOUNDS", learned_bounds, parse_bool);
  RS_ENV_NUMBER("RANKSCOPE_HANG_FLOOR", hang_floor_s, parse_double);
  RS_ENV_NUMBER("RANKSCOPE_HANG_FACTOR", hang_factor, parse_double);
  RS_ENV_NUMBER("RANKSCOPE_HANG_WARMUP", hang_warmup, parse_int);
  RS_ENV_NUMBER("RANKSCOPE_HANG_EARLY", hang_early, parse_int);
  RS_ENV_NUMBER("RANKSCOPE_NVTX", nvtx, parse_bool);
  RS_ENV_NUMBER("RANKSCOPE_CUPTI", cupti, parse_bool);
  if (auto v = env("RANKSCOPE_DISABLE")) {
    RS_ASSIGN_OR_RETURN(bool disable, parse_bool("RANKSCOPE_DISABLE", *v));
    if (disable) enabled = false;
  }
  if (auto v = env("RANKSCOPE_TRACE_STEPS"); v && !v->empty()) {
    RS_ASSIGN_OR_RETURN(auto window, parse_step_window(*v));
    trace_step_begin = window.first;
    trace_step_end = window.second;
  }
  if (hang_floor_s <= 0 || hang_factor < 1 || hang_warmup < 1 || hang_early < 1) {
    return invalid_argument(fmt::format("learned hang bounds: RANKSCOPE_HANG_FLOOR={} must be > 0, RANKSCOPE_HANG_FACTOR={} "
                                        ">= 1, RANKSCOPE_HANG_WARMUP={} and RANKSCOPE_HANG_EARLY={} >= 1",
                                        hang_floor_s, hang_factor, hang_warmup, hang_early));
  }
  if (watchdog_poll_s <= 0) {
    return invalid_argument(fmt::format("RANKSCOPE_WATCHDOG_POLL={}: must be > 0", watchdog_poll_s));
  }
  // The program's own rank wins; the launcher's is read only while the defaults are untouched.
  if (rank == 0 && world_size == 1) RS_RETURN_IF_ERROR(apply_launcher_environment(*this));
  return {};
}

}  // namespace rankscope::probe
