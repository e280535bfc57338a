// stack_verdict.cpp — every rank's Python stacks reduced to where it is, collapsed (stack_verdict.h).
#include "rankscope/analyzers/hang/stack_verdict.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <string_view>

#include <fmt/format.h>

#include "rankscope/analyzers/hang/rank_list.h"

namespace rankscope::analyzers::hang {
namespace {

using stacks::Frame;
using stacks::Thread;

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// A frame of torch, the standard library or an installed package, not the job's own code. py-spy
// prints package-relative names ("torch/distributed/distributed_c10d.py", "threading.py"),
// faulthandler full paths.
bool is_library(std::string_view file) {
  for (std::string_view m : {"site-packages/", "dist-packages/", "/lib/python", "<frozen", "<venv>", "<python>"})
    if (contains(file, m)) return true;
  static constexpr std::array<std::string_view, 16> kPackages = {
      "torch/", "numpy/", "multiprocessing/", "concurrent/", "asyncio/", "importlib/", "logging/", "json/",
      "http/", "urllib/", "email/", "xml/", "encodings/", "collections/", "ctypes/", "unittest/"};
  for (auto p : kPackages)
    if (file.starts_with(p)) return true;
  static constexpr std::array<std::string_view, 24> kModules = {
      "threading.py", "selectors.py", "subprocess.py", "queue.py",    "socket.py",   "ssl.py",
      "contextlib.py", "functools.py", "runpy.py",      "weakref.py",  "abc.py",      "typing.py",
      "signal.py",     "os.py",        "shutil.py",     "tempfile.py", "traceback.py", "pickle.py",
      "copy.py",       "random.py",    "inspect.py",    "warnings.py", "time.py",     "socketserver.py"};
  const size_t slash = file.rfind('/');
  const std::string_view base = slash == std::string_view::npos ? file : file.substr(slash + 1);
  if (slash == std::string_view::npos)
    for (auto m : kModules)
      if (base == m) return true;
  return false;
}

std::string short_file(std::string_view file) {
  // faulthandler's full paths, from the package down: ".../site-packages/torch/x.py" -> "torch/x.py".
  for (std::string_view m : {"site-packages/", "dist-packages/"})
    if (const size_t at = file.rfind(m); at != std::string_view::npos) return std::string(file.substr(at + m.size()));
  return std::string(file);
}

std::string frame_text(const Frame& f) { return fmt::format("`{}` at {}:{}", f.function, short_file(f.file), f.line); }

// The job's main thread: py-spy's "MainThread", else the thread whose outermost frame is <module>
// (faulthandler names no thread), else the first that is not the one printing the dump.
const Thread* main_thread(const stacks::Snapshot& s) {
  for (const auto& t : s.threads)
    if (t.name == "MainThread") return &t;
  for (const auto& t : s.threads)
    if (!t.frames.empty() && t.frames.back().function == "<module>") return &t;
  for (const auto& t : s.threads)
    if (!t.current && !t.frames.empty()) return &t;
  return s.threads.empty() ? nullptr : &s.threads.front();
}

std::string stack_signature(const Thread& t) {
  std::string s;
  for (const auto& f : t.frames) s += fmt::format("{}@{}:{};", f.function, short_file(f.file), f.line);
  return s;
}

RankStackView view_of(const stacks::RankStacks& r) {
  RankStackView v;
  v.rank = r.rank;
  v.snapshots = int(r.snapshots.size());
  if (r.snapshots.empty()) return v;
  const Thread* last = main_thread(r.snapshots.back());
  const Thread* first = main_thread(r.snapshots.front());
  if (!last) return v;
  v.thread = last->name.empty() ? last->id : last->name;
  v.signature = stack_signature(*last);
  v.moved = first && stack_signature(*first) != v.signature;
  const Frame* own = nullptr;
  const Frame* dist = nullptr;  // the innermost torch.distributed frame that is not a logging wrapper
  bool autograd = false, dataloader = false;
  for (const auto& f : last->frames) {
    const std::string file = short_file(f.file);
    if (!own && !is_library(f.file)) own = &f;
    if (!own && !dist && contains(file, "torch/distributed/") && !contains(file, "torch/distributed/debug/") &&
        !contains(file, "torch/distributed/elastic/") && f.function != "wrapper")
      dist = &f;
    if (!own && contains(file, "torch/autograd/")) autograd = true;
    if (!own && contains(file, "torch/utils/data/")) dataloader = true;
  }
  if (own) v.own = frame_text(*own);
  if (dist) {
    v.where = StackWhere::kCollective;
    v.call = fmt::format("`{}` ({}:{})", dist->function, short_file(dist->file), dist->line);
  } else if (autograd) {
    v.where = StackWhere::kBackward;
    v.call = "backward (the autograd engine, where DDP's and FSDP's gradient reductions wait)";
  } else if (dataloader) {
    v.where = StackWhere::kDataLoader;
    v.call = "a DataLoader's next batch";
  } else {
    v.where = StackWhere::kElsewhere;
    if (!last->frames.empty() && is_library(last->frames.front().file))
      v.call = fmt::format("`{}` ({}:{})", last->frames.front().function, short_file(last->frames.front().file),
                           last->frames.front().line);
  }
  return v;
}

bool waits(StackWhere w) { return w == StackWhere::kCollective || w == StackWhere::kBackward; }

std::string group_what(const RankStackView& v) {
  std::string s;
  switch (v.where) {
    case StackWhere::kCollective: s = "in " + v.call; break;
    case StackWhere::kBackward: s = "in " + v.call; break;
    case StackWhere::kDataLoader: s = "waiting for " + v.call; break;
    case StackWhere::kElsewhere: s = v.call.empty() ? "in its own code" : "in " + v.call; break;
    case StackWhere::kNoStack: return "no Python stack";
  }
  if (!v.own.empty()) s += (v.where == StackWhere::kElsewhere && v.call.empty() ? ": " : " from ") + v.own;
  return s;
}

std::string stack_ranks_word(const std::vector<int>& r) {
  return fmt::format("rank{} {}", r.size() == 1 ? "" : "s", compress_ranks(r));
}

}  // namespace

std::string_view stack_where_name(StackWhere w) {
  switch (w) {
    case StackWhere::kCollective: return "collective";
    case StackWhere::kBackward: return "backward";
    case StackWhere::kDataLoader: return "dataloader";
    case StackWhere::kElsewhere: return "elsewhere";
    case StackWhere::kNoStack: return "no_stack";
  }
  return "?";
}

StackSummary summarize_stacks(const stacks::StackImport& in) {
  StackSummary s;
  s.summary = in.summary;
  s.problems = in.problems;
  s.server_files = in.server_files;
  s.min_snapshots = in.ranks.empty() ? 0 : 1 << 30;
  for (const auto& [rank, r] : in.ranks) {
    // A rank below the highest one seen (or in the server's sections) with no stack at all: gone,
    // or its process could not be sampled (a watcher thread that cannot take the GIL).
    for (int gap = s.ranks.empty() ? 0 : s.ranks.back().rank + 1; gap < rank; ++gap) {
      RankStackView none;
      none.rank = gap;
      s.ranks.push_back(none);
    }
    s.ranks.push_back(view_of(r));
    s.min_snapshots = std::min(s.min_snapshots, int(r.snapshots.size()));
  }
  for (int gap = s.ranks.empty() ? 0 : s.ranks.back().rank + 1; gap < in.world_size; ++gap) {
    RankStackView none;
    none.rank = gap;
    s.ranks.push_back(none);
  }
  std::map<std::string, std::vector<int>> by_sig;
  std::map<std::string, const RankStackView*> first_of;
  for (const auto& v : s.ranks) {
    by_sig[v.signature].push_back(v.rank);
    first_of.emplace(v.signature, &v);
    if (waits(v.where)) s.waiting.push_back(v.rank);
  }
  for (const auto& [sig, ranks] : by_sig) s.groups.push_back({ranks, group_what(*first_of[sig])});
  std::stable_sort(s.groups.begin(), s.groups.end(),
                   [](const auto& a, const auto& b) { return a.ranks.size() > b.ranks.size(); });
  // Outliers: ranks away from torch.distributed while the others wait there.
  std::vector<int> away;
  for (const auto& v : s.ranks)
    if (v.where == StackWhere::kElsewhere || v.where == StackWhere::kDataLoader) away.push_back(v.rank);
  std::vector<int> no_stack;
  for (const auto& v : s.ranks)
    if (v.where == StackWhere::kNoStack) no_stack.push_back(v.rank);
  if (!s.waiting.empty() && !away.empty() && away.size() <= s.waiting.size()) {
    s.outliers = away;
  } else if (away.empty() && !no_stack.empty() && s.waiting.size() > no_stack.size()) {
    // Every rank with a stack waits; the ranks that left none are the suspects.
    s.outliers = no_stack;
  } else if (away.empty() && s.waiting.size() >= 3) {
    // Everyone waits, in different torch.distributed calls: the ranks in the rarer call stand out,
    // where one call holds more than half of the ranks.
    std::map<std::string, std::vector<int>> by_call;
    for (const auto& v : s.ranks) by_call[v.call].push_back(v.rank);
    for (const auto& [call, ranks] : by_call)
      if (ranks.size() * 2 > s.ranks.size())
        for (const auto& [c2, r2] : by_call)
          if (c2 != call) s.outliers.insert(s.outliers.end(), r2.begin(), r2.end());
    std::sort(s.outliers.begin(), s.outliers.end());
  }
  s.outliers_still = !s.outliers.empty();
  for (int r : s.outliers)
    for (const auto& v : s.ranks)
      if (v.rank == r && v.where != StackWhere::kNoStack && (v.snapshots < 2 || v.moved)) s.outliers_still = false;
  // Ranks that left no stack are still only where every rank that did waits in torch.distributed
  // without moving over two snapshots or more.
  if (s.outliers == no_stack && !no_stack.empty())
    for (const auto& v : s.ranks)
      if (v.where != StackWhere::kNoStack && (v.where != StackWhere::kCollective || v.snapshots < 2 || v.moved))
        s.outliers_still = false;
  return s;
}

std::string describe_rank_stack(const RankStackView& v) {
  std::string where;
  switch (v.where) {
    case StackWhere::kCollective: where = "in " + v.call; break;
    case StackWhere::kBackward: where = "in " + v.call; break;
    case StackWhere::kDataLoader: where = "waiting for " + v.call + ", not in a torch.distributed call"; break;
    case StackWhere::kElsewhere:
      where = "not in a torch.distributed call" + (v.call.empty() ? std::string() : ", in " + v.call);
      break;
    case StackWhere::kNoStack:
      return fmt::format("rank {} left no Python stack (gone, or its process could not be sampled: a thread "
                         "holding the GIL stops an in-process dump)", v.rank);
  }
  const std::string still = v.snapshots < 2 ? "one snapshot"
                            : v.moved       ? fmt::format("moved between {} snapshots", v.snapshots)
                                            : fmt::format("unmoved over {} snapshots", v.snapshots);
  return fmt::format("rank {} is {}{} ({})", v.rank, v.own.empty() ? "" : "in " + v.own + ", ", where, still);
}

Diagnosis diagnose_stacks(const StackSummary& s) {
  Diagnosis d;
  d.world_size = int(s.ranks.empty() ? 0 : s.ranks.back().rank + 1);
  d.missing_evidence = "stacks";
  d.missing_evidence_plural = "stacks";
  d.times_are_lower_bounds = true;
  d.time_basis = "stacks say where each rank is, not since when: no time is given";
  for (const auto& v : s.ranks) {
    RankReport r;
    r.rank = v.rank;
    // No collective record behind it: "running" with where the stack is, for the text's grouping.
    r.state = RankState::kRunning;
    r.range = group_what(v);
    if (r.range.starts_with("in ")) r.range.erase(0, 3);
    r.note = describe_rank_stack(v);
    d.ranks.push_back(std::move(r));
  }
  std::string outlier_text;
  for (int r : s.outliers)
    for (const auto& v : s.ranks)
      if (v.rank == r) outlier_text += (outlier_text.empty() ? "" : "; ") + describe_rank_stack(v);
  // The others, by the call they wait in (their own lines may differ: a pipeline's stages).
  std::string others;
  std::map<std::string, std::vector<int>> by_call;
  for (const auto& v : s.ranks)
    if (std::find(s.outliers.begin(), s.outliers.end(), v.rank) == s.outliers.end())
      by_call[v.where == StackWhere::kNoStack                     ? "no stack"
              : v.where == StackWhere::kElsewhere && v.call.empty() ? "its own code"
                                                                    : v.call]
          .push_back(v.rank);
  for (const auto& [call, ranks] : by_call)
    others += fmt::format("{}{} {}{}", others.empty() ? "" : "; ", stack_ranks_word(ranks), call == "no stack" ? "" : "in ",
                          call == "no stack" ? "left no stack" : call);
  if (s.outliers_still) {
    bool away = false;
    for (int r : s.outliers)
      for (const auto& v : s.ranks)
        if (v.rank == r && !waits(v.where)) away = true;
    bool loader = false;
    for (int r : s.outliers)
      for (const auto& v : s.ranks)
        if (v.rank == r && v.where == StackWhere::kDataLoader) loader = true;
    d.verdict = away ? Verdict::kHang : Verdict::kDesync;
    d.kind = away ? (loader ? Kind::kHostStall : Kind::kLaggingRank) : Kind::kCollectiveMismatch;
    d.culprit_ranks = s.outliers;
    d.detection = Detection{};
    d.detection->by = "stacks";
    d.headline = fmt::format("{}: {}; the others wait ({})", away ? "HANG" : "DESYNC", outlier_text, others);
    d.explanation = away ? "Every other rank waits in torch.distributed (or in backward, where gradient reductions wait); "
                           "the outliers' stacks did not move between snapshots: they never reached the call the "
                           "others wait in."
                         : "The ranks wait in different torch.distributed calls, and the outliers' stacks did not move: "
                           "ranks of one group must make the same calls in the same order.";
  } else if (!s.outliers.empty()) {
    d.headline = fmt::format("NO HANG SHOWN BY THE STACKS ALONE: {} (one snapshot, or it moved, cannot tell a stuck rank "
                             "from a busy one; take two snapshots a few seconds apart, or give the dumps or the log too)",
                             outlier_text);
    d.explanation = "Stacks alone make a verdict only when every outlier kept the same stack over two snapshots or more.";
  } else {
    d.headline = fmt::format("NO RANK STANDS APART IN THE STACKS: {}", others);
    d.explanation = "Every rank is in the same place, or the ranks wait alike: stacks alone name no rank.";
  }
  return d;
}

std::string render_stack_text(const StackSummary& s) {
  std::string out = fmt::format("\nFrom the stacks ({}):\n", s.summary);
  for (const auto& g : s.groups) out += fmt::format("  {}: {}\n", stack_ranks_word(g.ranks), g.what);
  if (!s.outliers.empty()) out += fmt::format("  outlier{}: {}\n", s.outliers.size() == 1 ? "" : "s", compress_ranks(s.outliers));
  for (const auto& f : s.server_files) out += "  - debug server's " + f + "\n";
  for (const auto& p : s.problems) out += "  ? " + p + "\n";
  return out;
}

nlohmann::json stack_json(const StackSummary& s) {
  nlohmann::json j;
  j["summary"] = s.summary;
  j["outliers"] = s.outliers;
  j["outliers_still"] = s.outliers_still;
  j["min_snapshots"] = s.min_snapshots;
  j["groups"] = nlohmann::json::array();
  for (const auto& g : s.groups) j["groups"].push_back({{"ranks", g.ranks}, {"what", g.what}});
  j["ranks"] = nlohmann::json::array();
  for (const auto& v : s.ranks)
    j["ranks"].push_back({{"rank", v.rank},
                          {"where", stack_where_name(v.where)},
                          {"own_frame", v.own},
                          {"call", v.call},
                          {"snapshots", v.snapshots},
                          {"moved", v.moved},
                          {"thread", v.thread}});
  j["problems"] = s.problems;
  j["server_files"] = s.server_files;
  return j;
}

}  // namespace rankscope::analyzers::hang
