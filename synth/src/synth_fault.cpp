// synth_fault.cpp — the --fault grammar of `rankscope synth` (the keys of gpt2-train's --inject).
#include <charconv>
#include <string>

#include <fmt/format.h>

#include "rankscope/synth/synth.h"

namespace rankscope::synth {
namespace {

struct KindName {
  FaultKind kind;
  std::string_view name;
};
constexpr KindName kKinds[] = {
    {FaultKind::kNone, "none"},   {FaultKind::kStall, "stall"},
    {FaultKind::kSkip, "skip"},   {FaultKind::kResize, "resize"},
    {FaultKind::kCrash, "crash"}, {FaultKind::kDropGrad, "drop-grad"},
    {FaultKind::kDelay, "delay"}, {FaultKind::kA2aMiscount, "a2a-miscount"},
};
constexpr std::string_view kAllowedKinds = "stall, skip, resize, crash, drop-grad, delay, a2a-miscount";
constexpr std::string_view kAllowedKeys = "rank, step, range, comm, seq, factor, param, ms, delta, peer";

template <class T>
bool parse_number(std::string_view text, T& out) {
  const auto* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && p == end;
}

}  // namespace

std::string_view fault_kind_name(FaultKind kind) {
  for (const auto& k : kKinds)
    if (k.kind == kind) return k.name;
  return "?";
}

Result<FaultSpec> parse_fault(std::string_view text) {
  FaultSpec f;
  const auto colon = text.find(':');
  const std::string_view kind = text.substr(0, colon);
  bool known = false;
  for (const auto& k : kKinds) {
    if (k.name == kind && k.kind != FaultKind::kNone) {
      f.kind = k.kind;
      known = true;
    }
  }
  if (!known)
    return invalid_argument(fmt::format("--fault {}: unknown kind '{}' (hint: one of {})", text, kind, kAllowedKinds));
  std::string_view rest = colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string_view::npos)
      return invalid_argument(
          fmt::format("--fault {}: '{}' is not key=value (hint: keys are {})", text, item, kAllowedKeys));
    const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    bool ok = true;
    if (key == "rank")
      ok = parse_number(value, f.rank) && f.rank >= 0;
    else if (key == "step")
      ok = parse_number(value, f.step) && f.step >= 0;
    else if (key == "seq")
      ok = parse_number(value, f.seq) && f.seq >= 0;
    else if (key == "factor")
      ok = parse_number(value, f.factor) && f.factor > 0;
    else if (key == "ms")
      ok = parse_number(value, f.ms) && f.ms >= 0;
    else if (key == "delta")
      ok = parse_number(value, f.delta) && f.delta != 0;
    else if (key == "peer")
      ok = parse_number(value, f.peer) && f.peer >= 0;
    else if (key == "range")
      f.range = std::string(value);
    else if (key == "comm")
      f.comm = std::string(value);
    else if (key == "param")
      f.param = std::string(value);
    else
      return invalid_argument(fmt::format("--fault {}: unknown key '{}' (hint: keys are {})", text, key, kAllowedKeys));
    if (!ok || value.empty())
      return invalid_argument(fmt::format("--fault {}: bad value '{}' for {}", text, value, key));
  }
  return f;
}

std::string describe_fault(const FaultSpec& f) {
  switch (f.kind) {
    case FaultKind::kNone: return "none";
    case FaultKind::kStall: return fmt::format("stall:rank={},range={},step={}", f.rank, f.range, f.step);
    case FaultKind::kSkip: return fmt::format("skip:rank={},comm={},seq={}", f.rank, f.comm, f.seq);
    case FaultKind::kResize:
      return fmt::format("resize:rank={},comm={},seq={},factor={}", f.rank, f.comm, f.seq, f.factor);
    case FaultKind::kCrash:
      return f.range.empty() ? fmt::format("crash:rank={},step={}", f.rank, f.step)
                             : fmt::format("crash:rank={},step={},range={}", f.rank, f.step, f.range);
    case FaultKind::kDropGrad: return fmt::format("drop-grad:rank={},param={},step={}", f.rank, f.param, f.step);
    case FaultKind::kDelay:
      return f.step < 0 ? fmt::format("delay:rank={},range={},ms={}", f.rank, f.range, f.ms)
                        : fmt::format("delay:rank={},range={},ms={},step={}", f.rank, f.range, f.ms, f.step);
    case FaultKind::kA2aMiscount:
      return fmt::format("a2a-miscount:rank={},step={},range={},peer={},delta={}", f.rank, f.step, f.range, f.peer,
                         f.delta);
  }
  return "?";
}

}  // namespace rankscope::synth
