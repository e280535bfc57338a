// fuzz_support.h — what the libFuzzer targets of tests/fuzz/ share: a private scratch directory, a
// file written from the input, and an input cut into several files.
//
// Is: helpers for readers that want a path (a file, a directory of dumps, a run directory) rather
// than bytes. The scratch directory is made once per process under $TMPDIR (else /tmp) and removed
// at exit; each input rewrites the files it needs, so one run leaves at most one input's files.
// Is not: a fuzz target (each reader has its own file) or anything the normal build links.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace rankscope::fuzz {

// The separator that cuts one input into several files (a job's dumps, a plugin run's files). The
// seeds (scripts/fuzz-seeds.sh) join real files with it, so mutations start from whole files.
inline constexpr std::string_view kFileSeparator = "\n--rankscope-fuzz-file--\n";

class ScratchDir {
 public:
  ScratchDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/rankscope-fuzz-XXXXXX";
    if (char* made = ::mkdtemp(pattern.data())) path_ = made;
  }
  ~ScratchDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

  // An empty directory `name` inside the scratch directory (emptied if an earlier input left files).
  std::filesystem::path fresh_subdir(std::string_view name) const {
    std::error_code ignored;
    std::filesystem::path dir = path_ / std::string(name);
    std::filesystem::remove_all(dir, ignored);
    std::filesystem::create_directories(dir, ignored);
    return dir;
  }

 private:
  std::filesystem::path path_;
};

// One per process: a static so that libFuzzer's exit (after -runs or on a finding) removes it.
inline const ScratchDir& scratch() {
  static ScratchDir dir;
  return dir;
}

inline void write_bytes(const std::filesystem::path& file, std::span<const uint8_t> bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// `bytes` cut at every kFileSeparator, at most `max_parts` parts (the last one keeps the rest).
inline std::vector<std::span<const uint8_t>> split_files(std::span<const uint8_t> bytes, size_t max_parts) {
  std::vector<std::span<const uint8_t>> parts;
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  size_t begin = 0;
  while (parts.size() + 1 < max_parts) {
    size_t at = text.find(kFileSeparator, begin);
    if (at == std::string_view::npos) break;
    parts.push_back(bytes.subspan(begin, at - begin));
    begin = at + kFileSeparator.size();
  }
  parts.push_back(bytes.subspan(begin));
  return parts;
}

}  // namespace rankscope::fuzz
