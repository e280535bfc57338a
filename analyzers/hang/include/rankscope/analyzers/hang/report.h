// report.h — hangdoctor's two outputs of a Diagnosis: text for people, JSON for programs.
//
// Text: the one-line verdict, then the ranks grouped by identical state ("ranks 0,2-7: waiting in
// allreduce #57 on tp0 since 31 s"), then the evidence (open ranges, last completed collectives,
// stacks). JSON (schema_version 2): verdict, kind, culprit_ranks, collective {comm, seq, op, dtype,
// count, bytes}, ranks[] {rank, host, pid, alive, state, step, range, range_stack, comm, seq,
// waited_s, last_completed_seq} (alive: true/false where the pid could be checked on this host, null
// elsewhere; liveness: alive|gone|unknown), missing_gradients[] {rank, param, bucket}, mismatch {field,
// values_by_rank}, explanation, plus headline, problems and timing; with --wait, the CLI adds
// wait {quiet_s, samples, stalled, hang_to_verdict_s}. Fields are only ever added.
// Version 2 (meaning changed): a rank whose heartbeat stopped while its process exists here but no
// thread runs is state "frozen" (was "running") and kind "rank_frozen", with ranks[].os_state
// (stopped|traced|uninterruptible|zombie|runnable) and wchan; ranks stuck with no rank ahead of
// them (one process) are kind "stuck_in_compute" (was "lagging_rank"); ranks[].range_s (time in the
// innermost open range), top-level recompute (run.json's recompute setting in words, or null) and
// detection {by: learned_bound|forming|no_progress|watched|dead_or_frozen; for learned_bound also rank,
// what, open_s, bound_s, quantile_s, samples}, null when healthy or finished.
// Added within version 2 (MoE): kind "a2a_count_mismatch" (verdict desync) with count_mismatch
// {comm, seq, sender, receiver (world ranks, null when not located), sent, expected (elements, null
// when only digests were kept), difference (sent - expected), unit "elements", row_elements (null
// unknown), sent_rows, expected_rows (when row_elements is known), evidence exact|sketch|totals,
// other_pairs}; null for every other kind. culprit_ranks lists the receiver, then the sender.
// Added within version 2 (dump times): times_are_lower_bounds (true for PyTorch Flight Recorder dumps,
// which do not record when they were written: stuck_for_s, waited_s and idle_s are "at least") and
// time_basis (the sentence saying what the bound rests on, null for run directories); detection.by
// "dump" when dumps with a pending collective were read.
// Added within version 2 (across hosts): culprits[] {rank, host} (culprit_ranks with their
// hosts), hosts (distinct hosts among the ranks) and node_findings[] {host, ranks, host_ranks, state,
// cause, os_state (frozen), liveness (dead)}: most or all ranks of one host in the same state while
// other hosts' ranks wait on them (empty with one host). With one node finding its ranks are all
// in culprit_ranks and the headline names the node ("HANG: node n4: ranks 12-15 all stopped ...").
// Added within version 2 (many groups): waits_on_culprits[] {culprit, missing_from[]
// {collective, waiters}, behind, behind_via}: per culprit, the collectives it never entered with the
// ranks waiting in them, then the ranks waiting on those in turn and through which communicators.
// Added within version 2 (logs): kinds "rank_error" (verdict crash: a rank printed a network
// or CUDA error) and "init_incomplete" (verdict hang), and, when hangdoctor read a log, log {summary,
// findings[] {kind, problem, ranks, hosts, peer, text, evidence}, cannot_tell[]}.
// Added within version 2 (stacks and the joined verdict, docs/STACKS.md): when hangdoctor read stacks,
// stacks {summary, groups[] {ranks, what}, outliers, outliers_still, min_snapshots, ranks[] {rank,
// where (collective|backward|dataloader|elsewhere|no_stack), own_frame, call, snapshots, moved,
// thread}, problems[], server_files[]}; when it read two kinds of artifact or more (dumps, logs,
// stacks), joined {artifacts[] {artifact (dumps|log|stacks), verdict, kind, culprit_ranks, headline},
// culprits[] {rank, evidence[] {artifact, blames, says}}, disagreements[]}; detection.by "stacks".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rankscope/analyzers/hang/diagnosis.h"

namespace rankscope::analyzers::hang {

inline constexpr int kHangReportSchemaVersion = 2;

// What the CLI knows beyond the diagnosis: how --wait went, and the gather of a multi-node run.
struct WaitSummary {
  double quiet_s = 0;
  int samples = 0;
  bool stalled = false;
  std::optional<double> hang_to_verdict_s;  // when stalled
};
struct GatherSummary {
  uint64_t nodes_asked = 0;
  int nodes_answered = 0;
  double seconds = 0;
  uint64_t stream_bytes = 0;
  std::vector<std::string> findings;  // the gather's own lines (headline, unreachable nodes, ...)
};
// What a job's log said beyond its progress: errors, init, settings, topology.
struct LogReport {
  struct Finding {
    std::string kind;     // network_error | cuda_error | nccl_error | init_incomplete | watchdog_timeout |
                          // setting | topology | version
    bool problem = true;  // false: informational
    std::vector<int> ranks;
    std::vector<std::string> hosts;
    std::string peer;
    std::string text;
    std::string evidence;
  };
  std::string summary;
  std::vector<Finding> findings;
  std::vector<std::string> cannot_tell;
};
struct ReportExtras {
  std::optional<WaitSummary> wait;
  std::optional<LogReport> log;
  std::optional<GatherSummary> gather;
  std::optional<nlohmann::json> stacks;  // stack_json(): what every rank's stacks say
  std::optional<nlohmann::json> joined;  // join_verdicts(): the artifacts and the evidence per culprit
};

std::string render_text(const Diagnosis& d);
// The JSON report as text, written in one pass (what `hangdoctor --json` writes).
std::string render_json_text(const Diagnosis& d, const ReportExtras& extras = {});
// The same report parsed, for callers that look fields up (tests, tools that embed it).
nlohmann::json render_json(const Diagnosis& d);

}  // namespace rankscope::analyzers::hang
