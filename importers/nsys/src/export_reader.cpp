// export_reader.cpp — see export_reader.h.
#include "export_reader.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace rankscope::nsys {
namespace {

using format::CollectiveOp;
using format::DataType;

// "NULL" for a column the export lacks, so one SELECT serves every schema flavour.
std::string col(const std::set<std::string>& cols, const std::string& name, const char* fallback = "NULL") {
  return cols.count(name) ? "\"" + name + "\"" : std::string(fallback);
}

bool has_all(const std::set<std::string>& cols, std::initializer_list<const char*> names, std::string* missing) {
  for (const char* n : names) {
    if (!cols.count(n)) {
      *missing = n;
      return false;
    }
  }
  return true;
}

std::optional<int> parse_int(std::string_view s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p == s.data()) return std::nullopt;
  return v;
}

// The value of `var` in an environment dump ("A=1\nRANK=3\n...", NUL- or space-separated alike):
// "RANK=" counts only where it starts a name, so LOCAL_RANK=1 is not RANK.
std::optional<int> env_int(std::string_view env, std::string_view var) {
  const std::string key = std::string(var) + "=";
  for (size_t at = env.find(key); at != std::string_view::npos; at = env.find(key, at + 1)) {
    if (at > 0) {
      const unsigned char prev = static_cast<unsigned char>(env[at - 1]);
      if (std::isalnum(prev) || prev == '_') continue;
    }
    size_t b = at + key.size(), e = b;
    while (e < env.size() && std::isdigit(static_cast<unsigned char>(env[e]))) ++e;
    if (auto v = parse_int(env.substr(b, e - b))) return v;
  }
  return std::nullopt;
}

int major_of(std::string_view version) {
  auto v = parse_int(version.substr(0, version.find('.')));
  return v ? *v : -1;
}

// Compares dotted versions numerically: "3.30.0" > "3.28.1".
bool newer_than(std::string_view a, std::string_view b) {
  auto parts = [](std::string_view s) {
    std::vector<int> out;
    while (!s.empty()) {
      const size_t dot = s.find('.');
      out.push_back(parse_int(s.substr(0, dot)).value_or(0));
      if (dot == std::string_view::npos) break;
      s.remove_prefix(dot + 1);
    }
    return out;
  };
  return parts(a) > parts(b);
}

Status read_versions(Database& db, ExportInfo& info) {
  const auto cols = db.columns("META_DATA_EXPORT");
  if (!cols.count("name") || !cols.count("value")) {
    info.warnings.push_back("no META_DATA_EXPORT table: the schema version is unknown; read as 3.x");
    return {};
  }
  // Each key read exactly: beside EXPORT_SCHEMA_VERSION ("3.13.2") nsys writes
  // EXPORT_SCHEMA_VERSION_CKSUM ("1271772049 158887"), which a prefix match took for the version.
  // Some exports split the version into _MAJOR, _MINOR and _MICRO rows.
  RS_ASSIGN_OR_RETURN(Statement s, db.prepare("SELECT name, value FROM META_DATA_EXPORT"));
  std::map<std::string, std::string, std::less<>> meta;
  while (s.step()) meta.emplace(std::string(s.text(0)), std::string(s.text(1)));
  const auto value = [&](std::string_view key) {
    const auto it = meta.find(key);
    return it != meta.end() ? it->second : std::string();
  };
  info.product_version = value("EXPORT_PRODUCT_VERSION");
  info.schema_version = value("EXPORT_SCHEMA_VERSION");
  if (info.schema_version.empty() && !value("EXPORT_SCHEMA_VERSION_MAJOR").empty()) {
    info.schema_version = value("EXPORT_SCHEMA_VERSION_MAJOR");
    for (const char* part : {"EXPORT_SCHEMA_VERSION_MINOR", "EXPORT_SCHEMA_VERSION_MICRO"})
      if (const std::string v = value(part); !v.empty()) info.schema_version += "." + v;
  }
  if (info.schema_version.empty()) {
    info.warnings.push_back("META_DATA_EXPORT has no EXPORT_SCHEMA_VERSION: read as 3.x");
    return {};
  }
  const int major = major_of(info.schema_version);
  if (major != 3) {
    return unsupported(fmt::format("{}: export schema {} (nsys {}): this importer reads schema 3.x; "
                                   "hint: re-export the .nsys-rep with an nsys whose SQLite schema is 3.x",
                                   info.file.string(), info.schema_version,
                                   info.product_version.empty() ? "?" : info.product_version));
  }
  if (newer_than(info.schema_version, kNewestTestedSchema)) {
    info.warnings.push_back(fmt::format("export schema {} is newer than the newest tested ({}); columns are read by name",
                                        info.schema_version, kNewestTestedSchema));
  }
  return {};
}

