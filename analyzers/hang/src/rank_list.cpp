// rank_list.cpp — "0,2-7" rank lists.
#include "rankscope/analyzers/hang/rank_list.h"

#include <algorithm>

#include <fmt/format.h>

namespace rankscope::hang {

std::string compress_ranks(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    if (j - i >= 2) {
      out += fmt::format("{}-{}", ranks[i], ranks[j]);
    } else {
      for (size_t k = i; k <= j; ++k) out += fmt::format("{}{}", k == i ? "" : ",", ranks[k]);
    }
    i = j + 1;
  }
  return out;
}

}  // namespace rankscope::hang
