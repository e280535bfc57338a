// run_directory_layout.h — the names of the files inside a run directory.
//
// RUN_DIR/run.json                       run metadata, written once (JSON)
// RUN_DIR/rank00000.flight               per-rank flight recorder (fixed-size binary, memory-mapped)
// RUN_DIR/rank00000.events               per-rank event stream (append-only binary records)
// RUN_DIR/evidence/rank00000-<kind>-<unix_ms>.stacks.txt   native stacks (watchdog, hangdoctor)
// See docs/FORMAT.md for every byte.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace rankscope::format {

inline constexpr std::string_view kRunMetadataFile = "run.json";
inline constexpr std::string_view kEvidenceDir = "evidence";

std::filesystem::path flight_recorder_path(const std::filesystem::path& run_dir, int rank);
std::filesystem::path event_stream_path(const std::filesystem::path& run_dir, int rank);
std::filesystem::path evidence_path(const std::filesystem::path& run_dir, int rank,
                                    std::string_view kind, int64_t unix_ms);
// "rank00042.flight" -> 42; anything else -> nullopt.
std::optional<int> rank_of_file(const std::filesystem::path& file, std::string_view extension);
// The same on a bare file name, allocating nothing (a listing of 32K files).
std::optional<int> rank_of_file_name(std::string_view name, std::string_view extension);
// Whether `name` is exactly the name flight_recorder_path / event_stream_path give `rank`
// ("rank00005.events", not "rank5.events").
bool is_canonical_rank_file_name(std::string_view name, int rank, std::string_view extension);

}  // namespace rankscope::format
