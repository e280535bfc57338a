// json_text.h — the text of a JSON value whose strings may hold bytes that are not UTF-8.
//
// Is: how rankscope turns JSON into text it writes to a file or prints. Its strings come from files
// other programs wrote (names in an nsys export, a profiler trace cut inside a character, a parser's
// error quoting raw bytes); nlohmann's plain dump() throws type_error.316 on such a byte, and an
// exception nobody catches is an abort in the middle of an incident. Here each invalid byte becomes
// U+FFFD and the rest is written as it is.
// Is not: a validator; the text does not say where bytes were replaced.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace rankscope::format {

// dump(indent) that replaces invalid UTF-8 instead of throwing; indent -1 is the compact form.
inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace rankscope::format
