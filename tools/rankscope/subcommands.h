// subcommands.h — the subcommands of the `rankscope` CLI, one file each.
//
// Each takes the arguments after its name and returns the process exit code (0 ok, 1 a problem
// was found, 2 bad input). Each prints its own --help. Each declares its command line once, in its
// option table (format/option_table.h), which <name>_options() gives to main's exception boundary:
// the values of its value flags are not the input a failure names.
#pragma once

#include <span>
#include <string_view>

#include "rankscope/format/option_table.h"

namespace rankscope::cli {

using Args = std::span<const std::string_view>;
using OptionTable = std::span<const format::Option>;

int inspect_command(Args args);   // inspect_command.cpp
int synth_command(Args args);     // synth_command.cpp
int skew_command(Args args);      // skew_command.cpp
int scaling_command(Args args);   // scaling_command.cpp
int export_command(Args args);    // export_command.cpp
int startup_command(Args args);   // startup_command.cpp
int diff_command(Args args);      // diff_command.cpp
int import_nsys_command(Args args);  // import_nsys_command.cpp
int import_kineto_command(Args args);  // import_kineto_command.cpp
int snapshot_command(Args args);  // gather_command.cpp
int gather_command(Args args);    // gather_command.cpp
int kineto_pack_command(Args args);  // gather_command.cpp
int kernels_command(Args args);   // kernels_command.cpp
int critical_path_command(Args args);  // critical_path_command.cpp

OptionTable inspect_options();
OptionTable synth_options();
OptionTable skew_options();
OptionTable scaling_options();
OptionTable export_options();
OptionTable startup_options();
OptionTable diff_options();
OptionTable import_nsys_options();
OptionTable import_kineto_options();
OptionTable snapshot_options();     // gather_cli.h (gather_cli.cpp)
OptionTable gather_options();       // gather_cli.h (gather_cli.cpp)
OptionTable kineto_pack_options();  // gather_cli.h (gather_cli.cpp)
OptionTable kernels_options();
OptionTable critical_path_options();

}  // namespace rankscope::cli
