// stack_import.cpp — py-spy, faulthandler and debug-server stack text read per rank (stack_import.h).
#include "rankscope/stacks/stack_import.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <charconv>
#include <chrono>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "debug_server_client.h"

namespace rankscope::stacks {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxFileBytes = 64u << 20;  // a stack file is text of a few KB; more is not one

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::optional<int> to_int(std::string_view s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

bool read_text(const fs::path& p, std::string& out, size_t limit = kMaxFileBytes) {
  std::error_code ec;
  const auto size = fs::file_size(p, ec);
  std::ifstream in(p, std::ios::binary);
  if (ec || !in) return false;
  out.assign(std::min<uintmax_t>(size, limit), '\0');
  in.read(out.data(), std::streamsize(out.size()));
  out.resize(size_t(in.gcount()));
  return true;
}

// "    all_reduce (torch/distributed/distributed_c10d.py:2950)" (py-spy; `--native` frames look alike).
std::optional<Frame> pyspy_frame(std::string_view line) {
  if (!line.starts_with("    ") || line.starts_with("        ")) return std::nullopt;  // 8: --locals
  line = trim(line);
  if (line.empty() || line.back() != ')') return std::nullopt;
  const size_t open = line.rfind(" (");
  if (open == std::string_view::npos) return std::nullopt;
  std::string_view where = line.substr(open + 2, line.size() - open - 3);
  Frame f;
  f.function = std::string(line.substr(0, open));
  const size_t colon = where.rfind(':');
  if (colon != std::string_view::npos) {
    if (auto n = to_int(where.substr(colon + 1))) {
      f.line = *n;
      where = where.substr(0, colon);
    }
  }
  f.file = std::string(where);
  return f;
}

// '  File "/x/train.py", line 88 in stage_forward' (faulthandler).
std::optional<Frame> faulthandler_frame(std::string_view line) {
  line = trim(line);
  if (!line.starts_with("File \"")) return std::nullopt;
  const size_t close = line.find("\", line ", 6);
  if (close == std::string_view::npos) return std::nullopt;
  Frame f;
  f.file = std::string(line.substr(6, close - 6));
  std::string_view rest = line.substr(close + 8);
  const size_t in = rest.find(" in ");
  if (in == std::string_view::npos) return std::nullopt;
  f.line = to_int(trim(rest.substr(0, in))).value_or(0);
  f.function = std::string(trim(rest.substr(in + 4)));
  return f;
}

// A thread header; false when the line is none. py-spy: 'Thread 3010 (idle): "MainThread"';
// faulthandler: 'Thread 0x00007f... (most recent call first):', 'Current thread 0x... (...)'.
bool thread_header(std::string_view line, Thread& t) {
  line = trim(line);
  bool current = false;
  if (line.starts_with("Current thread ")) {
    current = true;
    line.remove_prefix(15);
  } else if (line.starts_with("Thread ")) {
    line.remove_prefix(7);
  } else {
    return false;
  }
  const size_t sp = line.find(' ');
  if (sp == std::string_view::npos) return false;
  t = Thread{};
  t.id = std::string(line.substr(0, sp));
  t.current = current;
  std::string_view rest = line.substr(sp + 1);
  if (rest.find("(most recent call first)") != std::string_view::npos) {
    if (rest.starts_with("[")) t.name = std::string(rest.substr(1, rest.find(']') - 1));  // 3.12+: a name
    return true;
  }
  if (!rest.starts_with("(")) return false;
  const size_t close = rest.find(')');
  if (close == std::string_view::npos) return false;
  t.state = std::string(rest.substr(1, close - 1));
  if (const size_t q = rest.find('"', close); q != std::string_view::npos) {
    const size_t q2 = rest.find('"', q + 1);
    t.name = std::string(rest.substr(q + 1, q2 == std::string_view::npos ? std::string_view::npos : q2 - q - 1));
  }
  return true;
}

bool is_section_header(std::string_view line, int& rank) {
  line = trim(line);
  if (!line.starts_with("=== Rank ") || !line.ends_with("===")) return false;
  line.remove_prefix(9);
  const size_t colon = line.find_first_of(": ");
  if (colon == std::string_view::npos) return false;
  auto r = to_int(line.substr(0, colon));
  if (!r) return false;
  rank = *r;
  return true;
}

// The rank a per-rank file is for: the last run of digits in its name (rank3.txt, pyspy_03.log).
std::optional<int> rank_from_name(const fs::path& p) {
  const std::string stem = p.stem().string();
  size_t end = stem.size();
  while (end > 0 && !std::isdigit(static_cast<unsigned char>(stem[end - 1]))) --end;
  size_t begin = end;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(stem[begin - 1]))) --begin;
  if (begin == end || end - begin > 7) return std::nullopt;
  return to_int(std::string_view(stem).substr(begin, end - begin));
}

