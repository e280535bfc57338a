// synth_command.cpp — `rankscope synth`: writes a synthetic run directory in the real format.
// Thin: the simulation is rankscope_synth (synth/).
#include <unistd.h>

#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "command_line.h"
#include "option_values.h"
#include "rankscope/format/option_table.h"
#include "rankscope/synth/synth.h"
#include "subcommands.h"

namespace rankscope::cli {

namespace {

constexpr format::Option kSynthOptions[] = {
    {"--ranks", "N", "ranks in the job"},
    {"--steps", "S", "training steps each rank runs"},
    {"--tp", "T", "tensor-parallel group size; must divide N (default 1)"},
    {"--layers", "L", "transformer blocks (default 2); ranges and collectives per step grow with L"},
    {"--fault", "KIND:rank=R[,...]", "freeze the job with one fault (the kinds above)"},
    {"--moe-experts", "E",
     "mixture of experts in every --moe-every'th block (default 1), top-K routing\n"
     "(default 2), experts sharded over ep{k} groups of --ep N data-parallel ranks;\n"
     "all_to_all of counts, all_to_all_v of rows with per-peer counts, expert time\n"
     "following the rows received, counters moe.* per step"},
    {"--moe-top-k", "K", "experts each token is routed to (default 2)"},
    {"--moe-every", "N", "an MoE block every N blocks (default 1)"},
    {"--ep", "N", "data-parallel ranks an expert group spans (default 1)"},
    {"--moe-hot-expert", "E", "route skew: expert E's router weight times 1 + --moe-hot-bias (default 2)"},
    {"--moe-hot-bias", "B", "the hot expert's extra router weight (default 2)"},
    {"--idle", "SECONDS", "how long a stuck job has been stuck at the snapshot (default 60)"},
    {"--seed", "N", "seed of the per-rank jitter (default 1)"},
    {"--local-host", "",
     "ranks claim this machine's host name and the parent shell's pid\n"
     "(the crashed rank a pid that has exited), so pid checks apply"},
    {"--out", "DIR", "the run directory to write", "-o"},
};

const std::string& synth_help() {
  static const std::string text =
      "usage: rankscope synth --ranks N --steps S [--tp T] [--layers L]\n"
      "                       [--fault KIND:rank=R[,step=S,range=NAME,comm=C,seq=K,factor=F,param=P,ms=M,\n"
      "                                           delta=D,peer=P]]\n"
      "                       [--moe-experts E [--moe-top-k K] [--moe-every N] [--ep N]\n"
      "                        [--moe-hot-expert E [--moe-hot-bias B]]]\n"
      "                       [--idle SECONDS] [--seed N] [--local-host] -o DIR\n\n"
      "Writes a run directory of a simulated GPT-2 job (TP groups of consecutive ranks, DP groups\n"
      "strided) in the real format: run.json, a flight recorder and an event stream per rank. The job\n"
      "is healthy and finished, or frozen by one fault of gpt2-train's --inject kinds:\n"
      "  stall      rank R blocks on entering range NAME at step S (default forward/embed, mid-run)\n"
      "  skip       rank R leaves out collective K of communicator C (a desync)\n"
      "  resize     rank R's collective K on C gets count*F elements\n"
      "  crash      rank R dies at step S (on entering NAME, or at the step's start)\n"
      "  drop-grad  rank R never reports param P's gradient ready (needs DP >= 2)\n"
      "  delay      rank R is M ms slower inside NAME (a straggler; the job still finishes)\n"
      "  a2a-miscount  (MoE) rank R expects D rows more (negative: fewer) from ep rank P in the\n"
      "             all_to_all_v of NAME (default forward/block0/moe/combine) at step S: the ep\n"
      "             group blocks inside it\n"
      "Details left out get defaults that fit the layout; the summary line prints them.\n\n" +
      format::options_help(kSynthOptions, 18);
  return text;
}

// Says that `flag` was given a value it cannot take ("" when it had none); returns 2.
int bad_value(std::string_view flag, std::string_view value) {
  std::fprintf(stderr, "rankscope synth: %s needs a valid value%s\n", std::string(flag).c_str(),
               value.empty() ? "" : (", got '" + std::string(value) + "'").c_str());
  return 2;
}

// Each value of `flag`, read into `out` as a number at least `min`; the exit code after saying which
// one is not, nullopt when all are.
template <class T>
std::optional<int> read_number(const format::ParsedOptions& parsed, std::string_view flag, T& out,
                               T min = std::numeric_limits<T>::lowest()) {
  for (const std::string_view v : parsed.all_values(flag)) {
    const std::optional<T> n = number_at_least(v, min);
    if (!n) return bad_value(flag, v);
    out = *n;
  }
  return std::nullopt;
}

// The numbers of the command line into `o`: the exit code after saying which is bad, nullopt when all are good.
std::optional<int> read_numbers(const format::ParsedOptions& parsed, synth::SynthOptions& o) {
  for (const auto& [flag, field] : {std::pair<std::string_view, int*>{"--ranks", &o.ranks},
                                    {"--steps", &o.steps},
                                    {"--tp", &o.tp},
                                    {"--layers", &o.layers},
                                    {"--moe-experts", &o.moe_experts},
                                    {"--moe-top-k", &o.moe_top_k},
                                    {"--moe-every", &o.moe_every},
                                    {"--ep", &o.ep}}) {
    if (auto stop = read_number(parsed, flag, *field)) return stop;
  }
  if (auto stop = read_number(parsed, "--moe-hot-expert", o.hot_expert, 0)) return stop;
  if (auto stop = read_number(parsed, "--moe-hot-bias", o.hot_bias, 0.0)) return stop;
  if (auto stop = read_number(parsed, "--idle", o.idle_s, 0.0)) return stop;
  return read_number(parsed, "--seed", o.seed);
}

// The command line into `o` and `out`: the exit code when the command stops here (0 after --help, 2
// after saying what is wrong), nullopt when it goes on.
std::optional<int> read_synth_args(Args args, synth::SynthOptions& o, std::string& out) {
  format::OptionsRead read = format::read_options(kSynthOptions, args);
  // The command takes no path: any argument that is not an option is an unknown one.
  refuse_first_positional(kSynthOptions, args, read);
  const format::ParsedOptions& parsed = read.parsed;
  if (auto stop = read_numbers(parsed, o)) return stop;
  for (const std::string_view v : parsed.all_values("--fault")) {
    auto f = synth::parse_fault(v);
    if (!f.ok()) {
      std::fprintf(stderr, "rankscope synth: %s\n", f.status().message().c_str());
      return 2;
    }
    o.fault = *f;
  }
  o.local_host = parsed.has("--local-host");
  out = std::string(parsed.value("--out").value_or(""));
  if (read.refused && read.refused->missing_value) return bad_value(read.refused->arg, "");
  if (read.refused) return unknown_option("synth", read.refused->arg, synth_help());
  if (parsed.help) {
    std::fputs(synth_help().c_str(), stdout);
    return 0;
  }
  if (!parsed.has("--ranks") || !parsed.has("--steps") || out.empty()) {
    std::fprintf(stderr, "rankscope synth: --ranks, --steps and -o DIR are required\n\n%s", synth_help().c_str());
    return 2;
  }
  return std::nullopt;
}

}  // namespace

std::span<const format::Option> synth_options() { return kSynthOptions; }

int synth_command(Args args) {
  synth::SynthOptions o;
  std::string out;
  o.command_line = {"rankscope", "synth"};
  for (auto a : args) o.command_line.emplace_back(a);
  if (auto stop = read_synth_args(args, o, out)) return *stop;
  if (o.local_host) o.live_pid = int(::getppid());  // alive after we exit, unlike our own pid
  auto summary = synth::write_synthetic_run(out, o);
  if (!summary.ok()) {
    const Status& st = summary.status();  // a bad option needs no breadcrumb, an I/O failure does
    std::fprintf(stderr, "rankscope synth: %s\n",
                 st.user_text().c_str());
    return 2;
  }
  std::printf("wrote %s: %d ranks (tp %d x dp %d), %s, %.1f MiB\n", out.c_str(), o.ranks, o.tp, o.ranks / o.tp,
              summary->fault.kind == synth::FaultKind::kNone
                  ? std::string("healthy, finished").c_str()
                  : ("fault " + synth::describe_fault(summary->fault) +
                     (summary->hang_step >= 0 ? ", stuck at step " + std::to_string(summary->hang_step)
                                              : std::string(", finished")))
                        .c_str(),
              double(summary->bytes_written) / (1024.0 * 1024.0));
  return 0;
}

}  // namespace rankscope::cli
