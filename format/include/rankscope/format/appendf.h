// appendf.h — printf into the end of a std::string.
//
// Is: the one helper the text reports share where their columns are printf's formats ("%8.4f",
// "%-28s"): a report built as a string prints exactly what the same fprintf calls printed. Is not: a
// formatting library (fmt is that); new text with no printf heritage uses fmt::format.
#pragma once

#include <string>

namespace rankscope::format {

[[gnu::format(printf, 2, 3)]] void appendf(std::string& out, const char* format, ...);

}  // namespace rankscope::format
