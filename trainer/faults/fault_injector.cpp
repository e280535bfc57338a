// fault_injector.cpp — stall, delay, crash, skip, resize, drop-grad and lossy links.
#include "fault_injector.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include <fmt/format.h>

namespace gpt2 {
namespace {

class InjectorRangeSink final : public rankscope::probe::RangeSink {
 public:
  explicit InjectorRangeSink(FaultInjector& injector) : injector_(injector) {}
  void push(std::string_view name) override { injector_.on_range_enter(name); }
  void pop() override {}

 private:
  FaultInjector& injector_;
};

[[noreturn]] void block_forever() {
  // A hang as a real one looks: the thread sleeps, the process (and the probe's watchdog) lives.
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

[[noreturn]] void die_abruptly(const FaultSpec& f, int rank) {
  fmt::print(stderr, "rank {}: --inject {}: killing this process (SIGKILL)\n", rank, f.text);
  std::fflush(stderr);
  ::kill(::getpid(), SIGKILL);
  for (;;) ::pause();
}

}  // namespace

FaultInjector::FaultInjector(std::vector<FaultSpec> specs, int rank, rankscope::probe::Probe* probe)
    : rank_(rank), probe_(probe) {
  for (auto& s : specs)
    if (s.rank < 0 || s.rank == rank) specs_.push_back(std::move(s));
  fired_.assign(specs_.size(), 0);
  for (const auto& s : specs_) {
    if (s.kind != FaultKind::kLossy) continue;
    lossy_.emplace_back(s, rank);
    lossy_specs_.push_back(&s);
  }
}

std::vector<float> FaultInjector::router_logit_bias(const MoeConfig& moe) const {
  std::vector<float> bias;
  for (const auto& f : specs_) {
    if (f.kind != FaultKind::kRouteSkew || f.expert < 0 || f.expert >= moe.experts) continue;
    bias.resize(static_cast<size_t>(moe.experts), 0.0f);
    bias[static_cast<size_t>(f.expert)] += static_cast<float>(f.bias);
  }
  return bias;
}

CombineMiscount FaultInjector::combine_miscount(int64_t step, int ep_rank) const {
  for (const auto& f : specs_)
    if (f.kind == FaultKind::kA2aMiscount && f.step == step) {
      fmt::print(stderr, "rank {}: --inject {}: wrong receive counts for the combine all_to_all_v at step {}\n",
                 rank_, f.text, step);
      std::fflush(stderr);
      return {ep_rank == 0 ? 1 : 0, f.delta};
    }
  return {};
}

std::unique_ptr<rankscope::probe::RangeSink> FaultInjector::range_sink() {
  return std::make_unique<InjectorRangeSink>(*this);
}

void FaultInjector::on_range_enter(std::string_view name) {
  for (const auto& f : specs_) {
    const bool crash_here = f.kind == FaultKind::kCrash && (f.range.empty() ? name == "step" : name == f.range);
    if (!crash_here && f.range != name) continue;
    if (!step_matches(f)) continue;
    switch (f.kind) {
      case FaultKind::kStall:
        fmt::print(stderr, "rank {}: --inject {}: blocking forever in range {} at step {}\n", rank_,
                   f.text, name, step());
        std::fflush(stderr);
        block_forever();
      case FaultKind::kDelay:
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(f.ms));
        break;
      case FaultKind::kCrash:
        if (crash_here) die_abruptly(f, rank_);
        break;
      case FaultKind::kGpuStall:
        if (gpu_stall_) {
          fmt::print(stderr, "rank {}: --inject {}: GPU kernel spinning {} s in range {} at step {}\n",
                     rank_, f.text, f.seconds, name, step());
          std::fflush(stderr);
          if (auto s = gpu_stall_(f.seconds); !s.ok())
            fmt::print(stderr, "rank {}: --inject {}: {}\n", rank_, f.text, s.to_string());
        }
        break;
      default:
        break;
    }
  }
}

bool FaultInjector::wants_gpu() const {
  for (const auto& f : specs_)
    if (f.kind == FaultKind::kGpuStall) return true;
  return false;
}

bool FaultInjector::drop_grad(std::string_view param) const {
  for (const auto& f : specs_)
    if (f.kind == FaultKind::kDropGrad && f.param == param && step_matches(f)) return true;
  return false;
}

InterceptDecision FaultInjector::before_collective(const CollectiveCall& call) {
  InterceptDecision d;
  for (size_t i = 0; i < specs_.size(); ++i) {
    const FaultSpec& f = specs_[i];
    if (fired_[i] || f.comm != call.comm || f.seq != call.seq) continue;
    if (f.kind == FaultKind::kSkip) {
      fired_[i] = 1;
      fmt::print(stderr, "rank {}: --inject {}: skipping {} seq {}\n", rank_, f.text, call.comm, call.seq);
      d.skip = true;
    } else if (f.kind == FaultKind::kResize && call.op != rankscope::format::CollectiveOp::kBarrier &&
               call.op != rankscope::format::CollectiveOp::kAllToAllV) {
      fired_[i] = 1;
      const auto n = static_cast<size_t>(std::llround(static_cast<double>(call.count) * f.factor));
      fmt::print(stderr, "rank {}: --inject {}: {} seq {} count {} -> {}\n", rank_, f.text, call.comm,
                 call.seq, call.count, n);
      d.count = n;
    }
  }
  return d;
}

void FaultInjector::on_payload(const CollectiveCall& call, void* payload, size_t bytes) {
  for (size_t i = 0; i < lossy_.size(); ++i) {
    const FaultSpec& f = *lossy_specs_[i];
    const bool applies = f.comm.empty() ? call.comm.starts_with("tp") : call.comm == f.comm;
    if (!applies) continue;
    auto* p = static_cast<unsigned char*>(payload);
    double sent = 0, lost = 0;
    for (size_t off = 0; off < bytes; off += f.chunk_bytes) {
      const size_t n = std::min(f.chunk_bytes, bytes - off);
      sent += 1;
      if (lossy_[i].next_chunk_lost()) {
        std::memset(p + off, 0, n);  // a lost chunk arrives as zeros
        lost += 1;
      }
    }
    if (probe_) {
      probe_->counter_add("lossy.chunks_sent", sent);
      probe_->counter_add("lossy.chunks_lost", lost);
    }
  }
}

}  // namespace gpt2
