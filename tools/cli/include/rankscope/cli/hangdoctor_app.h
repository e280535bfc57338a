// hangdoctor_app.h — the hangdoctor command line, as a function the thin main (and tests) call.
//
// Is: argument parsing, the --wait loop, the classifier, --stacks, and the outputs; exit codes 0
// healthy or finished, 1 a problem found, 2 bad input (unknown flag, not a run directory, nothing
// readable). Dependencies on the machine come in through HangdoctorEnv so tests can fake them.
// Is not: the reasoning (classifier.h).
#pragma once

#include <cstdio>
#include <functional>
#include <span>
#include <string_view>

#include "rankscope/analyzers/hang/process_table.h"
#include "rankscope/analyzers/hang/stack_capture.h"
#include "rankscope/format/option_table.h"

namespace rankscope::cli {

struct HangdoctorEnv {
  analyzers::hang::ProcessTable* processes = nullptr;  // null: the system's
  analyzers::hang::StackCollector* stacks = nullptr;   // null: eu-stack / gdb
  std::FILE* out = stdout;
  std::FILE* err = stderr;
  // Called once the text report of a run directory or of dumps is written, before the JSON is
  // rendered. Tests throw from it to see the exception boundary keep what was already printed.
  std::function<void()> after_text_report;
};

int run_hangdoctor(std::span<const std::string_view> args, const HangdoctorEnv& env = {});

// hangdoctor's own options (not the gathering ones, gather_cli.h): what run_hangdoctor parses and
// its --help lists.
std::span<const format::Option> hangdoctor_options();

}  // namespace rankscope::cli
