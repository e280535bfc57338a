// nsys_fixture.cpp — see nsys_fixture.h. First a lock-step simulation produces each rank's
// timeline on the true clock; then the writers put it into SQLite or a run directory.
#include "nsys_fixture.h"

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <variant>

#include <fmt/format.h>

#include "rankscope/format/event_stream.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/format/run_metadata.h"

namespace rankscope::nsys::testing {
namespace {

namespace fs = std::filesystem;
using format::CollectiveOp;

constexpr int64_t kT0 = 1'760'000'000'000'000'000;  // true time of rank 0's first step
constexpr uint32_t kComputeStream = 7, kAllReduceStream = 20, kAllToAllStream = 24;

int64_t ns(double ms) { return int64_t(ms * 1e6 + 0.5); }

struct SimRange {
  std::string text, name;
  int64_t start = 0, end = 0;
  int64_t gmin = INT64_MAX, gmax = INT64_MIN;
  int ops = 0;
  bool step = false, open_end = false, start_end = false, cross_thread = false, nccl = false;
  int64_t step_index = -1;  // step frames: index; others: step they start in (-1 none)
  int depth = 0;
};

struct SimLaunch {
  int64_t start = 0, end = 0;  // the cudaLaunchKernel call
  uint32_t corr = 0;
  int64_t kstart = 0, kend = 0;
  uint32_t stream = kComputeStream;
  std::string short_name, demangled;
  bool nccl = false;
  CollectiveOp op = CollectiveOp::kUnknown;
  int comm = -1;
  uint64_t seq = 0;
  int64_t step_index = -1;
  int64_t arrival = 0;
  std::string range;  // innermost open range's name
};

struct SimRuntime {
  int64_t start, end;
  uint32_t corr;
};

struct SimRank {
  int rank = 0;
  int64_t session_start = 0;  // true time of the nsys session start
  std::vector<SimRange> ranges;
  std::vector<SimLaunch> launches;
  std::vector<SimRuntime> syncs;  // runtime calls without a GPU op (cudaStreamSynchronize)
  std::vector<std::pair<int64_t, int64_t>> sync_marks;  // (true time, payload)
  std::vector<int64_t> step_begin, step_end;
  // The second process: (runtime start, runtime end, kernel start, kernel end, colliding corr id)
  std::vector<std::array<int64_t, 5>> helper;
  int64_t t = 0;
  uint32_t next_corr = 1;
  std::vector<size_t> stack;  // open ranges (indices), step frame included
  std::map<uint32_t, uint64_t> seq;
};

std::string full_name(const SimRank& r, const FixtureSpec& spec, const std::string& text) {
  if (spec.domain == "rankscope") return text;
  std::string path;
  for (size_t i : r.stack) {
    if (r.ranges[i].step) continue;
    path += r.ranges[i].text + "/";
  }
  return (spec.domain.empty() ? "" : spec.domain + ":") + path + text;
}

void note_launch(SimRank& r, const SimLaunch& l) {
  for (size_t i : r.stack) {
    SimRange& x = r.ranges[i];
    x.gmin = std::min(x.gmin, l.kstart);
    x.gmax = std::max(x.gmax, l.kend);
    ++x.ops;
  }
}

std::vector<SimRank> simulate(const FixtureSpec& spec) {
  std::mt19937_64 rng(spec.seed);
  std::uniform_real_distribution<double> jitter(0.0, spec.end_jitter_us * 1e3);
  std::vector<SimRank> ranks(size_t(spec.world));
  for (int r = 0; r < spec.world; ++r) {
    SimRank& x = ranks[size_t(r)];
    x.rank = r;
    x.session_start = kT0 - ns(5) + r * ns(0.25);
    x.t = kT0 + r * ns(0.1);
    if (spec.adversarial) {  // NCCL set-up before the capture began: a negative start
      SimRange init;
      init.text = spec.domain == "rankscope" ? "init/nccl" : "init_nccl";
      init.name = (spec.domain.empty() || spec.domain == "rankscope" ? "" : spec.domain + ":") + init.text;
      init.start = x.session_start - ns(20);
      init.end = x.session_start + ns(1);
      x.ranges.push_back(init);
    }
  }
  for (int64_t s = 0; s < spec.steps; ++s) {
    for (SimRank& x : ranks) {
      SimRange st;
      st.text = spec.step_text;
      st.name = "step";
      st.step = true;
      st.step_index = s;
      st.start = x.t;
      x.stack.push_back(x.ranges.size());
      x.ranges.push_back(st);
      x.step_begin.push_back(x.t);
      if (spec.sync_marks) x.sync_marks.emplace_back(x.t, x.t);
      if (spec.adversarial && s == 1) {  // started here, ended by the loader thread
        SimRange pf;
        pf.text = "prefetch";
        pf.name = (spec.domain.empty() || spec.domain == "rankscope" ? "" : spec.domain + ":") + pf.text;
        pf.start = x.t + 10'000;
        pf.end = x.t + ns(3);
        pf.start_end = pf.cross_thread = true;
        pf.step_index = s;
        x.ranges.push_back(pf);
      }
    }
    for (const SimOp& op : spec.script) {
      if (op.kind == SimOp::kCollective) {
        const uint32_t stream = op.op == CollectiveOp::kAllToAll || op.op == CollectiveOp::kAllToAllV ? kAllToAllStream : kAllReduceStream;
        int64_t last = 0;
        for (SimRank& x : ranks) last = std::max(last, x.t + 5000);
        for (SimRank& x : ranks) {
          const double transfer = op.ms(x.rank, s + 1);
          SimLaunch l;
          l.arrival = x.t;
          l.start = x.t + 500;
          l.end = x.t + 4500;
          l.corr = x.next_corr++;
          l.kstart = x.t + 5000;
          l.kend = last + ns(transfer) + int64_t(jitter(rng));
          if (stream == kAllToAllStream && x.rank == 1) l.kend = std::max(l.kstart + 1000, l.kend - ns(transfer) / 2);
          l.stream = stream;
          l.nccl = true;
          l.op = op.op;
          l.short_name = stream == kAllToAllStream ? "ncclDevKernel_SendRecv" : "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
          l.demangled = l.short_name + "(ncclDevKernelArgsStorage<4096ul>)";
          l.comm = stream == kAllReduceStream ? 0 : 1;
          l.seq = x.seq[stream]++;
          l.step_index = s;
          l.range = x.ranges[x.stack.back()].name;
          note_launch(x, l);
          x.launches.push_back(l);
          if (spec.nccl_ranges) {
            SimRange nr;
            nr.text = stream == kAllToAllStream ? "ncclAllToAll" : "ncclAllReduce";
            nr.start = x.t;
            nr.end = x.t + 4800;
            nr.nccl = true;
            x.ranges.push_back(nr);
          }
          x.syncs.push_back({x.t + 4600, l.kend + 1500, x.next_corr++});
          x.t = l.kend + 2000;
        }
        continue;
      }
      for (SimRank& x : ranks) {
        if (op.kind == SimOp::kPush) {
          SimRange rr;
          rr.text = op.text;
          rr.name = full_name(x, spec, op.text);
          rr.start = x.t;
          rr.step_index = s;
          rr.depth = int(x.stack.size());
          x.stack.push_back(x.ranges.size());
          x.ranges.push_back(rr);
          x.t += 1000;
        } else if (op.kind == SimOp::kPop) {
          x.t += 1000;
          x.ranges[x.stack.back()].end = x.t;
          x.stack.pop_back();
        } else {
          SimLaunch l;
          l.start = x.t;
          l.end = x.t + 4000;
          l.corr = x.next_corr++;
          l.kstart = x.t + 5000;
          l.kend = l.kstart + ns(op.ms(x.rank, s + 1));
          l.short_name = "gemm_" + x.ranges[x.stack.back()].text;
          for (char& c : l.short_name) c = (c == '/' ? '_' : c);
          l.demangled = "void " + l.short_name + "<128, 64>(float const*, float*)";
          l.step_index = s;
          l.range = x.ranges[x.stack.back()].name;
          note_launch(x, l);
          x.launches.push_back(l);
          x.syncs.push_back({x.t + 4000, l.kend + 1500, x.next_corr++});
          x.t = l.kend + 2000;
        }
      }
    }
    for (SimRank& x : ranks) {
      x.t += 1000;
      x.ranges[x.stack.back()].end = x.t;
      x.stack.pop_back();
      x.step_end.push_back(x.t);
      x.t += 300'000;  // between steps
    }
  }
  for (SimRank& x : ranks) {
    if (spec.adversarial) {
      SimRange open;
      open.text = spec.domain == "rankscope" ? "checkpoint/save" : "checkpoint";
      open.name = open.text;
      open.start = x.t + 100'000;
      open.end = open.start;
      open.open_end = true;
      x.ranges.push_back(open);
      // A second process of the same program (a data-loader worker with CUDA) whose correlation
      // ids are the same numbers as the rank's, with long kernels while the rank works.
      for (size_t i = 0; i < x.launches.size() && x.helper.size() < 24; i += 3) {
        const SimLaunch& l = x.launches[i];
        x.helper.push_back({l.start + 100, l.start + 3000, l.start + 3500, l.start + 3500 + ns(30), int64_t(l.corr)});
      }
    }
  }
  return ranks;
}

// --- SQLite --------------------------------------------------------------------------------------

using Value = std::variant<std::monostate, int64_t, std::string>;

class Db {
 public:
  explicit Db(const fs::path& file) {
    fs::remove(file);
    if (sqlite3_open(file.c_str(), &db_) != SQLITE_OK) throw std::runtime_error("cannot create " + file.string());
    exec("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; BEGIN");
  }
  ~Db() {
    exec("COMMIT");
    sqlite3_close(db_);
  }
  void exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string m = err ? err : "?";
      sqlite3_free(err);
      throw std::runtime_error(m + " in " + sql);
    }
  }
  void insert(const std::string& table, const std::vector<std::string>& cols, const std::vector<std::vector<Value>>& rows) {
    std::string sql = "INSERT INTO " + table + " (";
    for (size_t i = 0; i < cols.size(); ++i) sql += (i ? "," : "") + std::string("\"") + cols[i] + "\"";
    sql += ") VALUES (";
    for (size_t i = 0; i < cols.size(); ++i) sql += i ? ",?" : "?";
    sql += ")";
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) throw std::runtime_error(sqlite3_errmsg(db_) + (" in " + sql));
    for (const auto& row : rows) {
      for (size_t i = 0; i < cols.size(); ++i) {
        const Value& v = row[i];
        if (std::holds_alternative<int64_t>(v)) sqlite3_bind_int64(st, int(i) + 1, std::get<int64_t>(v));
        else if (std::holds_alternative<std::string>(v)) sqlite3_bind_text(st, int(i) + 1, std::get<std::string>(v).c_str(), -1, SQLITE_TRANSIENT);
        else sqlite3_bind_null(st, int(i) + 1);
      }
      if (sqlite3_step(st) != SQLITE_DONE) throw std::runtime_error(std::string(sqlite3_errmsg(db_)) + " inserting into " + table);
      sqlite3_reset(st);
    }
    sqlite3_finalize(st);
  }

 private:
  sqlite3* db_ = nullptr;
};

