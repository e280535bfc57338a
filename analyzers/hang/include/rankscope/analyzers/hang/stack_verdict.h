// stack_verdict.h — what every rank's Python stacks say: where each rank is, in its own code.
//
// Is: per rank, the main thread of its latest snapshot reduced to
//   - its own frame: the innermost frame outside torch, the standard library and site-packages
//     ("`stage_forward` at train.py:88"), and the library call it is in ("`all_reduce`
//     (torch/distributed/distributed_c10d.py:2950)");
//   - where it is: in a torch.distributed call (a collective, a send/recv, a pipelining schedule's
//     wait), in backward (the autograd engine, where DDP's and FSDP's gradient reductions wait), in a
//     DataLoader's next(), or elsewhere (compute, a sleep, I/O);
//   - whether it moved between its first and last snapshot;
// then ranks with identical stacks collapsed into groups, and the outliers: ranks elsewhere (or in a
// DataLoader) while the others wait in torch.distributed or backward, else ranks waiting in another
// torch.distributed call than most. Alone, stacks make a verdict only when every rank has two
// snapshots or more and the outliers did not move (one snapshot cannot tell a stuck rank from a busy
// one). Is not: reading the files (importers/stacks), the joined verdict (joined_verdict.h).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rankscope/analyzers/hang/diagnosis.h"
#include "rankscope/stacks/stack_import.h"

namespace rankscope::analyzers::hang {

enum class StackWhere { kCollective, kBackward, kDataLoader, kElsewhere, kNoStack };
std::string_view stack_where_name(StackWhere w);  // collective | backward | dataloader | elsewhere | no_stack

struct RankStackView {
  int rank = 0;
  StackWhere where = StackWhere::kNoStack;
  std::string own;        // "`stage_forward` at torch_job.py:288" ("" when every frame is a library's)
  std::string call;       // the torch.distributed (or library) call it is in: "`all_reduce` (torch/...:2950)"
  std::string signature;  // the whole main-thread stack, for collapsing identical ones
  int snapshots = 0;
  bool moved = false;     // first and last snapshot differ
  std::string thread;     // the thread read ("MainThread", or the one whose outermost frame is <module>)
};

struct StackSummary {
  std::vector<RankStackView> ranks;  // by rank
  struct Group {
    std::vector<int> ranks;
    std::string what;  // "in `all_reduce` (...) from `train_step` at train.py:60"
  };
  std::vector<Group> groups;    // identical stacks, largest first
  std::vector<int> outliers;    // as in the header: the suspects the stacks name
  std::vector<int> waiting;     // ranks in torch.distributed or backward
  bool outliers_still = false;  // every outlier had 2+ snapshots and did not move
  int min_snapshots = 0;
  std::string summary;
  std::vector<std::string> problems;      // the importer's
  std::vector<std::string> server_files;  // the debug server's other files, one line a kind
};

StackSummary summarize_stacks(const stacks::StackImport& in);

// The verdict of stacks alone (see the header).
Diagnosis diagnose_stacks(const StackSummary& s);

// "rank 2 is in `stage_forward` at torch_job.py:288 (elsewhere: not in a torch.distributed call;
// unmoved over 2 snapshots)".
std::string describe_rank_stack(const RankStackView& v);

// The text section ("Stacks: ..." groups, outliers, the server's files) and its JSON object.
std::string render_stack_text(const StackSummary& s);
nlohmann::json stack_json(const StackSummary& s);

}  // namespace rankscope::analyzers::hang
