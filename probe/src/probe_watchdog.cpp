// probe_watchdog.cpp — what the watchdog thread does every poll: heartbeat, completes asynchronous
// collectives whose CompletionSource says done, and reports a collective or main-thread range open
// past the timeout (flight-recorder event, flush, native stacks of every thread into evidence/).
//
// Each stuck item is reported once. A collective timeout silences the range timeout while any
// stuck collective is still open, since the range is stuck only because the collective is.
#include <signal.h>

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "probe_impl.h"
#include "rankscope/format/clock.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/probe/stack_capture.h"

namespace rankscope::probe {
namespace {

constexpr double kStackToolLimitS = 10.0;

}  // namespace

void Probe::Impl::watchdog_tick() {
  int64_t now = now_unix_ns();
  flight->heartbeat(now);
  poll_pending_completions(now);
  if (options.learned_bounds) {
    learn_bounds(now);
    detect_past_bounds(now);
  }
  if (options.watchdog_timeout_s > 0) detect_stuck(now);
}

void Probe::Impl::poll_pending_completions(int64_t now_ns) {
  std::vector<PendingCompletion> polling;
  {
    std::lock_guard<std::mutex> lock(pending_mutex);
    if (pending.empty()) return;
    polling.swap(pending);
  }
  std::vector<PendingCompletion> still;
  for (PendingCompletion& pc : polling) {
    if (pc.source->poll_done()) {
      if (pc.marks_start) {
        flight->collective_start(pc.handle.comm, pc.handle.seq, now_ns);
        collectives.mark_started(pc.handle.event_index, pc.handle.comm, pc.handle.seq, now_ns);
      } else {
        complete(pc.handle, pc.source->failed(), now_ns);
      }
    } else {
      still.push_back(std::move(pc));
    }
  }
  std::lock_guard<std::mutex> lock(pending_mutex);
  for (PendingCompletion& pc : still) pending.push_back(std::move(pc));
  watchdog.set_fast(!pending.empty());
}

void Probe::Impl::detect_stuck(int64_t now_ns) {
  const int64_t timeout_ns = static_cast<int64_t>(options.watchdog_timeout_s * 1e9);
  uint64_t last = collectives.next_index();
  uint64_t first = std::max(watchdog_scan_from,
                            last > CollectiveTable::kCapacity ? last - CollectiveTable::kCapacity : 0);
  uint64_t first_open = last;
  std::optional<CollectiveView> oldest_new;
  int newly_stuck = 0;
  bool any_stuck_open = false;
  for (uint64_t i = first; i < last; ++i) {
    std::optional<CollectiveView> v = collectives.view(i);
    if (!v || !format::is_open(v->state)) continue;
    first_open = std::min(first_open, i);
    if (now_ns - v->enqueue_ns < timeout_ns) continue;
    any_stuck_open = true;
    if (v->reported) continue;
    ++newly_stuck;
    collectives.mark_reported(i);
    if (!oldest_new) oldest_new = v;
  }
  watchdog_scan_from = first_open;  // completed prefixes are never scanned again

  if (oldest_new) {
    const CollectiveView& v = *oldest_new;
    std::string what = fmt::format("{} #{} on '{}' ({} bytes, {})", format::op_name(v.op), v.seq,
                                   comm_names[static_cast<size_t>(v.comm)], v.bytes, format::state_name(v.state));
    if (newly_stuck > 1) what += fmt::format(" and {} more", newly_stuck - 1);
    report_stuck(format::WatchdogKind::kCollectiveTimeout, v.comm, v.seq, v.enqueue_ns, now_ns, what,
                 fmt::format("the {:.3f} s watchdog timeout", options.watchdog_timeout_s), options.watchdog_timeout_s);
    return;
  }
  if (any_stuck_open) return;

  const ThreadState& main = threads[0];
  uint32_t depth = main.published_depth.load(std::memory_order_acquire);
  if (depth == 0) return;
  uint32_t d = std::min(depth, kMaxTimedDepth) - 1;
  uint32_t name = main.frames[d].name.load(std::memory_order_relaxed);
  int64_t begin = main.frames[d].begin_ns.load(std::memory_order_relaxed);
  if (now_ns - begin < timeout_ns) return;
  if (begin == reported_range_begin_ns && name == reported_range_name) return;
  reported_range_begin_ns = begin;
  reported_range_name = name;
  report_stuck(format::WatchdogKind::kRangeTimeout, -1, 0, begin, now_ns,
               fmt::format("range '{}' of the main thread", name_of(name)),
               fmt::format("the {:.3f} s watchdog timeout", options.watchdog_timeout_s), options.watchdog_timeout_s);
}

void Probe::Impl::report_stuck(format::WatchdogKind kind, int comm_index, uint64_t comm_seq,
                               int64_t since_ns, int64_t now_ns, const std::string& what,
                               const std::string& limit, double limit_s) {
  format::WatchdogEventDesc event;
  event.kind = kind;
  event.time_ns = now_ns;
  event.comm_index = comm_index;
  event.comm_seq = comm_seq;
  event.waited_ns = now_ns - since_ns;
  event.range = std::string(name_of(innermost(&threads[0])));
  event.message = fmt::format("{} open for {:.3f} s, past {}", what, static_cast<double>(event.waited_ns) * 1e-9, limit);
  std::filesystem::path stacks_file;
  if (options.watchdog_stacks) {
    stacks_file = format::evidence_path(options.run_dir, options.rank, "watchdog", now_ns / 1'000'000);
    event.stacks_file = stacks_file.lexically_relative(options.run_dir).string();
  }
  // The event is on disk before the (slower) stack capture, so it survives even if that hangs.
  flight->record_watchdog(event);
  flight->sync();
  {
    std::unique_lock<std::mutex> lock(stream_mutex, std::try_to_lock);  // never wait on a wedged writer
    if (lock.owns_lock()) flush_stream_locked();
  }
  logger.warn(LogSubsys::kWatchdog, "{} (step {}, innermost range '{}'){}", event.message,
              step.load(std::memory_order_relaxed), event.range,
              stacks_file.empty() ? std::string{} : fmt::format("; stacks -> {}", event.stacks_file));

  if (!stacks_file.empty()) {
    StackCaptureRequest request;
    request.pid = pid;
    request.output = stacks_file;
    request.time_limit_s = kStackToolLimitS;
    request.header = fmt::format(
        "# rankscope watchdog stacks\n# run_id: {}\n# rank: {}\n# pid: {}\n# host: {}\n# step: {}\n"
        "# kind: {}\n# reason: {}\n# innermost_range: {}\n# detected_at_ns: {}\n",
        options.run_id, options.rank, pid, host, step.load(std::memory_order_relaxed),
        format::watchdog_kind_name(kind), event.message, event.range, now_ns);
    Result<StackCaptureResult> captured = capture_native_stacks(request);
    if (captured.ok()) {
      logger.info(LogSubsys::kWatchdog, "stacks written by {} in {:.3f} s ({:.3f} s with the detail pass)",
                  captured->tool, captured->elapsed_s, captured->total_s);
    } else {
      event.message += fmt::format(" (stack capture failed: {})", captured.status().message());
      flight->record_watchdog(event);
      logger.warn(LogSubsys::kWatchdog, "stack capture failed: {}", captured.status().to_string());
    }
  }
  // Latency from "became stuck" (since + limit) to "evidence complete"; the budget is 1 s.
  logger.info(LogSubsys::kWatchdog, "evidence complete {:.3f} s after the limit expired",
              static_cast<double>(now_unix_ns() - since_ns) * 1e-9 - limit_s);

  // A suspicion is evidence, not a verdict: only the fixed timeout (the ceiling) may abort.
  if (options.watchdog_abort && kind != format::WatchdogKind::kSuspectedHang) {
    aborted.store(true);
    flight->set_process_state(format::ProcessState::kAborted);
    flight->sync();
    logger.warn(LogSubsys::kWatchdog, "aborting the process as RANKSCOPE_WATCHDOG_ABORT asks");
    ::raise(SIGABRT);
  }
}

}  // namespace rankscope::probe
