// trace_reader.cpp — see trace_reader.h.
#include "trace_reader.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <istream>
#include <set>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>

#include "event_categories.h"
#include "gzip_source.h"
#include "rankscope/format/op_family.h"

namespace rankscope::kineto {
namespace {

using nlohmann::json;
using format::CollectiveOp;
using trace_core::GpuOpKind;

constexpr int kMaxDepth = 256;              // deeper than any trace: hostile input
constexpr size_t kMaxCapturedValues = 100000;  // distributedInfo of any real job is far smaller
constexpr size_t kMaxInputs = 64;              // record_shapes inputs read an event (a collective has one or two)
constexpr double kMaxAbsNs = 4e18;          // within int64 with room for the base time
constexpr double kMaxDurationNs = 1e15;     // 11 days

// One scalar of the document as the handler sees it.
struct Scalar {
  enum Kind : uint8_t { kNull, kBool, kNumber, kString } kind = kNull;
  double number = 0;
  const std::string* text = nullptr;
  std::optional<int64_t> integer;  // the exact value of an integer literal (a double is 256 ns coarse at epoch ns)
};

// The fields of the event being read; reset per event.
struct EventFields {
  std::string name, cat, ph;
  std::string pg_name, pg_desc, dtype;  // NCCL kernels: the collective's metadata
  std::string direction;                // MTIA dma_request: "HOST_TO_DEVICE", ...
  double in_nelems = -1;
  // record_shapes: each input's element count (the product of its "Input Dims") and "Input type".
  std::vector<double> input_numels;
  std::vector<std::string> input_types;
  double ts = 0, dur = 0, pid = 0, tid = 0, correlation = 0, stream = 0, device = 0;
  bool has_ts = false, has_dur = false, has_pid = false, has_tid = false, has_correlation = false, has_stream = false,
       has_device = false, wrong_type = false;
  void reset() {
    name.clear(), cat.clear(), ph.clear(), pg_name.clear(), pg_desc.clear(), dtype.clear(), direction.clear();
    in_nelems = -1;
    input_numels.clear(), input_types.clear();
    has_ts = has_dur = has_pid = has_tid = has_correlation = has_stream = has_device = wrong_type = false;
  }
};

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// ts (µs) in ns without the double's rounding: epoch microseconds (Kineto before 2022, ~1.6e15)
// times 1000 exceed 2^53, where a double is 256 ns coarse; the whole microseconds are exact, so
// they are scaled as integers and only the fraction goes through floating point. |us| <= 4e15.
int64_t microseconds_to_ns(double us) {
  const double whole = std::trunc(us);
  return int64_t(whole) * 1000 + std::llround((us - whole) * 1000.0);
}

// MTIA's dma_request direction in the words Kineto's CUDA memcpy names use.
std::string copy_direction(std::string_view d) {
  if (d == "HOST_TO_DEVICE") return "HtoD";
  if (d == "DEVICE_TO_HOST") return "DtoH";
  if (d == "DEVICE_TO_DEVICE") return "DtoD";
  return d.empty() ? "(direction not given)" : std::string(d);
}

// Bytes per element of record_param_comms' "dtype" (c10 scalar type names); 0 when unknown.
double element_bytes(std::string_view dtype) {
  if (dtype == "Float" || dtype == "Int" || dtype == "UInt32") return 4;
  if (dtype == "BFloat16" || dtype == "Half" || dtype == "Short") return 2;
  if (dtype == "Double" || dtype == "Long" || dtype == "UInt64") return 8;
  if (dtype == "Byte" || dtype == "Char" || dtype == "Bool" || starts_with(dtype, "Float8")) return 1;
  return 0;
}

// Bytes per element of record_shapes' "Input type" (the C++ type names torch prints: "float",
// "c10::BFloat16", "long int"); 0 for what is no tensor ("Scalar", "") or unknown.
double input_type_bytes(std::string_view type) {
  if (type == "float" || type == "int" || type == "unsigned int") return 4;
  if (type == "double" || type == "long int" || type == "long" || type == "int64_t" || type == "unsigned long" ||
      type == "c10::complex<float>")
    return 8;
  if (type == "c10::Half" || type == "c10::BFloat16" || type == "short int" || type == "short") return 2;
  if (type == "bool" || type == "unsigned char" || type == "signed char" || type == "char" || starts_with(type, "c10::Float8"))
    return 1;
  if (type == "c10::complex<double>") return 16;
  return 0;
}

// The bytes of an event's tensor inputs; 0 when a type is unknown (a guess would mislead).
uint64_t input_bytes(const EventFields& ev) {
  double bytes = 0;
  for (size_t i = 0; i < ev.input_numels.size() && i < ev.input_types.size(); ++i) {
    const double element = input_type_bytes(ev.input_types[i]);
    if (element == 0) {
      if (ev.input_types[i].empty() || ev.input_types[i] == "Scalar") continue;  // not a tensor
      return 0;
    }
    bytes += ev.input_numels[i] * element;
  }
  return bytes > 0 && bytes < 1e18 ? uint64_t(bytes) : 0;
}

// The event and args keys the reader keeps, told apart once per key (the lexer hands every value
// after its key; comparing the key text at each value was a sixth of the import's CPU).
enum class Field : uint8_t {
  kOther, kName, kCat, kPh, kTs, kDur, kPid, kTid, kArgs,
  kPgName, kPgDesc, kDtype, kDirection, kInNelems, kCorrelation, kStream, kDevice, kInputDims, kInputType
};

Field field_of(std::string_view k) {
  switch (k.size()) {
    case 2: return k == "ph" ? Field::kPh : k == "ts" ? Field::kTs : Field::kOther;
    case 3: return k == "cat" ? Field::kCat : k == "dur" ? Field::kDur : k == "pid" ? Field::kPid : k == "tid" ? Field::kTid : Field::kOther;
    case 4: return k == "name" ? Field::kName : k == "args" ? Field::kArgs : Field::kOther;
    case 5: return k == "dtype" ? Field::kDtype : Field::kOther;
    case 6: return k == "stream" ? Field::kStream : k == "device" ? Field::kDevice : Field::kOther;
    case 9: return k == "direction" ? Field::kDirection : Field::kOther;
    case 10: return k == "Input Dims" ? Field::kInputDims : k == "Input type" ? Field::kInputType : Field::kOther;
    case 11: return k == "correlation" ? Field::kCorrelation : Field::kOther;
    case 13: return k == "In msg nelems" ? Field::kInNelems : Field::kOther;
    case 18: return k == "Process Group Name" ? Field::kPgName : Field::kOther;
    case 25: return k == "Process Group Description" ? Field::kPgDesc : Field::kOther;
    default: return Field::kOther;
  }
}

// A cpu_op as read: thread ordinal (the process bits come later) and its name's pool index.
struct HostOpRow {
  int64_t start = 0, end = 0;
  uint64_t ordinal = 0;
  uint32_t name = 0;
};

// Two ops of one family closer than this are one leaf (the Python between them is the family's
// time); a longer gap stays a gap, so the main thread's waits are never booked as compute.
constexpr int64_t kLeafJoinNs = 50'000;

class Handler : public nlohmann::json_sax<json> {
 public:
  explicit Handler(KinetoTrace& out) : out_(out) { out_.rows.pool.emplace_back(); }

