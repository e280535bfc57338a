// fr_dump.cpp — normalises a Flight Recorder dump (pickle or JSON) into FrDump.
//
// Shape: JSON is first turned into the same pickle::Value tree the unpickler gives, so one
// normaliser reads both; it treats every key as optional and accepts the JSON form's quirks
// (numbers as strings in pg_status, 0 for an absent time, process_group as a 2-array). PyTorch's
// pickles take a faster path: the flat reader (fr_flat_pickle.h) builds the small tree of the rest,
// and hands the entries list (~95% of the opcodes) to read_entries_direct, which reads each entry
// straight from the opcodes into an FrEntry, field for field what the tree normaliser would read;
// on a shape it does not take, the dump is read again with the tree.
#include "rankscope/torch_fr/fr_dump.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <unordered_map>

#include "fr_entry_state.h"
#include "fr_flat_pickle.h"
#include "rankscope/format/name_pool.h"
#include "rankscope/pickle/unpickler.h"

namespace rankscope::torch_fr {
namespace {

using pickle::Kind;
using pickle::Value;

Value from_json(const nlohmann::json& j, int depth) {
  if (depth > 64) return Value();
  if (j.is_boolean()) return Value::boolean(j.get<bool>());
  if (j.is_number_integer()) return Value::integer(j.get<int64_t>());
  if (j.is_number()) return Value::floating(j.get<double>());
  if (j.is_string()) return Value::string(j.get<std::string>());
  if (j.is_array()) {
    Value v = Value::container(Kind::kList);
    for (const auto& x : j) v.node()->items.push_back(from_json(x, depth + 1));
    return v;
  }
  if (j.is_object()) {
    Value v = Value::container(Kind::kDict);
    for (const auto& [k, x] : j.items()) v.node()->entries.emplace_back(Value::string(k), from_json(x, depth + 1));
    return v;
  }
  return Value();
}

// A string's bytes, from either reader's values.
std::optional<std::string_view> text_of(const Value& v) {
  const std::string* s = v.as_string();
  return s ? std::optional<std::string_view>(*s) : std::nullopt;
}
std::optional<std::string_view> text_of(const FlatValue& v) { return v.text(); }
const void* identity_of(const Value& v) { return v.node(); }
// The flat reader's strings are views: matching the text costs what a cache lookup would.
const void* identity_of(const FlatValue&) { return nullptr; }

// A string holding an int, whole.
std::optional<int64_t> int_in(std::optional<std::string_view> s) {
  if (!s) return std::nullopt;
  int64_t x = 0;
  auto [p, ec] = std::from_chars(s->data(), s->data() + s->size(), x);
  if (ec == std::errc() && p == s->data() + s->size()) return x;
  return std::nullopt;
}

// An int, or a string holding one (the JSON form writes pg_status values as strings). Inline: the
// int case is ~8 an entry.
template <typename V>
[[gnu::always_inline]] inline std::optional<int64_t> int_of(const V* v) {
  if (!v) return std::nullopt;
  if (auto i = v->as_int()) return i;
  return int_in(text_of(*v));
}

template <typename V>
std::string str_of(const V* v) {
  auto s = v ? text_of(*v) : std::nullopt;
  return s ? std::string(*s) : std::string();
}

format::DataType dtype_of(std::string_view torch_name) {
  static constexpr std::pair<std::string_view, format::DataType> kNames[] = {
      {"Float", format::DataType::kFloat32}, {"BFloat16", format::DataType::kBFloat16},
      {"Half", format::DataType::kFloat16},  {"Int", format::DataType::kInt32},
      {"Long", format::DataType::kInt64},    {"Byte", format::DataType::kUInt8},
      {"Double", format::DataType::kFloat64}};
  for (const auto& [name, type] : kNames)
    if (name == torch_name) return type;
  return format::DataType::kUnknown;
}

// What a profiling name says; the same for every entry with that name.
struct ProfilingName {
  std::string_view backend;  // pooled
  format::CollectiveOp op = format::CollectiveOp::kUnknown;
  int peer_in_group = -1;
};

// "nccl:all_reduce" -> allreduce; "nccl:send 0->1" -> send, peer 1; "nccl:recv 1<-0" -> recv, peer 0.
ProfilingName parse_profiling_name(std::string_view n) {
  ProfilingName out;
  if (auto colon = n.find(':'); colon != std::string_view::npos) {
    out.backend = format::intern_name(n.substr(0, colon));
    n.remove_prefix(colon + 1);
  }
  std::string_view op = n.substr(0, n.find(' '));
  std::string_view rest = op.size() < n.size() ? n.substr(op.size() + 1) : std::string_view();
  while (!op.empty() && op.front() == '_') op.remove_prefix(1);
  using format::CollectiveOp;
  static const std::map<std::string_view, CollectiveOp> kOps = {
      {"all_reduce", CollectiveOp::kAllReduceSum}, {"allreduce", CollectiveOp::kAllReduceSum},
      {"all_reduce_coalesced", CollectiveOp::kAllReduceSum},
      {"all_gather", CollectiveOp::kAllGather},    {"allgather", CollectiveOp::kAllGather},
      {"all_gather_base", CollectiveOp::kAllGather}, {"allgather_into_tensor_coalesced", CollectiveOp::kAllGather},
      {"reduce_scatter", CollectiveOp::kReduceScatter}, {"reduce_scatter_base", CollectiveOp::kReduceScatter},
      {"reduce_scatter_tensor_coalesced", CollectiveOp::kReduceScatter},
      // PyTorch names all_to_all_single "all_to_all" whether or not it passes split sizes
      // (ProcessGroupNCCL::alltoall_base), and the list form may carry tensors of any size: every
      // all_to_all may be uneven, so sizes may differ across ranks by design (an MoE dispatch).
      {"broadcast", CollectiveOp::kBroadcast},     {"all_to_all", CollectiveOp::kAllToAllV},
      {"alltoall", CollectiveOp::kAllToAllV},      {"alltoall_base", CollectiveOp::kAllToAllV},
      {"barrier", CollectiveOp::kBarrier},         {"send", CollectiveOp::kSend},
      {"recv", CollectiveOp::kRecv},
      {"allgather_base", CollectiveOp::kAllGather}, {"allgather_coalesced", CollectiveOp::kAllGather},
      {"allreduce_coalesced", CollectiveOp::kAllReduceSum},
      // Rooted ops: PyTorch records a scatter's inputs on the root only (Gloo's AsyncScatterWork
      // passes inputs[0] only when it has inputs), a gather's outputs on the root only; reduce and
      // broadcast record the tensor on every member. analyzers/hang mismatch.cpp reads a missing
      // field as unknown, and never compares a scatter's or gather's sizes across members.
      {"scatter", CollectiveOp::kScatter},         {"gather", CollectiveOp::kGather},
      {"reduce", CollectiveOp::kReduce},           {"reduce_oop", CollectiveOp::kReduce}};
  // Not read as an op: "coalesced" (the entry that closes a coalesced group; the group's ops carry
  // their own names from format 2.7), and any name not above: kUnknown, which is never compared.
  if (auto it = kOps.find(op); it != kOps.end()) out.op = it->second;
  // The peer: the number after "->" for a send, after "<-" for a recv.
  const std::string_view arrow = out.op == CollectiveOp::kSend ? "->" : "<-";
  if (out.op == CollectiveOp::kSend || out.op == CollectiveOp::kRecv) {
    if (auto a = rest.find(arrow); a != std::string_view::npos) {
      std::string_view num = rest.substr(a + 2);
      int peer = -1;
      auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), peer);
      if (ec == std::errc()) out.peer_in_group = peer;
    }
  }
  return out;
}

