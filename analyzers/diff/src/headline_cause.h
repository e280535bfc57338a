// headline_cause.h — what the diff's first line names: the deepest cause that carries most of the
// change, the way a person would act on it.
//
// Three kinds of candidate, the largest in the step's direction wins, a deeper one when it carries
// nearly as much: a waterfall part ("compute in backward"); communication as a whole (wait and
// transfer moved together: more calls, more bytes, a slower link); and one kind of work across the
// parts: the leaf ranges with the same last name under forward, backward and the rest
// ("[attention]" of the framework's ops, or the job's own "block*/attn"), summed. So a 4x longer
// sequence reads "attention, backward and forward (+94.4 ms, 52% of the +182.2 ms: ...)", not
// "compute in backward". Is not: the parts or their causes (run_diff.cpp, part_causes.h).
#pragma once

#include <string>
#include <vector>

#include "rankscope/analyzers/diff/run_diff.h"
#include "run_parts.h"

namespace rankscope::analyzers::diff_detail {

struct HeadlineCause {
  std::string name;    // "compute in backward", "communication", "attention, backward and forward"
  double delta_ms = 0;
  std::string detail;  // what the headline adds after the delta ("" when nothing)
  std::string joiner = ": ";  // between the delta and the detail (", " before a share: "+94 ms, 52% of ...")
};

// `parts` sorted largest first; `step_delta` the mean step's change; `attention_factor` what the
// sequence length predicts for attention (0 when the lengths are not known).
HeadlineCause headline_cause(const RunParts& a, const RunParts& b, const std::vector<DiffPart>& parts, double step_delta,
                             double attention_factor);

}  // namespace rankscope::analyzers::diff_detail
