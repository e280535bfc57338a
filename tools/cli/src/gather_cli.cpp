// gather_cli.cpp — `rankscope snapshot`, `rankscope gather`, and `hangdoctor --slurm|--hosts`.
//
// One parser for the gathering flags serves both commands, so `rankscope gather` and hangdoctor
// accept the same spelling. The snapshot command a node runs is `<remote rankscope> snapshot
// <RUN_DIR> [--stacks]`, every word shell-quoted (ssh hands it to the remote shell). `snapshot`,
// `gather` and `kineto-pack` each declare their command line once, in an option table
// (format/option_table.h); gather's values of the gathering flags go through that one parser.
#include "rankscope/cli/gather_cli.h"

#include <unistd.h>

#include <stdio.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "rankscope/analyzers/hang/gather_wording.h"
#include "rankscope/format/option_table.h"
#include "rankscope/gather/gather.h"
#include "rankscope/gather/node_launch.h"
#include "rankscope/gather/node_snapshot.h"
#include "rankscope/gather/text_stream.h"

namespace rankscope::cli {
// The gathering this command line drives: its types and functions by their own names.
using namespace rankscope::gather;
namespace {

namespace fs = std::filesystem;

constexpr format::Option kSnapshotOptions[] = {
    {"--stacks", "", "also capture native stacks of the live ranks (eu-stack, else gdb)"},
    {"--all-hosts", "", "also ship recorders another host wrote (a run directory on a shared filesystem)"},
    {"--full", "", "the whole flight recorders (rankNNNNN.flight) instead of the ranks' summaries"},
    {"--text", "", "the stream as base64 lines (what the one srun for every node of `gather --slurm` asks)"},
};

const std::string& snapshot_help() {
  static const std::string text =
      "usage: rankscope snapshot RUN_DIR [--stacks] [--all-hosts] [--full] > node.snap\n\n"
      "Writes this node's share of a run directory to stdout as one compressed, versioned stream\n"
      "(docs/FORMAT.md \"Snapshot stream\"): what the verdict needs of each of its ranks (a few hundred\n"
      "bytes a rank: docs/FORMAT.md \"Rank summaries\"), the NCCL plugin's nccl/ files, the state of each\n"
      "process from /proc (alive, gone, stopped, in D state), run.json, recent evidence/. Event streams\n"
      "are left out. `rankscope gather` runs it on every node and unpacks the streams.\n\n" +
      format::options_help(kSnapshotOptions, 15);
  return text;
}

constexpr format::Option kGatherOptions[] = {
    {"--slurm", "JOBID",
     "the nodes of a running Slurm job: one `srun --jobid JOBID --overlap` step for\n"
     "all of them (Slurm's fan-out tree); a node it leaves silent is asked alone"},
    {"--srun-per-node", "", "with --slurm: one srun step a node instead"},
    {"--hosts", "FILE", "one host per line, each reached with --exec T"},
    {"--exec", "T",
     "T is the command that reaches a host, {host} replaced\n"
     "(e.g. 'ssh -o BatchMode=yes {host}'); the snapshot command is appended"},
    {"--out", "DIR", "where to unpack (empty, or an earlier gather, which is replaced)", "-o"},
    {"--deadline", "SECONDS", "nodes not done by then are stopped and reported unreachable (default 20)"},
    {"--remote-rankscope", "P", "the rankscope binary on the nodes (default: this one's absolute path)"},
    {"--stacks", "",
     "nodes also capture native stacks of their live ranks (at most 8 a node;\n"
     "the deadline becomes 60 s unless given)"},
    {"--full", "", "nodes send whole flight recorders, not what the verdict needs of each rank"},
    {"--max-parallel", "N", "nodes asked at once (default 256)"},
};

const std::string& gather_help() {
  static const std::string text =
      "usage: rankscope gather RUN_DIR (--slurm JOBID | --hosts FILE --exec 'ssh {host}') -o DIR\n"
      "                        [--deadline SECONDS] [--remote-rankscope PATH] [--stacks] [--full] "
      "[--max-parallel N]\n\n"
      "Runs `rankscope snapshot RUN_DIR` on every node of a job, in parallel, and unpacks the streams into\n"
      "DIR: DIR/hosts/<host>/ as each node sent it, DIR itself a run directory of every rank (hangdoctor DIR,\n"
      "rankscope inspect DIR), DIR/gather.json the record (nodes asked, answered, unreachable and why).\n"
      "RUN_DIR is the run directory's path as the nodes see it.\n\n" +
      format::options_help(kGatherOptions, 25) +
      "\nexit status: 0 every node answered, 1 some did not, 2 bad input or no node answered\n";
  return text;
}

// hangdoctor's gathering flags: with --slurm or --hosts it gathers the run first, then diagnoses it.
constexpr format::Option kHangdoctorGatherOptions[] = {
    {"--slurm", "JOBID", "the nodes of a running Slurm job, one srun step for all of them"},
    {"--srun-per-node", "", "with --slurm: one srun step a node instead"},
    {"--hosts", "FILE", "one host per line, each reached with --exec"},
    {"--exec", "T", "the command that reaches a host, {host} replaced (e.g. 'ssh {host}')"},
    {"--gather-dir", "DIR", "keep the gathered run here (default: a temporary folder)"},
    {"--deadline", "SECONDS", "nodes silent by then are stopped and reported unreachable (default 20)"},
    {"--remote-rankscope", "PATH", "the rankscope binary on the nodes (default: the one beside hangdoctor)"},
    {"--full", "", "nodes send whole flight recorders, not what the verdict needs of each rank"},
    {"--max-parallel", "N", "nodes asked at once (default 256)"},
};

const std::string& hangdoctor_gather_help() {
  static const std::string text =
      "\nA job on many nodes (each node keeps its recorders on its own disk):\n"
      "  hangdoctor RUN_DIR --slurm JOBID [--gather-dir DIR] [--deadline SECONDS] [--remote-rankscope PATH]\n"
      "  hangdoctor RUN_DIR --hosts FILE --exec 'ssh {host}' [same options]\n"
      "RUN_DIR is the run directory as the nodes see it. Every node runs `rankscope snapshot RUN_DIR` (the\n"
      "rankscope beside this hangdoctor, or --remote-rankscope), in parallel (with --slurm in one srun step\n"
      "for all nodes; --srun-per-node: one a node); nodes silent at the deadline\n"
      "(default 20 s) are stopped and reported unreachable with their ranks. The streams are unpacked into\n"
      "--gather-dir (kept) or a temporary folder, then diagnosed; process states (frozen, dead) come from\n"
      "each node's /proc. --stacks takes native stacks on the nodes; --full has them send whole flight\n"
      "recorders rather than what the verdict needs of each rank. `hangdoctor DIR` on a kept gather\n"
      "diagnoses it again (as of the gather).\n\n" +
      format::options_help(kHangdoctorGatherOptions);
  return text;
}

constexpr double kStacksDeadlineS = 60;

struct GatherFlags {
  std::string slurm_job, hosts_file, exec_template, remote_rankscope, out_dir;
  double deadline_s = 20;
  bool deadline_given = false;
  int max_parallel = 256;
  bool stacks = false;
  bool full = false;
  bool srun_per_node = false;  // one srun step a node (the shape before the fan-out launch)
  bool any() const { return !slurm_job.empty() || !hosts_file.empty(); }
};

enum class Parsed { kNotMine, kTaken, kBad };

// The gathering flags hangdoctor, `gather` and `import-kineto` share; each takes a value.
constexpr std::string_view kGatherValueFlags[] = {"--slurm",    "--hosts",       "--exec", "--remote-rankscope",
                                                  "--deadline", "--max-parallel"};

// The flags of gathering; `i` is moved past a value it takes.
Parsed parse_gather_flag(Args args, size_t& i, GatherFlags& f, std::FILE* err) {
  const std::string_view a = args[i];
  const bool has_value = i + 1 < args.size();
  std::string* text = a == "--slurm"              ? &f.slurm_job
                      : a == "--hosts"            ? &f.hosts_file
                      : a == "--exec"             ? &f.exec_template
                      : a == "--remote-rankscope" ? &f.remote_rankscope
                                                  : nullptr;
  if (text) {
    if (!has_value) return std::fprintf(err, "%.*s needs a value\n", int(a.size()), a.data()), Parsed::kBad;
    *text = args[++i];
    return Parsed::kTaken;
  }
  if (a == "--deadline" || a == "--max-parallel") {
    if (!has_value) return std::fprintf(err, "%.*s needs a value\n", int(a.size()), a.data()), Parsed::kBad;
    const std::string_view v = args[++i];
    double x = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    if (ec != std::errc() || p != v.data() + v.size() || !(x > 0) || (a == "--max-parallel" && x != double(int(x)))) {
      std::fprintf(err, "%.*s needs a positive number, got '%.*s'\n", int(a.size()), a.data(), int(v.size()), v.data());
      return Parsed::kBad;
    }
    if (a == "--deadline")
      f.deadline_s = x, f.deadline_given = true;
    else
      f.max_parallel = int(x);
    return Parsed::kTaken;
  }
  return Parsed::kNotMine;
}

std::string self_executable() {
  std::error_code ec;
  const auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

// Checks the flags and builds one target per node, each running `<remote rankscope> <subcommand>`.
Result<std::vector<GatherTarget>> targets_running(const GatherFlags& f, const std::string& default_remote,
                                                  const std::vector<std::string>& subcommand) {
  if (!f.slurm_job.empty() && !f.hosts_file.empty()) return invalid_argument("--slurm and --hosts: give one of them");
  if (!f.hosts_file.empty() && f.exec_template.empty())
    return invalid_argument("--hosts needs --exec, the command that reaches a host (e.g. --exec 'ssh {host}')");
  if (f.hosts_file.empty() && !f.exec_template.empty()) return invalid_argument("--exec goes with --hosts FILE");
  const std::string remote = f.remote_rankscope.empty() ? default_remote : f.remote_rankscope;
  if (remote.empty()) return invalid_argument("cannot tell this rankscope's path: give --remote-rankscope PATH");
  std::string command = shell_quote(remote);
  for (const std::string& word : subcommand) command += " " + shell_quote(word);
  if (!f.slurm_job.empty()) return slurm_targets(f.slurm_job, command, f.deadline_s);
  RS_ASSIGN_OR_RETURN(auto hosts, read_hosts_file(f.hosts_file));
  return exec_targets(hosts, f.exec_template, command);
}

Result<std::vector<GatherTarget>> targets_for(const GatherFlags& f, const std::string& run_dir,
                                              const std::string& default_remote) {
  std::vector<std::string> snapshot = {"snapshot", run_dir};
  if (f.stacks) snapshot.push_back("--stacks");
  if (f.full) snapshot.push_back("--full");
  return targets_running(f, default_remote, snapshot);
}

// The one srun step for every node of a Slurm job (gather.h FanOutLaunch).
Result<FanOutLaunch> fan_out_for(const GatherFlags& f, const std::string& run_dir, const std::string& default_remote) {
  const std::string remote = f.remote_rankscope.empty() ? default_remote : f.remote_rankscope;
  if (remote.empty()) return invalid_argument("cannot tell this rankscope's path: give --remote-rankscope PATH");
  std::string command = shell_quote(remote) + " snapshot " + shell_quote(run_dir);
  if (f.stacks) command += " --stacks";
  if (f.full) command += " --full";
  return slurm_fan_out(f.slurm_job, command + " --text", command, f.deadline_s);
}

Result<format::GatherRecord> gather_with(const GatherFlags& f, const std::string& run_dir,
                                         const std::string& default_remote, const fs::path& out_dir) {
  if (!f.slurm_job.empty() && !f.srun_per_node && f.hosts_file.empty() && f.exec_template.empty()) {
    RS_ASSIGN_OR_RETURN(const auto launch, fan_out_for(f, run_dir, default_remote));
    GatherOptions o;
    o.deadline_s = f.stacks && !f.deadline_given ? kStacksDeadlineS : f.deadline_s;
    o.out_dir = out_dir;
    o.run_dir = run_dir;
    o.launcher = "slurm";
    o.job_id = f.slurm_job;
    o.max_parallel = f.max_parallel;
    return gather_fan_out(launch, o);
  }
  RS_ASSIGN_OR_RETURN(auto targets, targets_for(f, run_dir, default_remote));
  GatherOptions o;
  // Stacks take up to seconds a process (eu-stack, else gdb, each under a time limit): without a
  // deadline of the user's, give them one that fits a node of 8 captures.
  o.deadline_s = f.stacks && !f.deadline_given ? kStacksDeadlineS : f.deadline_s;
  o.out_dir = out_dir;
  o.run_dir = run_dir;
  o.launcher = f.slurm_job.empty() ? "exec" : "slurm";
  o.job_id = f.slurm_job;
  o.max_parallel = f.max_parallel;
  return gather_nodes(targets, o);
}

constexpr format::Option kKinetoPackOptions[] = {
    {"--threads", "N", "traces read at once (default: one per core)"},
    {"--none-ok", "",
     "a folder or file that is not here, or a folder without traces, is skipped (a node\n"
     "that ran no profiled rank sends no trace; import-kineto --slurm passes it)"},
};

const std::string& kineto_pack_help() {
  static const std::string text =
      "usage: rankscope kineto-pack TRACE|DIR... [--threads N] [--none-ok] > node.pack\n\n"
      "Reads this node's PyTorch profiler traces (as import-kineto does) and writes what the import keeps\n"
      "of them to stdout as one compressed stream. `rankscope import-kineto DIR --slurm JOBID -o RUN_DIR`\n"
      "runs it on every node and imports the streams on the head as one job.\n\n" +
      format::options_help(kKinetoPackOptions, 16);
  return text;
}

// The gathering flags' values in `parsed`, each read by the parser hangdoctor shares (which says what
// is wrong with one on `err`); false at the first bad one.
bool read_gather_values(const format::ParsedOptions& parsed, GatherFlags& f, std::FILE* err) {
  for (const std::string_view flag : kGatherValueFlags) {
    for (const std::string_view value : parsed.all_values(flag)) {
      const std::string_view one[] = {flag, value};
      size_t i = 0;
      if (parse_gather_flag(one, i, f, err) == Parsed::kBad) return false;
    }
  }
  return true;
}

}  // namespace

std::vector<std::string_view> hangdoctor_value_flags() {
  std::vector<std::string_view> flags = format::value_flags(hangdoctor_options());
  const std::vector<std::string_view> gathering = format::value_flags(kHangdoctorGatherOptions);
  flags.insert(flags.end(), gathering.begin(), gathering.end());
  return flags;
}

bool is_gather_flag(std::string_view flag, bool* takes_value) {
  const bool value =
      std::find(std::begin(kGatherValueFlags), std::end(kGatherValueFlags), flag) != std::end(kGatherValueFlags);
  if (takes_value) *takes_value = value;
  return value;
}

std::span<const format::Option> kineto_pack_options() { return kKinetoPackOptions; }

int kineto_pack_main(Args args, std::FILE* out, std::FILE* err) {
  format::OptionsRead read = format::read_options(kKinetoPackOptions, args);
  const format::ParsedOptions& parsed = read.parsed;
  int threads = 0;
  const auto given = parsed.all_values("--threads");
  std::vector<std::string_view> thread_counts(given.begin(), given.end());
  if (read.refused && read.refused->missing_value) {  // --threads with nothing after it: a bad number, as always
    thread_counts.push_back({});
    read.refused.reset();
  }
  for (const std::string_view v : thread_counts) {
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), threads);
    if (ec != std::errc() || p != v.data() + v.size() || threads < 1)
      return std::fprintf(err, "rankscope kineto-pack: --threads needs a positive number\n"), 2;
  }
  const bool stdin_named =
      std::find(parsed.positionals.begin(), parsed.positionals.end(), "-") != parsed.positionals.end();
  if (stdin_named || read.refused) {
    const std::string_view arg = stdin_named ? std::string_view("-") : read.refused->arg;
    return std::fprintf(err, "rankscope kineto-pack: unknown option '%.*s'\n\n%s", int(arg.size()), arg.data(),
                        kineto_pack_help().c_str()),
           2;
  }
  if (parsed.help) return std::fputs(kineto_pack_help().c_str(), out), 0;
  const std::vector<fs::path> inputs(parsed.positionals.begin(), parsed.positionals.end());
  const bool none_ok = parsed.has("--none-ok");
  if (inputs.empty())
    return std::fprintf(err, "rankscope kineto-pack: no traces given\n\n%s", kineto_pack_help().c_str()), 2;
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  auto r = kineto::pack_traces(inputs, out, host, threads, none_ok);
  if (!r.ok()) return std::fprintf(err, "rankscope kineto-pack: %s\n", r.status().user_text().c_str()), 2;
  std::fprintf(err, "rankscope kineto-pack: %d traces, %.1f MB read, %.1f MB sent\n", r->traces, r->trace_bytes / 1e6,
               r->stream_bytes / 1e6);
  return 0;
}

