// option_values.h — a number given as an option's value ("--last 4", "--threads 8"), read as the
// subcommands have always read them: std::from_chars over the whole text, and a lower bound.
//
// Is: number_at_least(). Is not: what a command says when a value is refused (each command keeps its
// own words: "--rank takes a rank number, not 'x'"), nor --warmup-steps (diff reads it with strtol,
// which also takes "+5" and " 5").
#pragma once

#include <charconv>
#include <limits>
#include <optional>
#include <string_view>

namespace rankscope::cli {

// `text`, the whole of it, as a T (from_chars: digits, a '-' for signed types, no '+' or spaces; a
// floating-point T also takes "inf"), at least `min`; nullopt when it is not one, is too large for T,
// or is below `min` (NaN is below everything).
template <class T>
std::optional<T> number_at_least(std::string_view text, T min = std::numeric_limits<T>::lowest()) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !(value >= min)) return std::nullopt;
  return value;
}

}  // namespace rankscope::cli
