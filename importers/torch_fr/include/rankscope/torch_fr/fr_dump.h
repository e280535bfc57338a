// fr_dump.h — one rank's PyTorch Flight Recorder dump, normalised (formats 2.3 to 2.10).
//
// Is: the fields hangdoctor needs from a dump, whichever form it came in (the pickle PyTorch writes
// to comm_lib_trace_rank_N, or the JSON of _dump_nccl_trace_json / _dump_fr_trace_json): process
// groups from pg_config (the ranks string parsed), pg_status counters mapped to group names, and
// entries with their per-group sequence numbers, op, sizes, dtypes, state and call site, and whether
// each entry completed, started or is still open by the rules of the backend that recorded it
// (docs/TORCH_FLIGHT_RECORDER.md says where each rule comes from in PyTorch). Every key is optional,
// as the format changed often. Is not: alignment across ranks (fr_import.h).
#pragma once

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rankscope/format/status.h"
#include "rankscope/format/vocabulary.h"

namespace rankscope::torch_fr {

// A group's members: global ranks, ascending. Read-only and shared by its copies: every dump of a
// 16,384-rank Megatron job lists 55,643 ranks in its 13 groups (the world twice), which held once a
// dump were 3.6 GB, and parsing them a fifth of the import. The import parses each distinct list
// once (RankListPool) and every dump that lists it holds the same one.
class RankList {
 public:
  RankList() = default;
  RankList(std::vector<int> ranks)  // NOLINT(google-explicit-constructor): a list is its ranks
      : ranks_(ranks.empty() ? nullptr : std::make_shared<const std::vector<int>>(std::move(ranks))) {}
  RankList(std::initializer_list<int> ranks) : RankList(std::vector<int>(ranks)) {}

  const std::vector<int>& vec() const { return ranks_ ? *ranks_ : empty_list(); }
  operator const std::vector<int>&() const { return vec(); }  // NOLINT(google-explicit-constructor)
  size_t size() const { return vec().size(); }
  bool empty() const { return vec().empty(); }
  int operator[](size_t i) const { return vec()[i]; }
  int front() const { return vec().front(); }
  int back() const { return vec().back(); }
  std::vector<int>::const_iterator begin() const { return vec().begin(); }
  std::vector<int>::const_iterator end() const { return vec().end(); }
  friend bool operator==(const RankList& a, const RankList& b) { return a.vec() == b.vec(); }

 private:
  static const std::vector<int>& empty_list() {
    static const std::vector<int> kEmpty;
    return kEmpty;
  }
  std::shared_ptr<const std::vector<int>> ranks_;
};

struct FrGroup {
  std::string name;        // group_name: the same on every rank (pg_id is not)
  std::string desc;        // e.g. "default_pg", "tp0"
  RankList ranks;          // global ranks, ascending
};

// The rank lists of one job's dumps, each distinct text parsed once. Thread-safe: the import's
// reader threads share one.
class RankListPool {
 public:
  // The list `text` spells ("[0, 1, 2]", as parse_rank_list reads it); nullopt when malformed.
  std::optional<RankList> get(std::string_view text);

