// rank_list.h — compact rank lists for sentences: {0,2,3,4,5,6,7} -> "0,2-7"; strided runs of
// four or more (a DP group) -> "1,3,...,1023". One spelling for every report (hangdoctor, skew,
// critical path), so the same ranks read the same everywhere.
#pragma once

#include <string>
#include <vector>

namespace rankscope::format {

// Sorts and de-duplicates a copy of `ranks`; consecutive runs of three or more become "a-b",
// runs of four or more with a larger constant stride "a,a+s,...,b".
std::string compress_ranks(std::vector<int> ranks);

}  // namespace rankscope::format
