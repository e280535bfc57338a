// import_summary.cpp — see import_summary.h.
#include "rankscope/trace_core/import_summary.h"

#include <filesystem>

#include <fmt/format.h>

namespace rankscope::trace_core {

namespace fs = std::filesystem;

nlohmann::json provenance_json(const ImportSummary& s) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankProvenance& p : s.ranks) {
    ranks.push_back({{"rank", p.rank},
                     {"file", p.file},
                     {"host", p.host},
                     {"pid", p.pid},
                     {"nsys_version", p.nsys_version},
                     {"schema_version", p.schema_version},
                     {"producer", p.producer},
                     {"identity", p.identity},
                     {"session_start_utc_ns", p.session_start_utc_ns},
                     {"alignment", {{"method", p.alignment}, {"offset_ms", p.offset_ms}, {"residual_ms", p.residual_ms}}},
                     {"steps_from", p.steps_from},
                     {"steps", p.steps},
                     {"ranges", p.ranges},
                     {"kernels", p.kernels},
                     {"collectives", p.collectives},
                     {"flags", {{"open_ended", p.open_ended}, {"negative_start", p.negative_start},
                                {"cross_thread", p.cross_thread}, {"unlaunched_ops", p.unlaunched_ops}}},
                     {"flagged", p.flagged},
                     {"warnings", p.warnings},
                     {"diagnostics", p.diagnostics}});
  }
  return {{"kind", s.kind}, {"world_size", s.world_size}, {"ranks", ranks}, {"warnings", s.warnings}};
}

std::string provenance_text(const nlohmann::json& source) {
  if (!source.is_object() || !source.contains("ranks") || !source["ranks"].is_array()) return "";
  const std::string kind = source.value("kind", "");
  if (kind != "nsys" && kind != "kineto") return "";
  const bool kineto = kind == "kineto";
  const auto& ranks = source["ranks"];
  std::string out = kineto ? fmt::format("imported from PyTorch profiler (Kineto) traces: {} files\n", ranks.size())
                           : fmt::format("imported from Nsight Systems: {} exports\n", ranks.size());
  std::string steps_from;
  for (const auto& r : ranks) {
    const std::string s = r.value("steps_from", "");
    if (steps_from.empty()) steps_from = s;
    else if (s != steps_from) steps_from = "differs by rank (see run.json source.ranks)";
  }
  if (!steps_from.empty()) out += fmt::format("steps from {}\n", steps_from);
  if (kineto) {
    for (const auto& r : ranks) {
      if (const std::string p = r.value("producer", ""); !p.empty()) {
        out += fmt::format("versions (rank {}): {}\n", r.value("rank", -1), p);
        break;
      }
    }
  }
  out += fmt::format("{:>5} {:<28} {:<14} {:<14} {:<8} {:>10} {:>9}  {}\n", "rank", "file", "host", kineto ? "" : "nsys",
                     kineto ? "" : "schema", "offset_ms", "error_ms", "alignment; identity");
  size_t shown = 0;
  for (const auto& r : ranks) {
    if (shown++ == 16) {
      out += fmt::format("  ... {} more ranks in run.json (source.ranks)\n", ranks.size() - 16);
      break;
    }
    std::string file = fs::path(r.value("file", "")).filename().string();
    if (file.size() > 28) file = "..." + file.substr(file.size() - 25);
    const auto& a = r["alignment"];
    const double err = a.value("residual_ms", 0.0);
    out += fmt::format("{:>5} {:<28} {:<14} {:<14} {:<8} {:>10.3f} {:>9}  {}; {}\n", r.value("rank", -1), file,
                       r.value("host", ""), r.value("nsys_version", ""), r.value("schema_version", ""), a.value("offset_ms", 0.0),
                       err < 0 ? std::string("?") : fmt::format("{:.3f}", err), a.value("method", ""), r.value("identity", ""));
  }
  int64_t open = 0, neg = 0, cross = 0;
  for (const auto& r : ranks) {
    open += r["flags"].value("open_ended", int64_t(0));
    neg += r["flags"].value("negative_start", int64_t(0));
    cross += r["flags"].value("cross_thread", int64_t(0));
  }
  if (open + neg + cross > 0) {
    out += fmt::format("flagged ranges: {} open at the end of the capture, {} started before it, {} ended on another thread "
                       "(kept; not projected onto kernels)\n", open, neg, cross);
  }
  for (const auto& w : source.value("warnings", nlohmann::json::array())) out += fmt::format("warning: {}\n", w.get<std::string>());
  return out;
}

}  // namespace rankscope::trace_core
