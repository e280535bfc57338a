// import_job.cpp — see import_job.h.
#include "rankscope/trace_core/import_job.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>
#include <deque>
#include <numeric>
#include <thread>

#include <fmt/format.h>

#include "rankscope/format/run_directory_layout.h"
#include "rankscope/format/run_metadata.h"

namespace rankscope::trace_core {
namespace {

namespace fs = std::filesystem;
using format::CollectiveOp;

bool aligns(CollectiveOp op) {
  return op == CollectiveOp::kAllReduceSum || op == CollectiveOp::kAllReduceMax || op == CollectiveOp::kAllReduce ||
         op == CollectiveOp::kAllGather;
}

uint32_t fnv1a(std::string_view s, uint32_t h = 2166136261u) {
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}

}  // namespace

void parallel_for(size_t n, int threads, const std::function<void(size_t)>& fn) {
  const size_t workers = std::max<size_t>(1, std::min<size_t>(n, threads > 0 ? size_t(threads) : std::max(1u, std::thread::hardware_concurrency())));
  std::atomic<size_t> next{0};
  auto run = [&] {
    for (size_t i = next++; i < n; i = next++) fn(i);
  };
  std::vector<std::thread> pool;
  for (size_t w = 1; w < workers; ++w) pool.emplace_back(run);
  run();
  for (auto& t : pool) t.join();
}

std::optional<int> rank_from_file_name(const fs::path& file, const std::vector<const char*>& extensions, std::string* stem_out,
                                       std::string* rule_out) {
  std::string stem = file.filename().string();
  for (const char* ext : extensions) {
    if (stem.size() > std::strlen(ext) && stem.compare(stem.size() - std::strlen(ext), std::string::npos, ext) == 0) {
      stem.resize(stem.size() - std::strlen(ext));
    }
  }
  *stem_out = stem;
  auto number_at = [&](size_t b) -> std::optional<int> {
    size_t e = b;
    while (e < stem.size() && std::isdigit(static_cast<unsigned char>(stem[e]))) ++e;
    if (e == b || e - b > 7) return std::nullopt;
    return std::stoi(stem.substr(b, e - b));
  };
  // A number right after "rank" or "worker" ("rank-1.Apr_03_18_51_38.1102", HTA's naming;
  // "trace_rank_5_step_100"; "worker0.1712345678901"): other numbers there are pids, steps, times.
  std::string lower = stem;
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  for (const char* word : {"rank", "worker"}) {
    for (size_t at = lower.find(word); at != std::string::npos; at = lower.find(word, at + 1)) {
      size_t b = at + std::strlen(word);
      while (b < stem.size() && (stem[b] == '-' || stem[b] == '_' || stem[b] == '.' || stem[b] == '=')) ++b;
      if (auto n = number_at(b)) {
        if (rule_out) *rule_out = fmt::format("the number after '{}' in the file name '{}'", stem.substr(at, std::strlen(word)), stem);
        return n;
      }
    }
  }
  size_t e = stem.size();
  while (e > 0 && !std::isdigit(static_cast<unsigned char>(stem[e - 1]))) --e;
  size_t b = e;
  while (b > 0 && std::isdigit(static_cast<unsigned char>(stem[b - 1]))) --b;
  if (b == e || e - b > 7) return std::nullopt;
  if (rule_out) *rule_out = fmt::format("the last number in the file name '{}'", stem);
  return std::stoi(stem.substr(b, e - b));
}

int64_t median_of(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  const size_t m = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + long(m), v.end());
  const int64_t hi = v[m];
  if (v.size() % 2 == 1) return hi;
  const int64_t lo = *std::max_element(v.begin(), v.begin() + long(m));
  return std::midpoint(lo, hi);  // hi - lo may not fit in int64
}

