// rank_list.h — compact rank lists for sentences: {0,2,3,4,5,6,7} -> "0,2-7".
#pragma once

#include <string>
#include <vector>

namespace rankscope::hang {

// Sorts and de-duplicates a copy of `ranks`; consecutive runs of three or more become "a-b".
std::string compress_ranks(std::vector<int> ranks);

}  // namespace rankscope::hang
