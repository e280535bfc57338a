// log_startup.cpp — see log_startup.h.
#include "rankscope/analyzers/startup/log_startup.h"

#include "rankscope/format/appendf.h"

namespace rankscope::analyzers {
namespace {

// The start-up kinds of finding by their JSON name; null for the others.
const char* startup_kind(logs::LogFinding::Kind k) {
  using K = logs::LogFinding::Kind;
  return k == K::kSetting          ? "setting"
         : k == K::kTopology       ? "topology"
         : k == K::kVersion        ? "version"
         : k == K::kInitIncomplete ? "init_incomplete"
                                   : nullptr;
}

}  // namespace

LogStartupReport startup_from_log(const logs::LogImport& log) {
  LogStartupReport r;
  r.summary = log.summary;
  r.nccl_versions = log.versions;
  for (const auto& f : log.findings) {
    const char* kind = startup_kind(f.kind);
    if (!kind) continue;
    r.problems += f.problem;
    r.findings.push_back({kind, f.problem, f.ranks, f.hosts, f.text, f.evidence});
  }
  return r;
}

nlohmann::json log_startup_json(const LogStartupReport& r) {
  nlohmann::json findings = nlohmann::json::array();
  for (const auto& f : r.findings)
    findings.push_back({{"kind", f.kind},
                        {"problem", f.problem},
                        {"ranks", f.ranks},
                        {"hosts", f.hosts},
                        {"text", f.text},
                        {"evidence", f.evidence}});
  return {{"source", "log"}, {"summary", r.summary}, {"findings", findings}, {"nccl_versions", r.nccl_versions}};
}

std::string log_startup_text(const LogStartupReport& r) {
  std::string out;
  format::appendf(out, "rankscope startup: %s\n", r.summary.c_str());
  for (const auto& f : r.findings)
    format::appendf(out, "  %s %s [%s]\n", f.problem ? "!" : "-", f.text.c_str(), f.evidence.c_str());
  if (r.findings.empty()) out += "  no start-up finding: init completed, no setting or topology of note\n";
  return out;
}

}  // namespace rankscope::analyzers