struct EventIds {
  int64_t push_pop, start_end, mark, domain_create;
};

std::string letters(int n) {  // 0 -> "aa", 1 -> "ab": names without digits
  return {char('a' + (n / 26) % 26), char('a' + n % 26)};
}

std::string default_file_name(const FixtureSpec& spec, int rank) {
  if (spec.file_name) return spec.file_name(rank);
  if (spec.identity == Identity::kFileName) return fmt::format("rep_{}.sqlite", rank);
  // Sorted by name, the ranks come out in reverse order: nothing may number ranks by sorting.
  return "capture-" + letters(spec.world - 1 - rank) + ".sqlite";
}

// One export holding the processes of `xs` (one rank, or several as `nsys profile mpirun` records).
void write_export(const fs::path& file, const FixtureSpec& spec, const std::vector<const SimRank*>& xs, std::mt19937_64& rng) {
  Db db(file);
  const Flavour f = spec.flavour;
  const SimRank& first = *xs.front();
  auto pid_of = [](int r) { return int64_t(4000 + r); };
  auto main_tid_of = [&](int r) { return (pid_of(r) << 24) | pid_of(r); };
  // One rank per export: its session clock may be off. Several: one session, one clock.
  const int64_t error = xs.size() == 1 && spec.clock_error_ns ? spec.clock_error_ns(first.rank) : 0;
  int64_t session_start = first.session_start;
  for (const SimRank* x : xs) session_start = std::min(session_start, x->session_start);
  auto ts = [&](int64_t t) { return t - session_start; };

  // Schema.
  if (f == Flavour::k2026) {
    db.exec("CREATE TABLE NVTX_EVENTS (eventId INTEGER NOT NULL PRIMARY KEY, start INTEGER NOT NULL, \"end\" INTEGER, "
            "eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, "
            "endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, "
            "uint32Value INTEGER, int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData BLOB)");
    db.exec("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, \"end\" INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
            "contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, graphId INTEGER, correlationId INTEGER, "
            "globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER, "
            "cacheConfig INTEGER, registersPerThread INTEGER, gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER, "
            "blockY INTEGER, blockZ INTEGER, clusterX INTEGER, clusterY INTEGER, clusterZ INTEGER, staticSharedMemory INTEGER, "
            "dynamicSharedMemory INTEGER, gridId INTEGER, graphNodeId INTEGER, tensorSizeMinusOneElements INTEGER)");
    db.exec("CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT, "
            "systemClockNs INTEGER, sessionStartCntVctNs INTEGER)");
    db.exec("CREATE TABLE TARGET_INFO_CUDA_DEVICE (gpuId INTEGER, cudaId INTEGER, pid INTEGER, uuid TEXT, numMultiprocessors INTEGER)");
  } else {
    db.exec(std::string("CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, \"end\" INTEGER, eventType INTEGER NOT NULL, "
                        "rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, "
                        "textId INTEGER, domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, "
                        "uint32Value INTEGER, int32Value INTEGER, floatValue REAL") +
            (f == Flavour::k2024 ? ", jsonTextId INTEGER, jsonText TEXT)" : ")"));
    db.exec("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, \"end\" INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
            "contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
            "demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER, "
            "cacheConfig INTEGER, registersPerThread INTEGER, gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER, "
            "blockY INTEGER, blockZ INTEGER, staticSharedMemory INTEGER, dynamicSharedMemory INTEGER, gridId INTEGER)");
    db.exec("CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT)");
  }
  db.exec("CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, \"end\" INTEGER NOT NULL, eventClass INTEGER NOT NULL, "
          "globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER)");
  db.exec("CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL)");
  db.exec("CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT)");
  db.exec("CREATE TABLE TARGET_INFO_SYSTEM_ENV (globalVid INTEGER, devStateName TEXT, name TEXT, nameEnum INTEGER, value TEXT)");
  db.exec("CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT)");
  db.exec("CREATE TABLE ThreadNames (nameId INTEGER, priority INTEGER, globalTid INTEGER)");

  // Versions and event types.
  // The rows nsys writes, in its order: the schema's checksum after the version (2024's are those of
  // a real Nsight Systems 2024.5.1 export), so a reader matching key prefixes takes the checksum.
  const char* schema = f == Flavour::k2026 ? "3.28.1" : f == Flavour::k2024 ? "3.13.2" : "3.5.0";
  const char* cksum = f == Flavour::k2026 ? "2983316210 171402" : f == Flavour::k2024 ? "1271772049 158887" : "862318410 102377";
  const char* product = f == Flavour::k2026 ? "2026.4.1.77" : f == Flavour::k2024 ? "2024.5.1.113" : "2022.4.2.50";
  db.insert("META_DATA_EXPORT", {"name", "value"}, {{std::string("EXPORT_PRODUCT_NAME"), std::string("NVIDIA Nsight Systems")},
                                                  {std::string("EXPORT_PRODUCT_VERSION"), std::string(product)},
                                                  {std::string("EXPORT_SCHEMA_VERSION"), std::string(schema)},
                                                  {std::string("EXPORT_SCHEMA_VERSION_CKSUM"), std::string(cksum)}});
  EventIds ids{59, 60, 34, 75};
  if (f == Flavour::k2026) ids = {159, 160, 134, 175};  // only the ENUM table tells these apart
  if (f != Flavour::kNoEnum) {
    db.exec("CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, label TEXT NOT NULL)");
    db.insert("ENUM_NSYS_EVENT_TYPE", {"id", "name", "label"},
              {{int64_t(33), std::string("NvtxCategory"), std::string("NVTX Category")},
               {ids.mark, std::string("NvtxMark"), std::string("NVTX Mark")},
               {int64_t(39), std::string("NvtxThread"), std::string("NVTX Thread")},
               {ids.push_pop, std::string("NvtxPushPopRange"), std::string("NVTX PushPop Range")},
               {ids.start_end, std::string("NvtxStartEndRange"), std::string("NVTX StartEnd Range")},
               {ids.domain_create, std::string("NvtxDomainCreate"), std::string("NVTX Domain Create")},
               {int64_t(76), std::string("NvtxDomainDestroy"), std::string("NVTX Domain Destroy")}});
  }
  std::vector<std::vector<Value>> session = {{session_start + error, std::string("2025-10-09T12:26:40Z"), std::string("")}};
  if (f == Flavour::k2026) {
    session[0].push_back(int64_t(123456789));
    session[0].push_back(Value());
  }
  db.insert("TARGET_INFO_SESSION_START_TIME",
            f == Flavour::k2026 ? std::vector<std::string>{"utcEpochNs", "utcTime", "localTime", "systemClockNs", "sessionStartCntVctNs"}
                                : std::vector<std::string>{"utcEpochNs", "utcTime", "localTime"},
            session);
  std::vector<std::vector<Value>> env = {{int64_t(0), std::string(""), std::string("Hostname"), int64_t(1), fmt::format("node{}", first.rank / 2)},
                                         {int64_t(0), std::string(""), std::string("CpuCores"), int64_t(2), std::string("16")}};
  if (spec.identity == Identity::kEnvironment) {
    env.push_back({int64_t(0), std::string(""), std::string("DeviceEnvironment"), int64_t(3),
                   fmt::format("PATH=/usr/bin\nLOCAL_RANK=0\nMASTER_ADDR=node0\nRANK={}\nWORLD_SIZE={}\n", first.rank, spec.world)});
  }
  db.insert("TARGET_INFO_SYSTEM_ENV", {"globalVid", "devStateName", "name", "nameEnum", "value"}, env);
  if (spec.identity == Identity::kMpiRanks) {
    db.exec("CREATE TABLE MPI_RANKS (rank INTEGER NOT NULL, globalTid INTEGER NOT NULL)");
    std::vector<std::vector<Value>> rows;
    for (const SimRank* x : xs) rows.push_back({int64_t(x->rank), main_tid_of(x->rank)});
    db.insert("MPI_RANKS", {"rank", "globalTid"}, rows);
  }
  {
    std::vector<std::vector<Value>> rows;
    for (const SimRank* x : xs) {
      rows.push_back({pid_of(x->rank) << 24, pid_of(x->rank), std::string("python3")});
      rows.push_back({int64_t(9000 + x->rank) << 24, int64_t(9000 + x->rank), std::string("pt_data_worker")});
    }
    db.insert("PROCESSES", {"globalPid", "pid", "name"}, rows);
  }

  // Strings: registered NVTX strings go through textId in the 2024 flavour, inline text otherwise.
  std::map<std::string, int64_t> strings;
  auto sid = [&](const std::string& s) {
    auto [it, fresh] = strings.try_emplace(s, int64_t(strings.size()) + 1);
    return it->second;
  };
  const int64_t ours_domain = f == Flavour::k2026 ? 7 : 1, nccl_domain = f == Flavour::k2026 ? 3 : 2;
  const int64_t range_domain = spec.domain == "rankscope" ? ours_domain : spec.domain.empty() ? 0 : 5;
  std::vector<std::string> nvtx_cols = {"start", "end", "eventType", "globalTid", "endGlobalTid", "text", "textId", "domainId",
                                        "int64Value"};
  std::vector<std::vector<Value>> nvtx;
  auto text_of = [&](const std::string& t) -> std::pair<Value, Value> {
    if (f == Flavour::k2024) return {Value(), sid(t)};
    return {t, Value()};
  };
  auto add_nvtx = [&](int64_t type, int64_t start, std::optional<int64_t> end, int64_t tid, Value end_tid, const std::string& text,
                      int64_t domain, Value payload) {
    auto [txt, tid_text] = text_of(text);
    nvtx.push_back({start, end ? Value(*end) : Value(), type, tid, end_tid, txt, tid_text, domain ? Value(domain) : Value(), payload});
  };
  std::vector<std::vector<Value>> runtime, kernels, threads;
  const int64_t launch_name = sid("cudaLaunchKernel_v7000"), sync_name = sid("cudaStreamSynchronize_v3020");
  for (const SimRank* xp : xs) {
    const SimRank& x = *xp;
    const int r = x.rank;
    const int64_t pid = pid_of(r), helper_pid = 9000 + r;
    const int64_t gpid = pid << 24, main_tid = main_tid_of(r), loader_tid = main_tid + 1;
    const int64_t helper_gpid = helper_pid << 24, helper_tid = helper_gpid | helper_pid;
    add_nvtx(ids.domain_create, 100, std::nullopt, main_tid, Value(), "rankscope", ours_domain, Value());
    if (spec.domain != "rankscope" && !spec.domain.empty()) {
      add_nvtx(ids.domain_create, 150, std::nullopt, main_tid, Value(), spec.domain, range_domain, Value());
    }
    if (spec.nccl_ranges) add_nvtx(ids.domain_create, 200, std::nullopt, main_tid, Value(), "NCCL", nccl_domain, Value());
    if (spec.identity == Identity::kRankMark) {
      add_nvtx(ids.mark, 300, std::nullopt, main_tid, Value(), fmt::format("rankscope:rank={}/{} host=node{}", r, spec.world, r / 2),
               ours_domain, Value());
    }
    for (const auto& [t, payload] : x.sync_marks) add_nvtx(ids.mark, ts(t), std::nullopt, main_tid, Value(), "rankscope:sync", ours_domain, payload);
    for (const SimRange& rr : x.ranges) {
      const bool pushpop = !rr.start_end;
      std::optional<int64_t> end = rr.open_end ? std::nullopt : std::optional<int64_t>(ts(rr.end));
      Value payload = rr.step && spec.step_payload ? Value(rr.step_index + 1) : Value();
      const int64_t domain = rr.nccl ? nccl_domain : range_domain;
      add_nvtx(pushpop ? ids.push_pop : ids.start_end, ts(rr.start), end, main_tid, rr.cross_thread ? Value(loader_tid) : Value(),
               rr.text, domain, payload);
    }
    for (const SimLaunch& l : x.launches) {
      runtime.push_back({ts(l.start), ts(l.end), int64_t(1), main_tid, int64_t(l.corr), launch_name, int64_t(0), Value()});
      kernels.push_back({ts(l.kstart), ts(l.kend), int64_t(0), int64_t(1), int64_t(l.stream), int64_t(l.corr), gpid,
                         sid(l.demangled), sid(l.short_name), int64_t(1)});
    }
    for (const SimRuntime& s : x.syncs) {
      runtime.push_back({ts(s.start), ts(s.end), int64_t(1), main_tid, int64_t(s.corr), sync_name, int64_t(0), Value()});
    }
    for (const auto& h : x.helper) {
      runtime.push_back({ts(h[0]), ts(h[1]), int64_t(1), helper_tid, h[4], launch_name, int64_t(0), Value()});
      kernels.push_back({ts(h[2]), ts(h[3]), int64_t(0), int64_t(1), int64_t(13), h[4], helper_gpid, sid("void decode_jpeg(unsigned char*)"),
                         sid("decode_jpeg"), int64_t(1)});
    }
    threads.push_back({sid("python3"), int64_t(0), main_tid});
    threads.push_back({sid("pt_loader"), int64_t(0), loader_tid});
  }
  std::shuffle(nvtx.begin(), nvtx.end(), rng);
  db.insert("NVTX_EVENTS", nvtx_cols, nvtx);
  std::shuffle(runtime.begin(), runtime.end(), rng);
  std::shuffle(kernels.begin(), kernels.end(), rng);
  db.insert("CUPTI_ACTIVITY_KIND_RUNTIME", {"start", "end", "eventClass", "globalTid", "correlationId", "nameId", "returnValue", "callchainId"},
            runtime);
  db.insert("CUPTI_ACTIVITY_KIND_KERNEL", {"start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid",
                                           "demangledName", "shortName", "gridX"},
            kernels);
  db.insert("ThreadNames", {"nameId", "priority", "globalTid"}, threads);
  std::vector<std::vector<Value>> rows;
  for (const auto& [s, id] : strings) rows.push_back({id, s});
  std::shuffle(rows.begin(), rows.end(), rng);
  db.insert("StringIds", {"id", "value"}, rows);
}

}  // namespace

