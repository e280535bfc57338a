// report_json.cpp — the JSON report (schema in report.h), written as it is built.
//
// Is: one streaming pass over a Diagnosis with RapidJSON's writer. At 16K ranks a DOM of the report
// (nlohmann) cost 1.5 million allocations and an eighth of hangdoctor's time. The text keeps what
// the DOM's dump(2) gave: the same keys and values, keys sorted within every object, two-space
// indent. Is not: the schema's description (report.h).
#include "rankscope/analyzers/hang/report.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include "rankscope/format/json_text.h"

namespace rankscope::analyzers::hang {
namespace {

// The pieces every object below is made of, over RapidJSON's PrettyWriter: strings made valid
// UTF-8 (a name from a damaged file must not make the report unreadable), a non-finite number
// written as null (JSON has no NaN), optionals as null.
class ReportWriter {
 public:
  explicit ReportWriter(rapidjson::StringBuffer& out) : w_(out) { w_.SetIndent(' ', 2); }

  void key(std::string_view k) { w_.Key(k.data(), rapidjson::SizeType(k.size())); }
  // A value already written as JSON text (an object built with nlohmann::json).
  void raw(const std::string& json) { w_.RawValue(json.data(), json.size(), rapidjson::kObjectType); }
  void begin_object() { w_.StartObject(); }
  void end_object() { w_.EndObject(); }
  void begin_array() { w_.StartArray(); }
  void end_array() { w_.EndArray(); }

  void value(std::nullptr_t) { w_.Null(); }
  void value(bool v) { w_.Bool(v); }
  void value(int v) { w_.Int(v); }
  void value(uint32_t v) { w_.Uint(v); }
  void value(int64_t v) { w_.Int64(v); }
  void value(uint64_t v) { w_.Uint64(v); }
  void value(double v) {
    if (std::isfinite(v)) w_.Double(v);
    else w_.Null();
  }
  void value(const char* s) { value(std::string_view(s)); }
  void value(const std::string& s) { value(std::string_view(s)); }
  void value(std::string_view s) {
    if (std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) {
      w_.String(s.data(), rapidjson::SizeType(s.size()));
      return;
    }
    const std::string valid = valid_utf8(s);
    w_.String(valid.data(), rapidjson::SizeType(valid.size()));
  }
  template <class T>
  void value(const std::optional<T>& v) {
    if (v) value(*v);
    else value(nullptr);
  }
  template <class T>
  void value(const std::vector<T>& v) {
    begin_array();
    for (const T& x : v) value(x);
    end_array();
  }

  template <class T>
  void member(std::string_view k, const T& v) {
    key(k);
    value(v);
  }
  // `v`, or null when `present` is false.
  template <class T>
  void member_or_null(std::string_view k, bool present, const T& v) {
    key(k);
    if (present) value(v);
    else value(nullptr);
  }

 private:
  // Each byte that does not start or continue a well-formed UTF-8 sequence becomes U+FFFD.
  static std::string valid_utf8(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    size_t i = 0;
    while (i < s.size()) {
      const auto b = static_cast<unsigned char>(s[i]);
      size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xe ? 3 : (b >> 3) == 0x1e ? 4 : 0;
      bool ok = len != 0 && i + len <= s.size();
      for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 0x2;
      if (ok && len > 1) {  // no overlong forms, no surrogates, nothing past U+10FFFF
        uint32_t cp = b & (0xff >> (len + 1));
        for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
        const uint32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
        ok = cp >= min && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff);
      }
      if (ok) {
        out.append(s.substr(i, len));
        i += len;
      } else {
        out += "\xef\xbf\xbd";
        ++i;
      }
    }
    return out;
  }

