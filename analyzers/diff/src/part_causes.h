// part_causes.h — why a waterfall part changed, as one phrase for the report: the range under a
// compute part that changed most (and the one rank that carries it), the straggler under collective
// wait (new, or its role's and costlier), the sites, bytes or bandwidth under collective transfer,
// the host under idle. Is: rules on two runs' parts and skew reports. Is not: the waterfall itself
// (run_parts.h) nor the matching of ranks (rank_roles.h). Each returns "" where it finds no cause.
#pragma once

#include <string>
#include <vector>

#include "rankscope/analyzers/diff/run_diff.h"
#include "rankscope/analyzers/skew/skew_report.h"
#include "rank_roles.h"
#include "run_parts.h"

namespace rankscope::analyzers::diff_detail {

// The range under top-level range `top` whose compute changed most, with its ratio; by_rank: and
// the rank that carries the growth where one does.
std::string range_cause(const RunParts& a, const RunParts& b, const std::string& top, double part_delta, bool by_rank);
std::string straggler_cause(const SkewReport& a, const SkewReport& b, const RoleMatch& roles);
std::string transfer_cause(const RunParts& a, const RunParts& b, double base_ms, double new_ms);
std::string idle_cause(const RunParts& a, const RunParts& b, double delta);

// Each role's mean step in both runs, largest change first.
std::vector<RoleDiff> role_diffs(const SkewReport& a, const SkewReport& b, const RoleMatch& roles);

}  // namespace rankscope::analyzers::diff_detail
