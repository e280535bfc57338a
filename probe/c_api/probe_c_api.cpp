// probe_c_api.cpp — librankscope-probe.so: the C ABI of rankscope_probe_c.h over probe.h.
//
// Is: argument checks, the Status -> (-1, message) mapping, and the bookkeeping a C caller cannot
// hold (collective handles behind integer tokens). Every call is wrapped so that no C++ exception
// crosses the ABI (a ctypes caller would abort). Is not: any recording logic; that is the probe's.
#include "rankscope_probe_c.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "rankscope/format/clock.h"
#include "rankscope/format/run_metadata.h"
#include "rankscope/format/vocabulary.h"
#include "rankscope/probe/probe.h"

struct rankscope_probe {
  std::unique_ptr<rankscope::probe::Probe> probe;
  std::mutex mu;  // guards the token table (collectives may be timed from several threads)
  std::unordered_map<int64_t, rankscope::probe::CollectiveHandle> open;
  int64_t next_token = 0;
  int comms = 0;
};

namespace {

int fail(char* err, size_t n, const std::string& why) {
  if (err && n > 0) std::snprintf(err, n, "%s", why.c_str());
  return -1;
}

// Runs `f`, turning an escaping exception into a failure (the ABI is C: nothing may unwind).
template <typename F>
int guarded(char* err, size_t n, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return fail(err, n, std::string("rankscope probe: ") + e.what());
  } catch (...) {
    return fail(err, n, "rankscope probe: unexpected failure");
  }
}

template <typename F>
void quietly(F&& f) {
  try {
    f();
  } catch (...) {
  }
}

}  // namespace

