// gather_wording.h — what a gather record says, in the words hangdoctor and `rankscope gather` print.
//
// Is: the headline ("4 of 4 nodes answered in 0.41 s (12.3 MB)") that is the first line of a
// diagnosis of a gathered run, and one finding per node that did not answer, with the ranks it
// held. Is not: the gathering (gather/) or the record's format (format/gathered_run.h).
#pragma once

#include <string>
#include <vector>

#include "rankscope/format/gathered_run.h"

namespace rankscope::analyzers::hang {

std::string gather_headline(const format::GatherRecord& record);
// "node n4 is unreachable (no answer within the 20.0 s deadline): its ranks 12-15 are unseen", one
// per reason: nodes silent for the same reason are one finding ("32 nodes are unreachable (...),
// n[00096-00127]: their ranks 768-1023 are unseen"); then one line for ranks nobody sent that no
// node can be blamed for, and the merge's problems.
std::vector<std::string> gather_findings(const format::GatherRecord& record);
// "n[00012-00043],login1": a list of host names as Slurm compresses node lists.
std::string compress_hosts(const std::vector<std::string>& hosts);

}  // namespace rankscope::analyzers::hang
