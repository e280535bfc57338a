// skew_fake_run.cpp — see skew_fake_run.h. Simulates all ranks in lock step, op by op: compute
// advances a rank's time; a collective makes every member of the group wait for the last arriver.
#include "skew_fake_run.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <stdexcept>

#include <unistd.h>

#include "rankscope/format/event_stream.h"
#include "rankscope/format/rank_event_stream.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/format/run_metadata.h"

namespace rankscope::testing {
namespace {

namespace fs = std::filesystem;
using format::NameKind;

constexpr int64_t kStartNs = 1'700'000'000'000'000'000;
int64_t ms_to_ns(double ms) { return int64_t(ms * 1e6 + 0.5); }

struct Open {
  std::string name;
  int64_t begin;
};

struct RankState {
  std::unique_ptr<format::EventStreamWriter> writer;
  int64_t t = kStartNs;  // aligned clock
  int64_t offset = 0;
  std::vector<Open> stack;
  std::map<std::string, std::pair<uint32_t, int64_t>> ranges;  // name -> (count, total)
  std::vector<std::string> range_order;
  format::StepRecord rec;
  std::vector<format::TraceRange> trace;
  std::map<std::string, uint64_t> seq;
};

std::vector<int> group_of(const FakeRunSpec& s, int rank, const std::string& role, std::string& comm) {
  std::vector<int> g;
  if (role == "tp") {
    const int k = rank / s.tp;
    for (int r = k * s.tp; r < (k + 1) * s.tp; ++r) g.push_back(r);
    comm = "tp" + std::to_string(k);
  } else if (role == "dp") {
    const int k = rank % s.tp;
    for (int r = k; r < s.world_size; r += s.tp) g.push_back(r);
    comm = "dp" + std::to_string(k);
  } else {
    for (int r = 0; r < s.world_size; ++r) g.push_back(r);
    comm = "world";
  }
  return g;
}

}  // namespace

std::vector<FakeOp> standard_step(int blocks, std::function<double(int, int64_t)> mlp_extra_ms,
                                  std::function<double(int, int64_t)> attn_ms,
                                  std::function<double(int, int64_t)> mlp_ms) {
  auto fixed = [](double v) { return [v](int, int64_t) { return v; }; };
  if (!attn_ms) attn_ms = fixed(3.0);
  if (!mlp_ms) mlp_ms = fixed(4.0);
  std::vector<FakeOp> s;
  auto range = [&](const std::string& name, std::function<double(int, int64_t)> ms, bool tp_allreduce) {
    s.push_back({FakeOp::kPush, name, nullptr});
    s.push_back({FakeOp::kCompute, "", std::move(ms)});
    if (tp_allreduce) s.push_back({FakeOp::kCollective, "tp", fixed(0.2)});
    s.push_back({FakeOp::kPop, name, nullptr});
  };
  range("data", fixed(1.0), false);
  range("forward/embed", fixed(2.0), true);
  for (int b = 0; b < blocks; ++b) {
    const std::string blk = "forward/block" + std::to_string(b);
    range(blk + "/attn", attn_ms, true);
    if (b == 0 && mlp_extra_ms) {
      range(blk + "/mlp", [mlp_ms, mlp_extra_ms](int r, int64_t st) { return mlp_ms(r, st) + mlp_extra_ms(r, st); }, true);
    } else {
      range(blk + "/mlp", mlp_ms, true);
    }
  }
  range("forward/head", fixed(1.5), false);
  range("backward/head", fixed(3.0), false);
  for (int b = blocks - 1; b >= 0; --b) {
    const std::string blk = "backward/block" + std::to_string(b);
    range(blk + "/mlp", [mlp_ms](int r, int64_t st) { return 2 * mlp_ms(r, st); }, true);
    range(blk + "/attn", [attn_ms](int r, int64_t st) { return 2 * attn_ms(r, st); }, true);
  }
  range("backward/embed", fixed(1.0), false);
  s.push_back({FakeOp::kPush, "grad_sync", nullptr});
  s.push_back({FakeOp::kCollective, "dp", fixed(0.5)});
  s.push_back({FakeOp::kPop, "grad_sync", nullptr});
  range("optimizer", fixed(1.0), false);
  return s;
}

std::unique_ptr<format::EventStreamWriter> one_rank_run(const fs::path& dir, const std::string& run_id, int64_t created_ns) {
  fs::create_directories(dir);
  format::RunMetadata meta;
  meta.run_id = run_id;
  meta.created_ns = created_ns;
  meta.world_size = 1;
  if (auto st = format::write_run_metadata(dir, meta); !st.ok()) throw std::runtime_error(st.to_string());
  format::EventStreamHeader h;
  h.world_size = 1;
  auto w = format::EventStreamWriter::create(format::event_stream_path(dir, 0), h);
  if (!w.ok()) throw std::runtime_error(w.status().to_string());
  return std::move(w).value();
}

void write_fake_run(const fs::path& dir, const FakeRunSpec& spec) {
  fs::create_directories(dir);
  const int n = spec.world_size;
  format::RunMetadata meta;
  meta.run_id = "fake-" + dir.filename().string();
  meta.created_ns = kStartNs;
  meta.program = "skew_fake_run";
  meta.world_size = n;
  meta.tp = spec.tp;
  meta.dp = n / spec.tp;
  for (int k = 0; k < meta.dp; ++k) {
    format::CommGroup g{"tp" + std::to_string(k), {}};
    for (int r = k * spec.tp; r < (k + 1) * spec.tp; ++r) g.ranks.push_back(r);
    meta.groups.push_back(g);
  }
  for (int k = 0; k < spec.tp; ++k) {
    format::CommGroup g{"dp" + std::to_string(k), {}};
    for (int r = k; r < n; r += spec.tp) g.ranks.push_back(r);
    meta.groups.push_back(g);
  }
  format::CommGroup world{"world", {}};
  for (int r = 0; r < n; ++r) world.ranks.push_back(r);
  meta.groups.push_back(world);
  meta.model = spec.model;
  meta.training = spec.training;
  if (auto st = format::write_run_metadata(dir, meta); !st.ok()) throw std::runtime_error(st.to_string());

  std::vector<RankState> ranks(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    auto w = format::create_rank_event_stream(dir, r, n, kStartNs, meta.run_id);
    if (!w.ok()) throw std::runtime_error(w.status().to_string());
    ranks[size_t(r)].writer = std::move(w).value();
    ranks[size_t(r)].offset = spec.clock_offset_ns ? spec.clock_offset_ns(r) : 0;
    ranks[size_t(r)].writer->write_clock({ranks[size_t(r)].offset, 1000, kStartNs, 16, 0});
  }
  auto own = [](const RankState& rs, int64_t aligned) { return aligned - rs.offset; };

  for (int64_t step = 0; step < spec.steps; ++step) {
    const bool traced = step >= spec.trace_first && step <= spec.trace_last;
    for (auto& rs : ranks) {
      rs.t += ms_to_ns(spec.idle_ms_before_step);
      rs.rec = format::StepRecord{};
      rs.rec.step = step;
      rs.rec.begin_ns = own(rs, rs.t);
      rs.ranges.clear();
      rs.range_order.clear();
      rs.trace.clear();
    }
    for (const FakeOp& op : spec.script) {
      if (op.kind == FakeOp::kCollective) {
        std::vector<bool> done(size_t(n), false);
        for (int r = 0; r < n; ++r) {
          if (done[size_t(r)]) continue;
          std::string comm;
          const std::vector<int> g = group_of(spec, r, op.name, comm);
          for (int m : g) done[size_t(m)] = true;
          if (g.size() < 2) continue;
          int64_t last = 0;
          for (int m : g) last = std::max(last, ranks[size_t(m)].t);
          const int64_t end = last + ms_to_ns(op.ms(r, step));
          for (int m : g) {
            RankState& rs = ranks[size_t(m)];
            format::CollectiveEvent e{};
            e.comm_id = rs.writer->intern(NameKind::kComm, comm);
            e.op = uint8_t(format::CollectiveOp::kAllReduceSum);
            e.dtype = uint8_t(format::DataType::kFloat32);
            e.state = uint8_t(format::CollectiveState::kCompleted);
            e.range_id = rs.stack.empty() ? 0 : rs.writer->intern(NameKind::kRange, rs.stack.back().name);
            e.seq = rs.seq[comm]++;
            e.bytes = 4096;
            e.enqueue_ns = own(rs, rs.t);
            e.start_ns = e.enqueue_ns;
            e.end_ns = own(rs, end);
            rs.rec.collectives.push_back(e);
            rs.t = end;
          }
        }
        continue;
      }
      for (int r = 0; r < n; ++r) {
        RankState& rs = ranks[size_t(r)];
        if (op.kind == FakeOp::kCompute) {
          rs.t += ms_to_ns(op.ms(r, step));
        } else if (op.kind == FakeOp::kPush) {
          rs.writer->intern(NameKind::kRange, op.name);
          rs.stack.push_back({op.name, rs.t});
        } else {  // kPop
          const Open o = rs.stack.back();
          rs.stack.pop_back();
          auto [it, fresh] = rs.ranges.try_emplace(o.name, 0u, 0);
          if (fresh) rs.range_order.push_back(o.name);
          it->second.first += 1;
          it->second.second += rs.t - o.begin;
          if (traced) {
            rs.trace.push_back({rs.writer->intern(NameKind::kRange, o.name), 1, own(rs, o.begin), own(rs, rs.t),
                                uint32_t(rs.stack.size()), 0});
          }
        }
      }
    }
    for (int r = 0; r < n; ++r) {
      RankState& rs = ranks[size_t(r)];
      rs.rec.end_ns = own(rs, rs.t);
      for (const auto& name : rs.range_order) {
        const auto& [count, total] = rs.ranges[name];
        rs.rec.ranges.push_back({rs.writer->intern(NameKind::kRange, name), count, total,
                                 int64_t(spec.kernel_fraction * double(total))});
      }
      if (spec.counters) {
        for (const auto& [name, v] : spec.counters(r, step)) {
          rs.rec.counters.push_back({rs.writer->intern(NameKind::kCounter, name), 0, v});
        }
      }
      rs.writer->write_step(rs.rec);
      if (traced) rs.writer->write_trace_ranges(step, rs.trace);
      (void)rs.writer->flush();
    }
  }
  for (auto& rs : ranks) {
    rs.writer->write_end(own(rs, rs.t));
    (void)rs.writer->flush();
    rs.writer.reset();
  }
}

fs::path fresh_temp_dir(const std::string& prefix) {
  static std::atomic<int> counter{0};
  fs::path p = fs::temp_directory_path() /
               (prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// The first python3 that has jsonschema: Debian's python3-jsonschema lives under the system
// interpreter, which a pyenv or venv python3 earlier on PATH does not see.
static std::optional<std::string> python_with_jsonschema() {
  for (const char* py : {"/usr/bin/python3", "python3"})
    if (std::system((std::string(py) + " -c 'import jsonschema' > /dev/null 2>&1").c_str()) == 0) return std::string(py);
  return std::nullopt;
}

std::optional<std::string> schema_violation(const nlohmann::json& doc, const std::string& schema_file) {
  const auto python = python_with_jsonschema();
  if (!python) return std::nullopt;
  const fs::path dir = fresh_temp_dir("schema-check");
  std::ofstream(dir / "doc.json") << doc.dump();
  const fs::path schema = fs::path(RANKSCOPE_SOURCE_DIR) / "reports" / "schemas" / schema_file;
  const std::string cmd = *python + " -c 'import json,sys,jsonschema; jsonschema.validate(json.load(open(sys.argv[1])), "
                          "json.load(open(sys.argv[2])))' " + (dir / "doc.json").string() + " " + schema.string() +
                          " > " + (dir / "out.txt").string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(dir / "out.txt");
  std::string message((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fs::remove_all(dir);
  return rc == 0 ? std::string() : (message.empty() ? "validator failed" : message);
}

}  // namespace rankscope::testing
