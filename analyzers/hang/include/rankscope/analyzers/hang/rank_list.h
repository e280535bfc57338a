// rank_list.h — hangdoctor's name for format::compress_ranks (format/rank_list.h), where the
// function now lives so that every report spells rank lists alike.
#pragma once

#include "rankscope/format/rank_list.h"

namespace rankscope::analyzers::hang {

using format::compress_ranks;

}  // namespace rankscope::analyzers::hang