  rapidjson::PrettyWriter<rapidjson::StringBuffer> w_;
};

// Keys in sorted order in every object below: the order the report always had (a sorted DOM).

void write_collective(ReportWriter& w, const CollectiveRef& c) {
  w.begin_object();
  w.member("bytes", c.bytes);
  w.member("comm", c.comm);
  w.member("count", c.count);
  w.member("dtype", format::dtype_name(c.dtype));
  w.member("op", format::op_name(c.op));
  w.member("range", c.range);
  w.member("seq", c.seq);
  w.end_object();
}

void write_count_mismatch(ReportWriter& w, const CountMismatch& m) {
  auto rows = [&](const std::optional<uint64_t>& v) { return v ? std::optional<uint64_t>(*v / m.row_elements) : std::nullopt; };
  w.begin_object();
  w.member("comm", m.comm);
  w.member("difference", m.difference);
  w.member("evidence", m.evidence);
  w.member("expected", m.expected);
  if (m.row_elements > 0) w.member("expected_rows", rows(m.expected));
  w.member("other_pairs", m.other_pairs);
  w.member_or_null("receiver", m.receiver >= 0, m.receiver);
  w.member_or_null("row_elements", m.row_elements != 0, m.row_elements);
  w.member_or_null("sender", m.sender >= 0, m.sender);
  w.member("sent", m.sent);
  if (m.row_elements > 0) w.member("sent_rows", rows(m.sent));
  w.member("seq", m.seq);
  w.member("unit", "elements");
  w.end_object();
}

void write_detection(ReportWriter& w, const Detection& x) {
  const bool bound = x.by == "learned_bound" || x.by == "peer_wait";
  w.begin_object();
  if (bound) {
    w.member("basis", x.basis);
    w.member("bound_s", x.bound_s);
  }
  w.member("by", x.by);
  if (bound) {
    w.member("open_s", x.open_s);
    w.member("quantile_s", x.quantile_s);
    w.member("rank", x.rank);
    w.member("samples", x.samples);
    w.member("what", x.what);
  }
  w.end_object();
}

void write_gather(ReportWriter& w, const GatherSummary& g) {
  w.begin_object();
  w.member("findings", g.findings);
  w.member("nodes_answered", g.nodes_answered);
  w.member("nodes_asked", g.nodes_asked);
  w.member("seconds", g.seconds);
  w.member("stream_bytes", g.stream_bytes);
  w.end_object();
}

void write_mismatch(ReportWriter& w, const Mismatch& m) {
  // values_by_rank's keys are rank numbers as strings, sorted as strings ("10" before "2").
  std::vector<std::pair<std::string, const std::string*>> values;
  for (const auto& [r, v] : m.values_by_rank) values.emplace_back(std::to_string(r), &v);
  std::sort(values.begin(), values.end());
  w.begin_object();
  w.member("field", m.field);
  w.key("values_by_rank");
  w.begin_object();
  for (const auto& [r, v] : values) w.member(r, *v);
  w.end_object();
  w.end_object();
}

void write_node(ReportWriter& w, const NodeFinding& n) {
  w.begin_object();
  w.member("cause", n.cause);
  w.member("host", n.host);
  w.member("host_ranks", n.host_ranks);
  if (n.state == RankState::kDead) w.member("liveness", analyzers::liveness_name(n.alive));
  if (n.os_state != OsRunState::kUnknown) w.member("os_state", os_run_state_name(n.os_state));
  w.member("ranks", n.ranks);
  w.member("state", rank_state_name(n.state));
  w.end_object();
}

void write_rank(ReportWriter& w, const RankReport& r) {
  // The collective it waits in, when it does: comm, op, seq and waited_s are null otherwise.
  const CollectiveRef* in = r.waiting ? &*r.waiting : nullptr;
  using Name = std::optional<std::string_view>;
  w.begin_object();
  // true / false when this host could check the pid, null when it could not (another host)
  w.member_or_null("alive", r.alive != Liveness::kUnknown, r.alive == Liveness::kAlive);
  w.member("comm", in ? Name(in->comm) : std::nullopt);
  w.member("heartbeat_age_s", r.heartbeat_age_s);
  w.member("host", r.host);
  w.member("idle_s", r.idle_s);
  w.member("last_completed_seq", r.last_completed_seq);
  w.member("liveness", analyzers::liveness_name(r.alive));
  if (!r.note.empty()) w.member("note", r.note);
  w.member("op", in ? Name(format::op_name(in->op)) : std::nullopt);
  if (r.os_state != OsRunState::kUnknown) w.member("os_state", os_run_state_name(r.os_state));
  w.member("pid", r.pid);
  w.member("range", r.range);
  if (r.range_s > 0) w.member("range_s", r.range_s);
  w.member("range_stack", r.range_stack);
  w.member("rank", r.rank);
  w.member("seq", in ? std::optional(in->seq) : std::nullopt);
  if (!r.stacks_file.empty()) w.member("stacks_file", r.stacks_file);
  w.member("state", rank_state_name(r.state));
  w.member("step", r.step);
  w.member("waited_s", in ? std::optional(r.waited_s) : std::nullopt);
  if (!r.wchan.empty()) w.member("wchan", r.wchan);
  w.end_object();
}

void write_wait_chain(ReportWriter& w, const WaitChain& c) {
  w.begin_object();
  w.member("behind", c.behind);
  w.member("behind_via", c.behind_via);
  w.member("culprit", c.culprit);
  w.key("missing_from");
  w.begin_array();
  for (const auto& at : c.missing_from) {
    w.begin_object();
    w.key("collective");
    write_collective(w, at.collective);
    w.member("waiters", at.waiters);
    w.end_object();
  }
  w.end_array();
  w.end_object();
}

void write_wait(ReportWriter& w, const WaitSummary& x) {
  w.begin_object();
  w.member("hang_to_verdict_s", x.hang_to_verdict_s);
  w.member("quiet_s", x.quiet_s);
  w.member("samples", x.samples);
  w.member("stalled", x.stalled);
  w.end_object();
}

}  // namespace