// The debug server's periodic files: "<kind>_<YYYYMMDD>_<HHMMSS>.txt".
std::string server_file_kind(const fs::path& p) {
  const std::string name = p.filename().string();
  if (!name.ends_with(".txt") || name.size() < 21) return {};
  const std::string_view stamp = std::string_view(name).substr(name.size() - 20, 16);  // _YYYYMMDD_HHMMSS
  if (stamp[0] != '_' || stamp[9] != '_') return {};
  for (size_t i = 1; i < stamp.size(); ++i)
    if (i != 9 && !std::isdigit(static_cast<unsigned char>(stamp[i]))) return {};
  return name.substr(0, name.size() - 20);
}

bool text_holds_stacks(std::string_view text) {
  std::istringstream in{std::string(text.substr(0, 1 << 16))};
  std::string line;
  int seen = 0;
  while (std::getline(in, line) && seen < 40) {
    const std::string_view l = trim(line);
    if (l.empty()) continue;
    ++seen;
    Thread t;
    int rank = 0;
    if (is_section_header(l, rank) || l.starts_with("PARTIAL DATA: ")) return true;
    if (thread_header(l, t) && (l.find("(most recent call first)") != std::string_view::npos || !t.state.empty()))
      return true;
    if (l.starts_with("Process ") && l.find(':') != std::string_view::npos) continue;  // py-spy's first line
    if (l.starts_with("Python v")) continue;
    if (seen > 3) return false;
  }
  return false;
}

struct Reader {
  StackImport out;
  std::set<int> section_ranks;
  int files = 0;

  void add(int rank, std::vector<Snapshot> snaps) {
    auto& r = out.ranks[rank];
    r.rank = rank;
    for (auto& s : snaps) r.snapshots.push_back(std::move(s));
  }

  // A debug-server file: sections per rank, after an optional "PARTIAL DATA" summary.
  void read_sections(std::string_view text, const std::string& source) {
    std::istringstream in{std::string(text)};
    std::string line;
    int rank = -1;
    std::string body;
    auto flush = [&] {
      if (rank < 0) return;
      section_ranks.insert(rank);
      const std::string_view b = trim(body);
      if (b.starts_with("Error: ")) {
        out.problems.push_back(fmt::format("{}: rank {}: the server could not fetch its stacks ({})", source, rank, b));
      } else {
        std::vector<Snapshot> snaps;
        parse_stack_text(body, fmt::format("{} (rank {})", source, rank), snaps);
        if (snaps.empty()) out.problems.push_back(fmt::format("{}: rank {}: no stack in its section", source, rank));
        add(rank, std::move(snaps));
      }
      body.clear();
    };
    while (std::getline(in, line)) {
      int r = 0;
      if (is_section_header(line, r)) {
        flush();
        rank = r;
      } else if (rank >= 0) {
        body += line;
        body += '\n';
      } else if (std::string_view l = trim(line); l.starts_with("PARTIAL DATA: ")) {
        out.problems.push_back(fmt::format("{}: {}", source, l));
      }
    }
    flush();
  }

  void read_file(const fs::path& p, bool in_directory) {
    std::string text;
    if (!read_text(p, text)) {
      out.problems.push_back(fmt::format("{}: cannot be read", p.filename().string()));
      return;
    }
    const std::string kind = server_file_kind(p);
    const std::string source = p.filename().string();
    if (kind == "stacks" || kind == "pyspy_dump" || (kind.empty() && text.find("=== Rank ") != std::string::npos)) {
      ++files;
      server_stacks |= !kind.empty();
      read_sections(text, source);
      return;
    }
    if (!kind.empty()) {
      note_server_file(kind, text, source);
      return;
    }
    if (!text_holds_stacks(text)) {
      if (!in_directory) out.problems.push_back(fmt::format("{}: holds no stack text", source));
      return;
    }
    auto rank = rank_from_name(p);
    if (!rank) {
      out.problems.push_back(fmt::format("{}: no rank in the file name (name it rank<N>.txt)", source));
      return;
    }
    ++files;
    std::vector<Snapshot> snaps;
    parse_stack_text(text, source, snaps);
    add(*rank, std::move(snaps));
  }

