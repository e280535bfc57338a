// synth_command.cpp — `rankscope synth`: writes a synthetic run directory in the real format.
// Thin: the simulation is rankscope_synth (synth/).
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <string>

#include "rankscope/synth/synth.h"
#include "subcommands.h"

namespace rankscope::cli {

namespace {
constexpr const char* kSynthHelp =
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
    "Details left out get defaults that fit the layout; the summary line prints them.\n\n"
    "  --layers L      transformer blocks (default 2); ranges and collectives per step grow with L\n"
    "  --idle SECONDS  how long a stuck job has been stuck at the snapshot (default 60)\n"
    "  --moe-experts E mixture of experts in every --moe-every'th block (default 1), top-K routing\n"
    "                  (default 2), experts sharded over ep{k} groups of --ep N data-parallel ranks;\n"
    "                  all_to_all of counts, all_to_all_v of rows with per-peer counts, expert time\n"
    "                  following the rows received, counters moe.* per step\n"
    "  --moe-hot-expert E  route skew: expert E's router weight times 1 + --moe-hot-bias (default 2)\n"
    "  --local-host    ranks claim this machine's host name and the parent shell's pid\n"
    "                  (the crashed rank a pid that has exited), so pid checks apply\n";

template <class T>
bool number(std::string_view v, T& out) {
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  return ec == std::errc() && p == v.data() + v.size();
}
}  // namespace

int synth_command(Args args) {
  synth::SynthOptions o;
  std::string out;
  bool have_ranks = false, have_steps = false;
  o.command_line = {"rankscope", "synth"};
  for (auto a : args) o.command_line.emplace_back(a);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    auto value = [&](std::string_view& v) {
      if (i + 1 >= args.size()) return false;
      v = args[++i];
      return true;
    };
    std::string_view v;
    bool ok = true;
    if (a == "--help" || a == "-h") {
      std::fputs(kSynthHelp, stdout);
      return 0;
    } else if (a == "--ranks") {
      ok = value(v) && number(v, o.ranks);
      have_ranks = true;
    } else if (a == "--steps") {
      ok = value(v) && number(v, o.steps);
      have_steps = true;
    } else if (a == "--tp") {
      ok = value(v) && number(v, o.tp);
    } else if (a == "--layers") {
      ok = value(v) && number(v, o.layers);
    } else if (a == "--moe-experts") {
      ok = value(v) && number(v, o.moe_experts);
    } else if (a == "--moe-top-k") {
      ok = value(v) && number(v, o.moe_top_k);
    } else if (a == "--moe-every") {
      ok = value(v) && number(v, o.moe_every);
    } else if (a == "--ep") {
      ok = value(v) && number(v, o.ep);
    } else if (a == "--moe-hot-expert") {
      ok = value(v) && number(v, o.hot_expert) && o.hot_expert >= 0;
    } else if (a == "--moe-hot-bias") {
      ok = value(v) && number(v, o.hot_bias) && o.hot_bias >= 0;
    } else if (a == "--idle") {
      ok = value(v) && number(v, o.idle_s) && o.idle_s >= 0;
    } else if (a == "--seed") {
      ok = value(v) && number(v, o.seed);
    } else if (a == "--local-host") {
      o.local_host = true;
    } else if (a == "--fault") {
      if (!value(v)) {
        ok = false;
      } else {
        auto f = synth::parse_fault(v);
        if (!f.ok()) {
          std::fprintf(stderr, "rankscope synth: %s\n", f.status().message().c_str());
          return 2;
        }
        o.fault = *f;
      }
    } else if (a == "-o" || a == "--out") {
      ok = value(v);
      out = v;
    } else {
      std::fprintf(stderr, "rankscope synth: unknown option '%s'\n\n%s", std::string(a).c_str(), kSynthHelp);
      return 2;
    }
    if (!ok) {
      std::fprintf(stderr, "rankscope synth: %s needs a valid value%s\n", std::string(a).c_str(),
                   v.empty() ? "" : (", got '" + std::string(v) + "'").c_str());
      return 2;
    }
  }
  if (!have_ranks || !have_steps || out.empty()) {
    std::fprintf(stderr, "rankscope synth: --ranks, --steps and -o DIR are required\n\n%s", kSynthHelp);
    return 2;
  }
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
