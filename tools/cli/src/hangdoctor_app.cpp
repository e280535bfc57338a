// hangdoctor_app.cpp — `hangdoctor RUN_DIR [--json FILE] [--wait SECONDS] [--stacks]`.
#include "rankscope/cli/hangdoctor_app.h"

#include <algorithm>
#include <charconv>
#include <exception>
#include <fstream>
#include <new>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "rankscope/analyzers/hang/classifier.h"
#include "rankscope/analyzers/hang/gather_wording.h"
#include "rankscope/analyzers/hang/joined_verdict.h"
#include "rankscope/analyzers/hang/log_verdict.h"
#include "rankscope/analyzers/hang/progress_watch.h"
#include "rankscope/analyzers/hang/rank_hosts.h"
#include "rankscope/analyzers/hang/report.h"
#include "rankscope/analyzers/hang/snapshot_process_table.h"
#include "rankscope/format/command_boundary.h"
#include "rankscope/format/gathered_run.h"
#include "rankscope/format/option_table.h"
#include "rankscope/format/run_directory.h"
#include "rankscope/logs/log_import.h"
#include "rankscope/reports/html_report.h"
#include "rankscope/stacks/local_ranks.h"
#include "rankscope/stacks/stack_import.h"
#include "rankscope/torch_fr/fr_import.h"

