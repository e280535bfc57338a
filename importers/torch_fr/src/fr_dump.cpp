// fr_dump.cpp — normalises a Flight Recorder dump (pickle or JSON) into FrDump.
//
// Shape: JSON is first turned into the same pickle::Value tree the unpickler gives, so one
// normaliser reads both; it treats every key as optional and accepts the JSON form's quirks
// (numbers as strings in pg_status, 0 for an absent time, process_group as a 2-array).
#include "rankscope/torch_fr/fr_dump.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <charconv>
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

// An int, or a string holding one (the JSON form writes pg_status values as strings).
template <typename V>
std::optional<int64_t> int_of(const V* v) {
  if (!v) return std::nullopt;
  if (auto i = v->as_int()) return i;
  if (auto s = text_of(*v)) {
    int64_t x = 0;
    auto [p, ec] = std::from_chars(s->data(), s->data() + s->size(), x);
    if (ec == std::errc() && p == s->data() + s->size()) return x;
  }
  return std::nullopt;
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
      {"recv", CollectiveOp::kRecv}};
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
    auto [it, fresh] = by_place_.try_emplace(text.data());
    if (fresh || it->second.size() != text.size()) it->second = format::intern_name(text);
    return it->second;
  }

 private:
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

// Reads the dump from either reader's values (pickle::Value: the generic unpickler and JSON;
// FlatValue: the fast path for PyTorch's pickles).
template <typename V>
Result<FrDump> normalise(const V& root, bool partial) {
  if (!root.is_dict()) {
    return unsupported(fmt::format("top level is a {}, not a dict: a dump older than format 2.3", kind_name(root.kind())));
  }
  FrDump d;
  d.partial = partial;
  d.version = str_of(root.find("version"));
  if (d.version.empty() && partial) return corrupt("pickle: truncated before the version: nothing to read");
  if (d.version.rfind("2.", 0) != 0) {
    return unsupported(fmt::format("Flight Recorder format '{}' is not read (2.3 to 2.10 are)", d.version));
  }
  std::from_chars(d.version.data() + 2, d.version.data() + d.version.size(), d.version_minor);
  if (d.version_minor < 3 || d.version_minor > 10) {
    return unsupported(fmt::format("Flight Recorder format {} is not read (2.3 to 2.10 are)", d.version));
  }
  d.comm_lib_version = str_of(root.find("comm_lib_version"));
  if (d.comm_lib_version.empty()) d.comm_lib_version = str_of(root.find("nccl_version"));
  if (const V* pgc = root.find("pg_config")) {
    for (const auto& [k, v] : pgc->entries()) {
      FrGroup g;
      g.name = str_of(v.find("name"));
      if (g.name.empty()) g.name = str_of(&k);
      g.desc = str_of(v.find("desc"));
      auto ranks = parse_rank_list(str_of(v.find("ranks")));
      if (!ranks) return corrupt(fmt::format("pg_config '{}': ranks '{}' is not a list of ranks", g.name, str_of(v.find("ranks"))));
      g.ranks = std::move(*ranks);
      if (g.name.empty()) {
        d.unnamed_group_ranks.push_back(std::move(g.ranks));
      } else {
        d.groups[g.name] = std::move(g);
      }
    }
  }
  std::map<int64_t, std::string> group_of_pg_id;
  EntryKeyCache key_cache;
  PooledTexts pooled;
  // One parse per distinct profiling name (keyed by the pooled copy's address).
  std::unordered_map<const char*, ProfilingName> parsed_names;
  if (const V* entries = root.find("entries")) {
    d.entries.reserve(entries->items().size());
    for (const V& v : entries->items()) {
      if (v.partial()) continue;  // the entry the file ended inside
      // One pass over the entry's keys (a dump has ~2000 entries of ~25 keys per rank).
      FrEntry e;
      const V* pg_id = nullptr;
      bool has_state = false;
      size_t position = 0;
      for (const auto& [key, x] : v.entries()) {
        const EntryKey n = key_cache.lookup(position++, key);
        if (n == EntryKey::kOther) continue;
        if (n == EntryKey::kProcessGroup) {
          if (!x.items().empty())
            if (auto t = text_of(x.items()[0])) e.group = pooled.get(*t);
          // Repeated by every entry of the group: pooled, not a heap string an entry.
          if (x.items().size() > 1)
            if (auto t = text_of(x.items()[1])) e.group_desc = pooled.get(*t);
        } else if (n == EntryKey::kPgId) {
          pg_id = &x;
        } else if (n == EntryKey::kTimeoutMs) {
          e.timeout_ms = std::max<int64_t>(0, int_of(&x).value_or(0));
        } else if (n == EntryKey::kIsP2p) {
          e.is_p2p = x.as_bool().value_or(false);
        } else if (n == EntryKey::kCollectiveSeqId) {
          e.collective_seq = int_of(&x).value_or(0);
        } else if (n == EntryKey::kP2pSeqId) {
          e.p2p_seq = int_of(&x).value_or(0);
        } else if (n == EntryKey::kProfilingName) {
          if (auto t = text_of(x)) e.profiling_name = pooled.get(*t);
        } else if (n == EntryKey::kInputDtypes) {
          if (!x.items().empty()) e.dtype = dtype_of(text_of(x.items()[0]).value_or(std::string_view()));
        } else if (n == EntryKey::kInputSizes) {
          for (const V& shape : x.items()) {
            uint64_t count = 1;
            for (const V& dim : shape.items()) count *= uint64_t(std::max<int64_t>(0, dim.as_int().value_or(0)));
            e.numel += count;
          }
        } else if (n == EntryKey::kOutputSizes) {
          for (const V& shape : x.items()) {
            uint64_t count = 1;
            for (const V& dim : shape.items()) count *= uint64_t(std::max<int64_t>(0, dim.as_int().value_or(0)));
            e.out_numel += count;
          }
        } else if (n == EntryKey::kState) {
          e.state = pooled.get(text_of(x).value_or(std::string_view()));
          has_state = true;
        } else if (n == EntryKey::kRetired) {
          e.retired = x.as_bool().value_or(false);
        } else if (n == EntryKey::kDurationMs) {
          e.has_duration = x.as_double().has_value();
        } else if (n == EntryKey::kTimeCreatedNs) {
          e.time_created_ns = int_of(&x).value_or(0);
        } else if (n == EntryKey::kTimeDiscoveredStartedNs) {
          e.time_started_ns = int_of(&x).value_or(0);
        } else if (n == EntryKey::kTimeDiscoveredCompletedNs) {
          e.time_completed_ns = int_of(&x).value_or(0);
        } else if (n == EntryKey::kFrames) {
          // Innermost first; the innermost frames are PyTorch's own (all_reduce, its logger wrapper).
          const V* site = x.items().empty() ? nullptr : &x.items()[0];
          for (const V& f : x.items()) {
            const V* file = f.find("filename");
            if (is_user_frame(file ? text_of(*file).value_or(std::string_view()) : std::string_view())) {
              site = &f;
              break;
            }
          }
          if (site) {
            fmt::memory_buffer text;
            fmt::format_to(std::back_inserter(text), "{} ({}:{})", str_of(site->find("name")),
                           str_of(site->find("filename")), int_of(site->find("line")).value_or(0));
            e.call_site = format::intern_name(std::string_view(text.data(), text.size()));
          }
        }
      }
      if (!has_state) continue;
      if (auto id = int_of(pg_id)) {
        e.pg_id = *id;
        if (!e.group.empty()) group_of_pg_id[*id] = e.group;
      }
      {
        auto [it, fresh] = parsed_names.try_emplace(e.profiling_name.data());
        if (fresh) it->second = parse_profiling_name(e.profiling_name);
        e.backend = it->second.backend;
        e.op = it->second.op;
        e.peer_in_group = it->second.peer_in_group;
      }
      if (e.op == format::CollectiveOp::kSend || e.op == format::CollectiveOp::kRecv) e.is_p2p = true;
      d.entries.push_back(std::move(e));
    }
  }
  // pg_status is keyed by the process-local pg_id; which group each id is, is worked out once the
  // dump is read (fr_pg_status.h), since a rank with no entries names none.
  bool pg_status_saw_start = false;
  if (const V* st = root.find("pg_status")) {
    for (const auto& [k, v] : st->entries()) {
      auto id = int_of(&k);
      if (!id) continue;
      FrStatus s;
      s.last_enqueued = int_of(v.find("last_enqueued_collective")).value_or(-1);
      s.last_started = int_of(v.find("last_started_collective")).value_or(-1);
      s.last_completed = int_of(v.find("last_completed_collective")).value_or(-1);
      pg_status_saw_start = pg_status_saw_start || s.last_started >= 0;
      d.status_by_pg_id[*id] = s;
    }
  }
  d.pg_id_names = std::move(group_of_pg_id);
  decide_entry_states(d, pg_status_saw_start);
  return d;
}

}  // namespace