// The pooled copy of a text the dump repeats in every entry (state, desc, profiling name), found by
// where the text lies: PyTorch's pickler memoizes strings, so every entry's "completed" is one
// string object (for the flat reader, one place in the file; for the generic one, one node), and
// the pool's hash is paid once per distinct object, not once per entry. Valid while the dump's
// values live (one normalise call).
class PooledTexts {
 public:
  std::string_view get(std::string_view text) {
    // A few places are most of the lookups (an entry's state, its group, its name): a small table by
    // place first, the hash only on a miss.
    Recent& r = recent_[(reinterpret_cast<uintptr_t>(text.data()) ^ (reinterpret_cast<uintptr_t>(text.data()) >> 5)) %
                        recent_.size()];
    if (r.place == text.data() && r.size == text.size() && r.place) return r.pooled;
    auto [it, fresh] = by_place_.try_emplace(text.data());
    if (fresh || it->second.size() != text.size()) it->second = format::intern_name(text);
    r = {text.data(), text.size(), it->second};
    return it->second;
  }

 private:
  struct Recent {
    const char* place = nullptr;
    size_t size = 0;
    std::string_view pooled;
  };
  std::array<Recent, 64> recent_{};
  std::unordered_map<const char*, std::string_view> by_place_;
};

// The keys of an entry dict an entry is read by. PyTorch's pickler memoizes the key strings (every
// entry's "state" is one string object), so the unpickled keys share a node: a key is matched by
// text once per distinct node, then by pointer (2000 entries of ~20 keys a rank, 1024 ranks).
enum class EntryKey { kOther, kProcessGroup, kPgId, kTimeoutMs, kCollectiveSeqId, kProfilingName, kInputDtypes, kInputSizes, kOutputSizes, kState, kRetired, kDurationMs, kTimeCreatedNs, kTimeDiscoveredStartedNs, kTimeDiscoveredCompletedNs, kFrames, kIsP2p, kP2pSeqId };

