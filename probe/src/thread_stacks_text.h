// thread_stacks_text.h — in-process stacks written as text in eu-stack's shape.
//
// Is: "PID n - process", then per thread "TID n:" and frames "#0  0x<pc> <function> - <module>"
// (with source lines "    file:line:col" beneath when asked for), exactly as `eu-stack -m [-s]`
// prints them, so hangdoctor and the analyzers read one format whoever wrote it. Additions are
// comment lines only ("# name: ...", "# no stack: ..."). Is not: the capture or the symbol lookup.
#pragma once

#include <string>

#include "symbolizer.h"
#include "thread_stacks.h"

namespace rankscope::probe {

std::string thread_stacks_text(const OwnThreadStacks& stacks, Symbolizer& symbolizer, bool with_source,
                               double answer_limit_s);

}  // namespace rankscope::probe