Result<KinetoGatherResult> import_kineto_on_nodes(Args gather_args, const std::vector<std::string>& inputs,
                                                  const fs::path& run_dir, const kineto::ImportOptions& options) {
  GatherFlags f;
  std::string bad;
  for (size_t i = 0; i < gather_args.size(); ++i) {
    // parse_gather_flag writes its complaint to a FILE: catch it as text for the error result.
    char* text = nullptr;
    size_t size = 0;
    std::FILE* err = ::open_memstream(&text, &size);
    const Parsed p = parse_gather_flag(gather_args, i, f, err ? err : stderr);
    if (err) std::fclose(err);
    std::string said = text ? std::string(text, size) : std::string();
    std::free(text);
    if (p == Parsed::kBad)
      return invalid_argument(said.empty() ? "bad gathering flag" : said.substr(0, said.find('\n')));
    if (p == Parsed::kNotMine) return invalid_argument(fmt::format("'{}' is not a gathering flag", gather_args[i]));
  }
  if (!f.any() && !f.exec_template.empty()) return invalid_argument("--exec goes with --hosts FILE");
  if (!f.any()) return invalid_argument("--slurm JOBID or --hosts FILE --exec T is needed to import on the nodes");
  if (inputs.empty()) return invalid_argument("no traces given (the folder or files as the nodes see them)");
  // Every node of the job is asked; those that ran no profiled rank have no trace and say so.
  std::vector<std::string> pack = {"kineto-pack", "--none-ok"};
  pack.insert(pack.end(), inputs.begin(), inputs.end());
  if (options.threads > 0) pack.insert(pack.end(), {"--threads", std::to_string(options.threads)});
  RS_ASSIGN_OR_RETURN(auto targets, targets_running(f, self_executable(), pack));
  GatherOptions o;
  o.deadline_s = f.deadline_given ? f.deadline_s : 600;  // reading a node's traces takes seconds a 100 MB
  o.max_parallel = f.max_parallel;
  o.max_stream_bytes = 16ull << 30;
  o.limits.max_entry_bytes = 8ull << 30;
  o.limits.max_total_bytes = 64ull << 30;
  return import_kineto_from_nodes(targets, run_dir, o, options);
}