Status read_event_types(Database& db, ExportInfo& info) {
  const auto cols = db.columns("ENUM_NSYS_EVENT_TYPE");
  if (!cols.count("id") || !cols.count("name")) return {};  // older exports: the known numbers
  RS_ASSIGN_OR_RETURN(Statement s, db.prepare("SELECT id, name FROM ENUM_NSYS_EVENT_TYPE WHERE name IN "
                                              "('NvtxPushPopRange','NvtxStartEndRange','NvtxMark','NvtxDomainCreate')"));
  int found = 0;
  while (s.step()) {
    const std::string_view n = s.text(1);
    const int id = int(s.i64(0));
    if (n == "NvtxPushPopRange") info.types.push_pop = id;
    else if (n == "NvtxStartEndRange") info.types.start_end = id;
    else if (n == "NvtxMark") info.types.mark = id;
    else info.types.domain_create = id;
    ++found;
  }
  info.types.from_enum_table = found > 0;
  if (found > 0 && found < 4) info.warnings.push_back("ENUM_NSYS_EVENT_TYPE lacks some NVTX types; the known numbers are used for those");
  return {};
}

Status read_session_and_host(Database& db, ExportInfo& info) {
  if (db.columns("TARGET_INFO_SESSION_START_TIME").count("utcEpochNs")) {
    RS_ASSIGN_OR_RETURN(Statement s, db.prepare("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME"));
    if (s.step() && !s.null(0)) {
      info.utc_epoch_ns = s.i64(0);
      info.has_session_start = true;
    }
  }
  const auto env = db.columns("TARGET_INFO_SYSTEM_ENV");
  std::string name_col, value_col;
  if (env.count("name")) name_col = "name";
  else if (env.count("nameId")) name_col = "nameId";
  if (env.count("value")) value_col = "value";
  else if (env.count("valueId")) value_col = "valueId";
  if (name_col.empty() || value_col.empty()) return {};
  RS_ASSIGN_OR_RETURN(Statement s, db.prepare(fmt::format("SELECT \"{}\", \"{}\" FROM TARGET_INFO_SYSTEM_ENV", name_col, value_col)));
  static constexpr const char* kRankVars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
  static constexpr const char* kWorldVars[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"};
  int rank_priority = 99;
  while (s.step()) {
    auto str = [&](int c) { return s.is_text(c) || s.null(c) ? std::string(s.text(c)) : std::string(info.string(s.i64(c))); };
    const std::string name = str(0), value = str(1);
    if (name == "Hostname" || name == "HostName" || name == "hostname") info.host = value;
    if (value.find('=') == std::string::npos) continue;
    for (int i = 0; i < int(std::size(kRankVars)) && i < rank_priority; ++i) {
      if (auto v = env_int(value, kRankVars[i])) {
        info.env_rank = v;
        info.env_rank_variable = kRankVars[i];
        rank_priority = i;
        break;
      }
    }
    for (const char* w : kWorldVars) {
      if (auto v = env_int(value, w); v && !info.env_world) info.env_world = v;
    }
  }
  return {};
}

Status read_mpi_ranks(Database& db, ExportInfo& info) {
  const auto cols = db.columns("MPI_RANKS");
  if (!cols.count("globalTid") || !cols.count("rank")) return {};
  RS_ASSIGN_OR_RETURN(Statement s, db.prepare("SELECT globalTid, rank FROM MPI_RANKS"));
  while (s.step()) info.mpi_rank_by_process[process_key(s.u64(0))] = int(s.i64(1));
  return {};
}

Status read_strings(Database& db, ExportInfo& info) {
  const auto cols = db.columns("StringIds");
  if (!cols.count("id") || !cols.count("value")) {
    info.warnings.push_back("no StringIds table: kernel and registered NVTX names are unknown");
    return {};
  }
  RS_ASSIGN_OR_RETURN(Statement s, db.prepare("SELECT id, value FROM StringIds"));
  while (s.step()) info.strings.emplace(s.i64(0), std::string(s.text(1)));
  return {};
}

Status read_diagnostics(Database& db, ExportInfo& info) {
  const auto cols = db.columns("DIAGNOSTIC_EVENT");
  if (cols.empty()) return {};
  const std::string text = cols.count("text") ? "text" : cols.count("textId") ? "textId" : "";
  if (text.empty()) return {};
  RS_ASSIGN_OR_RETURN(Statement s, db.prepare(fmt::format("SELECT \"{}\" FROM DIAGNOSTIC_EVENT", text)));
  while (s.step()) {
    ++info.diagnostic_count;
    if (info.diagnostics.size() >= 5 || s.null(0)) continue;
    info.diagnostics.emplace_back(s.is_text(0) ? std::string(s.text(0)) : std::string(info.string(s.i64(0))));
  }
  return {};
}

// Keeps a table's column set only when every needed column is there; says what is lost otherwise.
void gate_columns(Database& db, ExportInfo& info, const char* table, std::set<std::string>& out,
                  std::initializer_list<const char*> needed, std::initializer_list<const char*> one_of, const char* lost,
                  bool required) {
  out = db.columns(table);
  if (out.empty()) {
    if (required) info.warnings.push_back(fmt::format("no {} table: {}", table, lost));
    return;
  }
  std::string missing;
  bool ok = has_all(out, needed, &missing);
  if (ok && one_of.size() > 0) {
    ok = std::any_of(one_of.begin(), one_of.end(), [&](const char* c) { return out.count(c) > 0; });
    if (!ok) missing = *one_of.begin();
  }
  if (!ok) {
    info.warnings.push_back(fmt::format("{} has no column {}: {}", table, missing, lost));
    out.clear();
  }
}

}  // namespace

