// kernels_fake_run.cpp — see kernels_fake_run.h.
#include "kernels_fake_run.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <stdexcept>

#include "rankscope/format/event_stream.h"
#include "rankscope/format/rank_event_stream.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/format/run_metadata.h"

namespace rankscope::testing {
namespace {

constexpr int64_t kStartNs = 1'700'000'000'000'000'000;

}  // namespace

std::filesystem::path kernels_test_dir(const std::string& tag) {
  static int counter = 0;
  const auto p = std::filesystem::temp_directory_path() /
                 ("rs-kernels-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(p);
  return p;
}

void write_kernels_run(const std::filesystem::path& dir, const std::vector<FakeRank>& ranks) {
  std::filesystem::create_directories(dir);
  const int world = int(ranks.size());
  format::RunMetadata meta;
  meta.run_id = "kernels-fake";
  meta.created_ns = kStartNs;
  meta.program = "kernels_fake_run";
  meta.world_size = world;
  meta.tp = 1;
  meta.dp = world;
  std::vector<int> all(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) all[size_t(r)] = r;
  meta.groups = {{"world", all}};
  if (auto st = format::write_run_metadata(dir, meta); !st.ok()) throw std::runtime_error(st.to_string());

  for (int rank = 0; rank < world; ++rank) {
    auto created = format::create_rank_event_stream(dir, rank, world, kStartNs, meta.run_id);
    if (!created.ok()) throw std::runtime_error(created.status().to_string());
    format::EventStreamWriter& w = **created;
    const int64_t offset = int64_t(rank) * 3'000'000'000;  // each rank's clock is 3 s behind the one before
    w.write_clock({offset, 1000, kStartNs - offset, 8, 0});
    auto at = [&](double us) { return kStartNs - offset + int64_t(us * 1000 + (us >= 0 ? 0.5 : -0.5)); };
    std::map<int64_t, std::vector<const FakeOp*>> by_step;
    for (const FakeOp& o : ranks[size_t(rank)].ops) by_step[o.step].push_back(&o);
    for (const auto& [step, ops] : by_step) {
      format::StepRecord s;
      s.step = step;
      s.begin_ns = at(double(step - 1) * kFakeStepUs);
      s.end_ns = at(double(step) * kFakeStepUs);
      w.write_step(s);
      std::vector<format::TraceKernel> kernels;
      std::vector<format::TraceLaunch> launches;
      for (const FakeOp* o : ops) {
        const uint32_t name = w.intern(format::NameKind::kKernel, o->name);
        kernels.push_back({name, 0, o->stream, o->device, at(o->begin_us), at(o->end_us)});
        if (o->launch_begin_us) {
          const uint32_t api = w.intern(format::NameKind::kApi, o->api);
          launches.push_back({api, name, 100, o->stream, o->device, uint32_t(launches.size() + 1),
                              at(*o->launch_begin_us), at(o->launch_end_us), at(o->begin_us), at(o->end_us)});
        }
      }
      w.write_trace_kernels(step, kernels);
      if (!launches.empty()) w.write_trace_launches(step, launches);
    }
    w.write_end(at(double(by_step.empty() ? 1 : by_step.rbegin()->first) * kFakeStepUs));
    if (auto st = w.flush(); !st.ok()) throw std::runtime_error(st.to_string());
  }
}

Result<analyzers::KernelsReport> analyze_fake_run(const std::string& tag, const std::vector<FakeRank>& ranks,
                                                  const analyzers::KernelsOptions& options) {
  const std::filesystem::path dir = kernels_test_dir(tag);
  write_kernels_run(dir, ranks);
  auto report = analyzers::analyze_kernels(dir, options);
  std::filesystem::remove_all(dir);
  return report;
}

}  // namespace rankscope::testing