  bool null() override { return scalar({}); }
  bool boolean(bool v) override { return scalar({Scalar::kBool, v ? 1.0 : 0.0, nullptr, std::nullopt}); }
  bool number_integer(number_integer_t v) override { return scalar({Scalar::kNumber, double(v), nullptr, int64_t(v)}); }
  bool number_unsigned(number_unsigned_t v) override {
    return scalar({Scalar::kNumber, double(v), nullptr,
                   v <= uint64_t(INT64_MAX) ? std::optional<int64_t>(int64_t(v)) : std::nullopt});
  }
  bool number_float(number_float_t v, const string_t&) override { return scalar({Scalar::kNumber, v, nullptr, std::nullopt}); }
  bool string(string_t& v) override { return scalar({Scalar::kString, 0, &v, std::nullopt}); }
  bool binary(binary_t&) override { return scalar({}); }

  bool key(string_t& k) override {
    if (capture_) {
      capture_key_ = k;
    } else if (depth_ == 1 && !events_array_) {
      top_key_ = k;
    } else if (in_event() || in_args()) {
      field_ = field_of(k);
    }
    return true;
  }

  bool start_object(std::size_t) override { return open(true); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    error_position_ = position;
    error_ = e.what();
    return false;
  }
  void set_parse_error(std::size_t position, std::string what) {
    error_position_ = position;
    error_ = std::move(what);
  }

  size_t error_position() const { return error_position_; }
  bool saw_json() const { return saw_json_; }                // an object or array opened at all
  bool saw_events_list() const { return saw_events_list_; }  // a traceEvents array (or a bare one)
  const std::string& error() const { return error_; }
  const std::string& limit() const { return limit_; }
  std::map<uint64_t, int64_t> steps_per_thread;
  std::map<uint64_t, int64_t> ranges_per_thread;
  std::map<int64_t, int64_t> pid_events;  // CPU events per pid
  std::vector<HostOpRow> host_ops;         // every cpu_op read, nested ones too (thread ordinal, not gtid)
  std::set<int64_t> device_pids;           // pids of device events (MTIA writes host calls there too)
  json distributed_info, device_properties;

 private:
  bool in_event() const { return events_depth_ > 0 && depth_ == events_depth_ + 1; }
  bool in_args() const { return events_depth_ > 0 && args_open_ && depth_ == events_depth_ + 2; }
  // Inside args' "Input Dims" (a list of lists, one a tensor) or "Input type" (a list of names).
  bool in_input_list(int below_args) const {
    return events_depth_ > 0 && args_open_ && depth_ == events_depth_ + 2 + below_args &&
           (field_ == Field::kInputDims || field_ == Field::kInputType);
  }

  bool open(bool object) {
    saw_json_ = true;
    if (++depth_ > kMaxDepth) {
      limit_ = fmt::format("nesting deeper than {} levels", kMaxDepth);
      return false;
    }
    if (capture_) return capture_open(object);
    if (depth_ == 1) {
      if (!object) events_depth_ = 1, events_array_ = true, saw_events_list_ = true;  // a bare array of events
      return true;
    }
    if (depth_ == 2 && !events_array_ && top_key_ == "distributedInfo" && object) {
      capture_ = true;
      capture_depth_ = depth_;
      distributed_info = json::object();
      capture_stack_.assign(1, &distributed_info);
      return true;
    }
    if (depth_ == 2 && !events_array_ && top_key_ == "deviceProperties" && !object) {
      capture_ = true;
      capture_depth_ = depth_;
      device_properties = json::array();
      capture_stack_.assign(1, &device_properties);
      return true;
    }
    if (depth_ == 2 && !events_array_ && top_key_ == "traceEvents" && !object) {
      events_depth_ = 2;
      saw_events_list_ = true;
      return true;
    }
    if (events_depth_ > 0 && depth_ == events_depth_ + 1 && object) {
      ev_.reset();
      return true;
    }
    if (events_depth_ > 0 && depth_ == events_depth_ + 2 && object && field_ == Field::kArgs) args_open_ = true;
    // One tensor's dims open: its element count starts at 1 (a 0-d tensor has one element).
    if (!object && field_ == Field::kInputDims && in_input_list(2) && ev_.input_numels.size() < kMaxInputs)
      ev_.input_numels.push_back(1);
    return true;
  }