Result<std::unique_ptr<Database>> open_export(const std::filesystem::path& file, ExportInfo& info) {
  info.file = file;
  RS_ASSIGN_OR_RETURN(std::unique_ptr<Database> db, Database::open(file));
  if (!db->has_table("NVTX_EVENTS") && !db->has_table("CUPTI_ACTIVITY_KIND_KERNEL") && !db->has_table("StringIds")) {
    return invalid_argument(fmt::format("{}: not an nsys SQLite export (no NVTX_EVENTS, CUPTI_ACTIVITY_KIND_KERNEL or "
                                        "StringIds table); hint: nsys export --type sqlite REPORT.nsys-rep", file.string()));
  }
  RS_RETURN_IF_ERROR(read_versions(*db, info));
  RS_RETURN_IF_ERROR(read_event_types(*db, info));
  RS_RETURN_IF_ERROR(read_strings(*db, info));
  RS_RETURN_IF_ERROR(read_session_and_host(*db, info));
  RS_RETURN_IF_ERROR(read_mpi_ranks(*db, info));
  RS_RETURN_IF_ERROR(read_diagnostics(*db, info));
  gate_columns(*db, info, "NVTX_EVENTS", info.nvtx, {"start", "end", "eventType", "globalTid"}, {"text", "textId"},
               "no NVTX ranges are read (capture with nsys profile -t nvtx)", true);
  gate_columns(*db, info, "CUPTI_ACTIVITY_KIND_KERNEL", info.kernel, {"start", "end", "streamId", "correlationId", "globalPid"},
               {"shortName", "demangledName"}, "no GPU kernels are read (capture with nsys profile -t cuda)", true);
  gate_columns(*db, info, "CUPTI_ACTIVITY_KIND_RUNTIME", info.runtime, {"start", "end", "globalTid", "correlationId"}, {},
               "kernels cannot be tied to their launches: no projection onto ranges, arrivals from kernel starts", true);
  gate_columns(*db, info, "CUPTI_ACTIVITY_KIND_MEMCPY", info.memcpy, {"start", "end", "streamId", "correlationId", "globalPid"}, {},
               "memory copies are left out", false);
  gate_columns(*db, info, "CUPTI_ACTIVITY_KIND_MEMSET", info.memset, {"start", "end", "streamId", "correlationId", "globalPid"}, {},
               "memsets are left out", false);
  if (!info.has_session_start) {
    info.warnings.push_back("no TARGET_INFO_SESSION_START_TIME.utcEpochNs: this rank's clock is placed by its collectives only");
  }
  return db;
}