class EntryKeyCache {
 public:
  // Every entry writes its keys in the same order: the key at `position` is checked against the
  // one found there last time first.
  template <typename V>
  EntryKey lookup(size_t position, const V& key) {
    const auto text = text_of(key);
    if (!text) return EntryKey::kOther;
    if (position < at_.size()) {
      // Memoized keys: the same place as last time is the same text, no bytes compared.
      Seen& seen = at_[position];
      if (seen.place == text->data() && seen.text.size() == text->size()) return seen.key;
      if (seen.text == *text) {
        seen.place = text->data();
        return seen.key;
      }
    }
    const void* node = identity_of(key);
    EntryKey k = EntryKey::kOther;
    bool cached = false;
    for (const auto& [n, known] : seen_)
      if (n == node && node) k = known, cached = true;
    if (!cached) {
      for (const auto& [name, value] : kNames)
        if (*text == name) {
          k = value;
          break;
        }
      if (node && seen_.size() < 64) seen_.emplace_back(node, k);
    }
    if (position < 64) {
      if (position >= at_.size()) at_.resize(position + 1);
      // The name kept is the table's (static) when known; an unknown key's text lives as long as the dump.
      at_[position] = {text->data(), k == EntryKey::kOther ? std::string(*text) : std::string(name_of(k)), k};
    }
    return k;
  }

 private:
  static constexpr std::pair<std::string_view, EntryKey> kNames[] = {
      {"process_group", EntryKey::kProcessGroup},
      {"pg_id", EntryKey::kPgId},
      {"timeout_ms", EntryKey::kTimeoutMs},
      {"collective_seq_id", EntryKey::kCollectiveSeqId},
      {"profiling_name", EntryKey::kProfilingName},
      {"input_dtypes", EntryKey::kInputDtypes},
      {"input_sizes", EntryKey::kInputSizes},
      {"output_sizes", EntryKey::kOutputSizes},
      {"state", EntryKey::kState},
      {"retired", EntryKey::kRetired},
      {"duration_ms", EntryKey::kDurationMs},
      {"time_created_ns", EntryKey::kTimeCreatedNs},
      {"time_discovered_started_ns", EntryKey::kTimeDiscoveredStartedNs},
      {"time_discovered_completed_ns", EntryKey::kTimeDiscoveredCompletedNs},
      {"frames", EntryKey::kFrames},
      {"is_p2p", EntryKey::kIsP2p},
      {"p2p_seq_id", EntryKey::kP2pSeqId}};
  static std::string_view name_of(EntryKey k) {
    for (const auto& [name, value] : kNames)
      if (value == k) return name;
    return {};
  }
  std::vector<std::pair<const void*, EntryKey>> seen_;
  // The last key at each position: where its text lay (valid while the dump's values live), the
  // text, its meaning.
  struct Seen {
    const char* place = nullptr;
    std::string text;
    EntryKey key = EntryKey::kOther;
  };
  std::vector<Seen> at_;
};

// What reading entries keeps from one entry to the next (the caches), and what it gives: the
// entries with a state, and each pg_id's group as the entries name it. One per dump; the tree
// normaliser and the direct reader (read_entries_direct) both fill one.
struct EntryReading {
  EntryKeyCache keys;
  PooledTexts pooled;
  // One parse per distinct profiling name (keyed by the pooled copy's address).
  std::unordered_map<const char*, ProfilingName> parsed_names;
  // pg_id -> the group its entries name (the last one), pooled: made a map of strings once, at the end.
  std::map<int64_t, std::string_view> group_of_pg_id;
  std::vector<FrEntry>* out = nullptr;

  std::map<int64_t, std::string> pg_id_names() const {
    std::map<int64_t, std::string> names;
    for (const auto& [id, group] : group_of_pg_id) names.emplace_hint(names.end(), id, group);
    return names;
  }