std::span<const format::Option> snapshot_options() { return kSnapshotOptions; }

int snapshot_main(Args args, std::FILE* out, std::FILE* err) {
  const format::OptionsRead read = format::read_options(kSnapshotOptions, args);
  const format::ParsedOptions& parsed = read.parsed;
  std::string dir;
  for (const std::string_view p : parsed.positionals) {
    if (p == "-")  // no run directory comes on stdin
      return std::fprintf(err, "rankscope snapshot: unknown option '-'\n\n%s", snapshot_help().c_str()), 2;
    if (!dir.empty()) return std::fprintf(err, "rankscope snapshot: one run directory only\n"), 2;
    dir = p;
  }
  if (read.refused)
    return std::fprintf(err, "rankscope snapshot: unknown option '%.*s'\n\n%s", int(read.refused->arg.size()),
                        read.refused->arg.data(), snapshot_help().c_str()),
           2;
  if (parsed.help) return std::fputs(snapshot_help().c_str(), stdout), 0;
  if (dir.empty()) return std::fputs(snapshot_help().c_str(), err), 2;
  NodeSnapshotOptions o;
  o.stacks = parsed.has("--stacks");
  o.all_hosts = parsed.has("--all-hosts");
  o.full = parsed.has("--full");
  const bool text = parsed.has("--text");
  if (!text && ::isatty(::fileno(out)))
    return std::fprintf(err,
                        "rankscope snapshot: stdout is a terminal; the stream is binary: redirect it "
                        "(rankscope snapshot RUN_DIR > node.snap), or let `rankscope gather` run it\n"),
           2;
  analyzers::hang::SystemProcessTable processes;
  analyzers::hang::ExternalStackCollector stacks;
  if (!text) {
    auto r = write_node_snapshot(dir, out, processes, stacks, o);
    if (!r.ok()) return std::fprintf(err, "rankscope snapshot: %s\n", r.status().message().c_str()), 2;
    return 0;
  }
  // The stream in memory, then as base64 lines (srun --label interleaves the nodes' lines).
  char* buffer = nullptr;
  size_t size = 0;
  std::FILE* mem = ::open_memstream(&buffer, &size);
  if (!mem) return std::fprintf(err, "rankscope snapshot: cannot open a memory stream\n"), 2;
  auto r = write_node_snapshot(dir, mem, processes, stacks, o);
  std::fclose(mem);
  const std::string lines = base64_lines(std::span(reinterpret_cast<const uint8_t*>(buffer), size));
  std::free(buffer);
  if (!r.ok()) return std::fprintf(err, "rankscope snapshot: %s\n", r.status().message().c_str()), 2;
  if (std::fwrite(lines.data(), 1, lines.size(), out) != lines.size() || std::fflush(out) != 0)
    return std::fprintf(err, "rankscope snapshot: cannot write the stream\n"), 2;
  return 0;
}