  bool close() {
    if (capture_) {
      if (depth_ == capture_depth_) capture_ = false;
      else if (!capture_stack_.empty()) capture_stack_.pop_back();
      --depth_;
      return true;
    }
    if (events_depth_ > 0 && depth_ == events_depth_ + 2) args_open_ = false;
    if (events_depth_ > 0 && depth_ == events_depth_ + 1) finish_event();
    if (events_depth_ > 0 && depth_ == events_depth_) events_depth_ = events_array_ ? -1 : 0;
    --depth_;
    return true;
  }

  bool capture_open(bool object) {
    if (++captured_ > kMaxCapturedValues || capture_stack_.empty()) {
      limit_ = fmt::format("distributedInfo holds more than {} values", kMaxCapturedValues);
      return false;
    }
    json* parent = capture_stack_.back();
    json child = object ? json::object() : json::array();
    json* slot = parent->is_array() ? &parent->emplace_back(std::move(child)) : &((*parent)[capture_key_] = std::move(child));
    capture_stack_.push_back(slot);
    return true;
  }

  bool scalar(const Scalar& v) {
    if (capture_) {
      if (++captured_ > kMaxCapturedValues || capture_stack_.empty()) {
        limit_ = fmt::format("distributedInfo holds more than {} values", kMaxCapturedValues);
        return false;
      }
      json x = v.kind == Scalar::kString ? json(*v.text) : v.kind == Scalar::kNumber ? json(v.number)
               : v.kind == Scalar::kBool ? json(v.number != 0) : json();
      json* parent = capture_stack_.back();
      if (parent->is_array()) parent->push_back(std::move(x));
      else (*parent)[capture_key_] = std::move(x);
      return true;
    }
    if (depth_ == 1 && !events_array_) return top_scalar(v);
    if (in_event()) event_field(v);
    else if (in_args()) args_field(v);
    else if (in_input_list(1) && field_ == Field::kInputType && ev_.input_types.size() < kMaxInputs)
      ev_.input_types.push_back(v.kind == Scalar::kString ? v.text->substr(0, 64) : std::string());
    else if (in_input_list(2) && field_ == Field::kInputDims && v.kind == Scalar::kNumber && !ev_.input_numels.empty())
      ev_.input_numels.back() *= std::max(0.0, v.number);
    return true;
  }

  bool top_scalar(const Scalar& v) {
    if (top_key_ == "baseTimeNanoseconds") {
      if (v.kind == Scalar::kNumber && std::isfinite(v.number) && std::abs(v.number) < kMaxAbsNs) {
        out_.base_time_ns = v.integer ? *v.integer : int64_t(v.number);
      } else {
        out_.warnings.push_back("baseTimeNanoseconds is not a number in range: ignored (times stay relative to the trace)");
      }
    } else if (top_key_ == "schemaVersion" || top_key_.find("version") != std::string::npos) {
      std::string text = v.kind == Scalar::kString ? v.text->substr(0, 64)
                         : v.kind == Scalar::kNumber ? fmt::format("{}", v.number) : std::string();
      if (!text.empty() && out_.versions.size() < 16) out_.versions.emplace_back(top_key_.substr(0, 64), text);
    }
    return true;
  }

  void number_field(const Scalar& v, double& slot, bool& has) {
    if (v.kind == Scalar::kNumber) slot = v.number, has = true;
    else if (v.kind != Scalar::kNull) ev_.wrong_type = ev_.wrong_type || field_ == Field::kTs || field_ == Field::kDur;
  }

  void event_field(const Scalar& v) {
    if (field_ == Field::kName || field_ == Field::kCat || field_ == Field::kPh) {
      if (v.kind != Scalar::kString) {
        ev_.wrong_type = true;
        return;
      }
      (field_ == Field::kName ? ev_.name : field_ == Field::kCat ? ev_.cat : ev_.ph) = *v.text;
    } else if (field_ == Field::kTs) number_field(v, ev_.ts, ev_.has_ts);
    else if (field_ == Field::kDur) number_field(v, ev_.dur, ev_.has_dur);
    else if (field_ == Field::kPid) number_field(v, ev_.pid, ev_.has_pid);
    else if (field_ == Field::kTid) number_field(v, ev_.tid, ev_.has_tid);
  }

  void args_field(const Scalar& v) {
    if (v.kind == Scalar::kString) {
      if (field_ == Field::kPgName) ev_.pg_name = v.text->substr(0, 128);
      else if (field_ == Field::kPgDesc) ev_.pg_desc = v.text->substr(0, 128);
      else if (field_ == Field::kDtype) ev_.dtype = v.text->substr(0, 32);
      else if (field_ == Field::kDirection) ev_.direction = v.text->substr(0, 32);
      return;
    }
    if (v.kind != Scalar::kNumber) return;
    if (field_ == Field::kInNelems) ev_.in_nelems = v.number;
    if (field_ == Field::kCorrelation) ev_.correlation = v.number, ev_.has_correlation = true;
    else if (field_ == Field::kStream) ev_.stream = v.number, ev_.has_stream = true;
    else if (field_ == Field::kDevice) ev_.device = v.number, ev_.has_device = true;
  }

  uint32_t intern(const std::string& s) {
    auto [it, fresh] = pool_ids_.try_emplace(s, uint32_t(out_.rows.pool.size()));
    if (fresh) out_.rows.pool.push_back(s);
    return it->second;
  }

