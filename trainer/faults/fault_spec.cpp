// fault_spec.cpp — the --inject grammar: one table of kinds with their required and optional keys.
#include "fault_spec.h"

#include <charconv>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace gpt2 {

using rankscope::Status;
namespace {

struct KindGrammar {
  std::string_view name;
  FaultKind kind;
  std::vector<std::string_view> required;
  std::vector<std::string_view> optional;
};

const std::vector<KindGrammar>& grammar() {
  static const std::vector<KindGrammar> kinds = {
      {"stall", FaultKind::kStall, {"rank", "range"}, {"step"}},
      {"delay", FaultKind::kDelay, {"rank", "range", "ms"}, {"step"}},
      {"gpu-stall", FaultKind::kGpuStall, {"rank", "range", "step", "seconds"}, {}},
      {"skip", FaultKind::kSkip, {"rank", "comm", "seq"}, {}},
      {"resize", FaultKind::kResize, {"rank", "comm", "seq", "factor"}, {}},
      {"crash", FaultKind::kCrash, {"rank", "step"}, {"range"}},
      {"drop-grad", FaultKind::kDropGrad, {"rank", "param"}, {"step"}},
      {"route-skew", FaultKind::kRouteSkew, {"expert", "bias"}, {}},
      {"a2a-miscount", FaultKind::kA2aMiscount, {"rank", "step", "delta"}, {}},
      {"lossy", FaultKind::kLossy, {"model"},
       {"p", "p_gb", "p_bg", "loss_good", "loss_bad", "rank", "comm", "chunk", "seed"}},
  };
  return kinds;
}

std::string kind_list() {
  std::vector<std::string_view> names;
  for (const auto& k : grammar()) names.push_back(k.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Status error(const std::string& what) const {
    return rankscope::invalid_argument(fmt::format("--inject {}: {}", text_, what));
  }

  template <class T>
  Status integer(const std::map<std::string, std::string>& kv, const char* key, T& out, T min) const {
    const std::string& v = kv.at(key);
    T value{};
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
    if (ec != std::errc() || end != v.data() + v.size() || value < min)
      return error(fmt::format("{}={} is not an integer >= {}", key, v, min));
    out = value;
    return {};
  }

  Status real(const std::map<std::string, std::string>& kv, const char* key, double& out,
              double min, double max) const {
    const std::string& v = kv.at(key);
    double value = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
    if (ec != std::errc() || end != v.data() + v.size() || !(value >= min && value <= max))
      return error(fmt::format("{}={} is not a number in [{}, {}]", key, v, min, max));
    out = value;
    return {};
  }

 private:
  std::string_view text_;
};

}  // namespace

std::string_view fault_kind_name(FaultKind kind) {
  for (const auto& k : grammar())
    if (k.kind == kind) return k.name;
  return "unknown";
}

rankscope::Result<FaultSpec> parse_fault_spec(std::string_view text) {
  Parser parser(text);
  const size_t colon = text.find(':');
  const std::string_view kind_name = text.substr(0, colon);
  const KindGrammar* g = nullptr;
  for (const auto& k : grammar())
    if (k.name == kind_name) g = &k;
  if (g == nullptr)
    return parser.error(fmt::format("unknown fault kind '{}' (known: {})", kind_name, kind_list()));

  std::map<std::string, std::string> kv;
  std::string_view rest = colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == item.size())
      return parser.error(fmt::format("'{}' is not key=value", item));
    std::string key(item.substr(0, eq));
    bool known = false;
    for (auto k : g->required) known |= (k == key);
    for (auto k : g->optional) known |= (k == key);
    if (!known) {
      std::vector<std::string_view> allowed(g->required);
      allowed.insert(allowed.end(), g->optional.begin(), g->optional.end());
      return parser.error(fmt::format("unknown key '{}' for {} (allowed: {})", key, g->name,
                                      fmt::join(allowed, ", ")));
    }
    if (!kv.emplace(key, std::string(item.substr(eq + 1))).second)
      return parser.error(fmt::format("key '{}' given twice", key));
  }
  for (auto k : g->required)
    if (!kv.count(std::string(k)))
      return parser.error(fmt::format("{} needs {}= (form: {}:{}=...)", g->name, k, g->name,
                                      fmt::join(g->required, "=..,")));

  FaultSpec spec;
  spec.kind = g->kind;
  spec.text = std::string(text);
  if (kv.count("rank")) RS_RETURN_IF_ERROR(parser.integer(kv, "rank", spec.rank, 0));
  if (kv.count("step")) RS_RETURN_IF_ERROR(parser.integer<int64_t>(kv, "step", spec.step, 0));
  if (kv.count("seq")) RS_RETURN_IF_ERROR(parser.integer<uint64_t>(kv, "seq", spec.seq, 0));
  if (kv.count("chunk")) RS_RETURN_IF_ERROR(parser.integer<size_t>(kv, "chunk", spec.chunk_bytes, 4));
  if (kv.count("seed")) RS_RETURN_IF_ERROR(parser.integer<uint64_t>(kv, "seed", spec.seed, 0));
  if (kv.count("ms")) RS_RETURN_IF_ERROR(parser.real(kv, "ms", spec.ms, 0, 1e9));
  if (kv.count("seconds")) RS_RETURN_IF_ERROR(parser.real(kv, "seconds", spec.seconds, 0.001, 1e6));
  if (kv.count("factor")) RS_RETURN_IF_ERROR(parser.real(kv, "factor", spec.factor, 1e-6, 1e6));
  if (kv.count("expert")) RS_RETURN_IF_ERROR(parser.integer(kv, "expert", spec.expert, 0));
  if (kv.count("bias")) RS_RETURN_IF_ERROR(parser.real(kv, "bias", spec.bias, -1e4, 1e4));
  if (kv.count("delta")) {
    RS_RETURN_IF_ERROR(parser.integer<int64_t>(kv, "delta", spec.delta, -(int64_t(1) << 40)));
    if (spec.delta == 0) return parser.error("delta=0 changes nothing (hint: e.g. delta=1 or delta=-1)");
  }
  if (kv.count("range")) spec.range = kv["range"];
  if (kv.count("comm")) spec.comm = kv["comm"];
  if (kv.count("param")) spec.param = kv["param"];

  if (spec.kind == FaultKind::kLossy) {
    const std::string& model = kv["model"];
    std::vector<const char*> needed;
    if (model == "bernoulli") {
      spec.loss_model = LossModel::kBernoulli;
      needed = {"p"};
    } else if (model == "gilbert-elliott") {
      spec.loss_model = LossModel::kGilbertElliott;
      needed = {"p_gb", "p_bg", "loss_good", "loss_bad"};
    } else {
      return parser.error(fmt::format("unknown loss model '{}' (known: bernoulli, gilbert-elliott)", model));
    }
    const std::set<std::string> own(needed.begin(), needed.end());
    for (const char* key : {"p", "p_gb", "p_bg", "loss_good", "loss_bad"}) {
      if (own.count(key) && !kv.count(key))
        return parser.error(fmt::format("model={} needs {}=", model, key));
      if (!own.count(key) && kv.count(key))
        return parser.error(fmt::format("{}= does not belong to model={}", key, model));
    }
    if (kv.count("p")) RS_RETURN_IF_ERROR(parser.real(kv, "p", spec.p, 0, 1));
    if (kv.count("p_gb")) RS_RETURN_IF_ERROR(parser.real(kv, "p_gb", spec.p_gb, 0, 1));
    if (kv.count("p_bg")) RS_RETURN_IF_ERROR(parser.real(kv, "p_bg", spec.p_bg, 0, 1));
    if (kv.count("loss_good")) RS_RETURN_IF_ERROR(parser.real(kv, "loss_good", spec.loss_good, 0, 1));
    if (kv.count("loss_bad")) RS_RETURN_IF_ERROR(parser.real(kv, "loss_bad", spec.loss_bad, 0, 1));
  }
  return spec;
}

}  // namespace gpt2
