// joined_verdict.cpp — dumps, logs and stacks joined per rank into one verdict (joined_verdict.h).
#include "rankscope/analyzers/hang/joined_verdict.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "rankscope/analyzers/hang/rank_list.h"
#include "rankscope/format/vocabulary.h"

namespace rankscope::analyzers::hang {
namespace {

struct Artifact {
  std::string name;  // dumps | log | stacks
  const Diagnosis* d = nullptr;
  bool problem = false;
  std::vector<int> names;  // the ranks it names (culprits; the stacks' outliers)
};

std::string joined_ranks_word(const std::vector<int>& r) {
  return fmt::format("rank{} {}", r.size() == 1 ? "" : "s", compress_ranks(r));
}

// What an artifact's own diagnosis says of one rank.
std::string rank_says(const Diagnosis& d, int rank) {
  for (const auto& r : d.ranks) {
    if (r.rank != rank) continue;
    std::string s;
    switch (r.state) {
      case RankState::kWaiting:
        s = r.waiting ? fmt::format("waiting in {} #{} on {}", format::short_op_name(r.waiting->op), r.waiting->seq,
                                    r.waiting->comm)
                      : "waiting in a collective";
        break;
      case RankState::kRunning: s = "not in a collective"; break;
      case RankState::kDead: s = "dead"; break;
      case RankState::kFinished: s = "finished"; break;
      case RankState::kAborted: s = "aborted"; break;
      case RankState::kMissing: s = "no evidence"; break;
      case RankState::kFrozen: s = "frozen"; break;
    }
    if (!r.note.empty() && r.state != RankState::kWaiting) s += " (" + r.note + ")";
    if (r.last_completed_seq && r.state != RankState::kMissing)
      s += fmt::format("; last completed #{}", *r.last_completed_seq);
    return s;
  }
  return {};
}

std::vector<int> intersect(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

std::string verdict_word(const Diagnosis& d) {
  switch (d.verdict) {
    case Verdict::kHealthy: return "nothing wrong";
    case Verdict::kFinished: return "finished";
    case Verdict::kHang: return "a hang";
    case Verdict::kDesync: return "a desync";
    case Verdict::kCrash: return "a crash";
  }
  return "?";
}

// The join, phase by phase, in the order join_verdicts runs them: each phase reads what the ones
// before it left on the struct.
struct Join {
  explicit Join(const JoinInputs& inputs) : in(inputs) {}
  const JoinInputs& in;
  std::optional<Diagnosis> stacks_diagnosis;
  std::vector<Artifact> arts;  // dumps, log, stacks: those given
  std::string overruled;       // why the dumps' hang was set aside, when it was
  bool any_problem = false;
  std::vector<const Artifact*> naming;  // the artifacts that name culprits
  std::vector<int> culprits;            // the ranks every naming artifact names, else all they name
  bool met = true;                      // the naming artifacts share a rank
  std::vector<std::string> disagreements;
  const Artifact* base = nullptr;  // the artifact whose diagnosis the joined one starts from
  Diagnosis d;

  void collect_artifacts();
  void overrule_open_gloo_entries();
  void locate_with_stack_outliers();
  void agree_on_culprits();
  void note_one_sided_problems();
  void choose_base_diagnosis();
  void cite_naming_artifacts();
  void add_culprit_frames();
  std::string artifact_says(const Artifact& a, int rank, bool blames) const;
  JoinedVerdict evidence_per_culprit();
};

void Join::collect_artifacts() {
  if (in.stacks) stacks_diagnosis = diagnose_stacks(*in.stacks);
  auto add = [&](std::string name, const Diagnosis* diagnosis) {
    if (!diagnosis) return;
    Artifact a{std::move(name), diagnosis, exit_code(*diagnosis) == 1, diagnosis->culprit_ranks};
    std::sort(a.names.begin(), a.names.end());
    arts.push_back(std::move(a));
  };
  add("dumps", in.dumps ? &*in.dumps : nullptr);
  add("log", in.log ? &in.log->diagnosis : nullptr);
  add("stacks", stacks_diagnosis ? &*stacks_diagnosis : nullptr);
}

// Gloo retires a recorder entry only after the caller's wait() returned, so a dump taken at once
// can show a finished barrier still open. Where the dumps' hang rests on ranks waiting in a
// collective and the stacks show every rank outside torch.distributed and backward, the stacks
// contradict it: nothing waits.
void Join::overrule_open_gloo_entries() {
  if (!(in.dumps && in.stacks && in.dumps->verdict == Verdict::kHang && !in.stacks->ranks.empty() &&
        in.stacks->waiting.empty() && int(in.stacks->ranks.size()) >= in.dumps->world_size &&
        std::none_of(in.stacks->ranks.begin(), in.stacks->ranks.end(),
                     [](const RankStackView& v) { return v.where == StackWhere::kNoStack; })))
    return;
  for (auto& a : arts)
    if (a.name == "dumps") {
      a.problem = false;
      a.names.clear();
      overruled = fmt::format(
          "the dumps say {} ({}), but every rank's stack is outside torch.distributed (none "
          "waits): Gloo marks an entry done only after wait() returned, so a dump taken right "
          "after a collective can show it open",
          verdict_word(*a.d), a.d->headline);
    }
}

// The stacks' outliers locate a rank even from one snapshot, once another artifact says the job
// is stuck.
void Join::locate_with_stack_outliers() {
  for (const auto& a : arts) any_problem |= a.problem;
  for (auto& a : arts)
    if (a.name == "stacks" && any_problem && a.names.empty() && in.stacks) a.names = in.stacks->outliers;
}

void Join::agree_on_culprits() {
  for (const auto& a : arts)
    if ((a.problem || (a.name == "stacks" && any_problem)) && !a.names.empty()) naming.push_back(&a);
  for (const auto* a : naming) {
    if (culprits.empty() && a == naming.front()) {
      culprits = a->names;
      continue;
    }
    auto both = intersect(culprits, a->names);
    if (both.empty()) met = false;
    else culprits = both;
  }
  if (!met) {
    std::set<int> all;
    std::string who;
    for (const auto* a : naming) {
      all.insert(a->names.begin(), a->names.end());
      who += fmt::format("{}{} name {}", who.empty() ? "" : ", the ", a->name, joined_ranks_word(a->names));
    }
    culprits.assign(all.begin(), all.end());
    disagreements.push_back(fmt::format("the artifacts name different ranks: the {}", who));
  }
  if (!overruled.empty()) disagreements.push_back(overruled);
}

// A problem one artifact sees and another does not.
void Join::note_one_sided_problems() {
  for (const auto& a : arts)
    for (const auto& b : arts)
      if (a.problem && !b.problem && b.name != "stacks")  // stacks alone rarely convict: not a disagreement
        disagreements.push_back(fmt::format("the {} say{} {}{}, the {} say{} {}{}", a.name, a.name == "log" ? "s" : "",
                                            verdict_word(*a.d),
                                            a.names.empty() ? "" : " (" + joined_ranks_word(a.names) + ")", b.name,
                                            b.name == "log" ? "s" : "", verdict_word(*b.d),
                                            b.name == "dumps" && in.dumps_summary.find("gloo") != std::string::npos ? " (Gloo's recorder keeps no send/recv; a rank "
                                                                "blocked in one shows nothing open)"
                                                              : ""));
}

// The base diagnosis: the first problem artifact (dumps, log, stacks) whose culprits are the joined
// ones; else the first problem artifact; else the first artifact (healthy).
void Join::choose_base_diagnosis() {
  for (const auto& a : arts)
    if (a.problem && a.names == culprits && !base) base = &a;
  for (const auto& a : arts)
    if (a.problem && !base) base = &a;
  if (!base && !arts.empty()) base = &arts.front();
  d = base ? *base->d : Diagnosis{};
  if (base && !base->problem && exit_code(d) == 1) {  // the only problem was overruled above
    d.verdict = Verdict::kHealthy;
    d.kind = Kind::kNone;
    d.culprit_ranks.clear();
    d.collective.reset();
    d.detection.reset();
    d.waits.clear();
    d.headline = "NO HANG: " + overruled;
    d.explanation = "Every rank's stack is in its own code, none in a collective or in backward.";
  }
}

// Joined culprits other than the base's, or narrowed from what some artifact named: say which
// artifact named what, so the headline cites every side.
void Join::cite_naming_artifacts() {
  if (!base || !base->problem) return;
  std::string why;
  for (const auto* a : naming)
    why += fmt::format("{}the {} name{} {}", why.empty() ? "" : "; ", a->name, a->name == "log" ? "s" : "",
                       joined_ranks_word(a->names));
  if (base->names != culprits) {
    d.culprit_ranks = culprits;
    d.headline = fmt::format("{}: {}{} ({})", d.verdict == Verdict::kDesync ? "DESYNC" : d.verdict == Verdict::kCrash ? "CRASH" : "HANG",
                             met ? "" : "one of ", joined_ranks_word(culprits), why);
  } else if (met &&
             std::any_of(naming.begin(), naming.end(), [&](const Artifact* a) { return a->names != culprits; })) {
    d.headline += " (" + why + ")";
  }
}

// Each culprit's own Python frame, where the stacks have it.
void Join::add_culprit_frames() {
  if (!in.stacks || !base || !base->problem) return;
  std::string where;
  for (int r : d.culprit_ranks)
    for (const auto& v : in.stacks->ranks)
      if (v.rank == r && !v.own.empty() && d.headline.find(v.own) == std::string::npos)
        where += fmt::format("; rank {} is in {}", r, v.own);
  // Inside the headline's sentence: "...: it left one out; rank 4 is in `f` at train.py:88."
  const bool full_stop = !where.empty() && !d.headline.empty() && d.headline.back() == '.';
  if (full_stop) d.headline.pop_back();
  d.headline += where + (full_stop ? "." : "");
}

// What one artifact says of one culprit: its stack, the log's findings naming it, else its diagnosis.
std::string Join::artifact_says(const Artifact& a, int rank, bool blames) const {
  std::string says;
  if (a.name == "stacks" && in.stacks) {
    for (const auto& v : in.stacks->ranks)
      if (v.rank == rank) says = describe_rank_stack(v);
    if (says.empty()) says = "no stack of this rank";
  } else if (a.name == "log" && in.log) {
    for (const auto& f : in.log->report.findings)
      if (f.problem && std::find(f.ranks.begin(), f.ranks.end(), rank) != f.ranks.end())
        says += (says.empty() ? "" : "; ") + f.text;
    if (says.empty()) says = blames ? a.d->headline : rank_says(*a.d, rank);
  } else {
    says = blames ? a.d->headline : rank_says(*a.d, rank);
  }
  if (says.empty()) says = "says nothing of this rank";
  return says;
}

// What each artifact says of each culprit (JSON and text), and the disagreements.
JoinedVerdict Join::evidence_per_culprit() {
  if (d.world_size == 0)
    for (const auto& a : arts) d.world_size = std::max(d.world_size, a.d->world_size);
  nlohmann::json j;
  j["artifacts"] = nlohmann::json::array();
  for (const auto& a : arts)
    j["artifacts"].push_back({{"artifact", a.name},
                              {"verdict", verdict_name(a.d->verdict)},
                              {"kind", a.d->kind == Kind::kNone ? nlohmann::json(nullptr) : nlohmann::json(kind_name(a.d->kind))},
                              {"culprit_ranks", a.d->culprit_ranks},
                              {"headline", a.d->headline}});
  j["culprits"] = nlohmann::json::array();
  std::string text = "\nEvidence, per culprit:\n";
  for (int r : d.culprit_ranks) {
    nlohmann::json ev = nlohmann::json::array();
    text += fmt::format("  rank {}:\n", r);
    for (const auto& a : arts) {
      const bool blames = std::find(a.names.begin(), a.names.end(), r) != a.names.end();
      const std::string says = artifact_says(a, r, blames);
      ev.push_back({{"artifact", a.name}, {"blames", blames}, {"says", says}});
      text += fmt::format("    {} {}: {}\n", blames ? "!" : "-", a.name, says);
    }
    j["culprits"].push_back({{"rank", r}, {"evidence", ev}});
  }
  if (d.culprit_ranks.empty()) text = "\nThe artifacts:\n";
  if (d.culprit_ranks.empty())
    for (const auto& a : arts) text += fmt::format("  - {}: {}\n", a.name, a.d->headline);
  for (const auto& s : disagreements) text += "  disagreement: " + s + "\n";
  j["disagreements"] = disagreements;
  if (!disagreements.empty()) d.explanation += " The artifacts disagree: " + disagreements.front() + ".";
  JoinedVerdict out;
  out.diagnosis = std::move(d);
  out.joined = std::move(j);
  out.text = std::move(text);
  return out;
}

}  // namespace

JoinedVerdict join_verdicts(const JoinInputs& in) {
  Join join(in);
  join.collect_artifacts();
  join.overrule_open_gloo_entries();
  join.locate_with_stack_outliers();
  join.agree_on_culprits();
  join.note_one_sided_problems();
  join.choose_base_diagnosis();
  join.cite_naming_artifacts();
  join.add_culprit_frames();
  return join.evidence_per_culprit();
}

}  // namespace rankscope::analyzers::hang