const char* flavour_name(Flavour f) {
  return f == Flavour::k2024 ? "2024" : f == Flavour::k2026 ? "2026" : "no_enum";
}

std::vector<SimOp> standard_script(int blocks, bool nested, MsFn attn_ms, MsFn mlp_ms, MsFn mlp1_extra_ms, bool alltoall) {
  auto fixed = [](double v) { return [v](int, int64_t) { return v; }; };
  if (!attn_ms) attn_ms = fixed(3.0);
  if (!mlp_ms) mlp_ms = fixed(4.0);
  std::vector<SimOp> s;
  auto push = [&](const std::string& t) { s.push_back({SimOp::kPush, t, nullptr}); };
  auto pop = [&] { s.push_back({SimOp::kPop, "", nullptr}); };
  auto compute = [&](MsFn ms) { s.push_back({SimOp::kCompute, "", std::move(ms)}); };
  auto allreduce = [&] { s.push_back({SimOp::kCollective, "", fixed(0.2), CollectiveOp::kAllReduceSum}); };
  // A leaf range: compute, optionally a TP all-reduce, inside `path` (nested) or as one full name.
  auto leaf = [&](const std::vector<std::string>& path, MsFn ms, bool ar) {
    if (nested) {
      for (const auto& p : path) push(p);
    } else {
      std::string full;
      for (const auto& p : path) full += (full.empty() ? "" : "/") + p;
      push(full);
    }
    compute(std::move(ms));
    if (ar) allreduce();
    for (size_t i = 0; i < (nested ? path.size() : 1); ++i) pop();
  };
  leaf({"data"}, fixed(1.0), false);
  leaf({"forward", "embed"}, fixed(2.0), true);
  for (int b = 0; b < blocks; ++b) {
    const std::string blk = "block" + std::to_string(b);
    leaf({"forward", blk, "attn"}, attn_ms, true);
    MsFn m = mlp_ms;
    if (b == 1 && mlp1_extra_ms) m = [mlp_ms, mlp1_extra_ms](int r, int64_t st) { return mlp_ms(r, st) + mlp1_extra_ms(r, st); };
    leaf({"forward", blk, "mlp"}, m, true);
  }
  if (alltoall) {
    if (nested) push("forward"), push("moe");
    else push("forward/moe");
    compute(fixed(0.5));
    s.push_back({SimOp::kCollective, "", fixed(1.0), CollectiveOp::kAllToAllV});
    pop();
    if (nested) pop();
  }
  leaf({"forward", "head"}, fixed(1.5), false);
  leaf({"backward", "head"}, fixed(3.0), false);
  for (int b = blocks - 1; b >= 0; --b) {
    const std::string blk = "block" + std::to_string(b);
    leaf({"backward", blk, "mlp"}, [mlp_ms](int r, int64_t st) { return 2 * mlp_ms(r, st); }, true);
    leaf({"backward", blk, "attn"}, [attn_ms](int r, int64_t st) { return 2 * attn_ms(r, st); }, true);
  }
  leaf({"backward", "embed"}, fixed(1.0), false);
  push("grad_sync");
  s.push_back({SimOp::kCollective, "", fixed(0.5), CollectiveOp::kAllReduceSum});
  pop();
  leaf({"optimizer"}, fixed(1.0), false);
  return s;
}

