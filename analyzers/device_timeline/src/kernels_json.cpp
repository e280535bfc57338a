// kernels_json.cpp — see kernels_json.h. Field names carry their unit (_ms, _us).
#include "rankscope/analyzers/device_timeline/kernels_json.h"

#include "units.h"

namespace rankscope::analyzers {
namespace {

using nlohmann::json;

using device_timeline::ms;
using device_timeline::us;

json idle_json(const IdleByCause& i) {
  return {{"host_wait_ms", ms(i.host_wait_ns)},
          {"kernel_wait_ms", ms(i.kernel_wait_ns)},
          {"other_ms", ms(i.other_ns)},
          {"idle_ms", ms(i.total_ns())},
          {"gaps", i.gaps}};
}

json distribution_json(const Distribution& d) {
  return {{"min", us(d.min_ns)}, {"median", us(d.median_ns)}, {"p95", us(d.p95_ns)}, {"max", us(d.max_ns)}};
}

json outliers_json(const std::vector<LaunchOutlier>& v) {
  json a = json::array();
  for (const auto& o : v)
    a.push_back({{"api", o.api},
                 {"kernel", o.kernel},
                 {"step", o.step},
                 {"cpu_us", us(o.cpu_ns)},
                 {"gpu_us", us(o.gpu_ns)},
                 {"delay_us", us(o.delay_ns)},
                 {"at_ms", o.at_ms}});
  return a;
}

json spread_json(const RankSpread& s) {
  return {{"min", s.min}, {"median", s.median}, {"max", s.max}, {"min_rank", s.min_rank}, {"max_rank", s.max_rank}};
}

json rank_json(const RankKernels& r) {
  json j = {{"rank", r.rank}};
  if (!r.problem.empty()) {
    j["problem"] = r.problem;
    return j;
  }
  j["traced_steps"] = r.traced_steps;
  j["step_ms"] = r.step_ms;
  j["ops"] = r.ops;
  j["overlap"] = {{"communication_ms", ms(r.overlap.communication_ns)},
                  {"compute_ms", ms(r.overlap.compute_ns)},
                  {"overlap_ms", ms(r.overlap.overlap_ns)},
                  {"ratio", r.overlap.ratio ? json(*r.overlap.ratio) : json(nullptr)},
                  {"exposed_communication_ms_per_step", r.overlap.exposed_ms_per_step}};
  json streams = json::array();
  for (const auto& s : r.idle.streams) {
    json x = idle_json(s.idle);
    x["device"] = s.device;
    x["stream"] = s.stream;
    streams.push_back(std::move(x));
  }
  j["idle"] = {{"span_ms", ms(r.idle.span_ns)},
               {"host_bound", r.idle.host_bound},
               {"host_wait_ms_per_step", r.idle.host_wait_ms_per_step},
               {"device", idle_json(r.idle.device)},
               {"streams", std::move(streams)}};
  json kinds = json::array();
  for (const auto& k : r.kinds) {
    json top = json::array();
    for (const auto& s : k.top)
      top.push_back({{"name", s.name},
                     {"rule", s.rule},
                     {"count", s.count},
                     {"total_ms", ms(s.total_ns)},
                     {"mean_us", s.count ? us(s.total_ns) / double(s.count) : 0.0},
                     {"min_us", us(s.min_ns)},
                     {"max_us", us(s.max_ns)}});
    kinds.push_back({{"kind", format::kernel_class_name(k.kind)},
                     {"count", k.count},
                     {"total_ms", ms(k.total_ns)},
                     {"busy_ms", ms(k.busy_ns)},
                     {"others_ms", ms(k.others_ns)},
                     {"top", std::move(top)}});
  }
  j["breakdown"] = std::move(kinds);
  const LaunchStats& l = r.launches;
  json apis = json::array();
  for (const auto& [name, n] : l.apis) apis.push_back({{"name", name}, {"count", n}});
  j["launches"] = {{"launches", l.launches},
                   {"ops_without_launch", l.ops_without_launch},
                   {"cpu_us", distribution_json(l.cpu)},
                   {"gpu_us", distribution_json(l.gpu)},
                   {"delay_us", distribution_json(l.delay)},
                   {"short_kernels", l.short_kernels},
                   {"runtime_outliers", l.runtime_outliers},
                   {"delay_outliers", l.delay_outliers},
                   {"longest_calls", outliers_json(l.longest_calls)},
                   {"longest_delays", outliers_json(l.longest_delays)},
                   {"apis", std::move(apis)}};
  json queues = json::array();
  for (const auto& q : r.queues) {
    json series = json::array();
    for (const auto& [at, n] : q.series) series.push_back({at, n});
    queues.push_back({{"device", q.device},
                      {"stream", q.stream},
                      {"launches", q.launches},
                      {"max_length", q.max_length},
                      {"time_at_max_ms", ms(q.time_at_max_ns)},
                      {"time_at_limit_ms", ms(q.time_at_limit_ns)},
                      {"mean_length", q.mean_length},
                      {"series", std::move(series)}});
  }
  j["queues"] = std::move(queues);
  return j;
}

}  // namespace

json kernels_report_json(const KernelsReport& report) {
  const KernelsOptions& o = report.options;
  json j = {{"schema_version", kKernelsJsonSchemaVersion},
            {"kind", "rankscope.kernels"},
            {"run_dir", report.run_dir},
            {"world_size", report.world_size}};
  j["options"] = {{"comm_kernel_patterns", report.comm_patterns},
                  {"kernel_wait_threshold_us", us(o.kernel_wait_threshold_ns)},
                  {"runtime_outlier_us", us(o.runtime_outlier_ns)},
                  {"launch_delay_outlier_us", us(o.launch_delay_outlier_ns)},
                  {"top_kernels", o.top_kernels},
                  {"low_overlap", o.low_overlap},
                  {"host_bound_share", o.host_bound_share},
                  {"cuda_queue_limit", o.cuda_queue_limit}};
  json ranks = json::array();
  for (const auto& r : report.ranks) ranks.push_back(rank_json(r));
  j["ranks"] = std::move(ranks);
  json kinds = json::array(), kernels = json::array();
  for (const auto& k : report.kind_spread) {
    json x = spread_json(k.ms_per_step);
    x["kind"] = format::kernel_class_name(k.kind);
    kinds.push_back(std::move(x));
  }
  for (const auto& k : report.kernel_spread) {
    json x = spread_json(k.ms_per_step);
    x["name"] = k.name;
    x["kind"] = format::kernel_class_name(k.kind);
    kernels.push_back(std::move(x));
  }
  j["spread_ms_per_step"] = {{"kinds", std::move(kinds)}, {"kernels", std::move(kernels)}};
  json findings = json::array();
  for (const auto& f : report.findings)
    findings.push_back(
        {{"kind", f.kind}, {"ranks", f.ranks}, {"cost_ms_per_step", f.cost_ms_per_step}, {"text", f.text}});
  j["findings"] = std::move(findings);
  j["problems"] = report.problems;
  return j;
}

}  // namespace rankscope::analyzers