Result<ExportScan> scan_export(const std::filesystem::path& file) {
  ExportScan scan;
  RS_ASSIGN_OR_RETURN(std::unique_ptr<Database> db, open_export(file, scan.info));
  const ExportInfo& info = scan.info;
  std::map<uint64_t, ProcessScan> procs;
  auto proc = [&](uint64_t key) -> ProcessScan& {
    ProcessScan& p = procs[key];
    p.key = key;
    p.pid = pid_of(key);
    return p;
  };
  auto see = [&](int64_t t) {
    scan.min_ts = std::min(scan.min_ts, t);
    scan.max_ts = std::max(scan.max_ts, t);
  };
  if (!info.nvtx.empty()) {
    const auto& t = info.types;
    RS_ASSIGN_OR_RETURN(Statement s, db->prepare(fmt::format(
        "SELECT globalTid, count(*), min(start), max(coalesce(\"end\", start)) FROM NVTX_EVENTS WHERE eventType IN ({},{}) "
        "GROUP BY globalTid", t.push_pop, t.start_end)));
    while (s.step()) {
      proc(process_key(s.u64(0))).ranges += s.i64(1);
      see(s.i64(2));
      see(s.i64(3));
    }
    RS_ASSIGN_OR_RETURN(Statement m, db->prepare(fmt::format(
        "SELECT globalTid, start, {}, {}, {}, {} FROM NVTX_EVENTS WHERE eventType = {}", col(info.nvtx, "text"),
        col(info.nvtx, "textId"), col(info.nvtx, "int64Value"), col(info.nvtx, "uint64Value"), t.mark)));
    while (m.step()) {
      const std::string_view text = !m.null(2) ? m.text(2) : !m.null(3) ? info.string(m.i64(3)) : std::string_view();
      if (text.rfind("rankscope:", 0) != 0) continue;
      ProcessScan& p = proc(process_key(m.u64(0)));
      if (text.rfind("rankscope:rank=", 0) == 0) {
        std::string_view rest = text.substr(15);
        p.mark_rank = parse_int(rest);
        if (const size_t slash = rest.find('/'); slash != std::string_view::npos) p.mark_world = parse_int(rest.substr(slash + 1));
        p.mark_text = std::string(text);
      } else if (text == "rankscope:sync") {
        const bool has = !m.null(4) || !m.null(5);
        if (has) p.sync_marks.emplace_back(m.i64(1), !m.null(4) ? m.i64(4) : int64_t(m.u64(5)));
      }
    }
  }
  if (!info.kernel.empty()) {
    const std::string name = info.kernel.count("shortName") ? "shortName" : "demangledName";
    RS_ASSIGN_OR_RETURN(Statement s, db->prepare(fmt::format(
        "SELECT globalPid, start, \"end\", streamId, \"{}\" FROM CUPTI_ACTIVITY_KIND_KERNEL", name)));
    std::unordered_map<int64_t, CollectiveOp> nccl_ids;  // string id -> op, for NCCL kernel names only
    std::unordered_map<int64_t, bool> checked;
    std::map<uint64_t, std::map<uint32_t, std::vector<NcclKernelTimes>>> streams;
    while (s.step()) {
      const uint64_t key = process_key(s.u64(0));
      ++proc(key).kernels;
      see(s.i64(1));
      see(s.i64(2));
      std::optional<CollectiveOp> op;
      if (s.is_text(4)) {
        if (is_nccl_kernel(s.text(4))) op = nccl_op_from_name(s.text(4));
      } else if (!s.null(4)) {
        const int64_t id = s.i64(4);
        auto [it, fresh] = checked.try_emplace(id, false);
        if (fresh) {
          const std::string_view n = info.string(id);
          it->second = is_nccl_kernel(n);
          if (it->second) nccl_ids[id] = nccl_op_from_name(n);
        }
        if (it->second) op = nccl_ids[id];
      }
      if (op) streams[key][uint32_t(s.i64(3))].push_back({s.i64(1), s.i64(2), *op});
    }
    for (auto& [key, by_stream] : streams) {
      ProcessScan& p = proc(key);
      std::vector<std::pair<int64_t, uint32_t>> order;
      for (auto& [stream, v] : by_stream) {
        std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
        order.emplace_back(v.front().start, stream);
      }
      std::sort(order.begin(), order.end());
      for (const auto& [first, stream] : order) {
        p.nccl_stream_ids.push_back(stream);
        p.nccl_streams.push_back(std::move(by_stream[stream]));
      }
    }
  }
  for (auto& [key, p] : procs) {
    if (p.kernels > 0 || p.ranges > 0 || p.mark_rank) scan.processes.push_back(std::move(p));
  }
  scan.absolute_timestamps = scan.min_ts != INT64_MAX && scan.min_ts > int64_t(1e17);
  // Pass 2 reopens the export; the names (megabytes in real captures) are not kept for every file.
  std::unordered_map<int64_t, std::string>().swap(scan.info.strings);
  return scan;
}

