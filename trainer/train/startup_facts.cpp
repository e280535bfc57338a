// startup_facts.cpp — process start time from /proc and the behaviour-changing settings.
#include "startup_facts.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

namespace gpt2 {

int64_t process_start_unix_ns(const std::filesystem::path& proc_root) {
  // /proc/self/stat field 22 is starttime in clock ticks after boot; the command name (field 2)
  // may hold spaces and parentheses, so fields are counted after its last ')'.
  std::ifstream stat(proc_root / "self" / "stat");
  std::string line;
  if (!std::getline(stat, line)) return 0;
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  unsigned long long start_ticks = 0;
  for (int i = 3; i <= 22 && rest >> field; ++i)
    if (i == 22) start_ticks = std::stoull(field);
  if (start_ticks == 0) return 0;
  std::ifstream proc_stat(proc_root / "stat");
  long long boot_s = 0;
  while (std::getline(proc_stat, line))
    if (line.rfind("btime ", 0) == 0) boot_s = std::stoll(line.substr(6));
  const long ticks_per_s = sysconf(_SC_CLK_TCK);
  if (boot_s <= 0 || ticks_per_s <= 0) return 0;
  return boot_s * 1'000'000'000LL + static_cast<int64_t>(start_ticks) * (1'000'000'000LL / ticks_per_s);
}

nlohmann::json behaviour_settings(char** environ_ptr, int openmp_threads) {
  static constexpr std::string_view kExact[] = {"CUDA_LAUNCH_BLOCKING", "OMP_NUM_THREADS", "OMP_WAIT_POLICY",
                                                "OMP_PROC_BIND", "CUDA_VISIBLE_DEVICES", "OPENBLAS_NUM_THREADS"};
  static constexpr std::string_view kPrefixes[] = {"NCCL_", "TORCH_NCCL_", "RANKSCOPE_"};
  nlohmann::json out = nlohmann::json::object();
  for (char** e = environ_ptr; e != nullptr && *e != nullptr; ++e) {
    std::string_view kv(*e);
    const size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = kv.substr(0, eq);
    bool keep = false;
    for (auto k : kExact) keep |= key == k;
    for (auto p : kPrefixes) keep |= key.substr(0, p.size()) == p;
    if (keep) out[std::string(key)] = std::string(kv.substr(eq + 1));
  }
  out["threads.openmp"] = openmp_threads;
  out["threads.cores_online"] = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  return out;
}

rankscope::Result<std::vector<std::string>> gather_strings(Communicator& comm, const std::string& mine) {
  constexpr size_t kMaxBytes = 64 * 1024;
  if (mine.size() >= kMaxBytes)
    return rankscope::invalid_argument("gather_strings: " + std::to_string(mine.size()) + " bytes, at most " +
                                       std::to_string(kMaxBytes - 1));
  // Lengths first, so the payload exchange moves only what the longest member needs.
  int64_t length = static_cast<int64_t>(mine.size());
  RS_RETURN_IF_ERROR(comm.all_reduce(&length, 1, DataType::kInt64, ReduceOp::kMax));
  const size_t block = static_cast<size_t>(length) + 1;
  std::vector<char> send(block, '\0'), all(block * static_cast<size_t>(comm.size()));
  std::copy(mine.begin(), mine.end(), send.begin());
  RS_RETURN_IF_ERROR(comm.all_gather(send.data(), all.data(), block, DataType::kUInt8));
  std::vector<std::string> out;
  for (int r = 0; r < comm.size(); ++r) out.emplace_back(all.data() + static_cast<size_t>(r) * block);
  return out;
}

}  // namespace gpt2