  // The direct reader's key at `position`: PyTorch writes an entry's keys in one order, each a memo
  // get of one string, so the get seen there last time is tried first (no value built, no text
  // compared); else the key is read and looked up, and remembered.
  bool read_key(FlatCursor& c, size_t position, EntryKey* n) {
    Seen* seen = position < seen_.size() ? &seen_[position] : nullptr;
    if (seen && seen->memo_id >= 0 && c.take_memo_get(uint8_t(seen->memo_id), seen->key)) {
      *n = seen->meaning;
      return true;
    }
    const int memo_id = c.next_memo_get();
    FlatValue key;
    if (!c.scalar(&key)) return false;
    *n = key_at(position, key);
    if (seen) *seen = {memo_id, key, *n};
    return true;
  }

  // dtype_of, the last text's answer kept by its place (a memoized "Float" is one place).
  format::DataType dtype_at(std::string_view text) {
    if (text.data() != dtype_text_.data() || text.size() != dtype_text_.size() || !text.data()) {
      dtype_text_ = text;
      dtype_ = dtype_of(text);
    }
    return dtype_;
  }

  // Before EntryKeyCache: the key last seen at each position, by the place of its text in the file
  // (PyTorch memoizes key strings: one place for every entry's).
  EntryKey key_at(size_t position, const FlatValue& key) {
    const auto t = key.text();
    if (!t || position >= recent_.size()) return keys.lookup(position, key);
    Recent& seen = recent_[position];
    if (seen.place != t->data() || seen.size != t->size()) seen = {t->data(), t->size(), keys.lookup(position, key)};
    return seen.key;
  }

  // An entry read: completed from what its keys said; whether it is kept (only with a state, as
  // PyTorch writes every entry).
  bool finish(FrEntry& e, std::optional<int64_t> pg_id, bool has_state) {
    if (!has_state) return false;
    if (pg_id) {
      e.pg_id = *pg_id;
      // Consecutive entries are often of one group: the map is written only when the pair changes.
      if (!e.group.empty() && (*pg_id != last_pg_id_ || e.group.data() != last_group_.data() ||
                               e.group.size() != last_group_.size() || group_of_pg_id.empty())) {
        group_of_pg_id[*pg_id] = e.group;
        last_pg_id_ = *pg_id;
        last_group_ = e.group;
      }
    }
    if (e.profiling_name.data() != last_name_ || !last_parsed_) {
      auto [it, fresh] = parsed_names.try_emplace(e.profiling_name.data());
      if (fresh) it->second = parse_profiling_name(e.profiling_name);
      last_name_ = e.profiling_name.data();
      last_parsed_ = &it->second;  // an unordered_map's values stay where they are
    }
    e.backend = last_parsed_->backend;
    e.op = last_parsed_->op;
    e.peer_in_group = last_parsed_->peer_in_group;
    if (e.op == format::CollectiveOp::kSend || e.op == format::CollectiveOp::kRecv) e.is_p2p = true;
    return true;
  }

 private:
  std::string_view dtype_text_;
  format::DataType dtype_ = format::DataType::kUnknown;
  const char* last_name_ = nullptr;
  const ProfilingName* last_parsed_ = nullptr;
  int64_t last_pg_id_ = 0;
  std::string_view last_group_;
  struct Recent {
    const char* place = nullptr;
    size_t size = 0;
    EntryKey key = EntryKey::kOther;
  };
  std::array<Recent, 32> recent_{};
  struct Seen {
    int memo_id = -1;  // the key came from this memo slot (-1: not a memo get)
    FlatValue key;
    EntryKey meaning = EntryKey::kOther;
  };
  std::array<Seen, 32> seen_{};
};

// The entry fields whose value is one scalar (an int, a string, a bool), from either reader's
// values. kProcessGroup, kPgId, the sizes, dtypes and frames are read where they are.
template <typename V>
[[gnu::always_inline]] inline void read_scalar_field(EntryKey n, const V& x, FrEntry& e, PooledTexts& pooled,
                                                     bool& has_state) {
  switch (n) {
    case EntryKey::kTimeoutMs: e.timeout_ms = std::max<int64_t>(0, int_of(&x).value_or(0)); break;
    case EntryKey::kIsP2p: e.is_p2p = x.as_bool().value_or(false); break;
    case EntryKey::kCollectiveSeqId: e.collective_seq = int_of(&x).value_or(0); break;
    case EntryKey::kP2pSeqId: e.p2p_seq = int_of(&x).value_or(0); break;
    case EntryKey::kProfilingName:
      if (auto t = text_of(x)) e.profiling_name = pooled.get(*t);
      break;
    case EntryKey::kState:
      e.state = pooled.get(text_of(x).value_or(std::string_view()));
      has_state = true;
      break;
    case EntryKey::kRetired: e.retired = x.as_bool().value_or(false); break;
    case EntryKey::kDurationMs: e.has_duration = x.as_double().has_value(); break;
    case EntryKey::kTimeCreatedNs: e.time_created_ns = int_of(&x).value_or(0); break;
    case EntryKey::kTimeDiscoveredStartedNs: e.time_started_ns = int_of(&x).value_or(0); break;
    case EntryKey::kTimeDiscoveredCompletedNs: e.time_completed_ns = int_of(&x).value_or(0); break;
    default: break;
  }
}

