// fr_chrome.cpp — Flight Recorder dumps as a Chrome trace (see fr_chrome.h).
#include "rankscope/torch_fr/fr_chrome.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace rankscope::torch_fr {

Result<FrChromeSummary> write_fr_chrome_trace(const FrImport& imp, std::ostream& out) {
  FrChromeSummary s;
  int64_t t0 = INT64_MAX, newest = 0;
  for (const auto& rf : imp.run.ranks) {
    if (!rf.flight) continue;
    for (const auto& c : rf.flight->comms)
      for (const auto& r : c.ring) {
        if (r.enqueue_ns) t0 = std::min(t0, r.enqueue_ns);
        newest = std::max({newest, r.enqueue_ns, r.end_ns});
      }
  }
  if (t0 == INT64_MAX) t0 = 0;
  nlohmann::json events = nlohmann::json::array();
  for (const auto& rf : imp.run.ranks) {
    if (!rf.flight) continue;
    ++s.ranks;
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", rf.rank}, {"args", {{"name", "rank " + std::to_string(rf.rank)}}}});
    for (const auto& c : rf.flight->comms) {
      events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", rf.rank}, {"tid", c.index}, {"args", {{"name", c.name}}}});
      for (const auto& r : c.ring) {
        const int64_t end = r.end_ns ? r.end_ns : newest;
        events.push_back({{"ph", "X"},
                          {"name", std::string(format::short_op_name(r.op)) + " #" + std::to_string(r.seq)},
                          {"pid", rf.rank},
                          {"tid", c.index},
                          // In doubles: a corrupt dump's times can be anything, and int64 differences overflow.
                          {"ts", (double(r.enqueue_ns) - double(t0)) / 1e3},
                          {"dur", std::max(0.0, double(end) - double(r.enqueue_ns)) / 1e3},
                          {"args",
                           {{"group", c.name},
                            {"seq", r.seq},
                            {"op", std::string(format::op_name(r.op))},
                            {"count", r.count},
                            {"dtype", std::string(format::dtype_name(r.dtype))},
                            {"state", std::string(format::state_name(r.state))},
                            {"call_site", r.range}}}});
        ++s.events;
      }
    }
  }
  out << nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"},
                        {"otherData", {{"source", "PyTorch Flight Recorder " + imp.version}}}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);  // names from a dump may not be UTF-8
  return s;
}

}  // namespace rankscope::torch_fr
