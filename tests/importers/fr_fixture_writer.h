// fr_fixture_writer.h — test utility: writes PyTorch Flight Recorder dumps (pickle the way PyTorch
// writes it, or the JSON form) for the acceptance scenarios (fr_scenarios.h), from a short description
// of each rank's groups and entries. Is not: PyTorch; the key sets follow the format history in the
// research notes (2.3: no thread_*, no comm lib version; 2.6-2.7: nccl_version; 2.10: comm_lib_version).
#pragma once

#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "torch_style_pickler.h"

namespace rankscope::torch_fr::testing {

struct GroupSpec {
  std::string name, desc;
  std::vector<int> ranks;
  int pg_id = 0;  // process-local: may differ across ranks for the same group
};

struct EntrySpec {
  std::string group;        // group name
  int seq = 0;              // collective_seq_id, or p2p_seq_id for send/recv
  std::string op = "all_reduce";  // or "send 0->1" / "recv 1<-0"
  std::vector<int64_t> shape = {1024, 768};
  std::string dtype = "Float";
  std::string state = "completed";
  std::string site = "forward";
  int retired = -1;         // -1: retired when completed (the NCCL watchdog's pass); 0 or 1 as given
};

struct RankSpec {
  int rank = 0;
  std::string version = "2.10";
  std::vector<GroupSpec> groups;
  std::vector<EntrySpec> entries;
  std::string backend = "nccl";   // profiling-name prefix; "gloo" completes by `retired`
  bool timing = false;            // TORCH_NCCL_ENABLE_TIMING: start times and durations exist
  int64_t timeout_ms = 600000;
  // Gloo (PyTorch 2.11) records a group's ranks before its name and desc: pg_config {'': ...}.
  bool unnamed_pg_config = false;
  // A dump taken on demand before the watchdog's next pass: pg_status has seen no start or completion.
  bool status_lags = false;
};

inline pickle::Value build_dump(const RankSpec& spec) {
  using namespace pickle::testing;  // NOLINT
  using pickle::Value;
  const int minor = std::stoi(spec.version.substr(2));
  Value root = Value::container(pickle::Kind::kDict);
  dict_set(root, "version", str(spec.version));
  Value pgc = Value::container(pickle::Kind::kDict);
  std::map<std::string, int> pg_id;
  for (const auto& g : spec.groups) {
    std::string ranks = "[";
    for (size_t i = 0; i < g.ranks.size(); ++i) ranks += (i ? ", " : "") + std::to_string(g.ranks[i]);
    const std::string name = spec.unnamed_pg_config ? "" : g.name;
    dict_set(pgc, name, dict({{"name", str(name)}, {"desc", str(spec.unnamed_pg_config ? "" : g.desc)}, {"ranks", str(ranks + "]")}}));
    pg_id[g.name] = g.pg_id;
  }
  dict_set(root, "pg_config", pgc);
  if (minor >= 10) dict_set(root, "comm_lib_version", str("2.21.5"));
  if (minor == 6 || minor == 7) dict_set(root, "nccl_version", str("2.21.5"));
  // pg_status from the entries (collectives only): enqueued, started (with timing), completed.
  auto retired = [&](const EntrySpec& e) { return e.retired < 0 ? e.state == "completed" : e.retired == 1; };
  auto done = [&](const EntrySpec& e) { return spec.backend == "gloo" ? retired(e) : e.state == "completed"; };
  std::map<std::string, std::array<int, 3>> st;
  for (const auto& e : spec.entries) {
    if (e.op.rfind("send", 0) == 0 || e.op.rfind("recv", 0) == 0) continue;
    auto& s = st[e.group];
    s[0] = std::max(s[0], e.seq);
    if (spec.timing && e.state != "scheduled" && !spec.status_lags) s[1] = std::max(s[1], e.seq);
    if (done(e) && !spec.status_lags) s[2] = std::max(s[2], e.seq);
  }
  Value pgs = Value::container(pickle::Kind::kDict);
  for (const auto& [g, s] : st) {
    dict_set(pgs, std::to_string(pg_id[g]),
             dict({{"last_enqueued_collective", num(s[0])}, {"last_started_collective", num(s[1] ? s[1] : -1)},
                   {"last_completed_collective", num(s[2] ? s[2] : -1)}}));
  }
  dict_set(root, "pg_status", pgs);
  Value entries = Value::container(pickle::Kind::kList);
  std::map<std::string, Value> frames;  // shared frame dicts, as PyTorch shares them
  std::map<std::string, int> op_ids;
  int record_id = 0;
  const GroupSpec* desc_of = nullptr;
  for (const auto& e : spec.entries) {
    for (const auto& g : spec.groups)
      if (g.name == e.group) desc_of = &g;
    const bool p2p = e.op.rfind("send", 0) == 0 || e.op.rfind("recv", 0) == 0;
    if (!frames.count(e.site)) frames[e.site] = dict({{"name", str(e.site)}, {"filename", str("train.py")}, {"line", num(40 + int(frames.size()))}});
    Value shape = Value::container(pickle::Kind::kList);
    for (int64_t d : e.shape) list_push(shape, num(d));
    Value x = Value::container(pickle::Kind::kDict);
    dict_set(x, "frames", list({frames[e.site], frames.count("<module>") ? frames["<module>"] : (frames["<module>"] = dict({{"name", str("<module>")}, {"filename", str("train.py")}, {"line", num(7)}}))}));
    dict_set(x, "record_id", num(record_id++));
    dict_set(x, "pg_id", num(pg_id[e.group]));
    dict_set(x, "process_group", tuple({str(e.group), str(desc_of ? desc_of->desc : "")}));
    if (minor >= 10) {
      dict_set(x, "thread_name", str("main"));
      dict_set(x, "thread_id", str("139872"));
    }
    dict_set(x, "collective_seq_id", num(p2p ? 0 : e.seq));
    dict_set(x, "p2p_seq_id", num(p2p ? e.seq : 0));
    dict_set(x, "op_id", num(++op_ids[e.group]));
    dict_set(x, "profiling_name", str(spec.backend + ":" + e.op));
    const int64_t created = 1732400000000000000 + int64_t(record_id) * 1000000;
    dict_set(x, "time_created_ns", num(created));
    if (spec.timing && e.state == "completed") dict_set(x, "duration_ms", Value::floating(0.25));
    dict_set(x, "input_sizes", list({shape}));
    dict_set(x, "input_dtypes", list({str(e.dtype)}));
    dict_set(x, "output_sizes", list({shape}));
    dict_set(x, "output_dtypes", list({str(e.dtype)}));
    dict_set(x, "state", str(e.state));
    dict_set(x, "time_discovered_started_ns", spec.timing && e.state != "scheduled" ? num(created + 200) : Value());
    dict_set(x, "time_discovered_completed_ns", e.state == "completed" ? num(created + 500) : Value());
    dict_set(x, "retired", Value::boolean(retired(e)));
    dict_set(x, "timeout_ms", num(spec.timeout_ms));
    dict_set(x, "is_p2p", Value::boolean(p2p));
    list_push(entries, x);
  }
  dict_set(root, "entries", entries);
  return root;
}

inline std::vector<uint8_t> write_pickle(const RankSpec& spec) { return pickle::testing::TorchStylePickler().write(build_dump(spec)); }

inline nlohmann::json to_json(const pickle::Value& v) {
  switch (v.kind()) {
    case pickle::Kind::kNone: return nullptr;
    case pickle::Kind::kBool: return *v.as_bool();
    case pickle::Kind::kInt: return *v.as_int();
    case pickle::Kind::kFloat: return *v.as_double();
    case pickle::Kind::kString: return *v.as_string();
    case pickle::Kind::kList:
    case pickle::Kind::kTuple: {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& x : v.items()) a.push_back(to_json(x));
      return a;
    }
    case pickle::Kind::kDict: {
      nlohmann::json o = nlohmann::json::object();
      for (const auto& [k, x] : v.entries()) o[*k.as_string()] = to_json(x);
      return o;
    }
  }
  return nullptr;
}

// The JSON form (_dump_nccl_trace_json): process_group an array, no frames, times 0 when absent,
// pg_config/pg_status values as strings.
inline std::string write_json(const RankSpec& spec) {
  nlohmann::json j = to_json(build_dump(spec));
  for (auto& [id, st] : j["pg_status"].items())
    for (auto& [k, x] : st.items()) x = std::to_string(x.get<int64_t>());
  for (auto& e : j["entries"]) {
    e.erase("frames");
    for (const char* k : {"time_discovered_started_ns", "time_discovered_completed_ns"})
      if (e[k].is_null()) e[k] = 0;
  }
  return j.dump();
}

inline void write_file(const std::filesystem::path& p, const std::vector<uint8_t>& bytes) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

}  // namespace rankscope::torch_fr::testing