 private:
  // Hashes the length and a sample of the text: the texts are long (the world's ranks) and mostly
  // equal, so hashing every byte would cost what parsing does. Equality still compares them whole.
  struct SampledHash {
    size_t operator()(std::string_view text) const;
  };
  std::mutex mutex_;
  std::deque<std::string> texts_;  // the keys' bytes (a deque: they never move)
  std::unordered_map<std::string_view, RankList, SampledHash> lists_;
};

struct FrStatus {
  int64_t last_enqueued = -1;
  int64_t last_started = -1;
  int64_t last_completed = -1;
};

// How a backend's entries say they completed. NCCL-like backends give the recorder a CUDA end event
// (and a start event with TORCH_NCCL_ENABLE_TIMING), so `state` is the truth and `retired` without
// "completed" means timed out or aborted. Gloo records no events: every entry stays "scheduled", and
// its worker thread retires an entry when the work finished.
enum class CompletionSignal : uint8_t { kState, kRetired };

// One entry of the ring. 1024 ranks x 2000 entries are two million of these, all alive until the
// import ends: the texts every entry repeats (the group's name and desc, backend, state, call site,
// the profiling name) are pooled views (format/name_pool.h), not a heap string each, and the fields are
// ordered so that the struct has no padding holes.
struct FrEntry {
  std::string_view group;         // group name (process_group[0]); pooled: entries of one group share
                                  // one copy, so comparing two entries' groups is mostly a pointer test
  std::string_view group_desc;    // as the entry names it (process_group[1]); pooled
  std::string_view profiling_name;  // "nccl:all_reduce", "nccl:send 0->1", "gloo:all_reduce"; pooled
  std::string_view backend;       // the profiling name's prefix: "nccl", "gloo", "" when none; pooled
  std::string_view state;         // "scheduled", "started", "completed"; pooled
  std::string_view call_site;     // innermost frame outside torch: "name (file:line)", "" without frames; pooled
  int64_t pg_id = -1;             // process-local, never compared across ranks
  int64_t collective_seq = 0;
  int64_t p2p_seq = 0;
  uint64_t numel = 0;             // elements over all input tensors
  uint64_t out_numel = 0;         // elements over all output tensors
  int64_t timeout_ms = 0;         // the process group's timeout for this work (0: not recorded)
  int64_t time_created_ns = 0;
  int64_t time_started_ns = 0;    // 0: absent
  int64_t time_completed_ns = 0;  // 0: absent
  format::CollectiveOp op = format::CollectiveOp::kUnknown;
  int peer_in_group = -1;         // send/recv: the other side, group-local
  format::DataType dtype = format::DataType::kUnknown;
  bool is_p2p = false;
  bool retired = false;
  bool has_duration = false;
  // Decided once the whole dump is read (the backend's rule needs the other entries):
  CompletionSignal signal = CompletionSignal::kState;
  bool completed = false;
  bool started = false;           // the device started it (NCCL with timing: a start event fired)
  bool aborted = false;           // retired without completing: timed out or aborted (NCCL-like)
};

struct FrDump {
  std::string version;                     // "2.10"
  int version_minor = 0;
  std::string comm_lib_version;
  std::map<std::string, FrGroup> groups;   // pg_config entries with a name, by name
  // pg_config entries with an empty name: Gloo records a group's ranks before the group gets its
  // name and desc (PyTorch 2.11), so its entries name a group pg_config does not (fr_import.cpp).
  std::vector<std::vector<int>> unnamed_group_ranks;
  std::map<int64_t, FrStatus> status_by_pg_id;  // pg_status as written: by process-local pg_id
  std::map<int64_t, std::string> pg_id_names;   // pg_id -> group name, as the entries say
  // pg_status by group name: each pg_id named by the entries, or by the groups' creation order
  // (fr_pg_status.h); filled by resolve_pg_status.
  std::map<std::string, FrStatus> status;
  std::vector<FrEntry> entries;            // oldest first
  bool partial = false;                    // the file ended early (entries are what was complete)
  bool timing = false;                     // start events existed: an entry started or has a duration,
                                           // or pg_status saw a start (NCCL-like backends only)
};

// Which reader turns a pickle into values: the one-pass flat reader, which hands anything it does not
// expect (globals, a cut stream) to the generic unpickler, or the generic unpickler alone. Both give
// the same dump (tests/importers/fr_flat_reader_test.cpp checks it on every fixture).
enum class PickleReader { kFast, kGeneric };

// Sniffs pickle (0x80) or JSON ('{'). `display_name` prefixes errors.
// `rank_lists`: where the groups' rank lists are shared from (a job's import passes one); else each
// dump parses its own.
Result<FrDump> parse_fr_dump(std::span<const uint8_t> bytes, std::string_view display_name,
                             PickleReader reader = PickleReader::kFast, RankListPool* rank_lists = nullptr);

// "[0, 1, 2, 3]" -> {0,1,2,3}; nullopt when malformed.
std::optional<std::vector<int>> parse_rank_list(std::string_view text);

}  // namespace rankscope::torch_fr
