// nccl_ras.cpp — NCCL RAS reports (text 2.24+, JSON 2.28.7+) read into RasReport, and the findings
// they support. Shapes: docs/log-formats/nccl.md §g, from NCCL's src/ras/client_support.cc (tags
// v2.24.3-1 .. v2.30.7-1). Is not: the socket client (ras_client.cpp).
#include "nccl_ras.h"

#include "log_ranks.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

namespace rankscope::logs {
namespace {
// Named inside the anonymous namespace: a unity build puts several readers in one translation unit.
namespace nccl_ras_impl {

using std::string_view;

// ---------------------------------------------------------------------------------------------
// Small string helpers. Every one is bounds-checked: the input may be cut or hostile.

string_view trim(string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool starts_with(string_view s, string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

bool consume(string_view& s, string_view prefix) {
  if (!starts_with(s, prefix)) return false;
  s.remove_prefix(prefix.size());
  return true;
}

// The (optionally negative) decimal number at the start of `s`; advances past it.
bool take_int(string_view& s, int64_t& out) {
  const char* begin = s.data();
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(begin, end, out);
  if (ec != std::errc() || ptr == begin) return false;
  s.remove_prefix(static_cast<size_t>(ptr - begin));
  return true;
}

bool take_int(string_view& s, int& out) {
  int64_t v = 0;
  if (!take_int(s, v) || v < INT32_MIN || v > INT32_MAX) return false;
  out = static_cast<int>(v);
  return true;
}

// `s` is exactly one decimal number.
bool whole_int(string_view s, int& out) { return take_int(s, out) && s.empty(); }

std::vector<string_view> split_ws(string_view s) {
  std::vector<string_view> tokens;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) ++i;
    size_t j = i;
    while (j < s.size() && s[j] != ' ' && s[j] != '\t' && s[j] != '\r') ++j;
    if (j > i) tokens.push_back(s.substr(i, j - i));
    i = j;
  }
  return tokens;
}

// "1,2,5" (2.24's rank lists; its separator logic can also leave a leading comma).
std::vector<int> parse_int_list(string_view s) {
  std::vector<int> out;
  while (!s.empty()) {
    s = trim(s);
    if (consume(s, ",")) continue;
    int v = 0;
    if (!take_int(s, v)) break;
    out.push_back(v);
  }
  return out;
}

// A communicator hash as RAS prints it ("%016lx" in text, "0x%lx" in JSON) in one spelling: 16
// lower-case hex digits, so text and JSON reports and NCCL's Init lines (commId) match.
std::string normalize_hash(string_view s) {
  s = trim(s);
  if (starts_with(s, "0x") || starts_with(s, "0X")) s.remove_prefix(2);
  std::string out;
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return std::string(s);  // not a hash: as is
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  if (out.size() < 16) out.insert(0, 16 - out.size(), '0');
  return out;
}

// "GPU 4 managed by process 323032 on node 10.137.190.124" or "[process information not found]".
void parse_managed_by(string_view s, RasLocation& loc) {
  s = trim(s);
  if (!consume(s, "GPU ")) return;
  const size_t by = s.find(" managed by process ");
  if (by == string_view::npos) return;
  loc.gpus = std::string(trim(s.substr(0, by)));
  s.remove_prefix(by + std::string_view(" managed by process ").size());
  if (!take_int(s, loc.pid)) return;
  if (consume(s, " on node ")) loc.host = std::string(trim(s));
}

// "Process 4242 on node 10.0.0.2 managing GPU 3" / "managing GPUs 0,1 (NVML 2,3)".
bool parse_process_line(string_view s, RasLocation& loc) {
  s = trim(s);
  if (!consume(s, "Process ")) return false;
  if (!take_int(s, loc.pid)) return false;
  if (!consume(s, " on node ")) return false;
  const size_t managing = s.find(" managing GPU");
  loc.host = std::string(trim(s.substr(0, managing)));
  if (managing != string_view::npos) {
    string_view gpus = s.substr(managing + std::string_view(" managing GPU").size());
    consume(gpus, "s");
    loc.gpus = std::string(trim(gpus));
  }
  return true;
}

// "Rank 12 -- GPU 4 managed by ..." → rank and location; `rest` gets what sits between the rank
// number and " -- " ("has status INIT", "has launched up to operation 41", "reported System error").
bool parse_rank_line(string_view s, RasLocation& loc, string_view& rest) {
  s = trim(s);
  if (!consume(s, "Rank ")) return false;
  if (!take_int(s, loc.rank)) return false;
  const size_t dash = s.find(" -- ");
  rest = trim(s.substr(0, dash));
  if (dash != string_view::npos) parse_managed_by(s.substr(dash + 4), loc);
  return true;
}

void add_unique(std::vector<std::string>& v, const std::string& s) {
  if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

// ncclResult_t as RAS names it (client_support.cc, ncclErrorToString).
std::string nccl_result_name(int result) {
  switch (result) {
    case 1: return "Unhandled CUDA error";
    case 2: return "System error";
    case 3: return "Internal error";
    case 4: return "Invalid argument";
    case 5: return "Invalid usage";
    case 6: return "Remote process error";
    case 7: return "NCCL operation in progress";
    default: return "error " + std::to_string(result);
  }
}

constexpr int kNcclSuccess = 0;
constexpr int kNcclInProgress = 7;
bool is_error_result(int r) { return r != kNcclSuccess && r != kNcclInProgress; }

// ---------------------------------------------------------------------------------------------
// Text.

class TextReader {
 public:
  Result<RasReport> read(string_view text) {
    size_t pos = 0;
    while (pos < text.size()) {
      size_t nl = text.find('\n', pos);
      if (nl == string_view::npos) nl = text.size();
      string_view line = text.substr(pos, nl - pos);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      on_line(line);
      pos = nl + 1;
    }
    finish();
    if (!saw_ras_) {
      return corrupt("not an NCCL RAS report: no \"NCCL version\", \"Job summary\" or \"Communicators\" "
                     "line (expected the output of ncclras or of the RAS socket's STATUS command)");
    }
    if (!saw_comm_table_) {
      return corrupt("the NCCL RAS report ends before its communicator table: the query was cut "
                     "(RAS answers only after it has gathered data from every process, up to its "
                     "timeout); query again with a longer timeout");
    }
    report_.complete = saw_warnings_;
    return std::move(report_);
  }

 private:
  enum class Section { kHeader, kJobSummary, kComms, kErrors, kWarnings };
  enum class JobTable { kNone, kFull, kTotals, kOther };
  enum class Entry { kNone, kDead, kIncomplete, kTimeout, kCommIncomplete, kCommError, kCommMismatch,
                     kOther };
  enum class Block { kNone, kStatus, kCounts };

  void on_line(string_view line) {
    const string_view t = trim(line);
    if (starts_with(t, "NCCL version ")) {
      saw_ras_ = true;
      string_view v = t.substr(std::string_view("NCCL version ").size());
      const size_t with = v.find(" compiled with CUDA ");
      if (with != string_view::npos) report_.cuda_compiled = std::string(trim(v.substr(with + 19)));
      add_unique(report_.nccl_versions, std::string(trim(v.substr(0, with))));
      return;
    }
    if (starts_with(t, "CUDA runtime version ")) {
      string_view v = t.substr(std::string_view("CUDA runtime version ").size());
      take_int(v, report_.cuda_runtime);
      if (consume(v, ", driver version ")) take_int(v, report_.cuda_driver);
      return;
    }
    if (t == "Job summary") {
      saw_ras_ = true;
      section_ = Section::kJobSummary;
      return;
    }
    if (starts_with(t, "Communicators...")) {
      saw_ras_ = true;
      section_ = Section::kComms;
      // " (0.01s)" / " (5.012s)": the time RAS took to gather.
      const size_t open = t.find('(');
      if (open != string_view::npos) {
        const std::string secs(t.substr(open + 1, t.find('s', open) - open - 1));
        char* end = nullptr;
        const double v = std::strtod(secs.c_str(), &end);
        if (end != secs.c_str()) report_.collection_time_s = v;
      }
      return;
    }
    if (section_ != Section::kHeader && (t == "Errors" || t == "Warnings")) {
      section_ = t == "Errors" ? Section::kErrors : Section::kWarnings;
      if (section_ == Section::kWarnings) saw_warnings_ = true;
      entry_ = Entry::kNone;
      return;
    }
    if (!t.empty() && t.find_first_not_of('=') == string_view::npos) return;  // underlines
    switch (section_) {
      case Section::kHeader: return;
      case Section::kJobSummary: return on_job_summary(t);
      case Section::kComms: return on_comm_table(t);
      case Section::kErrors:
      case Section::kWarnings: return on_entry_line(line, t);
    }
  }

  void on_job_summary(string_view t) {
    if (t.empty()) return;
    const auto tokens = split_ws(t);
    if (tokens.empty()) return;
    if (tokens[0] == "Nodes" || tokens[0] == "Processes") return;  // first header line
    if (tokens[0] == "(total)") {
      // "(total)   per node  per process    (total)  (total)" heads the one-line summary of a
      // uniform job; "(total)    (total)      (total)" heads the totals of a non-uniform one.
      const bool has_per = std::find(tokens.begin(), tokens.end(), "per") != tokens.end();
      table_ = has_per ? JobTable::kFull : JobTable::kTotals;
      return;
    }
    if (tokens[0] == "per") {
      table_ = JobTable::kOther;  // distribution tables of a non-uniform job
      return;
    }
    if (t.find("per node") != string_view::npos || t.find("per process") != string_view::npos) {
      table_ = JobTable::kOther;
      return;
    }
    if (starts_with(t, "Node ")) {  // "Node 10.0.0.3 running processes 1,2" (outlier nodes)
      report_.outlier_nodes.emplace_back(t);
      return;
    }
    std::vector<int> v;
    for (string_view tok : tokens) {
      int n = 0;
      if (!whole_int(tok, n)) return;
      v.push_back(n);
    }
    if (table_ == JobTable::kFull && v.size() == 5) {
      report_.nodes = v[0];
      report_.processes_per_node = v[1];
      report_.gpus_per_process = v[2];
      report_.processes = v[3];
      report_.gpus = v[4];
    } else if (table_ == JobTable::kTotals && v.size() == 3) {
      report_.nodes = v[0];
      report_.processes = v[1];
      report_.gpus = v[2];
    }
  }

  void on_comm_table(string_view t) {
    if (t == "No communicator data collected!") {
      saw_comm_table_ = true;
      return;
    }
    const auto tokens = split_ws(t);
    if (tokens.empty()) return;
    if (tokens[0] == "Group") {
      saw_comm_table_ = true;
      return;
    }
    if (tokens.size() != 8) return;  // "#  in group ..." and anything unexpected
    RasCommGroup g;
    if (!whole_int(tokens[0], g.group) || !whole_int(tokens[1], g.comms) || !whole_int(tokens[2], g.nodes) ||
        !whole_int(tokens[4], g.ranks_per_comm) || !whole_int(tokens[5], g.ranks_in_group)) {
      return;
    }
    g.ranks_per_node = std::string(tokens[3]);
    g.status = std::string(tokens[6]);
    g.errors = std::string(tokens[7]);
    report_.groups.push_back(std::move(g));
  }

  RasCommunicator& communicator(string_view label, string_view hash) {
    const std::string h = normalize_hash(hash);
    for (auto& c : report_.communicators)
      if (c.hash == h) return c;
    RasCommunicator c;
    c.hash = h;
    c.label = std::string(label);
    string_view g = label;
    if (consume(g, "#") && take_int(g, c.group)) {
      for (const auto& row : report_.groups)
        if (row.group == c.group) c.size = row.ranks_per_comm;
    }
    report_.communicators.push_back(std::move(c));
    return report_.communicators.back();
  }

  void start_entry(string_view t) {
    RasMessage m;
    m.error = section_ == Section::kErrors;
    m.title = std::string(t);
    report_.messages.push_back(std::move(m));
    comm_ = nullptr;
    block_ = Block::kNone;
    if (t == "DEAD") {
      entry_ = Entry::kDead;
    } else if (t == "INCOMPLETE") {
      entry_ = Entry::kIncomplete;
    } else if (t == "TIMEOUT") {
      entry_ = Entry::kTimeout;
    } else if (starts_with(t, "#")) {
      // "#0-0 (fa93daea854b060b) MISMATCH"
      const size_t open = t.find(" (");
      const size_t close = t.find(") ", open == string_view::npos ? 0 : open);
      if (open == string_view::npos || close == string_view::npos) {
        entry_ = Entry::kOther;
        return;
      }
      const string_view kind = trim(t.substr(close + 2));
      comm_ = &communicator(t.substr(0, open), t.substr(open + 2, close - open - 2));
      add_unique(comm_->errors, std::string(kind));
      entry_ = kind == "INCOMPLETE" ? Entry::kCommIncomplete
               : kind == "ERROR"    ? Entry::kCommError
               : kind == "MISMATCH" ? Entry::kCommMismatch
                                    : Entry::kOther;
    } else {
      entry_ = Entry::kOther;
    }
  }

  void on_entry_line(string_view line, string_view t) {
    if (t.empty()) return;
    if (line.front() != ' ' && line.front() != '\t') return start_entry(t);
    if (report_.messages.empty()) return;  // a body line before any title: not RAS's shape
    report_.messages.back().lines.emplace_back(t);
    RasLocation loc;
    string_view rest;
    switch (entry_) {
      case Entry::kDead: {
        string_view s = t;
        int n = 0;
        if (take_int(s, n) && consume(s, " job process")) report_.dead_processes_count = n;
        else if (parse_process_line(t, loc)) report_.dead_processes.push_back(loc);
        return;
      }
      case Entry::kIncomplete: {
        string_view s = t;
        int n = 0;
        if (consume(s, "Missing communicator data from ") && take_int(s, n))
          report_.unreachable_processes_count = n;
        else if (parse_process_line(t, loc))
          report_.unreachable_processes.push_back(loc);
        return;
      }
      case Entry::kTimeout: {
        string_view s = t;
        int n = 0;
        if (consume(s, "Encountered ") && take_int(s, n)) report_.timeouts = n;
        return;
      }
      case Entry::kCommIncomplete: {
        string_view s = t;
        int n = 0;
        if (consume(s, "Missing communicator data from ") && take_int(s, n)) {
          comm_->missing_ranks_count = n;
        } else if (consume(s, "The missing rank")) {  // 2.24/2.25: "The missing ranks: 1,5"
          const size_t colon = s.find(':');
          if (colon == string_view::npos) return;
          for (int r : parse_int_list(s.substr(colon + 1))) {
            RasMissingRank m;
            m.where.rank = r;
            m.unresponsive = true;
            comm_->missing_ranks.push_back(std::move(m));
          }
        } else if (parse_rank_line(t, loc, rest)) {
          RasMissingRank m;
          m.where = loc;
          m.unresponsive = true;  // listed under INCOMPLETE: its process sent no data
          comm_->missing_ranks.push_back(std::move(m));
        }
        return;
      }
      case Entry::kCommError: {
        comm_->error_lines.emplace_back(t);
        if (parse_rank_line(t, loc, rest)) comm_->error_ranks.push_back(loc);
        return;
      }
      case Entry::kCommMismatch: return on_mismatch_line(t);
      case Entry::kNone:
      case Entry::kOther: return;
    }
  }

  void on_mismatch_line(string_view t) {
    string_view s = t;
    if (t == "Communicator ranks have different status") {
      block_ = Block::kStatus;
      return;
    }
    if (consume(s, "Communicator ranks have different ")) {
      const size_t ops = s.find(" operation counts");
      if (ops == string_view::npos) return;
      RasCountMismatch m;
      m.collective = std::string(s.substr(0, ops));  // "AllGather"; 2.24/2.25: "collective"
      comm_->count_mismatches.push_back(std::move(m));
      block_ = Block::kCounts;
      return;
    }
    std::vector<RasRankGroup>* groups = nullptr;
    if (block_ == Block::kStatus) groups = &comm_->status_groups;
    if (block_ == Block::kCounts && !comm_->count_mismatches.empty())
      groups = &comm_->count_mismatches.back().groups;
    if (groups == nullptr) return;

    int n = 0;
    if (take_int(s, n) && consume(s, " ranks ")) {  // a group of several ranks
      RasRankGroup g;
      g.ranks_count = n;
      int64_t op = 0;
      if (consume(s, "have status ")) g.status = std::string(trim(s));
      else if (consume(s, "have launched up to operation ") && take_int(s, op)) g.value = op;
      else if (!starts_with(s, "have not launched any operations")) return;
      groups->push_back(std::move(g));
      return;
    }
    s = t;
    if (consume(s, "The unknown ranks:")) {  // 2.24/2.25: the ranks that did not report the comm
      if (groups->empty()) return;
      for (int r : parse_int_list(s)) {
        RasLocation loc;
        loc.rank = r;
        groups->back().ranks.push_back(loc);
      }
      return;
    }
    if (!consume(s, "Rank ")) return;
    // 2.24/2.25: "Rank 3,5 has status UNKNOWN" (a rank list, no location).
    const size_t has_status = s.find(" has status ");
    if (has_status != string_view::npos && s.find(" -- ") == string_view::npos &&
        s.substr(0, has_status).find(',') != string_view::npos) {
      RasRankGroup g;
      g.status = std::string(trim(s.substr(has_status + 12)));
      for (int r : parse_int_list(s.substr(0, has_status))) {
        RasLocation loc;
        loc.rank = r;
        g.ranks.push_back(loc);
      }
      g.ranks_count = static_cast<int>(g.ranks.size());
      groups->push_back(std::move(g));
      return;
    }
    RasLocation loc;
    string_view rest;
    if (!parse_rank_line(t, loc, rest)) return;
    if (rest.empty()) {  // "Rank 12 -- GPU 4 ...": a member of the group printed just above
      if (!groups->empty()) groups->back().ranks.push_back(loc);
      return;
    }
    RasRankGroup g;  // a group of one: "Rank 7 has launched up to operation 41 -- ..."
    g.ranks_count = 1;
    int64_t op = 0;
    if (consume(rest, "has status ")) g.status = std::string(trim(rest));
    else if (consume(rest, "has launched up to operation ") && take_int(rest, op)) g.value = op;
    else if (!starts_with(rest, "has not launched any operations")) return;
    g.ranks.push_back(loc);
    groups->push_back(std::move(g));
  }

  void finish() {
    // A rank listed missing whose process RAS also lists as dead is a dead rank.
    for (auto& c : report_.communicators)
      for (auto& m : c.missing_ranks)
        for (const auto& d : report_.dead_processes)
          if (m.where.pid >= 0 && m.where.pid == d.pid && m.where.host == d.host) m.considered_dead = true;
    if (report_.dead_processes_count < static_cast<int>(report_.dead_processes.size()))
      report_.dead_processes_count = static_cast<int>(report_.dead_processes.size());
    if (report_.unreachable_processes_count < static_cast<int>(report_.unreachable_processes.size()))
      report_.unreachable_processes_count = static_cast<int>(report_.unreachable_processes.size());
  }

  RasReport report_;
  Section section_ = Section::kHeader;
  JobTable table_ = JobTable::kNone;
  Entry entry_ = Entry::kNone;
  Block block_ = Block::kNone;
  RasCommunicator* comm_ = nullptr;  // points into report_.communicators; reset on every new entry
  bool saw_ras_ = false, saw_comm_table_ = false, saw_warnings_ = false;
};

// ---------------------------------------------------------------------------------------------
// JSON.

using nlohmann::json;

int get_int(const json& o, const char* key, int fallback = -1) {
  const auto it = o.find(key);
  if (it == o.end() || !it->is_number_integer()) return fallback;
  const int64_t v = it->get<int64_t>();
  return v < INT32_MIN || v > INT32_MAX ? fallback : static_cast<int>(v);
}

bool get_bool(const json& o, const char* key) {
  const auto it = o.find(key);
  return it != o.end() && it->is_boolean() && it->get<bool>();
}

std::string get_string(const json& o, const char* key) {
  const auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

const json* get_array(const json& o, const char* key) {
  const auto it = o.find(key);
  return it != o.end() && it->is_array() ? &*it : nullptr;
}

// NCCL 2.28.7 and 2.28.9 (jsonWriteMissingRank) print `"nvml_dev": N` without the comma that must
// follow it inside a missing rank. Inserts exactly that comma where it is missing; 2.29.2 fixed it.
std::string repair_missing_rank_comma(string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  constexpr string_view kKey = "\"nvml_dev\":";
  size_t pos = 0;
  while (true) {
    const size_t at = text.find(kKey, pos);
    if (at == string_view::npos) break;
    size_t i = at + kKey.size();
    while (i < text.size() && text[i] == ' ') ++i;
    if (i < text.size() && text[i] == '-') ++i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    size_t j = i;
    while (j < text.size() && std::isspace(static_cast<unsigned char>(text[j]))) ++j;
    out.append(text.substr(pos, i - pos));
    if (j < text.size() && text[j] == '"') out.push_back(',');
    pos = i;
  }
  out.append(text.substr(pos));
  return out;
}

void derive_communicator_state(RasCommunicator& c) {
  // Per-collective counts: group the ranks by value, most frequent first (RAS's order).
  std::set<std::string> names;
  for (const auto& r : c.ranks)
    for (const auto& [name, n] : r.collective_counts) names.insert(name);
  for (const auto& name : names) {
    std::map<int64_t, std::vector<const RasRank*>> by_count;
    for (const auto& r : c.ranks) {
      const auto it = r.collective_counts.find(name);
      by_count[it == r.collective_counts.end() ? 0 : static_cast<int64_t>(it->second)].push_back(&r);
    }
    if (by_count.size() < 2) continue;
    RasCountMismatch m;
    m.collective = name;
    for (const auto& [count, ranks] : by_count) {
      RasRankGroup g;
      g.value = count;
      g.ranks_count = static_cast<int>(ranks.size());
      for (const RasRank* r : ranks) g.ranks.push_back({r->rank, r->pid, r->host, std::to_string(r->cuda_dev)});
      m.groups.push_back(std::move(g));
    }
    std::stable_sort(m.groups.begin(), m.groups.end(),
                     [](const RasRankGroup& a, const RasRankGroup& b) { return a.ranks_count > b.ranks_count; });
    c.count_mismatches.push_back(std::move(m));
  }
  // Status groups, with ranks whose process answered but did not report the comm as NOCOMM.
  std::map<std::string, RasRankGroup> by_status;
  for (const auto& r : c.ranks) {
    RasRankGroup& g = by_status[r.status()];
    g.status = r.status();
    ++g.ranks_count;
    g.ranks.push_back({r.rank, r.pid, r.host, std::to_string(r.cuda_dev)});
  }
  bool nocomm = false, incomplete = false, error = false;
  for (const auto& m : c.missing_ranks) {
    if (m.unresponsive) {
      incomplete = true;
      continue;
    }
    nocomm = true;
    RasRankGroup& g = by_status["NOCOMM"];
    g.status = "NOCOMM";
    ++g.ranks_count;
    g.ranks.push_back(m.where);
  }
  for (auto& [status, g] : by_status) c.status_groups.push_back(std::move(g));
  std::stable_sort(c.status_groups.begin(), c.status_groups.end(),
                   [](const RasRankGroup& a, const RasRankGroup& b) { return a.ranks_count > b.ranks_count; });
  for (const auto& r : c.ranks)
    if (is_error_result(r.init_state) || is_error_result(r.async_error)) error = true;
  if (incomplete) c.errors.push_back("INCOMPLETE");
  if (error) c.errors.push_back("ERROR");
  if (!c.count_mismatches.empty() || c.status_groups.size() > 1 || nocomm) c.errors.push_back("MISMATCH");
}

Result<RasReport> read_json(string_view text) {
  // nlohmann reports a number too large for a double (49768e9517) as out_of_range, not parse_error:
  // uncaught, it terminated hangdoctor (found by fuzz_nccl_ras).
  const auto out_of_range = [] {
    return corrupt("the NCCL RAS JSON report holds a number too large for any count (a corrupt report)");
  };
  json root;
  try {
    root = json::parse(text);
  } catch (const json::out_of_range&) {
    return out_of_range();
  } catch (const json::parse_error& first) {
    try {
      root = json::parse(repair_missing_rank_comma(text));
    } catch (const json::out_of_range&) {
      return out_of_range();
    } catch (const json::parse_error&) {
      const size_t byte = std::min<size_t>(first.byte, text.size());
      const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(byte > 0 ? byte - 1 : 0), '\n');
      return corrupt("the NCCL RAS JSON report is cut or malformed near line " + std::to_string(line) +
                     (byte >= text.size() ? " (it ends in the middle: the query was cut?)" : ""));
    }
  }
  if (!root.is_object() || (!root.contains("communicators") && !root.contains("nccl_version"))) {
    return corrupt("not an NCCL RAS JSON report: no \"nccl_version\" or \"communicators\" member");
  }
  RasReport report;
  report.json = true;
  if (std::string v = get_string(root, "nccl_version"); !v.empty()) report.nccl_versions.push_back(v);
  report.cuda_runtime = get_int(root, "cuda_runtime_version");
  report.cuda_driver = get_int(root, "cuda_driver_version");
  report.timestamp = get_string(root, "timestamp");
  if (const auto ras = root.find("ras"); ras != root.end() && ras->is_object()) {
    if (const auto t = ras->find("collection_time_sec"); t != ras->end() && t->is_number())
      report.collection_time_s = t->get<double>();
    report.timeouts = std::max(0, get_int(*ras, "timeouts_count", 0));
  }
  std::set<std::string> hosts;
  std::set<std::pair<std::string, int>> processes;
  std::set<std::tuple<std::string, int, int>> gpus;
  std::set<std::pair<std::string, int>> dead_seen, unreachable_seen;
  auto note_place = [&](const std::string& host, int pid, int cuda_dev) {
    if (host.empty() || host == "unknown") return;
    hosts.insert(host);
    if (pid >= 0) processes.insert({host, pid});
    if (pid >= 0 && cuda_dev >= 0) gpus.insert({host, pid, cuda_dev});
  };
  if (const json* comms = get_array(root, "communicators")) {
    for (const json& jc : *comms) {
      if (!jc.is_object()) return corrupt("NCCL RAS JSON report: a communicator is not an object");
      RasCommunicator c;
      c.hash = normalize_hash(get_string(jc, "hash"));
      c.secondary_hash = get_string(jc, "secondary_hash");
      c.size = std::max(0, get_int(jc, "size", 0));
      if (const json* ranks = get_array(jc, "ranks")) {
        for (const json& jr : *ranks) {
          if (!jr.is_object()) continue;
          RasRank r;
          r.rank = get_int(jr, "rank");
          r.host = get_string(jr, "host");
          r.pid = get_int(jr, "pid");
          r.cuda_dev = get_int(jr, "cuda_dev");
          r.nvml_dev = get_int(jr, "nvml_dev");
          if (const auto st = jr.find("status"); st != jr.end() && st->is_object()) {
            r.init_state = get_int(*st, "init_state", 0);
            r.async_error = get_int(*st, "async_error", 0);
            r.finalize_called = get_bool(*st, "finalize_called");
            r.destroy_flag = get_bool(*st, "destroy_flag");
            r.abort_flag = get_bool(*st, "abort_flag");
          }
          if (const auto cc = jr.find("collective_counts"); cc != jr.end() && cc->is_object()) {
            for (const auto& [name, n] : cc->items())
              if (n.is_number_unsigned() || (n.is_number_integer() && n.get<int64_t>() >= 0))
                r.collective_counts[name] = n.get<uint64_t>();
          }
          note_place(r.host, r.pid, r.cuda_dev);
          c.ranks.push_back(std::move(r));
        }
      }
      if (const json* missing = get_array(jc, "missing_ranks")) {
        for (const json& jm : *missing) {
          if (!jm.is_object()) continue;
          RasMissingRank m;
          m.where.rank = get_int(jm, "rank");
          m.where.host = get_string(jm, "host");
          if (m.where.host == "unknown") m.where.host.clear();
          m.where.pid = get_int(jm, "pid");
          const int cuda_dev = get_int(jm, "cuda_dev");
          if (cuda_dev >= 0) m.where.gpus = std::to_string(cuda_dev);
          if (const auto st = jm.find("status"); st != jm.end() && st->is_object()) {
            m.unresponsive = get_bool(*st, "unresponsive");
            m.considered_dead = get_bool(*st, "considered_dead");
          }
          note_place(m.where.host, m.where.pid, cuda_dev);
          const std::pair<std::string, int> process{m.where.host, m.where.pid};
          if (m.considered_dead && dead_seen.insert(process).second) {
            report.dead_processes.push_back({-1, m.where.pid, m.where.host, m.where.gpus});
          } else if (m.unresponsive && !m.considered_dead && unreachable_seen.insert(process).second) {
            report.unreachable_processes.push_back({-1, m.where.pid, m.where.host, m.where.gpus});
          }
          c.missing_ranks.push_back(std::move(m));
        }
      }
      c.missing_ranks_count = std::max(get_int(jc, "missing_ranks_count", 0), static_cast<int>(c.missing_ranks.size()));
      if (c.size == 0) c.size = static_cast<int>(c.ranks.size()) + c.missing_ranks_count;
      derive_communicator_state(c);
      report.communicators.push_back(std::move(c));
    }
  }
  report.dead_processes_count = static_cast<int>(report.dead_processes.size());
  report.unreachable_processes_count = static_cast<int>(report.unreachable_processes.size());
  if (!hosts.empty()) {
    report.nodes = static_cast<int>(hosts.size());
    report.processes = static_cast<int>(processes.size());
    report.gpus = static_cast<int>(gpus.size());
  }
  return report;
}

// ---------------------------------------------------------------------------------------------
// Findings.

// "0-11,14-31": log_ranks.h's compact().
std::string rank_ranges(const std::vector<int>& ranks) { return compact(ranks); }

std::string plural(int n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string where_text(const RasLocation& l) {
  std::string s;
  if (!l.host.empty()) s += "host " + l.host;
  if (l.pid >= 0) s += (s.empty() ? "pid " : ", pid ") + std::to_string(l.pid);
  if (!l.gpus.empty()) s += (s.empty() ? "GPU " : ", GPU ") + l.gpus;
  return s;
}

class FindingWriter {
 public:
  explicit FindingWriter(const RasReport& r) : r_(r) {
    for (const auto& c : r.communicators) job_ranks_ = std::max(job_ranks_, c.size);
    for (const auto& g : r.groups) job_ranks_ = std::max(job_ranks_, g.ranks_per_comm);
    if (r.gpus > 0 && !r.json) job_ranks_ = std::max(job_ranks_, r.gpus);
  }

  std::vector<LogFinding> write() {
    version();
    processes(r_.dead_processes, r_.dead_processes_count, true);
    processes(r_.unreachable_processes, r_.unreachable_processes_count, false);
    for (const auto& c : r_.communicators) communicator(c);
    groups();
    if (r_.timeouts > 0) {
      add(LogFinding::Kind::kNetworkError, {}, {},
          "RAS: " + plural(r_.timeouts, "communication timeout", "communication timeouts") +
              " while gathering communicator data: some processes answered slowly or not at all, so "
              "the report may miss them",
          "TIMEOUT");
    }
    if (!r_.complete) {
      add(LogFinding::Kind::kNcclError, {}, {},
          "RAS: the report is cut before its Warnings section: count mismatches RAS would list there "
          "are unknown",
          "", false);
    }
    const bool any_problem =
        std::any_of(out_.begin(), out_.end(), [](const LogFinding& f) { return f.problem; });
    if (!any_problem) {
      const size_t comms = r_.json ? r_.communicators.size() : count_group_comms();
      add(LogFinding::Kind::kNcclError, {}, {},
          "RAS sees no problem: " + plural(static_cast<int>(comms), "communicator", "communicators") +
              " with every rank reporting, all RUNNING with matching operation counts (RAS cannot see a "
              "collective that every rank launched but that never completes)",
          "", false);
    }
    return std::move(out_);
  }

 private:
  size_t count_group_comms() const {
    size_t n = 0;
    for (const auto& g : r_.groups) n += static_cast<size_t>(std::max(0, g.comms));
    return n;
  }

  // Communicator ranks are global ranks only in a communicator that spans the whole job.
  bool global(const RasCommunicator& c) const { return c.size > 0 && c.size == job_ranks_; }

  std::string comm_name(const RasCommunicator& c) const {
    return "communicator " + c.hash + (c.size > 0 ? " (" + std::to_string(c.size) + " ranks)" : "");
  }

  void add(LogFinding::Kind kind, std::vector<int> ranks, std::vector<std::string> hosts, std::string text,
           std::string evidence, bool problem = true, std::string peer = {}) {
    LogFinding f;
    f.kind = kind;
    f.ranks = std::move(ranks);
    f.hosts = std::move(hosts);
    f.text = std::move(text);
    f.evidence = evidence.empty() ? "NCCL RAS report" : "NCCL RAS report: " + evidence;
    f.problem = problem;
    f.peer = std::move(peer);
    out_.push_back(std::move(f));
  }

  void version() {
    if (r_.nccl_versions.empty()) return;
    std::string text = "RAS: NCCL " + r_.nccl_versions.front();
    std::string detail;
    if (!r_.cuda_compiled.empty()) detail += "compiled with CUDA " + r_.cuda_compiled;
    if (r_.cuda_runtime >= 0)
      detail += (detail.empty() ? "" : "; ") + std::string("CUDA runtime ") + std::to_string(r_.cuda_runtime) +
                ", driver " + std::to_string(r_.cuda_driver);
    if (!detail.empty()) text += " (" + detail + ")";
    if (r_.nodes > 0)
      text += ", " + plural(r_.nodes, "node", "nodes") + ", " + plural(r_.processes, "process", "processes") +
              ", " + plural(r_.gpus, "GPU", "GPUs");
    add(LogFinding::Kind::kVersion, {}, {}, text, "NCCL version " + r_.nccl_versions.front(), false);
  }

  // Ranks of global communicators that live in process (host, pid).
  std::vector<int> ranks_of_process(const RasLocation& p) const {
    std::vector<int> ranks;
    if (p.pid < 0) return ranks;
    for (const auto& c : r_.communicators) {
      if (!global(c)) continue;
      for (const auto& m : c.missing_ranks)
        if (m.where.pid == p.pid && m.where.host == p.host && m.where.rank >= 0) ranks.push_back(m.where.rank);
    }
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    return ranks;
  }

  void processes(const std::vector<RasLocation>& list, int count, bool dead) {
    for (const auto& p : list) {
      const std::vector<int> ranks = ranks_of_process(p);
      std::string text = "RAS: process " + (p.pid >= 0 ? std::to_string(p.pid) + " " : std::string()) +
                         "on host " + (p.host.empty() ? "(unknown)" : p.host);
      if (!p.gpus.empty()) text += " (GPU " + p.gpus + ")";
      if (!ranks.empty()) text += ", rank " + rank_ranges(ranks) + ",";
      text += dead ? " is dead: unreachable via the RAS network for 60 s"
                   : " sent no data to RAS: unreachable or too slow (RAS calls it dead after 60 s)";
      add(LogFinding::Kind::kNetworkError, ranks, p.host.empty() ? std::vector<std::string>{}
                                                                 : std::vector<std::string>{p.host},
          text, dead ? "DEAD" : "INCOMPLETE", true, p.host);
      for (int r : ranks) reported_ranks_.insert(r);
      reported_processes_.insert({p.host, p.pid});
    }
    const int unlisted = count - static_cast<int>(list.size());
    if (unlisted > 0) {
      add(LogFinding::Kind::kNetworkError, {}, {},
          "RAS: " + plural(unlisted, "job process", "job processes") +
              (dead ? (unlisted == 1 ? " is" : " are") + std::string(" dead (unreachable via the RAS network)")
                    : std::string(" sent no data to RAS")) +
              "; RAS did not list " + (unlisted == 1 ? "it" : "them") + " (query with verbose status)",
          dead ? "DEAD" : "INCOMPLETE");
    }
  }

  void communicator(const RasCommunicator& c) {
    const bool is_global = global(c);
    auto globals = [&](const std::vector<RasLocation>& ls) {
      std::vector<int> out;
      if (!is_global) return out;
      for (const auto& l : ls)
        if (l.rank >= 0) out.push_back(l.rank);
      return out;
    };
    auto hosts_of = [](const std::vector<RasLocation>& ls) {
      std::vector<std::string> hosts;
      for (const auto& l : ls)
        if (!l.host.empty()) add_unique(hosts, l.host);
      return hosts;
    };

    // Missing ranks whose process is not already reported above.
    std::vector<RasLocation> silent, nocomm;
    for (const auto& m : c.missing_ranks) {
      if (reported_processes_.count({m.where.host, m.where.pid}) && m.where.pid >= 0) continue;
      (m.unresponsive ? silent : nocomm).push_back(m.where);
    }
    if (!silent.empty()) {
      std::vector<int> rs;
      for (const auto& l : silent) rs.push_back(l.rank);
      add(LogFinding::Kind::kNetworkError, globals(silent), hosts_of(silent),
          "RAS: " + comm_name(c) + ": " + (silent.size() == 1 ? "rank " : "ranks ") + rank_ranges(rs) +
              (silent.size() == 1 && !where_text(silent[0]).empty() ? " (" + where_text(silent[0]) + ")" : "") +
              " sent no data: " + (silent.size() == 1 ? "its process is" : "their processes are") +
              " unreachable",
          "#" + c.hash + " INCOMPLETE");
    } else if (c.missing_ranks.empty() && c.missing_ranks_count > 0 &&
               std::find(c.errors.begin(), c.errors.end(), "INCOMPLETE") != c.errors.end() &&
               r_.dead_processes.empty() && r_.unreachable_processes.empty()) {
      add(LogFinding::Kind::kNetworkError, {}, {},
          "RAS: " + comm_name(c) + ": " + plural(c.missing_ranks_count, "rank", "ranks") + " sent no data",
          "#" + c.hash + " INCOMPLETE");
    }
    if (!nocomm.empty()) {
      std::vector<int> rs;
      for (const auto& l : nocomm) rs.push_back(l.rank);
      add(LogFinding::Kind::kNcclError, globals(nocomm), hosts_of(nocomm),
          "RAS: " + comm_name(c) + ": " + (nocomm.size() == 1 ? "rank " : "ranks ") + rank_ranges(rs) +
              " answered RAS but no longer report the communicator (destroyed or aborted it)",
          "#" + c.hash + " MISMATCH");
    }

    for (const auto& m : c.count_mismatches) count_mismatch(c, m, is_global);

    // Status: a communicator whose ranks are not all RUNNING.
    if (c.status_groups.size() > 1 || (c.status_groups.size() == 1 && c.status_groups[0].status != "RUNNING" &&
                                       c.status_groups[0].status != "")) {
      for (const auto& g : c.status_groups) {
        if (g.status == "RUNNING" || g.status == "NOCOMM" || g.status == "UNKNOWN") continue;
        std::string who = g.ranks.size() == static_cast<size_t>(g.ranks_count) && !g.ranks.empty()
                              ? (g.ranks_count == 1 ? "rank " : "ranks ") + rank_ranges(rank_list(g.ranks))
                              : plural(g.ranks_count, "rank", "ranks");
        const bool one = g.ranks_count == 1;
        std::string what;
        if (g.status == "INIT") what = one ? "has not finished initialising it" : "have not finished initialising it";
        else if (g.status == "ABORT") what = "aborted it";
        else if (g.status == "FINALIZE") what = "finalized or destroyed it";
        else what = (one ? "is in state " : "are in state ") + g.status;
        add(g.status == "INIT" ? LogFinding::Kind::kInitIncomplete : LogFinding::Kind::kNcclError,
            globals(g.ranks), hosts_of(g.ranks), "RAS: " + comm_name(c) + ": " + who + " " + what,
            "#" + c.hash + " status " + g.status);
      }
    }

    // Errors the ranks reported (ERROR entry / init_state, async_error).
    if (r_.json) {
      for (const auto& r : c.ranks) {
        for (const auto& [value, kind_text] : {std::pair{r.init_state, "during init"},
                                               std::pair{r.async_error, "asynchronously"}}) {
          if (!is_error_result(value)) continue;
          RasLocation l{r.rank, r.pid, r.host, std::to_string(r.cuda_dev)};
          add(LogFinding::Kind::kNcclError, globals({l}), hosts_of({l}),
              "RAS: " + comm_name(c) + ": rank " + std::to_string(r.rank) + " (" + where_text(l) +
                  ") reported " + nccl_result_name(value) + " " + kind_text,
              "#" + c.hash + " ERROR");
        }
      }
    } else if (!c.error_lines.empty()) {
      std::string text = "RAS: " + comm_name(c) + ": ";
      for (size_t i = 0; i < c.error_lines.size() && i < 4; ++i) text += (i ? "; " : "") + c.error_lines[i];
      add(LogFinding::Kind::kNcclError, globals(c.error_ranks), hosts_of(c.error_ranks), text,
          "#" + c.hash + " ERROR");
    }
  }

  static std::vector<int> rank_list(const std::vector<RasLocation>& ls) {
    std::vector<int> out;
    for (const auto& l : ls)
      if (l.rank >= 0) out.push_back(l.rank);
    return out;
  }

  void count_mismatch(const RasCommunicator& c, const RasCountMismatch& m, bool is_global) {
    if (m.groups.size() < 2) return;
    int64_t top = 0;
    for (const auto& g : m.groups) top = std::max(top, g.value);
    std::vector<const RasRankGroup*> behind, ahead;
    for (const auto& g : m.groups) (g.value < top ? behind : ahead).push_back(&g);
    // Groups that all report the same count (a report edited or cut, found by fuzz_logs) leave
    // nobody behind: there is no mismatch to name, and the text below needs a rank behind.
    if (behind.empty()) return;
    auto sum = [](const std::vector<const RasRankGroup*>& gs, bool listed) {
      int n = 0;
      for (const auto* g : gs) n += listed ? static_cast<int>(g->ranks.size()) : g->ranks_count;
      return n;
    };
    const int behind_n = sum(behind, false), ahead_n = sum(ahead, false);
    std::vector<int> behind_ranks, ahead_ranks;
    std::vector<std::string> hosts;
    for (const auto* g : behind)
      for (const auto& l : g->ranks) {
        if (l.rank >= 0) behind_ranks.push_back(l.rank);
        if (!l.host.empty()) add_unique(hosts, l.host);
      }
    for (const auto* g : ahead)
      for (const auto& l : g->ranks)
        if (l.rank >= 0) ahead_ranks.push_back(l.rank);
    // RAS lists only the outliers. When it listed every rank ahead and every rank reported, the
    // ranks behind are the rest of the communicator.
    const bool every_rank_reported = c.missing_ranks_count == 0 && c.size == behind_n + ahead_n;
    if (static_cast<int>(behind_ranks.size()) < behind_n && every_rank_reported &&
        static_cast<int>(ahead_ranks.size()) == ahead_n) {
      behind_ranks.clear();
      std::set<int> ahead_set(ahead_ranks.begin(), ahead_ranks.end());
      for (int r = 0; r < c.size; ++r)
        if (!ahead_set.count(r)) behind_ranks.push_back(r);
    }
    const bool behind_known = static_cast<int>(behind_ranks.size()) == behind_n;
    const bool ahead_known = static_cast<int>(ahead_ranks.size()) == ahead_n;
    const std::string coll = m.collective == "collective" ? "collective" : m.collective;

    std::string behind_at;
    if (behind.size() == 1) {
      behind_at = behind[0]->value == 0 ? "have not launched any " + coll + " operation"
                                        : "are at " + coll + " operation " + std::to_string(behind[0]->value);
    } else {
      std::vector<int64_t> values;
      for (const auto* g : behind) values.push_back(g->value);
      std::sort(values.begin(), values.end());
      behind_at = "are at " + coll + " operations " + std::to_string(values.front()) + "-" +
                  std::to_string(values.back());
    }
    std::string text = "RAS: " + comm_name(c) + ": ";
    if (behind_known && behind_n <= 16)
      text += (behind_n == 1 ? "rank " : "ranks ") + rank_ranges(behind_ranks);
    else
      text += plural(behind_n, "rank", "ranks") + (behind_known ? " (" + rank_ranges(behind_ranks) + ")" : "");
    if (behind_n == 1) {  // "rank 3 is at", "rank 3 has not launched"
      if (behind_at.rfind("are ", 0) == 0) behind_at.replace(0, 3, "is");
      else if (behind_at.rfind("have ", 0) == 0) behind_at.replace(0, 4, "has");
    }
    text += " " + behind_at + " while the other " + std::to_string(ahead_n);
    if (ahead_known && ahead_n <= 16) text += " (" + rank_ranges(ahead_ranks) + ")";
    text += std::string(ahead_n == 1 ? " is" : " are") + " at " + std::to_string(top) +
            ": the ranks behind have not launched what the others wait in";
    add(LogFinding::Kind::kSilentRank, is_global && behind_known ? behind_ranks : std::vector<int>{}, hosts,
        text, "#" + c.hash + " MISMATCH: different " + m.collective + " operation counts");
  }

  // Text: whole groups of communicators still initialising or aborted (no per-comm entry says so).
  void groups() {
    for (const auto& g : r_.groups) {
      if (g.status != "INIT" && g.status != "ABORT") continue;
      bool listed = false;  // a mismatch entry already named these ranks
      for (const auto& c : r_.communicators)
        if (c.group == g.group && !c.status_groups.empty()) listed = true;
      if (listed) continue;
      add(g.status == "INIT" ? LogFinding::Kind::kInitIncomplete : LogFinding::Kind::kNcclError, {}, {},
          "RAS: " + plural(g.comms, "communicator", "communicators") + " of " +
              std::to_string(g.ranks_per_comm) + " ranks on " + plural(g.nodes, "node", "nodes") +
              (g.status == "INIT" ? " still initialising (init not complete)" : " aborted"),
          "group " + std::to_string(g.group) + " " + g.status + " " + g.errors);
    }
  }

  const RasReport& r_;
  int job_ranks_ = 0;
  std::vector<LogFinding> out_;
  std::set<int> reported_ranks_;
  std::set<std::pair<std::string, int>> reported_processes_;
};

}  // namespace nccl_ras_impl
}  // namespace

std::string RasRank::status() const {
  if (abort_flag) return "ABORT";
  if (finalize_called || destroy_flag) return "FINALIZE";
  if (init_state == nccl_ras_impl::kNcclSuccess) return "RUNNING";
  return "INIT";
}

Result<RasReport> parse_nccl_ras(std::string_view text) {
  // A raw capture of the socket starts with the protocol's replies; ncclras prints none of them.
  while (true) {
    const std::string_view t = nccl_ras_impl::trim(text.substr(0, text.find('\n')));
    if (t == "OK" || nccl_ras_impl::starts_with(t, "SERVER PROTOCOL ") || (t.empty() && !text.empty())) {
      const size_t nl = text.find('\n');
      text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
      continue;
    }
    break;
  }
  if (text.empty()) return corrupt("the NCCL RAS report is empty (the job's RAS sent nothing)");
  if (text.front() == '{') return nccl_ras_impl::read_json(text);
  if (text.front() == '[') return corrupt("not an NCCL RAS JSON report: it is an array, not an object");
  return nccl_ras_impl::TextReader().read(text);
}

std::vector<LogFinding> ras_findings(const RasReport& report) { return nccl_ras_impl::FindingWriter(report).write(); }

}  // namespace rankscope::logs