std::span<const format::Option> gather_options() { return kGatherOptions; }

int gather_main(Args args, std::FILE* out, std::FILE* err) {
  const format::OptionsRead read = format::read_options(kGatherOptions, args);
  const format::ParsedOptions& parsed = read.parsed;
  GatherFlags f;
  if (!read_gather_values(parsed, f, err)) return 2;
  std::string run_dir;
  for (const std::string_view p : parsed.positionals) {
    if (p == "-")  // no run directory comes on stdin
      return std::fprintf(err, "rankscope gather: unknown option or missing value '-'\n\n%s", gather_help().c_str()), 2;
    if (!run_dir.empty()) return std::fprintf(err, "rankscope gather: one run directory only\n"), 2;
    run_dir = p;
  }
  if (read.refused && read.refused->missing_value && is_gather_flag(read.refused->arg)) {
    const std::string_view alone[] = {read.refused->arg};
    size_t i = 0;
    parse_gather_flag(alone, i, f, err);  // "--slurm needs a value", as the gathering flags say it
    return 2;
  }
  if (read.refused)
    return std::fprintf(err, "rankscope gather: unknown option or missing value '%.*s'\n\n%s",
                        int(read.refused->arg.size()), read.refused->arg.data(), gather_help().c_str()),
           2;
  if (parsed.help) return std::fputs(gather_help().c_str(), out), 0;
  f.out_dir = std::string(parsed.value("--out").value_or(""));
  f.stacks = parsed.has("--stacks");
  f.full = parsed.has("--full");
  f.srun_per_node = parsed.has("--srun-per-node");
  if (run_dir.empty() || f.out_dir.empty() || !f.any()) return std::fputs(gather_help().c_str(), err), 2;
  auto r = gather_with(f, run_dir, self_executable(), f.out_dir);
  if (!r.ok()) return std::fprintf(err, "rankscope gather: %s\n", r.status().message().c_str()), 2;
  std::fprintf(out, "%s, into %s\n", analyzers::hang::gather_headline(*r).c_str(), f.out_dir.c_str());
  for (const auto& line : analyzers::hang::gather_findings(*r)) std::fprintf(out, "  %s\n", line.c_str());
  if (r->answered() == 0) return 2;
  return r->answered() < int(r->nodes.size()) ? 1 : 0;
}

