// rank_list.cpp — "0,2-7" rank lists; long strided runs (DP groups) as "1,3,...,1023".
#include "rankscope/format/rank_list.h"

#include <algorithm>

#include <fmt/format.h>

namespace rankscope::format {

std::string compress_ranks(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  auto append = [&](const std::string& s) { out += (out.empty() ? "" : ",") + s; };
  for (size_t i = 0; i < ranks.size();) {
    // Longest run of constant stride starting at i.
    size_t j = i;
    const int stride = i + 1 < ranks.size() ? ranks[i + 1] - ranks[i] : 1;
    while (j + 1 < ranks.size() && ranks[j + 1] - ranks[j] == stride) ++j;
    const size_t len = j - i + 1;
    if (stride == 1 && len >= 3) {
      append(fmt::format("{}-{}", ranks[i], ranks[j]));
      i = j + 1;
    } else if (stride > 1 && len >= 4) {
      append(fmt::format("{},{},...,{}", ranks[i], ranks[i + 1], ranks[j]));
      i = j + 1;
    } else {
      append(std::to_string(ranks[i]));
      ++i;
    }
  }
  return out;
}

}  // namespace rankscope::format