  // Thread ordinal of (pid, tid), 1-based; the process bits are filled in when the main process is known.
  uint64_t thread(double pid, double tid) {
    const auto key = std::make_pair(int64_t(pid), int64_t(tid));
    auto [it, fresh] = threads_.try_emplace(key, uint64_t(threads_.size() + 1));
    return it->second & 0xFFFFFF;
  }

  static bool id_in_range(double x) { return std::isfinite(x) && x >= 0 && x < 4294967296.0; }

  // Counts an event the import does not read (see NotRead), with its duration when it has a sane one.
  void not_read(const std::string& what, bool on_device, std::string_view why) {
    NotRead& n = out_.not_read[what];
    ++n.events;
    n.on_device = n.on_device || on_device;
    if (n.why.empty()) n.why = std::string(why);
    if (ev_.has_dur && std::isfinite(ev_.dur) && ev_.dur >= 0 && ev_.dur * 1000.0 < kMaxDurationNs) n.duration_ns += std::llround(ev_.dur * 1000.0);
  }

  // A cpu_op with sane fields, kept whole for the leaves (host_op_leaves, once the main thread is known).
  void add_host_op() {
    if (ev_.wrong_type || !ev_.has_ts || !ev_.has_dur || !ev_.has_pid || !ev_.has_tid || ev_.name.empty()) return;
    const double dur = ev_.dur * 1000.0;
    if (!std::isfinite(ev_.ts) || !std::isfinite(dur) || std::abs(ev_.ts * 1000.0) > kMaxAbsNs || dur < 0 || dur > kMaxDurationNs) return;
    if (!std::isfinite(ev_.pid) || !std::isfinite(ev_.tid) || std::abs(ev_.pid) > 1e15 || std::abs(ev_.tid) > 1e15) return;
    const int64_t s = microseconds_to_ns(ev_.ts);
    host_ops.push_back({s, s + std::llround(dur), thread(ev_.pid, ev_.tid), intern(ev_.name)});
  }

  void finish_event() {
    ++out_.events;
    if (ev_.ph != "X") return;  // metadata, flows, instants, counters: nothing the importer needs
    const std::string& cat = ev_.cat;
    const EventCategory* rule = find_event_category(cat);
    if (!rule) {
      // A category Kineto never wrote (another producer, a newer Kineto): say so, never guess.
      if (!cat.empty() && out_.not_read.size() < 64) {
        not_read(fmt::format("category '{}'", cat.substr(0, 64)), false, "not a category Kineto writes (as of 2026-08)");
      }
      return;
    }
    EventRole role = rule->role;
    if (role == EventRole::kSkipped) return;
    if (role == EventRole::kDeviceNotRead) {
      not_read(fmt::format("category '{}'", cat), true, rule->why);
      return;
    }
    if (role == EventRole::kOperator) {
      // The ranges are the user scopes among them; the rest are ops.
      if (operator_is_user_scope(ev_.name)) {
        role = EventRole::kAnnotation;
        ++out_.old_operator_ranges;
      } else {
        role = EventRole::kHostOp;
      }
    }
    if (role == EventRole::kHostOp) {
      add_host_op();
      return;
    }
    GpuOpKind device_kind = GpuOpKind::kKernel;
    if (role == EventRole::kMtiaDevice) {
      const MtiaEventKind k = mtia_event_kind(ev_.name);
      if (k == MtiaEventKind::kSync) {
        not_read("MTIA stream synchronisation (event_wait, event_record)", true,
                 "a stream waiting on another is not device work");
        return;
      }
      device_kind = k == MtiaEventKind::kCopy ? GpuOpKind::kMemcpy : GpuOpKind::kKernel;
    } else if (role == EventRole::kMemcpy) {
      device_kind = GpuOpKind::kMemcpy;
    } else if (role == EventRole::kMemset) {
      device_kind = GpuOpKind::kMemset;
    }
    const bool annotation = role == EventRole::kAnnotation;
    const bool launch = role == EventRole::kLaunch;
    const bool gpu = !annotation && !launch;
    if (ev_.wrong_type) {
      ++out_.dropped.wrong_type;
      return;
    }
    if (!ev_.has_ts || !ev_.has_dur || (!gpu && (!ev_.has_pid || !ev_.has_tid)) || (annotation && ev_.name.empty())) {
      ++out_.dropped.missing_field;
      return;
    }
    const double start = ev_.ts * 1000.0, dur = ev_.dur * 1000.0;
    if (!std::isfinite(start) || !std::isfinite(dur) || std::abs(start) > kMaxAbsNs || dur > kMaxDurationNs) {
      ++out_.dropped.bad_time;
      return;
    }
    if (dur < 0) {
      ++out_.dropped.negative_duration;
      return;
    }
    const int64_t s = microseconds_to_ns(ev_.ts), e = s + std::llround(dur);
    out_.rows.max_ts = std::max(out_.rows.max_ts, e);
    out_.min_ts = std::min(out_.min_ts, s);
    if (gpu) {
      trace_core::GpuOp op;
      op.start = s, op.end = e;
      op.correlation = ev_.has_correlation && id_in_range(ev_.correlation) ? uint32_t(ev_.correlation) : 0;
      const double stream = ev_.has_stream ? ev_.stream : ev_.has_tid ? ev_.tid : 0;
      const double device = ev_.has_device ? ev_.device : ev_.has_pid ? ev_.pid : 0;
      op.stream = id_in_range(stream) ? uint32_t(stream) : 0;
      op.device = id_in_range(device) ? uint32_t(device) : 0;
      // MTIA's copies are named "dma_request": named as Kineto names CUDA's ("Memcpy HtoD (...)") so
      // every reader books them as memory operations (format/kernel_class.h), not as compute.
      op.name = op.short_name = intern(role == EventRole::kMtiaDevice && device_kind == GpuOpKind::kMemcpy
                                           ? fmt::format("Memcpy {} (MTIA {})", copy_direction(ev_.direction), ev_.name)
                                           : ev_.name.empty() ? cat : ev_.name);
      op.kind = device_kind;
      if (ev_.has_pid && std::isfinite(ev_.pid) && std::abs(ev_.pid) < 1e15) device_pids.insert(int64_t(ev_.pid));
      ++out_.device_ops[std::string(rule->device)];  // "CUDA/ROCm" is told apart at the end (saw_hip)
      if (op.kind == trace_core::GpuOpKind::kKernel && trace_core::is_nccl_kernel(ev_.name)) {
        if (!ev_.pg_name.empty()) out_.nccl_stream_groups.try_emplace(op.stream, ProcessGroupInfo{ev_.pg_name, ev_.pg_desc, "nccl", {}});
        const double element = element_bytes(ev_.dtype);
        if (ev_.in_nelems >= 0 && ev_.in_nelems < 1e15 && element > 0) {
          out_.rows.collective_bytes[uint32_t(out_.rows.ops.size())] = uint64_t(ev_.in_nelems * element);
        }
      }
      out_.rows.ops.push_back(op);
      return;
    }
    if (launch) {
      if (starts_with(ev_.name, "hip")) saw_hip_ = true;  // ROCm writes HIP calls as cuda_runtime
      else if (rule->device != "CUDA/ROCm") launch_device_ = rule->device;
    }
    if (!std::isfinite(ev_.pid) || !std::isfinite(ev_.tid) || std::abs(ev_.pid) > 1e15 || std::abs(ev_.tid) > 1e15) {
      ++out_.dropped.wrong_type;
      return;
    }
    ++pid_events[int64_t(ev_.pid)];
    const uint64_t gtid = thread(ev_.pid, ev_.tid);
    if (launch) {
      if (!ev_.has_correlation || !id_in_range(ev_.correlation)) return;  // not a launch (no device work to join)
      out_.rows.runtime.push_back({s, e, gtid, uint32_t(ev_.correlation), intern(ev_.name)});
      return;
    }
    const std::string_view name = ev_.name;
    const size_t colon = name.find(':');
    const std::string_view backend = colon == std::string_view::npos ? std::string_view() : name.substr(0, colon);
    if (backend == "gloo" || backend == "mpi" || backend == "ucc") {
      out_.host_annotations.push_back(
          {s, e, gtid, std::string(backend), collective_op_from_annotation(name.substr(colon + 1)), input_bytes(ev_)});
      return;
    }
    trace_core::NvtxRow row;
    row.start = s, row.end = e, row.gtid = gtid;
    row.id = int64_t(out_.rows.nvtx.size());
    row.text = intern(ev_.name);
    row.domain = backend == "nccl" ? kNcclDomain : kAnnotationDomain;
    row.kind = trace_core::NvtxKind::kPushPop;
    out_.rows.nvtx.push_back(row);
    if (row.domain == kAnnotationDomain) {
      ++ranges_per_thread[gtid];
      if (starts_with(name, "ProfilerStep#")) ++steps_per_thread[gtid];
    }
  }