extern "C" {

int rankscope_probe_abi_version(void) { return RANKSCOPE_PROBE_C_ABI_VERSION; }

rankscope_probe* rankscope_probe_open(const char* run_dir, int rank, int world_size, char* err, size_t err_size) {
  rankscope_probe* out = nullptr;
  guarded(err, err_size, [&] {
    rankscope::probe::Options o;
    if (run_dir && *run_dir) o.run_dir = run_dir;
    if (rank >= 0) {
      if (world_size <= 0 || rank >= world_size)
        return fail(err, err_size, fmt::format("rank {} is not inside a world of {}", rank, world_size));
      o.rank = rank;
      o.world_size = world_size;
    }
    auto made = rankscope::probe::Probe::create(o);
    if (!made.ok()) return fail(err, err_size, made.status().user_text());
    auto p = std::make_unique<rankscope_probe>();
    p->probe = std::move(*made);
    out = p.release();
    return 0;
  });
  return out;
}

void rankscope_probe_close(rankscope_probe* p) {
  if (!p) return;
  quietly([&] { p->probe->shutdown(); });
  delete p;
}

void rankscope_probe_mark_aborted(rankscope_probe* p) {
  if (p) quietly([&] { p->probe->mark_aborted(); });
}

int rankscope_probe_rank(const rankscope_probe* p) { return p ? p->probe->rank() : -1; }
int rankscope_probe_world_size(const rankscope_probe* p) { return p ? p->probe->world_size() : 0; }

int rankscope_probe_write_run_json(rankscope_probe* p, const char* json_object, char* err, size_t err_size) {
  if (!p) return fail(err, err_size, "no probe");
  return guarded(err, err_size, [&] {
    auto j = nlohmann::json::parse(json_object ? json_object : "", nullptr, false);
    if (!j.is_object()) return fail(err, err_size, "run.json: not a JSON object");
    if (!j.contains("schema_version")) j["schema_version"] = rankscope::format::kRunSchemaVersion;
    if (!j.contains("world_size")) j["world_size"] = p->probe->world_size();
    if (!j.contains("run_id")) j["run_id"] = p->probe->run_id();
    auto meta = rankscope::format::run_metadata_from_json(j, "run.json");
    if (!meta.ok()) return fail(err, err_size, meta.status().user_text());
    if (meta->world_size != p->probe->world_size())
      return fail(err, err_size, fmt::format("run.json: world_size {} but the probe's world is {}", meta->world_size,
                                             p->probe->world_size()));
    if (meta->created_ns == 0) meta->created_ns = rankscope::now_unix_ns();
    const auto s = p->probe->write_run_metadata(*meta);
    return s.ok() ? 0 : fail(err, err_size, s.user_text());
  });
}

void rankscope_probe_begin_step(rankscope_probe* p, int64_t step) {
  if (p) quietly([&] { p->probe->begin_step(step); });
}
void rankscope_probe_end_step(rankscope_probe* p) {
  if (p) quietly([&] { p->probe->end_step(); });
}
void rankscope_probe_push_range(rankscope_probe* p, const char* name) {
  if (p) quietly([&] { p->probe->push_range(name ? name : "?"); });
}
void rankscope_probe_pop_range(rankscope_probe* p) {
  if (p) quietly([&] { p->probe->pop_range(); });
}

int rankscope_probe_register_comm(rankscope_probe* p, const char* name, int size, int rank_in_comm, char* err,
                                  size_t err_size) {
  if (!p) return fail(err, err_size, "no probe");
  if (!name || !*name) return fail(err, err_size, "a communicator needs a name");
  if (size <= 0 || rank_in_comm < 0 || rank_in_comm >= size)
    return fail(err, err_size, fmt::format("communicator {}: rank {} is not inside a size of {}", name, rank_in_comm, size));
  return guarded(err, err_size, [&] {
    const auto h = p->probe->register_comm(name, size, rank_in_comm);
    if (!h.valid() && p->probe->enabled()) return fail(err, err_size, fmt::format("communicator {}: no room for another", name));
    return h.index;
  });
}

int64_t rankscope_probe_collective_begin(rankscope_probe* p, int comm, const char* op, const char* dtype, uint64_t count,
                                         uint64_t bytes, char* err, size_t err_size) {
  if (!p) return fail(err, err_size, "no probe");
  const auto parsed_op = rankscope::format::parse_op(op ? op : "");
  if (!parsed_op) return fail(err, err_size, fmt::format("unknown collective op '{}'", op ? op : ""));
  rankscope::format::CollectiveDesc desc;
  desc.op = *parsed_op;
  if (dtype && *dtype) {
    const auto parsed = rankscope::format::parse_dtype(dtype);
    if (!parsed) return fail(err, err_size, fmt::format("unknown dtype '{}'", dtype));
    desc.dtype = *parsed;
  }
  desc.count = count;
  desc.bytes = bytes;
  int64_t token = -1;
  const int rc = guarded(err, err_size, [&] {
    if (comm < 0) return fail(err, err_size, fmt::format("communicator {} was never registered", comm));
    const auto h = p->probe->collective_enqueue(rankscope::probe::CommHandle{comm}, desc);
    if (!h.valid()) {
      if (!p->probe->enabled()) return 0;  // a disabled probe: a token that ends nothing
      return fail(err, err_size, fmt::format("communicator {} was never registered", comm));
    }
    p->probe->collective_start(h);  // a host-timed collective: running from the call on
    std::lock_guard<std::mutex> lock(p->mu);
    token = p->next_token++;
    p->open.emplace(token, h);
    return 0;
  });
  return rc < 0 ? -1 : (token < 0 ? 0 : token);
}

void rankscope_probe_collective_end(rankscope_probe* p, int64_t token, int failed) {
  if (!p) return;
  quietly([&] {
    rankscope::probe::CollectiveHandle h;
    {
      std::lock_guard<std::mutex> lock(p->mu);
      const auto it = p->open.find(token);
      if (it == p->open.end()) return;
      h = it->second;
      p->open.erase(it);
    }
    p->probe->collective_complete(h, failed != 0);
  });
}

void rankscope_probe_counter(rankscope_probe* p, const char* name, double value) {
  if (p && name) quietly([&] { p->probe->counter(name, value); });
}
void rankscope_probe_counter_add(rankscope_probe* p, const char* name, double delta) {
  if (p && name) quietly([&] { p->probe->counter_add(name, delta); });
}

}  // extern "C"
