// gather_command.cpp — `rankscope snapshot`, `gather` and `kineto-pack`: thin over gather_cli.h.
#include "rankscope/gather/gather_cli.h"
#include "subcommands.h"

namespace rankscope::cli {

int snapshot_command(Args args) { return gather::snapshot_main(args); }
int gather_command(Args args) { return gather::gather_main(args); }
int kineto_pack_command(Args args) { return gather::kineto_pack_main(args); }

}  // namespace rankscope::cli
