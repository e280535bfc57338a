// run_directory.cpp — finds and reads what a run left behind, recording problems per rank.
#include "rankscope/format/run_directory.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "rankscope/format/nccl_plugin_run.h"
#include "rankscope/format/rank_summary.h"
#include "rankscope/format/run_directory_layout.h"
#include "flight_recorder_batch.h"

namespace rankscope::format {
namespace {

Result<std::vector<uint8_t>> read_small_file(const std::filesystem::path& file) {
  std::FILE* f = std::fopen(file.c_str(), "rb");
  if (!f) return io_error(fmt::format("{}: cannot open", file.string()));
  std::vector<uint8_t> bytes;
  uint8_t buf[1 << 16];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) bytes.insert(bytes.end(), buf, buf + n);
  const bool failed = std::ferror(f);
  std::fclose(f);
  if (failed) return io_error(fmt::format("{}: read error", file.string()));
  return bytes;
}

}  // namespace

int RunDirectory::ranks_readable() const {
  return int(std::count_if(ranks.begin(), ranks.end(), [](const RankFiles& r) { return r.flight.has_value(); }));
}

Result<EventStreamScan> scan_rank_events(const RankFiles& rank, EventStreamVisitor& visitor) {
  if (!rank.events_path.empty()) return scan_event_stream(rank.events_path, visitor);
  if (rank.rebuilt_events)
    return scan_event_stream_bytes(*rank.rebuilt_events, fmt::format("rank {} (rebuilt from its recorders)", rank.rank),
                                   visitor);
  return not_found(fmt::format("rank {}: no event stream", rank.rank));
}

