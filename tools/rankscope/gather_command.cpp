// gather_command.cpp — `rankscope snapshot`, `gather` and `kineto-pack`: thin over gather_cli.h.
#include "rankscope/cli/gather_cli.h"
#include "subcommands.h"

namespace rankscope::cli {

int snapshot_command(Args args) { return rankscope::cli::snapshot_main(args); }
int gather_command(Args args) { return rankscope::cli::gather_main(args); }
int kineto_pack_command(Args args) { return rankscope::cli::kineto_pack_main(args); }

}  // namespace rankscope::cli