  // What the server's other periodic files say about themselves: not read as evidence here, but
  // what it failed to give is said.
  std::map<std::string, std::vector<std::string>> server_notes;
  std::map<std::string, int> server_counts;
  bool server_stacks = false;  // read the server's own stacks_ or pyspy_dump_ files
  std::map<std::string, std::pair<int, int>> health;  // kind -> ranks healthy, unhealthy (the latest file)
  void note_server_file(const std::string& kind, const std::string& text, const std::string& source) {
    ++server_counts[kind];
    if (kind.find("health_check") != std::string::npos) {
      auto count = [&](std::string_view what) {
        int n = 0;
        for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
        return n;
      };
      health[kind] = {count("\"healthy\":true") + count("\"healthy\": true"),
                      count("\"healthy\":false") + count("\"healthy\": false")};
    }
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      const std::string_view l = trim(line);
      if (l.starts_with("PARTIAL DATA: ") || l.starts_with("Failed to fetch") || l.starts_with("Error: ") ||
          l.find("Traceback") != std::string_view::npos || l.find("Failed to") == 0)
        server_notes[kind].push_back(fmt::format("{}: {}", source, l));
    }
  }

  void finish() {
    for (const auto& [kind, n] : server_counts) {
      const auto& notes = server_notes[kind];
      std::string said;
      if (auto h = health.find(kind); h != health.end())
        said = fmt::format("; the latest calls {} rank{} healthy and {} unhealthy (a check of the backends, not of "
                           "progress: it is no evidence against a stuck rank)",
                           h->second.first, h->second.first == 1 ? "" : "s", h->second.second);
      out.server_files.push_back(fmt::format("{}: {} file{}{}{}", kind, n, n == 1 ? "" : "s", said,
                                             notes.empty() ? std::string(", nothing failed in them")
                                                           : fmt::format("; {} (first of {})", notes.front(), notes.size())));
    }
    // The server writes fr_trace_ beside stacks_ by default; none means its dump raised (it logs
    // "Failed to dump fr_trace" with the traceback, _frontend.py PeriodicDumper._run).
    if (server_stacks && !server_counts.count("fr_trace"))
      out.server_files.push_back("fr_trace: no file beside its stacks: its Flight Recorder dump failed, or was not "
                                 "enabled (the job's log says \"Failed to dump fr_trace\" where it failed)");
    int hi = -1;
    for (const auto& [r, _] : out.ranks) hi = std::max(hi, r);
    for (int r : section_ranks) hi = std::max(hi, r);
    out.world_size = hi + 1;
    size_t snaps = 0;
    for (const auto& [_, r] : out.ranks) snaps = std::max(snaps, r.snapshots.size());
    out.summary = fmt::format("read the stacks of {} rank{} from {} file{} (up to {} snapshot{} a rank)", out.ranks.size(),
                              out.ranks.size() == 1 ? "" : "s", files, files == 1 ? "" : "s", snaps, snaps == 1 ? "" : "s");
  }
};

// The debug server's /stacks page (RAW_RESP_TEMPLATE in torch/distributed/debug/_frontend.py:
// "<h2>Rank N: addr</h2>" then "<pre>text</pre>", or "<p>Failed to fetch: status=..." before it) as
// the "=== Rank N: addr ===" sections its periodic stacks_ files hold.
std::string html_unescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  static constexpr std::pair<std::string_view, char> kEntities[] = {
      {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&#34;", '"'}, {"&#39;", '\''}, {"&#x27;", '\''}, {"&amp;", '&'}};
  for (size_t i = 0; i < s.size();) {
    bool done = false;
    if (s[i] == '&')
      for (const auto& [e, c] : kEntities)
        if (s.substr(i, e.size()) == e) {
          out += c;
          i += e.size();
          done = true;
          break;
        }
    if (!done) out += s[i++];
  }
  return out;
}

std::string stacks_page_as_sections(std::string_view html) {
  std::string out;
  for (size_t at = html.find("<h2>Rank "); at != std::string_view::npos; at = html.find("<h2>Rank ", at + 1)) {
    const size_t end = html.find("</h2>", at);
    if (end == std::string_view::npos) break;
    const std::string header = html_unescape(html.substr(at + 4, end - at - 4));  // "Rank N: addr"
    const size_t next = html.find("<h2>Rank ", end);
    const std::string_view body = html.substr(end, next == std::string_view::npos ? std::string_view::npos : next - end);
    out += "=== " + header + " ===\n";
    if (const size_t failed = body.find("Failed to fetch: status="); failed != std::string_view::npos) {
      const size_t stop = body.find('<', failed);
      out += "Error: " + std::string(body.substr(failed + 24, stop == std::string_view::npos ? 8 : stop - failed - 24)) + "\n";
      continue;
    }
    const size_t pre = body.find("<pre>");
    const size_t pre_end = body.find("</pre>", pre == std::string_view::npos ? 0 : pre);
    if (pre != std::string_view::npos && pre_end != std::string_view::npos)
      out += html_unescape(body.substr(pre + 5, pre_end - pre - 5)) + "\n";
  }
  return out;
}

}  // namespace