Result<ProcessRows> load_process_rows(Database& db, const ExportInfo& info, const std::set<uint64_t>& processes) {
  ProcessRows rows;
  rows.pool.emplace_back();
  std::unordered_map<std::string, uint32_t> interned{{"", 0}};
  auto intern = [&](std::string_view s) -> uint32_t {
    auto [it, fresh] = interned.try_emplace(std::string(s), uint32_t(rows.pool.size()));
    if (fresh) rows.pool.emplace_back(s);
    return it->second;
  };
  std::unordered_map<int64_t, uint32_t> by_string_id;
  auto intern_id = [&](int64_t id) -> uint32_t {
    auto it = by_string_id.find(id);
    if (it != by_string_id.end()) return it->second;
    const uint32_t v = intern(info.string(id));
    by_string_id.emplace(id, v);
    return v;
  };
  auto see = [&](int64_t t) { rows.max_ts = std::max(rows.max_ts, t); };
  auto wanted = [&](uint64_t key) { return processes.count(key) > 0; };

  if (!info.nvtx.empty()) {
    const auto& t = info.types;
    const std::string id = info.nvtx.count("eventId") ? "eventId" : "rowid";
    RS_ASSIGN_OR_RETURN(Statement s, db.prepare(fmt::format(
        "SELECT start, \"end\", eventType, globalTid, {}, {}, {}, {}, {}, {}, {} FROM NVTX_EVENTS WHERE eventType IN ({},{},{},{})",
        col(info.nvtx, "endGlobalTid"), col(info.nvtx, "text"), col(info.nvtx, "textId"), col(info.nvtx, "domainId"),
        col(info.nvtx, "int64Value"), col(info.nvtx, "uint64Value"), id, t.push_pop, t.start_end, t.mark, t.domain_create)));
    while (s.step()) {
      const uint64_t gtid = s.u64(3);
      if (!wanted(process_key(gtid))) continue;
      const int type = int(s.i64(2));
      const uint32_t text = !s.null(5) ? intern(s.text(5)) : !s.null(6) ? intern_id(s.i64(6)) : 0;
      const uint32_t domain = s.null(7) ? 0 : uint32_t(s.i64(7));
      if (type == t.domain_create) {
        rows.domains[{process_key(gtid), domain}] = rows.pool[text];
        continue;
      }
      NvtxRow r;
      r.start = s.i64(0);
      r.open_end = s.null(1);
      r.end = r.open_end ? r.start : s.i64(1);
      r.gtid = gtid;
      r.end_gtid = s.null(4) ? 0 : s.u64(4);
      if (r.end_gtid == gtid) r.end_gtid = 0;
      r.text = text;
      r.domain = domain;
      r.kind = type == t.push_pop ? NvtxKind::kPushPop : type == t.start_end ? NvtxKind::kStartEnd : NvtxKind::kMark;
      r.has_payload = !s.null(8) || !s.null(9);
      r.payload = !s.null(8) ? s.i64(8) : !s.null(9) ? int64_t(s.u64(9)) : 0;
      r.id = s.i64(10);
      see(r.start);
      see(r.end);
      rows.nvtx.push_back(r);
    }
    if (!s.done_ok()) return corrupt(fmt::format("{}: reading NVTX_EVENTS failed: {}", info.file.string(), db.error()));
  }
  if (!info.runtime.empty()) {
    RS_ASSIGN_OR_RETURN(Statement s, db.prepare(fmt::format(
        "SELECT start, \"end\", globalTid, correlationId, {} FROM CUPTI_ACTIVITY_KIND_RUNTIME", col(info.runtime, "nameId"))));
    while (s.step()) {
      const uint64_t gtid = s.u64(2);
      if (!wanted(process_key(gtid))) continue;
      const uint32_t name = s.null(4) ? 0 : s.is_text(4) ? intern(s.text(4)) : intern_id(s.i64(4));
      rows.runtime.push_back({s.i64(0), s.i64(1), gtid, uint32_t(s.i64(3)), name});
      see(s.i64(1));
    }
    if (!s.done_ok()) return corrupt(fmt::format("{}: reading CUPTI_ACTIVITY_KIND_RUNTIME failed: {}", info.file.string(), db.error()));
  }
  // Kernels, memcpys and memsets share their first six columns: start, end, globalPid,
  // correlationId, streamId, deviceId.
  auto gpu_op_columns = [](Statement& s, uint64_t process) {
    GpuOp op;
    op.start = s.i64(0);
    op.end = s.i64(1);
    op.process = process;
    op.correlation = uint32_t(s.i64(3));
    op.stream = uint32_t(s.i64(4));
    op.device = uint32_t(s.i64(5));
    return op;
  };
  if (!info.kernel.empty()) {
    RS_ASSIGN_OR_RETURN(Statement s, db.prepare(fmt::format(
        "SELECT start, \"end\", globalPid, correlationId, streamId, {}, {}, {} FROM CUPTI_ACTIVITY_KIND_KERNEL",
        col(info.kernel, "deviceId", "0"), col(info.kernel, "shortName"), col(info.kernel, "demangledName"))));
    while (s.step()) {
      const uint64_t key = process_key(s.u64(2));
      if (!wanted(key)) continue;
      GpuOp op = gpu_op_columns(s, key);
      auto name_of = [&](int c) -> uint32_t { return s.null(c) ? 0 : s.is_text(c) ? intern(s.text(c)) : intern_id(s.i64(c)); };
      op.short_name = name_of(6);
      op.name = name_of(7);
      if (op.name == 0) op.name = op.short_name;
      if (op.short_name == 0) op.short_name = op.name;
      op.kind = GpuOpKind::kKernel;
      see(op.end);
      rows.ops.push_back(op);
    }
    if (!s.done_ok()) return corrupt(fmt::format("{}: reading CUPTI_ACTIVITY_KIND_KERNEL failed: {}", info.file.string(), db.error()));
  }
  for (int which = 0; which < 2; ++which) {
    const auto& cols = which == 0 ? info.memcpy : info.memset;
    if (cols.empty()) continue;
    const char* table = which == 0 ? "CUPTI_ACTIVITY_KIND_MEMCPY" : "CUPTI_ACTIVITY_KIND_MEMSET";
    const uint32_t name = intern(which == 0 ? "[CUDA memcpy]" : "[CUDA memset]");
    RS_ASSIGN_OR_RETURN(Statement s, db.prepare(fmt::format(
        "SELECT start, \"end\", globalPid, correlationId, streamId, {} FROM {}", col(cols, "deviceId", "0"), table)));
    while (s.step()) {
      const uint64_t key = process_key(s.u64(2));
      if (!wanted(key)) continue;
      GpuOp op = gpu_op_columns(s, key);
      op.name = op.short_name = name;
      op.kind = which == 0 ? GpuOpKind::kMemcpy : GpuOpKind::kMemset;
      see(op.end);
      rows.ops.push_back(op);
    }
  }
  return rows;
}

}  // namespace rankscope::nsys