std::optional<std::vector<int>> parse_rank_list(std::string_view text) {
  std::vector<int> ranks;
  size_t i = 0;
  auto skip = [&] { while (i < text.size() && (text[i] == ' ' || text[i] == ',')) ++i; };
  skip();
  if (i < text.size() && text[i] == '[') ++i;
  while (true) {
    skip();
    if (i >= text.size()) return std::nullopt;
    if (text[i] == ']') break;
    int r = 0;
    auto [p, ec] = std::from_chars(text.data() + i, text.data() + text.size(), r);
    if (ec != std::errc() || r < 0 || r > (1 << 24)) return std::nullopt;
    ranks.push_back(r);
    i = size_t(p - text.data());
    if (ranks.size() > (1u << 24)) return std::nullopt;
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

Result<FrDump> parse_fr_dump(std::span<const uint8_t> bytes, std::string_view display_name, PickleReader reader) {
  Result<FrDump> r = corrupt("empty file");
  if (!bytes.empty() && bytes[0] == 0x80 && reader == PickleReader::kFast) {
    // One tree a thread, its arrays' capacity kept from dump to dump.
    thread_local FlatTree flat;
    if (read_flat_pickle(bytes, flat)) {
      r = normalise(flat.root(), false);
      if (!r.ok()) r.mutable_status().prefix(std::string(display_name));
      return r;
    }
  }
  if (!bytes.empty() && bytes[0] == 0x80) {
    auto u = pickle::unpickle(bytes);
    if (!u.ok()) {
      r = u.status();
    } else {
      r = normalise(u->root, u->truncated);
    }
  } else if (!bytes.empty() && bytes[0] == '{') {
    auto j = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, false);
    if (j.is_discarded()) {
      r = corrupt("not valid JSON (truncated?)");
    } else {
      r = normalise(from_json(j, 0), false);
    }
  } else if (!bytes.empty()) {
    r = corrupt("neither a pickle (0x80) nor JSON ('{'): not a Flight Recorder dump");
  }
  if (!r.ok()) r.mutable_status().prefix(std::string(display_name));
  return r;
}

}  // namespace rankscope::torch_fr