std::string render_json_text(const Diagnosis& d, const ReportExtras& extras) {
  rapidjson::StringBuffer out;
  // About 500 bytes a rank: one growth instead of twenty at 16K ranks.
  out.Reserve(4096 + d.ranks.size() * 512);
  ReportWriter w(out);
  w.begin_object();
  w.key("collective");
  if (d.collective) write_collective(w, *d.collective);
  else w.value(nullptr);
  w.key("count_mismatch");
  if (d.count_mismatch) write_count_mismatch(w, *d.count_mismatch);
  else w.value(nullptr);
  w.member("culprit_ranks", d.culprit_ranks);
  w.key("culprits");
  w.begin_array();
  for (int r : d.culprit_ranks) {
    w.begin_object();
    w.member("host", host_of(d, r));
    w.member("rank", r);
    w.end_object();
  }
  w.end_array();
  w.key("detection");
  if (d.detection) write_detection(w, *d.detection);
  else w.value(nullptr);
  w.member("explanation", d.explanation);
  if (extras.gather) {
    w.key("gather");
    write_gather(w, *extras.gather);
  }
  w.member("headline", d.headline);
  w.member("hosts", d.hosts);
  if (extras.joined) {
    w.key("joined");
    w.raw(format::json_text(*extras.joined));  // strings from logs and stacks: any bytes
  }
  w.member_or_null("kind", d.kind != Kind::kNone, kind_name(d.kind));
  if (extras.log) {
    w.key("log");
    w.begin_object();
    w.member("cannot_tell", extras.log->cannot_tell);
    w.key("findings");
    w.begin_array();
    for (const auto& f : extras.log->findings) {
      w.begin_object();
      w.member("evidence", f.evidence);
      w.member("hosts", f.hosts);
      w.member("kind", f.kind);
      w.member_or_null("peer", !f.peer.empty(), f.peer);
      w.member("problem", f.problem);
      w.member("ranks", f.ranks);
      w.member("text", f.text);
      w.end_object();
    }
    w.end_array();
    w.member("summary", extras.log->summary);
    w.end_object();
  }
  w.key("mismatch");
  if (d.mismatch) write_mismatch(w, *d.mismatch);
  else w.value(nullptr);
  w.key("missing_gradients");
  w.begin_array();
  for (const auto& g : d.missing_gradients) {
    w.begin_object();
    w.member("bucket", g.bucket);
    w.member("param", g.param);
    w.member("rank", g.rank);
    w.end_object();
  }
  w.end_array();
  w.key("node_findings");
  w.begin_array();
  for (const auto& n : d.nodes) write_node(w, n);
  w.end_array();
  w.member("problems", d.problems);
  w.key("ranks");
  w.begin_array();
  for (const auto& r : d.ranks) write_rank(w, r);
  w.end_array();
  w.member_or_null("recompute", !d.recompute.empty(), d.recompute);
  w.member("reference_ns", d.reference_ns);
  w.member("run_dir", d.run_dir);
  w.member("schema_version", kHangReportSchemaVersion);
  if (extras.stacks) {
    w.key("stacks");
    w.raw(format::json_text(*extras.stacks));
  }
  w.member("stuck_for_s", d.stuck_for_s);
  w.member_or_null("time_basis", !d.time_basis.empty(), d.time_basis);
  w.member("times_are_lower_bounds", d.times_are_lower_bounds);
  w.member("verdict", verdict_name(d.verdict));
  if (extras.wait) {
    w.key("wait");
    write_wait(w, *extras.wait);
  }
  w.key("waits_on_culprits");
  w.begin_array();
  for (const auto& c : d.waits) write_wait_chain(w, c);
  w.end_array();
  w.member("world_size", d.world_size);
  w.end_object();
  return std::string(out.GetString(), out.GetSize());
}

nlohmann::json render_json(const Diagnosis& d) { return nlohmann::json::parse(render_json_text(d)); }

}  // namespace rankscope::analyzers::hang
