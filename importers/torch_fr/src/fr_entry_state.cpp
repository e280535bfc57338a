// fr_entry_state.cpp — the per-backend completion rules of fr_entry_state.h.
#include "fr_entry_state.h"

#include <algorithm>
#include <array>
#include <map>

namespace rankscope::torch_fr {
namespace {

// Backends whose process group gives the recorder device events (ProcessGroupNCCL and its kin).
bool records_device_events(std::string_view backend) {
  static constexpr std::array<std::string_view, 5> kEventBackends = {"nccl", "xccl", "ncclx", "hccl", "mccl"};
  return std::find(kEventBackends.begin(), kEventBackends.end(), backend) != kEventBackends.end();
}

}  // namespace

void decide_entry_states(FrDump& d, bool pg_status_saw_start) {
  // For an unknown backend: did any of its entries ever leave "scheduled"?
  std::map<std::string, bool> left_scheduled;
  for (const FrEntry& e : d.entries) left_scheduled[e.backend] = left_scheduled[e.backend] || e.state != "scheduled";
  bool event_entries = false;
  for (FrEntry& e : d.entries) {
    const bool events = e.backend == "gloo" ? false : records_device_events(e.backend) || left_scheduled[e.backend];
    e.signal = events ? CompletionSignal::kState : CompletionSignal::kRetired;
    if (events) {
      event_entries = true;
      e.completed = e.state == "completed";
      // A start time or a duration exists only where a start event did (timing on).
      e.started = e.state == "started" || e.time_started_ns != 0 || e.has_duration;
      e.aborted = e.retired && !e.completed;
      if (e.started) d.timing = true;
    } else {
      e.completed = e.retired || e.state == "completed";
      e.started = false;  // no device events: whether a worker thread runs it is not recorded
      e.aborted = false;
    }
  }
  if (event_entries && pg_status_saw_start) d.timing = true;
}

bool is_user_frame(std::string_view filename) {
  for (std::string_view torch_dir : {"site-packages/torch/", "dist-packages/torch/", "/torch/distributed/",
                                     "/torch/nn/parallel/", "/torch/utils/"}) {
    if (filename.find(torch_dir) != std::string_view::npos) return false;
  }
  return filename.rfind("torch/", 0) != 0;
}

}  // namespace rankscope::torch_fr