 public:
  const std::map<std::pair<int64_t, int64_t>, uint64_t>& threads() const { return threads_; }

  // Between two op leaves of the main thread (rows from `first_leaf` on, in time order), the time a
  // host collective (Gloo's, on its own threads) was in flight is the thread waiting on it: a leaf
  // kCollectiveWaitLeaf, cut where the thread's ranges begin or end so it nests like any range.
  void add_collective_wait_leaves(uint64_t main_ordinal, size_t first_leaf, const std::vector<int64_t>& bounds) {
    std::vector<std::pair<int64_t, int64_t>> flight;  // the host collectives' union
    for (const HostAnnotation& h : out_.host_annotations) flight.emplace_back(h.start, h.end);
    std::sort(flight.begin(), flight.end());
    std::vector<std::pair<int64_t, int64_t>> merged;
    for (const auto& f : flight) {
      if (!merged.empty() && f.first <= merged.back().second) merged.back().second = std::max(merged.back().second, f.second);
      else merged.push_back(f);
    }
    if (merged.empty()) return;
    const uint32_t name = intern(std::string(format::kCollectiveWaitLeaf));
    const size_t last_leaf = out_.rows.nvtx.size();
    auto add = [&](int64_t a, int64_t b) {
      if (b - a < kLeafJoinNs) return;
      trace_core::NvtxRow row;
      row.start = a, row.end = b, row.gtid = main_ordinal;
      row.id = int64_t(out_.rows.nvtx.size());
      row.text = name;
      row.domain = kAnnotationDomain;
      row.kind = trace_core::NvtxKind::kPushPop;
      out_.rows.nvtx.push_back(row);
    };
    size_t k = 0;
    for (size_t i = first_leaf; i + 1 < last_leaf; ++i) {
      const int64_t gap_start = out_.rows.nvtx[i].end, gap_end = out_.rows.nvtx[i + 1].start;
      if (gap_end - gap_start < kLeafJoinNs) continue;
      while (k < merged.size() && merged[k].second <= gap_start) ++k;
      for (size_t m = k; m < merged.size() && merged[m].first < gap_end; ++m) {
        int64_t a = std::max(gap_start, merged[m].first);
        const int64_t b = std::min(gap_end, merged[m].second);
        // Cut at the ranges' edges inside the piece.
        for (auto it = std::upper_bound(bounds.begin(), bounds.end(), a); it != bounds.end() && *it < b; ++it) {
          add(a, *it);
          a = *it;
        }
        add(a, b);
      }
    }
  }