// "name (file:line)" of the frame a call site is named by.
std::string_view call_site_of(std::string_view name, std::string_view file, int64_t line) {
  fmt::memory_buffer text;
  fmt::format_to(std::back_inserter(text), "{} ({}:{})", name, file, line);
  return format::intern_name(std::string_view(text.data(), text.size()));
}

// The dump's entries list read by the flat reader's cursor (FlatListHook) straight into FrEntry:
// field for field what the tree normaliser below reads from the same bytes (fr_flat_reader_test
// compares them on every fixture), with no tree built. It reads the shapes PyTorch writes (an entry
// is a dict of scalars, the process group a tuple of two strings, sizes lists of lists of ints,
// frames a list of dicts of scalars); on anything else it gives up, and the dump is read again
// with the tree (parse_fr_dump).
bool read_entry(FlatCursor& c, EntryReading& r) {
  // Read where it is kept (no copy of 184 bytes an entry), dropped if it is not.
  FrEntry& e = r.out->emplace_back();
  bool has_state = false;
  std::optional<FlatValue> pg_id;
  size_t position = 0;
  const bool ok = c.dict([&](FlatCursor& c) {
    EntryKey n;
    if (!r.read_key(c, position++, &n)) return false;
    switch (n) {
      case EntryKey::kOther: return c.skip_value();
      case EntryKey::kPgId: {
        FlatValue v;
        if (!c.scalar(&v)) return false;
        pg_id = v;
        return true;
      }
      case EntryKey::kProcessGroup:
        // Repeated by every entry of the group: pooled, not a heap string an entry.
        return c.scalars([&](size_t i, const FlatValue& v) {
          if (i > 1) return;
          if (auto t = v.text()) (i == 0 ? e.group : e.group_desc) = r.pooled.get(*t);
        });
      case EntryKey::kInputDtypes:
        return c.scalars([&](size_t i, const FlatValue& v) {
          if (i == 0) e.dtype = r.dtype_at(v.text().value_or(std::string_view()));
        });
      case EntryKey::kInputSizes:
      case EntryKey::kOutputSizes: {
        uint64_t& total = n == EntryKey::kInputSizes ? e.numel : e.out_numel;
        return c.list([&](FlatCursor& c) {
          uint64_t count = 1;
          if (!c.scalars([&](size_t, const FlatValue& dim) {
                count *= uint64_t(std::max<int64_t>(0, dim.as_int().value_or(0)));
              }))
            return false;
          total += count;
          return true;
        });
      }
      case EntryKey::kFrames: {
        // The first "name", "filename" and "line" of each frame dict (a dict's find is its first).
        struct Frame {
          std::optional<FlatValue> name, file, line;
        };
        std::optional<Frame> first, site;
        const bool frames_ok = c.list([&](FlatCursor& c) {
          Frame f;
          if (!c.dict([&](FlatCursor& c) {
                FlatValue k;
                if (!c.scalar(&k)) return false;
                const auto t = k.text();
                std::optional<FlatValue>* slot = !t                 ? nullptr
                                                 : *t == "name"     ? &f.name
                                                 : *t == "filename" ? &f.file
                                                 : *t == "line"     ? &f.line
                                                                    : nullptr;
                if (!slot || slot->has_value()) return c.skip_value();
                FlatValue v;
                if (!c.scalar(&v)) return false;
                *slot = v;
                return true;
              }))
            return false;
          if (!first) first = f;
          // Innermost first; the innermost frames are PyTorch's own (all_reduce, its logger wrapper).
          if (!site && is_user_frame(f.file ? f.file->text().value_or(std::string_view()) : std::string_view()))
            site = f;
          return true;
        });
        if (!frames_ok) return false;
        if (!site) site = first;
        if (site) {
          e.call_site = call_site_of(site->name ? site->name->text().value_or(std::string_view()) : std::string_view(),
                                     site->file ? site->file->text().value_or(std::string_view()) : std::string_view(),
                                     site->line ? int_of(&*site->line).value_or(0) : 0);
        }
        return true;
      }
      default: {
        FlatValue v;
        if (!c.scalar(&v)) return false;
        read_scalar_field(n, v, e, r.pooled, has_state);
        return true;
      }
    }
  });
  if (!ok) return false;
  if (!r.finish(e, pg_id ? int_of(&*pg_id) : std::nullopt, has_state)) r.out->pop_back();
  return true;
}

