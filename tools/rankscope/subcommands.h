// subcommands.h — the subcommands of the `rankscope` CLI, one file each.
//
// Each takes the arguments after its name and returns the process exit code (0 ok, 1 a problem
// was found, 2 bad input). Each prints its own --help.
#pragma once

#include <span>
#include <string_view>

namespace rankscope::cli {

using Args = std::span<const std::string_view>;

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

}  // namespace rankscope::cli