void align_clocks(std::vector<ClockSubject>& subjects, const std::vector<std::string>& comm_names, const std::string& what,
                  const std::string& reference_text) {
  std::deque<size_t> queue;
  for (size_t i = 0; i < subjects.size(); ++i) {
    if (subjects[i].placed) queue.push_back(i);
  }
  if (queue.empty() && !subjects.empty()) {
    subjects[0].placed = true;
    subjects[0].alignment = reference_text;
    queue.push_back(0);
  }
  auto comm_name = [&](size_t k) { return k < comm_names.size() ? comm_names[k] : fmt::format("nccl{}", k); };
  while (!queue.empty()) {
    const size_t u = queue.front();
    queue.pop_front();
    const ClockSubject& cu = subjects[u];
    const size_t comms = cu.streams ? cu.streams->size() : 0;
    for (size_t k = 0; k < comms; ++k) {
      const auto& ku = (*cu.streams)[k];
      for (size_t v = 0; v < subjects.size(); ++v) {
        ClockSubject& cv = subjects[v];
        if (cv.placed || !cv.streams || cv.streams->size() <= k) continue;
        const auto& kv = (*cv.streams)[k];
        std::vector<int64_t> d;
        for (size_t s = 0; s < std::min(ku.size(), kv.size()); ++s) {
          if (!aligns(ku[s].op) || ku[s].op != kv[s].op) continue;
          const int64_t on_reference = add_saturating(add_saturating(ku[s].end, cu.to_own_ns), int64_saturating(cu.offset_ns));
          d.push_back(sub_saturating(on_reference, add_saturating(kv[s].end, cv.to_own_ns)));
        }
        if (d.empty()) continue;
        const int64_t med = median_of(d);
        std::vector<int64_t> dev;
        for (int64_t x : d) dev.push_back(distance_saturating(x, med));
        cv.offset_ns = double(med);
        cv.residual_ns = double(median_of(dev));
        cv.matched = int64_t(d.size());
        cv.alignment = fmt::format("end times of {} {} matched with rank {} on {}", d.size(), what, cu.rank, comm_name(k));
        cv.placed = true;
        queue.push_back(v);
      }
    }
  }
  for (ClockSubject& c : subjects) {
    if (!c.placed) {
      c.alignment = fmt::format("own clock only: no {} shared with an aligned rank", what);
      c.residual_ns = -1;
    }
  }
}

namespace {

// A span of time in the unit a person reads it in: "40 s", "25 min", "8.5 days".
std::string human_span(int64_t ns) {
  const double s = double(ns) / 1e9;
  if (s < 120) return fmt::format("{:.0f} s", s);
  if (s < 2 * 3600) return fmt::format("{:.0f} min", s / 60);
  if (s < 2 * 86400) return fmt::format("{:.1f} h", s / 3600);
  return fmt::format("{:.1f} days", s / 86400);
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
  return out;
}

// "rank3.json (rank 3 of 8, NVIDIA A100)": a file as the job check names it.
std::string described(const JobSignature& s) {
  std::string out = fmt::format("{} (rank {}", s.file, s.rank);
  if (s.world_size) out += fmt::format(" of {}", *s.world_size);
  if (!s.devices.empty()) out += ", " + joined(s.devices);
  return out + ")";
}

}  // namespace

std::vector<std::string> job_differences(const JobSignature& a, const JobSignature& b) {
  std::vector<std::string> out;
  if (a.world_size && b.world_size && *a.world_size != *b.world_size) {
    out.push_back(fmt::format("world size {} vs {}", *a.world_size, *b.world_size));
  }
  if (a.group_count && b.group_count && *a.group_count != *b.group_count) {
    out.push_back(fmt::format("{} vs {} process groups", *a.group_count, *b.group_count));
  }
  int group_diffs = 0;
  for (const auto& [name, what] : a.groups) {
    auto it = b.groups.find(name);
    if (it == b.groups.end() || it->second == what) continue;
    if (group_diffs++ < 2) out.push_back(fmt::format("process group '{}' is {} vs {}", name, what, it->second));
  }
  if (group_diffs > 2) out.push_back(fmt::format("{} more process groups differ", group_diffs - 2));
  if (!a.devices.empty() && !b.devices.empty() && a.devices != b.devices) {
    out.push_back(fmt::format("devices {} vs {}", joined(a.devices), joined(b.devices)));
  }
  if (a.epoch_window_ns && b.epoch_window_ns) {
    const auto [a0, a1] = *a.epoch_window_ns;
    const auto [b0, b1] = *b.epoch_window_ns;
    const int64_t gap = std::max(sub_saturating(b0, a1), sub_saturating(a0, b1));  // > 0: they do not overlap
    if (gap > kFarApartNs) {
      out.push_back(fmt::format("recorded {} apart (one job's traces overlap in time up to its hosts' clock error; more "
                                "than {} means another run)", human_span(gap), human_span(kFarApartNs)));
    }
  }
  return out;
}