// The FlatListHook's reader: the entries list's batches, from just after its first MARK.
bool read_entries_direct(FlatCursor& c, void* context) {
  auto& r = *static_cast<EntryReading*>(context);
  while (true) {
    while (!c.take(flat_op::kAppends))
      if (!read_entry(c, r)) return false;
    if (!c.take(flat_op::kMark)) return true;  // another batch (Python's pickle writes 1000 a batch)
  }
}

// The format version (2.3 to 2.10 are read) and the collective library's.
template <typename V>
Status read_versions(const V& root, FrDump& d) {
  d.version = str_of(root.find("version"));
  if (d.version.empty() && d.partial) return corrupt("pickle: truncated before the version: nothing to read");
  if (d.version.rfind("2.", 0) != 0) {
    return unsupported(fmt::format("Flight Recorder format '{}' is not read (2.3 to 2.10 are)", d.version));
  }
  std::from_chars(d.version.data() + 2, d.version.data() + d.version.size(), d.version_minor);
  if (d.version_minor < 3 || d.version_minor > 10) {
    return unsupported(fmt::format("Flight Recorder format {} is not read (2.3 to 2.10 are)", d.version));
  }
  d.comm_lib_version = str_of(root.find("comm_lib_version"));
  if (d.comm_lib_version.empty()) d.comm_lib_version = str_of(root.find("nccl_version"));
  return Status::ok_status();
}

template <typename V>
Status read_pg_config(const V& root, RankListPool* rank_lists, FrDump& d) {
  const V* pgc = root.find("pg_config");
  if (!pgc) return Status::ok_status();
  for (const auto& [k, v] : pgc->entries()) {
    FrGroup g;
    g.name = str_of(v.find("name"));
    if (g.name.empty()) g.name = str_of(&k);
    g.desc = str_of(v.find("desc"));
    const V* ranks_value = v.find("ranks");
    const std::string_view text = ranks_value ? text_of(*ranks_value).value_or("") : std::string_view();
    std::optional<RankList> ranks;
    if (rank_lists) {
      ranks = rank_lists->get(text);
    } else if (auto parsed = parse_rank_list(text)) {
      ranks = RankList(std::move(*parsed));
    }
    if (!ranks) return corrupt(fmt::format("pg_config '{}': ranks '{}' is not a list of ranks", g.name, text));
    g.ranks = std::move(*ranks);
    if (g.name.empty()) {
      d.unnamed_group_ranks.push_back(g.ranks.vec());
    } else {
      d.groups[g.name] = std::move(g);
    }
  }
  return Status::ok_status();
}

// Elements over all of a sizes list's tensors.
template <typename V>
uint64_t total_elements(const V& shapes) {
  uint64_t total = 0;
  for (const V& shape : shapes.items()) {
    uint64_t count = 1;
    for (const V& dim : shape.items()) count *= uint64_t(std::max<int64_t>(0, dim.as_int().value_or(0)));
    total += count;
  }
  return total;
}

// The innermost frame outside PyTorch (frames come innermost first; the innermost are PyTorch's
// own: all_reduce, its logger wrapper), or the innermost where none is.
template <typename V>
std::string_view call_site_of_frames(const V& frames) {
  const V* site = frames.items().empty() ? nullptr : &frames.items()[0];
  for (const V& f : frames.items()) {
    const V* file = f.find("filename");
    if (is_user_frame(file ? text_of(*file).value_or(std::string_view()) : std::string_view())) {
      site = &f;
      break;
    }
  }
  if (!site) return {};
  return call_site_of(str_of(site->find("name")), str_of(site->find("filename")),
                      int_of(site->find("line")).value_or(0));
}