  // The main thread's outermost framework ops become the leaves of its host timeline: one
  // annotation row a run of ops of one family (op_family.h), named "[attention]", "[matmul]", ...,
  // nested by time under the user's ranges like any range. Ops joined into one leaf are of one
  // family, closer than kLeafJoinNs, with no range of the thread beginning or ending between them.
  // Returns how many ops were read as leaves.
  int64_t add_host_op_leaves(uint64_t main_ordinal) {
    std::vector<HostOpRow> ops;
    for (const HostOpRow& o : host_ops)
      if (o.ordinal == main_ordinal) ops.push_back(o);
    host_ops.clear();
    host_ops.shrink_to_fit();
    std::sort(ops.begin(), ops.end(), [](const HostOpRow& a, const HostOpRow& b) {
      return std::tie(a.start, b.end) < std::tie(b.start, a.end);
    });
    std::vector<int64_t> bounds;  // where the thread's ranges begin and end
    for (const trace_core::NvtxRow& r : out_.rows.nvtx)
      if (r.domain == kAnnotationDomain && r.gtid == main_ordinal) bounds.push_back(r.start), bounds.push_back(r.end);
    std::sort(bounds.begin(), bounds.end());
    auto bound_between = [&](int64_t a, int64_t b) {
      const auto it = std::upper_bound(bounds.begin(), bounds.end(), a);
      return it != bounds.end() && *it < b;
    };
    std::unordered_map<uint32_t, format::OpFamily> family_of;  // by name
    std::array<uint32_t, 9> leaf_name{};
    int64_t read = 0, outer_end = INT64_MIN;
    const size_t first_leaf = out_.rows.nvtx.size();
    size_t open = SIZE_MAX;  // the leaf still growing, an index into rows.nvtx
    format::OpFamily open_family = format::OpFamily::kOther;
    for (const HostOpRow& o : ops) {
      if (o.start < outer_end) continue;  // nested in an op already taken
      outer_end = o.end;
      auto [it, fresh] = family_of.try_emplace(o.name, format::OpFamily::kOther);
      if (fresh) it->second = format::op_family(out_.rows.pool[o.name]);
      const format::OpFamily f = it->second;
      if (f == format::OpFamily::kCommunication) {
        open = SIZE_MAX;
        continue;
      }
      ++read;
      if (open != SIZE_MAX && open_family == f && o.start - out_.rows.nvtx[open].end <= kLeafJoinNs &&
          !bound_between(out_.rows.nvtx[open].end, o.start)) {
        out_.rows.nvtx[open].end = std::max(out_.rows.nvtx[open].end, o.end);
        continue;
      }
      uint32_t& name = leaf_name[size_t(f)];
      if (name == 0) name = intern(std::string(format::op_family_leaf(f)));
      trace_core::NvtxRow row;
      row.start = o.start, row.end = o.end, row.gtid = main_ordinal;
      row.id = int64_t(out_.rows.nvtx.size());
      row.text = name;
      row.domain = kAnnotationDomain;
      row.kind = trace_core::NvtxKind::kPushPop;
      out_.rows.nvtx.push_back(row);
      open = out_.rows.nvtx.size() - 1;
      open_family = f;
    }
    add_collective_wait_leaves(main_ordinal, first_leaf, bounds);
    return read;
  }
  // The device that `kernel`, `gpu_memcpy` and `gpu_memset` ran on: the one whose runtime launched
  // them (XPU, PrivateUse1 and HPU write their device ops in CUDA's categories), CUDA by default.
  std::string shared_category_device() const {
    if (!launch_device_.empty()) return std::string(launch_device_);
    return saw_hip_ ? "ROCm" : "CUDA";
  }

