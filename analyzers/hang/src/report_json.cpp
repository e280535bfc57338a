// report_json.cpp — the JSON report (schema in report.h).
#include "rankscope/analyzers/hang/report.h"

namespace rankscope::hang {
namespace {

nlohmann::json collective_json(const CollectiveRef& c) {
  return {{"comm", c.comm},
          {"seq", c.seq},
          {"op", std::string(format::op_name(c.op))},
          {"dtype", std::string(format::dtype_name(c.dtype))},
          {"count", c.count},
          {"bytes", c.bytes},
          {"range", c.range}};
}

}  // namespace

nlohmann::json render_json(const Diagnosis& d) {
  using nlohmann::json;
  json j;
  j["schema_version"] = kHangReportSchemaVersion;
  j["verdict"] = std::string(verdict_name(d.verdict));
  j["kind"] = d.kind == Kind::kNone ? json(nullptr) : json(std::string(kind_name(d.kind)));
  j["culprit_ranks"] = d.culprit_ranks;
  json culprits = json::array();
  for (int r : d.culprit_ranks) culprits.push_back({{"rank", r}, {"host", host_of(d, r)}});
  j["culprits"] = std::move(culprits);
  j["hosts"] = d.hosts;
  json nodes = json::array();
  for (const auto& n : d.nodes) {
    json x = {{"host", n.host},
              {"ranks", n.ranks},
              {"host_ranks", n.host_ranks},
              {"state", std::string(rank_state_name(n.state))},
              {"cause", n.cause}};
    if (n.os_state != OsRunState::kUnknown) x["os_state"] = std::string(os_run_state_name(n.os_state));
    if (n.state == RankState::kDead) x["liveness"] = std::string(analyzers::liveness_name(n.alive));
    nodes.push_back(std::move(x));
  }
  j["node_findings"] = std::move(nodes);
  j["collective"] = d.collective ? collective_json(*d.collective) : json(nullptr);
  json ranks = json::array();
  for (const auto& r : d.ranks) {
    json x = {{"rank", r.rank},
              {"host", r.host},
              {"pid", r.pid},
              // true / false when this host could check the pid, null when it could not (another host)
              {"alive", r.alive == Liveness::kUnknown ? json(nullptr) : json(r.alive == Liveness::kAlive)},
              {"liveness", std::string(analyzers::liveness_name(r.alive))},
              {"state", std::string(rank_state_name(r.state))},
              {"step", r.step},
              {"range", r.range},
              {"range_stack", r.range_stack},
              {"comm", r.waiting ? json(r.waiting->comm) : json(nullptr)},
              {"seq", r.waiting ? json(r.waiting->seq) : json(nullptr)},
              {"op", r.waiting ? json(std::string(format::op_name(r.waiting->op))) : json(nullptr)},
              {"waited_s", r.waiting ? json(r.waited_s) : json(nullptr)},
              {"idle_s", r.idle_s},
              {"heartbeat_age_s", r.heartbeat_age_s},
              {"last_completed_seq", r.last_completed_seq ? json(*r.last_completed_seq) : json(nullptr)}};
    if (r.os_state != OsRunState::kUnknown) x["os_state"] = std::string(os_run_state_name(r.os_state));
    if (!r.wchan.empty()) x["wchan"] = r.wchan;
    if (r.range_s > 0) x["range_s"] = r.range_s;
    if (!r.note.empty()) x["note"] = r.note;
    if (!r.stacks_file.empty()) x["stacks_file"] = r.stacks_file;
    ranks.push_back(std::move(x));
  }
  j["ranks"] = std::move(ranks);
  json grads = json::array();
  for (const auto& g : d.missing_gradients) grads.push_back({{"rank", g.rank}, {"param", g.param}, {"bucket", g.bucket}});
  j["missing_gradients"] = std::move(grads);
  if (d.mismatch) {
    json values = json::object();
    for (const auto& [r, v] : d.mismatch->values_by_rank) values[std::to_string(r)] = v;
    j["mismatch"] = {{"field", d.mismatch->field}, {"values_by_rank", values}};
  } else {
    j["mismatch"] = nullptr;
  }
  if (d.count_mismatch) {
    const CountMismatch& m = *d.count_mismatch;
    auto opt = [](const std::optional<uint64_t>& v) { return v ? json(*v) : json(nullptr); };
    json cm = {{"comm", m.comm},
               {"seq", m.seq},
               {"sender", m.sender < 0 ? json(nullptr) : json(m.sender)},
               {"receiver", m.receiver < 0 ? json(nullptr) : json(m.receiver)},
               {"sent", opt(m.sent)},
               {"expected", opt(m.expected)},
               {"difference", m.difference},
               {"unit", "elements"},
               {"row_elements", m.row_elements == 0 ? json(nullptr) : json(m.row_elements)},
               {"evidence", m.evidence},
               {"other_pairs", m.other_pairs}};
    if (m.row_elements > 0) {
      cm["sent_rows"] = m.sent ? json(*m.sent / m.row_elements) : json(nullptr);
      cm["expected_rows"] = m.expected ? json(*m.expected / m.row_elements) : json(nullptr);
    }
    j["count_mismatch"] = std::move(cm);
  } else {
    j["count_mismatch"] = nullptr;
  }
  j["headline"] = d.headline;
  j["explanation"] = d.explanation;
  j["problems"] = d.problems;
  j["run_dir"] = d.run_dir;
  j["world_size"] = d.world_size;
  j["reference_ns"] = d.reference_ns;
  j["stuck_for_s"] = d.stuck_for_s;
  j["times_are_lower_bounds"] = d.times_are_lower_bounds;
  j["time_basis"] = d.time_basis.empty() ? json(nullptr) : json(d.time_basis);
  j["recompute"] = d.recompute.empty() ? json(nullptr) : json(d.recompute);
  if (d.detection) {
    const Detection& x = *d.detection;
    json det = {{"by", x.by}};
    if (x.by == "learned_bound" || x.by == "peer_wait")
      det.update({{"rank", x.rank}, {"what", x.what}, {"open_s", x.open_s}, {"bound_s", x.bound_s},
                  {"quantile_s", x.quantile_s}, {"samples", x.samples}, {"basis", x.basis}});
    j["detection"] = det;
  } else {
    j["detection"] = nullptr;
  }
  return j;
}

}  // namespace rankscope::hang