Status check_one_job(const std::vector<JobSignature>& files, bool allow_mixed, std::vector<std::string>& warnings) {
  if (files.size() < 2) return {};
  const JobSignature& first = files.front();
  std::string text;
  size_t differing = 0;
  for (size_t i = 1; i < files.size(); ++i) {
    const auto diff = job_differences(first, files[i]);
    if (diff.empty()) continue;
    if (++differing <= 3) text += fmt::format("{}{} and {} differ: {}", text.empty() ? "" : "; ", described(first), described(files[i]), joined(diff));
  }
  if (differing == 0) return {};
  if (differing > 3) text += fmt::format("; {} more files differ from {}", differing - 3, first.file);
  if (allow_mixed) {
    warnings.push_back(fmt::format("files of different jobs imported as one (--allow-mixed): {}; the reports compare ranks "
                                   "of different jobs", text));
    return {};
  }
  return invalid_argument(fmt::format("these are not the files of one job: {}. Import each job into its own run directory, or "
                                      "pass --allow-mixed to import them as one anyway", text));
}

Status prepare_run_directory(const fs::path& run_dir, const std::vector<fs::path>& inputs, const std::string& program) {
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  if (ec) return io_error(fmt::format("{}: cannot create the run directory: {}", run_dir.string(), ec.message()));
  for (const auto& f : inputs) {
    if (fs::equivalent(f, run_dir, ec)) return invalid_argument(fmt::format("the run directory is one of the inputs ({})", f.string()));
  }
  if (fs::exists(run_dir / format::kRunMetadataFile)) {
    auto old = format::read_run_metadata(run_dir);
    if (!old.ok() || old->program != program) {
      return invalid_argument(fmt::format("{} holds a run written by {}; import into another directory", run_dir.string(),
                                          old.ok() ? "'" + old->program + "'" : "another program (its run.json does not read)"));
    }
  } else {
    for (const auto& e : fs::directory_iterator(run_dir, ec)) {
      if (format::rank_of_file(e.path(), ".events") || format::rank_of_file(e.path(), ".flight")) {
        return invalid_argument(fmt::format("{} holds rank files but no run.json; import into an empty directory", run_dir.string()));
      }
    }
  }
  for (const auto& e : fs::directory_iterator(run_dir, ec)) {
    const fs::path p = e.path();
    if (format::rank_of_file(p, ".events") || format::rank_of_file(p, ".flight") || p.filename() == format::kRunMetadataFile) {
      fs::remove(p, ec);
    }
  }
  return {};
}

void fill_job_metadata(format::RunMetadata& meta, const std::vector<std::string>& comm_names,
                       const std::vector<std::vector<int>>& comm_members, int world, const ImportOptions& options) {
  for (size_t k = 0; k < comm_names.size(); ++k) meta.groups.push_back({comm_names[k], comm_members[k]});
  format::CommGroup all{"world", {}};
  for (int r = 0; r < world; ++r) all.ranks.push_back(r);
  meta.groups.push_back(all);
  meta.hosts.assign(size_t(world), "");
  if (options.seq_len > 0) meta.training["seq_len"] = options.seq_len;
  if (options.batch > 0) meta.training["batch"] = options.batch;
}

Result<format::RunMetadata> start_import_run(const fs::path& run_dir, const std::vector<fs::path>& inputs,
                                             const std::string& program, const std::string& id_prefix,
                                             const std::vector<std::string>& command_line, int world) {
  RS_RETURN_IF_ERROR(prepare_run_directory(run_dir, inputs, program));
  format::RunMetadata meta;
  meta.run_id = run_id_of(inputs, id_prefix);
  meta.program = program;
  meta.command_line = command_line;
  meta.world_size = world;
  meta.tp = 1;
  meta.dp = world;
  RS_RETURN_IF_ERROR(format::write_run_metadata(run_dir, meta));
  return meta;
}

std::string run_id_of(const std::vector<fs::path>& inputs, const std::string& prefix) {
  uint32_t h = 2166136261u;
  for (const auto& f : inputs) h = fnv1a(fs::absolute(f).string(), h);
  return fmt::format("{}-{:08x}", prefix, h);
}

}  // namespace rankscope::trace_core