namespace rankscope::cli {
// The analysis this command runs: its types and functions by their own names.
using namespace rankscope::analyzers::hang;
namespace {

constexpr format::Option kOptions[] = {
    {"--nccl-ras", "[HOST:]PORT",
     "ask a live NCCL job's RAS thread (NCCL 2.24+, default port 28028 on\n"
     "localhost) which ranks are behind, missing or dead, and judge its answer"},
    {"--torch-debug-server", "HOST:PORT",
     "ask a running PyTorch debug server (torch.distributed.debug, on this\n"
     "machine) for every rank's stacks, twice 2 s apart; with paths, joined with them"},
    {"--py-spy", "",
     "take the Python stacks of the PyTorch job running on this machine with py-spy\n"
     "(its ranks found by their RANK environment; twice 1 s apart); with paths, joined"},
    {"--json", "FILE",
     "also write the diagnosis as JSON (schema_version 2); '-' for stdout, which\n"
     "then carries only the JSON (the text goes to stderr)"},
    {"--html", "FILE",
     "also write the diagnosis as one self-contained HTML page (what each artifact\n"
     "said, each culprit's evidence, the ranks)"},
    {"--quiet", "", "no text report (with --json or --html)", "-q"},
    {"--wait", "SECONDS",
     "follow a live job until it made no progress for SECONDS (or finished),\n"
     "then diagnose; prints the time from the hang to the verdict"},
    {"--stacks", "",
     "gather native stacks (eu-stack, else gdb) of culprit ranks on this host\n"
     "into RUN_DIR/evidence/"},
    {"--stuck-after", "SECONDS", "without --wait: no progress for this long means stuck (default 10)"},
};

const std::string& help_text() {
  static const std::string text =
      "usage: hangdoctor PATH [--json FILE] [--html FILE] [--quiet] [--wait SECONDS] [--stacks]\n"
      "                       [--stuck-after SECONDS]\n"
      "       hangdoctor PATH... [--json FILE] [--html FILE] [--quiet]    dumps, logs and stacks, joined\n\n"
      "Says which rank holds a distributed job up, at which collective, and what that rank is doing,\n"
      "from the run directory's flight recorders. Safe on a live stuck job (read-only), after ranks\n"
      "died, and after the launcher was killed.\n"
      "PATH is a run directory, or PyTorch Flight Recorder dumps: a directory of them or a file prefix\n"
      "(e.g. ~/.cache/torch/comm_lib_trace_rank_), the rank taken from each file name's suffix.\n"
      "LOG is a job's output: torchrun's or Slurm's output file with NCCL_DEBUG=INFO lines and PyTorch's\n"
      "watchdog lines, in any mix (a file, a directory of *.log/*.out/*.err/*.txt, or - for stdin; several\n"
      "may be given). From a log: ranks behind on a communicator (with NCCL_DEBUG_SUBSYS=COLL), which ranks\n"
      "timed out on which SeqNum and which did not, init that never completed, network and CUDA errors with\n"
      "their hosts and peers, and settings and topology that cost bandwidth. A file may also hold NCCL's RAS\n"
      "report (ncclras's text or JSON output).\n"
      "Several PATHs, or one folder holding a mix (Flight Recorder dumps, a log, stacks: py-spy dump or\n"
      "faulthandler text per rank, a PyTorch debug server's dump_dir), are read together and joined per\n"
      "rank: one verdict citing what each said (docs/STACKS.md).\n\n" +
      format::options_help(kOptions) +
      "\n"
      "Without flags, a rank whose open collective or step has run past the bound its probe learned\n"
      "(10 x the p95 of recent durations, or of the longest of the first few; at least 3 s) makes the\n"
      "job stuck at once; so does, at start-up and in the first steps, a rank that never issued a\n"
      "collective all its peers wait in, idle past max(3 s, 3 x the job's own step time). The JSON's\n"
      "detection says which rule fired and what its bound rests on.\n\n"
      "exit status: 0 healthy or finished, 1 a problem was found, 2 bad input\n";
  return text;
}

class RemoteProcesses final : public ProcessTable {
 public:
  Liveness liveness(const std::string&, int) override { return Liveness::kUnknown; }
  std::string local_host() override { return {}; }
};

bool parse_seconds(std::string_view v, double& out) {
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  return ec == std::errc() && p == v.data() + v.size() && out >= 0;
}

// Where the report goes: the text (stdout; stderr when the JSON takes stdout; nowhere with --quiet),
// the JSON (a file, or stdout for "-") and the HTML page.
struct Outputs {
  std::string json_file, html_file;
  bool quiet = false;
  std::FILE* text(std::FILE* out, std::FILE* err) const { return quiet ? nullptr : json_file == "-" ? err : out; }
  bool any_file() const { return !json_file.empty() || !html_file.empty(); }
};

// The JSON and HTML reports the outputs ask for; false (said on `err`) when one cannot be written.
bool write_reports(const Outputs& o, const Diagnosis& d, const ReportExtras& extras, std::FILE* out, std::FILE* err) {
  if (!o.any_file()) return true;
  const std::string json = render_json_text(d, extras);
  if (o.json_file == "-") {
    std::fprintf(out, "%s\n", json.c_str());
  } else if (!o.json_file.empty()) {
    std::ofstream f(o.json_file);
    f << json << "\n";
    if (!f) return std::fprintf(err, "hangdoctor: cannot write %s\n", o.json_file.c_str()), false;
  }
  if (!o.html_file.empty()) {
    // The page's "kind" says which report it draws; the diagnosis (with its own "kind") goes whole.
    const nlohmann::json data = {{"kind", "rankscope.hang"}, {"hang", nlohmann::json::parse(json)}};
    const std::string verdict = d.headline.substr(0, d.headline.find(':'));  // "DESYNC", "HANG", "HEALTHY"
    const std::string title =
        fmt::format("hangdoctor: {}{}", verdict, d.culprit_ranks.empty() ? "" : ", " + who(d, d.culprit_ranks));
    auto html = reports::render_html_report(data, title);
    Status written = html.ok() ? reports::write_text_file(o.html_file, *html) : html.status();
    if (!written.ok()) return std::fprintf(err, "hangdoctor: %s\n", written.user_text().c_str()), false;
  }
  return true;
}

void report_progress(uint64_t done, uint64_t total) {
  if (total > 0)
    std::fprintf(stderr, "hangdoctor: read %.0f of %.0f MB\n", double(done) / 1e6, double(total) / 1e6);
  else
    std::fprintf(stderr, "hangdoctor: read %.0f MB\n", double(done) / 1e6);
}

int report_log_verdict(const logs::LogImport& log, const Outputs& outputs, const ClassifyOptions& classify,
                       std::FILE* out, std::FILE* err);

int run_on_logs(const std::vector<std::filesystem::path>& paths, const Outputs& outputs,
                const ClassifyOptions& classify, std::FILE* out, std::FILE* err) {
  auto r = logs::import_logs(paths, report_progress);
  if (!r.ok()) {
    std::fprintf(err, "hangdoctor: %s\n", r.status().message().c_str());
    return 2;
  }
  return report_log_verdict(*r, outputs, classify, out, err);
}

int report_log_verdict(const logs::LogImport& log, const Outputs& outputs, const ClassifyOptions& classify,
                       std::FILE* out, std::FILE* err) {
  const logs::LogImport* r = &log;
  LogVerdict v = diagnose_log(*r, classify);
  std::FILE* text = outputs.text(out, err);
  if (text) {
    std::fprintf(text, "%s\n", r->summary.c_str());
    std::fputs(render_text(v.diagnosis).c_str(), text);
    std::fputs(render_log_findings(v.report).c_str(), text);
  }
  ReportExtras extras;
  extras.log = v.report;
  if (!write_reports(outputs, v.diagnosis, extras, out, err)) return 2;
  return exit_code(v.diagnosis);
}

int run_hangdoctor_unguarded(std::span<const std::string_view> args, const HangdoctorEnv& env);

// The artifacts of one job by kind: Flight Recorder dumps (one set), logs, stacks.
struct Parts {
  std::optional<std::filesystem::path> dumps;
  std::vector<std::filesystem::path> logs, stacks;
  int kinds() const { return int(dumps.has_value()) + int(!logs.empty()) + int(!stacks.empty()); }
};
struct SortedInputs {
  std::optional<Parts> parts;  // set when the joined reading applies
  bool joined() const { return parts.has_value(); }
};

// Sorts the paths into dumps, logs and stacks; a folder that is none of them alone (no run.json)
// is looked into one level. The joined reading applies where two kinds or more are present, or
// stacks alone; otherwise (one kind, a run directory) hangdoctor reads as it always did.
template <class IsLog>
SortedInputs sort_inputs(const std::string& first, const std::vector<std::filesystem::path>& more,
                         const IsLog& is_log) {
  namespace fs = std::filesystem;
  std::vector<fs::path> all{first};
  all.insert(all.end(), more.begin(), more.end());
  Parts parts;
  bool several_dumps = false;
  bool expanded = false;  // a job's folder was looked into
  // A run directory, or a gathered run (whose files beside run.json are no logs, even without one).
  auto run_dir = [](const fs::path& p) {
    std::error_code ec;
    return fs::exists(p / "run.json", ec) || format::is_gathered_run(p);
  };
  // `no_dump_prefix`: p is a file of a folder no other file name of which extends p's, so p names
  // no Flight Recorder dumps as a prefix (looks_like_fr_dumps would list the folder to find that
  // out, once for each of its files: 2048 log files took 4 million directory entries).
  auto add_one = [&](const fs::path& p, bool no_dump_prefix = false) -> bool {
    std::error_code ec;
    if (p != "-" && fs::is_directory(p, ec) && run_dir(p)) return false;
    const bool plain_file = no_dump_prefix && fs::is_regular_file(p, ec);
    if (p != "-" && !plain_file && torch_fr::looks_like_fr_dumps(p)) {
      several_dumps |= parts.dumps.has_value();
      parts.dumps = p;
    } else if (p != "-" && stacks::looks_like_stacks(p)) {
      parts.stacks.push_back(p);
    } else if (plain_file || is_log(p)) {  // is_log(a file) = not a dump prefix
      parts.logs.push_back(p);
    } else {
      return false;
    }
    return true;
  };
  for (const auto& p : all) {
    std::error_code ec;
    if (p != "-" && fs::is_directory(p, ec) && !run_dir(p) && !torch_fr::looks_like_fr_dumps(p) &&
        !stacks::looks_like_stacks(p)) {
      // A job's folder holding a mix: its dumps/, job.log, stacks/ (any names), one level down.
      std::vector<fs::path> entries;
      for (const auto& e : fs::directory_iterator(p, ec)) entries.push_back(e.path());
      std::sort(entries.begin(), entries.end());
      Parts held;
      std::swap(held, parts);
      for (size_t i = 0; i < entries.size(); ++i) {
        const fs::path& e = entries[i];
        if (e.filename().string().starts_with(".") || e.extension() == ".json") continue;  // not truth.json
        // Sorted: the names a name is a prefix of come right after it.
        const bool extended =
            i + 1 < entries.size() && entries[i + 1].filename().string().starts_with(e.filename().string());
        add_one(e, !extended);
      }
      std::swap(held, parts);
      // Two kinds or more, stacks, or a job's folder that was unreadable as a folder of logs (its
      // job.log holds torchrun's lines only): read joined. A folder of logs stays one.
      if (held.kinds() >= 2 || !held.stacks.empty() || (held.kinds() == 1 && !is_log(p))) {
        if (held.dumps) {
          several_dumps |= parts.dumps.has_value();
          parts.dumps = held.dumps;
        }
        parts.logs.insert(parts.logs.end(), held.logs.begin(), held.logs.end());
        parts.stacks.insert(parts.stacks.end(), held.stacks.begin(), held.stacks.end());
        expanded = true;
        continue;
      }
    }
    if (!add_one(p)) return {};
  }
  if (several_dumps) return {};
  // A job's folder holding its dumps alone, or one log file (torchrun's output without an NCCL or
  // PyTorch line, which a folder of logs would skip): read joined. Several files of one kind in a
  // folder may be several jobs' (a folder of reports): never merged here.
  if (parts.kinds() >= 2 || !parts.stacks.empty() ||
      (expanded && parts.kinds() == 1 && (parts.dumps || parts.logs.size() == 1)))
    return {std::move(parts)};
  return {};
}

// Stacks taken from the live job now: its debug server asked, or its local ranks sampled by py-spy.
struct LiveStacks {
  std::string debug_server;
  bool py_spy = false;
  bool any() const { return !debug_server.empty() || py_spy; }
  std::string flag() const { return py_spy ? "--py-spy" : "--torch-debug-server"; }
};

Result<stacks::StackImport> take_live_stacks(const LiveStacks& live) {
  if (!live.py_spy) return stacks::query_debug_server(live.debug_server, 2, 2.0, 70.0);  // 2 snapshots 2 s apart
  auto ranks = stacks::find_local_ranks();
  if (!ranks.ok()) return ranks.status();
  return stacks::sample_with_py_spy(*ranks, 2, 1.0);
}

int run_joined(const Parts& parts, const Outputs& outputs, ClassifyOptions classify, std::FILE* out, std::FILE* err,
               const LiveStacks& live = {}) {
  JoinInputs in;
  std::vector<std::string> summaries, unread;
  if (live.any()) {
    auto r = take_live_stacks(live);
    if (!r.ok()) {
      std::fprintf(err, "hangdoctor: %s: %s\n", live.flag().c_str(), r.status().message().c_str());
      return 2;
    }
    summaries.push_back(r->summary);
    in.stacks = summarize_stacks(*r);
  }
  if (parts.dumps) {
    auto r = torch_fr::import_fr_dumps(*parts.dumps);
    if (!r.ok()) {
      unread.push_back(r.status().message());
    } else {
      summaries.push_back(r->summary);
      if (r->entries > 0 || r->status_rows > 0) {  // else: nothing to judge in the dumps; the others still speak
        ClassifyOptions c = classify;
        c.no_progress_observed = r->pending;
        c.time_basis = r->time_basis;
        RemoteProcesses remote;
        in.dumps = diagnose(r->run, remote, c);
        in.dumps_summary = r->summary;
      } else {
        summaries.push_back(fmt::format("{}: the dumps hold no collective entries and no pg_status: not judged",
                                        parts.dumps->string()));
      }
    }
  }
  if (!parts.logs.empty()) {
    auto r = logs::import_logs(parts.logs, nullptr);
    if (!r.ok()) {
      unread.push_back(r.status().message());
    } else {
      summaries.push_back(r->summary);
      in.log = diagnose_log(*r, classify);
    }
  }
  if (!parts.stacks.empty() && !in.stacks) {
    auto r = stacks::import_stacks(parts.stacks);
    if (!r.ok()) {
      unread.push_back(r.status().message());
    } else {
      summaries.push_back(r->summary);
      in.stacks = summarize_stacks(*r);
    }
  }
  // An artifact that cannot be read is said, and the others still speak; with none left, exit 2.
  if (!in.dumps && !in.log && !in.stacks) {
    for (const auto& u : unread) std::fprintf(err, "hangdoctor: %s\n", u.c_str());
    if (unread.empty()) std::fprintf(err, "hangdoctor: nothing to judge in the inputs given\n");
    return 2;
  }
  for (const auto& u : unread) summaries.push_back("not read: " + u);
  JoinedVerdict v = join_verdicts(in);
  std::FILE* text = outputs.text(out, err);
  if (text) {
    for (const auto& s : summaries) std::fprintf(text, "%s\n", s.c_str());
    std::fputs(render_text(v.diagnosis).c_str(), text);
    std::fputs(v.text.c_str(), text);
    if (in.log) std::fputs(render_log_findings(in.log->report).c_str(), text);
    if (in.stacks) std::fputs(render_stack_text(*in.stacks).c_str(), text);
  }
  ReportExtras extras;
  if (in.log) extras.log = in.log->report;
  if (in.stacks) extras.stacks = stack_json(*in.stacks);
  extras.joined = v.joined;
  if (!write_reports(outputs, v.diagnosis, extras, out, err)) return 2;
  return exit_code(v.diagnosis);
}

}  // namespace

std::span<const format::Option> hangdoctor_options() { return kOptions; }

// Never an abort: whatever escapes the readers and the classifier (a bug a file found) ends as exit
// 2 with one line naming the input, like any input hangdoctor cannot read (format/command_boundary.h).
int run_hangdoctor(std::span<const std::string_view> args, const HangdoctorEnv& env) {
  const format::CommandBoundary boundary{"hangdoctor", format::command_input(args, format::value_flags(kOptions)),
                                         "could not be analysed", env.out, env.err};
  return format::run_guarded(boundary, [&] { return run_hangdoctor_unguarded(args, env); });
}

namespace {

// What the command line asked for, read against kOptions and checked.
struct Request {
  bool help = false;
  std::string dir;                          // the first path
  std::vector<std::filesystem::path> more;  // further paths: logs only
  Outputs outputs;
  LiveStacks live;
  std::string nccl_ras;
  bool stacks = false;
  double wait_s = -1;  // --wait: follow the job; -1 without
  ClassifyOptions classify;
};

// The request, or nullopt once what is wrong with the arguments is said on `err` (exit 2).
std::optional<Request> read_request(std::span<const std::string_view> args, std::FILE* err) {
  auto parsed = format::parse_options(kOptions, args);
  if (!parsed.ok()) {
    std::fprintf(err, "hangdoctor: %s\n\n%s", parsed.status().message().c_str(), help_text().c_str());
    return std::nullopt;
  }
  Request req;
  req.help = parsed->help;
  const auto text_of = [&](std::string_view flag) { return std::string(parsed->value(flag).value_or("")); };
  req.nccl_ras = text_of("--nccl-ras");
  req.live = LiveStacks{text_of("--torch-debug-server"), parsed->has("--py-spy")};
  req.outputs = Outputs{text_of("--json"), text_of("--html"), parsed->has("--quiet")};
  req.stacks = parsed->has("--stacks");
  for (std::string_view flag : {"--wait", "--stuck-after"}) {
    const auto v = parsed->value(flag);
    if (!v) continue;
    double seconds = 0;
    if (!parse_seconds(*v, seconds)) {
      std::fprintf(err, "hangdoctor: %s needs a number of seconds, got '%s'\n", std::string(flag).c_str(),
                   std::string(*v).c_str());
      return std::nullopt;
    }
    (flag == "--wait" ? req.wait_s : req.classify.stuck_after_s) = seconds;
  }
  for (std::string_view p : parsed->positionals) {
    if (req.dir.empty())
      req.dir = p;
    else
      req.more.emplace_back(p);
  }
  return req;
}

// A job's log: a file that holds NCCL or PyTorch lines, several of them, a folder of them, or stdin.
bool is_log(const std::filesystem::path& p) {
  std::error_code ec;
  if (p == "-") return true;
  if (std::filesystem::is_directory(p, ec))
    return !std::filesystem::exists(p / "run.json", ec) && !torch_fr::looks_like_fr_dumps(p) && [&] {
      for (const auto& e : std::filesystem::directory_iterator(p, ec))
        if (e.is_regular_file(ec) && logs::looks_like_log(e.path())) return true;
      return false;
    }();
  // Any other file is read as a log (a Flight Recorder dump is recognised first): what holds no
  // NCCL or PyTorch line gets the log reader's own error, not a run directory's.
  return std::filesystem::is_regular_file(p, ec) && !torch_fr::looks_like_fr_dumps(p);
}

// --nccl-ras: a live NCCL job's RAS thread asked, its answer judged as a log.
int run_on_nccl_ras(const Request& req, std::FILE* out, std::FILE* err) {
  if (!req.dir.empty() || req.wait_s >= 0 || req.stacks) {
    std::fprintf(err, "hangdoctor: --nccl-ras asks a live job; it takes no path, --wait or --stacks\n");
    return 2;
  }
  auto r = logs::query_and_import_nccl_ras(req.nccl_ras, 5.0);  // RAS gathers for up to 5 s itself
  if (!r.ok()) {
    std::fprintf(err, "hangdoctor: %s\n", r.status().message().c_str());
    return 2;
  }
  return report_log_verdict(*r, req.outputs, req.classify, out, err);
}

// A running job's stacks (its debug server, or py-spy on its local ranks), with whatever paths were
// given beside.
int run_on_live_job(const Request& req, std::FILE* out, std::FILE* err) {
  if (req.wait_s >= 0 || req.stacks) {
    std::fprintf(err, "hangdoctor: %s asks a live job; it takes no --wait or --stacks\n", req.live.flag().c_str());
    return 2;
  }
  Parts parts;
  if (!req.dir.empty()) {
    if (auto sorted = sort_inputs(req.dir, req.more, is_log); sorted.joined()) {
      parts = *sorted.parts;
    } else if (req.more.empty() && torch_fr::looks_like_fr_dumps(req.dir)) {
      parts.dumps = req.dir;
    } else {
      parts.logs.emplace_back(req.dir);
      parts.logs.insert(parts.logs.end(), req.more.begin(), req.more.end());
    }
  }
  return run_joined(parts, req.outputs, req.classify, out, err, req.live);
}

// One or several logs, read as logs only.
int run_on_log_paths(const Request& req, std::FILE* out, std::FILE* err) {
  std::vector<std::filesystem::path> paths{req.dir};
  paths.insert(paths.end(), req.more.begin(), req.more.end());
  if (!req.more.empty() && !is_log(req.dir)) {
    std::fprintf(err, "hangdoctor: several paths are read as logs only, and %s holds no NCCL or PyTorch log line\n",
                 req.dir.c_str());
    return 2;
  }
  if (req.wait_s >= 0 || req.stacks) {
    std::fprintf(err, "hangdoctor: --wait and --stacks need a run directory; a log is read as it is\n");
    return 2;
  }
  return run_on_logs(paths, req.outputs, req.classify, out, err);
}

// A run directory (followed with --wait) or one folder of Flight Recorder dumps, opened.
struct OpenedRun {
  format::RunDirectory run;
  bool from_torch = false;
  std::optional<WatchResult> watched;
};

// The run, or nullopt once why it cannot be read is said on `err` (exit 2). Sets what the classifier
// must know of how it was taken (no progress observed, the time basis).
std::optional<OpenedRun> open_run(const Request& req, ClassifyOptions& classify, std::FILE* out, std::FILE* err) {
  OpenedRun o;
  const std::string& dir = req.dir;
  if (req.wait_s >= 0) {
    WatchOptions wo;
    wo.quiet_s = req.wait_s;
    wo.poll_s = std::min(0.25, std::max(0.02, req.wait_s / 10));
    auto w = watch_until_stalled(dir, wo);
    if (!w.ok()) {
      std::fprintf(err, "hangdoctor: %s (hint: is RUN_DIR the job's --run-dir?)\n", w.status().message().c_str());
      return std::nullopt;
    }
    o.watched = std::move(*w);
    o.run = std::move(o.watched->run);
    classify.no_progress_observed = o.watched->stalled;
  } else if (!std::filesystem::exists(std::filesystem::path(dir) / "run.json") && torch_fr::looks_like_fr_dumps(dir)) {
    // PyTorch Flight Recorder dumps. With a collective pending they are the watchdog's (or a look at
    // a stuck job): no progress is a given. With none pending they were taken on demand from a job
    // that was not stuck: healthy. They do not say when they were written, so times are lower bounds.
    auto r = torch_fr::import_fr_dumps(dir);
    if (!r.ok()) {
      std::fprintf(err, "hangdoctor: %s\n", r.status().message().c_str());
      return std::nullopt;
    }
    if (std::FILE* text = req.outputs.text(out, err)) std::fprintf(text, "%s\n", r->summary.c_str());
    if (r->entries == 0 && r->status_rows == 0) {
      std::fprintf(err,
                   "hangdoctor: %s: the dumps hold no collective entries and no pg_status (dumped with "
                   "includeCollectives=False, or just after a reset): nothing to judge\n",
                   dir.c_str());
      return std::nullopt;
    }
    o.run = std::move(r->run);
    classify.no_progress_observed = r->pending;
    classify.time_basis = r->time_basis;
    o.from_torch = true;
  } else {
    auto r = format::open_run_directory(dir);
    if (!r.ok()) {
      std::fprintf(err,
                   "hangdoctor: %s (hint: pass the directory the job wrote with --run-dir, holding run.json and "
                   "rankNNNNN.flight files)\n",
                   r.status().message().c_str());
      return std::nullopt;
    }
    o.run = std::move(*r);
  }
  if (o.run.ranks_readable() == 0) {
    std::fprintf(err, "hangdoctor: %s: no rank's flight recorder is readable, nothing can be said\n", dir.c_str());
    for (const auto& p : o.run.problems) std::fprintf(err, "  - %s\n", p.c_str());
    return std::nullopt;
  }
  return o;
}

// A gathered run (rankscope gather, hangdoctor --slurm): process states come from the nodes'
// snapshots, the gather's own findings (nodes that did not answer) lead the report.
struct GatherContext {
  std::optional<format::GatherRecord> record;
  std::optional<SnapshotProcessTable> processes;
  std::vector<std::string> lines;
};

GatherContext read_gather_context(const std::string& dir) {
  GatherContext g;
  auto record = format::read_gather_record(dir);
  auto table = SnapshotProcessTable::load(dir);
  if (record.ok()) {
    g.record = std::move(*record);
    g.lines.push_back(gather_headline(*g.record));
    for (auto& line : gather_findings(*g.record)) g.lines.push_back(std::move(line));
  } else {
    g.lines.push_back(fmt::format("gathered run: {}", record.status().message()));
  }
  if (table.ok()) g.processes = std::move(*table);
  if (g.processes)
    for (const auto& p : g.processes->problems()) g.lines.push_back("gather: " + p);
  return g;
}

// A run directory or dumps: diagnosed, stacks taken with --stacks, reported.
int run_on_run_directory(const Request& req, const HangdoctorEnv& env) {
  SystemProcessTable system_processes;
  ExternalStackCollector external_stacks;
  ProcessTable& processes = env.processes ? *env.processes : system_processes;
  StackCollector& collector = env.stacks ? *env.stacks : external_stacks;
  std::FILE* out = env.out;
  std::FILE* err = env.err;
  ClassifyOptions classify = req.classify;
  auto opened = open_run(req, classify, out, err);
  if (!opened) return 2;
  const bool from_torch = opened->from_torch;
  const std::optional<WatchResult>& watched = opened->watched;
  GatherContext gather;
  if (!from_torch && format::is_gathered_run(req.dir)) gather = read_gather_context(req.dir);
  if (gather.record)
    for (const auto& n : gather.record->nodes)
      if (!n.answered)
        classify.unreachable_ranks.insert(classify.unreachable_ranks.end(), n.missing_ranks.begin(),
                                          n.missing_ranks.end());
  RemoteProcesses remote;  // dumps are copied off their nodes: no process of theirs is here
  ProcessTable& judged_by = from_torch         ? static_cast<ProcessTable&>(remote)
                            : gather.processes ? static_cast<ProcessTable&>(*gather.processes)
                                               : processes;
  Diagnosis d = diagnose(opened->run, judged_by, classify);
  std::vector<std::string> stack_notes;
  if (req.stacks && gather.processes) {
    stack_notes.push_back("a gathered run's stacks are taken on the nodes (rankscope gather --stacks): see evidence/");
  } else if (req.stacks && !from_torch && d.verdict != Verdict::kFinished) {
    auto report = capture_stacks(d, req.dir, processes, collector);
    stack_notes = std::move(report.notes);
  }
  // With --json -, stdout carries the JSON alone (for | jq): the text goes to stderr, or nowhere.
  std::FILE* text = req.outputs.text(out, err);
  if (text)
    for (const auto& line : gather.lines) std::fprintf(text, "%s\n", line.c_str());
  if (text) std::fputs(render_text(d).c_str(), text);
  for (const auto& n : stack_notes)
    if (text) std::fprintf(text, "stacks: %s\n", n.c_str());
  if (watched && text) {
    if (watched->stalled)
      std::fprintf(text,
                   "\nwatched %d samples: no progress for %.1f s; time from the hang (last progress) to the verdict: "
                   "%.2f s\n",
                   watched->samples, req.wait_s, watched->hang_to_verdict_s());
    else
      std::fprintf(text, "\nwatched %d samples until every rank finished\n", watched->samples);
  }
  if (env.after_text_report) env.after_text_report();
  ReportExtras extras;
  if (watched)
    extras.wait = WaitSummary{req.wait_s, watched->samples, watched->stalled,
                              watched->stalled ? std::optional(watched->hang_to_verdict_s()) : std::nullopt};
  const std::optional<format::GatherRecord>& gathered = gather.record;
  if (gathered)
    extras.gather = GatherSummary{gathered->nodes.size(), gathered->answered(), gathered->seconds,
                                  gathered->stream_bytes, gather.lines};
  if (!write_reports(req.outputs, d, extras, out, err)) return 2;
  // A node that did not answer is a problem even when the ranks that did look healthy.
  const bool node_unreachable = gathered && gathered->answered() < int(gathered->nodes.size());
  return node_unreachable ? std::max(exit_code(d), 1) : exit_code(d);
}

int run_hangdoctor_unguarded(std::span<const std::string_view> args, const HangdoctorEnv& env) {
  std::FILE* out = env.out;
  std::FILE* err = env.err;
  const auto req = read_request(args, err);
  if (!req) return 2;
  if (req->help) {
    std::fputs(help_text().c_str(), out);
    return 0;
  }
  if (!req->nccl_ras.empty()) return run_on_nccl_ras(*req, out, err);
  if (req->live.py_spy && !req->live.debug_server.empty()) {
    std::fprintf(err, "hangdoctor: --py-spy and --torch-debug-server both take the stacks; give one\n");
    return 2;
  }
  if (req->dir.empty() && !req->live.any()) {
    std::fputs(help_text().c_str(), err);
    return 2;
  }
  if (req->live.any()) return run_on_live_job(*req, out, err);
  // Dumps, logs and stacks together (several paths of different kinds, or one folder holding a
  // mix), or stacks alone: read per kind and joined per rank (joined_verdict.h).
  if (auto inputs = sort_inputs(req->dir, req->more, is_log); inputs.joined()) {
    if (req->wait_s >= 0 || req->stacks) {
      std::fprintf(
          err, "hangdoctor: --wait and --stacks need a run directory; dumps, logs and stacks are read as they are\n");
      return 2;
    }
    return run_joined(*inputs.parts, req->outputs, req->classify, out, err);
  }
  if (!req->more.empty() || is_log(req->dir)) return run_on_log_paths(*req, out, err);
  return run_on_run_directory(*req, env);
}

}  // namespace
}  // namespace rankscope::cli