 private:
  KinetoTrace& out_;
  int depth_ = 0;
  int events_depth_ = 0;       // depth of the traceEvents array (-1 once it closed as a bare array)
  bool events_array_ = false;  // the document is a bare array of events
  bool args_open_ = false;
  std::string top_key_;
  Field field_ = Field::kOther;
  EventFields ev_;
  bool capture_ = false;
  int capture_depth_ = 0;
  size_t captured_ = 0;
  std::string capture_key_;
  std::vector<json*> capture_stack_;
  std::unordered_map<std::string, uint32_t> pool_ids_;
  std::map<std::pair<int64_t, int64_t>, uint64_t> threads_;
  size_t error_position_ = 0;
  std::string error_, limit_;
  bool saw_hip_ = false;
  bool saw_json_ = false, saw_events_list_ = false;
  std::string_view launch_device_;  // a device other than CUDA/ROCm whose runtime launched work
};

std::optional<int> small_int(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return std::nullopt;
  const double v = j[key].get<double>();
  if (!std::isfinite(v) || v < 0 || v >= (1 << 20) || v != std::floor(v)) return std::nullopt;
  return int(v);
}

void read_distributed_info(const json& d, KinetoTrace& out) {
  if (!d.is_object()) return;
  out.rank = small_int(d, "rank");
  out.world_size = small_int(d, "world_size");
  out.group_count = small_int(d, "pg_count");
  if (d.contains("rank") && !out.rank) out.warnings.push_back("distributedInfo.rank is not a rank number: ignored");
  if (d.contains("backend") && d["backend"].is_string()) out.backend = d["backend"].get<std::string>();
  if (!d.contains("pg_config") || !d["pg_config"].is_array()) return;
  for (const json& g : d["pg_config"]) {
    if (!g.is_object()) continue;
    ProcessGroupInfo pg;
    auto text = [&](const char* k) { return g.contains(k) && g[k].is_string() ? g[k].get<std::string>() : std::string(); };
    pg.name = text("pg_name");
    pg.desc = text("pg_desc");
    pg.backend = text("backend_config");
    if (g.contains("ranks") && g["ranks"].is_array()) {
      for (const json& r : g["ranks"]) {
        // Captured numbers are doubles (the handler keeps one number type): whole ones in range only.
        const double v = r.is_number() ? r.get<double>() : -1;
        if (v >= 0 && v < (1 << 20) && v == std::floor(v)) pg.ranks.push_back(int(v));
      }
    }
    out.groups.push_back(std::move(pg));
  }
}

// deviceProperties[].name: what the job ran on (compared across the traces of one job).
void read_device_properties(const json& d, KinetoTrace& out) {
  if (!d.is_array()) return;
  for (const json& p : d) {
    if (!p.is_object() || !p.contains("name") || !p["name"].is_string()) continue;
    const std::string name = p["name"].get<std::string>().substr(0, 128);
    if (std::find(out.device_names.begin(), out.device_names.end(), name) == out.device_names.end() && out.device_names.size() < 16) {
      out.device_names.push_back(name);
    }
  }
}

}  // namespace

CollectiveOp collective_op_from_annotation(std::string_view n) {
  while (!n.empty() && n.front() == '_') n.remove_prefix(1);
  auto has = [&](std::string_view s) { return n.find(s) != std::string_view::npos; };
  if (has("all_reduce") || has("allreduce")) return CollectiveOp::kAllReduceSum;
  if (has("reduce_scatter")) return CollectiveOp::kReduceScatter;
  if (has("all_gather") || has("allgather")) return CollectiveOp::kAllGather;
  if (has("all_to_all") || has("alltoall")) return CollectiveOp::kAllToAllV;
  if (has("broadcast")) return CollectiveOp::kBroadcast;
  if (has("barrier")) return CollectiveOp::kBarrier;
  if (has("send")) return CollectiveOp::kSend;
  if (has("recv")) return CollectiveOp::kRecv;
  if (has("reduce")) return CollectiveOp::kReduce;
  if (has("gather")) return CollectiveOp::kGather;
  return CollectiveOp::kUnknown;
}

// RapidJSON's SAX reader in front of the handler (its callbacks forwarded as nlohmann's SAX calls,
// the interface the handler was written to). Why: nlohmann's lexer, a character at a time with a
// copy of every token for its error messages, was three quarters of the import's CPU; RapidJSON's
// reader does the same job several times faster. Flags: the first value only (trailing bytes are
// ignored, as before), UTF-8 validated (names go into run.json, which must stay valid JSON),
// numbers as exact as strtod's, iterative (no recursion, whatever the nesting).
namespace {

// The streambuf read in 256 KiB chunks into a buffer of its own, so that RapidJSON's Peek and
// Take per character are a pointer compare and increment (the streambuf's sgetc is a library call).
class SourceStream {
 public:
  using Ch = char;
  explicit SourceStream(std::streambuf& sb) : sb_(&sb), buffer_(size_t(1) << 18), cur_(buffer_.data()), end_(buffer_.data()) {}
  Ch Peek() const { return cur_ != end_ || refill() ? *cur_ : '\0'; }
  Ch Take() { return cur_ != end_ || refill() ? *cur_++ : '\0'; }
  size_t Tell() const { return before_ + size_t(cur_ - buffer_.data()); }
  Ch* PutBegin() { return nullptr; }
  void Put(Ch) {}
  void Flush() {}
  size_t PutEnd(Ch*) { return 0; }

 private:
  bool refill() const {
    if (eof_) return false;
    before_ += size_t(end_ - buffer_.data());
    const std::streamsize n = sb_->sgetn(buffer_.data(), std::streamsize(buffer_.size()));
    cur_ = buffer_.data();
    end_ = cur_ + (n > 0 ? n : 0);
    eof_ = n <= 0;
    return !eof_;
  }
  std::streambuf* sb_;
  mutable std::vector<char> buffer_;
  mutable char* cur_;
  mutable char* end_;
  mutable size_t before_ = 0;
  mutable bool eof_ = false;
};

class RapidToHandler {
 public:
  explicit RapidToHandler(Handler& h) : h_(h) {}
  bool Null() { return h_.null(); }
  bool Bool(bool b) { return h_.boolean(b); }
  bool Int(int i) { return h_.number_integer(i); }
  bool Uint(unsigned u) { return h_.number_unsigned(u); }
  bool Int64(int64_t i) { return h_.number_integer(i); }
  bool Uint64(uint64_t u) { return h_.number_unsigned(u); }
  bool Double(double d) { return h_.number_float(d, empty_); }
  bool RawNumber(const char*, rapidjson::SizeType, bool) { return true; }  // not asked for
  bool String(const char* s, rapidjson::SizeType n, bool) {
    text_.assign(s, n);
    return h_.string(text_);
  }
  bool Key(const char* s, rapidjson::SizeType n, bool) {
    text_.assign(s, n);
    return h_.key(text_);
  }
  bool StartObject() { return h_.start_object(std::size_t(-1)); }
  bool EndObject(rapidjson::SizeType) { return h_.end_object(); }
  bool StartArray() { return h_.start_array(std::size_t(-1)); }
  bool EndArray(rapidjson::SizeType) { return h_.end_array(); }

