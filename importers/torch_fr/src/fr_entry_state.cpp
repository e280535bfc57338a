// fr_entry_state.cpp — the per-backend completion rules of fr_entry_state.h.
#include "fr_entry_state.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace rankscope::torch_fr {
namespace {

// Backends whose process group gives the recorder device events (ProcessGroupNCCL and its kin).
bool records_device_events(std::string_view backend) {
  static constexpr std::array<std::string_view, 5> kEventBackends = {"nccl", "xccl", "ncclx", "hccl", "mccl"};
  return std::find(kEventBackends.begin(), kEventBackends.end(), backend) != kEventBackends.end();
}

}  // namespace

void decide_entry_states(FrDump& d, bool pg_status_saw_start) {
  // Per backend (a dump has one or two): does it record device events, or, for an unknown backend,
  // did any of its entries ever leave "scheduled"?
  struct Backend {
    std::string_view name;
    bool left_scheduled = false;
    bool events = false;
  };
  std::vector<Backend> backends;
  // Backends and states are pooled views (fr_dump.h): the text at the place looked at last is
  // known without comparing bytes (2000 entries a rank, 1024 ranks).
  size_t last_backend = 0;
  auto search = [&](std::string_view name) -> Backend& {
    for (Backend& b : backends)
      if (b.name == name) {
        last_backend = size_t(&b - backends.data());
        return b;
      }
    last_backend = backends.size();
    return backends.emplace_back(Backend{name});
  };
  auto backend_of = [&](std::string_view name) -> Backend& {  // the last one by place, inline; else the search
    if (last_backend < backends.size() && backends[last_backend].name.data() == name.data() &&
        backends[last_backend].name.size() == name.size()) [[likely]]
      return backends[last_backend];
    return search(name);
  };
  struct State {
    std::string_view text;
    bool scheduled = false, started = false, completed = false;
  } state;
  auto state_of = [&](std::string_view text) -> const State& {
    if (state.text.data() != text.data() || state.text.size() != text.size())
      state = {text, text == "scheduled", text == "started", text == "completed"};
    return state;
  };
  for (const FrEntry& e : d.entries) {
    Backend& b = backend_of(e.backend);
    b.left_scheduled = b.left_scheduled || !state_of(e.state).scheduled;
  }
  for (Backend& b : backends) b.events = b.name == "gloo" ? false : records_device_events(b.name) || b.left_scheduled;
  bool event_entries = false;
  for (FrEntry& e : d.entries) {
    const bool events = backend_of(e.backend).events;
    e.signal = events ? CompletionSignal::kState : CompletionSignal::kRetired;
    const State& st = state_of(e.state);
    if (events) {
      event_entries = true;
      e.completed = st.completed;
      // A start time or a duration exists only where a start event did (timing on).
      e.started = st.started || e.time_started_ns != 0 || e.has_duration;
      e.aborted = e.retired && !e.completed;
      if (e.started) d.timing = true;
    } else {
      e.completed = e.retired || st.completed;
      e.started = false;  // no device events: whether a worker thread runs it is not recorded
      e.aborted = false;
    }
  }
  if (event_entries && pg_status_saw_start) d.timing = true;
}

bool reopen_failed_retirements(std::map<int, FrDump>& dumps, const std::map<std::string, FrGroup>& groups) {
  // Only entries that complete by `retired` (Gloo's) can be reopened: most jobs have none.
  bool any = false;
  for (const auto& [rank, d] : dumps)
    for (const FrEntry& e : d.entries) any = any || (e.signal == CompletionSignal::kRetired && e.completed);
  if (!any) return false;
  bool reopened = false;
  for (const auto& [name, group] : groups) {
    // The least any whole member issued on this group (collective seqs; pg_status where no p2p
    // mixes its seqs in). A member with no evidence about the group says nothing.
    int64_t least_issued = INT64_MAX;
    for (int member : group.ranks) {
      auto it = dumps.find(member);
      if (it == dumps.end() || it->second.partial) continue;
      const FrDump& d = it->second;
      int64_t issued = -1;
      bool p2p = false;
      for (const FrEntry& e : d.entries) {
        if (e.group != name) continue;
        p2p = p2p || e.is_p2p;
        if (!e.is_p2p) issued = std::max(issued, e.collective_seq);
      }
      if (auto st = d.status.find(name); st != d.status.end() && !p2p) issued = std::max(issued, st->second.last_enqueued);
      if (issued >= 0) least_issued = std::min(least_issued, issued);
    }
    if (least_issued == INT64_MAX) continue;
    for (int member : group.ranks) {
      auto it = dumps.find(member);
      if (it == dumps.end()) continue;
      for (FrEntry& e : it->second.entries) {
        if (e.group != name || e.is_p2p || e.signal != CompletionSignal::kRetired || !e.completed) continue;
        if (e.collective_seq <= least_issued) continue;
        e.completed = false;
        e.aborted = true;
        reopened = true;
      }
    }
  }
  return reopened;
}

std::vector<std::string> close_late_retirements(std::map<int, FrDump>& dumps, const std::map<std::string, FrGroup>& groups) {
  std::vector<std::string> notes;
  for (const auto& [name, group] : groups) {
    // Per collective seq of this group: how many members retired it as completed, and who holds it open.
    std::map<int64_t, int> retired;
    std::map<int64_t, std::vector<std::pair<int, FrEntry*>>> open;  // (rank, entry)
    size_t whole_members = 0;
    for (int member : group.ranks) {
      auto it = dumps.find(member);
      if (it == dumps.end() || it->second.partial) continue;
      ++whole_members;
      for (FrEntry& e : it->second.entries) {
        if (e.group != name || e.is_p2p || e.signal != CompletionSignal::kRetired) continue;
        if (e.completed) ++retired[e.collective_seq];
        else if (!e.aborted) open[e.collective_seq].emplace_back(member, &e);
      }
    }
    for (auto& [seq, entries] : open) {
      if (entries.size() != 1 || whole_members < 2 || size_t(retired[seq]) + 1 != whole_members) continue;
      const auto [rank, entry] = entries.front();
      FrEntry& e = *entry;
      e.completed = true;
      notes.push_back(fmt::format("rank {}'s {} #{} on {} was still open in its dump while every other member "
                                  "had retired it: Gloo retires an entry after the call returned (a dump taken in "
                                  "between); read as completed", rank, e.profiling_name, seq,
                                  group.desc.empty() ? "group " + name : fmt::format("{} (group {})", group.desc, name)));
    }
  }
  return notes;
}

bool is_user_frame(std::string_view filename) {
  for (std::string_view torch_dir : {"site-packages/torch/", "dist-packages/torch/", "/torch/distributed/",
                                     "/torch/nn/parallel/", "/torch/utils/"}) {
    if (filename.find(torch_dir) != std::string_view::npos) return false;
  }
  return filename.rfind("torch/", 0) != 0;
}

}  // namespace rankscope::torch_fr
