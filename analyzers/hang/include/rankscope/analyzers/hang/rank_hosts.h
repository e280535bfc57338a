// rank_hosts.h — ranks named with their hosts in sentences: "rank 9 on n3", "ranks 0-3 (n1), 4-7
// (n2)" (rank_hosts.cpp). Public: hangdoctor's command names the culprits in its HTML page's title.
// Is not: any decision about which ranks to name.
#pragma once

#include <string>
#include <vector>

#include "rankscope/analyzers/hang/diagnosis.h"

namespace rankscope::analyzers::hang {

// "0-3 (n1), 4-7 (n2)" or "12-15 on n4" (with more than one host; "0-7" with one): a rank list
// whose every rank carries its host; who() adds "rank"/"ranks" in front.
std::string ranks_on_hosts(const Diagnosis& d, const std::vector<int>& ranks);
std::string who(const Diagnosis& d, const std::vector<int>& ranks);
// Distinct non-empty hosts among the reports.
int count_hosts(const std::vector<RankReport>& ranks);

}  // namespace rankscope::analyzers::hang