Result<RunDirectory> open_run_directory(const std::filesystem::path& dir, const OpenOptions& options) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return not_found(fmt::format("{}: no such directory", dir.string()));
  if (!std::filesystem::is_directory(dir, ec)) return invalid_argument(fmt::format("{}: not a directory", dir.string()));

  RunDirectory run;
  run.dir = dir;
  int max_rank = -1;
  size_t entries = 0;
  std::vector<int> event_ranks;  // from the listing: no stat per rank later (16K ranks)
  std::vector<int> flight_ranks;  // likewise: no open() of a recorder that is not there (131K ranks)
  bool summaries = false;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    ++entries;
    const std::string& path = entry.path().native();
    const std::string_view name = std::string_view(path).substr(path.rfind('/') + 1);  // npos + 1: the whole
    if (auto r = rank_of_file_name(name, ".flight")) {
      max_rank = std::max(max_rank, *r);
      if (is_canonical_rank_file_name(name, *r, ".flight")) flight_ranks.push_back(*r);
    }
    if (name == kRankSummaryEntry) summaries = true;
    if (auto r = rank_of_file_name(name, ".events")) {
      max_rank = std::max(max_rank, *r);
      // Only the name event_stream_path gives (rank00005.events, not rank5.events) is the stream.
      if (is_canonical_rank_file_name(name, *r, ".events")) event_ranks.push_back(*r);
    }
  }
  std::sort(event_ranks.begin(), event_ranks.end());
  std::sort(flight_ranks.begin(), flight_ranks.end());
  // A gathered run's summaries (rank_summary.h): ranks whose nodes sent what the verdict needs
  // rather than the whole recorder.
  std::vector<FlightRecorderSnapshot> summarized;
  if (summaries && options.read_flight_recorders) {
    const auto file = dir / kRankSummaryEntry;
    auto bytes = read_small_file(file);
    auto decoded = bytes.ok() ? decode_rank_summaries(*bytes, file.string())
                              : Result<std::vector<FlightRecorderSnapshot>>(bytes.status());
    if (decoded.ok()) summarized = std::move(*decoded);
    else run.problems.push_back(decoded.status().message());
    for (const auto& s : summarized) max_rank = std::max(max_rank, s.rank);
  }
  if (ec) return io_error(fmt::format("{}: cannot list: {}", dir.string(), ec.message()));
  // No probe recorders but the NCCL profiler plugin's: a job run with NCCL_PROFILER_PLUGIN.
  if (max_rank < 0 && has_nccl_plugin_files(dir)) return open_nccl_plugin_run(dir, options);

  auto meta = read_run_metadata(dir);
  if (meta.ok()) {
    run.metadata = std::move(meta).value();
  } else {
    run.metadata_status = meta.status();
    if (max_rank < 0) {
      if (entries == 0) return invalid_argument(fmt::format("{}: empty directory, not a rankscope run", dir.string()));
      if (meta.status().code() == StatusCode::kNotFound)
        return invalid_argument(fmt::format("{}: not a rankscope run directory (no run.json, no rankNNNNN.flight files)",
                                            dir.string()));
      return meta.status();  // run.json present but unreadable and nothing else: say why
    }
    run.problems.push_back(meta.status().message());
  }

  run.world_size = run.metadata ? run.metadata->world_size : max_rank + 1;
  run.ranks.resize(size_t(std::max(run.world_size, 0)));
  std::vector<std::filesystem::path> flight_files;
  std::vector<int> read_ranks;
  if (options.read_flight_recorders)
    for (int r : flight_ranks)
      if (r < run.world_size) flight_files.push_back(flight_recorder_path(dir, r)), read_ranks.push_back(r);
  std::vector<Result<FlightRecorderSnapshot>> snaps = read_flight_recorders(flight_files);
  // The summaries fill ranks without a recorder of their own; a whole recorder is the better evidence.
  std::vector<FlightRecorderSnapshot*> summary_of(size_t(std::max(run.world_size, 0)), nullptr);
  for (auto& s : summarized) {
    if (s.rank < 0 || s.rank >= run.world_size) {
      run.problems.push_back(fmt::format("a summary of rank {} but the run has world size {}", s.rank, run.world_size));
    } else if (summary_of[size_t(s.rank)]) {
      run.problems.push_back(fmt::format("rank {}: summarized twice; the first is used", s.rank));
    } else {
      summary_of[size_t(s.rank)] = &s;
    }
  }
  for (int r = 0; r < run.world_size; ++r) {
    RankFiles& rf = run.ranks[size_t(r)];
    rf.rank = r;
    if (std::binary_search(event_ranks.begin(), event_ranks.end(), r)) rf.events_path = event_stream_path(dir, r);
    if (!options.read_flight_recorders) continue;
    const auto at = std::lower_bound(read_ranks.begin(), read_ranks.end(), r);
    Result<FlightRecorderSnapshot> absent = not_found(fmt::format("{}: no such file", flight_recorder_path(dir, r).string()));
    Result<FlightRecorderSnapshot>& snap = at != read_ranks.end() && *at == r ? snaps[size_t(at - read_ranks.begin())] : absent;
    if (!snap.ok() && summary_of[size_t(r)]) {
      rf.flight = std::move(*summary_of[size_t(r)]);
      continue;
    }
    if (snap.ok()) {
      if (snap->rank != r)
        run.problems.push_back(fmt::format("rank {}: its flight recorder says rank {}", r, snap->rank));
      for (const auto& w : snap->warnings) run.problems.push_back(fmt::format("rank {}: {}", r, w));
      rf.flight = std::move(snap).value();
    } else {
      rf.flight_status = snap.status();
      run.problems.push_back(snap.status().code() == StatusCode::kNotFound
                                 ? fmt::format("rank {}: flight recorder {} is missing", r,
                                               flight_recorder_path(dir, r).filename().string())
                                 : fmt::format("rank {}: {}", r, snap.status().message()));
    }
  }
  if (max_rank >= run.world_size)
    run.problems.push_back(fmt::format("files for rank {} but the run has world size {}", max_rank, run.world_size));
  return run;
}

}  // namespace rankscope::format
