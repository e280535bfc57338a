// seq_len_sweep.cpp — see seq_len_sweep.h.
#include "seq_len_sweep.h"

#include <charconv>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace gpt2 {
namespace {

namespace fs = std::filesystem;

std::string point_dir_name(int seq_len) { return fmt::format("seq_len_{:05d}", seq_len); }

// SWEEP_DIR/sweep.json, through a temporary file and a rename: readers never see half of it.
rankscope::Status write_index(const fs::path& sweep_dir, const std::vector<int>& done) {
  nlohmann::json j = {{"schema_version", 1}, {"kind", "rankscope.seq_len_sweep"}, {"parameter", "seq_len"},
                      {"points", nlohmann::json::array()}};
  for (int T : done) j["points"].push_back({{"seq_len", T}, {"run_dir", point_dir_name(T)}});
  const fs::path tmp = sweep_dir / "sweep.json.tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(2) << "\n";
    if (!out) return rankscope::io_error(fmt::format("{}: cannot write", tmp.string()));
  }
  std::error_code ec;
  fs::rename(tmp, sweep_dir / "sweep.json", ec);
  if (ec) return rankscope::io_error(fmt::format("{}: cannot rename into place: {}", tmp.string(), ec.message()));
  return {};
}

}  // namespace

rankscope::Result<std::vector<int>> parse_seq_len_list(std::string_view text) {
  std::vector<int> out;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = text.substr(begin, end - begin);
    int v = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || p != item.data() + item.size() || v <= 0) {
      return rankscope::invalid_argument(
          fmt::format("'{}' in '{}' is not a positive integer (expected e.g. 64,128,256)", item, text));
    }
    if (!out.empty() && v <= out.back()) {
      return rankscope::invalid_argument(
          fmt::format("lengths must increase, e.g. 64,128,256 (got {} after {} in '{}')", v, out.back(), text));
    }
    out.push_back(v);
    begin = end + 1;
  }
  return out;
}

int run_seq_len_sweep(const TrainOptions& options, Bootstrap& boot,
                      const std::function<int(TrainOptions, Bootstrap&)>& train_once) {
  auto agreed = boot.agree_run_dir(options.run_dir);
  if (!agreed.ok()) {
    fmt::print(stderr, "gpt2-train: {}\n", agreed.status().to_string());
    return 1;
  }
  const fs::path sweep_dir = *agreed;
  std::error_code ec;
  fs::create_directories(sweep_dir, ec);
  std::vector<int> done;
  for (int T : options.sweep_seq_lens) {
    TrainOptions point = options;
    point.sweep_seq_lens.clear();
    point.seq_len = T;
    point.run_dir = (sweep_dir / point_dir_name(T)).string();
    if (boot.rank() == 0 && !options.quiet) fmt::print("sweep: T={} into {}\n", T, point.run_dir);
    boot.renew_world();
    const int code = train_once(std::move(point), boot);
    if (code != 0) return code;
    done.push_back(T);
    if (boot.rank() == 0) {
      if (auto s = write_index(sweep_dir, done); !s.ok()) {
        fmt::print(stderr, "gpt2-train: {}\n", s.to_string());
        return 1;
      }
    }
  }
  if (boot.rank() == 0) {
    fmt::print("sweep: {} points in {}; rankscope scaling {} reports them\n", done.size(), sweep_dir.string(),
               sweep_dir.string());
  }
  return 0;
}

}  // namespace gpt2
