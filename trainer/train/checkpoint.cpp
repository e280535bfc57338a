// checkpoint.cpp — model file, per-rank optimizer moments and state.json, each written atomically.
#include "checkpoint.h"

#include <cstdio>
#include <fstream>
#include <vector>

#include <fmt/format.h>

namespace gpt2 {
namespace {

struct OptimHeader {
  uint32_t magic = kOptimStateMagic;
  uint32_t version = kOptimStateVersion;
  int32_t world_rank = 0;
  int32_t tp = 1;
  int32_t world_size = 1;
  int32_t reserved = 0;
  uint64_t numel = 0;
  int64_t adam_step = 0;
};
static_assert(sizeof(OptimHeader) == 40);

Status write_file_atomically(const std::filesystem::path& path, const std::vector<std::pair<const void*, size_t>>& parts) {
  const auto tmp = std::filesystem::path(path.string() + ".tmp");
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return rankscope::io_error(fmt::format("{}: cannot create", tmp.string()));
  bool ok = true;
  for (const auto& [data, bytes] : parts) ok = ok && std::fwrite(data, 1, bytes, f) == bytes;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) return rankscope::io_error(fmt::format("{}: write failed (disk full?)", tmp.string()));
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return rankscope::io_error(fmt::format("{}: rename failed: {}", path.string(), ec.message()));
  return {};
}

std::filesystem::path optim_path(const std::filesystem::path& dir, int rank) {
  return dir / fmt::format("optim_rank{:05d}.bin", rank);
}

}  // namespace

std::filesystem::path checkpoint_dir(const std::filesystem::path& run_dir, int step) {
  return run_dir / "checkpoints" / fmt::format("step_{:08d}", step);
}

Status save_checkpoint(const std::filesystem::path& dir, GPT2& model, AdamW& optimizer, Ops& ops,
                       const TrainState& state, Communicator& world) {
  const int rank = world.rank();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return rankscope::io_error(fmt::format("{}: cannot create: {}", dir.string(), ec.message()));

  // Every TP rank takes part in the gather; rank 0 of the world writes the model file.
  RS_ASSIGN_OR_RETURN(FullWeights full, model.gather_full_weights());
  if (rank == 0) RS_RETURN_IF_ERROR(write_llmc_model(dir / "model.bin", full));

  const size_t n = model.params().total_numel();
  std::vector<float> m(n), v(n);
  ops.copy_to_host(m.data(), optimizer.m(), n * sizeof(float));
  ops.copy_to_host(v.data(), optimizer.v(), n * sizeof(float));
  OptimHeader h;
  h.world_rank = rank;
  h.tp = state.tp;
  h.world_size = state.world_size;
  h.numel = n;
  h.adam_step = optimizer.step_count();
  RS_RETURN_IF_ERROR(write_file_atomically(optim_path(dir, rank),
                                           {{&h, sizeof(h)}, {m.data(), n * sizeof(float)}, {v.data(), n * sizeof(float)}}));

  // state.json last, once every rank's files are in place: its presence marks a complete checkpoint.
  RS_RETURN_IF_ERROR(world.barrier());
  if (rank == 0) {
    nlohmann::json j = {{"step", state.step}, {"data_position", state.data_position},
                        {"world_size", state.world_size}, {"tp", state.tp}, {"extra", state.extra}};
    const std::string text = j.dump(2) + "\n";
    RS_RETURN_IF_ERROR(write_file_atomically(dir / "state.json", {{text.data(), text.size()}}));
  }
  return world.barrier();
}

rankscope::Result<std::filesystem::path> find_checkpoint(const std::filesystem::path& path) {
  if (std::filesystem::exists(path / "state.json")) return path;
  const auto root = std::filesystem::exists(path / "checkpoints") ? path / "checkpoints" : path;
  std::filesystem::path best;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("step_") || !std::filesystem::exists(entry.path() / "state.json")) continue;
    if (best.empty() || name > best.filename().string()) best = entry.path();
  }
  if (best.empty())
    return rankscope::not_found(fmt::format(
        "--resume {}: no complete checkpoint there (hint: pass a run directory written with "
        "--save-every, or one of its checkpoints/step_* folders)", path.string()));
  return best;
}

rankscope::Result<TrainState> read_train_state(const std::filesystem::path& dir) {
  std::ifstream in(dir / "state.json");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("step"))
    return rankscope::corrupt(fmt::format("{}: not a checkpoint state file", (dir / "state.json").string()));
  TrainState s;
  s.step = j.value("step", 0);
  s.data_position = j.value("data_position", uint64_t{0});
  s.world_size = j.value("world_size", 1);
  s.tp = j.value("tp", 1);
  if (j.contains("extra")) s.extra = j["extra"];
  return s;
}

Status load_checkpoint(const std::filesystem::path& dir, int world_rank, GPT2& model,
                       AdamW& optimizer, Ops& ops, const TrainState& state) {
  RS_ASSIGN_OR_RETURN(FullWeights full, read_llmc_model(dir / "model.bin"));
  RS_RETURN_IF_ERROR(model.load_full_weights(full));

  const auto path = optim_path(dir, world_rank);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return rankscope::not_found(fmt::format("{}: missing (hint: resume with the same number of ranks)", path.string()));
  OptimHeader h;
  in.read(reinterpret_cast<char*>(&h), sizeof(h));
  const size_t n = model.params().total_numel();
  if (!in || h.magic != kOptimStateMagic || h.version != kOptimStateVersion)
    return rankscope::corrupt(fmt::format("{}: not an optimizer state file", path.string()));
  if (h.numel != n || h.tp != state.tp)
    return rankscope::invalid_argument(fmt::format(
        "{}: written for tp={} with {} elements per rank, this run has {} (hint: resume with the "
        "same --tp and model)", path.string(), h.tp, h.numel, n));
  std::vector<float> m(n), v(n);
  in.read(reinterpret_cast<char*>(m.data()), static_cast<std::streamsize>(n * sizeof(float)));
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(float)));
  if (!in) return rankscope::corrupt(fmt::format("{}: truncated", path.string()));
  ops.copy_from_host(optimizer.m(), m.data(), n * sizeof(float));
  ops.copy_from_host(optimizer.v(), v.data(), n * sizeof(float));
  optimizer.set_step_count(h.adam_step);
  return {};
}

}  // namespace gpt2