// One entry of the tree's entries list, in one pass over its keys (a dump has ~2000 entries of ~25
// keys per rank); false when the entry is to be left out.
template <typename V>
bool read_tree_entry(const V& v, EntryReading& r, FrEntry& e) {
  const V* pg_id = nullptr;
  bool has_state = false;
  size_t position = 0;
  for (const auto& [key, x] : v.entries()) {
    const EntryKey n = r.keys.lookup(position++, key);
    if (n == EntryKey::kOther) continue;
    if (n == EntryKey::kProcessGroup) {
      if (!x.items().empty())
        if (auto t = text_of(x.items()[0])) e.group = r.pooled.get(*t);
      // Repeated by every entry of the group: pooled, not a heap string an entry.
      if (x.items().size() > 1)
        if (auto t = text_of(x.items()[1])) e.group_desc = r.pooled.get(*t);
    } else if (n == EntryKey::kPgId) {
      pg_id = &x;
    } else if (n == EntryKey::kInputDtypes) {
      if (!x.items().empty()) e.dtype = dtype_of(text_of(x.items()[0]).value_or(std::string_view()));
    } else if (n == EntryKey::kInputSizes) {
      e.numel += total_elements(x);
    } else if (n == EntryKey::kOutputSizes) {
      e.out_numel += total_elements(x);
    } else if (n == EntryKey::kFrames) {
      if (auto site = call_site_of_frames(x); !site.empty()) e.call_site = site;
    } else {
      read_scalar_field(n, x, e, r.pooled, has_state);
    }
  }
  return r.finish(e, int_of(pg_id), has_state);
}

// pg_status is keyed by the process-local pg_id; which group each id is, is worked out once the dump
// is read (fr_pg_status.h), since a rank with no entries names none. True when it saw a start.
template <typename V>
bool read_pg_status(const V& root, FrDump& d) {
  bool saw_start = false;
  const V* st = root.find("pg_status");
  if (!st) return false;
  for (const auto& [k, v] : st->entries()) {
    auto id = int_of(&k);
    if (!id) continue;
    FrStatus s;
    s.last_enqueued = int_of(v.find("last_enqueued_collective")).value_or(-1);
    s.last_started = int_of(v.find("last_started_collective")).value_or(-1);
    s.last_completed = int_of(v.find("last_completed_collective")).value_or(-1);
    saw_start = saw_start || s.last_started >= 0;
    d.status_by_pg_id[*id] = s;
  }
  return saw_start;
}

// Reads the dump from either reader's values (pickle::Value: the generic unpickler and JSON;
// FlatValue: the fast path for PyTorch's pickles). `direct`: the entries the flat reader's cursor
// read (the tree's entries list is then empty); a dump whose "entries" is not that list sets
// `direct_mismatch` (read it again without the cursor). `rank_lists`: as parse_fr_dump's.
template <typename V>
Result<FrDump> normalise(const V& root, bool partial, RankListPool* rank_lists, EntryReading* direct = nullptr,
                         bool* direct_mismatch = nullptr) {
  if (!root.is_dict()) {
    return unsupported(
        fmt::format("top level is a {}, not a dict: a dump older than format 2.3", kind_name(root.kind())));
  }
  FrDump d;
  d.partial = partial;
  if (Status s = read_versions(root, d); !s.ok()) return s;
  if (Status s = read_pg_config(root, rank_lists, d); !s.ok()) return s;
  const V* entries = root.find("entries");
  if constexpr (std::is_same_v<V, FlatValue>) {
    if (direct) {
      // The cursor read the first "entries" list of this root, and nothing was added to it after.
      if (!entries || !entries->is_handed_over() || !entries->items().empty()) {
        *direct_mismatch = true;
        return corrupt("the entries list was not the one read directly");
      }
      d.entries = std::move(*direct->out);
      d.pg_id_names = direct->pg_id_names();
      entries = nullptr;
    }
  }
  if (entries) {
    EntryReading r;
    r.out = &d.entries;
    d.entries.reserve(entries->items().size());
    for (const V& v : entries->items()) {
      if (v.partial()) continue;  // the entry the file ended inside
      FrEntry e;
      if (read_tree_entry(v, r, e)) d.entries.push_back(e);
    }
    d.pg_id_names = r.pg_id_names();
  }
  decide_entry_states(d, read_pg_status(root, d));
  return d;
}

}  // namespace