Result<StackImport> query_debug_server(std::string_view address, int snapshots, double interval_s, double timeout_s) {
  std::string host;
  int port = 0;
  if (Status st = parse_loopback_address(address, host, port); !st.ok()) return st;
  Reader reader;
  for (int k = 0; k < std::max(1, snapshots); ++k) {
    if (k > 0) std::this_thread::sleep_for(std::chrono::milliseconds(int64_t(interval_s * 1000)));
    auto page = http_get(host, port, "/stacks", timeout_s);
    if (!page.ok()) {
      if (k == 0) return page.status();
      reader.out.problems.push_back(fmt::format("snapshot {}: {}", k + 1, page.status().message()));
      break;
    }
    const std::string sections = stacks_page_as_sections(*page);
    if (sections.empty()) return invalid_argument(fmt::format("{}/stacks: no \"Rank N\" section in the page", address));
    ++reader.files;
    reader.read_sections(sections, fmt::format("{}/stacks (snapshot {})", address, k + 1));
  }
  reader.finish();
  if (reader.out.ranks.empty())
    return invalid_argument(fmt::format("{}/stacks: no Python stack of any rank{}", address,
                                        reader.out.problems.empty() ? "" : ": " + reader.out.problems.front()));
  reader.out.summary = fmt::format("asked the debug server at {} for every rank's stacks: {} rank{}, {} snapshot{} {:.0f} s "
                                   "apart", address, reader.out.ranks.size(), reader.out.ranks.size() == 1 ? "" : "s",
                                   reader.files, reader.files == 1 ? "" : "s", interval_s);
  return std::move(reader.out);
}

void parse_stack_text(std::string_view text, const std::string& source, std::vector<Snapshot>& into) {
  std::istringstream in{std::string(text)};
  std::string raw;
  std::optional<Snapshot> snap;
  Thread* thread = nullptr;
  bool in_command = false;  // py-spy's command line may span lines, up to "Python v..."
  std::set<std::string> ids;
  auto close = [&] {
    if (snap && !snap->threads.empty()) into.push_back(std::move(*snap));
    snap.reset();
    thread = nullptr;
    ids.clear();
  };
  while (std::getline(in, raw)) {
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    const std::string_view line = raw;
    const std::string_view t = trim(line);
    if (t.starts_with("Process ") && t.find(':') != std::string_view::npos &&
        to_int(t.substr(8, t.find(':') - 8))) {
      close();
      in_command = true;
      continue;
    }
    if (in_command) {
      if (t.starts_with("Python v")) in_command = false;
      continue;
    }
    Thread th;
    if (thread_header(line, th)) {
      // The same thread twice without a "Process" line: faulthandler output appended again.
      if (snap && ids.count(th.id)) close();
      if (!snap) {
        snap.emplace();
        snap->source = source;
      }
      ids.insert(th.id);
      snap->threads.push_back(std::move(th));
      thread = &snap->threads.back();
      continue;
    }
    if (!thread) continue;
    if (auto f = faulthandler_frame(line)) thread->frames.push_back(std::move(*f));
    else if (auto g = pyspy_frame(line)) thread->frames.push_back(std::move(*g));
  }
  close();
}

bool looks_like_stacks(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    int stacks = 0, others = 0;
    for (const auto& e : fs::directory_iterator(path, ec)) {
      if (!e.is_regular_file(ec)) continue;
      const std::string kind = server_file_kind(e.path());
      if (kind == "stacks" || kind == "pyspy_dump") return true;
      std::string head;
      if (read_text(e.path(), head, 1 << 16) && text_holds_stacks(head)) ++stacks;
      else ++others;
    }
    return stacks > 0 && others == 0;
  }
  std::string head;
  return fs::is_regular_file(path, ec) && read_text(path, head, 1 << 16) && text_holds_stacks(head);
}

Result<StackImport> import_stacks(const std::vector<fs::path>& paths) {
  Reader reader;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<fs::path> files;
      for (const auto& e : fs::directory_iterator(p, ec))
        if (e.is_regular_file(ec)) files.push_back(e.path());
      std::sort(files.begin(), files.end());  // the server's files by their time stamps: oldest first
      for (const auto& f : files) reader.read_file(f, true);
    } else if (fs::is_regular_file(p, ec)) {
      reader.read_file(p, false);
    } else {
      return not_found(fmt::format("{}: no such file or directory", p.string()));
    }
  }
  reader.finish();
  if (reader.out.ranks.empty()) {
    std::string why = paths.empty() ? std::string("no path") : paths.front().string();
    if (!reader.out.problems.empty()) why += ": " + reader.out.problems.front();
    return invalid_argument(fmt::format("{}: no Python stack of any rank (py-spy dump, faulthandler or the debug "
                                        "server's stacks_*.txt)",
                                        why));
  }
  return std::move(reader.out);
}

}  // namespace rankscope::stacks