 private:
  Handler& h_;
  std::string text_, empty_;
};

// True when the first JSON value was read whole; else the handler holds why and where it broke
// (nothing when the handler itself stopped the read: it says why in limit()).
bool parse_with_rapidjson(std::streambuf& source, Handler& handler) {
  SourceStream stream(source);
  RapidToHandler forward(handler);
  rapidjson::Reader reader;
  constexpr unsigned kFlags = rapidjson::kParseStopWhenDoneFlag | rapidjson::kParseValidateEncodingFlag |
                              rapidjson::kParseFullPrecisionFlag | rapidjson::kParseIterativeFlag;
  const rapidjson::ParseResult r = reader.Parse<kFlags>(stream, forward);
  if (r) return true;
  if (r.Code() != rapidjson::kParseErrorTermination)
    handler.set_parse_error(r.Offset(), fmt::format("{} at byte {}", rapidjson::GetParseError_En(r.Code()), r.Offset()));
  return false;
}

}  // namespace

Result<KinetoTrace> read_trace(const std::filesystem::path& file) {
  RS_ASSIGN_OR_RETURN(auto source, GzipSource::open(file));
  KinetoTrace out;
  out.file = file;
  out.compressed = source->compressed();
  Handler handler(out);
  bool complete = false;
  try {
    complete = parse_with_rapidjson(*source, handler);
  } catch (const std::exception& e) {  // the handler does not throw; this is a backstop
    handler.set_parse_error(0, e.what());
  }
  read_distributed_info(handler.distributed_info, out);
  read_device_properties(handler.device_properties, out);
  if (auto it = out.device_ops.find("CUDA/ROCm"); it != out.device_ops.end()) {
    out.device_ops[handler.shared_category_device()] += it->second;
    out.device_ops.erase(it);
  }

  // Why the read stopped: zlib's reason first (a truncated gzip also ends the JSON early).
  if (!source->error().empty()) {
    out.stopped_early = fmt::format("the gzip stream is broken after {} bytes of text ({}): the file was cut short or "
                                    "is corrupt", source->bytes_delivered(), source->error());
  } else if (!handler.limit().empty()) {
    out.stopped_early = fmt::format("reading stopped: {}", handler.limit());
  } else if (!complete) {
    out.stopped_early = fmt::format("the JSON ends or breaks at byte {} ({}): the job was likely killed while writing "
                                    "the trace", handler.error_position(), handler.error());
  }
  if (out.events == 0 && out.rows.nvtx.empty()) {
    // Three different files, three different sentences: bytes that are not JSON
    // at all, a trace whose profiler recorded nothing, and a trace cut before its first event.
    if (!handler.saw_json() && source->error().empty())
      return unsupported(fmt::format("{}: not a PyTorch profiler trace: not JSON (it breaks at byte {}: {})", file.string(),
                                          handler.error_position(), handler.error()));
    if (complete && handler.saw_events_list())
      return invalid_argument(fmt::format("{}: the trace holds no event (traceEvents is empty): the profiler recorded nothing; "
                                          "hint: let the schedule reach its active steps, calling prof.step() once per step",
                                          file.string()));
    if (!out.stopped_early.empty()) return invalid_argument(fmt::format("{}: no trace event read: {}", file.string(), out.stopped_early));
    return unsupported(fmt::format("{}: not a PyTorch profiler trace (no traceEvents); hint: write it with "
                                        "torch.profiler.profile(on_trace_ready=tensorboard_trace_handler(DIR)) or "
                                        "prof.export_chrome_trace(PATH)", file.string()));
  }

  // The main thread: the one with the ProfilerStep#N annotations, else the one with most ranges;
  // the process: the main thread's.
  uint64_t main_ordinal = 0;
  int64_t best = -1;
  for (const auto& [t, n] : handler.steps_per_thread) {
    if (n > best) best = n, main_ordinal = t;
  }
  out.profiler_steps = best > 0 ? best : 0;
  if (best < 0) {
    for (const auto& [t, n] : handler.ranges_per_thread) {
      if (n > best) best = n, main_ordinal = t;
    }
  }
  out.host_ops_read = main_ordinal != 0 ? handler.add_host_op_leaves(main_ordinal) : 0;
  int64_t main_pid = 0;
  for (const auto& [key, ordinal] : handler.threads()) {
    if (ordinal == main_ordinal) main_pid = key.first;
  }
  // MTIA writes some host calls (synchronize) under the device's pid: not another process.
  for (int64_t pid : handler.device_pids) {
    if (pid != main_pid) handler.pid_events.erase(pid);
  }
  if (main_ordinal == 0 && !handler.pid_events.empty()) {
    main_pid = std::max_element(handler.pid_events.begin(), handler.pid_events.end(),
                                [](auto& a, auto& b) { return a.second < b.second; })->first;
  }
  out.process_key = uint64_t(main_pid & 0xFFFFFF) << 24;
  if (out.process_key == 0) out.process_key = uint64_t(1) << 24;  // pid 0: keep the key non-zero
  out.main_gtid = out.process_key | main_ordinal;
  if (handler.pid_events.size() > 1) {
    out.warnings.push_back(fmt::format("{} processes recorded CPU events; all are read as the rank's process (pid {})",
                                       handler.pid_events.size(), main_pid));
  }

  // Threads without ranges of their own (PyTorch's autograd threads run backward while the main
  // thread waits in it; Gloo's run loops copy tensors) act for the main thread: their launches
  // and collectives are booked under the range the main thread has open at that moment.
  auto place = [&](uint64_t ordinal) {
    return out.process_key | (handler.ranges_per_thread.count(ordinal) ? ordinal : main_ordinal);
  };
  for (auto& r : out.rows.nvtx) r.gtid = r.domain == kAnnotationDomain ? (out.process_key | r.gtid) : place(r.gtid);
  for (auto& r : out.rows.runtime) r.gtid = place(r.gtid);
  for (auto& h : out.host_annotations) h.gtid = place(h.gtid);
  for (auto& op : out.rows.ops) op.process = out.process_key;
  out.rows.domains[{out.process_key, kNcclDomain}] = "NCCL";
  return out;
}

}  // namespace rankscope::kineto
