// thread_stacks_text.cpp — renders OwnThreadStacks like `eu-stack -m [-s]`; each distinct address
// is looked up once (many threads share their outer frames).
#include "thread_stacks_text.h"

#include <unordered_map>

#include <fmt/format.h>

namespace rankscope::probe {

std::string thread_stacks_text(const OwnThreadStacks& stacks, Symbolizer& symbolizer, bool with_source,
                               double answer_limit_s) {
  std::unordered_map<uintptr_t, FrameSymbol> known;
  std::string out = fmt::format("PID {} - process\n", stacks.pid);
  for (const ThreadStack& thread : stacks.threads) {
    out += fmt::format("TID {}:\n", thread.tid);
    if (!thread.name.empty() || thread.is_caller)
      out += fmt::format("# name: {}{}\n", thread.name, thread.is_caller ? " (this thread took the capture)" : "");
    if (thread.outcome != ThreadStackOutcome::kCaptured) {
      out += fmt::format("# no stack: {}", thread_stack_outcome_text(thread.outcome));
      if (thread.outcome == ThreadStackOutcome::kNoAnswer) out += fmt::format(" ({:.1f} s)", answer_limit_s);
      out += '\n';
      continue;
    }
    for (size_t i = 0; i < thread.frames.size(); ++i) {
      const uintptr_t pc = thread.frames[i];
      // A return address points after the call; the call itself (and its line) is one byte back.
      const uintptr_t lookup = (i == 0 && thread.first_is_exact) ? pc : pc - 1;
      auto it = known.find(lookup);
      if (it == known.end()) it = known.emplace(lookup, symbolizer.symbolize(lookup, with_source)).first;
      const FrameSymbol& sym = it->second;
      out += fmt::format("#{:<2} 0x{:016x}", i, pc);
      if (!sym.function.empty()) out += ' ' + sym.function;
      if (!sym.module.empty()) out += " - " + sym.module;
      out += '\n';
      if (with_source && !sym.source.empty()) out += fmt::format("    {}\n", sym.source);
    }
  }
  return out;
}

}  // namespace rankscope::probe