int hangdoctor_main(Args args, const HangdoctorEnv& env) {
  GatherFlags f;
  std::string gather_dir;
  std::vector<std::string_view> rest;
  std::optional<size_t> run_dir_at;  // where RUN_DIR sits in `rest`
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    switch (parse_gather_flag(args, i, f, env.err)) {
      case Parsed::kTaken: continue;
      case Parsed::kBad: return 2;
      case Parsed::kNotMine: break;
    }
    // The rest of the gathering table: a value flag without its value goes on to hangdoctor's
    // parser, which says so.
    if (a == "--gather-dir" && i + 1 < args.size()) {
      gather_dir = args[++i];
      continue;
    }
    if (a == "--full" || a == "--srun-per-node") {
      (a == "--full" ? f.full : f.srun_per_node) = true;
      continue;
    }
    rest.push_back(a);
    // hangdoctor's own flags that take a value: their value is not RUN_DIR.
    if (format::takes_value(hangdoctor_options(), a) && i + 1 < args.size())
      rest.push_back(args[++i]);
    else if (!a.empty() && a[0] != '-' && !run_dir_at)
      run_dir_at = rest.size() - 1;
  }
  for (const std::string_view a : args)
    if (a == "--help" || a == "-h") {
      const int rc = run_hangdoctor(args, env);
      std::fputs(hangdoctor_gather_help().c_str(), env.out);
      return rc;
    }
  if (!f.any()) {
    if (!gather_dir.empty() || !f.exec_template.empty() || f.full || f.srun_per_node)
      return std::fprintf(env.err,
                          "hangdoctor: --gather-dir, --exec, --full and --srun-per-node go with --slurm JOBID or "
                          "--hosts FILE\n"),
             2;
    return run_hangdoctor(args, env);
  }
  if (!run_dir_at)
    return std::fprintf(env.err, "hangdoctor: --slurm/--hosts need RUN_DIR, the run directory as the nodes see it\n"),
           2;
  for (auto& a : rest) {
    if (a == "--wait")
      return std::fprintf(env.err,
                          "hangdoctor: --wait follows a local run; with --slurm/--hosts, run it again to look again\n"),
             2;
    if (a == "--stacks") f.stacks = true;  // taken on the nodes, at snapshot time
  }
  std::erase(rest, std::string_view("--stacks"));
  const std::string run_dir(rest[*run_dir_at]);
  fs::path dir = gather_dir;
  bool temporary = false;
  if (dir.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "hangdoctor-gather-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) return std::fprintf(env.err, "hangdoctor: cannot create a temporary folder\n"), 2;
    dir = tmpl;
    temporary = true;
  }
  // The rankscope beside this hangdoctor runs the snapshot on the nodes.
  const std::string self = self_executable();
  const std::string remote = self.empty() ? std::string() : (fs::path(self).parent_path() / "rankscope").string();
  auto r = gather_with(f, run_dir, remote, dir);
  int rc = 2;
  if (!r.ok()) {
    std::fprintf(env.err, "hangdoctor: %s\n", r.status().message().c_str());
  } else if (r->answered() == 0) {
    std::fprintf(env.err, "hangdoctor: %s\n", analyzers::hang::gather_headline(*r).c_str());
    for (const auto& line : analyzers::hang::gather_findings(*r)) std::fprintf(env.err, "  %s\n", line.c_str());
    std::fprintf(env.err, "hangdoctor: no node answered, nothing to diagnose\n");
  } else {
    const std::string gathered = dir.string();
    rest[*run_dir_at] = gathered;
    rc = run_hangdoctor(rest, env);
    if (!temporary && env.out) std::fprintf(rc == 2 ? env.err : env.out, "gathered run kept in %s\n", gathered.c_str());
  }
  std::error_code ec;
  if (temporary) fs::remove_all(dir, ec);
  return rc;
}

}  // namespace rankscope::cli