std::optional<std::vector<int>> parse_rank_list(std::string_view text) {
  // Every dump of a 1024-rank job lists ~3500 ranks in its pg_config: the digits are read here, one
  // pass, not through std::from_chars per number (that was 5% of hangdoctor's instructions). What
  // it accepts is what from_chars<int> followed by the 0..2^24 check accepted: an optional '-' (only
  // "-0" passes the check), then digits.
  std::vector<int> ranks;
  const char* p = text.data();
  const char* const end = p + text.size();
  auto skip = [&] { while (p < end && (*p == ' ' || *p == ',')) ++p; };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  skip();
  if (p < end && *p == '[') ++p;
  while (true) {
    skip();
    if (p >= end) return std::nullopt;
    if (*p == ']') break;
    const bool negative = *p == '-';
    if (negative) ++p;
    if (p >= end || !digit(*p)) return std::nullopt;
    int64_t r = 0;
    for (; p < end && digit(*p); ++p) {
      r = r * 10 + (*p - '0');
      if (r > (1 << 24)) return std::nullopt;  // past a rank (and past an int's range, refused too)
    }
    if (negative && r != 0) return std::nullopt;
    ranks.push_back(int(r));
    if (ranks.size() > (1u << 24)) return std::nullopt;
  }
  // pg_config writes them in order (a group of 1024 ranks in every one of 1024 dumps): checked, not sorted.
  if (!std::is_sorted(ranks.begin(), ranks.end())) std::sort(ranks.begin(), ranks.end());
  return ranks;
}

size_t RankListPool::SampledHash::operator()(std::string_view text) const {
  // 64 bytes from each of 16 places, the ends included: lists of one length differ in their digits
  // somewhere, and mostly near the front (where a group's first rank is).
  constexpr size_t kPlaces = 16, kBytes = 64;
  if (text.size() <= kPlaces * kBytes) return std::hash<std::string_view>()(text);
  uint64_t h = text.size();
  const size_t step = (text.size() - kBytes) / (kPlaces - 1);
  for (size_t k = 0; k < kPlaces; ++k)
    h = h * 0x9E3779B97F4A7C15ULL ^ std::hash<std::string_view>()(text.substr(k * step, kBytes));
  return size_t(h);
}

std::optional<RankList> RankListPool::get(std::string_view text) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = lists_.find(text); it != lists_.end()) return it->second;
  }
  auto ranks = parse_rank_list(text);  // outside the lock: the other readers go on
  if (!ranks) return std::nullopt;
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = lists_.find(text); it != lists_.end()) return it->second;  // another reader was first
  const std::string_view key = texts_.emplace_back(text);
  return lists_.emplace(key, RankList(std::move(*ranks))).first->second;
}

Result<FrDump> parse_fr_dump(std::span<const uint8_t> bytes, std::string_view display_name, PickleReader reader,
                             RankListPool* rank_lists) {
  Result<FrDump> r = corrupt("empty file");
  if (!bytes.empty() && bytes[0] == 0x80 && reader == PickleReader::kFast) {
    // One tree a thread, its arrays' capacity kept from dump to dump.
    thread_local FlatTree flat;
    // The entries are read into a list sized as the last dump this thread read (a job's dumps are
    // about one size; 2000 entries a rank live till the import ends): no copy to trim it, and no
    // more than a few bytes of input can ask for (an entry takes at least 6).
    thread_local size_t last_count = 0;
    std::vector<FrEntry> entries;
    entries.reserve(std::min(last_count, bytes.size() / 6));
    // First with the entries read straight from the opcodes (read_entries_direct), then, where that
    // gave up (a shape it does not read) or the list it read is not the dump's, with the tree.
    EntryReading direct;
    direct.out = &entries;
    const FlatListHook hook{"entries", &read_entries_direct, &direct};
    if (read_flat_pickle(bytes, flat, &hook)) {
      bool mismatch = false;
      if (entries.capacity() > entries.size() + entries.size() / 8 + 16) entries.shrink_to_fit();
      last_count = entries.size();
      r = normalise(flat.root(), false, rank_lists, flat.handed_over() ? &direct : nullptr, &mismatch);
      if (!mismatch) {
        if (!r.ok()) r.mutable_status().prefix(std::string(display_name));
        return r;
      }
    }
    if (read_flat_pickle(bytes, flat)) {
      r = normalise(flat.root(), false, rank_lists);
      if (!r.ok()) r.mutable_status().prefix(std::string(display_name));
      return r;
    }
  }
  if (!bytes.empty() && bytes[0] == 0x80) {
    auto u = pickle::unpickle(bytes);
    if (!u.ok()) {
      r = u.status();
    } else {
      r = normalise(u->root, u->truncated, rank_lists);
    }
  } else if (!bytes.empty() && bytes[0] == '{') {
    auto j = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, false);
    if (j.is_discarded()) {
      r = corrupt("not valid JSON (truncated?)");
    } else {
      r = normalise(from_json(j, 0), false, rank_lists);
    }
  } else if (!bytes.empty()) {
    r = corrupt("neither a pickle (0x80) nor JSON ('{'): not a Flight Recorder dump");
  }
  if (!r.ok()) r.mutable_status().prefix(std::string(display_name));
  return r;
}

}  // namespace rankscope::torch_fr
