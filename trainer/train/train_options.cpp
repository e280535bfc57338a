// train_options.cpp — one table of flags: name, value, help, and how the value is stored.
#include "train_options.h"

#include <charconv>
#include <functional>
#include <string_view>

#include <fmt/format.h>

#include "rankscope/probe/probe.h"
#include "seq_len_sweep.h"

namespace gpt2 {
namespace {

using Setter = std::function<Status(std::string_view)>;

struct Flag {
  std::string_view name;   // without the leading "--"
  std::string_view value;  // "" for a switch
  std::string_view help;
  Setter set;
};

template <class T>
Setter number(T& out, T min, T max) {
  return [&out, min, max](std::string_view v) -> Status {
    T value{};
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
    if (ec != std::errc() || end != v.data() + v.size() || value < min || value > max)
      return rankscope::invalid_argument(fmt::format("'{}' is not a number in [{}, {}]", v, min, max));
    out = value;
    return {};
  };
}

template <class T>
Setter optional_number(std::optional<T>& out, T min, T max) {
  return [&out, min, max](std::string_view v) -> Status {
    T value{};
    RS_RETURN_IF_ERROR(number(value, min, max)(v));
    out = value;
    return {};
  };
}

Setter text(std::string& out) {
  return [&out](std::string_view v) -> Status {
    out = std::string(v);
    return {};
  };
}

// One of a fixed set of words; the error lists them.
Setter choice(std::string& out, std::initializer_list<std::string_view> known) {
  std::vector<std::string_view> words(known);
  return [&out, words](std::string_view v) -> Status {
    for (std::string_view w : words)
      if (v == w) {
        out = std::string(v);
        return {};
      }
    std::string list;
    for (std::string_view w : words) list += fmt::format("{}{}", list.empty() ? "" : ", ", w);
    return rankscope::invalid_argument(fmt::format("unknown value '{}' (known: {})", v, list));
  };
}

Setter on(bool& out) {
  return [&out](std::string_view) -> Status {
    out = true;
    return {};
  };
}

std::vector<Flag> flags(TrainOptions& o) {
  return {
      {"model", "NAME", "preset: d12 (GPT-2 124M), d6 or tiny (2L 4H 128C) [tiny]",
       [&o](std::string_view v) -> Status {
         if (v != "d12" && v != "d6" && v != "tiny")
           return rankscope::invalid_argument(fmt::format("unknown model '{}' (known: d12, d6, tiny)", v));
         o.model = std::string(v);
         return {};
       }},
      {"layers", "L", "override the preset's layer count", optional_number(o.layers, 1, 1000)},
      {"heads", "NH", "override the preset's head count", optional_number(o.heads, 1, 1000)},
      {"channels", "C", "override the preset's channels", optional_number(o.channels, 1, 65536)},
      {"vocab-size", "V", "override the vocabulary size [50257]", optional_number(o.vocab_size, 2, 65536)},
      {"seq-len", "T", "sequence length [64]", number(o.seq_len, 1, 1 << 20)},
      {"batch", "B", "micro-batch per data-parallel rank [4]", number(o.batch, 1, 1 << 20)},
      {"grad-accum", "N", "micro-batches per optimizer step [1]", number(o.grad_accum, 1, 1 << 20)},
      {"steps", "N", "optimizer steps [50]", number(o.steps, 1, 1 << 30)},
      {"lr", "LR", "peak learning rate [1e-3]", number(o.lr, 0.0f, 10.0f)},
      {"warmup", "N", "linear warmup steps [10% of --steps]", number(o.warmup, 0, 1 << 30)},
      {"min-lr-frac", "F", "cosine decay floor as a fraction of --lr [0.1]", number(o.min_lr_frac, 0.0f, 1.0f)},
      {"weight-decay", "WD", "AdamW decoupled weight decay on 2-D weights [0]", number(o.weight_decay, 0.0f, 10.0f)},
      {"grad-clip", "NORM", "clip the global gradient norm to this (0: off) [1.0]", number(o.grad_clip, 0.0f, 1e9f)},
      {"seed", "N", "seed of weights, synthetic data, shuffling and sampling [1337]", number<uint64_t>(o.seed, 0, UINT64_MAX)},
      {"tp", "N", "tensor-parallel degree; data parallelism is world size / N [1]", number(o.tp, 1, 4096)},
      {"ep", "N", "expert-parallel degree: groups of N data-parallel ranks form ep{k} communicators "
                  "(expert-data-parallel groups edp{m} hold the same experts); must divide the "
                  "data-parallel degree [1]", number(o.ep, 1, 4096)},
      {"moe-experts", "E", "mixture of experts: E experts per MoE block (0: dense MLP) [0]",
       number(o.moe.experts, 0, 4096)},
      {"moe-top-k", "K", "experts per token, 1 or 2 (K=1 gate = probability, K=2 renormalised) [1]",
       number(o.moe.top_k, 1, 2)},
      {"moe-every", "N", "MoE MLP in blocks l with l % N == 0 (1: every block) [1]", number(o.moe.every, 1, 1000)},
      {"moe-capacity-factor", "F", "per-expert capacity ceil(tokens*K/E*F) slots, the rest dropped "
                                   "and counted (0: dropless) [0]", number(o.moe.capacity_factor, 0.0f, 1e6f)},
      {"moe-aux-loss-coef", "A", "Switch/GShard load-balancing loss A*E*sum f_i*P_i added to the loss [0]",
       number(o.moe.aux_loss_coef, 0.0f, 1e6f)},
      {"moe-expert-loop", "grouped|token", "one GEMM chain per expert, or per routed row (the "
                                           "incident's anti-pattern) [grouped]",
       [&o](std::string_view v) -> Status {
         RS_ASSIGN_OR_RETURN(o.moe.loop, parse_expert_loop(v));
         return {};
       }},
      {"vocab-shard", "KIND", "contiguous (Megatron; skewed on real text) or strided [contiguous]",
       [&o](std::string_view v) -> Status {
         RS_ASSIGN_OR_RETURN(o.vocab_shard, parse_vocab_shard(v));
         return {};
       }},
      {"recompute", "0|1|2", "activation recompute: 1 GELU, 2 also LayerNorm [0]",
       [&o](std::string_view v) -> Status {
         RS_ASSIGN_OR_RETURN(o.recompute, parse_recompute(v));
         return {};
       }},
      {"attention", "auto|naive|flash", "naive keeps the (B,NH,T,T) probabilities per layer (memory "
                                        "and time grow with T^2), flash a logsumexp per row; auto: flash "
                                        "on cuda, naive on cpu [auto]", choice(o.attention, {"auto", "naive", "flash"})},
      {"data", "SPEC", "llm.c shard(s) (a glob in quotes is fine), synthetic:uniform or synthetic:zipf "
                       "[the shipped tinyshakespeare shard]", text(o.data)},
      {"val-data", "SPEC", "validation shard(s) [the shipped tinyshakespeare val shard]", text(o.val_data)},
      {"shuffle", "", "visit batches in a seeded random order each epoch (default: in order)", on(o.shuffle)},
      {"val-every", "N", "report validation loss every N steps and at the end (0: never) [0]", number(o.val_every, 0, 1 << 30)},
      {"val-batches", "N", "micro-batches per validation [4]", number(o.val_batches, 1, 1 << 20)},
      {"sample", "N", "print N generated tokens at the end (top-k, seeded) [0]", number(o.sample, 0, 1 << 20)},
      {"sample-top-k", "K", "top-k of --sample [40]", number(o.sample_top_k, 1, 1 << 20)},
      {"run-dir", "DIR", "where the probe, metrics and checkpoints go [runs/<date-time>]", text(o.run_dir)},
      {"save-every", "N", "write a checkpoint every N steps and at the end (0: never) [0]", number(o.save_every, 0, 1 << 30)},
      {"resume", "DIR", "continue from a checkpoint directory (or a run directory's latest)", text(o.resume)},
      {"init-from", "FILE", "start from an llm.c model file (magic 20240326, version 3)", text(o.init_from)},
      {"inject", "KIND:k=v,..", "inject a fault (repeatable): stall, delay, gpu-stall, skip, resize, "
                                "crash, drop-grad, lossy; see docs",
       [&o](std::string_view v) -> Status {
         RS_ASSIGN_OR_RETURN(FaultSpec spec, parse_fault_spec(v));
         o.inject.push_back(std::move(spec));
         return {};
       }},
      {"trace-steps", "A-B", "full-detail capture window of the probe (e.g. 10-12)", text(o.trace_steps)},
      {"sweep-seq-len", "T1,T2,..", "one short run per sequence length, each in --run-dir/seq_len_NNNNN "
                                    "(a sweep directory for rankscope scaling)",
       [&o](std::string_view v) -> Status {
         RS_ASSIGN_OR_RETURN(o.sweep_seq_lens, parse_seq_len_list(v));
         return {};
       }},
      {"watchdog-timeout", "SECONDS", "report collectives or ranges open longer than this",
       number(o.watchdog_timeout_s, 0.001, 1e9)},
      {"no-probe", "", "run without the probe (for overhead measurements)", on(o.no_probe)},
      {"device", "auto|cpu|cuda", "compute device; auto: cuda when the build has CUDA and a device "
                                  "answers, else cpu [auto]", choice(o.device, {"auto", "cpu", "cuda"})},
      {"comm", "auto|mpi|nccl", "collectives; auto: nccl when every rank on a host has its own GPU, "
                                "else mpi (host staging on a GPU) [auto]", choice(o.comm, {"auto", "mpi", "nccl"})},
      {"precision", "auto|fp32|bf16", "precision on the GPU: bf16 stores activations and their "
                                      "gradients in bf16 and runs GEMMs on bf16 operands (fp32 master "
                                      "weights, optimizer and statistics); auto: bf16 on cuda, fp32 on "
                                      "cpu [auto]", choice(o.precision, {"auto", "fp32", "bf16"})},
      {"profile-steps", "A-B", "cudaProfilerStart/Stop around steps A..B (nsys -c cudaProfilerApi)",
       [&o](std::string_view v) -> Status {
         RS_RETURN_IF_ERROR(rankscope::probe::parse_step_window(v).status());
         o.profile_steps = std::string(v);
         return {};
       }},
      {"quiet", "", "no per-step progress lines", on(o.quiet)},
      {"help", "", "print this help", on(o.help)},
  };
}

}  // namespace

// The --moe-* flags among themselves and against --ep and the features that have no MoE path.
Status validate_moe_options(const TrainOptions& o) {
  const MoeConfig dense;
  if (!o.moe.enabled()) {
    const bool moe_flag = o.moe.top_k != dense.top_k || o.moe.every != dense.every ||
                          o.moe.capacity_factor != dense.capacity_factor ||
                          o.moe.aux_loss_coef != dense.aux_loss_coef || o.moe.loop != dense.loop;
    if (moe_flag)
      return rankscope::invalid_argument(
          "--moe-top-k/--moe-every/--moe-capacity-factor/--moe-aux-loss-coef/--moe-expert-loop need "
          "--moe-experts E (E > 0)");
    return {};
  }
  RS_RETURN_IF_ERROR(o.moe.validate(o.ep));
  if (o.save_every > 0 || !o.resume.empty() || !o.init_from.empty())
    return rankscope::invalid_argument(
        "--save-every, --resume and --init-from move llm.c model files, which hold a dense GPT-2 "
        "only (hint: drop them for an MoE run, or train without --moe-experts)");
  if (o.sample > 0 && o.ep > 1)
    return rankscope::invalid_argument(
        "--sample runs on the first data-parallel rank alone, but with --ep > 1 every token needs "
        "the whole ep{k} group (hint: --sample 0, or --ep 1)");
  return {};
}

std::string train_usage() {
  TrainOptions scratch;
  std::string out =
      "usage: gpt2-train [flags]            (one process)\n"
      "       mpirun -np N gpt2-train [flags] (tensor x data parallel)\n\n"
      "Trains GPT-2 on the CPU or a GPU with the rankscope probe recording into the run directory.\n\n";
  for (const Flag& f : flags(scratch)) {
    std::string lhs = f.value.empty() ? fmt::format("--{}", f.name) : fmt::format("--{} {}", f.name, f.value);
    out += fmt::format("  {:<28} {}\n", lhs, f.help);
  }
  return out;
}

rankscope::Result<TrainOptions> parse_train_options(int argc, const char* const* argv) {
  TrainOptions o;
  for (int i = 0; i < argc; ++i) o.command_line.emplace_back(argv[i]);
  const std::vector<Flag> table = flags(o);
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (!arg.starts_with("--"))
      return rankscope::invalid_argument(fmt::format(
          "unexpected argument '{}' (flags start with --; see gpt2-train --help)", arg));
    std::string_view name = arg.substr(2);
    std::optional<std::string_view> value;
    if (auto eq = name.find('='); eq != std::string_view::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const Flag* flag = nullptr;
    for (const Flag& f : table)
      if (f.name == name) flag = &f;
    if (flag == nullptr)
      return rankscope::invalid_argument(fmt::format("unknown flag --{} (see gpt2-train --help)", name));
    if (flag->value.empty()) {
      if (value) return rankscope::invalid_argument(fmt::format("--{} takes no value", name));
      RS_RETURN_IF_ERROR(flag->set(""));
      continue;
    }
    if (!value) {
      if (i + 1 >= argc)
        return rankscope::invalid_argument(fmt::format("--{} needs a value ({})", name, flag->value));
      value = argv[++i];
    }
    Status s = flag->set(*value);
    if (!s.ok()) return s.prefix(fmt::format("--{}", name));  // prefix() adds the ": "
  }
  if (o.help) return o;
  if (o.warmup < 0) o.warmup = o.steps / 10;
  if (!o.resume.empty() && !o.init_from.empty())
    return rankscope::invalid_argument("--resume and --init-from exclude each other (a checkpoint has its own weights)");
  RS_RETURN_IF_ERROR(validate_moe_options(o));
  return o;
}

}  // namespace gpt2
