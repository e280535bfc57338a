// run_directory.cpp — finds and reads what a run left behind, recording problems per rank.
#include "rankscope/format/run_directory.h"

#include <algorithm>

#include <fmt/format.h>

#include "rankscope/format/nccl_plugin_run.h"
#include "rankscope/format/run_directory_layout.h"
#include "flight_recorder_batch.h"

namespace rankscope::format {

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
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    ++entries;
    const std::string& path = entry.path().native();
    const std::string_view name = std::string_view(path).substr(path.rfind('/') + 1);  // npos + 1: the whole
    if (auto r = rank_of_file_name(name, ".flight")) max_rank = std::max(max_rank, *r);
    if (auto r = rank_of_file_name(name, ".events")) {
      max_rank = std::max(max_rank, *r);
      // Only the name event_stream_path gives (rank00005.events, not rank5.events) is the stream.
      if (is_canonical_rank_file_name(name, *r, ".events")) event_ranks.push_back(*r);
    }
  }
  std::sort(event_ranks.begin(), event_ranks.end());
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
  if (options.read_flight_recorders)
    for (int r = 0; r < run.world_size; ++r) flight_files.push_back(flight_recorder_path(dir, r));
  std::vector<Result<FlightRecorderSnapshot>> snaps = read_flight_recorders(flight_files);
  for (int r = 0; r < run.world_size; ++r) {
    RankFiles& rf = run.ranks[size_t(r)];
    rf.rank = r;
    if (std::binary_search(event_ranks.begin(), event_ranks.end(), r)) rf.events_path = event_stream_path(dir, r);
    if (!options.read_flight_recorders) continue;
    Result<FlightRecorderSnapshot>& snap = snaps[size_t(r)];
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
