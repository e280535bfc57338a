// log_line.cpp — splits a log line into producer, place and message (log_line.h).
#include "log_line.h"

#include <algorithm>
#include <cctype>

namespace rankscope::logs {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// "[rank3]:", "[default3]:", "[trainer12]:" at the start of `s`: the name and the number.
bool take_bracket_tag(std::string_view& s, std::string_view& name, int& number) {
  if (s.size() < 4 || s[0] != '[') return false;
  size_t i = 1;
  while (i < s.size() && (std::isalpha(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
  const size_t digits = i;
  while (i < s.size() && is_digit(s[i])) ++i;
  if (i == digits || i - digits > 7 || i + 1 >= s.size() || s[i] != ']' || s[i + 1] != ':') return false;
  name = s.substr(1, digits - 1);
  number = 0;
  for (size_t k = digits; k < i; ++k) number = number * 10 + (s[k] - '0');
  s.remove_prefix(i + 2);
  return true;
}

// srun --label: "3: " or "  3: " (right-aligned) at the start of `s`.
bool take_srun_label(std::string_view& s, int& number) {
  size_t i = 0;
  while (i < s.size() && i < 8 && s[i] == ' ') ++i;
  const size_t digits = i;
  while (i < s.size() && is_digit(s[i])) ++i;
  if (i == digits || i - digits > 7 || i + 1 >= s.size() || s[i] != ':' || s[i + 1] != ' ') return false;
  number = 0;
  for (size_t k = digits; k < i; ++k) number = number * 10 + (s[k] - '0');
  s.remove_prefix(i + 2);
  return true;
}

char nccl_level(std::string_view word) {
  if (word.starts_with("INFO")) return 'I';
  if (word.starts_with("WARN")) return 'W';
  if (word.starts_with("ABORT")) return 'A';
  if (word.starts_with("TRACE")) return 'T';
  if (word.starts_with("CALL")) return 'C';
  return 0;
}

// "<host>:<pid>:<tid>": the pid and tid decimal.
bool split_place(std::string_view place, LogLine& out) {
  const size_t c2 = place.rfind(':');
  if (c2 == std::string_view::npos || c2 == 0) return false;
  const size_t c1 = place.rfind(':', c2 - 1);
  if (c1 == std::string_view::npos || c1 == 0) return false;
  std::string_view pid_text = place.substr(c1 + 1, c2 - c1 - 1), tid_text = place.substr(c2 + 1);
  long long pid = 0, tid = 0;
  if (!take_number(pid_text, pid) || !pid_text.empty() || !take_number(tid_text, tid) || !tid_text.empty()) return false;
  out.host = place.substr(0, c1);
  out.pid = int(pid);
  out.tid = int(tid);
  return true;
}

// NCCL's prefix (debug.cc) anywhere in `s`, in every shape it has had:
//   "<host>:<pid>:<tid> [<dev>] NCCL INFO <msg>"
//   "<host>:<pid>:<tid> [<dev>] <file>:<line> [(<func>)] NCCL WARN <msg>"   (WARN carries its call site)
//   "<host>:<pid>:<tid> [<dev>] <ms>.<us> <func>:<line> NCCL TRACE <msg>"
//   "<host>:<pid>:<tid> NCCL CALL <call>"                                   (no device)
// with anything in front (a timestamp from 2.26, a launcher's prefix, another process's glued line).
// The words between the place and "NCCL" are walked back over, at most four.
// `first`: where "NCCL " first occurs in `s`.
bool split_nccl(std::string_view s, size_t first, LogLine& out) {
  for (size_t at = first; at != std::string_view::npos; at = s.find("NCCL ", at + 1)) {
    if (at < 2 || s[at - 1] != ' ') continue;
    const std::string_view after = s.substr(at + 5);
    const char level = nccl_level(after);
    if (!level) continue;
    int device = -1;
    bool placed = false;
    size_t word_end = at - 1;  // the space before "NCCL"
    for (int words = 0; words < 5 && word_end > 0 && !placed; ++words) {
      size_t word_begin = s.rfind(' ', word_end - 1);
      word_begin = word_begin == std::string_view::npos ? 0 : word_begin + 1;
      const std::string_view word = s.substr(word_begin, word_end - word_begin);
      if (word.size() >= 3 && word.front() == '[' && word.back() == ']') {
        std::string_view digits = word.substr(1, word.size() - 2);
        long long d = 0;
        if (take_number(digits, d) && digits.empty()) device = int(d);
      } else if (std::count(word.begin(), word.end(), ':') >= 2 && split_place(word, out)) {
        placed = true;
        break;
      } else if (word.find(':') != std::string_view::npos && word.find('.') != std::string_view::npos) {
        out.source = word;  // a WARN's call site: "transport/net_ib.cc:1295", "ras/client_support.cc:160"
      }
      if (word_begin == 0) break;
      word_end = word_begin - 1;
    }
    if (!placed) continue;
    out.producer = Producer::kNccl;
    out.device = device;
    out.level = level;
    const size_t space = after.find(' ');
    out.message = space == std::string_view::npos ? std::string_view() : after.substr(space + 1);
    return true;
  }
  return false;
}

// c10's "[E1127 03:04:05.123456 12345 ProcessGroupNCCL.cpp:632] " or "[E ProcessGroupNCCL.cpp:455] "
// at the start of `s`.
bool split_torch(std::string_view s, LogLine& out) {
  if (s.size() < 8 || s[0] != '[' || (s[1] != 'E' && s[1] != 'W' && s[1] != 'I' && s[1] != 'F')) return false;
  const size_t close = s.find(']');
  if (close == std::string_view::npos || close > 96) return false;
  std::string_view inside = s.substr(2, close - 2);
  while (!inside.empty() && inside.front() == ' ') inside.remove_prefix(1);  // 1.x: "[E file.cpp:455]"
  if (inside.empty()) return false;
  // The last token is "<file>.<ext>:<line>".
  const size_t space = inside.rfind(' ');
  const std::string_view where = space == std::string_view::npos ? inside : inside.substr(space + 1);
  const size_t colon = where.rfind(':');
  if (colon == std::string_view::npos || where.find('.') == std::string_view::npos || colon + 1 >= where.size())
    return false;
  for (char c : where.substr(colon + 1))
    if (!is_digit(c)) return false;
  // What precedes it: nothing (1.x) or "MMDD hh:mm:ss.micros tid".
  if (space != std::string_view::npos && !(is_digit(inside[0]) && inside.size() > 4)) return false;
  out.producer = Producer::kTorch;
  out.level = s[1];
  out.source = where;
  s.remove_prefix(close + 1);
  if (!s.empty() && s[0] == ' ') s.remove_prefix(1);
  out.message = s;
  return true;
}

}  // namespace

bool take_number(std::string_view& s, long long& out, bool hex) {
  size_t i = 0;
  if (hex && s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) i = 2;
  const size_t begin = i;
  unsigned long long v = 0;
  bool neg = false;
  if (!hex && i < s.size() && s[i] == '-') {
    neg = true;
    ++i;
  }
  const size_t first_digit = i;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    int d;
    if (is_digit(c)) d = c - '0';
    else if (hex && c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (hex && c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else break;
    if (i - first_digit >= 18) return false;  // too long to be a count: not a number we read
    v = v * (hex ? 16 : 10) + unsigned(d);
  }
  if (i == first_digit) return false;
  (void)begin;
  out = neg ? -(long long)v : (long long)v;
  s.remove_prefix(i);
  return true;
}

std::string_view value_after(std::string_view s, std::string_view key) {
  size_t at = 0;
  while ((at = s.find(key, at)) != std::string_view::npos) {
    // A key matches at a word's start only ("count" is not "opCount").
    const bool at_word = at == 0 || !std::isalnum(static_cast<unsigned char>(s[at - 1]));
    size_t v = at + key.size();
    const bool whole = !std::isalnum(static_cast<unsigned char>(key.back())) || v >= s.size() ||
                       !std::isalnum(static_cast<unsigned char>(s[v]));  // "op" is not the start of "opCount"
    if (!at_word || !whole) {
      at = v;
      continue;
    }
    while (v < s.size() && s[v] == ' ') ++v;
    size_t end = v;
    while (end < s.size() && s[end] != ' ' && s[end] != ',' && s[end] != ')' && s[end] != ']') ++end;
    return s.substr(v, end - v);
  }
  return {};
}

bool number_after(std::string_view s, std::string_view key, long long& out, bool hex) {
  std::string_view v = value_after(s, key);
  return !v.empty() && take_number(v, out, hex);
}

LogLine split_log_line(std::string_view line) {
  LogLine out;
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  for (int i = 0; i < 3; ++i) {
    std::string_view name;
    int number = 0;
    if (take_bracket_tag(line, name, number)) {
      if (name == "rank") out.tagged_rank = number;
      else out.tagged_local_rank = number;
    } else if (out.tagged_rank < 0 && i == 0 && take_srun_label(line, number)) {
      out.tagged_rank = number;
    } else {
      break;
    }
  }
  if (out.tagged_rank < 0) {
    // Other prefixes in front of c10's rank tag ("vm:2: [rank2]: ", a custom --log-line-prefix-template).
    const size_t at = line.substr(0, 80).find("[rank");
    std::string_view rest = at == std::string_view::npos ? std::string_view() : line.substr(at);
    std::string_view name;
    int number = 0;
    if (!rest.empty() && take_bracket_tag(rest, name, number) && name == "rank") {
      out.tagged_rank = number;
      line = rest;
      if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    }
  }
  out.message = line;
  if (split_torch(line, out)) return out;
  // NCCL's lines hold "NCCL " by definition: most lines of a log are looked at no further.
  if (const size_t at = line.find("NCCL "); at != std::string_view::npos) split_nccl(line, at, out);
  return out;
}

}  // namespace rankscope::logs
