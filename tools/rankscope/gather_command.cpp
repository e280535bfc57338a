// gather_command.cpp — `rankscope snapshot` and `rankscope gather`: thin over gather_cli.h.
#include "rankscope/analyzers/gather/gather_cli.h"
#include "subcommands.h"

namespace rankscope::cli {

int snapshot_command(Args args) { return gather::snapshot_main(args); }
int gather_command(Args args) { return gather::gather_main(args); }

}  // namespace rankscope::cli