std::vector<fs::path> write_nsys_fixture(const fs::path& dir, const FixtureSpec& spec, Expected* expected) {
  fs::create_directories(dir);
  const std::vector<SimRank> ranks = simulate(spec);
  std::vector<fs::path> files;
  std::vector<std::vector<const SimRank*>> groups;
  if (spec.one_export) {
    files.push_back(dir / (spec.file_name ? spec.file_name(0) : std::string("job.sqlite")));
    groups.emplace_back();
    for (const SimRank& x : ranks) groups.back().push_back(&x);
  } else {
    for (const SimRank& x : ranks) {
      files.push_back(dir / default_file_name(spec, x.rank));
      groups.push_back({&x});
    }
  }
  // One export per worker at a time (the benchmark writes 64 x 1000 steps).
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&] {
    for (size_t i = next++; i < groups.size(); i = next++) {
      try {
        std::mt19937_64 rng(spec.seed * 7919 + i);
        write_export(files[i], spec, groups[i], rng);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        failure = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned w = 1; w < std::min<unsigned>(std::max(1u, std::thread::hardware_concurrency()), unsigned(groups.size())); ++w) {
    pool.emplace_back(work);
  }
  work();
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  if (expected) {
    *expected = Expected{};
    for (const SimRank& x : ranks) {
      expected->clock_error_ns.push_back(spec.clock_error_ns ? spec.clock_error_ns(x.rank) : 0);
      expected->files.push_back(files[spec.one_export ? 0 : size_t(x.rank)].string());
      std::vector<std::map<std::string, std::array<int64_t, 3>>> per_step(size_t(spec.steps));
      std::vector<int64_t> step_ns;
      for (size_t s = 0; s < x.step_begin.size(); ++s) step_ns.push_back(x.step_end[s] - x.step_begin[s]);
      expected->step_ns.push_back(step_ns);
      for (const SimRange& rr : x.ranges) {
        if (rr.nccl || rr.cross_thread || rr.step_index < 0) continue;
        auto& e = per_step[size_t(rr.step_index)][rr.name];
        e[0] += 1;
        e[1] += rr.end - rr.start;
        e[2] += rr.ops > 0 ? rr.gmax - rr.gmin : 0;
      }
      expected->ranges.push_back(std::move(per_step));
    }
  }
  return files;
}

void write_probe_run(const fs::path& dir, const FixtureSpec& spec, int64_t seq_len, int64_t batch) {
  fs::create_directories(dir);
  const std::vector<SimRank> ranks = simulate(spec);
  format::RunMetadata meta;
  meta.run_id = "probe-" + dir.filename().string();
  meta.created_ns = kT0;
  meta.program = "nsys_fixture";
  meta.world_size = spec.world;
  meta.tp = 1;
  meta.dp = spec.world;
  format::CommGroup world{"world", {}};
  for (int r = 0; r < spec.world; ++r) world.ranks.push_back(r);
  meta.groups = {{"nccl0", world.ranks}, {"nccl1", world.ranks}, world};
  if (seq_len > 0) meta.training["seq_len"] = seq_len;
  if (batch > 0) meta.training["batch"] = batch;
  if (auto st = format::write_run_metadata(dir, meta); !st.ok()) throw std::runtime_error(st.to_string());
  for (const SimRank& x : ranks) {
    const int64_t error = spec.clock_error_ns ? spec.clock_error_ns(x.rank) : 0;
    auto own = [&](int64_t t) { return t + error; };
    format::EventStreamHeader h;
    h.rank = x.rank;
    h.world_size = spec.world;
    h.created_ns = own(kT0);
    h.run_id = meta.run_id;
    auto w = format::EventStreamWriter::create(format::event_stream_path(dir, x.rank), h);
    if (!w.ok()) throw std::runtime_error(w.status().to_string());
    auto& writer = **w;
    writer.write_clock({-error, 1000, own(kT0), 1, 0});
    for (size_t s = 0; s < x.step_begin.size(); ++s) {
      format::StepRecord rec;
      rec.step = int64_t(s) + 1;
      rec.begin_ns = own(x.step_begin[s]);
      rec.end_ns = own(x.step_end[s]);
      std::map<std::string, format::RangeAggregate> agg;
      std::vector<std::string> order;
      for (const SimRange& rr : x.ranges) {
        if (rr.nccl || rr.cross_thread || rr.step_index != int64_t(s)) continue;
        auto [it, fresh] = agg.try_emplace(rr.name, format::RangeAggregate{writer.intern(format::NameKind::kRange, rr.name), 0, 0, 0});
        if (fresh) order.push_back(rr.name);
        it->second.count += 1;
        it->second.total_ns += rr.end - rr.start;
        it->second.kernel_ns += rr.ops > 0 ? rr.gmax - rr.gmin : 0;
      }
      for (const auto& n : order) rec.ranges.push_back(agg[n]);
      for (const SimLaunch& l : x.launches) {
        if (!l.nccl || l.step_index != int64_t(s)) continue;
        format::CollectiveEvent e{};
        e.comm_id = writer.intern(format::NameKind::kComm, l.comm == 0 ? "nccl0" : "nccl1");
        e.op = uint8_t(l.op);
        e.dtype = uint8_t(format::DataType::kFloat32);
        e.state = uint8_t(format::CollectiveState::kCompleted);
        e.range_id = writer.intern(format::NameKind::kRange, l.range);
        e.seq = l.seq;
        e.enqueue_ns = own(spec.nccl_ranges ? l.arrival : l.start);
        e.start_ns = own(l.kstart);
        e.end_ns = own(l.kend);
        rec.collectives.push_back(e);
      }
      writer.write_step(rec);
    }
    writer.write_end(own(x.t));
    if (auto st = writer.flush(); !st.ok()) throw std::runtime_error(st.to_string());
  }
}

}  // namespace rankscope::nsys::testing
