// fr_discovery.cpp — a job's dump files and their ranks (fr_discovery.h).
#include "fr_discovery.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

namespace rankscope::torch_fr {
namespace {

namespace fs = std::filesystem;

// "comm_lib_trace_rank_12" -> ("comm_lib_trace_rank_", 12); false without a trailing number.
bool split_rank(const std::string& name, std::string* prefix, int* rank) {
  size_t i = name.size();
  while (i > 0 && std::isdigit(static_cast<unsigned char>(name[i - 1]))) --i;
  if (i == name.size() || name.size() - i > 8) return false;
  *prefix = name.substr(0, i);
  *rank = std::stoi(name.substr(i));
  return true;
}

// One byte read with open/read, not a stream: a directory of 16,384 dumps is sniffed file by file.
bool starts_like_a_dump(const fs::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  uint8_t c = 0;
  const bool read_one = ::read(fd, &c, 1) == 1;
  ::close(fd);
  return read_one && (c == 0x80 || c == '{');
}

std::string common_stem(const std::vector<std::string>& names) {
  std::string stem = names.front();
  for (const auto& n : names) {
    size_t k = 0;
    while (k < stem.size() && k < n.size() && stem[k] == n[k]) ++k;
    stem.resize(k);
  }
  return stem;
}

}  // namespace

DiscoveredDumps discover_dumps(const fs::path& path) {
  DiscoveredDumps out;
  std::error_code ec;
  fs::path dir = path;
  std::string want_prefix;
  if (!fs::is_directory(path, ec)) {
    dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
    want_prefix = path.filename().string();
  }
  std::map<std::string, std::vector<DumpFile>> by_prefix;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file(ec)) continue;
    std::string prefix;
    int rank = 0;
    if (!split_rank(e.path().filename().string(), &prefix, &rank)) continue;
    if (!want_prefix.empty() && prefix.rfind(want_prefix, 0) != 0) continue;
    // A directory holds other files too; a prefix the user gave names dumps, readable or not.
    if (want_prefix.empty() && !starts_like_a_dump(e.path())) continue;
    by_prefix[prefix].push_back({rank, e.path()});
  }
  if (by_prefix.empty()) return out;
  // One prefix per host: a common stem of at least a few characters, and no rank twice.
  std::vector<std::string> prefixes;
  std::set<int> seen;
  bool disjoint = true;
  for (const auto& [prefix, files] : by_prefix) {
    prefixes.push_back(prefix);
    for (const auto& f : files) disjoint = disjoint && seen.insert(f.rank).second;
  }
  const std::string stem = common_stem(prefixes);
  const bool per_host = prefixes.size() > 1 && disjoint && stem.size() >= 3;
  if (prefixes.size() == 1 || per_host) {
    for (auto& [prefix, files] : by_prefix) out.files.insert(out.files.end(), files.begin(), files.end());
    out.pattern = (dir / (prefixes.size() == 1 ? prefixes.front() + "*" : stem + "*_*")).string();
  } else {
    // With an exact prefix asked for, only that prefix; else the one with the most files.
    const std::vector<DumpFile>* best = nullptr;
    std::string best_prefix;
    for (const auto& [prefix, files] : by_prefix) {
      if (!want_prefix.empty() && prefix != want_prefix) continue;
      if (!best || files.size() > best->size()) best = &files, best_prefix = prefix;
    }
    if (!best) return out;
    out.files = *best;
    out.pattern = (dir / (best_prefix + "*")).string();
  }
  std::sort(out.files.begin(), out.files.end(), [](const DumpFile& a, const DumpFile& b) { return a.rank < b.rank; });
  return out;
}

bool has_dumps(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return !discover_dumps(path).files.empty();
  // In a directory, discover_dumps keeps every prefix's files or the largest prefix's: any dump at all
  // means some are found, so the first one answers.
  for (const auto& e : fs::directory_iterator(path, ec)) {
    std::string prefix;
    int rank = 0;
    if (e.is_regular_file(ec) && split_rank(e.path().filename().string(), &prefix, &rank) &&
        starts_like_a_dump(e.path()))
      return true;
  }
  return false;
}

}  // namespace rankscope::torch_fr
