// skew_json.cpp — see skew_json.h. Field names and units are those of the schema file.
#include "rankscope/analyzers/skew/skew_json.h"

#include <cmath>

namespace rankscope::analyzers {
namespace {

using nlohmann::json;

json number_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json device_json(const DeviceBreakdown& d) {
  return {{"traced_steps", d.traced_steps},
          {"first_traced_step", d.first_traced_step},
          {"last_traced_step", d.last_traced_step},
          {"step_ms", d.step_ms},
          {"busy_ms", d.busy_ms},
          {"compute_ms", d.compute_ms},
          {"transfer_ms", d.transfer_ms},
          {"memcpy_ms", d.memcpy_ms},
          {"idle_ms", d.idle_ms},
          {"host_bound_ms", d.host_bound_ms},
          {"kernel_ms", d.kernel_ms},
          {"outside_ranges_ms", d.outside_ranges_ms},
          {"range_ms", d.range_ms}};
}

// The rank fields of the mean, with the ranges as a list, largest first.
json device_summary_json(const DeviceSummary& s) {
  json j = device_json(s.mean);
  j.erase("range_ms");
  j["ranks"] = s.ranks;
  j["ranges"] = json::array();
  for (const auto& [name, ms] : s.ranges_ms) j["ranges"].push_back({{"range", name}, {"ms", ms}});
  return j;
}

json rank_json(const RankSkew& r) {
  json j = {{"rank", r.rank}, {"present", r.present}, {"steps", r.steps}};
  if (!r.present) return j;
  j["step_ms"] = {{"median", r.step_ms_median}, {"p90", r.step_ms_p90}, {"max", r.step_ms_max}, {"mad", r.step_ms_mad}};
  j["breakdown_ms"] = {{"source", r.breakdown_source},
                       {"compute", r.compute_ms},
                       {"collective_wait", r.collective_wait_ms},
                       {"collective_transfer", r.collective_transfer_ms},
                       {"memcpy", r.memcpy_ms},
                       {"idle", r.idle_ms}};
  if (r.idle_collective_wait_ms > 0) j["breakdown_ms"]["idle_collective_wait"] = r.idle_collective_wait_ms;
  if (r.collective_overlap_ms > 0) j["breakdown_ms"]["collective_overlap"] = r.collective_overlap_ms;
  if (r.device) {
    const HostBreakdown& h = r.host_breakdown;
    j["host_breakdown_ms"] = {{"compute", h.compute_ms}, {"collective_wait", h.collective_wait_ms},
                              {"collective_transfer", h.collective_transfer_ms}, {"idle", h.idle_ms}};
    j["device"] = device_json(*r.device);
  }
  j["noncomm_ms_median"] = r.noncomm_ms_median;
  j["straggler_score"] = {{"relative", r.relative_score}, {"individual", r.individual_score}};
  j["clock"] = {{"offset_ms", r.clock_offset_ms}, {"uncertainty_ms", r.clock_uncertainty_ms}};
  j["top_level_ms"] = r.top_level_ms;
  j["counters"] = r.counters;
  return j;
}

json site_json(const CollectiveSite& s) {
  json ranks = json::array();
  for (const SiteRank& r : s.ranks) {
    ranks.push_back({{"rank", r.rank},
                     {"arrival_rel_last_ms", r.arrival_rel_last_ms},
                     {"wait_ms", r.wait_ms},
                     {"last_fraction", r.last_fraction},
                     {"late_margin_ms", r.late_margin_ms},
                     {"cost_ms_per_step", r.cost_ms_per_step}});
  }
  return {{"comm", s.comm}, {"op", s.op}, {"ordinal", s.ordinal}, {"range", s.range},
          {"instances", s.instances}, {"bytes", s.bytes}, {"transfer_ms", s.transfer_ms}, {"algbw_gbps", s.algbw_gbps},
          {"busbw_gbps", s.busbw_gbps}, {"ranks", std::move(ranks)}};
}

json step_detail_json(const StepDetail& d) {
  json collectives = json::array();
  for (const CollectiveInstance& c : d.collectives) {
    json ranks = json::array();
    for (const InstanceRank& r : c.ranks) {
      ranks.push_back({{"rank", r.rank}, {"arrival_rel_last_ms", r.arrival_rel_last_ms}, {"wait_ms", r.wait_ms}});
    }
    collectives.push_back({{"comm", c.comm}, {"seq", c.seq}, {"op", c.op}, {"range", c.range}, {"ranks", std::move(ranks)}});
  }
  return {{"step", d.step}, {"collectives", std::move(collectives)}};
}

json counter_json(const CounterSkew& c) {
  json j = {{"name", c.name}, {"mean", c.mean}, {"max", c.max}, {"min", c.min}, {"imbalance", c.imbalance},
            {"max_rank", c.max_rank}, {"min_rank", c.min_rank}, {"groups_of_kind", c.groups_of_kind}, {"groups_over_threshold", c.groups_over_threshold}};
  if (c.worst_group) {
    const auto& g = *c.worst_group;
    j["worst_group"] = {{"group", g.group}, {"imbalance", g.imbalance}, {"max_rank", g.max_rank},
                        {"min_rank", g.min_rank}, {"max", g.max}, {"min", g.min}, {"size", g.size}};
  } else {
    j["worst_group"] = nullptr;
  }
  return j;
}

json finding_json(const Finding& f) {
  json j = {{"kind", f.kind}, {"ranks", f.ranks}, {"range", f.range},
            {"cost_ms_per_step", f.cost_ms_per_step}, {"text", f.text}};
  if (!f.comm.empty()) j["comm"] = f.comm;
  if (!f.counter.empty()) j["counter"] = f.counter;
  if (!f.cls.empty()) j["class"] = f.cls;
  if (f.slowdown_factor > 0) j["slowdown_factor"] = f.slowdown_factor;
  if (f.share_ratio > 0) j["share_ratio"] = f.share_ratio;
  if (!f.share_text.empty()) j["share"] = f.share_text;
  if (!f.waiters.empty()) {
    json w = json::array();
    for (const Waiter& x : f.waiters) {
      w.push_back({{"rank", x.rank}, {"op", x.op}, {"range", x.range}, {"wait_ms", x.wait_ms}, {"gpu_idle", x.gpu_idle}});
    }
    j["waiters"] = std::move(w);
    j["waiters_total"] = f.waiters_total;
  }
  if (!f.caveats.empty()) j["caveats"] = f.caveats;
  return j;
}

}  // namespace

nlohmann::json to_json(const SkewReport& report) {
  json j;
  j["schema_version"] = kSkewReportSchemaVersion;
  j["kind"] = "rankscope.skew";
  j["run_dir"] = report.run_dir;
  j["run_id"] = report.run_id;
  j["world_size"] = report.world_size;
  j["steps"] = {{"first", report.first_step}, {"last", report.last_step}, {"count", report.steps}};
  j["step_ms_median"] = report.step_ms_median;
  j["ranks"] = json::array();
  for (const auto& r : report.ranks) j["ranks"].push_back(rank_json(r));
  j["collectives"] = json::array();
  for (const auto& s : report.collectives) j["collectives"].push_back(site_json(s));
  j["groups"] = json::array();
  for (const auto& g : report.groups) {
    j["groups"].push_back({{"comm", g.comm}, {"ranks", g.ranks}, {"calls_per_step", g.calls_per_step},
                           {"bytes_per_step", g.bytes_per_step}, {"transfer_ms_per_step", g.transfer_ms_per_step},
                           {"algbw_gbps", g.algbw_gbps}, {"busbw_gbps", g.busbw_gbps}});
  }
  j["step_detail"] = step_detail_json(report.step_detail);
  j["counters"] = json::array();
  for (const auto& c : report.counters) j["counters"].push_back(counter_json(c));
  json values = json::array();
  for (const auto& row : report.heatmap.values_ms) {
    json jr = json::array();
    for (double v : row) jr.push_back(number_or_null(v));
    values.push_back(std::move(jr));
  }
  j["heatmap"] = {{"rank_labels", report.heatmap.rank_labels},
                  {"step_labels", report.heatmap.step_labels},
                  {"values_ms", std::move(values)}};
  j["findings"] = json::array();
  for (const auto& f : report.findings) j["findings"].push_back(finding_json(f));
  for (const BelowNoise& b : report.below_noise)
    j["below_noise"].push_back({{"rank", b.rank}, {"kind", b.kind}, {"sites", b.sites}, {"delay_ms", b.delay_ms}, {"noise_ms", b.noise_ms}});
  if (report.what_if) {
    const auto& w = *report.what_if;
    j["what_if"] = {{"rank", w.rank}, {"step_ms", w.step_ms}, {"estimated_step_ms", w.estimated_step_ms}, {"text", w.text}};
  } else {
    j["what_if"] = nullptr;
  }
  if (report.expert_load) {
    const ExpertLoad& x = *report.expert_load;
    json ranks = json::array();
    for (const auto& r : x.ranks)
      ranks.push_back({{"rank", r.rank}, {"group", r.group}, {"tokens_received", r.tokens_received}, {"experts_ms", r.experts_ms}});
    json balanced = nullptr;
    if (x.balanced)
      balanced = {{"rank", x.balanced->rank}, {"step_ms", x.balanced->step_ms},
                  {"estimated_step_ms", x.balanced->estimated_step_ms}, {"text", x.balanced->text}};
    j["expert_load"] = {{"experts", x.experts},          {"step_labels", x.step_labels}, {"tokens", x.tokens},
                        {"share", x.share},              {"imbalance", x.imbalance},     {"hottest_expert", x.hottest_expert},
                        {"ranks", std::move(ranks)},     {"ms_per_token", x.ms_per_token}, {"balanced", std::move(balanced)}};
  }
  j["device"] = report.device ? device_summary_json(*report.device) : json(nullptr);
  j["partial_ranks"] = json::array();
  for (const PartialRank& p : report.partial_ranks) {
    j["partial_ranks"].push_back({{"rank", p.rank},
                                  {"reason", p.reason},
                                  {"last_step", p.last_step},
                                  {"last_complete_step", p.last_complete_step},
                                  {"last_complete_device_step", p.last_complete_device_step},
                                  {"device_cut", p.device_cut},
                                  {"left_out", p.left_out}});
  }
  j["problems"] = report.problems;
  return j;
}

}  // namespace rankscope::analyzers
