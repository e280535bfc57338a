// run_directory_layout.cpp — file names inside a run directory.
#include "rankscope/format/run_directory_layout.h"

#include <charconv>
#include <fmt/format.h>

namespace rankscope::format {

std::filesystem::path flight_recorder_path(const std::filesystem::path& run_dir, int rank) {
  return run_dir / fmt::format("rank{:05d}.flight", rank);
}

std::filesystem::path event_stream_path(const std::filesystem::path& run_dir, int rank) {
  return run_dir / fmt::format("rank{:05d}.events", rank);
}

std::filesystem::path evidence_path(const std::filesystem::path& run_dir, int rank,
                                    std::string_view kind, int64_t unix_ms) {
  return run_dir / kEvidenceDir / fmt::format("rank{:05d}-{}-{}.stacks.txt", rank, kind, unix_ms);
}

std::optional<int> rank_of_file(const std::filesystem::path& file, std::string_view extension) {
  return rank_of_file_name(file.filename().native(), extension);
}

std::optional<int> rank_of_file_name(std::string_view name, std::string_view extension) {
  if (name.size() <= 4 + extension.size() || !name.starts_with("rank") || !name.ends_with(extension)) return std::nullopt;
  const char* begin = name.data() + 4;
  const char* end = name.data() + name.size() - extension.size();
  int rank = -1;
  auto [ptr, ec] = std::from_chars(begin, end, rank);
  if (ec != std::errc() || ptr != end || rank < 0) return std::nullopt;
  return rank;
}

bool is_canonical_rank_file_name(std::string_view name, int rank, std::string_view extension) {
  char digits[16];
  const auto written = fmt::format_to_n(digits, sizeof(digits), "{:05d}", rank);
  const size_t n = written.size;
  return n <= sizeof(digits) && name.size() == 4 + n + extension.size() && name.starts_with("rank") &&
         name.substr(4, n) == std::string_view(digits, n) && name.ends_with(extension);
}

}  // namespace rankscope::format
